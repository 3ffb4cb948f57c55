//! The run a job works on, and the outcomes that pause or end it without a batch: a stop, a wait for room on the
//! target, a batch the duplicate-id window holds back, a batch in doubt whose target lost its cache.

use std::ops::ControlFlow;

use chrono::Utc;
use serde_json::json;

use super::row;
use super::state::TransferRun;
use super::window::{self, Room};
use super::Code;
use super::RelayError;
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::lease::RunEnd;
use crate::jobs::settings::{self, Settings};
use crate::jobs::RunState;

/// A step's result in a relay job: go on with a value, or end the job with an outcome.
pub(crate) type Step<T = ()> = Result<ControlFlow<Outcome, T>, RelayError>;

pub(crate) async fn load(ctx: &JobContext) -> Result<TransferRun, RelayError> {
    let mut conn = ctx.pool.acquire().await?;
    Ok(row::load(&mut conn, ctx.job.run_id.0).await?)
}

pub(crate) async fn load_settings(ctx: &JobContext) -> Result<Settings, RelayError> {
    settings::load(&ctx.pool).await.map_err(|e| RelayError::transient_in(Code::Database, "reading the settings", e))
}

pub(crate) fn stop_outcome(run: &TransferRun) -> Outcome {
    Outcome::Stop { reason: run.stop_reason.clone().unwrap_or_else(|| "stop requested".into()) }
}

/// Stops a run whose batch in doubt cannot be sent again safely ([`window::Resend::CacheLost`]), naming its ids
/// and where they are held. The batches' marks take the target's new start, so a resume — the operator's word
/// that the target does not hold them (any more) — sends them again. The new mark and the stop are one
/// transaction: a mark written without the stop would let the job's next attempt, with no operator's word,
/// read the target as unchanged since the batch was sent and send the batch again blind.
pub(crate) async fn stop_for_lost_cache(
    ctx: &JobContext,
    run: &mut TransferRun,
    target_started: Option<i64>,
    ids: &[i64],
    held_in: &str,
) -> Result<Outcome, RelayError> {
    let words = window::cache_lost_words(run.id, &run.plan.target, ids, held_in);
    run.relay.in_doubt.restart_windows(target_started);
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    row::event(tx.conn(), run.id, "in_doubt_cache_lost", json!({ "ids": ids, "words": words })).await?;
    tracing::info!(reason = %words, "run ends stopped: its target lost the duplicate-id cache of a batch in doubt");
    tx.end_run(&RunEnd::stopped(words)).await?;
    let committed = tx.commit().await?;
    super::fault::reach("cache-lost");
    Ok(Outcome::Committed(committed))
}

/// A batch the duplicate-id window holds back (it is already rolled back to where it came from): the run waits
/// for room, or retries when the target's cache could not be read.
pub(crate) async fn hold_back(
    ctx: &JobContext,
    run: &mut TransferRun,
    settings: &Settings,
    room: Room,
) -> Result<Outcome, RelayError> {
    match room {
        Room::Full(words) => wait_for_room(ctx, run, settings, words).await,
        Room::Unknown(words) => Err(RelayError::transient(Code::DuplicateWindow, words)),
        Room::Open { .. } | Room::NoCache => Err(RelayError::transient(
            Code::DuplicateWindow,
            "the duplicate-id window held back a batch it had room for",
        )),
    }
}

/// The target has no room: wait (Waiting, backoff 1 s → 30 s) until `capacity wait` runs out, then stop saying
/// why. A stop request is honoured while waiting (the job is pending, so the stop takes effect at once).
pub(crate) async fn wait_for_room(
    ctx: &JobContext,
    run: &mut TransferRun,
    settings: &Settings,
    why: String,
) -> Result<Outcome, RelayError> {
    let now = Utc::now();
    let since = *run.relay.waiting_since.get_or_insert(now);
    let waited = now - since;
    let limit = chrono::Duration::seconds(settings.capacity_wait_secs as i64);
    let mut tx = ctx.lease.begin().await?;
    if waited >= limit {
        run.relay.waiting_since = None;
        row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        tx.commit_progress().await?;
        return Ok(Outcome::Stop {
            reason: format!(
                "the run waited {} s for room (capacity wait {} s): {why}",
                waited.num_seconds(),
                settings.capacity_wait_secs
            ),
        });
    }
    let first = waited.is_zero();
    row::save_holding(tx.conn(), run.id, &run.relay, &run.counters, RunState::Waiting).await?;
    if first {
        row::event(tx.conn(), run.id, "waiting_for_room", json!({ "why": why })).await?;
    }
    tx.commit_progress().await?;
    let delay = waited.num_milliseconds().clamp(1_000, 30_000);
    let until = (now + chrono::Duration::milliseconds(delay)).min(since + limit);
    Ok(Outcome::Snooze { until, reason: why })
}
