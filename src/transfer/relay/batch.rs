//! One relay batch of a move (SPEC §4.2), and the run's first job that prepares staging (§4.1).
//!
//! The order of a batch is what makes it exactly-once; every step names what a crash right after it leaves
//! behind, and how the next claim settles it:
//!
//! | step | durable before the next step | a crash right after it |
//! |---|---|---|
//! | 0 reconcile | in-doubt ids gone from staging counted delivered (with step 3's write) | repeated: broker truth again |
//! | 1 guard | nothing | nothing happened |
//! | refill | its intent, fenced, before the broker's move; its result after | intent pending: ids re-checked against staging |
//! | 2 receive | large bodies spooled as they arrive | the broker gives the batch back to staging (connection closed) |
//! | 3 in-doubt | the batch's staging ids, fenced | messages back in staging; re-sent, duplicates dropped by the target |
//! | 4 target commit | the target holds the batch | re-sent from staging; the target's duplicate cache drops them |
//! | 5 source commit | staging no longer holds the batch | reconcile finds them gone: delivered |
//! | 5b dead-letter (dmq.rs) | poison on a DMQ, out of staging | gone, named by the intent: dead-lettered |
//! | 6 fenced commit | counters, in-doubt cleared, next job | — |
//!
//! The duplicate id of each message is `studio:<run>:<staging message id>` (docs/adr/0005): stable across
//! every re-send of the same staged message, so the target keeps each one once.

use std::collections::HashSet;
use std::time::Duration;

use artemis_core::protocol::message::CoreMessage;
use artemis_core::{ConsumerOptions, Delivery, SessionOptions};
use chrono::Utc;
use serde_json::json;

use super::ends::NodeAccess;
use super::guard::{check_source_heap, check_target, recheck_before_commit, BatchSize, QueueView, TargetCheck};
use super::spool::{Spool, SpoolFile};
use super::state::{self, MoveRun, RefillIntent};
use super::window::{self, Resend, Room};
use super::{dmq, fault, MoveHandler, Phase, RelayConfig, RelayError};
use crate::broker::jolokia::{BrokerState, ObjectName, QueueConfig, RoutingType};
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::settings::{self, Settings};
use crate::transfer::gather::end_facts;
use crate::transfer::outbound::{outbound_headers, Origin, OutboundTarget};
use crate::transfer::plan::{Mode, Selection};
use crate::transfer::staging::{self, StagingSpec};

/// How long a batch waits before looking again when staging's messages are still held by a consumer that
/// has gone (the broker gives them back when that connection's TTL runs out).
const HELD_ELSEWHERE_RETRY: Duration = Duration::from_secs(2);

/// How long a committed batch's connections may take to close before they are dropped: well under a lease, since
/// the continuation's lease runs unrenewed meanwhile.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A received staging message and, for a large one, its spooled body.
pub(crate) struct Received {
    pub(crate) delivery: Delivery,
    spooled: Option<(SpoolFile, u64)>,
}

impl Received {
    /// A message received whole into memory (a browsed one).
    pub(crate) fn in_memory(delivery: Delivery) -> Received {
        Received { delivery, spooled: None }
    }

    /// A message whose large body was streamed to `file` (`len` bytes).
    pub(crate) fn spooled(delivery: Delivery, file: SpoolFile, len: u64) -> Received {
        Received { delivery, spooled: Some((file, len)) }
    }

    pub(crate) fn body_len(&self) -> u64 {
        match &self.spooled {
            Some((_, len)) => *len,
            None => self.delivery.message().body.len() as u64,
        }
    }
}

pub(crate) async fn load(ctx: &JobContext) -> Result<MoveRun, RelayError> {
    let mut conn = ctx.pool.acquire().await?;
    Ok(state::load(&mut conn, ctx.job.run_id.0).await?)
}

pub(crate) async fn load_settings(ctx: &JobContext) -> Result<Settings, RelayError> {
    settings::load(&ctx.pool).await.map_err(|e| RelayError::transient("reading the settings", e))
}

pub(crate) fn stop_outcome(run: &MoveRun) -> Outcome {
    Outcome::Stop { reason: run.stop_reason.clone().unwrap_or_else(|| "stop requested".into()) }
}

/// The source queue's MBean name.
pub(crate) fn source_queue_mbean(source: &NodeAccess, run: &MoveRun) -> ObjectName {
    source.mgmt.queue_mbean(run.plan.source.address(), RoutingType::Anycast, &run.plan.source.queue)
}

