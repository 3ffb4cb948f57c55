//! A copy (SPEC §5): browse the source with the frozen selection, relay to the target in transactions exactly
//! as a move does, and record what was copied in a Postgres ledger. The source is never touched: a browser does
//! not consume, and delivery counts do not change.
//!
//! A browser cannot resume at a position, so one job — a **slice** — keeps its browser open across many
//! batches for up to [`SLICE`] (its lease heartbeated meanwhile), committing the ledger and the counters after
//! each batch (fenced), then enqueues its continuation. Only a continuation or a crash browses from the head
//! again, skipping what the ledger holds.
//!
//! | step | durable before the next step | a crash right after it |
//! |---|---|---|
//! | browse up to a batch, minus ledger ids | nothing | nothing happened |
//! | target commit | the target holds the batch | re-browsed and re-sent; the target's duplicate cache drops them (one by one) |
//! | ledger + counters, fenced | the batch is recorded | — |
//!
//! The duplicate id of each message is `studio:<run>:<source message id>`: stable across every browse.
//!
//! The retry budget (10 attempts) is meant per batch, as a move spends it: a move's batch is one job. A slice is
//! one job for many batches, so a slice that copied and then lost its worker or its source would spend an
//! attempt of one budget for the whole slice, and a long copy under a few unrelated faults would end Interrupted
//! while it was making progress. So a later attempt of a slice whose earlier attempt recorded copied messages
//! hands over to a fresh slice job ([`hand_over`]): the budget counts attempts in a row that copied nothing.

use std::collections::HashSet;
use std::time::Duration;

use artemis_core::{ConsumerOptions, SessionOptions};
use chrono::Utc;
use serde_json::json;

use super::batch::{
    full_words, hold_back, load, load_settings, outbound_batch, send_batch_proving, stop_for_lost_cache, stop_outcome,
    target_facts, wait_for_room, whole_queue_left, Received, SendFailure, TargetWatch,
};
use super::dmq;
use super::ends::NodeAccess;
use super::finish::{another_pass, end_words, proof_event, prove_end, source_count_now};
use super::guard::{check_target, BatchSize, TargetCheck};
use super::state::{self, JobAttempt};
use super::window::{self, Resend};
use super::{fault, MoveHandler, Phase, RelayConfig, RelayError};
use crate::broker::jolokia::BrokerState;
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::RunState;
use crate::transfer::outbound::{Origin, OutboundTarget};
use crate::transfer::plan::{Mode, Selection};
use crate::transfer::proof::{self, Verdict};
use crate::transfer::staging::{self, Selected};

/// How long one copy job keeps its browser. Each continuation browses again from the head past everything
/// already copied (the source keeps it), so a slice must be long against a copy's usual length for the cost to
/// stay linear: at a few thousand messages a second, ten minutes covers a million messages in one browse. The
/// slice ends sooner when the worker shuts down (SIGTERM), so a graceful stop is not held up by it.
pub const SLICE: Duration = Duration::from_secs(600);

