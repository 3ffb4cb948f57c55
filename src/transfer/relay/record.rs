//! What every relayed batch's record writes — a move's and a copy's alike — inside the fenced transaction that
//! ends the batch: the run's relay state and counters (the batch already added to them), the run Running, and the
//! batch's events. What differs lies around it: a move completes its job and enqueues the next in that same
//! transaction; a copy writes its ledger first and goes on in the same job.

use serde_json::json;
use sqlx::PgConnection;

use super::dmq;
use super::row;
use super::state::{BatchCount, TransferRun};
use super::RelayError;
use crate::jobs::RunState;

/// Writes the batch's part of its fenced record. `Some(words)`: a poison message no dead message queue accepted
/// is back where it came from, its event written — the caller commits what the batch did and the run stops with
/// these words.
pub(crate) async fn write_batch(
    conn: &mut PgConnection,
    run: &TransferRun,
    count: &BatchCount,
    dead: &dmq::Outcome,
) -> Result<Option<String>, RelayError> {
    row::save_holding(&mut *conn, run.id, &run.relay, &run.counters, RunState::Running).await?;
    if count.one_by_one {
        let event = json!({ "batch": count.delivered, "already_on_target": count.already_on_target });
        row::event(&mut *conn, run.id, "one_by_one", event).await?;
    }
    for settled in &dead.dead {
        row::event(&mut *conn, run.id, "dead_lettered", settled.event(run.plan.mode)).await?;
    }
    let Some(words) = &dead.stop else {
        return Ok(None);
    };
    row::event(&mut *conn, run.id, "dead_letter_refused", json!({ "why": words })).await?;
    Ok(Some(words.clone()))
}