/// The run's first job: creates the target queue when the preview said the run would, makes staging fully
/// explicit and verifies it (§4.1), then hands over to the first relay batch.
pub async fn prepare(h: &MoveHandler, ctx: &JobContext) -> Result<Outcome, RelayError> {
    if let Some(revoked) = crate::transfer::permissions::stop_if_revoked(ctx).await? {
        return Ok(revoked);
    }
    let run = load(ctx).await?;
    if ctx.stop_requested {
        return Ok(stop_outcome(&run));
    }
    let settings = load_settings(ctx).await?;
    if run.plan.mode != Mode::Move {
        return Err(RelayError::Refused(format!("run {} is a copy; a move job cannot run it", run.id)));
    }
    let source = NodeAccess::resolve(&ctx.pool, &run.plan.source, h.permits()).await?;
    if run.create_target {
        let target = NodeAccess::resolve(&ctx.pool, &run.plan.target, h.permits()).await?;
        create_target_queue(&target, &run).await?;
    }
    let spec = StagingSpec { name: staging::staging_queue_name(run.id), batch_size: settings.batch_size };
    staging::prepare(&source.mgmt, &spec).await?;
    // What management cannot show (non-destructive) is checked over Core, with the relay's own credentials:
    // the broker's security settings apply to Core, not to management calls.
    let conn = source.connect(std::time::Duration::from_secs(30)).await?;
    match conn.queue_query(&spec.name).await {
        Ok(Some(info)) => staging::check_core_view(&info, &spec)?,
        Ok(None) => {
            return Err(RelayError::Transient(format!("the staging queue {} is not visible over Core yet", spec.name)))
        }
        Err(e) if e.is_not_authorized() => {
            return Err(staging::StagingError::refused_over_core(&spec.name, &e.to_string()).into())
        }
        Err(e) => return Err(e.into()),
    }
    let _ = conn.close().await;

    let mut tx = ctx.lease.begin().await?;
    state::set_staging(tx.conn(), run.id, &spec.name).await?;
    let mut relay = run.relay.clone();
    relay.prepared = true;
    let mut counters = run.counters.clone();
    if counters.selected.is_none() {
        counters.selected = match &run.plan.selection {
            Selection::Ids(ids) => Some(ids.len() as i64),
            Selection::All => run.selection_size,
            Selection::Filter(_) => run.selection_size,
        };
    }
    state::save(tx.conn(), run.id, &relay, &counters).await?;
    state::event(tx.conn(), run.id, "staging_prepared", json!({ "queue": spec.name, "node": source.label })).await?;
    tx.complete_and_enqueue(&Phase::Relay.job()).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// Creates the target queue the preview said the run would create (durable, anycast, no filter): never left
/// to auto-create, because a send to a missing queue is dropped silently.
pub(crate) async fn create_target_queue(target: &NodeAccess, run: &MoveRun) -> Result<(), RelayError> {
    let queue = &run.plan.target;
    let mut config = QueueConfig::plain_anycast(&queue.queue);
    config.address = queue.address().to_string();
    match target.mgmt.create_queue(&config).await {
        Ok(_) => Ok(()),
        // A resumed run, or a queue someone made since the preview: the batch guard checks what it is.
        Err(e) if e.to_string().contains("AMQ229019") || e.to_string().to_lowercase().contains("already exists") => {
            Ok(())
        }
        Err(e) => Err(RelayError::transient(&format!("creating the target queue {}", queue.display()), e)),
    }
}

/// One relay batch (SPEC §4.2 steps 0–6). See the module doc for the order and why.
pub async fn relay(
    h: &MoveHandler,
    ctx: &JobContext,
    config: &RelayConfig,
    spool: &Spool,
) -> Result<Outcome, RelayError> {
    if let Some(revoked) = crate::transfer::permissions::stop_if_revoked(ctx).await? {
        return Ok(revoked);
    }
    let started = Utc::now();
    let mut laps = Laps::start();
    let settings = load_settings(ctx).await?;
    let mut run = load(ctx).await?;
    let Some(staging_queue) = run.staging_queue.clone() else {
        return Err(RelayError::Refused(format!("run {} has no staging queue: it was never prepared", run.id)));
    };
    let batch_size = settings.batch_size.max(1);

    // 1. Guard: both ends re-resolved by NodeID (a failover moves the run to the new live node); the target
    // re-checked in one batched request.
    // The two ends are on different nodes: their reads go out together.
    let (source, target) = tokio::join!(
        NodeAccess::resolve_cached(&ctx.pool, &run.plan.source, h.permits(), &h.ends),
        target_facts(h, ctx, &run)
    );
    let source = source?;
    let (target, facts) = target?;
    laps.lap("resolve");
    let average = if run.counters.delivered > 0 { run.counters.delivered_bytes / run.counters.delivered } else { 1024 };
    let estimate = BatchSize {
        messages: i64::from(batch_size),
        bytes: (average.max(1) * i64::from(batch_size)).min(settings.batch_bytes as i64),
    };
    match check_target(&run.plan.target.display(), &facts, estimate, settings.capacity_threshold_pct) {
        TargetCheck::Go => {}
        TargetCheck::Refuse(words) => return Err(RelayError::Refused(words)),
        TargetCheck::Unknown(words) => return Err(RelayError::Transient(words)),
        TargetCheck::Wait(words) if !ctx.stop_requested => return wait_for_room(ctx, &mut run, &settings, words).await,
        TargetCheck::Wait(_) => {}
    }
    laps.lap("guard");

    let source_conn = h.links.take(&source, config.connection_ttl).await?;
    let session = source_conn.create_session(SessionOptions::transacted()).await?;
    laps.lap("source-connect");

    // Staging is the run's alone: a message another consumer takes is on neither end, and an in-doubt id missing
    // from staging could then not be read as delivered.
    if let Some(outcome) = check_staging_consumers(ctx, &mut run, &source_conn, &staging_queue, config).await? {
        return Ok(outcome);
    }

    // 0. Reconcile the previous attempt from broker truth.
    let mut reconciled = 0i64;
    let mut still_in_doubt: Vec<i64> = Vec::new();
    if !run.relay.in_doubt.is_empty() || run.relay.refill.is_some() {
        let listed = list_staging(&source_conn, &staging_queue).await?;
        let present = &listed.ids;
        let held = staging_depth(&source_conn, &staging_queue).await?;
        let missing: Vec<i64> = run.relay.in_doubt.iter().copied().filter(|id| !present.contains(id)).collect();
        if !missing.is_empty() && held > present.len() as i64 {
            // Some of staging is still in delivery to a consumer that is gone (a dead or stalled worker): "not in
            // staging" cannot yet be read as "delivered".
            return Ok(Outcome::Snooze {
                until: Utc::now() + chrono::Duration::from_std(HELD_ELSEWHERE_RETRY).unwrap_or_default(),
                reason: format!(
                    "staging {staging_queue} holds {held} messages but only {} are visible: the rest are still in \
                     delivery to a previous worker's consumer, which the broker gives back when its connection ends",
                    present.len()
                ),
            });
        }
        // Ids the dead-letter intent names went to a DMQ in a source transaction that committed (SPEC §4.4; see
        // dmq.rs): gone from staging, but not delivered. Settled at once, counted with their event in one fenced
        // write that also takes them out of doubt, so a crash before step 3 cannot count them again.
        let dead: Vec<i64> = missing.iter().copied().filter(|id| run.relay.dead_letter.contains(id)).collect();
        run.relay.dead_letter.clear();
        if !dead.is_empty() {
            run.relay.in_doubt.retain(|id| !dead.contains(id));
            run.counters.dead_lettered += dead.len() as i64;
            let mut tx = ctx.lease.begin().await?;
            state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
            state::event(tx.conn(), run.id, "dead_lettered", json!({ "staging_ids": dead, "reconciled": true }))
                .await?;
            tx.commit_progress().await?;
        }
        reconciled = (missing.len() - dead.len()) as i64;
        still_in_doubt = run.relay.in_doubt.iter().copied().filter(|id| present.contains(id)).collect();
        if let Some(intent) = run.relay.refill.take() {
            if intent.ids.is_none() {
                // A filter's refill whose result was never written moved an unknown number: every message that
                // entered staging is still there (in delivery included), delivered, dead-lettered or returned, so
                // broker truth gives what was staged. Never lowered: a move still finishing only adds to staging.
                let left_staging =
                    run.counters.delivered + reconciled + run.counters.dead_lettered + run.counters.returned;
                run.counters.staged = run.counters.staged.max(held + left_staging);
            }
            settle_refill_intent(&source, &mut run, &staging_queue, &intent, &listed.original_ids, id_chunk(&settings))
                .await?;
        }
    }

    // A batch in doubt is sent again only where the target's cache still holds what landed of it (window.rs).
    if !still_in_doubt.is_empty() {
        let target_broker = facts.node.as_ref().map(|n| &n.broker);
        match window::resend(run.relay.window.as_ref(), target_broker) {
            Resend::Safe => {}
            Resend::Unknown(words) => return Err(RelayError::Transient(words)),
            Resend::CacheLost => {
                run.relay.in_doubt = still_in_doubt.clone();
                run.counters.delivered += reconciled;
                let started = target_broker.and_then(BrokerState::started_millis);
                let held_in = format!("the staging queue {staging_queue} on {}", run.plan.source.node);
                return stop_for_lost_cache(ctx, &mut run, started, &still_in_doubt, &held_in).await;
            }
        }
    }

    if ctx.stop_requested && still_in_doubt.is_empty() {
        // Nothing left to settle: record what the reconcile learnt and stop.
        let mut tx = ctx.lease.begin().await?;
        run.counters.delivered += reconciled;
        run.relay.in_doubt.clear();
        state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        tx.commit_progress().await?;
        return Ok(stop_outcome(&run));
    }

    // Refill staging while it holds fewer than 2 × batch (never when only settling before a stop).
    let held = staging_depth(&source_conn, &staging_queue).await?;
    let own = run.counters.staged - run.counters.delivered - reconciled - run.counters.dead_lettered;
    let depth = held.max(own);
    if !ctx.stop_requested && !run.relay.exhausted && depth < 2 * i64::from(batch_size) {
        // A filtered scan of a paging source costs the source broker heap it keeps (see guard::check_source_heap):
        // with the heap nearly full, what staging holds is relayed without a refill, and an empty staging waits.
        let heap_check = if run.source_paged && matches!(run.plan.selection, Selection::Filter(_)) {
            check_source_heap(&run.plan.source.display(), source.mgmt.heap().await.ok().flatten())
        } else {
            TargetCheck::Go
        };
        match heap_check {
            TargetCheck::Go => {
                let count = (2 * i64::from(batch_size) - depth) as u32;
                match whole_queue_left(&run, run.counters.staged) {
                    Some(0) => run.relay.exhausted = true,
                    left => {
                        let count = left.map_or(count, |left| count.min(left));
                        refill(ctx, &source, &mut run, &staging_queue, count, id_chunk(&settings)).await?;
                    }
                }
            }
            _ if depth > 0 => {}
            TargetCheck::Wait(words) => return wait_for_room(ctx, &mut run, &settings, words).await,
            TargetCheck::Unknown(words) | TargetCheck::Refuse(words) => return Err(RelayError::Transient(words)),
        }
    }
    laps.lap("reconcile+refill");

    // 2. Receive up to a batch from staging, spooling large bodies as they arrive.
    spool.check_free(settings.batch_bytes)?;
    let mut consumer = match session.create_consumer(&staging_queue, ConsumerOptions::default()).await {
        Ok(c) => c,
        Err(e) if e.is_not_authorized() => {
            return Err(staging::StagingError::refused_over_core(&staging_queue, &e.to_string()).into())
        }
        Err(e) => return Err(e.into()),
    };
    session.start().await?;
    let cache = facts.duplicate_cache_size();
    let limits = Limits { messages: window::batch_cap(batch_size, cache) as usize, bytes: settings.batch_bytes };
    let (received, bytes) = receive_batch(&mut consumer, spool, config, limits, None).await?;
    laps.lap("receive");

    if received.is_empty() {
        return nothing_received(ctx, &mut run, &source_conn, &staging_queue, reconciled, still_in_doubt).await;
    }
    fault::reach("receive");

    // The target queue as it is before anything is sent, to be checked again before the target commit.
    let target_conn = h.links.take(&target, config.connection_ttl).await?;
    let watch = TargetWatch::start(&target_conn, &run.plan.target.queue, &run.plan.target.display()).await?;
    laps.lap("target-connect");

    // 3. Record the batch's staging ids as in doubt, fenced, before anything is sent, counted into the target
    // address's duplicate-id window — unless they could push another run's batch in doubt out of the target's
    // cache: then they go back to staging and the run waits (window.rs).
    let batch_ids: Vec<i64> = received.iter().map(|r| r.delivery.message_id()).collect();
    {
        let new_ids: Vec<i64> = batch_ids.iter().copied().filter(|id| !still_in_doubt.contains(id)).collect();
        let mut tx = ctx.lease.begin().await?;
        let key = window::key(&run.plan.target);
        let room = window::reserve(tx.conn(), run.id, &key, cache, new_ids.len() as i64).await?;
        let started = facts.node.as_ref().and_then(|n| n.broker.started_millis());
        if let Err(held) = room.apply(&mut run.relay, key, started, !still_in_doubt.is_empty()) {
            drop(tx);
            drop(consumer);
            let _ = session.rollback().await;
            return hold_back(ctx, &mut run, &settings, held).await;
        }
        run.relay.in_doubt = still_in_doubt.iter().copied().chain(new_ids).collect();
        run.counters.delivered += reconciled;
        reconciled = 0;
        state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        tx.commit_progress().await?;
    }
    fault::reach("in-doubt");
    laps.lap("in-doubt");

    // 4. Send to the target FQQN in one transaction, each with its duplicate id and trace.
    let target_session = target_conn.create_session(SessionOptions::transacted()).await?;
    let routing = facts
        .queue
        .state()
        .and_then(|q| q.routing_type)
        .map(core_routing)
        .unwrap_or(artemis_core::admin::RoutingType::Anycast);
    let out_target = OutboundTarget {
        address: run.plan.target.address().to_string(),
        queue: run.plan.target.queue.clone(),
        routing,
    };
    let origin = Origin {
        run: run.id,
        cluster: run.plan.source.cluster.clone(),
        node: run.plan.source.node.clone(),
        queue: run.plan.source.queue.clone(),
    };
    let (prepared, missing_original) = outbound_batch(&received, &out_target, &origin, Mode::Move);
    let accepted_before = run.counters.delivered > 0;
    let attempts = settings.target_attempts;
    let sent = match send_batch_proving(&target_session, &watch, &received, &prepared, attempts, accepted_before).await
    {
        Ok(sent) => sent,
        Err(SendFailure::Refused { words, one_by_one }) => {
            // Rolled back on the target: the batch is in staging only (in one-by-one mode the messages before
            // the refusal may be on the target as well, so the batch stays in doubt).
            drop(consumer);
            let _ = session.rollback().await;
            if !one_by_one {
                run.relay.in_doubt = still_in_doubt;
            }
            let mut tx = ctx.lease.begin().await?;
            state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
            tx.commit_progress().await?;
            return Err(RelayError::Refused(words));
        }
        Err(SendFailure::Full(e)) => {
            drop(consumer);
            let _ = session.rollback().await;
            if !e.one_by_one {
                // The target transaction was rolled back whole: the batch is not in doubt any more.
                run.relay.in_doubt = still_in_doubt;
            }
            return wait_for_room(ctx, &mut run, &settings, full_words(&e)).await;
        }
        Err(SendFailure::Other(e)) => return Err(RelayError::transient("sending the batch to the target", e)),
    };
    let (already, one_by_one) = (sent.already, sent.one_by_one);
    fault::reach("target-commit");
    laps.lap("target-send+commit");
    let poisoned: HashSet<usize> = sent.poison.iter().map(|p| p.index).collect();
    if !poisoned.is_empty() {
        // The dead-letter intent, fenced, before any source transaction that could take them out of staging.
        run.relay.dead_letter = sent.poison.iter().map(|p| batch_ids[p.index]).collect();
        let mut tx = ctx.lease.begin().await?;
        state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        tx.commit_progress().await?;
    }

    // 5. Acknowledge the batch (but its proven poison) from staging and commit the source.
    for (i, r) in received.iter().enumerate() {
        if !poisoned.contains(&i) {
            consumer.ack(&r.delivery).await?;
        }
    }
    session.commit().await?;
    fault::reach("source-commit");
    laps.lap("source-ack+commit");
    let n = (received.len() - poisoned.len()) as i64;
    let bytes = bytes - poisoned.iter().map(|&i| received[i].body_len()).sum::<u64>();

    // 5b. The proven poison to a dead message queue, each in its own source transaction (SPEC §4.4).
    let mut dead = dmq::Outcome::default();
    if !poisoned.is_empty() {
        let mut slots: Vec<Option<Received>> = received.into_iter().map(Some).collect();
        let items = sent.poison.into_iter().filter_map(|p| slots[p.index].take().map(|r| (p, r))).collect();
        let dmq_ctx = dmq::Context::of_run(Mode::Move, &run, &origin, &out_target, &settings);
        dead = dmq::dead_letter_staged(&source_conn, &session, &mut consumer, spool, config, items, &dmq_ctx).await?;
        laps.lap("dead-letter");
    }

    // 6. One fenced transaction: counters, in-doubt cleared, this job completed, the next one enqueued.
    let ids: HashSet<i64> = batch_ids.iter().copied().collect();
    run.relay.in_doubt = still_in_doubt.into_iter().filter(|id| !ids.contains(id)).collect();
    run.relay.waiting_since = None;
    run.relay.dead_letter.clear();
    run.counters.dead_lettered += dead.dead.len() as i64;
    run.counters.delivered += n + reconciled;
    run.counters.delivered_bytes += bytes as i64;
    run.counters.batches += 1;
    run.counters.original_id_missing += missing_original;
    run.counters.already_on_target += already;
    if one_by_one {
        run.counters.one_by_one_batches += 1;
    }
    let remaining = staging_depth(&source_conn, &staging_queue).await?;
    let next = if run.relay.exhausted && remaining == 0 && run.relay.in_doubt.is_empty() {
        Phase::Finish.job()
    } else {
        // Pacing: this batch's share of a second at `messages per second`, from when it started.
        let share = n as f64 / settings.messages_per_second.max(0.001);
        Phase::Relay.job().run_at(started + chrono::Duration::milliseconds((share * 1000.0) as i64))
    };
    let mut tx = ctx.lease.begin().await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    state::set_active_state(tx.conn(), run.id, "running").await?;
    if one_by_one {
        state::event(tx.conn(), run.id, "one_by_one", json!({ "batch": n, "already_on_target": already })).await?;
    }
    for settled in &dead.dead {
        state::event(tx.conn(), run.id, "dead_lettered", settled.event(Mode::Move)).await?;
    }
    if let Some(reason) = dead.stop {
        // A poison message no DMQ accepted is back in staging: what the batch did is recorded, and the run stops.
        state::event(tx.conn(), run.id, "dead_letter_refused", json!({ "why": reason })).await?;
        tx.commit_progress().await?;
        return Ok(Outcome::Stop { reason });
    }
    tx.complete_and_enqueue(&next).await?;
    let committed = tx.commit().await?;
    fault::reach("pg-commit");
    laps.lap("pg-commit");

    // The job is committed and its continuation may already be leased to this worker, unrenewed until this
    // returns: closing is courtesy to the brokers, so one that does not answer (frozen, failing over) gets
    // CLOSE_WAIT, then whatever is still open is dropped (its sockets closed). Connections whose sessions all
    // closed go back to the pool for the next batch (links.rs says why that is safe).
    drop(watch);
    let closing = async {
        consumer.close().await.is_ok() && session.close().await.is_ok() && target_session.close().await.is_ok()
    };
    if tokio::time::timeout(CLOSE_WAIT, closing).await.unwrap_or(false) {
        h.links.give_back(source_conn);
        h.links.give_back(target_conn);
    }
    laps.lap("close");
    tracing::debug!(run = %run.id, messages = n, laps = %laps, "batch timings");
    if ctx.stop_requested {
        // The in-doubt batch is settled; the stop request ends the run at the next claim.
        tracing::info!(run = %run.id, "settled the in-doubt batch before stopping");
    }
    Ok(Outcome::Committed(committed))
}

/// Stops a run whose batch in doubt cannot be sent again safely ([`window::Resend::CacheLost`]), naming its ids
/// and where they are held. The batch's mark takes the target's new start, so a resume — the operator's word
/// that the target does not hold them (any more) — sends them again.
pub(crate) async fn stop_for_lost_cache(
    ctx: &JobContext,
    run: &mut MoveRun,
    target_started: Option<i64>,
    ids: &[i64],
    held_in: &str,
) -> Result<Outcome, RelayError> {
    let words = window::cache_lost_words(run.id, &run.plan.target, ids, held_in);
    if let Some(mark) = run.relay.window.as_mut() {
        mark.target_started = target_started;
    }
    let mut tx = ctx.lease.begin().await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    state::event(tx.conn(), run.id, "in_doubt_cache_lost", json!({ "ids": ids, "words": words })).await?;
    tx.commit_progress().await?;
    Ok(Outcome::Stop { reason: words })
}

/// A batch the duplicate-id window holds back (it is already rolled back to where it came from): the run waits
/// for room, or retries when the target's cache could not be read.
pub(crate) async fn hold_back(
    ctx: &JobContext,
    run: &mut MoveRun,
    settings: &Settings,
    room: Room,
) -> Result<Outcome, RelayError> {
    match room {
        Room::Full(words) => wait_for_room(ctx, run, settings, words).await,
        Room::Unknown(words) => Err(RelayError::Transient(words)),
        Room::Open { .. } | Room::NoCache => {
            Err(RelayError::Transient("the duplicate-id window held back a batch it had room for".into()))
        }
    }
}

/// The target end and the guard's facts about it. The end resolved recently is asked first, and the same
/// batched read that brings the facts says whether it is still the node's live broker (its NodeID and
/// `Active`): the re-resolve of step 1 costs no request of its own unless the node failed over.
pub(crate) async fn target_facts(
    h: &MoveHandler,
    ctx: &JobContext,
    run: &MoveRun,
) -> Result<(NodeAccess, crate::transfer::facts::EndFacts), RelayError> {
    if let Some(target) = h.ends.recent(&run.plan.target) {
        if let Ok(facts) = end_facts(&target.mgmt, &run.plan.target).await {
            if facts.node.as_ref().is_some_and(|n| target.is_live_node(&n.broker)) {
                return Ok((target, facts));
            }
        }
        h.ends.forget_end(&run.plan.target);
    }
    let target = NodeAccess::resolve_cached(&ctx.pool, &run.plan.target, h.permits(), &h.ends).await?;
    let facts = end_facts(&target.mgmt, &run.plan.target).await?;
    Ok((target, facts))
}

/// Where a batch's time went, for the debug log that throughput work reads.
struct Laps {
    last: std::time::Instant,
    laps: Vec<(&'static str, Duration)>,
}

impl Laps {
    fn start() -> Laps {
        Laps { last: std::time::Instant::now(), laps: Vec::new() }
    }

    fn lap(&mut self, step: &'static str) {
        let now = std::time::Instant::now();
        self.laps.push((step, now - self.last));
        self.last = now;
    }
}

impl std::fmt::Display for Laps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, (step, d)) in self.laps.iter().enumerate() {
            write!(f, "{}{step} {:.1}ms", if i == 0 { "" } else { ", " }, d.as_secs_f64() * 1000.0)?;
        }
        Ok(())
    }
}

