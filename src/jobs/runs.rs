//! The engine's API for the transfer layer: create and start a run's first job, request a stop, read a run,
//! its jobs and its events.
//!
//! Every change locks the run row first (`run_lock`), the same order as a handler's fenced transaction, so
//! it waits for a batch that is committing instead of racing it. Starting and stopping are SQL functions
//! (`transfer_run_start`, `transfer_run_request_stop`, `sql/functions/runs.sql`) that the Studio start path shares.

use serde::Serialize;
use sqlx::PgPool;

use crate::jobs::error::Error;
use crate::jobs::model::{JobId, JobRow, NewJob, RunId, RunRow, RunState};
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
///
/// One implementation with the Studio start path: the SQL function `transfer_run_start` (`sql/functions/runs.sql`), which
/// `transfer_execute`, `transfer_resume` and `transfer_return` call too. A second active run on the same source
/// queue fails on the constraint `transfer_run_one_active_per_source`, a second live job on `job_one_live_per_run`.
pub async fn start(
    pool: &PgPool,
    run: RunId,
    first: &NewJob,
    started_by: &str,
    default_max_attempts: i32,
) -> Result<Started, Error> {
    runs::transfer_run_start(pool, run, first, started_by, default_max_attempts)
        .await
        .map(|(job, seq)| Started { job, seq })
        .map_err(|e| refusal(run, "start", e))
}

/// The engine's error for a refusal of the SQL run functions: AT001 no such run, AT002 a state the action does not
/// apply to (the state in the error's detail); anything else is the statement's failure, as it came.
fn refusal(run: RunId, action: &'static str, e: Error) -> Error {
    if let Error::Db { source: sqlx::Error::Database(db), .. } = &e {
        match db.code().as_deref() {
            Some("AT001") => return Error::RunNotFound(run),
            Some("AT002") => {
                let detail = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().and_then(|pg| pg.detail());
                let state = detail
                    .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                    .and_then(|d| d["state"].as_str().and_then(|s| s.parse::<RunState>().ok()));
                if let Some(state) = state {
                    return Error::RunState { run, state, action };
                }
            }
            _ => {}
        }
    }
    e
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

/// Asks `run` to stop, for `reason`. One implementation with the Studio path: the SQL function
/// `transfer_run_request_stop` (`sql/functions/runs.sql`), which `transfer_stop` calls too.
pub async fn request_stop(pool: &PgPool, run: RunId, reason: &str) -> Result<StopRequest, Error> {
    match runs::transfer_run_request_stop(pool, run, reason).await {
        Ok(detail) => Ok(stop_request_from(&detail)),
        Err(e) => Err(refusal(run, "stop", e)),
    }
}

/// What `transfer_run_request_stop` answered (`{"stop": "stopped" | "requested" | "already_ended", "state": …}`).
pub fn stop_request_from(detail: &serde_json::Value) -> StopRequest {
    match detail["stop"].as_str() {
        Some("stopped") => StopRequest::Stopped,
        Some("requested") => StopRequest::Requested,
        _ => {
            StopRequest::AlreadyEnded(detail["state"].as_str().and_then(|s| s.parse().ok()).unwrap_or(RunState::Failed))
        }
    }
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
