//! The end of a move: the finish (SPEC §4.3) and the return to source (§4.5).
//!
//! Both ignore a stop request: the finish only removes an empty staging queue and ends the run, and a return
//! is itself what an operator asked for after a stop.

use std::collections::HashSet;
use std::ops::ControlFlow;

use serde_json::json;

use super::pipeline;
use super::queues::source_queue_mbean;
use super::refill::whole_queue_left;
use super::returning::ReturnBatch;
use super::row;
use super::run::{load, load_settings};
use super::staged::staging_depth;
use super::state::{Counters, TransferRun};
use super::Code;
use super::{fault, Phase, RelayConfig, RelayError, TransferHandler};
use crate::broker::count::{count_matching, CountLimit};
use crate::broker::jolokia::ObjectName;
use crate::broker::node::NodeAccess;
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::lease::FencedTx;
use crate::jobs::RunState;
use crate::registry::ends;
use crate::transfer::gather::end_facts;
use crate::transfer::plan::{stamped_part, unstamped_part, Selection, Selector};
use crate::transfer::proof::{self, Proof, SourceCount, Verdict};
use crate::transfer::staging::{self, Selected, StagingSpec};

/// How many times an end sends a frozen selection back to taking (a move's refills, a move on one node's chunks)
/// because messages matching it reappeared on the source (given back by a consumer after the last take); after
/// that they are counted as not taken.
pub(crate) const MAX_FINISH_RECHECKS: u32 = 3;

/// What a run selected, as `staging::not_taken` asks for it; `effective` is the plan's effective filter.
pub(crate) fn selected_for_not_taken<'a>(run: &'a TransferRun, effective: &'a str) -> Selected<'a> {
    let t0_millis = run.plan.t0_millis;
    match &run.plan.selection {
        Selection::Ids(_) => Selected::Ids(&run.relay.not_moved),
        Selection::Filter(f) => {
            Selected::Frozen { effective_filter: effective, user_filter: Some(f.as_str()), t0_millis }
        }
        Selection::All => Selected::Frozen { effective_filter: effective, user_filter: None, t0_millis },
    }
}

/// Staging is empty and the selection exhausted: count what was not taken by cause, prove the end against the
/// source broker's counts (`transfer::proof`), remove staging and its settings, and end the run Succeeded — or
/// Partial when anything selected was not taken, was dead-lettered, or is not accounted for. An end the counts
/// do not prove sends the run back to refilling, a bounded number of times.
pub async fn finish(h: &TransferHandler, ctx: &JobContext) -> Result<Outcome, RelayError> {
    let mut run = load(ctx).await?;
    let settings = load_settings(ctx).await?;
    let source = ends::resolve(&ctx.pool, run.plan.source.node_ref(), h.permits()).await?;
    let staging_queue = run.staging_queue.clone().unwrap_or_else(|| staging::staging_queue_name(run.id));
    let spec = StagingSpec { name: staging_queue.clone(), batch_size: settings.batch_size };
    let conn = source.connect(std::time::Duration::from_secs(30)).await?;
    if conn.queue_query(&staging_queue).await?.is_some() {
        let held = staging_depth(&conn, &staging_queue).await?;
        if held > 0 || !run.relay.in_doubt.is_empty() {
            // Something came back to staging (a consumer gone late): relay it before finishing.
            let mut tx = ctx.lease.begin().await?;
            tx.complete_and_enqueue(&Phase::Relay.job()).await?;
            return Ok(Outcome::Committed(tx.commit().await?));
        }
    }
    let _ = conn.close().await;
    recount_staged(ctx, &mut run).await?;

    fault::pause("finish").await;
    let source_mbean = source_queue_mbean(&source, &run);
    let staged = run.counters.staged;
    if let Left::Reappeared = count_not_taken(&source, &source_mbean, &mut run, staged).await? {
        return another_pass(ctx, &mut run, Phase::Relay, None).await;
    }
    let now = source_count_now(&source, &run).await?;
    let proof = prove_end(&run, now, staged);
    let taken_accounted = run.relay.in_doubt.is_empty() && staged == run.counters.left_staging();
    let (proof, nothing_left) = exhaust_unless_counted(proof, &source, &run, staged, taken_accounted).await?;
    // A move's last pass is its refills finding nothing more (the broker's own scan of the whole queue), unless the
    // pass over the source that looked for anything left found something.
    let verdict = proof::verdict(&proof, run.relay.finish_rechecks, nothing_left);
    if verdict == Verdict::AnotherPass {
        return another_pass(ctx, &mut run, Phase::Relay, Some(&proof)).await;
    }
    staging::remove(&source.mgmt, &spec, false).await?;

    let words = end_words(&run.counters, "taken", &proof, &verdict);
    let finished = json!({
        "queue": staging_queue,
        "delivered": run.counters.delivered,
        "not_taken": run.counters.not_taken(),
    });
    let tx = ctx.lease.begin().await?;
    end_run(tx, &mut run, ("staging_removed", finished), &proof, words).await
}