/// How much one batch may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Messages.
    pub messages: usize,
    /// Body bytes (the batch ends after the message that reaches it).
    pub bytes: u64,
}

/// Receives up to `limits` from `consumer`, spooling each large body to disk as it arrives. With `only`, the
/// messages whose staging id is not in it are received but left out (they go back to staging when the
/// session ends without acknowledging them), and receiving stops once all of `only` arrived.
pub(crate) async fn receive_batch(
    consumer: &mut artemis_core::Consumer,
    spool: &Spool,
    config: &RelayConfig,
    limits: Limits,
    only: Option<&HashSet<i64>>,
) -> Result<(Vec<Received>, u64), RelayError> {
    let mut received: Vec<Received> = Vec::new();
    let mut bytes = 0u64;
    let mut file = spool.file().await?;
    while received.len() < limits.messages && bytes < limits.bytes {
        if only.is_some_and(|ids| received.len() == ids.len()) {
            break;
        }
        let wait = if received.is_empty() { config.first_receive } else { config.next_receive };
        let Some(delivery) = consumer.recv_streaming(wait, file.writer()).await? else { break };
        let spooled = if delivery.body_streamed() {
            let len = file.finish().await.map_err(|e| RelayError::transient("spooling a large body", e))?;
            let full = std::mem::replace(&mut file, spool.file().await?);
            Some((full, len))
        } else {
            None
        };
        if only.is_some_and(|ids| !ids.contains(&delivery.message_id())) {
            continue;
        }
        let item = Received { delivery, spooled };
        bytes += item.body_len();
        received.push(item);
    }
    Ok((received, bytes))
}

