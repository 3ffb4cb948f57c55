//! One relay batch of a move (SPEC §4.2): the move's [`Take`] — received from staging, acknowledged there —
//! driven through the steps every batch goes through by `pipeline::batch`; [`relay`] is the job.
//!
//! The order of the steps is what makes a batch exactly-once; each names what a crash right after it leaves
//! behind, and how the next claim settles it:
//!
//! | step | durable before the next step | a crash right after it |
//! |---|---|---|
//! | prepare: [`Batch::guard`], both ends re-resolved, the target re-checked | nothing | nothing happened |
//! | prepare: [`Batch::staging_is_ours`] | when a consumer not this run's was first seen | the wait goes on |
//! | prepare: [`Batch::reconcile`] the previous attempt from broker truth | dead-lettered ids counted, out of doubt | repeated: broker truth again |
//! | prepare: [`Batch::resend_is_safe`] | — | — |
//! | prepare: [`Batch::top_up`] staging, when it holds less than a batch | the refill's intent, fenced, before the broker's move; its result after | intent pending: settled by the reconcile |
//! | take: [`Batch::receive`] from staging | large bodies spooled as they arrive | the broker gives the batch back to staging (connection closed) |
//! | mark in doubt: [`Batch::mark_staging_ids`] | the batch's staging ids, fenced, counted into the target's duplicate-id window; with them the intent of the refill beside the send | messages back in staging; re-sent, duplicates dropped by the target |
//! | send: the target looked at, then [`Batch::send_to_target`], the target commit; beside it, the source broker's refill of staging for the next batch ([`refill_beside`]), which may go on beside the acknowledgement; from the commit on, the target's facts for the next batch read ahead ([`super::queues::FactsAhead`]) | the target holds the batch; staging holds the refill | re-sent from staging; the target's duplicate cache drops them; the refill's intent settled by the reconcile |
//! | settle the source: [`Batch::mark_poison`] | the dead-letter intent, fenced | the reconcile counts the named ids dead-lettered once gone |
//! | settle the source: [`Batch::acknowledge`], the source commit | staging no longer holds the batch | the reconcile finds them gone: delivered |
//! | dead-letter: [`Batch::dead_letter_staged`] (dmq.rs) | poison on a DMQ, out of staging | gone, named by the intent: dead-lettered |
//! | record: [`Batch::write_record`] | counters (the refill's result with them), in-doubt cleared, this job completed and the next enqueued, in one fenced transaction | — |
//!
//! The duplicate id of each message is `studio:<run>:<staging message id>` (docs/adr/0005): stable across
//! every re-send of the same staged message, so the target keeps each one once. Why a pipeline of this shape,
//! and what each step may touch: docs/adr/0011.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::time::Duration;

use artemis_core::{Connection, Consumer, Session};
use chrono::{DateTime, Utc};
use serde_json::json;

use super::beside::Beside;
use super::guard::{check_source_heap, check_target, BatchSize, TargetCheck};
use super::in_doubt::Marks;
use super::laps::Laps;
use super::pipeline::{self, Dealt, Take};
use super::poison::Poison;
use super::queues::{source_end, target_facts, target_facts_in, TargetRead};
use super::receive::{receive_batch, staging_consumer, Limits, Received, Taken};
use super::record::write_batch;
use super::refill::{id_chunk, refill, settle_refill_intent, Refill, Refilled};
use super::row;
use super::run::{hold_back, load, load_settings, stop_for_lost_cache, stop_outcome, wait_for_room, Step};
use super::send::{full_words, send_taken, Landed, Route, SendFailure, TargetWatch};
use super::spool::Spool;
use super::staged::{check_staging_consumers, list_staging, staging_depth, HELD_ELSEWHERE_RETRY};
use super::state::{BatchCount, TransferRun};
use super::window::{self, Resend};
use super::Code;
use super::{dmq, fault, Phase, RelayConfig, RelayError, TransferHandler};
use crate::broker::core_pool::Link;
use crate::broker::jolokia::BrokerState;
use crate::broker::node::NodeAccess;
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::lease::Committed;
use crate::jobs::settings::Settings;
use crate::transfer::facts::EndFacts;
use crate::transfer::plan::{Mode, Selection};

/// How long a committed batch's connections may take to close before they are dropped: well under a lease, since
/// the continuation's lease runs unrenewed meanwhile.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// One relay batch (SPEC §4.2 steps 0–6). The steps, and why in this order: the module doc.
pub async fn relay(
    h: &TransferHandler,
    ctx: &JobContext,
    config: &RelayConfig,
    spool: &Spool,
) -> Result<Outcome, RelayError> {
    // The grants re-checked beside the reads of the settings and the run: three round trips at once.
    let (revoked, loaded) =
        tokio::join!(crate::transfer::permissions::stop_if_revoked(ctx), Batch::load(h, ctx, config, spool));
    if let Some(revoked) = revoked? {
        return Ok(revoked);
    }
    let mut b = loaded?;
    Ok(match pipeline::batch(&mut b).await? {
        ControlFlow::Continue(committed) => Outcome::Committed(committed),
        ControlFlow::Break(outcome) => outcome,
    })
}

