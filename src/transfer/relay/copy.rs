//! A copy (SPEC §5): browse the source with the frozen selection, relay to the target in transactions exactly
//! as a move does, and record what was copied in a Postgres ledger. The source is never touched: a browser does
//! not consume, and delivery counts do not change.
//!
//! A browser cannot resume at a position, so one job — a **slice** — keeps its browser open across many
//! batches for up to [`SLICE`] (its lease heartbeated meanwhile), committing the ledger and the counters after
//! each batch (fenced), then enqueues its continuation. Only a continuation or a crash browses from the head
//! again, skipping what the ledger holds. A slice ends by half the job deadline when that is shorter
//! ([`RelayConfig::within_deadline`]), and a paced wait that would outlast it ends it at once, its continuation
//! due when the wait would have ended: a slice is never stopped at the deadline while it is working.
//!
//! Each batch is the copy's take ([`CopyBatch`]) through the steps every relay batch goes through
//! (`pipeline::batch`):
//!
//! | step | durable before the next step | a crash right after it |
//! |---|---|---|
//! | [`Slice::browse`] up to a batch, minus ledger ids (first what was browsed ahead) | nothing | nothing happened |
//! | [`Slice::mark_in_doubt`] | the batch's ids, fenced, counted into the target's duplicate-id window beside the batch before it when that one waits for its record | re-browsed and re-sent; so is the batch before it, committed on the target and not yet recorded, which the target's duplicate cache drops |
//! | [`Slice::send`], the target commit; beside it the next batch browsed ahead (in memory and the spool only) and the batch before it recorded | the target holds the batch | re-browsed and re-sent; the target's duplicate cache drops them (one by one) |
//! | [`Slice::dead_letter`] | proven poison on a DMQ | re-proven; the DMQ drops its duplicate id |
//! | [`Slice::record`]: ledger + counters, fenced — written beside the next batch's send, or at once for a batch that dead-lettered, the selection's last, a stop's, or before the slice writes anything else | the batch is recorded | — |
//!
//! Two batches are in flight from the target's commit of one to its record (docs/adr/0011, "Two batches in
//! flight"): the next batch is marked in doubt after that commit and its mark commits first, so Postgres never
//! says less is in doubt than the target may hold; the record that follows writes both as they then are.
//!
//! The duplicate id of each message is `studio:<run>:<source message id>`: stable across every browse.
//!
//! The retry budget (10 attempts) is meant per batch, as a move spends it: a move's batch is one job. A slice is
//! one job for many batches, so a slice that copied and then lost its worker or its source would spend an
//! attempt of one budget for the whole slice, and a long copy under a few unrelated faults would end Interrupted
//! while it was making progress. So a later attempt of a slice whose earlier attempt recorded copied messages
//! hands over to a fresh slice job ([`hand_over`]): the budget counts attempts in a row that copied nothing.

use std::collections::{HashSet, VecDeque};
use std::ops::ControlFlow;
use std::time::Duration;

use artemis_core::{Browser, ConsumerOptions, Session, SessionOptions};
use chrono::{DateTime, Utc};
use serde_json::json;

use super::beside::Beside;
use super::dmq;
use super::finish::{another_pass, end_run, end_words, prove_end, source_count_now};
use super::guard::{check_target, BatchSize};
use super::laps::Laps;
use super::pipeline::{self, Dealt, Take};
use super::poison::Poison;
use super::queues::{target_facts, target_facts_in, TargetRead, AHEAD_FRESH};
use super::receive::{Limits, Received, Taken};
use super::record::write_batch;
use super::refill::whole_queue_left;
use super::row;
use super::run::{hold_back, load, load_settings, stop_for_lost_cache, stop_outcome, wait_for_room, Step};
use super::send::{full_words, send_taken, Landed, Route, SendFailure, TargetWatch};
use super::spool::SpoolFile;
use super::state::{BatchCount, JobAttempt, TransferRun};
use super::window::{self, Resend};
use super::Code;
use super::{fault, Phase, RelayConfig, RelayError, TransferHandler};
use crate::broker::core_pool::Link;
use crate::broker::jolokia::BrokerState;
use crate::broker::node::NodeAccess;
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::settings::Settings;
use crate::registry::ends;
use crate::transfer::facts::EndFacts;
use crate::transfer::plan::{is_unstamped, Mode, Selection};
use crate::transfer::proof::{self, Verdict};
use crate::transfer::staging::{self, Selected};
use crate::transfer::store::ledger as ledger_store;

/// How long one copy job keeps its browser. Each continuation browses again from the head past everything
/// already copied (the source keeps it), so a slice must be long against a copy's usual length for the cost to
/// stay linear: at a few thousand messages a second, ten minutes covers a million messages in one browse. The
/// slice ends sooner when the worker shuts down (SIGTERM), so a graceful stop is not held up by it, and under a
/// job deadline shorter than twice this ([`RelayConfig::copy_slice`]).
pub const SLICE: Duration = Duration::from_secs(600);