/// The outbound headers of a received batch, and how many lacked their original source id.
pub(crate) fn outbound_batch(
    received: &[Received],
    target: &OutboundTarget,
    origin: &Origin,
    mode: Mode,
) -> (Vec<artemis_core::protocol::message::MessageHeaders>, i64) {
    let mut missing_original = 0i64;
    let prepared = received
        .iter()
        .map(|r| {
            let out = outbound_headers(&r.delivery.message().headers, r.delivery.message_id(), mode, target, origin);
            if out.original_message_id.is_none() {
                missing_original += 1;
            }
            out.headers
        })
        .collect();
    (prepared, missing_original)
}

/// The target refused room.
pub(crate) struct Full {
    /// The broker's error.
    pub error: artemis_core::Error,
    /// Whether it came in one-by-one mode (some messages may be committed on the target).
    pub one_by_one: bool,
}

/// Why a batch could not be committed on the target.
pub(crate) enum SendFailure {
    /// The address is full: wait for room.
    Full(Full),
    /// The target queue changed while the batch was being sent (deleted, disabled, …; see
    /// [`recheck_before_commit`]): the transaction was rolled back instead of committed.
    Refused {
        /// Why, in words.
        words: String,
        /// Whether it came in one-by-one mode (the messages before it may be committed on the target).
        one_by_one: bool,
    },
    /// Anything else.
    Other(artemis_core::Error),
}

