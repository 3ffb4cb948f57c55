//! The engine's API for the transfer layer: create and start a run's first job, request a stop, read a run,
//! its jobs and its events.
//!
//! Every change locks the run row first (`run_lock`), the same order as a handler's fenced transaction, so
//! it waits for a batch that is committing instead of racing it.

use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;

use crate::jobs::error::{DbContext, Error};
use crate::jobs::lease::end_run_and_release;
use crate::jobs::model::{JobId, JobRow, JobState, NewJob, RunId, RunRow, RunState};
use crate::jobs::store::record::{self, RunEvent};
use crate::jobs::store::{job as jobs, run as runs};

/// Creates a run in state previewed (the transfer layer's preview does this with its own columns).
pub async fn create(pool: &PgPool, run: RunId, started_by: Option<&str>) -> Result<(), Error> {
    runs::run_insert(pool, run, started_by).await
}

/// What [`start`] did.
#[derive(Debug, Clone, Serialize)]
pub struct Started {
    /// The run's first job (of this start: a resumed run continues its sequence).
    pub job: JobId,
    /// The job's sequence.
    pub seq: i64,
}

/// Starts (or resumes) `run` with `first` as its next job: the run is Queued until a claim takes a slot for
/// it, then Running. `default_max_attempts` applies unless `first` says otherwise.
pub async fn start(
    pool: &PgPool,
    run: RunId,
    first: &NewJob,
    started_by: &str,
    default_max_attempts: i32,
) -> Result<Started, Error> {
    let mut tx = pool.begin().await.db("begin")?;
    let row = runs::run_lock(&mut *tx, run).await?.ok_or(Error::RunNotFound(run))?;
    if !row.state.is_startable() {
        return Err(Error::RunState { run, state: row.state, action: "start" });
    }
    let seq = jobs::job_next_seq(&mut *tx, run).await?;
    runs::run_queue(&mut *tx, run, Some(started_by)).await?;
    let (job, due) = jobs::job_insert(&mut *tx, run, seq, first, default_max_attempts).await?;
    jobs::job_notify_due(&mut *tx, due).await?;
    record::run_event_insert(
        &mut *tx,
        run,
        "started",
        &json!({ "by": started_by, "job_id": job, "seq": seq, "from": row.state }),
    )
    .await?;
    tx.commit().await.db("commit")?;
    Ok(Started { job, seq })
}

/// What [`request_stop`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum StopRequest {
    /// No batch was in flight: the run is Stopped now.
    Stopped,
    /// A batch is in flight: it finishes, and the run stops at its next claim (the request is stored on the
    /// row, so any worker sees it).
    Requested,
    /// The run had already ended in this state.
    AlreadyEnded(RunState),
}

/// Asks `run` to stop, for `reason`.
pub async fn request_stop(pool: &PgPool, run: RunId, reason: &str) -> Result<StopRequest, Error> {
    let mut tx = pool.begin().await.db("begin")?;
    let row = runs::run_lock(&mut *tx, run).await?.ok_or(Error::RunNotFound(run))?;
    if row.state.is_ended() || row.state == RunState::Previewed {
        return Ok(StopRequest::AlreadyEnded(row.state));
    }
    runs::run_request_stop(&mut *tx, run, reason).await?;
    let live = jobs::job_live_for_run(&mut *tx, run).await?;
    let outcome = match live {
        Some(job) if job.state == JobState::Running => {
            record::run_event_insert(&mut *tx, run, "stop_requested", &json!({ "reason": reason, "job_id": job.id }))
                .await?;
            StopRequest::Requested
        }
        _ => {
            // Nothing in flight (a paced, backing-off or queued job, or none): stop now, so a queued run
            // without a slot stops too.
            jobs::job_cancel_live(&mut *tx, run, reason).await?;
            end_run_and_release(&mut tx, run, RunState::Stopped, None, Some(reason)).await?;
            record::run_event_insert(&mut *tx, run, "stopped", &json!({ "reason": reason })).await?;
            StopRequest::Stopped
        }
    };
    tx.commit().await.db("commit")?;
    Ok(outcome)
}

/// The run.
pub async fn get(pool: &PgPool, run: RunId) -> Result<RunRow, Error> {
    runs::run_get(pool, run).await?.ok_or(Error::RunNotFound(run))
}

/// The run's jobs in sequence order.
pub async fn jobs(pool: &PgPool, run: RunId) -> Result<Vec<JobRow>, Error> {
    jobs::job_list_for_run(pool, run).await
}

/// The run's events in order.
pub async fn events(pool: &PgPool, run: RunId) -> Result<Vec<RunEvent>, Error> {
    record::run_event_list(pool, run).await
}

/// The run's 1-based place among queued runs (`None` when it is not queued).
pub async fn queue_position(pool: &PgPool, run: RunId) -> Result<Option<i64>, Error> {
    runs::run_queue_position(pool, run).await
}

/// The runs holding a `concurrent runs` slot now.
pub async fn slot_holders(pool: &PgPool) -> Result<Vec<RunId>, Error> {
    runs::slot_holders(pool).await
}