/// What one batch job works with, from its start to its record.
struct Batch<'a> {
    h: &'a TransferHandler,
    ctx: &'a JobContext,
    config: &'a RelayConfig,
    spool: &'a Spool,
    run: TransferRun,
    settings: Settings,
    staging_queue: String,
    batch_size: u32,
    /// When the batch started: its pacing counts from here.
    started: DateTime<Utc>,
    laps: Laps,
}

/// Both ends of the run as the guard found them.
struct Ends {
    source: NodeAccess,
    target: NodeAccess,
    /// The target's facts, read in the guard's one batched request.
    facts: EndFacts,
}

/// The source side of a batch: staging's connection, the transacted session the batch is received and
/// acknowledged in, and its consumer once the batch is taken.
struct SourceSide {
    conn: Link,
    session: Session,
    consumer: Option<Consumer>,
}

impl SourceSide {
    /// Gives the batch back to staging: the consumer closed first, so the rollback cannot deliver it to it again.
    async fn give_back(&mut self) {
        self.consumer = None;
        let _ = self.session.rollback().await;
    }
}

/// A batch's consumer to close once it is done, and the sessions its connections keep for the next batch once it
/// has closed.
struct Closing {
    consumer: Option<Consumer>,
    kept: Kept,
}

/// A committed batch's transacted sessions, kept with their connections for the next batch
/// (`crate::broker::core_pool`).
struct Kept {
    source: Session,
    target: Option<Session>,
}

impl Closing {
    /// The batch's consumer and sessions, and its connections (the target's once it was opened).
    fn of(source: SourceSide, target: Option<TargetSide>) -> ((Link, Option<Link>), Closing) {
        let SourceSide { conn, session, consumer } = source;
        let (target_conn, target_session) = match target {
            Some(TargetSide { conn, session }) => (Some(conn), session),
            None => (None, None),
        };
        ((conn, target_conn), Closing { consumer, kept: Kept { source: session, target: target_session } })
    }

    /// Closes the consumer within CLOSE_WAIT: the sessions to keep once the broker answered in time, having given
    /// back to staging whatever was delivered to it beyond the batch.
    async fn run(self) -> Option<Kept> {
        let Closing { consumer, kept } = self;
        let closed = match consumer {
            Some(consumer) => tokio::time::timeout(CLOSE_WAIT, consumer.close()).await.is_ok_and(|c| c.is_ok()),
            None => true,
        };
        closed.then_some(kept)
    }
}

/// What a move's batch works with from its guard to its record.
struct Ready {
    ends: Ends,
    source: SourceSide,
    settled: Settled,
    route: Route,
    /// Once the batch has something to send.
    target: Option<TargetSide>,
    /// How many staging should gain while the batch sends: decided by the top-up, turned into a [`Refill`] (its
    /// intent recorded with the batch's in-doubt mark) and run beside the send (see [`Batch::top_up`]).
    refill_later: Option<u32>,
    /// The refill decided with the in-doubt mark, run beside the send.
    refill: Option<Refill>,
    /// The refill under way beside the send, and on beside the acknowledgement; its result is written with the
    /// record.
    refilling: Option<Beside<Result<Option<Refilled>, RelayError>>>,
    /// The target's facts for the run's next batch, read from the target's commit on, beside the acknowledgement
    /// and the record.
    reading_ahead: Option<Beside<Result<TargetRead, RelayError>>>,
}

/// The target side of a batch: its connection, and the transacted session it was sent in.
struct TargetSide {
    conn: Link,
    session: Option<Session>,
}

