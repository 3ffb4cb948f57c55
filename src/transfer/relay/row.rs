//! The run row as a relay job reads and writes it: [`load`] at the start of a job, the cursor and counters
//! ([`save`]), the staging queue, the active state and events written inside the transaction its lease fences.
//! What the row holds is [`super::state`]; the SQL is the store's ([`crate::transfer::store::relay`]).

use sqlx::PgConnection;
use uuid::Uuid;

use super::state::{Counters, RelayState, TransferRun};
use crate::jobs::model::RunId;
use crate::jobs::RunState;
use crate::transfer::plan::Plan;
use crate::transfer::store::relay as relay_store;

/// Why a run row could not be read as a move.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Postgres.
    #[error("reading the run: {0}")]
    Db(#[from] sqlx::Error),
    /// A column did not hold what this version writes.
    #[error("the run's {column} cannot be read: {source}")]
    Decode {
        /// Which column.
        column: &'static str,
        /// Why.
        source: serde_json::Error,
    },
    /// The run has no plan (it was not made by a preview).
    #[error("run {0} has no plan: it was not made by a preview")]
    NoPlan(Uuid),
}

/// Reads the run `id` as a move (inside a fenced transaction, or on the pool for a first look).
pub async fn load(conn: &mut PgConnection, id: Uuid) -> Result<TransferRun, StateError> {
    let row = relay_store::relay_run_load(conn, id).await?;
    let plan = row.plan.ok_or(StateError::NoPlan(row.id))?;
    let plan: Plan = serde_json::from_value(plan).map_err(|source| StateError::Decode { column: "plan", source })?;
    let relay = serde_json::from_value(row.relay).map_err(|source| StateError::Decode { column: "relay", source })?;
    let counters =
        serde_json::from_value(row.counters).map_err(|source| StateError::Decode { column: "counters", source })?;
    let found = |code: &str| {
        row.preview
            .as_ref()
            .and_then(|p| p.get("findings"))
            .and_then(|f| f.as_array())
            .is_some_and(|f| f.iter().any(|x| x.get("code").and_then(|c| c.as_str()) == Some(code)))
    };
    let create_target = found("target-queue-created");
    let source_paged = found("source-paged");
    let selection_size = row.preview.as_ref().and_then(|p| p.get("selection_size")).and_then(|v| v.as_i64());
    let source_count_at_t0 = row
        .preview
        .as_ref()
        .and_then(|p| p.get("source_count_at_t0"))
        .and_then(|v| serde_json::from_value(v.clone()).ok());
    Ok(TransferRun {
        id: row.id,
        plan,
        relay,
        counters,
        staging_queue: row.staging_queue,
        state: row.state,
        create_target,
        source_paged,
        selection_size,
        source_count_at_t0,
        stop_reason: row.stop_reason,
    })
}

/// Writes the cursor and the counters (call inside the job's fenced transaction).
pub async fn save(
    conn: &mut PgConnection,
    id: Uuid,
    relay: &RelayState,
    counters: &Counters,
) -> Result<(), sqlx::Error> {
    relay_store::relay_run_save(conn, id, relay, counters).await
}

/// [`save`] and [`set_active_state`] in one statement (fenced): the cursor and counters, and `state` for a run
/// that holds its slot.
pub async fn save_holding(
    conn: &mut PgConnection,
    id: Uuid,
    relay: &RelayState,
    counters: &Counters,
    state: RunState,
) -> Result<(), sqlx::Error> {
    debug_assert!(matches!(state, RunState::Running | RunState::Waiting | RunState::Returning));
    relay_store::relay_run_save_holding(conn, id, relay, counters, state).await
}

/// Records the staging queue's name on the run (fenced).
pub async fn set_staging(conn: &mut PgConnection, id: Uuid, staging: &str) -> Result<(), sqlx::Error> {
    relay_store::relay_run_set_staging(conn, id, staging).await
}

/// Sets the state of a run that holds its slot: `running` or `waiting` (for room on the target). A run in any
/// other state is left alone.
pub async fn set_active_state(conn: &mut PgConnection, id: Uuid, state: RunState) -> Result<(), sqlx::Error> {
    debug_assert!(matches!(state, RunState::Running | RunState::Waiting | RunState::Returning));
    relay_store::relay_run_set_active_state(conn, id, state).await
}

/// Records an event on the run (inside the caller's transaction), by the one statement every event of a run is
/// written with (`crate::jobs::store::record::run_event_insert`).
pub async fn event(
    conn: &mut PgConnection,
    id: Uuid,
    kind: &str,
    detail: serde_json::Value,
) -> Result<(), crate::jobs::Error> {
    crate::jobs::store::record::run_event_insert(conn, RunId(id), kind, &detail).await
}
