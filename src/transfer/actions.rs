//! What an operator does to a run, with the checks SPEC §3, §4.5 and §7 ask for: **execute** a Previewed run,
//! **stop**, **resume**, **return to source**. Each action is audited (who, what, when, outcome) whether it is
//! done or refused; the CLI, the HTTP API and the Studio SQL path all come through here.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::jobs::runs::{self, Started, StopRequest};
use crate::jobs::{self, RunId, RunState};
use crate::transfer::plan::{Mode, Plan};
use crate::transfer::relay::Phase;

/// What the operator confirms at execute.
#[derive(Debug, Clone, Default)]
pub struct Confirmation {
    /// The plan hash the preview showed.
    pub plan_hash: String,
    /// The needs-acknowledgement codes acknowledged.
    pub acknowledged: Vec<String>,
    /// The source queue's name, typed (a move, over the safety cap, or of unknown size).
    pub typed_queue: Option<String>,
    /// The safety cap explicitly overridden.
    pub override_cap: bool,
}

/// Why an action was refused; the words say what to do.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// No such run.
    #[error("there is no run {0}")]
    NotFound(Uuid),
    /// The run is not in a state the action applies to.
    #[error("run {run} is {state}: {action} applies only to {applies_to}")]
    State {
        /// The run.
        run: Uuid,
        /// Its state.
        state: RunState,
        /// What was asked.
        action: &'static str,
        /// The states it applies to.
        applies_to: &'static str,
    },
    /// The preview is too old.
    #[error("the preview of run {run} expired at {at}: preview again")]
    Expired {
        /// The run.
        run: Uuid,
        /// When it expired.
        at: DateTime<Utc>,
    },
    /// The plan hash does not match.
    #[error("the plan hash {given} is not the one run {run} was previewed with ({expected}): preview again")]
    PlanHash {
        /// The run.
        run: Uuid,
        /// The hash given.
        given: String,
        /// The previewed hash.
        expected: String,
    },
    /// The preview refused the run.
    #[error("the preview refused this run: {0}")]
    Refused(String),
    /// Codes that need acknowledgement were not acknowledged.
    #[error("acknowledge these findings to run it (--ack <code>): {0}")]
    NotAcknowledged(String),
    /// An acknowledgement of a code the preview did not raise (a typo, or another preview's code).
    #[error("the preview did not raise {0}; acknowledge only its own codes")]
    UnknownAcknowledgement(String),
    /// The typed confirmation is missing or wrong.
    #[error("type the source queue's name to arm this run (--confirm {expected}){why}")]
    Confirmation {
        /// The source queue's name.
        expected: String,
        /// What was wrong.
        why: String,
    },
    /// The safety cap needs an explicit override.
    #[error("this run is over the safety cap of {cap} messages or of unknown size: pass --override-cap to run it")]
    Cap {
        /// The cap.
        cap: i64,
    },
    /// Another run is active on the source queue.
    #[error("another run is active on the source queue {0}: wait for it, or stop it")]
    SourceBusy(String),
    /// Not built yet for this kind of run.
    #[error("{0}")]
    Unsupported(String),
    /// The engine.
    #[error(transparent)]
    Jobs(#[from] jobs::Error),
    /// Postgres.
    #[error("the database: {0}")]
    Db(#[from] sqlx::Error),
}

#[derive(sqlx::FromRow)]
struct PreviewedRow {
    state: String,
    plan: Option<serde_json::Value>,
    plan_hash: Option<String>,
    preview: Option<serde_json::Value>,
    preview_expires_at: Option<DateTime<Utc>>,
    staging_queue: Option<String>,
}

async fn row(pool: &PgPool, run: Uuid) -> Result<PreviewedRow, ActionError> {
    sqlx::query_as(
        "SELECT state, plan, plan_hash, preview, preview_expires_at, staging_queue FROM transfer_run WHERE id = $1",
    )
    .bind(run)
    .fetch_optional(pool)
    .await?
    .ok_or(ActionError::NotFound(run))
}

fn state_of(row: &PreviewedRow) -> RunState {
    row.state.parse().unwrap_or(RunState::Failed)
}

/// Writes an audit row: `actor` did `action` to run `run` with `outcome`.
pub async fn audit(pool: &PgPool, actor: &str, action: &str, run: Uuid, outcome: &str, detail: serde_json::Value) {
    let result = sqlx::query("INSERT INTO audit (actor, action, target, outcome, detail) VALUES ($1, $2, $3, $4, $5)")
        .bind(actor)
        .bind(action)
        .bind(format!("run:{run}"))
        .bind(outcome)
        .bind(detail)
        .execute(pool)
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, %action, %run, "could not write the audit row");
    }
}

