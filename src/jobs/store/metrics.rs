//! The figures `/metrics` reports, read at each scrape (`metrics_*.sql`).

use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};

/// `metrics_runs_by_state.sql`: (state, runs).
pub async fn metrics_runs_by_state(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>, Error> {
    sqlx::query_as(include_str!("../sql/metrics_runs_by_state.sql")).fetch_all(db).await.db("metrics_runs_by_state")
}

/// `metrics_jobs_by_state.sql`: (state, jobs).
pub async fn metrics_jobs_by_state(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>, Error> {
    sqlx::query_as(include_str!("../sql/metrics_jobs_by_state.sql")).fetch_all(db).await.db("metrics_jobs_by_state")
}

/// `metrics_slots_taken.sql`: the slots a run holds now.
pub async fn metrics_slots_taken(db: impl PgExecutor<'_>) -> Result<i64, Error> {
    sqlx::query_scalar(include_str!("../sql/metrics_slots_taken.sql")).fetch_one(db).await.db("metrics_slots_taken")
}

/// What the runs not yet ended have done so far (`metrics_live_messages.sql`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct LiveMessages {
    /// Taken into staging.
    pub staged: i64,
    /// Delivered (copied, for a copy).
    pub delivered: i64,
    /// Body bytes delivered.
    pub delivered_bytes: i64,
    /// Sent to a dead message queue.
    pub dead_lettered: i64,
    /// Put back on their source by a return.
    pub returned: i64,
}

/// `metrics_live_messages.sql`.
pub async fn metrics_live_messages(db: impl PgExecutor<'_>) -> Result<LiveMessages, Error> {
    sqlx::query_as(include_str!("../sql/metrics_live_messages.sql")).fetch_one(db).await.db("metrics_live_messages")
}