/// One slice of a copy: batches from one browser until the slice's time is up, the selection is browsed to its
/// end (then the finish), a stop is asked for, or the target has no room. Each batch is the steps of
/// [`Slice::batch`], in the order of the module doc's table.
pub async fn copy_slice(h: &TransferHandler, ctx: &JobContext, config: &RelayConfig) -> Result<Outcome, RelayError> {
    let slice_started = std::time::Instant::now();
    let mut run = load(ctx).await?;
    if let Some(outcome) = before_the_slice(h, ctx, &mut run).await? {
        return Ok(outcome);
    }
    let mut slice = Slice::open(h, ctx, config, run).await?;
    loop {
        let batched = match slice.batch().await? {
            ControlFlow::Continue(batched) => batched,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        if batched.last || slice_started.elapsed() >= config.copy_slice || !ctx.lease.worker_accepting() {
            break;
        }
        let due = batched.next_due();
        let wait = (due - Utc::now()).to_std().unwrap_or_default();
        if slice_started.elapsed() + wait >= config.copy_slice {
            // The paced wait would outlast the slice: the continuation waits instead, queued, holding no browser.
            return slice.end(Some(due)).await;
        }
        if !wait.is_zero() {
            // A paced slice records each batch before it waits: nothing is left in doubt over a wait.
            slice.settle_unrecorded().await?;
            if slice.stop_after {
                return Ok(stop_outcome(&slice.run));
            }
            tokio::time::sleep(wait).await;
        }
    }
    slice.end(None).await
}

/// What a slice settles before it browses: a job of the wrong mode refused, a later attempt of a slice that
/// copied handed over, a stop with nothing in doubt taken, the selection's size kept, and the target queue the
/// preview promised created. `Some`: the job's outcome without a browse.
async fn before_the_slice(
    h: &TransferHandler,
    ctx: &JobContext,
    run: &mut TransferRun,
) -> Result<Option<Outcome>, RelayError> {
    if run.plan.mode != Mode::Copy {
        return Err(RelayError::refused(
            Code::NotThisRun,
            format!("run {} is a move; a copy job cannot run it", run.id),
        ));
    }
    if run.relay.progressed_in.is_some_and(|p| p.is_earlier_attempt_of(&JobAttempt::of(&ctx.job))) {
        return hand_over(ctx, run).await.map(Some);
    }
    if ctx.stop_requested && run.relay.in_doubt.is_empty() {
        // Nothing is in doubt between a copy's batches: the ledger and the target's duplicate cache agree. A batch
        // sent before a crash but not in the ledger is settled first (one batch, below), then the run stops.
        return Ok(Some(stop_outcome(run)));
    }
    if run.counters.selected.is_none() {
        run.counters.selected = match &run.plan.selection {
            Selection::Ids(ids) => Some(ids.len() as i64),
            _ => run.selection_size,
        };
    }
    if run.create_target && !run.relay.prepared {
        // The preview promised to create the missing target queue, as a move does (never left to auto-create).
        let target = ends::resolve_cached(&ctx.pool, run.plan.target.node_ref(), h.permits(), &h.ends).await?;
        super::queues::create_target_queue(&target, run).await?;
        run.relay.prepared = true;
        let mut tx = ctx.lease.begin().await?;
        row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        row::event(tx.conn(), run.id, "target_queue_created", json!({ "queue": run.plan.target.display() })).await?;
        tx.commit_progress().await?;
    }
    Ok(None)
}

/// One copy job's browser of the source and what its batches share.
struct Slice<'a> {
    h: &'a TransferHandler,
    ctx: &'a JobContext,
    config: &'a RelayConfig,
    run: TransferRun,
    source_conn: Link,
    browse_session: Session,
    browser: Browser,
    /// An id selection's ids; `None`: every message the browser's filter lets through.
    wanted: Option<HashSet<i64>>,
    /// Kept across the slice's batches while its sessions close cleanly.
    target_conn: Option<Link>,
    /// The transacted session the slice's batches are sent in, kept across them while each commits.
    target_session: Option<Session>,
    /// Browsed ahead while the previous batch was sent: selected, not in the ledger, in browse order (the whole-queue
    /// room is spent when a batch takes them).
    ahead: VecDeque<Received>,
    /// The browser has reached the end of the queue (what `ahead` holds is the last of it).
    ahead_end: bool,
    /// A browse ahead that failed: the browser may have passed messages it could not hand over, so the slice goes
    /// no further with it (the next batch's browse answers this error, and a continuation browses afresh).
    ahead_failed: Option<RelayError>,
    browsed_to_end: bool,
    /// A whole-queue copy: how many more it may copy before the count at `t0` leaves no room for a message without
    /// a timestamp ([`whole_queue_left`]); set before each batch, spent by every message the batch takes.
    unstamped_room: Option<u32>,
    /// The target's facts for the next batch, read from the last batch's target commit on, beside its record: the
    /// next batch's guard uses them while fresh ([`AHEAD_FRESH`]), as "capacity is re-checked before every batch"
    /// allows of a read that follows the previous batch's commit.
    facts_ahead: Option<Beside<Result<TargetRead, RelayError>>>,
    /// Where the batch under way spent its time (the `batch timings` debug line).
    laps: Laps,
    /// The last batch, committed on the target and not yet recorded: its record is written beside the next
    /// batch's send, once that batch's in-doubt mark has committed (docs/adr/0011, "Two batches in flight"), or
    /// before anything else the slice writes ([`Slice::settle_unrecorded`]). Until then Postgres holds it in
    /// doubt, as a crash right after its target commit would leave it.
    unrecorded: Option<Dealt>,
    /// A record written beside a send found a stop asked for: the batch in flight is recorded, then the run stops.
    stop_after: bool,
}