async fn audited<T: Serialize>(
    pool: &PgPool,
    actor: &str,
    action: &str,
    run: Uuid,
    result: Result<T, ActionError>,
) -> Result<T, ActionError> {
    match &result {
        Ok(done) => audit(pool, actor, action, run, "ok", json!({ "result": done })).await,
        Err(e @ (ActionError::Jobs(_) | ActionError::Db(_))) => {
            audit(pool, actor, action, run, "error", json!({ "error": e.to_string() })).await
        }
        Err(e) => audit(pool, actor, action, run, "refused", json!({ "reason": e.to_string() })).await,
    }
    result
}

/// Checks a Previewed run against what the operator confirmed (pure, given the row).
fn check_confirmation(run: Uuid, row: &PreviewedRow, confirm: &Confirmation, cap: i64) -> Result<Plan, ActionError> {
    let state = state_of(row);
    if state != RunState::Previewed {
        return Err(ActionError::State { run, state, action: "execute", applies_to: "a previewed run" });
    }
    let plan: Plan = row
        .plan
        .clone()
        .and_then(|p| serde_json::from_value(p).ok())
        .ok_or_else(|| ActionError::Refused("the run has no readable plan".into()))?;
    if let Some(at) = row.preview_expires_at {
        if at < Utc::now() {
            return Err(ActionError::Expired { run, at });
        }
    }
    let expected = row.plan_hash.clone().unwrap_or_default();
    if confirm.plan_hash != expected {
        return Err(ActionError::PlanHash { run, given: confirm.plan_hash.clone(), expected });
    }
    let preview = row.preview.clone().unwrap_or_default();
    let findings = preview["findings"].as_array().cloned().unwrap_or_default();
    let of_kind = |kind: &str| -> Vec<(String, String)> {
        findings
            .iter()
            .filter(|f| f["kind"] == kind)
            .map(|f| (f["code"].as_str().unwrap_or("").to_string(), f["words"].as_str().unwrap_or("").to_string()))
            .collect()
    };
    let refused = of_kind("refused");
    if !refused.is_empty() {
        let words: Vec<String> = refused.iter().map(|(c, w)| format!("{c} ({w})")).collect();
        return Err(ActionError::Refused(words.join("; ")));
    }
    let needed: Vec<String> = of_kind("needs_ack").into_iter().map(|(c, _)| c).collect();
    if let Some(stray) = confirm.acknowledged.iter().find(|a| !needed.contains(a)) {
        return Err(ActionError::UnknownAcknowledgement(stray.clone()));
    }
    let missing: Vec<&String> = needed.iter().filter(|c| !confirm.acknowledged.contains(c)).collect();
    if !missing.is_empty() {
        return Err(ActionError::NotAcknowledged(missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")));
    }
    let needs_typed = preview["needs_typed_confirmation"].as_bool().unwrap_or(true) || plan.mode == Mode::Move;
    if needs_typed {
        match &confirm.typed_queue {
            Some(typed) if typed == &plan.source.queue => {}
            Some(typed) => {
                return Err(ActionError::Confirmation {
                    expected: plan.source.queue.clone(),
                    why: format!(": `{typed}` is not the source queue's name"),
                })
            }
            None => return Err(ActionError::Confirmation { expected: plan.source.queue.clone(), why: String::new() }),
        }
    }
    if preview["needs_cap_override"].as_bool().unwrap_or(true) && !confirm.override_cap {
        return Err(ActionError::Cap { cap });
    }
    if plan.mode == Mode::Copy {
        return Err(ActionError::Unsupported("copy runs are not built yet (issue 7); preview a move instead".into()));
    }
    Ok(plan)
}

/// Executes a Previewed run: checks the confirmation, then queues its first job (the run takes a slot, or
/// waits Queued for one). Audited.
pub async fn execute(
    pool: &PgPool,
    run: Uuid,
    confirm: &Confirmation,
    operator: &str,
    default_max_attempts: i32,
) -> Result<Started, ActionError> {
    let result = async {
        let cap = crate::jobs::settings::load(pool).await?.safety_cap as i64;
        let row = row(pool, run).await?;
        let plan = check_confirmation(run, &row, confirm, cap)?;
        sqlx::query("UPDATE transfer_run SET confirmed = $2, executed_at = now() WHERE id = $1")
            .bind(run)
            .bind(json!({
                "plan_hash": confirm.plan_hash,
                "acknowledged": confirm.acknowledged,
                "typed_queue": confirm.typed_queue,
                "override_cap": confirm.override_cap,
                "by": operator,
            }))
            .execute(pool)
            .await?;
        start(pool, run, &plan, first_phase(&plan), operator, default_max_attempts).await
    }
    .await;
    audited(pool, operator, "execute", run, result).await
}

/// A move between two queues of one node is the broker's own move (no staging); any other starts by preparing
/// staging.
fn first_phase(plan: &Plan) -> Phase {
    if plan.same_node() {
        Phase::LocalMove
    } else {
        Phase::Prepare
    }
}

async fn start(
    pool: &PgPool,
    run: Uuid,
    plan: &Plan,
    phase: Phase,
    operator: &str,
    default_max_attempts: i32,
) -> Result<Started, ActionError> {
    match runs::start(pool, RunId(run), &phase.job(), operator, default_max_attempts).await {
        Ok(started) => Ok(started),
        Err(jobs::Error::Db { source: sqlx::Error::Database(db), .. })
            if db.constraint() == Some("transfer_run_one_active_per_source") =>
        {
            Err(ActionError::SourceBusy(plan.source.display()))
        }
        Err(e) => Err(e.into()),
    }
}

/// Asks a run to stop: the batch in flight finishes (and an in-doubt batch is settled) first. Audited.
pub async fn stop(pool: &PgPool, run: Uuid, reason: &str, operator: &str) -> Result<StopRequest, ActionError> {
    let result = async {
        row(pool, run).await?;
        Ok(runs::request_stop(pool, RunId(run), &format!("stopped by {operator}: {reason}")).await?)
    }
    .await;
    audited(pool, operator, "stop", run, result).await
}

/// A Stopped, Interrupted or Failed run's plan, or why `action` does not apply to it.
async fn resumable(pool: &PgPool, run: Uuid, action: &'static str) -> Result<(Plan, PreviewedRow), ActionError> {
    let row = row(pool, run).await?;
    let state = state_of(&row);
    if !matches!(state, RunState::Stopped | RunState::Interrupted | RunState::Failed) {
        return Err(ActionError::State {
            run,
            state,
            action,
            applies_to: "a stopped, interrupted or failed run (stop it first)",
        });
    }
    let plan: Plan = row
        .plan
        .clone()
        .and_then(|p| serde_json::from_value(p).ok())
        .ok_or_else(|| ActionError::Refused("the run has no readable plan".into()))?;
    Ok((plan, row))
}

/// Resumes a Stopped, Interrupted or Failed run from where it stopped (staging, counters and cursor reused).
/// Audited.
pub async fn resume(
    pool: &PgPool,
    run: Uuid,
    operator: &str,
    default_max_attempts: i32,
) -> Result<Started, ActionError> {
    let result = async {
        let (plan, row) = resumable(pool, run, "resume").await?;
        clear_stop(pool, run).await?;
        let phase = match (plan.same_node(), row.staging_queue.is_some()) {
            (true, _) => Phase::LocalMove,
            (false, true) => Phase::Relay,
            (false, false) => Phase::Prepare,
        };
        start(pool, run, &plan, phase, operator, default_max_attempts).await
    }
    .await;
    audited(pool, operator, "resume", run, result).await
}

/// Returns what a Stopped, Interrupted or Failed move still holds in staging to the source queue (§4.5).
/// Audited.
pub async fn return_to_source(
    pool: &PgPool,
    run: Uuid,
    operator: &str,
    default_max_attempts: i32,
) -> Result<Started, ActionError> {
    let result = async {
        let (plan, _) = resumable(pool, run, "return to source").await?;
        if plan.mode != Mode::Move {
            return Err(ActionError::Unsupported("only a move has anything to return".into()));
        }
        if plan.same_node() {
            return Err(ActionError::Unsupported(
                "a move on one node holds nothing in staging: what it moved is on the target queue, and the rest \
                 is still on the source queue; to put messages back, preview a move from the target queue"
                    .into(),
            ));
        }
        clear_stop(pool, run).await?;
        start(pool, run, &plan, Phase::Return, operator, default_max_attempts).await
    }
    .await;
    audited(pool, operator, "return", run, result).await
}

/// A resumed or returning run starts without the old stop request.
async fn clear_stop(pool: &PgPool, run: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE transfer_run SET stop_requested = false, stop_reason = NULL \
         WHERE id = $1 AND state IN ('stopped', 'interrupted', 'failed')",
    )
    .bind(run)
    .execute(pool)
    .await?;
    Ok(())
}

/// The words the confirmation of a return shows before the operator types the queue name (§4.5).
pub const RETURN_WARNING: &str = "Messages already delivered stay on the target. Returned messages come back to the \
     source queue with new message ids, without expiration, at the tail of the queue.";