/// A move's take (the module doc's table): received from staging, acknowledged there.
impl Take for Batch<'_> {
    type Ready = Ready;
    type Done = Committed;

    /// Steps 0–1: the target's facts read while the source side gets ready (staging the run's alone, the previous
    /// attempt reconciled: nothing there depends on the target), then the target guarded, a resend checked safe, a
    /// stop with nothing in doubt taken, staging topped up.
    async fn prepare(&mut self) -> Step<Ready> {
        let (h, ctx, target_end) = (self.h, self.ctx, self.run.plan.target.clone());
        let ahead = h.ahead.take(ctx.job.run_id, ctx.job.seq);
        let reading = async move {
            match ahead {
                Some(read) => Ok(read),
                None => target_facts(h, ctx, &target_end).await,
            }
        };
        let (read, source_side) = tokio::join!(reading, self.source_side());
        let (source_end, source, settled) = go_on_step!(source_side);
        let ends = go_on_step!(self.guard(source_end, read?).await);
        go_on_step!(self.resend_is_safe(&ends.facts, &settled).await);
        go_on_step!(self.settle_if_stopping(&settled).await);
        let refill_later = go_on_step!(self.top_up(&ends.source, &source.conn, &settled).await);
        let route = Route::of(&self.run, &ends.facts);
        let ready = Ready {
            ends,
            source,
            settled,
            route,
            target: None,
            refill_later,
            refill: None,
            refilling: None,
            reading_ahead: None,
        };
        Ok(ControlFlow::Continue(ready))
    }

    async fn take(&mut self, ready: &mut Ready) -> Result<Taken, RelayError> {
        self.receive(&mut ready.source, &ready.ends.facts).await
    }

    async fn nothing_taken(&mut self, ready: Ready) -> Step<Committed> {
        Ok(ControlFlow::Break(self.nothing_received(&ready.source.conn, ready.settled).await?))
    }

    async fn open_target(&mut self, ready: &mut Ready) -> Result<(), RelayError> {
        fault::reach("receive");
        let conn = self.h.links.take(&ready.ends.target, self.config.connection_ttl).await?;
        self.laps.lap("target-connect");
        ready.target = Some(TargetSide { conn, session: None });
        Ok(())
    }

    /// Step 3, with the intent of the refill that runs beside the send recorded in the same fenced write.
    async fn mark_in_doubt(&mut self, ready: &mut Ready, taken: &Taken) -> Step {
        let Ready { source, settled, ends, refill_later, refill, .. } = ready;
        let later = refill_later.take().map(|count| (count, &ends.source));
        *refill = go_on_step!(self.mark_staging_ids(source, taken, settled, &ends.facts, later).await);
        Ok(ControlFlow::Continue(()))
    }

    /// Step 4: the target queue looked at just before the sends (a refusal there takes the batch out of doubt,
    /// since nothing was sent), then the batch sent in one transaction and committed — while the source broker
    /// refills staging for the next batch, when the top-up left that for now.
    async fn send(&mut self, ready: &mut Ready, taken: &Taken) -> Step<Landed> {
        let Ready { source, settled, route, target, ends, refill, refilling, reading_ahead, .. } = ready;
        let Some(target) = target.as_mut() else {
            return Err(RelayError::transient(Code::Core, "the batch's target connection was not opened"));
        };
        let (queue, display) = (&self.run.plan.target.queue, self.run.plan.target.display());
        let session = target.conn.transacted_session().await?;
        let watch = match TargetWatch::start(&target.conn, queue, &display).await {
            Ok(watch) => watch,
            Err(e) => {
                self.give_back_unsent(source, settled, true).await?;
                return Err(e);
            }
        };
        let refill = refill.take();
        if refill.is_some() {
            *refilling = Some(Beside::spawn(refill_beside(refill, ends.source.clone(), self.heap_guard())));
        }
        let landed = self.send_to_target(source, &session, &watch, taken, settled, route).await;
        target.session = Some(session);
        if let Ok(ControlFlow::Continue(_)) = &landed {
            // Read after this batch's target commit, so it may gate the next batch (queues::FactsAhead).
            let (h, pool, end) = (self.h.clone(), self.ctx.pool.clone(), self.run.plan.target.clone());
            *reading_ahead = Some(Beside::spawn(async move { target_facts_in(&h, &pool, &end).await }));
        }
        landed
    }

    /// Steps 5 and 5a: the dead-letter intent, then the batch but its poison acknowledged from staging.
    async fn settle_source(&mut self, ready: &mut Ready, taken: &Taken, landed: &Landed) -> Result<(), RelayError> {
        self.mark_poison(taken, landed).await?;
        self.acknowledge(&mut ready.source, taken, landed).await
    }

    async fn dead_letter(
        &mut self,
        ready: &mut Ready,
        taken: Taken,
        poison: Vec<Poison>,
    ) -> Result<dmq::Outcome, RelayError> {
        self.dead_letter_staged(&mut ready.source, taken.received, poison, &ready.route).await
    }

    /// Step 6, while the batch's sessions close (its connections back to the pool when they close in time): the
    /// source is acknowledged and committed, so what a close gives back to staging is what no batch holds.
    async fn record(&mut self, ready: Ready, dealt: Dealt) -> Step<Committed> {
        let Ready { source, settled, target, refilling, reading_ahead, .. } = ready;
        if let Some(refilling) = refilling {
            let refilled = refilling.join().await;
            self.settle_refill_beside(refilled);
        }
        // Staging's depth decides between the finish and another batch only once the selection is exhausted.
        let remaining = match self.run.relay.exhausted {
            true => Some(staging_depth(&source.conn, &self.staging_queue).await?),
            false => None,
        };
        let (links, closing) = Closing::of(source, target);
        let read_ahead = async move {
            match reading_ahead {
                Some(reading) => Some((reading.since, reading.join().await)),
                None => None,
            }
        };
        let (written, kept, read_ahead) = tokio::join!(
            self.write_record(remaining, settled, &dealt.ids, dealt.count, dealt.dead),
            closing.run(),
            read_ahead
        );
        let recorded = matches!(written, Ok(ControlFlow::Continue(_)));
        if let (true, Some((since, Ok(read)))) = (recorded, read_ahead) {
            self.h.ahead.keep(self.ctx.job.run_id, self.ctx.job.seq + 1, since, read);
        }
        self.keep_links(links, kept.filter(|_| recorded));
        Ok(ControlFlow::Continue(go_on_step!(written)))
    }
}