/// One slice of a copy: batches from one browser until the slice's time is up, the selection is browsed to its
/// end (then the finish), a stop is asked for, or the target has no room.
pub async fn copy_slice(h: &MoveHandler, ctx: &JobContext, config: &RelayConfig) -> Result<Outcome, RelayError> {
    let slice_started = std::time::Instant::now();
    let mut run = load(ctx).await?;
    if run.plan.mode != Mode::Copy {
        return Err(RelayError::Refused(format!("run {} is a move; a copy job cannot run it", run.id)));
    }
    if run.relay.progressed_in.is_some_and(|p| p.is_earlier_attempt_of(&JobAttempt::of(&ctx.job))) {
        return hand_over(ctx, &run).await;
    }
    if ctx.stop_requested && run.relay.in_doubt.is_empty() {
        // Nothing is in doubt between a copy's batches: the ledger and the target's duplicate cache agree. A batch
        // sent before a crash but not in the ledger is settled first (one batch, below), then the run stops.
        return Ok(stop_outcome(&run));
    }
    if run.counters.selected.is_none() {
        run.counters.selected = match &run.plan.selection {
            Selection::Ids(ids) => Some(ids.len() as i64),
            _ => run.selection_size,
        };
    }
    if run.create_target && !run.relay.prepared {
        // The preview promised to create the missing target queue, as a move does (never left to auto-create).
        let target = NodeAccess::resolve_cached(&ctx.pool, &run.plan.target, h.permits(), &h.ends).await?;
        super::batch::create_target_queue(&target, &run).await?;
        run.relay.prepared = true;
        let mut tx = ctx.lease.begin().await?;
        state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        state::event(tx.conn(), run.id, "target_queue_created", json!({ "queue": run.plan.target.display() })).await?;
        tx.commit_progress().await?;
    }
    let source = NodeAccess::resolve_cached(&ctx.pool, &run.plan.source, h.permits(), &h.ends).await?;
    let source_conn = h.links.take(&source, config.connection_ttl).await?;
    let browse_session = source_conn.create_session(SessionOptions::auto_commit()).await?;
    let mut options = ConsumerOptions::default();
    if let Some(filter) = run.plan.effective_filter() {
        options = options.filter(filter);
    }
    let mut browser = match browse_session.create_browser(&run.plan.source.queue, options).await {
        Ok(b) => b,
        Err(e) if e.is_not_authorized() => {
            return Err(RelayError::Refused(format!(
                "the broker refused to let the relay browse {}: {e} (the relay's user needs `browse` on it)",
                run.plan.source.display()
            )))
        }
        Err(e) => return Err(e.into()),
    };
    let wanted: Option<HashSet<i64>> = match &run.plan.selection {
        Selection::Ids(ids) => Some(ids.iter().copied().collect()),
        _ => None,
    };

    let mut target_conn = None;
    let origin = Origin {
        run: run.id,
        cluster: run.plan.source.cluster.clone(),
        node: run.plan.source.node.clone(),
        queue: run.plan.source.queue.clone(),
    };
    let mut browsed_to_end = false;
    loop {
        // Before every batch, as a move's (SPEC §9): nothing is in doubt between a copy's batches, so a revoked
        // grant stops the run at once.
        if let Some(revoked) = crate::transfer::permissions::stop_if_revoked(ctx).await? {
            return Ok(revoked);
        }
        let batch_started = Utc::now();
        let settings = load_settings(ctx).await?;
        // A whole-queue copy copies at most the messages counted at t0 (as a move takes them; see
        // `whole_queue_left`): a producer sending timestamp 0 behind the browser does not keep it going.
        let batch_size = match whole_queue_left(&run, run.counters.delivered + run.counters.dead_lettered) {
            Some(0) => {
                browsed_to_end = true;
                break;
            }
            Some(left) => (settings.batch_size.max(1) as usize).min(left as usize),
            None => settings.batch_size.max(1) as usize,
        };

        // Guard, as every move batch: the live target by NodeID, its queue, room and disk.
        let (target, facts) = target_facts(h, ctx, &run).await?;
        let cache = facts.duplicate_cache_size();
        let batch_size = batch_size.min(window::batch_cap(settings.batch_size.max(1), cache) as usize);
        let average =
            if run.counters.delivered > 0 { run.counters.delivered_bytes / run.counters.delivered } else { 1024 };
        let estimate = BatchSize {
            messages: batch_size as i64,
            bytes: (average.max(1) * batch_size as i64).min(settings.batch_bytes as i64),
        };
        match check_target(&run.plan.target.display(), &facts, estimate, settings.capacity_threshold_pct) {
            TargetCheck::Go => {}
            TargetCheck::Refuse(words) => return Err(RelayError::Refused(words)),
            TargetCheck::Unknown(words) => return Err(RelayError::Transient(words)),
            TargetCheck::Wait(words) => return wait_for_room(ctx, &mut run, &settings, words).await,
        }

        // Browse up to a batch of selected messages the ledger does not hold, large bodies to the spool.
        h.spool.check_free(settings.batch_bytes)?;
        let mut received: Vec<Received> = Vec::new();
        let mut bytes = 0u64;
        while received.len() < batch_size && bytes < settings.batch_bytes {
            let mut candidates: Vec<Received> = Vec::new();
            let mut candidate_bytes = 0u64;
            while candidates.len() < batch_size - received.len() && bytes + candidate_bytes < settings.batch_bytes {
                let next = browse_one(&mut browser, &h.spool).await?;
                run.counters.browsed += i64::from(next.is_some());
                match next {
                    Some(r) if wanted.as_ref().is_none_or(|w| w.contains(&r.delivery.message_id())) => {
                        candidate_bytes += r.body_len();
                        candidates.push(r);
                    }
                    Some(_) => {}
                    None => {
                        browsed_to_end = true;
                        break;
                    }
                }
            }
            let ids: Vec<i64> = candidates.iter().map(|r| r.delivery.message_id()).collect();
            let copied = ledger_holds(&ctx.pool, run.id, &ids).await?;
            for r in candidates {
                if copied.contains(&r.delivery.message_id()) {
                    continue;
                }
                bytes += r.body_len();
                received.push(r);
            }
            if browsed_to_end {
                break;
            }
        }
        fault::reach("copy-browse");
        if received.is_empty() {
            break;
        }

        // Recorded in doubt, fenced, before it is sent, and counted into the target address's duplicate-id
        // window: a crash after the target commit re-browses and re-sends these ids, and other runs must leave them
        // in the target's cache until then (window.rs). Ids already in doubt keep where they began.
        let batch_ids: Vec<i64> = received.iter().map(|r| r.delivery.message_id()).collect();
        let target_broker = facts.node.as_ref().map(|n| &n.broker);
        if batch_ids.iter().any(|id| run.relay.in_doubt.contains(id)) {
            // Sent again only where the target's cache still holds what landed of it.
            match window::resend(run.relay.window.as_ref(), target_broker) {
                Resend::Safe => {}
                Resend::Unknown(words) => return Err(RelayError::Transient(words)),
                Resend::CacheLost => {
                    drop(browser);
                    let in_doubt = run.relay.in_doubt.clone();
                    let started = target_broker.and_then(BrokerState::started_millis);
                    let held_in = format!("the source queue {} (a copy leaves them there)", run.plan.source.display());
                    return stop_for_lost_cache(ctx, &mut run, started, &in_doubt, &held_in).await;
                }
            }
        }
        {
            let carried = !run.relay.in_doubt.is_empty();
            let new_ids: Vec<i64> = batch_ids.iter().copied().filter(|id| !run.relay.in_doubt.contains(id)).collect();
            let mut tx = ctx.lease.begin().await?;
            let key = window::key(&run.plan.target);
            let room = window::reserve(tx.conn(), run.id, &key, cache, new_ids.len() as i64).await?;
            let started = target_broker.and_then(BrokerState::started_millis);
            if let Err(held) = room.apply(&mut run.relay, key, started, carried) {
                drop(tx);
                return hold_back(ctx, &mut run, &settings, held).await;
            }
            run.relay.in_doubt.extend(new_ids);
            state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
            tx.commit_progress().await?;
        }

        // Send in one target transaction (one by one after a duplicate), checked before its commit.
        if target_conn.is_none() {
            target_conn = Some(h.links.take(&target, config.connection_ttl).await?);
        }
        let conn = target_conn.as_ref().expect("just set");
        let watch = TargetWatch::start(conn, &run.plan.target.queue, &run.plan.target.display()).await?;
        let target_session = conn.create_session(SessionOptions::transacted()).await?;
        let routing = facts
            .queue
            .state()
            .and_then(|q| q.routing_type)
            .map(super::batch::core_routing)
            .unwrap_or(artemis_core::admin::RoutingType::Anycast);
        let out_target = OutboundTarget {
            address: run.plan.target.address().to_string(),
            queue: run.plan.target.queue.clone(),
            routing,
        };
        let (prepared, _) = outbound_batch(&received, &out_target, &origin, Mode::Copy);
        let attempts = settings.target_attempts;
        let accepted_before = run.counters.delivered > 0;
        let sent =
            match send_batch_proving(&target_session, &watch, &received, &prepared, attempts, accepted_before).await {
                Ok(sent) => sent,
                Err(SendFailure::Refused { words, .. }) => return Err(RelayError::Refused(words)),
                Err(SendFailure::Full(e)) => {
                    // Whatever one-by-one mode committed before the refusal is re-browsed later and dropped by the
                    // target's duplicate cache.
                    return wait_for_room(ctx, &mut run, &settings, full_words(&e)).await;
                }
                Err(SendFailure::Other(e)) => return Err(RelayError::transient("sending the batch to the target", e)),
            };
        let (already, one_by_one) = (sent.already, sent.one_by_one);
        fault::reach("copy-target-commit");
        if target_session.close().await.is_err() {
            // A session the broker did not confirm closing: that connection is not reused.
            target_conn = None;
        }

        // Proven poison to a dead message queue on the source broker (SPEC §4.4): sent there, then recorded in the
        // ledger with the batch so it is not copied again. A crash between the two re-proves it, and the DMQ
        // refuses its duplicate id: recorded then (see dmq.rs).
        let poisoned: HashSet<usize> = sent.poison.iter().map(|p| p.index).collect();
        let mut dead = dmq::Outcome::default();
        if !poisoned.is_empty() {
            let dmq_session = source_conn.create_session(SessionOptions::transacted()).await?;
            let items = sent.poison.into_iter().map(|p| (p.clone(), &received[p.index])).collect();
            let dmq_ctx = dmq::Context::of_run(Mode::Copy, &run, &origin, &out_target, &settings);
            dead = dmq::dead_letter_browsed(&source_conn, &dmq_session, items, &dmq_ctx).await?;
            let _ = dmq_session.close().await;
        }
        let settled: HashSet<i64> = dead.dead.iter().map(|d| d.received_id).collect();

        // Ledger and counters, fenced, in one transaction.
        let n = (received.len() - poisoned.len()) as i64;
        let poison_bytes: u64 = poisoned.iter().map(|&i| received[i].delivery.message().body.len() as u64).sum();
        let ids: Vec<i64> = received
            .iter()
            .enumerate()
            .filter(|(i, r)| !poisoned.contains(i) || settled.contains(&r.delivery.message_id()))
            .map(|(_, r)| r.delivery.message_id())
            .collect();
        run.relay.waiting_since = None;
        run.counters.delivered += n;
        run.counters.dead_lettered += dead.dead.len() as i64;
        run.counters.delivered_bytes += (bytes - poison_bytes) as i64;
        run.counters.batches += 1;
        run.counters.already_on_target += already;
        if one_by_one {
            run.counters.one_by_one_batches += 1;
        }
        run.relay.in_doubt.retain(|id| !batch_ids.contains(id));
        run.relay.progressed_in = Some(JobAttempt::of(&ctx.job));
        let mut tx = ctx.lease.begin().await?;
        ledger_add(tx.conn(), run.id, &ids).await?;
        state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        state::set_active_state(tx.conn(), run.id, "running").await?;
        if one_by_one {
            state::event(tx.conn(), run.id, "one_by_one", json!({ "batch": n, "already_on_target": already })).await?;
        }
        for settled in &dead.dead {
            state::event(tx.conn(), run.id, "dead_lettered", settled.event(Mode::Copy)).await?;
        }
        if let Some(reason) = dead.stop {
            // The message no DMQ accepted is neither copied nor in the ledger: a resume tries it again.
            state::event(tx.conn(), run.id, "dead_letter_refused", json!({ "why": reason })).await?;
            tx.commit_progress().await?;
            drop(browser);
            return Ok(Outcome::Stop { reason });
        }
        // A stop requested before this slice began waited for this one batch, which re-sent what was in doubt.
        let stop = tx.stop_requested() || ctx.stop_requested;
        tx.commit_progress().await?;
        fault::reach("copy-ledger");
        if stop {
            drop(browser);
            return Ok(stop_outcome(&run));
        }
        if browsed_to_end || slice_started.elapsed() >= SLICE || !ctx.lease.worker_accepting() {
            break;
        }
        // Pacing: this batch's share of a second at `messages per second`, from when it started.
        let share = Duration::from_secs_f64(n as f64 / settings.messages_per_second.max(0.001));
        let elapsed = (Utc::now() - batch_started).to_std().unwrap_or_default();
        if share > elapsed {
            tokio::time::sleep(share - elapsed).await;
        }
    }

    let next = if browsed_to_end { Phase::CopyFinish.job() } else { Phase::CopySlice.job() };
    if browsed_to_end {
        // Whatever is still in doubt was not found again on the source: it will not be sent again.
        run.relay.in_doubt.clear();
    }
    let mut tx = ctx.lease.begin().await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.complete_and_enqueue(&next).await?;
    let committed = tx.commit().await?;
    let closing = async { browser.close().await.is_ok() && browse_session.close().await.is_ok() };
    if tokio::time::timeout(Duration::from_secs(2), closing).await.unwrap_or(false) {
        h.links.give_back(source_conn);
        if let Some(conn) = target_conn {
            h.links.give_back(conn);
        }
    }
    Ok(Outcome::Committed(committed))
}