/// Staging is empty and nothing is in doubt, so everything that entered it has left it: `staged` is raised to
/// that where a move into staging landed whose result was never written — a refill made by a worker that had
/// already lost its lease, which the source broker carries out whatever Postgres says, after the worker that took
/// the job over had settled that refill's intent. Said as a `staged_recounted` event, in its own fenced write.
async fn recount_staged(ctx: &JobContext, run: &mut TransferRun) -> Result<(), RelayError> {
    let unrecorded = run.counters.stage_unrecorded(0, 0);
    if unrecorded == 0 {
        return Ok(());
    }
    tracing::warn!(run = %run.id, unrecorded, "staging had held more than the run counted as staged; recounted");
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    let detail = json!({ "unrecorded": unrecorded, "staged": run.counters.staged });
    row::event(tx.conn(), run.id, "staged_recounted", detail).await?;
    tx.commit_progress().await?;
    Ok(())
}

/// What a run's selection left on the source, as its end finds it.
pub(crate) enum Left {
    /// Counted on the run as not taken, by cause.
    Counted,
    /// Messages matching the frozen selection are visible on the source again (a consumer gave them back after
    /// the last take): the run takes another pass.
    Reappeared,
}

/// Counts on `run` what its selection left on the source (`source_mbean` on `source`), by cause — in delivery,
/// scheduled, gone — after `taken` messages left the source; or says the run should take another pass, a bounded
/// number of times ([`MAX_FINISH_RECHECKS`]).
pub(crate) async fn count_not_taken(
    source: &NodeAccess,
    source_mbean: &ObjectName,
    run: &mut TransferRun,
    taken: i64,
) -> Result<Left, RelayError> {
    let frozen_selector = run.plan.frozen_selector()?;
    let effective = frozen_selector.as_ref().map(ToString::to_string).unwrap_or_default();
    let selected = selected_for_not_taken(run, &effective);
    let not_taken = staging::not_taken(&source.mgmt, source_mbean, selected).await?;
    let frozen = !matches!(run.plan.selection, Selection::Ids(_));
    let beyond = beyond_the_count(source, source_mbean, run, frozen_selector.as_ref(), taken).await?;
    // What still matches is in the selection — gone from it once passes are used up — or beyond the count, never
    // both.
    let in_selection = (not_taken.other as i64 - beyond).max(0);
    if frozen && in_selection > 0 && run.relay.finish_rechecks < MAX_FINISH_RECHECKS {
        return Ok(Left::Reappeared);
    }
    run.counters.not_taken_in_delivery = not_taken.in_delivery as i64;
    run.counters.not_taken_scheduled = not_taken.scheduled as i64;
    (run.counters.not_taken_gone, run.counters.beyond_count) = (in_selection, beyond);
    Ok(Left::Counted)
}

