//! Admin actions over the job queue (`artemis-transfer admin …`): list, requeue, cancel, rescue, prune; and an
//! operator's change of a setting (`artemis-transfer settings set`).
//!
//! Each one leaves an `audit` row saying who did what to what, when, and with what outcome — refusals and
//! failures included (written after the action's own transaction rolled back).

use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;

use crate::jobs::error::{DbContext, Error};
use crate::jobs::lease::end_run_and_release;
use crate::jobs::model::{JobId, JobRow, JobState, RunId, RunState};
use crate::jobs::prune::{self, Pruned, WhenBusy};
use crate::jobs::settings::{self, Changed};
use crate::jobs::store::{job as jobs, record, run as runs};

/// Who acts (an operator's name, `user@host` by default on the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor(pub String);

impl std::fmt::Display for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What `admin requeue` applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequeueTarget {
    /// The run's latest job.
    Run(RunId),
    /// That job.
    Job(JobId),
}

impl std::str::FromStr for RequeueTarget {
    type Err = String;
    /// A run id (a UUID) or a job id (a number).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(run) = s.parse::<RunId>() {
            return Ok(RequeueTarget::Run(run));
        }
        s.parse::<i64>()
            .map(|id| RequeueTarget::Job(JobId(id)))
            .map_err(|_| format!("{s:?} is neither a run id (UUID) nor a job id (number)"))
    }
}

impl std::fmt::Display for RequeueTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequeueTarget::Run(run) => write!(f, "run {run}"),
            RequeueTarget::Job(job) => write!(f, "job {job}"),
        }
    }
}

/// What `admin cancel` did.
#[derive(Debug, Clone, Serialize)]
pub struct Cancelled {
    /// The live job it cancelled, if the run had one.
    pub job: Option<JobId>,
}

/// Lists jobs, newest first (`--state`, `--run`, at most `limit`).
pub async fn list_jobs(
    pool: &PgPool,
    actor: &Actor,
    state: Option<JobState>,
    run: Option<RunId>,
    limit: i64,
) -> Result<Vec<JobRow>, Error> {
    let result = jobs::job_list(pool, state, run, limit).await;
    let detail = json!({ "state": state, "run": run, "limit": limit, "rows": result.as_ref().map(Vec::len).ok() });
    audited(pool, actor, "jobs.list", "jobs", detail, result).await
}

/// Makes a job pending and due now with a fresh attempt budget; an ended run is Queued again.
pub async fn requeue(pool: &PgPool, actor: &Actor, target: RequeueTarget) -> Result<JobRow, Error> {
    let result = requeue_tx(pool, actor, target).await;
    let detail =
        json!({ "job_id": result.as_ref().ok().map(|j| j.id), "run_id": result.as_ref().ok().map(|j| j.run_id) });
    audited(pool, actor, "jobs.requeue", &target.to_string(), detail, result).await
}

async fn requeue_tx(pool: &PgPool, actor: &Actor, target: RequeueTarget) -> Result<JobRow, Error> {
    let mut tx = pool.begin().await.db("begin")?;
    let run = match target {
        RequeueTarget::Run(run) => run,
        RequeueTarget::Job(job) => jobs::job_get(&mut *tx, job).await?.ok_or(Error::JobNotFound(job))?.run_id,
    };
    let row = runs::run_lock(&mut *tx, run).await?.ok_or(Error::RunNotFound(run))?;
    let job = match target {
        RequeueTarget::Job(job) => jobs::job_get(&mut *tx, job).await?.ok_or(Error::JobNotFound(job))?,
        RequeueTarget::Run(_) => jobs::job_last_for_run(&mut *tx, run).await?.ok_or_else(|| Error::RunState {
            run,
            state: row.state,
            action: "requeue (it has no job)",
        })?,
    };
    match job.state {
        JobState::Running => {
            return Err(Error::JobRefused {
                job: job.id,
                reason: format!(
                    "it is running (lease held by {}); rescue its worker instead",
                    job.lease_owner.as_deref().unwrap_or("?")
                ),
            })
        }
        JobState::Completed => {
            return Err(Error::JobRefused {
                job: job.id,
                reason: "it completed; only a failed, cancelled or pending job is requeued".into(),
            })
        }
        JobState::Failed | JobState::Cancelled | JobState::Pending => {}
    }
    if let Some(live) = jobs::job_live_for_run(&mut *tx, run).await? {
        if live.id != job.id {
            return Err(Error::JobRefused {
                job: job.id,
                reason: format!("its run already has a live job ({})", live.id),
            });
        }
    }
    let requeued = jobs::job_requeue(&mut *tx, job.id)
        .await?
        .ok_or_else(|| Error::JobRefused { job: job.id, reason: "it changed state meanwhile".into() })?;
    if row.state.is_ended() || row.state == RunState::Previewed {
        runs::run_queue(&mut *tx, run, None).await?;
    }
    jobs::job_notify_due(&mut *tx, requeued.run_at).await?;
    record::run_event_insert(&mut *tx, run, "requeued", &json!({ "by": actor.0, "job_id": job.id, "was": job.state }))
        .await?;
    tx.commit().await.db("commit")?;
    Ok(requeued)
}