/// What a batch's record said of the slice.
enum Recorded {
    GoOn,
    /// A stop was asked for.
    StopAsked,
    /// A poison message no dead message queue accepted: the run stops, in these words.
    DeadLetterRefused(String),
}

/// A batch a slice copied (or found nothing to copy).
struct Batched {
    /// Copied by it.
    messages: i64,
    /// When it started, and the rate it is paced at.
    started: DateTime<Utc>,
    rate: f64,
    /// Whether the slice ends after it (the selection browsed to its end, or nothing left to copy).
    last: bool,
}

impl Batched {
    /// When the next batch may start: this batch's share of a second at its rate, from when it started (pacing).
    fn next_due(&self) -> DateTime<Utc> {
        let share_secs = self.messages as f64 / self.rate.max(0.001);
        self.started + chrono::Duration::milliseconds((share_secs * 1000.0) as i64)
    }
}

/// One batch of a slice: the copy's take (the module doc's table), browsed past the ledger, the source never
/// touched.
struct CopyBatch<'s, 'a> {
    slice: &'s mut Slice<'a>,
    started: DateTime<Utc>,
    settings: Settings,
    /// The target and its facts, read as the batch began (beside the grants and the settings).
    read: Option<(NodeAccess, EndFacts)>,
    /// At most this many (what is left of a whole-queue copy, the batch size).
    batch_size: usize,
}

/// What a copy's batch works with from its guard to its record.
struct Ready {
    target: NodeAccess,
    facts: EndFacts,
    route: Route,
    batch_size: usize,
}

impl Take for CopyBatch<'_, '_> {
    type Ready = Ready;
    type Done = Batched;

    /// The target guarded, with the batch no larger than its duplicate-id cache can hold.
    async fn prepare(&mut self) -> Step<Ready> {
        let (slice, settings) = (&mut *self.slice, &self.settings);
        let (target, facts) = match self.read.take() {
            Some(read) => read,
            None => target_facts(slice.h, slice.ctx, &slice.run.plan.target).await?,
        };
        let cap = window::batch_cap(settings.batch_size.max(1), facts.duplicate_cache_size()) as usize;
        let batch_size = self.batch_size.min(cap);
        if let Some(words) = guard_target(&slice.run, &facts, batch_size, settings)? {
            slice.settle_unrecorded().await?;
            return Ok(ControlFlow::Break(wait_for_room(slice.ctx, &mut slice.run, settings, words).await?));
        }
        let route = Route::of(&slice.run, &facts);
        slice.laps.lap("guard");
        Ok(ControlFlow::Continue(Ready { target, facts, route, batch_size }))
    }

    async fn take(&mut self, ready: &mut Ready) -> Result<Taken, RelayError> {
        let browsed = self.slice.browse(ready.batch_size, &self.settings).await?;
        self.slice.laps.lap("browse");
        fault::reach("copy-browse");
        Ok(browsed)
    }

    /// The selection is browsed to its end: the slice ends.
    async fn nothing_taken(&mut self, _: Ready) -> Step<Batched> {
        Ok(ControlFlow::Continue(Batched { messages: 0, started: self.started, rate: 1.0, last: true }))
    }

    async fn open_target(&mut self, ready: &mut Ready) -> Result<(), RelayError> {
        let slice = &mut *self.slice;
        if slice.target_conn.is_none() {
            slice.target_conn = Some(slice.h.links.take(&ready.target, slice.config.connection_ttl).await?);
            slice.laps.lap("target-connect");
        }
        Ok(())
    }

    async fn mark_in_doubt(&mut self, ready: &mut Ready, taken: &Taken) -> Step {
        self.slice.mark_in_doubt(taken, &ready.facts, &self.settings).await
    }

    async fn send(&mut self, ready: &mut Ready, taken: &Taken) -> Step<Landed> {
        self.slice.send(taken, &ready.route, &self.settings).await
    }

    /// Nothing: a copy never touches the source.
    async fn settle_source(&mut self, _: &mut Ready, _: &Taken, _: &Landed) -> Result<(), RelayError> {
        Ok(())
    }

    async fn dead_letter(
        &mut self,
        ready: &mut Ready,
        taken: Taken,
        poison: Vec<Poison>,
    ) -> Result<dmq::Outcome, RelayError> {
        self.slice.dead_letter(&taken, poison, &ready.route, &self.settings).await
    }

    /// The ledger and counters recorded; the batch's pacing for the slice.
    async fn record(&mut self, _: Ready, dealt: Dealt) -> Step<Batched> {
        let messages = dealt.count.delivered;
        self.slice.read_ahead();
        let last = self.slice.browsed_to_end;
        if self.slice.may_record_later(&dealt) {
            self.slice.unrecorded = Some(dealt);
            self.slice.laps.lap("record-later");
            tracing::debug!(run = %self.slice.run.id, laps = %self.slice.laps, "batch timings");
        } else {
            go_on_step!(self.slice.record(dealt).await);
        }
        Ok(ControlFlow::Continue(Batched {
            messages,
            started: self.started,
            rate: self.settings.messages_per_second,
            last,
        }))
    }
}

