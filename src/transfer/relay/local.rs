//! A move on one node (docs/guarantees.md): source and target queues on the same broker, so no staging and no relay — the
//! broker's own move straight into the target queue, `moveMessages(flushLimit, filter, target, false, count)` for
//! a filter or the whole queue, `moveMessage(id, target)` for ids. One job per chunk (a batch's worth), paced like
//! the relay, so a stop takes effect between chunks; each chunk's result is counted in a transaction fenced by the
//! job's lease.
//!
//! **Why a crash cannot lose or double a message.** The broker moves each message in a transaction of its own
//! (acknowledge on the source, route to the target, commit; `QueueImpl.moveReferences` passes no shared
//! transaction), so whatever happens to this worker or to the broker, each message is on the source or on the
//! target, once. What a crash can lose is the *answer*: how many the call moved. So, as a refill does (batch.rs),
//! each call's intent is recorded, fenced, before it is made, and its result after. A job that finds an intent
//! still recorded settles it from broker truth:
//!
//! - ids: the intent's ids are handed to the broker again. An id still on the source moves now and is counted;
//!   one in delivery or scheduled is not taken (classified at the end); any other one was moved by the lost call
//!   — or was consumed or expired at that very moment: the two cannot be told apart, so it is counted as
//!   [`Counters::uncertain`](super::state::Counters::uncertain).
//! - a filter or the whole queue: the lost call moved between none and its count, and nothing the broker keeps
//!   says how many (the copies carry `_AMQ_ORIG_QUEUE`, but the target may be consumed, and counting it scans only
//!   a browse page). The count asked is added to `uncertain` as an upper bound, and the run ends Partial saying
//!   so, with `selected` unknown for a filter. This is acceptable because only the counters are unsure — every
//!   message is exactly once on a broker (docs/guarantees.md, I1), the window is one management call wide, and the run says
//!   what it does not know rather than guessing.
//!
//! The target is re-checked before every chunk as a relay batch re-checks it (a target that became filtered,
//! disabled, DROP or purging fails the run before the broker's move would drop messages into it; a target short
//! of room makes the run wait), because the broker's move routes like a send: a dropping target would lose the
//! moved copy after the source was acknowledged.

use std::collections::HashSet;
use std::ops::ControlFlow;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::finish::{
    another_pass, count_not_taken, end_run, end_words, exhaust_unless_counted, prove_end, source_count_now, Left,
};
use super::guard::{check_source_heap, check_target, BatchSize};
use super::queues::{create_target_queue, source_queue_mbean};
use super::refill::{id_chunk, move_frozen_selection, whole_queue_left};
use super::row;
use super::run::{load, load_settings, stop_outcome, wait_for_room, Step};
use super::state::{RefillIntent, TransferRun};
use super::Code;
use super::{fault, Phase, RelayError, TransferHandler};
use crate::broker::jolokia::ObjectName;
use crate::broker::node::NodeAccess;
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::settings::Settings;
use crate::jobs::RunState;
use crate::registry::ends;
use crate::transfer::gather::end_facts;
use crate::transfer::plan::{Mode, QueueRef, Selection};
use crate::transfer::proof::{self, Verdict};
use crate::transfer::staging::{self, StagingError};

/// One job of a move on one node: settle a lost answer, then move one chunk, or end the run once the selection
/// is exhausted. The steps are [`Chunk`]'s methods, in this order.
pub async fn local_move(h: &TransferHandler, ctx: &JobContext) -> Result<Outcome, RelayError> {
    if let Some(revoked) = crate::transfer::permissions::stop_if_revoked(ctx).await? {
        return Ok(revoked);
    }
    let mut c = Chunk::load(h, ctx).await?;
    c.settle_lost_answer().await?;
    if ctx.stop_requested {
        return Ok(stop_outcome(&c.run));
    }
    c.prepare().await?;
    if c.run.relay.exhausted && c.run.relay.retry_ids.is_empty() {
        return finish(ctx, &c.node, &c.source, &mut c.run).await;
    }
    go_on!(c.guard().await);
    let moved = c.move_chunk().await?;
    c.record(moved).await
}