/// What the reconcile settled of the previous attempt.
#[derive(Debug, Default)]
struct Settled {
    /// In-doubt ids gone from staging (and not dead-lettered): delivered, counted with the next fenced write.
    reconciled: i64,
    /// The marks in doubt with their ids still in staging: this batch sends them again.
    still_in_doubt: Marks,
}

impl<'a> Batch<'a> {
    /// The run, its settings and its staging queue (a run never prepared has none: refused).
    async fn load(
        h: &'a TransferHandler,
        ctx: &'a JobContext,
        config: &'a RelayConfig,
        spool: &'a Spool,
    ) -> Result<Batch<'a>, RelayError> {
        let started = Utc::now();
        let laps = Laps::start();
        let (settings, run) = tokio::join!(load_settings(ctx), load(ctx));
        let (settings, run) = (settings?, run?);
        let Some(staging_queue) = run.staging_queue.clone() else {
            return Err(RelayError::refused(
                Code::NotThisRun,
                format!("run {} has no staging queue: it was never prepared", run.id),
            ));
        };
        let batch_size = settings.batch_size.max(1);
        Ok(Batch { h, ctx, config, spool, run, settings, staging_queue, batch_size, started, laps })
    }

    /// The source side made ready while the target's facts are read: the source re-resolved by NodeID (a failover
    /// moves the run to the new live node), staging's connection and the batch's session, staging the run's alone,
    /// and the previous attempt reconciled.
    async fn source_side(&mut self) -> Step<(NodeAccess, SourceSide, Settled)> {
        let source_node = self.run.plan.source.node_ref();
        let (source_end, conn) = source_end(self.h, self.ctx, source_node, self.config.connection_ttl).await?;
        self.laps.lap("resolve");
        let source = self.open_source(conn).await?;
        go_on_step!(self.staging_is_ours(&source.conn).await);
        let settled = go_on_step!(self.reconcile(&source_end, &source.conn).await);
        Ok(ControlFlow::Continue((source_end, source, settled)))
    }

    /// Step 1: the target re-checked from the facts of one batched request, read after the previous batch's commit.
    async fn guard(&mut self, source: NodeAccess, read: (NodeAccess, EndFacts)) -> Step<Ends> {
        let (target, facts) = read;
        let estimate = BatchSize::estimate(&self.run.counters, self.batch_size, self.settings.batch_bytes);
        let check = check_target(&self.run.plan.target, &facts, estimate, self.settings.capacity_threshold_pct);
        // Stopping: the batch in doubt is settled whatever the target's room (I6).
        if let Some(words) = check.decided()?.filter(|_| !self.ctx.stop_requested) {
            return self.wait_for_room(words).await;
        }
        self.laps.lap("guard");
        Ok(ControlFlow::Continue(Ends { source, target, facts }))
    }

    /// The batch's transacted session on the source's connection (both kept between batches).
    async fn open_source(&mut self, mut conn: Link) -> Result<SourceSide, RelayError> {
        let session = conn.transacted_session().await?;
        self.laps.lap("source-connect");
        Ok(SourceSide { conn, session, consumer: None })
    }

    /// Staging is the run's alone: a message another consumer takes is on neither end, and an in-doubt id missing
    /// from staging could then not be read as delivered.
    async fn staging_is_ours(&mut self, conn: &Connection) -> Step {
        let found = check_staging_consumers(self.ctx, &mut self.run, conn, &self.staging_queue, self.config).await?;
        Ok(found.map_or(ControlFlow::Continue(()), ControlFlow::Break))
    }

    /// Step 0: the previous attempt settled from broker truth — its in-doubt ids gone from staging are delivered
    /// (or dead-lettered, where the intent names them), those still there are sent again; a refill whose result
    /// was never written is settled.
    async fn reconcile(&mut self, source: &NodeAccess, conn: &Connection) -> Step<Settled> {
        if self.run.relay.in_doubt.is_empty() && self.run.relay.refill.is_none() {
            return Ok(ControlFlow::Continue(Settled::default()));
        }
        let listed = list_staging(conn, &self.staging_queue).await?;
        let held = staging_depth(conn, &self.staging_queue).await?;
        let missing: Vec<i64> =
            self.run.relay.in_doubt.ids().into_iter().filter(|id| !listed.ids.contains(id)).collect();
        if !missing.is_empty() && held > listed.ids.len() as i64 {
            // Some of staging is still in delivery to a consumer that is gone (a dead or stalled worker): "not in
            // staging" cannot yet be read as "delivered".
            return Ok(ControlFlow::Break(held_elsewhere(&self.staging_queue, held, listed.ids.len())));
        }
        let dead = self.count_dead_lettered(&missing).await?;
        let reconciled = (missing.len() - dead) as i64;
        let still_in_doubt = self.run.relay.in_doubt.kept(|id| listed.ids.contains(&id));
        if let Some(intent) = self.run.relay.refill.take() {
            if intent.ids.is_none() {
                // A filter's refill whose result was never written moved an unknown number: every message that
                // entered staging is still there (in delivery included), delivered, dead-lettered or returned, so
                // broker truth gives what was staged.
                self.run.counters.stage_unrecorded(held, reconciled);
            }
            let chunk = id_chunk(&self.settings);
            settle_refill_intent(source, &mut self.run, &self.staging_queue, &intent, &listed.original_ids, chunk)
                .await?;
        }
        Ok(ControlFlow::Continue(Settled { reconciled, still_in_doubt }))
    }

    /// Ids the dead-letter intent names that are gone from staging went to a DMQ in a source transaction that
    /// committed (docs/dead-message-queue.md; see dmq.rs): not delivered. Counted with their event in one fenced write that also
    /// takes them out of doubt, so a crash before the batch's mark cannot count them again. Returns how many.
    async fn count_dead_lettered(&mut self, missing: &[i64]) -> Result<usize, RelayError> {
        let dead: Vec<i64> = missing.iter().copied().filter(|id| self.run.relay.dead_letter.contains(id)).collect();
        self.run.relay.dead_letter.clear();
        if !dead.is_empty() {
            self.run.relay.in_doubt.retain(|id| !dead.contains(&id));
            self.run.counters.dead_lettered += dead.len() as i64;
            let mut tx = self.ctx.lease.begin().await?;
            row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
            row::event(tx.conn(), self.run.id, "dead_lettered", json!({ "staging_ids": dead, "reconciled": true }))
                .await?;
            tx.commit_progress().await?;
        }
        Ok(dead.len())
    }

    /// A batch in doubt is sent again only where the target's cache still holds what landed of it (window.rs);
    /// where the target lost it, the run stops naming the ids.
    async fn resend_is_safe(&mut self, facts: &EndFacts, settled: &Settled) -> Step {
        if settled.still_in_doubt.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        let target_broker = facts.node.as_ref().map(|n| &n.broker);
        match window::resend_marks(&settled.still_in_doubt, target_broker) {
            Resend::Safe => Ok(ControlFlow::Continue(())),
            Resend::Unknown(words) => Err(RelayError::transient(Code::DuplicateWindow, words)),
            Resend::CacheLost => {
                self.run.relay.in_doubt = settled.still_in_doubt.clone();
                self.run.counters.delivered += settled.reconciled;
                let started = target_broker.and_then(BrokerState::started_millis);
                let held_in = format!("the staging queue {} on {}", self.staging_queue, self.run.plan.source.node);
                let ids = settled.still_in_doubt.ids();
                let stop = stop_for_lost_cache(self.ctx, &mut self.run, started, &ids, &held_in);
                Ok(ControlFlow::Break(stop.await?))
            }
        }
    }

    /// A stop requested with nothing left in doubt: what the reconcile learnt is recorded and the run stops.
    async fn settle_if_stopping(&mut self, settled: &Settled) -> Step {
        if !self.ctx.stop_requested || !settled.still_in_doubt.is_empty() {
            return Ok(ControlFlow::Continue(()));
        }
        let mut tx = self.ctx.lease.begin().await?;
        self.run.counters.delivered += settled.reconciled;
        self.run.relay.in_doubt.clear();
        row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
        tx.commit_progress().await?;
        Ok(ControlFlow::Break(stop_outcome(&self.run)))
    }

    /// Staging kept at 2 × batch (never when only settling before a stop). When it holds less than a batch, it is
    /// refilled now, before the take; when it holds a batch or more, the take goes first and what staging needs
    /// (returned, `Some(count)`) is refilled by the source broker while the target commits the batch — staging's
    /// depth counts the batch in delivery, so staging never holds more than 2 × batch either way (I3). A filtered
    /// scan of a paging source costs the source broker heap it keeps (see guard::check_source_heap): with the heap
    /// nearly full, what staging holds is relayed without a refill, and an empty staging waits.
    async fn top_up(&mut self, source: &NodeAccess, conn: &Connection, settled: &Settled) -> Step<Option<u32>> {
        let held = staging_depth(conn, &self.staging_queue).await?;
        let c = &self.run.counters;
        let depth = held.max(c.staged - c.delivered - settled.reconciled - c.dead_lettered);
        let wanted = 2 * i64::from(self.batch_size);
        if self.ctx.stop_requested || self.run.relay.exhausted || depth >= wanted {
            self.laps.lap("reconcile+refill");
            return Ok(ControlFlow::Continue(None));
        }
        if depth >= i64::from(self.batch_size) {
            self.laps.lap("reconcile");
            return Ok(ControlFlow::Continue(Some((wanted - depth) as u32)));
        }
        let heap_check = match self.heap_guard() {
            Some(display) => check_source_heap(&display, source.mgmt.heap().await.ok().flatten()),
            None => TargetCheck::Go,
        };
        match heap_check {
            TargetCheck::Go => {
                let chunk = id_chunk(&self.settings);
                refill(self.ctx, source, &mut self.run, &self.staging_queue, (wanted - depth) as u32, chunk).await?;
            }
            // Staging still holds a batch: relay it, and refill once the heap has room.
            _ if depth > 0 => {}
            not_now => {
                if let Some(words) = not_now.decided()? {
                    return self.wait_for_room(words).await;
                }
            }
        }
        self.laps.lap("reconcile+refill");
        Ok(ControlFlow::Continue(None))
    }

    /// The source as words, when a refill must first look at its broker's heap: a filtered scan of a paging
    /// source (guard::check_source_heap).
    fn heap_guard(&self) -> Option<String> {
        let filtered = matches!(self.run.plan.selection, Selection::Filter(_));
        (self.run.source_paged && filtered).then(|| self.run.plan.source.display())
    }

    /// What the refill beside the send did, set on the run (written with the batch's record). A refill that
    /// failed leaves its intent in place: the next batch's reconcile settles it from broker truth, and a refill
    /// that keeps failing shows when staging runs low and the top-up refills before the take.
    fn settle_refill_beside(&mut self, refilled: Result<Option<Refilled>, RelayError>) {
        match refilled {
            Ok(Some(refilled)) => refilled.apply(&mut self.run),
            Ok(None) => self.run.relay.refill = None,
            Err(e) => tracing::warn!(run = %self.run.id, error = %e, "the refill beside the send failed; the next \
                                     batch settles it"),
        }
        self.laps.lap("refill-beside");
    }

    /// Step 2: up to a batch received from staging (no more than the target's cache can hold), large bodies
    /// spooled as they arrive.
    async fn receive(&mut self, source: &mut SourceSide, facts: &EndFacts) -> Result<Taken, RelayError> {
        self.spool.check_free(self.settings.batch_bytes)?;
        let mut consumer = match source.session.create_consumer(&self.staging_queue, staging_consumer()).await {
            Ok(c) => c,
            Err(e) if e.is_not_authorized() => {
                return Err(crate::transfer::staging::StagingError::refused_over_core(
                    &self.staging_queue,
                    &e.to_string(),
                )
                .into())
            }
            Err(e) => return Err(e.into()),
        };
        source.session.start().await?;
        let cap = window::batch_cap(self.batch_size, facts.duplicate_cache_size());
        let limits = Limits { messages: cap as usize, bytes: self.settings.batch_bytes };
        let receipt = receive_batch(&mut consumer, self.spool, self.config, limits, None).await?;
        source.consumer = Some(consumer);
        self.laps.lap("receive");
        Ok(Taken::from_new_consumer(receipt))
    }

    /// A receive that got nothing: either staging's messages are held by a consumer that is gone (wait), or the
    /// run has relayed everything (finish), or the selection still has more to refill (next batch).
    async fn nothing_received(&mut self, conn: &Connection, settled: Settled) -> Result<Outcome, RelayError> {
        let held = staging_depth(conn, &self.staging_queue).await?;
        if held > 0 || !settled.still_in_doubt.is_empty() {
            return Ok(Outcome::Snooze {
                until: Utc::now() + chrono::Duration::from_std(HELD_ELSEWHERE_RETRY).unwrap_or_default(),
                reason: format!(
                    "staging {} holds {held} messages none of which could be received: they are in delivery to a \
                     previous worker's consumer, which the broker gives back when its connection ends",
                    self.staging_queue
                ),
            });
        }
        self.run.counters.delivered += settled.reconciled;
        self.run.relay.in_doubt.clear();
        let next = if self.run.relay.exhausted { Phase::Finish.job() } else { Phase::Relay.job() };
        let mut tx = self.ctx.lease.begin().await?;
        row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
        tx.complete_and_enqueue(&next).await?;
        Ok(Outcome::Committed(tx.commit().await?))
    }

    /// Step 3: the batch's staging ids recorded as in doubt, fenced, before anything is sent, counted into the
    /// target address's duplicate-id window — unless they could push another run's batch in doubt out of the
    /// target's cache: then they go back to staging and the run waits (window.rs).
    async fn mark_staging_ids(
        &mut self,
        source: &mut SourceSide,
        taken: &Taken,
        settled: &mut Settled,
        facts: &EndFacts,
        refill_later: Option<(u32, &NodeAccess)>,
    ) -> Step<Option<Refill>> {
        let new_ids: Vec<i64> = taken.ids.iter().copied().filter(|id| !settled.still_in_doubt.contains(*id)).collect();
        let mut tx = self.ctx.lease.begin().await?;
        let (cache, started) =
            (facts.duplicate_cache_size(), facts.node.as_ref().and_then(|n| n.broker.started_millis()));
        // The ids sent again keep their marks; the new ones get this batch's own. Held back, the cursor stays as
        // loaded: what the reconcile settled is written with its count by a later attempt.
        let loaded = std::mem::replace(&mut self.run.relay.in_doubt, settled.still_in_doubt.clone());
        if let Err(held) = window::admit(tx.conn(), &mut self.run, cache, started, new_ids, &[]).await? {
            drop(tx);
            self.run.relay.in_doubt = loaded;
            source.give_back().await;
            return Ok(ControlFlow::Break(hold_back(self.ctx, &mut self.run, &self.settings, held).await?));
        }
        self.run.counters.delivered += settled.reconciled;
        settled.reconciled = 0;
        let refill = match refill_later {
            Some((count, source)) => {
                Some(Refill::intend(&mut self.run, source, &self.staging_queue, count, id_chunk(&self.settings))?)
            }
            None => None,
        };
        row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
        tx.commit_progress().await?;
        fault::reach("in-doubt");
        self.laps.lap("in-doubt");
        Ok(ControlFlow::Continue(refill))
    }

    /// Step 4: the batch sent to the target FQQN in one transaction, each message with its duplicate id and trace,
    /// and committed (poison proven one message per transaction: see [`send_batch_proving`]). A refusal or a full
    /// target gives the batch back to staging.
    async fn send_to_target(
        &mut self,
        source: &mut SourceSide,
        target_session: &Session,
        watch: &TargetWatch<'_>,
        taken: &Taken,
        settled: &Settled,
        route: &Route,
    ) -> Step<Landed> {
        let accepted_before = self.run.counters.delivered > 0;
        let attempts = self.settings.target_attempts;
        match send_taken(target_session, watch, taken, route, Mode::Move, attempts, accepted_before).await {
            Ok(landed) => {
                fault::reach("target-commit");
                self.laps.lap("target-send+commit");
                Ok(ControlFlow::Continue(landed))
            }
            Err(SendFailure::Refused { words, maybe_on_target }) => {
                // Given back to staging. Rolled back on the target, the batch is in staging only; but in one-by-one
                // mode the messages before the refusal are committed, and a change found just after the commit may
                // have come after it: then the batch may be on the target as well, and stays in doubt.
                self.give_back_unsent(source, settled, !maybe_on_target).await?;
                Err(RelayError::refused(Code::TargetChanged, words))
            }
            Err(SendFailure::Full(e)) => {
                source.give_back().await;
                if !e.one_by_one {
                    // The target transaction was rolled back whole: the batch is not in doubt any more.
                    self.run.relay.in_doubt = settled.still_in_doubt.clone();
                }
                self.wait_for_room(full_words(&e)).await
            }
            Err(SendFailure::Other(e)) => {
                Err(RelayError::transient_in(Code::Core, "sending the batch to the target", e))
            }
        }
    }

    /// The batch given back to staging after the target refused it; `unsent` (nothing of it can be on the target)
    /// takes it out of doubt, fenced.
    async fn give_back_unsent(
        &mut self,
        source: &mut SourceSide,
        settled: &Settled,
        unsent: bool,
    ) -> Result<(), RelayError> {
        source.give_back().await;
        if unsent {
            self.run.relay.in_doubt = settled.still_in_doubt.clone();
        }
        let mut tx = self.ctx.lease.begin().await?;
        row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
        tx.commit_progress().await?;
        Ok(())
    }

    /// The dead-letter intent, fenced, before any source transaction that could take the proven poison out of
    /// staging.
    async fn mark_poison(&mut self, taken: &Taken, landed: &Landed) -> Result<(), RelayError> {
        if landed.sent.poison.is_empty() {
            return Ok(());
        }
        self.run.relay.dead_letter = landed.sent.poison.iter().map(|p| taken.ids[p.index]).collect();
        let mut tx = self.ctx.lease.begin().await?;
        row::save(tx.conn(), self.run.id, &self.run.relay, &self.run.counters).await?;
        tx.commit_progress().await?;
        Ok(())
    }

    /// Step 5: the batch but its proven poison acknowledged from staging, and the source committed.
    async fn acknowledge(&mut self, source: &mut SourceSide, taken: &Taken, landed: &Landed) -> Result<(), RelayError> {
        let consumer = batch_consumer(&mut source.consumer)?;
        taken.acknowledge_all_but(consumer, &source.session, &landed.poisoned()).await?;
        fault::reach("source-commit");
        self.laps.lap("source-ack+commit");
        Ok(())
    }

    /// Step 5b: the proven poison to a dead message queue, each in its own source transaction (docs/dead-message-queue.md).
    async fn dead_letter_staged(
        &mut self,
        source: &mut SourceSide,
        received: Vec<Received>,
        poison: Vec<Poison>,
        route: &Route,
    ) -> Result<dmq::Outcome, RelayError> {
        if poison.is_empty() {
            return Ok(dmq::Outcome::default());
        }
        let mut slots: Vec<Option<Received>> = received.into_iter().map(Some).collect();
        let items = poison.into_iter().filter_map(|p| slots[p.index].take().map(|r| (p, r))).collect();
        let dmq_ctx = dmq::Context::of_run(Mode::Move, &self.run, &route.origin, &route.target, &self.settings);
        let consumer = batch_consumer(&mut source.consumer)?;
        let dead =
            dmq::dead_letter_staged(&source.conn, &source.session, consumer, self.spool, self.config, items, &dmq_ctx)
                .await?;
        self.laps.lap("dead-letter");
        Ok(dead)
    }

    /// Step 6: one fenced transaction — counters, in-doubt cleared, this job completed, the next one enqueued
    /// (paced) — or, when a poison message found no DMQ, what the batch did recorded and the run stopped.
    async fn write_record(
        &mut self,
        remaining: Option<i64>,
        settled: Settled,
        batch_ids: &[i64],
        count: BatchCount,
        dead: dmq::Outcome,
    ) -> Step<Committed> {
        let ids: HashSet<i64> = batch_ids.iter().copied().collect();
        let relay = &mut self.run.relay;
        relay.in_doubt = settled.still_in_doubt.kept(|id| !ids.contains(&id));
        relay.waiting_since = None;
        relay.dead_letter.clear();
        self.run.counters.add_batch(&count);
        self.run.counters.delivered += settled.reconciled;
        let next = self.next_job(remaining, count.delivered);
        let mut tx = self.ctx.lease.begin().await?;
        if let Some(reason) = write_batch(tx.conn(), &self.run, &count, &dead).await? {
            // A poison message no DMQ accepted is back in staging: what the batch did is recorded, and the run stops.
            tx.commit_progress().await?;
            return Ok(ControlFlow::Break(Outcome::Stop { reason }));
        }
        tx.complete_and_enqueue(&next).await?;
        let committed = tx.commit().await?;
        fault::reach("pg-commit");
        self.laps.lap("pg-commit");
        Ok(ControlFlow::Continue(committed))
    }

    /// The finish once staging is empty, the selection exhausted and nothing in doubt; otherwise the next batch,
    /// paced: this batch's share of a second at `messages per second`, from when it started.
    fn next_job(&self, staging_left: Option<i64>, messages: i64) -> crate::jobs::NewJob {
        if self.run.relay.exhausted && staging_left == Some(0) && self.run.relay.in_doubt.is_empty() {
            return Phase::Finish.job();
        }
        let share = messages as f64 / self.settings.messages_per_second.max(0.001);
        Phase::Relay.job().run_at(self.started + chrono::Duration::milliseconds((share * 1000.0) as i64))
    }

    /// The job is committed (or ending) and its continuation may already be leased to this worker, unrenewed
    /// until this returns: closing is courtesy to the brokers, so one that does not answer (frozen, failing over)
    /// gets CLOSE_WAIT ([`Closing::run`]), then whatever is still open is dropped (its sockets closed). Connections
    /// whose consumer closed go back to the pool for the next batch, each with the session it committed in
    /// (`crate::broker::core_pool` says why that is safe).
    fn keep_links(&mut self, links: (Link, Option<Link>), kept: Option<Kept>) {
        if let Some(Kept { source: source_session, target: target_session }) = kept {
            let (mut source, target) = links;
            source.keep(source_session);
            self.h.links.give_back(source);
            if let Some(mut conn) = target {
                if let Some(session) = target_session {
                    conn.keep(session);
                }
                self.h.links.give_back(conn);
            }
        }
        self.laps.lap("record+close");
        tracing::debug!(run = %self.run.id, laps = %self.laps, "batch timings");
        if self.ctx.stop_requested {
            // The in-doubt batch is settled; the stop request ends the run at the next claim.
            tracing::info!(run = %self.run.id, "settled the in-doubt batch before stopping");
        }
    }

    /// The run waits for room on the target ([`wait_for_room`]).
    async fn wait_for_room<T>(&mut self, why: String) -> Step<T> {
        Ok(ControlFlow::Break(wait_for_room(self.ctx, &mut self.run, &self.settings, why).await?))
    }
}