/// Cancels a run: its live job is cancelled (a running one loses its lease, so its worker's commit fails),
/// the run is Stopped ("cancelled by …") and its slot released.
pub async fn cancel(pool: &PgPool, actor: &Actor, run: RunId) -> Result<Cancelled, Error> {
    let result = cancel_tx(pool, actor, run).await;
    let detail = json!({ "job_id": result.as_ref().ok().and_then(|c| c.job) });
    audited(pool, actor, "runs.cancel", &format!("run {run}"), detail, result).await
}

async fn cancel_tx(pool: &PgPool, actor: &Actor, run: RunId) -> Result<Cancelled, Error> {
    let mut tx = pool.begin().await.db("begin")?;
    let row = runs::run_lock(&mut *tx, run).await?.ok_or(Error::RunNotFound(run))?;
    if row.state.is_ended() {
        return Err(Error::RunState { run, state: row.state, action: "cancel (it has ended)" });
    }
    let reason = format!("cancelled by {actor}");
    runs::run_request_stop(&mut *tx, run, &reason).await?;
    let job = jobs::job_cancel_live(&mut *tx, run, &reason).await?;
    end_run_and_release(&mut tx, run, RunState::Stopped, None, Some(&reason)).await?;
    record::run_event_insert(&mut *tx, run, "cancelled", &json!({ "by": actor.0, "job_id": job })).await?;
    tx.commit().await.db("commit")?;
    Ok(Cancelled { job })
}

/// Rotates and expires every lease `worker` holds: its late commits fail, and the jobs are claimed again at
/// once (as new attempts, recorded on their runs).
pub async fn rescue(pool: &PgPool, actor: &Actor, worker: &str) -> Result<Vec<JobId>, Error> {
    let result = async {
        let mut tx = pool.begin().await.db("begin")?;
        let rescued = jobs::job_rescue(&mut *tx, worker).await?;
        if !rescued.is_empty() {
            jobs::job_notify_due(&mut *tx, Utc::now()).await?;
        }
        tx.commit().await.db("commit")?;
        Ok(rescued)
    }
    .await;
    let detail = json!({ "jobs": result.as_ref().ok() });
    audited(pool, actor, "jobs.rescue", &format!("worker {worker}"), detail, result).await
}

/// The retention prune of [`crate::jobs::prune`] with `older_than` as the retention: runs that ended longer ago
/// and hold no staging go with their jobs and events, and old finished jobs of runs that ended with their
/// staging removed. Waits for a scheduled prune of a worker to finish first. The audit table is kept.
pub async fn prune(pool: &PgPool, actor: &Actor, older_than: Duration) -> Result<Pruned, Error> {
    let before = prune::before(Utc::now(), older_than);
    let result = prune::prune(pool, before, WhenBusy::Wait)
        .await
        .map(|pruned| pruned.expect("a prune that waits for the lock always runs"));
    let detail = json!({ "older_than_secs": older_than.as_secs(), "before": before, "deleted": result.as_ref().ok() });
    audited(pool, actor, prune::AUDIT_ACTION, "retention", detail, result).await
}

/// Changes setting `key` to the value `text` says (read by the key's kind: `10m`, `64MiB`, `a,b`, `none`),
/// if the settings stay valid; audited with the old and the new value, a refusal with its reason.
pub async fn set_setting(
    pool: &PgPool,
    actor: &Actor,
    key: &str,
    text: &str,
    if_match: Option<&str>,
) -> Result<Changed, Error> {
    let result = match settings::parse_value(key, text) {
        Ok(value) => settings::change(pool, key, value, &actor.0, if_match).await,
        Err(e) => Err(e),
    };
    let detail = match &result {
        Ok(changed) => json!({ "text": text, "old": changed.old, "new": changed.new }),
        Err(_) => json!({ "text": text }),
    };
    audited(pool, actor, "settings.set", &format!("setting {key}"), detail, result).await
}

/// Writes the audit row for `result` and passes it on. An audit row that cannot be written fails an action
/// that succeeded (an unaudited admin action must not look fine); for a failed action the original error wins.
async fn audited<T>(
    pool: &PgPool,
    actor: &Actor,
    action: &str,
    target: &str,
    mut detail: serde_json::Value,
    result: Result<T, Error>,
) -> Result<T, Error> {
    let outcome = match &result {
        Ok(_) => "ok",
        Err(Error::RunState { .. } | Error::JobRefused { .. } | Error::RunNotFound(_) | Error::JobNotFound(_)) => {
            "refused"
        }
        // A value or key refused; `*` is the whole set failing to load (the database is not migrated).
        Err(Error::Setting { key, .. }) if key != "*" => "refused",
        Err(Error::SettingChanged { .. }) => "refused",
        Err(_) => "error",
    };
    if let Err(e) = &result {
        detail["error"] = json!(e.to_string());
    }
    let written = record::audit_insert(pool, &actor.0, action, target, outcome, &detail).await;
    match (result, written) {
        (Ok(value), Ok(_)) => Ok(value),
        (Ok(_), Err(e)) => Err(e),
        (Err(e), written) => {
            if let Err(audit_error) = written {
                tracing::error!(error = %audit_error, action, target, "could not audit a failed admin action");
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_a_run_or_a_job() {
        let run = RunId::new();
        assert_eq!(run.to_string().parse::<RequeueTarget>(), Ok(RequeueTarget::Run(run)));
        assert_eq!("42".parse::<RequeueTarget>(), Ok(RequeueTarget::Job(JobId(42))));
        assert!("forty-two".parse::<RequeueTarget>().is_err());
    }
}
