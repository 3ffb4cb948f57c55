//! Statements on the `job` table.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};
use crate::jobs::model::{ClaimedJob, JobId, JobRow, JobState, LeaseToken, NewJob, RunId};

/// The channel workers LISTEN on (see `job_notify.sql`).
pub const NOTIFY_CHANNEL: &str = "transfer_job";

/// The payload that says "a slot freed" rather than "a job is due at …".
pub const NOTIFY_SLOT: &str = "slot";

#[derive(sqlx::FromRow)]
struct ClaimRow {
    #[sqlx(flatten)]
    job: JobRow,
    reclaimed: bool,
    stop_requested: bool,
}

/// `job_claim.sql`: up to `limit` of the most urgent due jobs, leased to `owner` for `lease`.
pub async fn job_claim(
    db: impl PgExecutor<'_>,
    owner: &str,
    lease: Duration,
    limit: usize,
) -> Result<Vec<ClaimedJob>, Error> {
    let rows: Vec<ClaimRow> = sqlx::query_as(include_str!("../sql/job_claim.sql"))
        .bind(owner)
        .bind(lease.as_secs_f64())
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(db)
        .await
        .db("job_claim")?;
    rows.into_iter()
        .map(|row| {
            let (Some(token), Some(expires)) = (row.job.lease_token, row.job.lease_expires_at) else {
                return Err(Error::Inconsistent(format!("claimed job {} has no lease", row.job.id)));
            };
            Ok(ClaimedJob {
                token,
                lease_expires_at: expires,
                stop_requested: row.stop_requested,
                reclaimed: row.reclaimed,
                job: row.job,
            })
        })
        .collect()
}

/// `job_next_due.sql`: when a claim could next find something (`None`: nothing scheduled).
pub async fn job_next_due(db: impl PgExecutor<'_>) -> Result<Option<DateTime<Utc>>, Error> {
    sqlx::query_scalar(include_str!("../sql/job_next_due.sql")).fetch_one(db).await.db("job_next_due")
}

/// `job_heartbeat.sql`: the new expiry, or `None` when `token` no longer holds the lease.
pub async fn job_heartbeat(
    db: impl PgExecutor<'_>,
    job: JobId,
    token: LeaseToken,
    lease: Duration,
) -> Result<Option<DateTime<Utc>>, Error> {
    sqlx::query_scalar(include_str!("../sql/job_heartbeat.sql"))
        .bind(job)
        .bind(token)
        .bind(lease.as_secs_f64())
        .fetch_optional(db)
        .await
        .db("job_heartbeat")
}

/// `job_lock_fenced.sql`: locks the run and the job while `token` holds the lease; `None` when it does not,
/// else whether the run is asked to stop.
pub async fn job_lock_fenced(
    db: impl PgExecutor<'_>,
    run: RunId,
    job: JobId,
    token: LeaseToken,
) -> Result<Option<bool>, Error> {
    sqlx::query_scalar(include_str!("../sql/job_lock_fenced.sql"))
        .bind(run)
        .bind(job)
        .bind(token)
        .fetch_optional(db)
        .await
        .db("job_lock_fenced")
}

/// `job_complete.sql`: true when the job was completed (the token held its lease).
pub async fn job_complete(db: impl PgExecutor<'_>, job: JobId, token: LeaseToken) -> Result<bool, Error> {
    let done = sqlx::query(include_str!("../sql/job_complete.sql"))
        .bind(job)
        .bind(token)
        .execute(db)
        .await
        .db("job_complete")?;
    Ok(done.rows_affected() == 1)
}

/// Who continues with a job enqueued by a hand-off, when it is due at once (see `job_complete_and_enqueue.sql`).
#[derive(Debug, Clone)]
pub struct Continuation<'a> {
    /// The worker that takes it.
    pub owner: &'a str,
    /// Its lease.
    pub lease: Duration,
}