impl<'a> Slice<'a> {
    /// The source's browser with the frozen filter (a browse consumes nothing).
    async fn open(
        h: &'a TransferHandler,
        ctx: &'a JobContext,
        config: &'a RelayConfig,
        run: TransferRun,
    ) -> Result<Slice<'a>, RelayError> {
        let source = ends::resolve_cached(&ctx.pool, run.plan.source.node_ref(), h.permits(), &h.ends).await?;
        let source_conn = h.links.take(&source, config.connection_ttl).await?;
        let browse_session = source_conn.create_session(SessionOptions::auto_commit()).await?;
        let mut options = ConsumerOptions::default();
        if let Some(filter) = run.plan.effective_filter()? {
            options = options.filter(filter);
        }
        let browser = match browse_session.create_browser(&run.plan.source.queue, options).await {
            Ok(b) => b,
            Err(e) if e.is_not_authorized() => {
                return Err(RelayError::refused(
                    Code::NotAuthorized,
                    format!(
                        "the broker refused to let the relay browse {}: {e} (the relay's user needs `browse` on it)",
                        run.plan.source.display()
                    ),
                ))
            }
            Err(e) => return Err(e.into()),
        };
        let wanted = match &run.plan.selection {
            Selection::Ids(ids) => Some(ids.iter().copied().collect()),
            _ => None,
        };
        Ok(Slice {
            h,
            ctx,
            config,
            run,
            source_conn,
            browse_session,
            browser,
            wanted,
            target_conn: None,
            target_session: None,
            ahead: VecDeque::new(),
            ahead_end: false,
            ahead_failed: None,
            browsed_to_end: false,
            unstamped_room: None,
            facts_ahead: None,
            laps: Laps::start(),
            unrecorded: None,
            stop_after: false,
        })
    }

    /// One batch: grants re-checked, what is left to copy counted, then the copy's [`Take`] through the steps
    /// every batch goes through (`pipeline::batch`): the target guarded, a batch browsed past the ledger, marked in
    /// doubt, sent, its poison dead-lettered, and the ledger and counters recorded.
    async fn batch(&mut self) -> Step<Batched> {
        // Before every batch, as a move's (docs/permissions.md): nothing is in doubt between a copy's batches, so a revoked
        // grant stops the run at once. The grants, the settings and the target's facts are read side by side.
        let started = Utc::now();
        self.laps = Laps::start();
        let ahead = self.facts_ahead.take().filter(|reading| reading.since.elapsed() < AHEAD_FRESH);
        let (h, ctx, target) = (self.h, self.ctx, &self.run.plan.target);
        let reading = async move {
            match ahead {
                Some(reading) => reading.join().await,
                None => target_facts(h, ctx, target).await,
            }
        };
        let (revoked, settings, read) =
            tokio::join!(crate::transfer::permissions::stop_if_revoked(self.ctx), load_settings(self.ctx), reading);
        if let Some(revoked) = revoked? {
            self.settle_unrecorded().await?;
            return Ok(ControlFlow::Break(revoked));
        }
        let (settings, read) = (settings?, Some(read?));
        self.laps.lap("grants+settings+facts");
        // A whole-queue copy copies every stamped message and, as a move takes them, no more without a timestamp
        // than the count at t0 leaves (`whole_queue_left`): a producer sending timestamp 0 behind the browser does
        // not keep it going, and the count never chooses among stamped messages.
        self.unstamped_room = whole_queue_left(&self.run, self.copied_so_far());
        let batch_size = settings.batch_size.max(1) as usize;
        pipeline::batch(&mut CopyBatch { slice: self, started, settings, read, batch_size }).await
    }

    /// How many the run has copied or dead-lettered, the batch that waits for its record included.
    fn copied_so_far(&self) -> i64 {
        let counters = &self.run.counters;
        let unrecorded = self.unrecorded.as_ref().map_or(0, |d| d.count.delivered + d.count.dead_lettered);
        counters.delivered + counters.dead_lettered + unrecorded
    }

    /// The target's facts for the next batch, read beside this batch's record (its target has committed).
    fn read_ahead(&mut self) {
        let (h, pool, end) = (self.h.clone(), self.ctx.pool.clone(), self.run.plan.target.clone());
        self.facts_ahead = Some(Beside::spawn(async move { target_facts_in(&h, &pool, &end).await }));
    }

    /// Up to `batch_size` selected messages the ledger does not hold, large bodies to the spool: first what was
    /// browsed ahead, then from the browser.
    async fn browse(&mut self, batch_size: usize, settings: &Settings) -> Result<Taken, RelayError> {
        if let Some(e) = self.ahead_failed.take() {
            return Err(e);
        }
        self.h.spool.check_free(settings.batch_bytes)?;
        let mut received: Vec<Received> = Vec::new();
        let mut bytes = 0u64;
        loop {
            while received.len() < batch_size && bytes < settings.batch_bytes {
                let Some(r) = self.ahead.pop_front() else { break };
                if self.room_for(&r) {
                    bytes += r.body_len();
                    received.push(r);
                }
            }
            if received.len() >= batch_size || bytes >= settings.batch_bytes || self.ahead_end {
                break;
            }
            let limits = Limits { messages: batch_size - received.len(), bytes: settings.batch_bytes - bytes };
            let more = self.candidates(limits).await?;
            self.take_ahead(more);
        }
        self.browsed_to_end = self.ahead_end && self.ahead.is_empty();
        Ok(Taken::new(received, bytes))
    }

    /// Candidates from the browser (see [`browse_candidates`]).
    async fn candidates(&mut self, limits: Limits) -> Result<Candidates, RelayError> {
        browse_candidates(&mut self.browser, &self.h.spool, &self.ctx.pool, self.run.id, self.wanted.as_ref(), limits)
            .await
    }

    /// Candidates browsed, kept for the batches that take them.
    fn take_ahead(&mut self, more: Candidates) {
        self.run.counters.browsed += more.browsed;
        self.ahead.extend(more.list);
        self.ahead_end |= more.end;
    }

    /// Whether the batch may take `r`, spending the room the count at `t0` leaves: a message without a timestamp
    /// needs room, a stamped one is in the selection anyway (see [`whole_queue_left`]).
    fn room_for(&mut self, r: &Received) -> bool {
        let Some(room) = self.unstamped_room.as_mut() else {
            return true;
        };
        if *room == 0 && is_unstamped(r.delivery.message().headers.timestamp) {
            return false;
        }
        *room = room.saturating_sub(1);
        true
    }

    /// Recorded in doubt, fenced, before it is sent, and counted into the target address's duplicate-id window: a
    /// crash after the target commit re-browses and re-sends these ids, and other runs must leave them in the
    /// target's cache until then (window.rs). Ids already in doubt keep where they began, and are sent again only
    /// where the target's cache still holds what landed of them.
    async fn mark_in_doubt(&mut self, browsed: &Taken, facts: &EndFacts, settings: &Settings) -> Step {
        let target_broker = facts.node.as_ref().map(|n| &n.broker);
        let sent_again = self.run.relay.in_doubt.kept(|id| browsed.ids.contains(&id));
        if !sent_again.is_empty() {
            match window::resend_marks(&sent_again, target_broker) {
                Resend::Safe => {}
                Resend::Unknown(words) => return Err(RelayError::transient(Code::DuplicateWindow, words)),
                Resend::CacheLost => {
                    self.settle_unrecorded().await?;
                    let run = &mut self.run;
                    let in_doubt = run.relay.in_doubt.ids();
                    let started = target_broker.and_then(BrokerState::started_millis);
                    let held_in = format!("the source queue {} (a copy leaves them there)", run.plan.source.display());
                    let stop = stop_for_lost_cache(self.ctx, run, started, &in_doubt, &held_in).await?;
                    return Ok(ControlFlow::Break(stop));
                }
            }
        }
        let (cache, started) = (facts.duplicate_cache_size(), target_broker.and_then(BrokerState::started_millis));
        loop {
            let in_flight = self.unrecorded.as_ref().map(|d| d.ids.clone()).unwrap_or_default();
            let run = &mut self.run;
            let new_ids: Vec<i64> =
                browsed.ids.iter().copied().filter(|id| !run.relay.in_doubt.contains(*id)).collect();
            let mut tx = self.ctx.lease.begin().await?;
            match window::admit(tx.conn(), run, cache, started, new_ids, &in_flight).await? {
                Ok(()) => {
                    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
                    tx.commit_progress().await?;
                    fault::reach("copy-in-doubt");
                    self.laps.lap("in-doubt");
                    return Ok(ControlFlow::Continue(()));
                }
                Err(_) if !in_flight.is_empty() => {
                    // Perhaps no room beside the run's own batch in flight: recorded first, then asked again.
                    drop(tx);
                    self.settle_unrecorded().await?;
                }
                Err(held) => {
                    drop(tx);
                    return Ok(ControlFlow::Break(hold_back(self.ctx, run, settings, held).await?));
                }
            }
        }
    }

    /// Sent in one target transaction (one by one after a duplicate), checked before its commit, while the next
    /// batch is browsed ahead. Returns what landed and how many lacked their original id.
    async fn send(&mut self, browsed: &Taken, route: &Route, settings: &Settings) -> Step<Landed> {
        let Some(conn) = self.target_conn.as_ref() else {
            return Err(RelayError::transient(
                Code::Core,
                "the target connection was closed before the batch was sent",
            ));
        };
        let watch = TargetWatch::start(conn, &self.run.plan.target.queue, &self.run.plan.target.display()).await?;
        self.laps.lap("target-look");
        let target_session = match self.target_session.take() {
            Some(kept) => kept,
            None => conn.create_session(SessionOptions::transacted()).await?,
        };
        let recording = self.unrecorded.take().map(|dealt| apply_record(&mut self.run, self.ctx, dealt));
        let accepted_before = self.run.counters.delivered > 0;
        let attempts = settings.target_attempts;
        let sending = send_taken(&target_session, &watch, browsed, route, Mode::Copy, attempts, accepted_before);
        let ahead = self.ahead_wanted(browsed.received.len(), settings);
        let browsing = async {
            match ahead {
                Some(limits) => {
                    let (pool, wanted) = (&self.ctx.pool, self.wanted.as_ref());
                    browse_candidates(&mut self.browser, &self.h.spool, pool, self.run.id, wanted, limits)
                        .await
                        .map(Some)
                }
                None => Ok(None),
            }
        };
        // The previous batch's record, written beside this batch's send (its in-doubt mark committed first).
        let (ctx, run) = (self.ctx, &self.run);
        let recording = async move {
            match recording {
                Some(ledger) => write_record(ctx, run, &ledger).await.map(Some),
                None => Ok(None),
            }
        };
        let (sent, browsed_ahead, recorded) = tokio::join!(sending, browsing, recording);
        drop(watch);
        match recorded? {
            Some(Recorded::StopAsked) => self.stop_after = true,
            Some(Recorded::DeadLetterRefused(reason)) => return Ok(ControlFlow::Break(Outcome::Stop { reason })),
            Some(Recorded::GoOn) | None => {}
        }
        match browsed_ahead {
            Ok(Some(more)) => self.take_ahead(more),
            Ok(None) => {}
            Err(e) => self.ahead_failed = Some(e),
        }
        let landed = match sent {
            Ok(landed) => landed,
            Err(SendFailure::Refused { words, .. }) => return Err(RelayError::refused(Code::TargetChanged, words)),
            Err(SendFailure::Full(e)) => {
                // Whatever one-by-one mode committed before the refusal is re-browsed later and dropped by the
                // target's duplicate cache.
                let wait = wait_for_room(self.ctx, &mut self.run, settings, full_words(&e)).await?;
                return Ok(ControlFlow::Break(wait));
            }
            Err(SendFailure::Other(e)) => {
                return Err(RelayError::transient_in(Code::Core, "sending the batch to the target", e))
            }
        };
        self.laps.lap("target-send+commit");
        fault::reach("copy-target-commit");
        // Committed: the session is kept for the next batch (a failed send drops it, its close queued).
        self.target_session = Some(target_session);
        Ok(ControlFlow::Continue(landed))
    }

    /// How much to browse ahead while a batch of `taking` messages sends: a batch's worth, when the browser has
    /// more, what is already ahead leaves room, the spool has room for it, and the batch was a full one (a short
    /// batch means the browser's end is near, or a whole-queue copy's room is spent).
    fn ahead_wanted(&self, taking: usize, settings: &Settings) -> Option<Limits> {
        let batch = settings.batch_size.max(1) as usize;
        let room = batch.saturating_sub(self.ahead.len());
        let useful = !self.ahead_end && self.ahead_failed.is_none() && taking >= batch && room > 0;
        (useful && self.h.spool.check_free(2 * settings.batch_bytes).is_ok())
            .then_some(Limits { messages: room, bytes: settings.batch_bytes })
    }

    /// Proven poison to a dead message queue on the source broker (docs/dead-message-queue.md): sent there, then recorded in the
    /// ledger with the batch so it is not copied again. A crash between the two re-proves it, and the DMQ refuses
    /// its duplicate id: recorded then (see dmq.rs).
    async fn dead_letter(
        &mut self,
        browsed: &Taken,
        poison: Vec<Poison>,
        route: &Route,
        settings: &Settings,
    ) -> Result<dmq::Outcome, RelayError> {
        if poison.is_empty() {
            return Ok(dmq::Outcome::default());
        }
        let dmq_session = self.source_conn.create_session(SessionOptions::transacted()).await?;
        let items = poison.into_iter().map(|p| (p.clone(), &browsed.received[p.index])).collect();
        let dmq_ctx = dmq::Context::of_run(Mode::Copy, &self.run, &route.origin, &route.target, settings);
        let dead = dmq::dead_letter_browsed(&self.source_conn, &dmq_session, items, &dmq_ctx).await?;
        let _ = dmq_session.close().await;
        Ok(dead)
    }

    /// Whether `dealt`'s record may wait for the next batch's send: not when it dead-lettered anything (its
    /// record names what the DMQ took, and may end the run), when it is the selection's last, or when a stop is
    /// waiting for this batch.
    fn may_record_later(&self, dealt: &Dealt) -> bool {
        let plain = dealt.poisoned.is_empty() && dealt.dead.dead.is_empty() && dealt.dead.stop.is_none();
        plain && !self.browsed_to_end && !self.stop_after && !self.ctx.stop_requested
    }

    /// The ledger and counters, fenced, in one transaction; the batch out of doubt. Ends the job when a poison
    /// message found no DMQ, or when a stop was asked for (this batch re-sent what was in doubt).
    async fn record(&mut self, dealt: Dealt) -> Step {
        let recorded = self.record_now(dealt).await?;
        self.laps.lap("record");
        tracing::debug!(run = %self.run.id, laps = %self.laps, "batch timings");
        match recorded {
            Recorded::DeadLetterRefused(reason) => Ok(ControlFlow::Break(Outcome::Stop { reason })),
            Recorded::StopAsked => Ok(ControlFlow::Break(stop_outcome(&self.run))),
            Recorded::GoOn if self.stop_after => Ok(ControlFlow::Break(stop_outcome(&self.run))),
            Recorded::GoOn => Ok(ControlFlow::Continue(())),
        }
    }

    /// The batch that waits for its record, recorded now: before the slice writes anything else of the run (a
    /// wait, a hold, a stop, its end), so that what it writes counts that batch.
    async fn settle_unrecorded(&mut self) -> Result<(), RelayError> {
        if let Some(dealt) = self.unrecorded.take() {
            if let Recorded::StopAsked = self.record_now(dealt).await? {
                self.stop_after = true;
            }
        }
        Ok(())
    }

    /// `dealt` applied to the run and written, in one fenced transaction.
    async fn record_now(&mut self, dealt: Dealt) -> Result<Recorded, RelayError> {
        let ledger = apply_record(&mut self.run, self.ctx, dealt);
        write_record(self.ctx, &self.run, &ledger).await
    }

    /// The slice's job completed and its continuation enqueued: the finish once the selection is browsed to its
    /// end, else the next slice, due at `due` (pacing) or at once. The connections go back to the pool when their
    /// sessions close in time.
    async fn end(mut self, due: Option<DateTime<Utc>>) -> Result<Outcome, RelayError> {
        self.settle_unrecorded().await?;
        if self.stop_after {
            return Ok(stop_outcome(&self.run));
        }
        let next = match (self.browsed_to_end, due) {
            (true, _) => Phase::CopyFinish.job(),
            (false, Some(due)) => Phase::CopySlice.job().run_at(due),
            (false, None) => Phase::CopySlice.job(),
        };
        if self.browsed_to_end {
            // Whatever is still in doubt was not found again on the source: it will not be sent again.
            self.run.relay.in_doubt.clear();
        }
        let mut tx = self.ctx.lease.begin().await?;
        row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
        tx.complete_and_enqueue(&next).await?;
        let committed = tx.commit().await?;
        let (browser, browse_session, target_session) = (self.browser, self.browse_session, self.target_session);
        let closing = async {
            let target_closed = match target_session {
                Some(session) => session.close().await.is_ok(),
                None => true,
            };
            browser.close().await.is_ok() && browse_session.close().await.is_ok() && target_closed
        };
        if tokio::time::timeout(Duration::from_secs(2), closing).await.unwrap_or(false) {
            self.h.links.give_back(self.source_conn);
            if let Some(conn) = self.target_conn {
                self.h.links.give_back(conn);
            }
        }
        Ok(Outcome::Committed(committed))
    }
}