/// How many messages on the source the frozen selection (`frozen`) still matches beyond the count at `t0`: once a
/// whole-queue run has taken the count (`taken`), those without a timestamp, which it takes no more of
/// ([`whole_queue_left`]); none before, and none for a filter or ids. A lower bound, as the broker's filtered count
/// is (docs/broker-notes.md).
async fn beyond_the_count(
    source: &NodeAccess,
    source_mbean: &ObjectName,
    run: &TransferRun,
    frozen: Option<&Selector>,
    taken: i64,
) -> Result<i64, RelayError> {
    let Some(frozen) = frozen.filter(|_| whole_queue_left(run, taken) == Some(0)) else {
        return Ok(0);
    };
    let unstamped = source.mgmt.count_messages(source_mbean, Some(&unstamped_part(frozen))).await;
    Ok(unstamped.map_err(staging::StagingError::from)?.max(0))
}

/// How long a pass over the source that looks for anything left may take: the broker reads a deep queue through,
/// sending only what matches.
const EXHAUSTION_PASS_LIMIT: CountLimit = CountLimit { messages: 1, time: std::time::Duration::from_secs(600) };

/// The proof of a move's end (`proof`, from the counts), or — where the counts cannot prove it — the proof by
/// exhaustion (`proof::by_exhaustion`): a Core browse of the source with the frozen filter (for a whole queue, its
/// stamped part: the count at t0 takes the rest) finds nothing, and `taken_accounted`. `taken` is what the run took
/// out of the source. With it, whether that pass found nothing left (true when it was not needed: the refills'
/// own last scan found nothing); a message it found sends the run over the source again.
pub(crate) async fn exhaust_unless_counted(
    proof: Proof,
    source: &NodeAccess,
    run: &TransferRun,
    taken: i64,
    taken_accounted: bool,
) -> Result<(Proof, bool), RelayError> {
    if !matches!(proof, Proof::Unknowable(_)) {
        return Ok((proof, true));
    }
    let Some(frozen) = run.plan.frozen_selector()? else {
        return Ok((proof, true));
    };
    let filter = match whole_queue_left(run, taken) {
        Some(0) => stamped_part(&frozen),
        _ => frozen.to_string(),
    };
    let conn = source.connect(std::time::Duration::from_secs(30)).await?;
    let left = count_matching(&conn, &run.plan.source.queue, Some(&filter), EXHAUSTION_PASS_LIMIT).await;
    let _ = conn.close().await;
    let nothing_left = left?.is_none_left();
    Ok((
        proof::by_exhaustion(proof, proof::Exhaustion { nothing_left: Some(nothing_left), taken_accounted }),
        nothing_left,
    ))
}

