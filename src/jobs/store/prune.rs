//! Statements of the retention prune ([`crate::jobs::prune`]): its advisory lock and its deletes.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};

/// What one `run_prune.sql` deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct RunPruned {
    pub jobs: i64,
    pub run_events: i64,
    pub runs: i64,
}

/// `prune_lock.sql`: waits for the prune's advisory lock (held until the transaction ends).
pub async fn prune_lock(db: impl PgExecutor<'_>) -> Result<(), Error> {
    sqlx::query(include_str!("../sql/prune_lock.sql")).execute(db).await.db("prune_lock")?;
    Ok(())
}

/// `prune_try_lock.sql`: the prune's advisory lock if it is free (held until the transaction ends).
pub async fn prune_try_lock(db: impl PgExecutor<'_>) -> Result<bool, Error> {
    sqlx::query_scalar(include_str!("../sql/prune_try_lock.sql")).fetch_one(db).await.db("prune_try_lock")
}

/// `run_prune.sql`: deletes at most `limit` runs that ended before `before` and hold no staging, with their
/// jobs and events.
pub async fn run_prune(db: impl PgExecutor<'_>, before: DateTime<Utc>, limit: i64) -> Result<RunPruned, Error> {
    sqlx::query_as(include_str!("../sql/run_prune.sql")).bind(before).bind(limit).fetch_one(db).await.db("run_prune")
}

/// `job_prune.sql`: how many finished jobs (of kept runs that ended with their staging removed) were deleted.
pub async fn job_prune(db: impl PgExecutor<'_>, before: DateTime<Utc>) -> Result<u64, Error> {
    let done = sqlx::query(include_str!("../sql/job_prune.sql")).bind(before).execute(db).await.db("job_prune")?;
    Ok(done.rows_affected())
}

/// `audit_prune.sql`: deletes at most `limit` audit rows written before `before`; how many.
pub async fn audit_prune(db: impl PgExecutor<'_>, before: DateTime<Utc>, limit: i64) -> Result<u64, Error> {
    let done = sqlx::query(include_str!("../sql/audit_prune.sql"))
        .bind(before)
        .bind(limit)
        .execute(db)
        .await
        .db("audit_prune")?;
    Ok(done.rows_affected())
}