/// Ends this attempt's slice job and enqueues a fresh one, with a fresh retry budget, because an earlier attempt
/// of this job copied messages (see the module doc). Nothing else is written: the run's state is as the last
/// fenced commit left it.
async fn hand_over(ctx: &JobContext, run: &state::MoveRun) -> Result<Outcome, RelayError> {
    let mut tx = ctx.lease.begin().await?;
    let why = json!({ "attempt": ctx.job.attempt, "copied": run.counters.delivered });
    state::event(tx.conn(), run.id, "slice_handed_over", why).await?;
    tx.complete_and_enqueue(&Phase::CopySlice.job()).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// The selection is browsed to its end: count what the browser could not see (in delivery to a consumer,
/// scheduled for later; for ids also gone), prove the end against the source broker's counts (`transfer::proof`),
/// remove the ledger, and end the run Succeeded or Partial. A browser's end of queue can come early (after a
/// journal reload; messages given back by a consumer go to the head, behind it), so an end the counts do not
/// prove is browsed again — the ledger skips what was copied — a bounded number of times.
pub async fn copy_finish(h: &MoveHandler, ctx: &JobContext) -> Result<Outcome, RelayError> {
    let mut run = load(ctx).await?;
    let source = NodeAccess::resolve_cached(&ctx.pool, &run.plan.source, h.permits(), &h.ends).await?;
    let source_mbean = super::batch::source_queue_mbean(&source, &run);
    let effective = run.plan.effective_filter().unwrap_or_default();
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
    let proof = prove_end(&run, now, 0);
    let clean_pass = run.relay.pass_started_at == Some(run.counters.delivered);
    let verdict = proof::verdict(&proof, run.relay.finish_rechecks, clean_pass);
    if verdict == Verdict::AnotherPass {
        return another_pass(ctx, &mut run, Phase::CopySlice, Some(&proof)).await;
    }
    let words = end_words(&run.counters, "copied", &proof, &verdict);
    let end = if words.is_empty() { RunState::Succeeded } else { RunState::Partial };
    let words = (!words.is_empty()).then(|| words.join("; "));
    let mut tx = ctx.lease.begin().await?;
    sqlx::query("DELETE FROM transfer_copy_ledger WHERE run_id = $1").bind(run.id).execute(&mut *tx.conn()).await?;
    state::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    state::event(
        tx.conn(),
        run.id,
        "copy_finished",
        json!({ "copied": run.counters.delivered, "not_copied": run.counters.not_taken() }),
    )
    .await?;
    state::event(tx.conn(), run.id, "end_proof", proof_event(&proof)).await?;
    tx.complete_and_end_run(end, words.as_deref()).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}

/// The browser's next message, a large body streamed to a spool file of its own (never held in memory, as a
/// move's receive does); `None` at the end of the queue.
async fn browse_one(
    browser: &mut artemis_core::Browser,
    spool: &super::spool::Spool,
) -> Result<Option<Received>, RelayError> {
    let mut file = spool.file().await?;
    let Some(delivery) = browser.next_streaming(file.writer()).await? else {
        return Ok(None);
    };
    if !delivery.body_streamed() {
        return Ok(Some(Received::in_memory(delivery)));
    }
    let len = file.finish().await.map_err(|e| RelayError::transient("spooling a large body", e))?;
    Ok(Some(Received::spooled(delivery, file, len)))
}

/// Of `ids`, those the run's ledger holds.
async fn ledger_holds(pool: &sqlx::PgPool, run: uuid::Uuid, ids: &[i64]) -> Result<HashSet<i64>, RelayError> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let rows: Vec<(i64,)> =
        sqlx::query_as("SELECT message_id FROM transfer_copy_ledger WHERE run_id = $1 AND message_id = ANY($2)")
            .bind(run)
            .bind(ids)
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|(id,)| id).collect())
}

/// Records `ids` as copied: one array insert.
async fn ledger_add(conn: &mut sqlx::PgConnection, run: uuid::Uuid, ids: &[i64]) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO transfer_copy_ledger (run_id, message_id) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING",
    )
    .bind(run)
    .bind(ids)
    .execute(conn)
    .await?;
    Ok(())
}

/// How many source messages the run's ledger records as copied (kept while the run can be resumed).
pub async fn ledger_size(pool: &sqlx::PgPool, run: uuid::Uuid) -> Result<i64, sqlx::Error> {
    let (n,): (i64,) =
        sqlx::query_as("SELECT count(*) FROM transfer_copy_ledger WHERE run_id = $1").bind(run).fetch_one(pool).await?;
    Ok(n)
}