/// The target queue as a batch found it just before sending, checked again before every target commit: the
/// guard's look at the start of the batch is too early for a queue deleted or disabled while the batch is sent
/// (see [`recheck_before_commit`]). A Core queue query each time: no management permit.
pub(crate) struct TargetWatch<'a> {
    conn: &'a artemis_core::Connection,
    queue: String,
    display: String,
    before: QueueView,
}

impl<'a> TargetWatch<'a> {
    /// Looks at the target queue `queue` (`display` for words) before anything is sent.
    pub(crate) async fn start(
        conn: &'a artemis_core::Connection,
        queue: &str,
        display: &str,
    ) -> Result<TargetWatch<'a>, RelayError> {
        match conn.queue_query(queue).await? {
            Some(info) => {
                let before = QueueView::from(&info);
                recheck_before_commit(display, &before, Some(&before)).map_err(RelayError::Refused)?;
                Ok(TargetWatch { conn, queue: queue.to_string(), display: display.to_string(), before })
            }
            None => Err(RelayError::Refused(format!(
                "the target queue {display} no longer exists: a send would be dropped or re-create it by \
                 auto-create, so nothing was sent"
            ))),
        }
    }

    async fn check(&self, one_by_one: bool) -> Result<(), SendFailure> {
        let after = self.conn.queue_query(&self.queue).await.map_err(SendFailure::Other)?;
        recheck_before_commit(&self.display, &self.before, after.map(|q| QueueView::from(&q)).as_ref())
            .map_err(|words| SendFailure::Refused { words, one_by_one })
    }
}