/// Ends `run` in `tx` (which the caller may have written in already): its counters (with what the proof found
/// taken beyond the count at `t0`), the event saying how it finished (`finished`: kind and detail), its end proof,
/// and its end state (`proof::end_state`: Succeeded only when proven, else Partial or Unproven) with `words`, in
/// one fenced transaction.
pub(crate) async fn end_run(
    mut tx: FencedTx,
    run: &mut TransferRun,
    finished: (&str, serde_json::Value),
    proof: &Proof,
    words: Vec<String>,
) -> Result<Outcome, RelayError> {
    run.counters.taken_beyond_count = proof.taken_beyond_count();
    let end = proof::end_state(proof, !words.is_empty());
    let words = (!words.is_empty()).then(|| words.join("; "));
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    row::event(tx.conn(), run.id, finished.0, finished.1).await?;
    row::event(tx.conn(), run.id, "end_proof", proof_event(proof)).await?;
    tx.complete_and_end_run(end, words.as_deref()).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// The source queue's counters now (one batched read of the queue and its broker), for the proof of the end.
pub(crate) async fn source_count_now(
    source: &NodeAccess,
    run: &TransferRun,
) -> Result<Option<SourceCount>, RelayError> {
    let facts = end_facts(&source.mgmt, &run.plan.source).await?;
    Ok(facts.queue.state().zip(facts.node.as_ref()).and_then(|(queue, node)| SourceCount::read(queue, &node.broker)))
}

/// The proof of a run's end from its counters: an id selection id by id, a frozen selection against the source
/// broker's counts at `t0` and `now`. `moved_out_by_run` is what the run itself took out of the source queue.
pub(crate) fn prove_end(run: &TransferRun, now: Option<SourceCount>, moved_out_by_run: i64) -> Proof {
    let c = &run.counters;
    let outcome = proof::Outcome {
        delivered: c.delivered,
        dead_lettered: c.dead_lettered,
        not_taken: c.not_taken(),
        returned: c.returned,
        moved_out_by_run,
    };
    match &run.plan.selection {
        Selection::Ids(ids) => proof::prove_each(ids.iter().collect::<HashSet<_>>().len() as i64, outcome),
        Selection::All | Selection::Filter(_) => proof::prove(run.selection_size, run.source_count_at_t0, now, outcome),
    }
}

/// Why a run ends Partial, in words (`verb`: what the run does to a message, "taken" or "copied"); empty when it
/// ends Succeeded.
pub(crate) fn end_words(c: &Counters, verb: &str, proof: &Proof, verdict: &Verdict) -> Vec<String> {
    let mut words = Vec::new();
    if c.not_taken() > 0 {
        let causes: Vec<String> = [
            (c.not_taken_in_delivery, "in delivery to a consumer"),
            (c.not_taken_scheduled, "scheduled for later"),
            (c.not_taken_gone, "gone"),
            (c.not_taken_left, "left on the source by a return"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, why)| format!("{n} {why}"))
        .collect();
        words.push(format!("{} selected messages were not {verb} ({})", c.not_taken(), causes.join(", ")));
    }
    if c.dead_lettered > 0 {
        words.push(format!("{} were dead-lettered", c.dead_lettered));
    }
    if *verdict == Verdict::EndDiffering || matches!(proof, Proof::Unknowable(_)) {
        words.push(proof.words());
    }
    words
}

/// The `end_proof` event: what the broker's counts said of the end.
pub(crate) fn proof_event(proof: &Proof) -> serde_json::Value {
    json!({ "proven": proof.is_proven(), "by": proof.by(), "words": proof.words() })
}

/// Sends the run back over the source once more (`phase`: a relay batch, a local chunk, a copy slice), counting
/// the pass; with `proof`, records why.
pub(crate) async fn another_pass(
    ctx: &JobContext,
    run: &mut TransferRun,
    phase: Phase,
    proof: Option<&Proof>,
) -> Result<Outcome, RelayError> {
    run.relay.exhausted = false;
    run.relay.destination_next = 0;
    run.relay.finish_rechecks += 1;
    run.relay.pass_started_at = Some(run.counters.delivered);
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    if let Some(proof) = proof {
        let mut event = proof_event(proof);
        event["pass"] = json!(run.relay.finish_rechecks);
        row::event(tx.conn(), run.id, "another_pass", event).await?;
    }
    tx.complete_and_enqueue(&phase.job()).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// Return to source (§4.5): settle the in-doubt batch first (re-relayed through the relay's steps,
/// `returning::ReturnBatch`: some of it may already be on the target, and the duplicate id makes each land once),
/// then the broker's move of everything else in staging back to the source queue, then staging removed; Returned.
/// If the target cannot be reached the in-doubt messages stay in staging and the run fails, saying so.
pub async fn return_to_source(
    h: &TransferHandler,
    ctx: &JobContext,
    config: &RelayConfig,
) -> Result<Outcome, RelayError> {
    let mut run = load(ctx).await?;
    let settings = load_settings(ctx).await?;
    {
        let mut tx = ctx.lease.begin().await?;
        row::set_active_state(tx.conn(), run.id, RunState::Returning).await?;
        tx.commit_progress().await?;
    }
    let source = ends::resolve(&ctx.pool, run.plan.source.node_ref(), h.permits()).await?;
    let Some(staging_queue) = run.staging_queue.clone() else {
        // Nothing was ever staged: nothing to return, everything selected is still on the source.
        count_left_on_source(&mut run.counters);
        let mut tx = ctx.lease.begin().await?;
        row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        tx.complete_and_end_run(RunState::Returned, None).await?;
        return Ok(Outcome::Committed(tx.commit().await?));
    };
    let spec = StagingSpec { name: staging_queue.clone(), batch_size: settings.batch_size };
    let source_conn = source.connect(config.connection_ttl).await?;
    let exists = source_conn.queue_query(&staging_queue).await?.is_some();

    if exists && !run.relay.in_doubt.is_empty() {
        let mut settle = ReturnBatch {
            h,
            ctx,
            config,
            settings: &settings,
            run: &mut run,
            source_conn: &source_conn,
            staging_queue: &staging_queue,
        };
        if let ControlFlow::Break(outcome) = pipeline::batch(&mut settle).await? {
            let _ = source_conn.close().await;
            return Ok(outcome);
        }
    }

    if exists {
        move_staging_back(ctx, &source, &source_conn, &spec, &mut run).await?;
    }
    let _ = source_conn.close().await;
    record_returned(ctx, &mut run).await
}

/// The broker's move of everything in staging back to the source queue, counted from broker truth, then staging
/// removed — once nothing of it is still in delivery.
async fn move_staging_back(
    ctx: &JobContext,
    source: &NodeAccess,
    source_conn: &artemis_core::Connection,
    spec: &StagingSpec,
    run: &mut TransferRun,
) -> Result<(), RelayError> {
    let staging_queue = &spec.name;
    let moved = staging::move_back(&source.mgmt, staging_queue, &run.plan.source.queue).await?;
    fault::reach("return");
    let held = staging_depth(source_conn, staging_queue).await?;
    // Broker truth over the answer: everything that entered staging was delivered, dead-lettered, returned or
    // is still held, so an earlier attempt whose move worked but whose count was lost (a crash between the
    // two) is counted too.
    let c = &mut run.counters;
    c.returned = (c.returned + moved as i64).max(c.staged - c.delivered - c.dead_lettered - held);
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.commit_progress().await?;
    if held > 0 {
        return Err(RelayError::transient(
            Code::StagingHeld,
            format!(
                "{held} messages are still in staging {staging_queue} (in delivery to a consumer that is gone?); \
                 the return tries again"
            ),
        ));
    }
    staging::remove(&source.mgmt, spec, false).await?;
    Ok(())
}

/// The run Returned, with what it left on the source counted and its `returned` event, in one fenced transaction.
async fn record_returned(ctx: &JobContext, run: &mut TransferRun) -> Result<Outcome, RelayError> {
    count_left_on_source(&mut run.counters);
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    row::event(
        tx.conn(),
        run.id,
        "returned",
        json!({
            "returned": run.counters.returned,
            "delivered": run.counters.delivered,
            "left_on_source": run.counters.selected.map(|_| run.counters.not_taken_left),
        }),
    )
    .await?;
    tx.complete_and_end_run(RunState::Returned, None).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// A returned run's selection adds up (SPEC §7, I2): what it never took out of the source — the run was stopped
/// before it reached them — is counted as not taken, left on the source. `selected` is the count at t0 (never
/// recomputed); when that is unknown, so is what was left, and the counter stays 0.
fn count_left_on_source(c: &mut Counters) {
    c.not_taken_left = 0;
    if let Some(selected) = c.selected {
        c.not_taken_left = (selected - c.delivered - c.dead_lettered - c.returned - c.not_taken()).max(0);
    }
}
