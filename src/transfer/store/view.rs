//! What an operator reads of runs: the list, one run's record, whether they may see it, and its events as a
//! stream sends them ([`crate::transfer::view`], the HTTP API's event stream).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::jobs::store::record::RunEvent;
use crate::jobs::RunState;
use crate::transfer::relay::state::Counters;
use crate::transfer::Mode;

/// What Postgres holds about a run, as [`crate::transfer::view::RunView::build`] reads it; also a line of a list of runs ([`crate::transfer::view::lines`]).
#[derive(Debug, Clone, sqlx::FromRow, Serialize, utoipa::ToSchema)]
#[schema(description = "A run as Postgres holds it: a line of the list of runs.")]
pub struct RunRecord {
    /// The run.
    pub id: Uuid,
    /// Its state (`transfer_run.state`).
    #[sqlx(try_from = "String")]
    pub state: RunState,
    /// `move` or `copy`.
    #[schema(value_type = Option<Mode>)]
    pub mode: Option<String>,
    /// Source cluster, node, queue.
    pub source_cluster: Option<String>,
    /// See `source_cluster`.
    pub source_node: Option<String>,
    /// See `source_cluster`.
    pub source_queue: Option<String>,
    /// Target cluster, node, queue.
    pub target_cluster: Option<String>,
    /// See `target_cluster`.
    pub target_node: Option<String>,
    /// See `target_cluster`.
    pub target_queue: Option<String>,
    /// The counters (jsonb, written from `Counters`).
    #[schema(value_type = Counters)]
    pub counters: serde_json::Value,
    /// The relay's bookkeeping (jsonb): internal, not shown in a list.
    #[serde(skip_serializing)]
    #[schema(ignore)]
    pub relay: serde_json::Value,
    /// Why it stopped.
    pub stop_reason: Option<String>,
    /// Its last error, in words.
    pub last_error: Option<String>,
    /// The operator who started it.
    pub started_by: Option<String>,
    /// When it was previewed.
    pub created_at: DateTime<Utc>,
    /// When it was executed.
    pub executed_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
    /// When its row last changed (state, counters, anything): what `changed_after` compares (ADR 0025).
    pub updated_at: DateTime<Utc>,
    /// Its staging queue on the source node, once made.
    pub staging_queue: Option<String>,
    /// A Previewed run its preview refused: it can never be executed (fix what the preview lists, preview again).
    pub refused: bool,
    /// How many messages the preview counted in the selection, when it could.
    pub previewed_size: Option<i64>,
    /// For a selection larger than the preview counts: at least this many ("more than N").
    pub previewed_at_least: Option<i64>,
}

/// Which runs [`crate::transfer::view::lines`] lists.
#[derive(Debug, Clone, Default)]
pub struct LinesQuery {
    /// At most this many, newest first.
    pub limit: i64,
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Only runs both of whose clusters this principal may see (docs/permissions.md); `None`: every run.
    pub visible_to: Option<String>,
    /// Only runs after this one in the list's order — made at, and with the id of, the last run of the previous
    /// page: the keyset of the next page (runs made in the same instant are neither skipped nor repeated).
    pub older_than: Option<(DateTime<Utc>, Uuid)>,
    /// Only runs from or to this cluster.
    pub cluster: Option<String>,
    /// Only runs this operator previewed (`started_by`).
    pub started_by: Option<String>,
    /// Only runs from or to this queue.
    pub queue: Option<String>,
    /// Only runs made at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only runs made before this instant.
    pub until: Option<DateTime<Utc>>,
    /// Only runs whose row changed after this instant (`updated_at`; a list's `as_of`, [`changes_as_of`]).
    pub changed_after: Option<DateTime<Utc>>,
}

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
        .bind(query.queue.as_deref())
        .bind(query.changed_after)
        .fetch_all(db)
        .await
}

/// `run_changes_as_of.sql`: the instant a list read after this call is complete up to — every write of a run that
/// commits after the list was read is stamped later (ADR 0025). Call it before the list, as a statement of its own.
pub async fn changes_as_of(db: impl PgExecutor<'_>) -> Result<DateTime<Utc>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_changes_as_of.sql")).fetch_one(db).await
}

/// `run_record.sql`: `None` when the run does not exist.
pub async fn run_record(db: impl PgExecutor<'_>, run: Uuid) -> Result<Option<RunRecord>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_record.sql")).bind(run).fetch_optional(db).await
}

/// `run_visible.sql`: whether `run` exists and `principal` may see both of its clusters.
pub async fn run_visible(db: impl PgExecutor<'_>, run: Uuid, principal: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_visible.sql")).bind(run).bind(principal).fetch_one(db).await
}

/// `run_latest_event_id.sql`: the highest id in `run`'s event log (0 when it has none): where a reader that wants only what is new begins.
pub async fn latest_event_id(db: impl PgExecutor<'_>, run: Uuid) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_latest_event_id.sql")).bind(run).fetch_one(db).await
}

/// `run_rate_samples.sql`: the samples of `run`'s delivered count, one a second at most, oldest first (`run_rate_sample`).
pub async fn rate_samples(db: impl PgExecutor<'_>, run: Uuid) -> Result<Vec<(DateTime<Utc>, i64)>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_rate_samples.sql")).bind(run).fetch_all(db).await
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