/// What one job of a move on one node works with.
struct Chunk<'a> {
    ctx: &'a JobContext,
    settings: Settings,
    run: TransferRun,
    /// The node holding both queues.
    node: NodeAccess,
    /// The source queue's MBean on it.
    source: ObjectName,
    /// Ids per batched management request.
    id_chunk: usize,
    /// When the job started: its pacing counts from here.
    started: DateTime<Utc>,
}

impl<'a> Chunk<'a> {
    /// The run (refused unless it is a move between two queues of one node), the settings and the node.
    async fn load(h: &TransferHandler, ctx: &'a JobContext) -> Result<Chunk<'a>, RelayError> {
        let started = Utc::now();
        let settings = load_settings(ctx).await?;
        let run = load(ctx).await?;
        if run.plan.mode != Mode::Move || !run.plan.same_node() {
            return Err(RelayError::refused(
                Code::NotThisRun,
                format!(
                    "run {} is not a move between two queues of one node; a move on one node cannot run it",
                    run.id
                ),
            ));
        }
        let node = ends::resolve(&ctx.pool, run.plan.source.node_ref(), h.permits()).await?;
        let source = source_queue_mbean(&node, &run);
        let id_chunk = id_chunk(&settings);
        Ok(Chunk { ctx, settings, run, node, source, id_chunk, started })
    }

    /// A call whose answer a crash lost is settled from broker truth (the module doc), and counted, fenced.
    async fn settle_lost_answer(&mut self) -> Result<(), RelayError> {
        let Some(intent) = self.run.relay.refill.take() else {
            return Ok(());
        };
        let settled = settle(&self.node, &self.source, &mut self.run, &intent, self.id_chunk).await?;
        let mut tx = self.ctx.lease.begin().await?;
        row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
        row::event(tx.conn(), self.run.id, "local_move_settled", settled).await?;
        tx.commit_progress().await?;
        Ok(())
    }

    /// The first job: the target queue created when the preview said the run would create it, and the selection's
    /// size fixed (never recomputed from what was done).
    async fn prepare(&mut self) -> Result<(), RelayError> {
        if self.run.relay.prepared {
            return Ok(());
        }
        let run = &mut self.run;
        if run.create_target {
            create_target_queue(&self.node, run).await?;
        }
        run.relay.prepared = true;
        if run.counters.selected.is_none() {
            run.counters.selected = match &run.plan.selection {
                Selection::Ids(ids) => Some(ids.len() as i64),
                Selection::All | Selection::Filter(_) => run.selection_size,
            };
        }
        let mut tx = self.ctx.lease.begin().await?;
        row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        row::event(
            tx.conn(),
            run.id,
            "local_move_started",
            json!({ "node": self.node.label, "source": run.plan.source.queue, "target": run.plan.target_queue_words() }),
        )
        .await?;
        tx.commit_progress().await?;
        Ok(())
    }

    /// The queue the next chunk moves into (the target, or a retry's original queue) re-checked as before a relay
    /// batch; a filtered move over a paging source waits while the
    /// source broker's heap is nearly full (its scan keeps in the heap what it passes over).
    async fn guard(&mut self) -> Step {
        let (ctx, settings) = (self.ctx, &self.settings);
        let run = &mut self.run;
        let estimate = BatchSize::estimate(&run.counters, self.settings.batch_size.max(1), settings.batch_bytes);
        let Some(into) = destination(run).cloned() else {
            return Ok(ControlFlow::Continue(()));
        };
        let facts = end_facts(&self.node.mgmt, &into).await?;
        let mut waits = check_target(&into, &facts, estimate, settings.capacity_threshold_pct).decided()?;
        if waits.is_none() && run.source_paged && matches!(run.plan.selection, Selection::Filter(_)) {
            waits =
                check_source_heap(&run.plan.source.display(), self.node.mgmt.heap().await.ok().flatten()).decided()?;
        }
        if let Some(words) = waits {
            return Ok(ControlFlow::Break(wait_for_room(ctx, run, settings, words).await?));
        }
        Ok(ControlFlow::Continue(()))
    }

    /// One chunk moved by the broker: ids by `moveMessage`, a filter or the whole queue by one counted
    /// `moveMessages`; each call's intent recorded before it and its result after. How many moved.
    async fn move_chunk(&mut self) -> Result<i64, RelayError> {
        let batch = self.settings.batch_size.max(1);
        match &self.run.plan.selection {
            Selection::Ids(_) => {
                move_ids(self.ctx, &self.node, &self.source, &mut self.run, batch as usize, self.id_chunk).await
            }
            Selection::All | Selection::Filter(_) => {
                move_frozen(self.ctx, &self.node, &self.source, &mut self.run, batch).await
            }
        }
    }

    /// The chunk counted, this job completed and the next enqueued at its pace (this chunk's share of a second at
    /// `messages per second`, from when it started), in one fenced transaction.
    async fn record(mut self, moved: i64) -> Result<Outcome, RelayError> {
        let share = moved.max(1) as f64 / self.settings.messages_per_second.max(0.001);
        let next =
            Phase::LocalMove.job().run_at(self.started + chrono::Duration::milliseconds((share * 1000.0) as i64));
        let run = &mut self.run;
        run.relay.waiting_since = None;
        run.counters.batches += 1;
        let mut tx = self.ctx.lease.begin().await?;
        row::save_holding(tx.conn(), run.id, &run.relay, &run.counters, RunState::Running).await?;
        tx.complete_and_enqueue(&next).await?;
        Ok(Outcome::Committed(tx.commit().await?))
    }
}

/// Records `intent` (fenced) before the broker call it announces.
async fn record_intent(ctx: &JobContext, run: &mut TransferRun, intent: RefillIntent) -> Result<(), RelayError> {
    run.relay.refill = Some(intent);
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.commit_progress().await?;
    Ok(())
}

/// A filter or the whole queue: one counted `moveMessages` of the frozen selection into the target queue. The
/// count never strands scheduled messages here: the frozen filter leaves out everything scheduled after `t0`.
async fn move_frozen(
    ctx: &JobContext,
    node: &NodeAccess,
    source: &ObjectName,
    run: &mut TransferRun,
    batch: u32,
) -> Result<i64, RelayError> {
    let within_count = whole_queue_left(run, run.counters.delivered + run.counters.uncertain);
    let Some(into) = destination(run).cloned() else {
        run.relay.exhausted = true;
        return Ok(0);
    };
    let Some(filter) = run.plan.filter_into(&into)? else {
        return Err(RelayError::refused(Code::NotThisRun, "an id selection has no frozen filter to move by"));
    };
    record_intent(ctx, run, RefillIntent { at: Utc::now(), count: batch, ids: None }).await?;
    let frozen = (&filter, run.plan.t0_millis);
    let moved = match move_frozen_selection(&node.mgmt, source, &into.queue, frozen, batch, within_count).await {
        Ok(moved) => moved as i64,
        Err(e) if e.moved_nothing() => {
            run.relay.refill = None;
            save_progress(ctx, run).await?;
            return Err(e.into());
        }
        // The broker may have moved part of the chunk before failing: the intent stays for the next attempt.
        Err(e) => return Err(e.into()),
    };
    fault::reach("local-move");
    run.relay.refill = None;
    run.counters.delivered += moved;
    // Fewer than asked: nothing more on the source goes to this destination now; after the last destination,
    // nothing more matches the frozen selection (the end looks once more).
    if moved < i64::from(batch) {
        run.relay.destination_next += 1;
    }
    run.relay.exhausted = destination(run).is_none();
    Ok(moved)
}

/// The queue the next chunk of a filter or the whole queue moves into: the target, or the retry's original
/// queue the chunks have reached; `None` once every one has been emptied of the selection.
fn destination(run: &TransferRun) -> Option<&QueueRef> {
    run.plan.destinations().get(run.relay.destination_next).copied()
}

/// Ids: up to a batch of the plan's ids (those of failed calls first), in batched requests of at most `chunk`
/// `moveMessage` calls, each request's intent recorded before it and its result after.
async fn move_ids(
    ctx: &JobContext,
    node: &NodeAccess,
    source: &ObjectName,
    run: &mut TransferRun,
    budget: usize,
    chunk: usize,
) -> Result<i64, RelayError> {
    let Selection::Ids(ids) = run.plan.selection.clone() else {
        return Ok(0);
    };
    let mut moved_here = 0i64;
    let mut left = budget;
    while left > 0 {
        let (part, intent) = if !run.relay.retry_ids.is_empty() {
            let n = run.relay.retry_ids.len().min(chunk).min(left);
            (run.relay.retry_ids[..n].to_vec(), RefillIntent { at: Utc::now(), count: n as u32, ids: None })
        } else {
            let from = run.relay.ids_next.min(ids.len());
            let to = (from + chunk.min(left)).min(ids.len());
            if from == to {
                break;
            }
            (ids[from..to].to_vec(), RefillIntent { at: Utc::now(), count: (to - from) as u32, ids: Some((from, to)) })
        };
        record_intent(ctx, run, intent.clone()).await?;
        let outcome = staging::refill_by_ids(&node.mgmt, source, &run.plan.target.queue, &part).await;
        fault::reach("local-move");
        let failure = match outcome {
            Ok(done) => {
                moved_here += done.moved.len() as i64;
                run.counters.delivered += done.moved.len() as i64;
                run.relay.not_moved.extend(done.not_moved);
                None
            }
            Err(StagingError::IdsFailed { moved, not_moved, failed, staging }) => {
                // Each answer is known: what moved, what was not found, and what failed (a failed call moved
                // nothing, so those ids are handed to the broker again first).
                moved_here += moved.len() as i64;
                run.counters.delivered += moved.len() as i64;
                run.relay.not_moved.extend(not_moved.iter().copied());
                let again: Vec<i64> = failed.iter().map(|(id, _)| *id).collect();
                Some((StagingError::IdsFailed { staging, moved, not_moved, failed }, again))
            }
            Err(e) if e.moved_nothing() => {
                run.relay.refill = None;
                save_progress(ctx, run).await?;
                return Err(e.into());
            }
            // The answer was lost: the intent stays, and the next attempt settles it.
            Err(e) => return Err(e.into()),
        };
        consume_intent(run, &intent, ids.len());
        if let Some((e, again)) = failure {
            let queued: HashSet<i64> = run.relay.retry_ids.iter().copied().collect();
            run.relay.retry_ids.extend(again.into_iter().filter(|id| !queued.contains(id)));
            run.relay.exhausted = false;
            save_progress(ctx, run).await?;
            return Err(e.into());
        }
        save_progress(ctx, run).await?;
        left -= part.len();
    }
    run.relay.exhausted = run.relay.ids_next >= ids.len() && run.relay.retry_ids.is_empty();
    Ok(moved_here)
}

/// The intent's ids are answered: the cursor moves past them (or they leave the retry list).
fn consume_intent(run: &mut TransferRun, intent: &RefillIntent, total: usize) {
    run.relay.refill = None;
    match intent.ids {
        Some((_, to)) => run.relay.ids_next = to.min(total),
        None => {
            let n = (intent.count as usize).min(run.relay.retry_ids.len());
            run.relay.retry_ids.drain(..n);
        }
    }
    run.relay.exhausted = run.relay.ids_next >= total && run.relay.retry_ids.is_empty();
}

async fn save_progress(ctx: &JobContext, run: &TransferRun) -> Result<(), RelayError> {
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.commit_progress().await?;
    Ok(())
}

/// Settles a call whose answer was lost (see the module doc); returns what it learnt, for the run's events.
async fn settle(
    node: &NodeAccess,
    source: &ObjectName,
    run: &mut TransferRun,
    intent: &RefillIntent,
    chunk: usize,
) -> Result<serde_json::Value, RelayError> {
    let Selection::Ids(ids) = run.plan.selection.clone() else {
        run.counters.uncertain += i64::from(intent.count);
        return Ok(json!({ "asked": intent.count, "uncertain": intent.count, "at": intent.at }));
    };
    let part: Vec<i64> = match intent.ids {
        Some((from, to)) => ids[from.min(ids.len())..to.min(ids.len())].to_vec(),
        None => run.relay.retry_ids.iter().copied().take(intent.count as usize).collect(),
    };
    let mut moved = Vec::new();
    let mut not_found = Vec::new();
    let mut failed = Vec::new();
    for piece in part.chunks(chunk.max(1)) {
        match staging::refill_by_ids(&node.mgmt, source, &run.plan.target.queue, piece).await {
            Ok(done) => {
                moved.extend(done.moved);
                not_found.extend(done.not_moved);
            }
            Err(StagingError::IdsFailed { moved: m, not_moved: n, failed: f, .. }) => {
                moved.extend(m);
                not_found.extend(n);
                failed.extend(f.into_iter().map(|(id, _)| id));
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Not found now: in delivery or scheduled means not taken (classified at the end); otherwise the lost call
    // moved it, or it was consumed or expired at that moment.
    let delivering = node.mgmt.list_delivering_messages(source).await?;
    let scheduled = node.mgmt.list_scheduled_messages(source).await?;
    let held: HashSet<i64> =
        delivering.iter().chain(scheduled.iter()).filter_map(|m| m["messageID"].as_i64()).collect();
    let (still_there, uncertain): (Vec<i64>, Vec<i64>) = not_found.iter().partition(|id| held.contains(id));
    run.counters.delivered += moved.len() as i64;
    run.counters.uncertain += uncertain.len() as i64;
    run.relay.not_moved.extend(still_there.iter().copied());
    consume_intent(run, intent, ids.len());
    let queued: HashSet<i64> = run.relay.retry_ids.iter().copied().collect();
    run.relay.retry_ids.extend(failed.iter().copied().filter(|id| !queued.contains(id)));
    if !run.relay.retry_ids.is_empty() {
        run.relay.exhausted = false;
    }
    Ok(json!({
        "asked": part.len(),
        "moved_now": moved.len(),
        "not_taken": still_there,
        "uncertain": uncertain,
        "failed_again": failed,
        "at": intent.at,
    }))
}

/// The selection is exhausted: count what was not taken by cause, and end the run Succeeded — or Partial when
/// anything selected was not taken or its fate is uncertain. There is no staging to remove.
async fn finish(
    ctx: &JobContext,
    node: &NodeAccess,
    source: &ObjectName,
    run: &mut TransferRun,
) -> Result<Outcome, RelayError> {
    let moved_out = run.counters.delivered + run.counters.uncertain;
    if let Left::Reappeared = count_not_taken(node, source, run, moved_out).await? {
        return another_pass(ctx, run, Phase::LocalMove, None).await;
    }
    let now = source_count_now(node, run).await?;
    // What the broker moved out of the source: every delivered message, and up to `uncertain` more.
    let taken = run.counters.delivered + run.counters.uncertain;
    let proof = prove_end(run, now, taken);
    let (proof, nothing_left) = exhaust_unless_counted(proof, node, run, taken, run.counters.uncertain == 0).await?;
    let verdict = proof::verdict(&proof, run.relay.finish_rechecks, nothing_left);
    if verdict == Verdict::AnotherPass && run.counters.uncertain == 0 {
        return another_pass(ctx, run, Phase::LocalMove, Some(&proof)).await;
    }
    let c = &run.counters;
    let mut words = end_words(c, "taken", &proof, &verdict);
    if c.uncertain > 0 {
        words.push(format!(
            "the broker's answer to a move was lost (a worker crash or an error mid-call): up to {} messages may \
             have been moved without being counted — each is either on the target queue or still where it was, \
             never lost or doubled",
            c.uncertain
        ));
    }
    let finished = json!({ "delivered": c.delivered, "not_taken": c.not_taken(), "uncertain": c.uncertain });
    let tx = ctx.lease.begin().await?;
    end_run(tx, run, ("local_move_finished", finished), &proof, words).await
}
