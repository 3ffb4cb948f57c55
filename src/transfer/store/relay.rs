//! What a relay job keeps on its run row between batches ([`crate::transfer::relay::state`]): read at the start
//! of a job, written only inside the transaction its lease fences.

use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use crate::jobs::RunState;
use crate::transfer::relay::state::{Counters, RelayState};

/// The run row as a relay job reads it (`relay_run_load.sql`); the JSON columns are decoded by the caller, which
/// names the column that does not hold what this version writes.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RelayRunRow {
    /// The run.
    pub id: Uuid,
    /// Its state.
    #[sqlx(try_from = "String")]
    pub state: RunState,
    /// Its plan (none on a run not made by a preview).
    pub plan: Option<serde_json::Value>,
    /// The relay's cursor.
    pub relay: serde_json::Value,
    /// Its counters.
    pub counters: serde_json::Value,
    /// Its staging queue, once made.
    pub staging_queue: Option<String>,
    /// What its preview showed.
    pub preview: Option<serde_json::Value>,
    /// Why it was asked to stop.
    pub stop_reason: Option<String>,
}

/// `relay_run_load.sql`: [`sqlx::Error::RowNotFound`] when the run does not exist.
pub async fn relay_run_load(db: &mut PgConnection, run: Uuid) -> Result<RelayRunRow, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/relay_run_load.sql")).bind(run).fetch_one(db).await
}

/// `relay_run_save.sql`: the cursor and the counters.
pub async fn relay_run_save(
    db: impl PgExecutor<'_>,
    run: Uuid,
    relay: &RelayState,
    counters: &Counters,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/relay_run_save.sql"))
        .bind(run)
        .bind(serde_json::to_value(relay).expect("the relay state serialises"))
        .bind(serde_json::to_value(counters).expect("counters serialise"))
        .execute(db)
        .await?;
    Ok(())
}

/// `relay_run_save_holding.sql`: the cursor and the counters, and `state` for a run that holds its slot.
pub async fn relay_run_save_holding(
    db: impl PgExecutor<'_>,
    run: Uuid,
    relay: &RelayState,
    counters: &Counters,
    state: RunState,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/relay_run_save_holding.sql"))
        .bind(run)
        .bind(serde_json::to_value(relay).expect("the relay state serialises"))
        .bind(serde_json::to_value(counters).expect("counters serialise"))
        .bind(state.as_str())
        .execute(db)
        .await?;
    Ok(())
}

/// `relay_run_set_staging.sql`.
pub async fn relay_run_set_staging(db: impl PgExecutor<'_>, run: Uuid, staging: &str) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/relay_run_set_staging.sql")).bind(run).bind(staging).execute(db).await?;
    Ok(())
}

/// `relay_run_set_active_state.sql`: a run that holds its slot goes to `state`; any other is left alone.
pub async fn relay_run_set_active_state(
    db: impl PgExecutor<'_>,
    run: Uuid,
    state: RunState,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/relay_run_set_active_state.sql"))
        .bind(run)
        .bind(state.as_str())
        .execute(db)
        .await?;
    Ok(())
}

/// `run_unsettled.sql`: whether the run has a batch in doubt or a refill of unknown outcome;
/// [`sqlx::Error::RowNotFound`] when it does not exist.
pub async fn run_unsettled(db: impl PgExecutor<'_>, run: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_unsettled.sql")).bind(run).fetch_one(db).await
}