/// `dealt` applied to the run as its record writes it: counted, out of doubt, progress noted. Returns the
/// source ids for the ledger (the batch's, less poison no DMQ took).
fn apply_record(run: &mut TransferRun, ctx: &JobContext, dealt: Dealt) -> Ledger {
    let Dealt { ids, poisoned, count, dead } = dealt;
    let settled: HashSet<i64> = dead.dead.iter().map(|d| d.received_id).collect();
    let copied: Vec<i64> = ids
        .iter()
        .enumerate()
        .filter(|(i, id)| !poisoned.contains(i) || settled.contains(id))
        .map(|(_, id)| *id)
        .collect();
    run.relay.waiting_since = None;
    run.counters.add_batch(&count);
    run.relay.in_doubt.retain(|id| !ids.contains(&id));
    run.relay.progressed_in = Some(JobAttempt::of(&ctx.job));
    Ledger { copied, count, dead }
}

/// What a batch's record writes besides the run's state.
struct Ledger {
    /// The source ids copied.
    copied: Vec<i64>,
    count: BatchCount,
    dead: dmq::Outcome,
}

/// A batch's record, fenced, in one transaction: the ledger, the run's counters and what is in doubt as `run`
/// holds them (the record applied), its events.
async fn write_record(ctx: &JobContext, run: &TransferRun, ledger: &Ledger) -> Result<Recorded, RelayError> {
    let mut tx = ctx.lease.begin().await?;
    ledger_store::ledger_add(tx.conn(), run.id, &ledger.copied).await?;
    if let Some(reason) = write_batch(tx.conn(), run, &ledger.count, &ledger.dead).await? {
        // The message no DMQ accepted is neither copied nor in the ledger: a resume tries it again.
        tx.commit_progress().await?;
        return Ok(Recorded::DeadLetterRefused(reason));
    }
    // A stop requested before this slice began waited for this one batch, which re-sent what was in doubt.
    let stop = tx.stop_requested() || ctx.stop_requested;
    tx.commit_progress().await?;
    fault::reach("copy-ledger");
    Ok(if stop { Recorded::StopAsked } else { Recorded::GoOn })
}