/// `job_complete_and_enqueue.sql`: completes the job and inserts `next` as its run's next job — leased to
/// `continuation`'s worker if given and the job is due now; `None` when `token` no longer holds the lease
/// (nothing written).
pub async fn job_complete_and_enqueue(
    db: impl PgExecutor<'_>,
    job: JobId,
    token: LeaseToken,
    next: &NewJob,
    default_max_attempts: i32,
    continuation: Option<Continuation<'_>>,
) -> Result<Option<JobRow>, Error> {
    sqlx::query_as(include_str!("../sql/job_complete_and_enqueue.sql"))
        .bind(job)
        .bind(token)
        .bind(&next.kind)
        .bind(&next.payload)
        .bind(next.run_at)
        .bind(next.priority)
        .bind(next.max_attempts.unwrap_or(default_max_attempts))
        .bind(continuation.as_ref().map(|c| c.owner))
        .bind(continuation.as_ref().map_or(0.0, |c| c.lease.as_secs_f64()))
        .fetch_optional(db)
        .await
        .db("job_complete_and_enqueue")
}

/// `job_insert.sql`: inserts a pending job of `run` at `seq`; returns its id and due time.
pub async fn job_insert(
    db: impl PgExecutor<'_>,
    run: RunId,
    seq: i64,
    job: &NewJob,
    default_max_attempts: i32,
) -> Result<(JobId, DateTime<Utc>), Error> {
    sqlx::query_as(include_str!("../sql/job_insert.sql"))
        .bind(run)
        .bind(seq)
        .bind(&job.kind)
        .bind(&job.payload)
        .bind(job.run_at)
        .bind(job.priority)
        .bind(job.max_attempts.unwrap_or(default_max_attempts))
        .fetch_one(db)
        .await
        .db("job_insert")
}

/// `job_retry.sql`: pending again at `at` with `error` recorded; false when the lease is lost.
pub async fn job_retry(
    db: impl PgExecutor<'_>,
    job: JobId,
    token: LeaseToken,
    at: DateTime<Utc>,
    error: &str,
) -> Result<bool, Error> {
    let done = sqlx::query(include_str!("../sql/job_retry.sql"))
        .bind(job)
        .bind(token)
        .bind(at)
        .bind(error)
        .execute(db)
        .await
        .db("job_retry")?;
    Ok(done.rows_affected() == 1)
}

/// `job_snooze.sql`: pending again at `at`, attempt given back; false when the lease is lost.
pub async fn job_snooze(
    db: impl PgExecutor<'_>,
    job: JobId,
    token: LeaseToken,
    at: DateTime<Utc>,
) -> Result<bool, Error> {
    let done = sqlx::query(include_str!("../sql/job_snooze.sql"))
        .bind(job)
        .bind(token)
        .bind(at)
        .execute(db)
        .await
        .db("job_snooze")?;
    Ok(done.rows_affected() == 1)
}

/// `job_finish.sql`: the job ends as `state` (failed or cancelled); false when the lease is lost.
pub async fn job_finish(
    db: impl PgExecutor<'_>,
    job: JobId,
    token: LeaseToken,
    state: JobState,
    error: Option<&str>,
) -> Result<bool, Error> {
    debug_assert!(matches!(state, JobState::Failed | JobState::Cancelled));
    let done = sqlx::query(include_str!("../sql/job_finish.sql"))
        .bind(job)
        .bind(token)
        .bind(state.as_str())
        .bind(error)
        .execute(db)
        .await
        .db("job_finish")?;
    Ok(done.rows_affected() == 1)
}

/// `job_release.sql`: a claimed but unstarted job goes back, attempt returned; false when the lease is lost.
pub async fn job_release(db: impl PgExecutor<'_>, job: JobId, token: LeaseToken) -> Result<bool, Error> {
    let done = sqlx::query(include_str!("../sql/job_release.sql"))
        .bind(job)
        .bind(token)
        .execute(db)
        .await
        .db("job_release")?;
    Ok(done.rows_affected() == 1)
}