/// The refill decided with the batch's in-doubt mark, run while the batch sends: the source broker's move into
/// staging, after a look at its heap where `heap_guard` names a paging source scanned by a filter (a heap not
/// fit for it: nothing moved, `None`).
async fn refill_beside(
    refill: Option<Refill>,
    source: NodeAccess,
    heap_guard: Option<String>,
) -> Result<Option<Refilled>, RelayError> {
    let Some(refill) = refill else {
        return Ok(None);
    };
    if let Some(display) = heap_guard {
        if check_source_heap(&display, source.mgmt.heap().await.ok().flatten()) != TargetCheck::Go {
            return Ok(None);
        }
    }
    refill.run(&source).await.map(Some)
}

/// The consumer a taken batch came from.
fn batch_consumer(consumer: &mut Option<Consumer>) -> Result<&mut Consumer, RelayError> {
    consumer.as_mut().ok_or_else(|| {
        RelayError::transient(Code::Core, "the batch's staging consumer was closed before the batch was done")
    })
}

/// The wait while staging's messages are in delivery to a consumer that is gone.
fn held_elsewhere(staging_queue: &str, held: i64, visible: usize) -> Outcome {
    Outcome::Snooze {
        until: Utc::now() + chrono::Duration::from_std(HELD_ELSEWHERE_RETRY).unwrap_or_default(),
        reason: format!(
            "staging {staging_queue} holds {held} messages but only {visible} are visible: the rest are still in \
             delivery to a previous worker's consumer, which the broker gives back when its connection ends"
        ),
    }
}