/// Sends a batch to the target in one transaction and commits it, once `watch` finds the target queue still
/// acceptable after the sends. Artemis rejects a whole transaction that holds one duplicate: then the batch goes
/// again one message per transaction, each duplicate being a message the target already has. Returns (messages
/// already on the target, whether it went one by one). A message the target refuses on its own is an error here
/// (the return's settling does not dead-letter); a relay batch uses [`send_batch_proving`].
pub(crate) async fn send_batch(
    target_session: &artemis_core::Session,
    watch: &TargetWatch<'_>,
    received: &[Received],
    prepared: &[artemis_core::protocol::message::MessageHeaders],
) -> Result<(i64, bool), SendFailure> {
    let sent = send_batch_proving(target_session, watch, received, prepared, 1, false).await?;
    match sent.poison.into_iter().next() {
        Some(refused) => Err(SendFailure::Other(refused.error)),
        None => Ok((sent.already, sent.one_by_one)),
    }
}

/// What a batch's sends achieved.
pub(crate) struct Sent {
    /// Messages the target already had (duplicates).
    pub already: i64,
    /// Whether the batch went one message per transaction.
    pub one_by_one: bool,
    /// Messages proven poison (SPEC §4.4): never committed on the target; the rest of the batch is.
    pub poison: Vec<dmq::Poison>,
}

/// [`send_batch`], proving poison (SPEC §4.4): a whole transaction refused for a duplicate or for a refusal that
/// may be one message's ([`dmq::may_be_poison`]) goes again one message per transaction; there a message the
/// target refuses on its own is tried `target_attempts` times in all. Only when at least one other message of
/// the batch was committed meanwhile are the refused ones proven poison (returned in [`Sent::poison`]): a batch
/// where nothing commits says more about the target than about its messages, and stays a transient failure. A
/// batch of **one** has no other message: there the messages this run already committed to the target
/// (`accepted_before`) are the ones around it, so a lone message at the end of a selection is not left to stall
/// the run.
pub(crate) async fn send_batch_proving(
    target_session: &artemis_core::Session,
    watch: &TargetWatch<'_>,
    received: &[Received],
    prepared: &[artemis_core::protocol::message::MessageHeaders],
    target_attempts: u32,
    accepted_before: bool,
) -> Result<Sent, SendFailure> {
    // Flow-controlled like any Core producer (§8.6): an address that blocks its producers when full (BLOCK) is
    // honoured — without credits the broker would take the sends past its max-size-bytes — and one that stays
    // blocked for TARGET_CREDIT_WAIT counts as full (rolled back, and the run waits for room).
    let producer = match prepared.first().and_then(|h| h.address.as_ref()) {
        Some(fqqn) => {
            target_session.producer_with_flow_control(&fqqn.to_string_lossy(), TARGET_CREDIT_WINDOW, TARGET_CREDIT_WAIT)
        }
        None => target_session.producer(None),
    };
    let all = async {
        for (r, headers) in received.iter().zip(prepared) {
            send_target(&producer, r, headers).await.map_err(SendFailure::Other)?;
        }
        watch.check(false).await?;
        target_session.commit().await.map_err(SendFailure::Other)
    };
    match all.await {
        Ok(()) => return Ok(Sent { already: 0, one_by_one: false, poison: Vec::new() }),
        Err(SendFailure::Other(e)) if e.is_duplicate_id() || dmq::may_be_poison(&e) => {
            let _ = target_session.rollback().await;
        }
        Err(SendFailure::Other(e)) if target_full(&e) => {
            let _ = target_session.rollback().await;
            return Err(SendFailure::Full(Full { error: e, one_by_one: false }));
        }
        Err(refused @ SendFailure::Refused { .. }) => {
            let _ = target_session.rollback().await;
            return Err(refused);
        }
        Err(e) => return Err(e),
    }
    let mut already = 0i64;
    let mut committed = 0usize;
    let mut poison: Vec<dmq::Poison> = Vec::new();
    for (index, (r, headers)) in received.iter().zip(prepared).enumerate() {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            // (failure, whether it came at the commit)
            let single = async {
                send_target(&producer, r, headers).await.map_err(|e| (SendFailure::Other(e), false))?;
                watch.check(true).await.map_err(|f| (f, false))?;
                target_session.commit().await.map_err(|e| (SendFailure::Other(e), true))
            };
            match single.await {
                Ok(()) => {
                    committed += 1;
                    break;
                }
                Err((SendFailure::Other(e), _)) if e.is_duplicate_id() => {
                    let _ = target_session.rollback().await;
                    already += 1;
                    break;
                }
                Err((SendFailure::Other(e), _)) if target_full(&e) => {
                    let _ = target_session.rollback().await;
                    return Err(SendFailure::Full(Full { error: e, one_by_one: true }));
                }
                Err((refused @ SendFailure::Refused { .. }, _)) => {
                    let _ = target_session.rollback().await;
                    return Err(refused);
                }
                Err((SendFailure::Other(e), committing)) if dmq::may_be_poison(&e) => {
                    let _ = target_session.rollback().await;
                    if attempt >= target_attempts.max(1) {
                        let reason = dmq::reason_of(&e, committing);
                        tracing::info!(message = index, attempts = attempt, error = %e, "the target refused a message");
                        poison.push(dmq::Poison { index, error: e, reason, attempts: attempt });
                        break;
                    }
                }
                Err((e, _)) => return Err(e),
            }
        }
    }
    let lone_after_others = received.len() == 1 && accepted_before;
    if committed == 0 && !poison.is_empty() && !lone_after_others {
        // Nothing around the refused messages was committed: no proof.
        return Err(SendFailure::Other(poison.swap_remove(0).error));
    }
    Ok(Sent { already, one_by_one: true, poison })
}

/// Sends one message to the target, unless the test seam ([`fault::refusal`]) refuses it as the target would.
async fn send_target(
    producer: &artemis_core::Producer,
    r: &Received,
    headers: &artemis_core::protocol::message::MessageHeaders,
) -> Result<(), artemis_core::Error> {
    if let Some(refused) = fault::refusal(headers) {
        return Err(refused);
    }
    send_one(producer, r, headers).await
}

