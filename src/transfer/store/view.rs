//! What an operator reads of runs: the list, one run's record, whether they may see it, and its events as a
//! stream sends them ([`crate::transfer::view`], the HTTP API's event stream).

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::jobs::store::record::RunEvent;
use crate::jobs::RunState;
use crate::transfer::view::{LinesQuery, RunRecord};

/// `run_lines.sql`: the newest runs `query` selects, newest first.
pub async fn run_lines(db: impl PgExecutor<'_>, query: &LinesQuery) -> Result<Vec<RunRecord>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_lines.sql"))
        .bind(query.limit)
        .bind(query.state.map(RunState::as_str))
        .bind(query.visible_to.as_deref())
        .bind(query.older_than.map(|(at, _)| at))
        .bind(query.older_than.map(|(_, id)| id))
        .bind(query.cluster.as_deref())
        .bind(query.started_by.as_deref())
        .bind(query.since)
        .bind(query.until)
        .fetch_all(db)
        .await
}

/// `run_record.sql`: `None` when the run does not exist.
pub async fn run_record(db: impl PgExecutor<'_>, run: Uuid) -> Result<Option<RunRecord>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_record.sql")).bind(run).fetch_optional(db).await
}

/// `run_visible.sql`: whether `run` exists and `principal` may see both of its clusters.
pub async fn run_visible(db: impl PgExecutor<'_>, run: Uuid, principal: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_visible.sql")).bind(run).bind(principal).fetch_one(db).await
}

/// Where an event stream of a run stands (`run_events_after.sql`).
#[derive(Debug, Clone, Copy)]
pub struct EventCursor<'a> {
    /// The highest event id sent.
    pub after: i64,
    /// Where the client resumed: it has every event up to here, so none at or below is late.
    pub floor: i64,
    /// How far back an event may have committed late, in seconds.
    pub late_window_secs: f64,
    /// The ids sent within that window (never sent twice).
    pub recent: &'a [i64],
}

/// `run_events_after.sql`: up to 500 new events in order, with those below `cursor.after` that committed late.
pub async fn run_events_after(
    db: impl PgExecutor<'_>,
    run: Uuid,
    cursor: EventCursor<'_>,
) -> Result<Vec<RunEvent>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_events_after.sql"))
        .bind(run)
        .bind(cursor.after)
        .bind(cursor.floor)
        .bind(cursor.late_window_secs)
        .bind(cursor.recent)
        .fetch_all(db)
        .await
}
