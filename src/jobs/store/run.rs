//! Statements on `transfer_run` and `run_slot`.

use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};
use crate::jobs::model::{JobId, NewJob, RunId, RunRow, RunState};

/// `run_insert.sql`: a new previewed run.
pub async fn run_insert(db: impl PgExecutor<'_>, run: RunId, started_by: Option<&str>) -> Result<(), Error> {
    sqlx::query(include_str!("../sql/run_insert.sql")).bind(run).bind(started_by).execute(db).await.db("run_insert")?;
    Ok(())
}

/// `transfer_run_start.sql`: starts (or resumes) `run` with `first` as its next job; the job and its sequence.
/// A refusal comes back as [`Error::Db`] holding the function's SQLSTATE (AT001, AT002) for the caller to read.
pub async fn transfer_run_start(
    db: impl PgExecutor<'_>,
    run: RunId,
    first: &NewJob,
    started_by: &str,
    default_max_attempts: i32,
) -> Result<(JobId, i64), Error> {
    let (job, seq): (i64, i64) = sqlx::query_as(include_str!("../sql/transfer_run_start.sql"))
        .bind(run)
        .bind(&first.kind)
        .bind(&first.payload)
        .bind(started_by)
        .bind(first.max_attempts.unwrap_or(default_max_attempts))
        .bind(first.run_at)
        .bind(first.priority)
        .fetch_one(db)
        .await
        .db("transfer_run_start")?;
    Ok((JobId(job), seq))
}

/// `transfer_run_request_stop.sql`: the function's answer (`{"stop": …, "state": …}`). A refusal comes back as
/// [`Error::Db`] holding the function's SQLSTATE (AT001).
pub async fn transfer_run_request_stop(
    db: impl PgExecutor<'_>,
    run: RunId,
    reason: &str,
) -> Result<serde_json::Value, Error> {
    sqlx::query_scalar(include_str!("../sql/transfer_run_request_stop.sql"))
        .bind(run)
        .bind(reason)
        .fetch_one(db)
        .await
        .db("transfer_run_request_stop")
}

/// `run_get.sql`.
pub async fn run_get(db: impl PgExecutor<'_>, run: RunId) -> Result<Option<RunRow>, Error> {
    sqlx::query_as(include_str!("../sql/run_get.sql")).bind(run).fetch_optional(db).await.db("run_get")
}

/// `run_lock.sql`: the run, locked until the transaction ends.
pub async fn run_lock(db: impl PgExecutor<'_>, run: RunId) -> Result<Option<RunRow>, Error> {
    sqlx::query_as(include_str!("../sql/run_lock.sql")).bind(run).fetch_optional(db).await.db("run_lock")
}

/// `run_queue.sql`: the run is (re)started and waits for a slot.
pub async fn run_queue(db: impl PgExecutor<'_>, run: RunId, started_by: Option<&str>) -> Result<(), Error> {
    sqlx::query(include_str!("../sql/run_queue.sql")).bind(run).bind(started_by).execute(db).await.db("run_queue")?;
    Ok(())
}

/// `run_end.sql`: the run ends in `state`.
pub async fn run_end(
    db: impl PgExecutor<'_>,
    run: RunId,
    state: RunState,
    error: Option<&str>,
    stop_reason: Option<&str>,
) -> Result<(), Error> {
    debug_assert!(state.is_ended(), "run_end with {state}");
    sqlx::query(include_str!("../sql/run_end.sql"))
        .bind(run)
        .bind(state.as_str())
        .bind(error)
        .bind(stop_reason)
        .execute(db)
        .await
        .db("run_end")?;
    Ok(())
}

/// `run_request_stop.sql`: false when the run does not exist.
pub async fn run_request_stop(db: impl PgExecutor<'_>, run: RunId, reason: &str) -> Result<bool, Error> {
    let done = sqlx::query(include_str!("../sql/run_request_stop.sql"))
        .bind(run)
        .bind(reason)
        .execute(db)
        .await
        .db("run_request_stop")?;
    Ok(done.rows_affected() == 1)
}

/// `run_set_counters.sql`: merges `counters` (a JSON object) into the run's counters.
pub async fn run_set_counters(db: impl PgExecutor<'_>, run: RunId, counters: &serde_json::Value) -> Result<(), Error> {
    sqlx::query(include_str!("../sql/run_set_counters.sql"))
        .bind(run)
        .bind(counters)
        .execute(db)
        .await
        .db("run_set_counters")?;
    Ok(())
}

/// `run_queue_position.sql`: the run's 1-based place among queued runs, `None` when it is not queued.
pub async fn run_queue_position(db: impl PgExecutor<'_>, run: RunId) -> Result<Option<i64>, Error> {
    sqlx::query_scalar(include_str!("../sql/run_queue_position.sql"))
        .bind(run)
        .fetch_optional(db)
        .await
        .db("run_queue_position")
}

/// `slot_release.sql`: true when the run held a slot.
pub async fn slot_release(db: impl PgExecutor<'_>, run: RunId) -> Result<bool, Error> {
    let done = sqlx::query(include_str!("../sql/slot_release.sql")).bind(run).execute(db).await.db("slot_release")?;
    Ok(done.rows_affected() == 1)
}

/// `slot_holders.sql`: the runs that hold a slot.
pub async fn slot_holders(db: impl PgExecutor<'_>) -> Result<Vec<RunId>, Error> {
    sqlx::query_scalar(include_str!("../sql/slot_holders.sql")).fetch_all(db).await.db("slot_holders")
}