/// Producer credits the relay asks the target for at a time (the Java client's default producer window).
const TARGET_CREDIT_WINDOW: u32 = 64 * 1024;

/// How long a send waits for producer credits before its target address counts as full.
const TARGET_CREDIT_WAIT: Duration = Duration::from_secs(10);

/// The target has no room: full under FAIL (refused), or under BLOCK (no credits in [`TARGET_CREDIT_WAIT`]).
fn target_full(e: &artemis_core::Error) -> bool {
    e.is_address_full() || e.is_producer_blocked()
}

/// Why the run waits after the target refused room, in words.
pub(crate) fn full_words(e: &Full) -> String {
    if e.error.is_producer_blocked() {
        format!(
            "the target address is full and blocks its producers (address-full-policy BLOCK): no producer credits \
             within {} s",
            TARGET_CREDIT_WAIT.as_secs()
        )
    } else {
        format!("the target refused a send: {}", e.error)
    }
}

/// Sends one received message: from memory, or streamed from its spool file.
pub(crate) async fn send_one(
    producer: &artemis_core::Producer,
    r: &Received,
    headers: &artemis_core::protocol::message::MessageHeaders,
) -> Result<(), artemis_core::Error> {
    match &r.spooled {
        Some((file, _)) => {
            let reader = file.reader().await.map_err(|e| artemis_core::Error::BodyIo(std::sync::Arc::new(e)))?;
            producer.send_large_from(headers, reader).await
        }
        None => {
            let message = CoreMessage { headers: headers.clone(), body: r.delivery.message().body.clone() };
            producer.send(&message).await
        }
    }
}

pub(crate) fn core_routing(r: RoutingType) -> artemis_core::admin::RoutingType {
    match r {
        RoutingType::Anycast => artemis_core::admin::RoutingType::Anycast,
        RoutingType::Multicast => artemis_core::admin::RoutingType::Multicast,
    }
}

/// Staging has a consumer although no batch of this run is receiving (each batch closes its consumer): the
/// consumer of a worker that died, which the broker drops within the connection TTL — then wait — or another
/// client's, which takes messages the run can no longer account for — then, once it outlasts every worker's TTL
/// (`FOREIGN_CONSUMER_GRACE` × the TTL), stop the run saying so. `None`: no consumer, go on.
async fn check_staging_consumers(
    ctx: &JobContext,
    run: &mut MoveRun,
    conn: &artemis_core::Connection,
    staging_queue: &str,
    config: &RelayConfig,
) -> Result<Option<Outcome>, RelayError> {
    let consumers = conn.queue_query(staging_queue).await?.map_or(0, |q| q.consumer_count);
    if consumers == 0 {
        if run.relay.foreign_consumer_since.take().is_some() {
            let mut tx = ctx.lease.begin().await?;
            state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
            tx.commit_progress().await?;
        }
        return Ok(None);
    }
    let now = Utc::now();
    let since = *run.relay.foreign_consumer_since.get_or_insert(now);
    let grace = chrono::Duration::from_std(config.connection_ttl * FOREIGN_CONSUMER_GRACE).unwrap_or_default();
    let mut tx = ctx.lease.begin().await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    if now - since >= grace {
        let reason = format!(
            "staging {staging_queue} has had {consumers} consumer(s) that are not this run's for {} s: messages they              take are on neither the source nor the target, and the run cannot tell them from delivered ones. Find              and stop that client (the broker's consumer list of {staging_queue} names its connection), then resume              or return; grant consume on studio.transfer.# to the product's broker user alone",
            (now - since).num_seconds()
        );
        state::event(tx.conn(), run.id, "foreign_consumer", json!({ "queue": staging_queue, "consumers": consumers }))
            .await?;
        tx.commit_progress().await?;
        return Ok(Some(Outcome::Stop { reason }));
    }
    tx.commit_progress().await?;
    Ok(Some(Outcome::Snooze {
        until: now + chrono::Duration::from_std(HELD_ELSEWHERE_RETRY).unwrap_or_default(),
        reason: format!(
            "staging {staging_queue} has {consumers} consumer(s) that are not this batch's: a previous worker's, which              the broker drops when its connection times out, or another client's"
        ),
    }))
}

/// How many connection TTLs a consumer on staging that is not a batch's own may last before the run stops: a dead
/// worker's is gone after one.
const FOREIGN_CONSUMER_GRACE: u32 = 3;

/// What staging holds as a Core browse sees it (see [`list_staging`]).
#[derive(Debug, Default)]
pub(crate) struct StagingListing {
    /// Each message's staging id.
    pub(crate) ids: HashSet<i64>,
    /// The source id the broker's move recorded on each (`_AMQ_ORIG_MESSAGE_ID`), where it did.
    pub(crate) original_ids: HashSet<i64>,
}

/// What staging holds but its messages in delivery ([`staging::list_over_core`]): the relay's own consumer may not
/// browse it, which the broker's words say with the snippet.
pub(crate) async fn list_staging(
    conn: &artemis_core::Connection,
    staging_queue: &str,
) -> Result<StagingListing, RelayError> {
    let listed = match staging::list_over_core(conn, staging_queue).await {
        Ok(listed) => listed,
        Err(e) if e.is_not_authorized() => {
            return Err(staging::StagingError::refused_over_core(staging_queue, &e.to_string()).into())
        }
        Err(e) => return Err(e.into()),
    };
    Ok(StagingListing {
        ids: listed.iter().map(|m| m.id).collect(),
        original_ids: listed.iter().filter_map(|m| m.original_id).collect(),
    })
}

/// Messages staging holds, those in delivery included (a Core queue query: no management permit).
pub(crate) async fn staging_depth(conn: &artemis_core::Connection, staging_queue: &str) -> Result<i64, RelayError> {
    match conn.queue_query(staging_queue).await? {
        Some(info) => Ok(info.message_count),
        None => Err(RelayError::Refused(format!(
            "the staging queue {staging_queue} is gone from the source broker: whatever it held is no longer \
             traceable by this run (was it deleted by hand?)"
        ))),
    }
}