/// `job_notify.sql` for a job due at `at`.
pub async fn job_notify_due(db: impl PgExecutor<'_>, at: DateTime<Utc>) -> Result<(), Error> {
    job_notify(db, &at.timestamp_micros().to_string()).await
}

/// `job_notify.sql` with a raw payload (a due time in microseconds, or [`NOTIFY_SLOT`]).
pub async fn job_notify(db: impl PgExecutor<'_>, payload: &str) -> Result<(), Error> {
    sqlx::query(include_str!("../sql/job_notify.sql")).bind(payload).execute(db).await.db("job_notify")?;
    Ok(())
}

/// `job_live_for_run.sql`: the run's live job, locked.
pub async fn job_live_for_run(db: impl PgExecutor<'_>, run: RunId) -> Result<Option<JobRow>, Error> {
    sqlx::query_as(include_str!("../sql/job_live_for_run.sql"))
        .bind(run)
        .fetch_optional(db)
        .await
        .db("job_live_for_run")
}

/// `job_last_for_run.sql`: the run's job with the highest sequence, locked.
pub async fn job_last_for_run(db: impl PgExecutor<'_>, run: RunId) -> Result<Option<JobRow>, Error> {
    sqlx::query_as(include_str!("../sql/job_last_for_run.sql"))
        .bind(run)
        .fetch_optional(db)
        .await
        .db("job_last_for_run")
}

/// `job_next_seq.sql`: the sequence of the run's next job.
pub async fn job_next_seq(db: impl PgExecutor<'_>, run: RunId) -> Result<i64, Error> {
    sqlx::query_scalar(include_str!("../sql/job_next_seq.sql")).bind(run).fetch_one(db).await.db("job_next_seq")
}

/// `job_get.sql`.
pub async fn job_get(db: impl PgExecutor<'_>, job: JobId) -> Result<Option<JobRow>, Error> {
    sqlx::query_as(include_str!("../sql/job_get.sql")).bind(job).fetch_optional(db).await.db("job_get")
}

/// `job_list.sql`: newest first, filtered by state and run, at most `limit`.
pub async fn job_list(
    db: impl PgExecutor<'_>,
    state: Option<JobState>,
    run: Option<RunId>,
    limit: i64,
) -> Result<Vec<JobRow>, Error> {
    sqlx::query_as(include_str!("../sql/job_list.sql"))
        .bind(state.map(JobState::as_str))
        .bind(run)
        .bind(limit)
        .fetch_all(db)
        .await
        .db("job_list")
}

/// `job_list_for_run.sql`: the run's jobs in sequence order.
pub async fn job_list_for_run(db: impl PgExecutor<'_>, run: RunId) -> Result<Vec<JobRow>, Error> {
    sqlx::query_as(include_str!("../sql/job_list_for_run.sql")).bind(run).fetch_all(db).await.db("job_list_for_run")
}

/// `job_cancel_live.sql`: the id of the live job it cancelled, if any.
pub async fn job_cancel_live(db: impl PgExecutor<'_>, run: RunId, reason: &str) -> Result<Option<JobId>, Error> {
    sqlx::query_scalar(include_str!("../sql/job_cancel_live.sql"))
        .bind(run)
        .bind(reason)
        .fetch_optional(db)
        .await
        .db("job_cancel_live")
}

/// `job_requeue.sql`: the job as requeued, or `None` when it is running, completed or missing.
pub async fn job_requeue(db: impl PgExecutor<'_>, job: JobId) -> Result<Option<JobRow>, Error> {
    sqlx::query_as(include_str!("../sql/job_requeue.sql")).bind(job).fetch_optional(db).await.db("job_requeue")
}

/// `job_rescue.sql`: the jobs whose leases were rotated.
pub async fn job_rescue(db: impl PgExecutor<'_>, owner: &str) -> Result<Vec<JobId>, Error> {
    sqlx::query_scalar(include_str!("../sql/job_rescue.sql")).bind(owner).fetch_all(db).await.db("job_rescue")
}