/// The per-batch target guard of a copy: `Some(words)` when the run must wait for room.
fn guard_target(
    run: &TransferRun,
    facts: &EndFacts,
    batch_size: usize,
    settings: &Settings,
) -> Result<Option<String>, RelayError> {
    let estimate = BatchSize::estimate(&run.counters, batch_size as u32, settings.batch_bytes);
    check_target(&run.plan.target, facts, estimate, settings.capacity_threshold_pct).decided()
}

/// Ends this attempt's slice job and enqueues a fresh one, with a fresh retry budget, because an earlier attempt
/// of this job copied messages (see the module doc). Nothing else is written: the run's state is as the last
/// fenced commit left it.
async fn hand_over(ctx: &JobContext, run: &TransferRun) -> Result<Outcome, RelayError> {
    let mut tx = ctx.lease.begin().await?;
    let why = json!({ "attempt": ctx.job.attempt, "copied": run.counters.delivered });
    row::event(tx.conn(), run.id, "slice_handed_over", why).await?;
    tx.complete_and_enqueue(&Phase::CopySlice.job()).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// The selection is browsed to its end: count what the browser could not see (in delivery to a consumer,
/// scheduled for later; for ids also gone), prove the end against the source broker's counts (`transfer::proof`),
/// remove the ledger, and end the run Succeeded or Partial. A browser's end of queue can come early (after a
/// journal reload; messages given back by a consumer go to the head, behind it), so an end the counts do not
/// prove is browsed again — the ledger skips what was copied — a bounded number of times.
pub async fn copy_finish(h: &TransferHandler, ctx: &JobContext) -> Result<Outcome, RelayError> {
    let mut run = load(ctx).await?;
    let source = ends::resolve_cached(&ctx.pool, run.plan.source.node_ref(), h.permits(), &h.ends).await?;
    let source_mbean = super::queues::source_queue_mbean(&source, &run);
    let effective = run.plan.effective_filter()?.unwrap_or_default();
    match &run.plan.selection {
        Selection::Ids(ids) => {
            let copied = ledger_holds(&ctx.pool, run.id, ids).await?;
            let unseen: Vec<i64> = ids.iter().copied().filter(|id| !copied.contains(id)).collect();
            let not = staging::not_taken(&source.mgmt, &source_mbean, Selected::Ids(&unseen)).await?;
            run.counters.not_taken_in_delivery = not.in_delivery as i64;
            run.counters.not_taken_scheduled = not.scheduled as i64;
            run.counters.not_taken_gone = not.other as i64;
        }
        _ => {
            let t0_millis = run.plan.t0_millis;
            let user_filter = match &run.plan.selection {
                Selection::Filter(f) => Some(f.as_str()),
                _ => None,
            };
            let selected = Selected::Frozen { effective_filter: &effective, user_filter, t0_millis };
            let not = staging::not_taken(&source.mgmt, &source_mbean, selected).await?;
            // What is still visible was browsed and copied (or the proof below finds it was not): only what the
            // browser could not see is not copied.
            run.counters.not_taken_in_delivery = not.in_delivery as i64;
            run.counters.not_taken_scheduled = not.scheduled as i64;
        }
    }
    let now = source_count_now(&source, &run).await?;
    let clean_pass = run.relay.pass_started_at == Some(run.counters.delivered);
    // A copy's pass is the broker's full iteration of the source with the frozen filter, skipping only what the
    // ledger holds: a clean one found nothing left to copy. A copy takes nothing out of the source.
    let exhaustion = proof::Exhaustion { nothing_left: Some(clean_pass), taken_accounted: true };
    let proof = proof::by_exhaustion(prove_end(&run, now, 0), exhaustion);
    let verdict = proof::verdict(&proof, run.relay.finish_rechecks, clean_pass);
    if verdict == Verdict::AnotherPass {
        return another_pass(ctx, &mut run, Phase::CopySlice, Some(&proof)).await;
    }
    let words = end_words(&run.counters, "copied", &proof, &verdict);
    let finished = json!({ "copied": run.counters.delivered, "not_copied": run.counters.not_taken() });
    let mut tx = ctx.lease.begin().await?;
    ledger_store::ledger_clear(&mut *tx.conn(), run.id).await?;
    end_run(tx, &mut run, ("copy_finished", finished), &proof, words).await
}

/// The browser's next message, a large body streamed to a spool file of its own (never held in memory, as a
/// move's receive does); `None` at the end of the queue. `spare`: a spool file made and not written, used before
/// a new one is made and left for the next message when this one's body is not large (making a file for every
/// message of a browse was a quarter of a copy's batch, docs/BENCHMARKS.md "Session 26").
async fn browse_one(
    browser: &mut artemis_core::Browser,
    spool: &super::spool::Spool,
    spare: &mut Option<SpoolFile>,
) -> Result<Option<Received>, RelayError> {
    let mut file = match spare.take() {
        Some(file) => file,
        None => spool.file().await?,
    };
    let Some(delivery) = browser.next_streaming(file.writer()).await? else {
        *spare = Some(file);
        return Ok(None);
    };
    if !delivery.body_streamed() {
        *spare = Some(file);
        return Ok(Some(Received::in_memory(delivery)));
    }
    let len = file.finish().await.map_err(|e| RelayError::transient_in(Code::Spool, "spooling a large body", e))?;
    Ok(Some(Received::spooled(delivery, file, len)))
}

/// What one browse for candidates found.
struct Candidates {
    /// Selected and not in the ledger, in browse order.
    list: Vec<Received>,
    /// Deliveries the browser made (the run's `browsed` counter).
    browsed: i64,
    /// The browser reached the end of the queue.
    end: bool,
}

/// Up to `limits` messages from the browser that the selection wants (`wanted`: an id selection's ids) and the
/// run's ledger does not hold, large bodies to the spool.
async fn browse_candidates(
    browser: &mut Browser,
    spool: &super::spool::Spool,
    pool: &sqlx::PgPool,
    run: uuid::Uuid,
    wanted: Option<&HashSet<i64>>,
    limits: Limits,
) -> Result<Candidates, RelayError> {
    let mut found = Candidates { list: Vec::new(), browsed: 0, end: false };
    let (mut bytes, mut spare) = (0u64, None);
    while found.list.len() < limits.messages && bytes < limits.bytes {
        let Some(r) = browse_one(browser, spool, &mut spare).await? else {
            found.end = true;
            break;
        };
        found.browsed += 1;
        if wanted.is_none_or(|w| w.contains(&r.delivery.message_id())) {
            bytes += r.body_len();
            found.list.push(r);
        }
    }
    let ids: Vec<i64> = found.list.iter().map(|r| r.delivery.message_id()).collect();
    let copied = ledger_holds(pool, run, &ids).await?;
    found.list.retain(|r| !copied.contains(&r.delivery.message_id()));
    Ok(found)
}

/// Of `ids`, those the run's ledger holds.
async fn ledger_holds(pool: &sqlx::PgPool, run: uuid::Uuid, ids: &[i64]) -> Result<HashSet<i64>, RelayError> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    Ok(ledger_store::ledger_holding(pool, run, ids).await?.into_iter().collect())
}

/// How many source messages the run's ledger records as copied (kept while the run can be resumed).
pub async fn ledger_size(pool: &sqlx::PgPool, run: uuid::Uuid) -> Result<i64, sqlx::Error> {
    ledger_store::ledger_size(pool, run).await
}