/// The broker's move of more of the selection into staging, its intent recorded (fenced) before the call and
/// its result after.
async fn refill(
    ctx: &JobContext,
    source: &NodeAccess,
    run: &mut MoveRun,
    staging_queue: &str,
    count: u32,
    chunk: usize,
) -> Result<(), RelayError> {
    let ids_range = match &run.plan.selection {
        Selection::Ids(ids) => {
            let from = run.relay.ids_next.min(ids.len());
            Some((from, (from + count as usize).min(ids.len())))
        }
        _ => None,
    };
    run.relay.refill = Some(RefillIntent { at: Utc::now(), count, ids: ids_range });
    let mut tx = ctx.lease.begin().await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.commit_progress().await?;

    let source_mbean = source_queue_mbean(source, run);
    match (&run.plan.selection, ids_range) {
        (Selection::Ids(ids), Some((from, to))) => {
            let moved = refill_ids_chunked(source, &source_mbean, staging_queue, &ids[from..to], chunk).await?;
            fault::reach("refill");
            run.counters.staged += moved.moved.len() as i64;
            run.relay.not_moved.extend(moved.not_moved.iter().copied());
            run.relay.ids_next = to;
            run.relay.exhausted = to >= ids.len();
        }
        _ => {
            let filter = run.plan.effective_filter().unwrap_or_default();
            let t0 = Some(run.plan.t0_millis);
            let moved =
                staging::refill_by_filter(&source.mgmt, &source_mbean, staging_queue, &filter, count, t0).await?;
            fault::reach("refill");
            run.counters.staged += moved as i64;
            // Zero moved: nothing more on the source matches the frozen selection (what is in delivery to a
            // consumer or scheduled is counted as not taken at the finish).
            run.relay.exhausted = moved == 0;
        }
    }
    run.relay.refill = None;
    let mut tx = ctx.lease.begin().await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.commit_progress().await?;
    Ok(())
}

/// How many more messages a whole-queue run may take: the broker's count at `t0` less what it took (`taken`). A
/// message sent after `t0` but stamped at or before it — by a producer that sends timestamp 0 (JMS
/// `setDisableMessageTimestamp`) or whose clock is slow — matches the frozen filter; the count keeps the run from
/// taking such a producer's messages for ever. `None`: no cap (a filter, whose count is rarely exact, or ids).
pub(crate) fn whole_queue_left(run: &MoveRun, taken: i64) -> Option<u32> {
    match (&run.plan.selection, run.selection_size) {
        (Selection::All, Some(counted)) => Some(u32::try_from((counted - taken).max(0)).unwrap_or(u32::MAX)),
        _ => None,
    }
}

/// How many ids one batched management request moves: a batch costs one permit per id, and the per-node
/// bucket never holds more than a second's worth, so half of that keeps room for the other calls.
fn id_chunk(settings: &Settings) -> usize {
    ((settings.node_calls_per_second / 2.0).floor() as usize).clamp(1, 50)
}

/// The broker's move of `ids`, in batched requests of at most `chunk` ids.
async fn refill_ids_chunked(
    source: &NodeAccess,
    source_mbean: &ObjectName,
    staging_queue: &str,
    ids: &[i64],
    chunk: usize,
) -> Result<staging::IdsMoved, RelayError> {
    let mut all = staging::IdsMoved::default();
    for part in ids.chunks(chunk.max(1)) {
        let moved = staging::refill_by_ids(&source.mgmt, source_mbean, staging_queue, part).await?;
        all.moved.extend(moved.moved);
        all.not_moved.extend(moved.not_moved);
    }
    Ok(all)
}

/// A refill whose result was never recorded (a crash between the broker's move and the write). For a filter
/// nothing needs settling: the next refill asks the broker again. For an id selection, the ids of its range
/// already in staging (by their `_AMQ_ORIG_MESSAGE_ID`) were moved; the others are handed to the broker again,
/// so each id ends up counted once, as staged or as not moved.
async fn settle_refill_intent(
    source: &NodeAccess,
    run: &mut MoveRun,
    staging_queue: &str,
    intent: &RefillIntent,
    in_staging: &HashSet<i64>,
    chunk: usize,
) -> Result<(), RelayError> {
    let (Selection::Ids(ids), Some((from, to))) = (&run.plan.selection, intent.ids) else {
        return Ok(());
    };
    let range = &ids[from.min(ids.len())..to.min(ids.len())];
    let (already, rest): (Vec<i64>, Vec<i64>) = range.iter().partition(|id| in_staging.contains(id));
    let mut staged = already.len() as i64;
    let mut not_moved = Vec::new();
    if !rest.is_empty() {
        let source_mbean = source_queue_mbean(source, run);
        let moved = refill_ids_chunked(source, &source_mbean, staging_queue, &rest, chunk).await?;
        staged += moved.moved.len() as i64;
        not_moved = moved.not_moved;
    }
    run.counters.staged += staged;
    run.relay.not_moved.extend(not_moved);
    run.relay.ids_next = to;
    run.relay.exhausted = to >= ids.len();
    Ok(())
}

/// A receive that got nothing: either staging's messages are held by a consumer that is gone (wait), or the
/// run has relayed everything (finish), or the selection still has more to refill (next batch).
async fn nothing_received(
    ctx: &JobContext,
    run: &mut MoveRun,
    source_conn: &artemis_core::Connection,
    staging_queue: &str,
    reconciled: i64,
    still_in_doubt: Vec<i64>,
) -> Result<Outcome, RelayError> {
    let held = staging_depth(source_conn, staging_queue).await?;
    if held > 0 || !still_in_doubt.is_empty() {
        return Ok(Outcome::Snooze {
            until: Utc::now() + chrono::Duration::from_std(HELD_ELSEWHERE_RETRY).unwrap_or_default(),
            reason: format!(
                "staging {staging_queue} holds {held} messages none of which could be received: they are in delivery \
                 to a previous worker's consumer, which the broker gives back when its connection ends"
            ),
        });
    }
    run.counters.delivered += reconciled;
    run.relay.in_doubt.clear();
    let next = if run.relay.exhausted { Phase::Finish.job() } else { Phase::Relay.job() };
    let mut tx = ctx.lease.begin().await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.complete_and_enqueue(&next).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// The target has no room: wait (Waiting, backoff 1 s → 30 s) until `capacity wait` runs out, then stop saying
/// why. A stop request is honoured while waiting (the job is pending, so the stop takes effect at once).
pub(crate) async fn wait_for_room(
    ctx: &JobContext,
    run: &mut MoveRun,
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
        state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
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
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    state::set_active_state(tx.conn(), run.id, "waiting").await?;
    if first {
        state::event(tx.conn(), run.id, "waiting_for_room", json!({ "why": why })).await?;
    }
    tx.commit_progress().await?;
    let delay = waited.num_milliseconds().clamp(1_000, 30_000);
    let until = (now + chrono::Duration::milliseconds(delay)).min(since + limit);
    Ok(Outcome::Snooze { until, reason: why })
}
