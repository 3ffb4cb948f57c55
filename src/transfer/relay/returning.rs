//! A return's batch in doubt (docs/guarantees.md, "Stop, resume, return"), settled through the steps every relay batch goes through
//! (`pipeline::batch`): the return's [`Take`] — the run's ids in doubt received from staging, sent to the target
//! again, acknowledged there — so it proves a refused message as a batch does, admits a resend by the batch's own
//! rule, and counts what landed by the batch's own count.
//!
//! | step | the return's batch in doubt | a crash right after it |
//! |---|---|---|
//! | [`Take::prepare`] | staging listed: ids in doubt gone from it are delivered (or dead-lettered, where the intent names them); for those still there, the target resolved and a resend admitted only where its duplicate-id cache still holds the batch (`window::resend`), else the run stops naming the ids | nothing happened |
//! | [`Take::take`] | exactly the ids in doubt still in staging, received | the broker gives them back to staging |
//! | [`Take::nothing_taken`] | the batch counted settled, out of doubt | — |
//! | [`Take::mark_in_doubt`] | nothing: these ids are the run's mark in doubt already | — |
//! | [`Take::send`] | the target looked at, the batch sent in one transaction and committed, a message the target refuses on its own proven as a batch proves poison | the next return sends them again; the target's duplicate cache drops those it has |
//! | [`Take::settle_source`] | the batch but its refused messages acknowledged from staging, committed | the next return finds them gone: delivered |
//! | [`Take::dead_letter`] | nothing: a refused message is proven not on the target, so it stays in staging and goes back to the source with the rest | — |
//! | [`Take::record`] | the batch counted, out of doubt, with its event, fenced | — |
//!
//! The crash seam names the batch's steps: `receive`, `target-commit`, `source-commit`.
//!
//! Where the target cannot be reached or takes nothing, the batch stays in staging and the return fails in words
//! ([`in_doubt_stays`]): some of it may be on the target, so moving it back to the source could double it.

use std::collections::HashSet;
use std::ops::ControlFlow;

use artemis_core::{Connection, Consumer, ConsumerOptions, Session, SessionOptions};
use serde_json::json;

use super::pipeline::{Dealt, Take};
use super::poison::Poison;
use super::receive::{receive_batch, Limits, Taken};
use super::row;
use super::run::{stop_for_lost_cache, Step};
use super::send::{send_taken, Landed, Route, SendFailure, TargetWatch};
use super::staged::{list_staging, staging_depth};
use super::state::{RelayState, TransferRun};
use super::window::{self, Resend};
use super::Code;
use super::{dmq, fault, RelayConfig, RelayError, TransferHandler};
use crate::broker::jolokia::BrokerState;
use crate::broker::node::NodeAccess;
use crate::jobs::handler::JobContext;
use crate::jobs::settings::Settings;
use crate::registry::ends;
use crate::transfer::plan::Mode;

/// A return's batch in doubt, taken from its staging queue (the module doc's table).
pub(super) struct ReturnBatch<'a> {
    pub h: &'a TransferHandler,
    pub ctx: &'a JobContext,
    pub config: &'a RelayConfig,
    pub settings: &'a Settings,
    pub run: &'a mut TransferRun,
    /// The source node's connection, on which staging lives.
    pub source_conn: &'a Connection,
    pub staging_queue: &'a str,
}

/// What the batch in doubt works with from its preparation to its record.
pub(super) struct Ready {
    doubt: InDoubt,
    /// The target, once a resend to it is admitted.
    target: Option<NodeAccess>,
    /// The transacted session the batch is received and acknowledged in, and its consumer once taken.
    session: Session,
    consumer: Option<Consumer>,
    target_conn: Option<Connection>,
    target_session: Option<Session>,
    route: Route,
}

/// The ids of a batch in doubt, sorted by what staging shows of them now.
struct InDoubt {
    /// Still in staging: to be re-sent (the target's duplicate cache drops those it has).
    wanted: HashSet<i64>,
    /// Gone from staging and named by the dead-letter intent: sent to a dead message queue by that attempt
    /// (docs/dead-message-queue.md), as a batch's reconcile counts them.
    dead: usize,
    /// Gone from staging otherwise: delivered by the attempt that recorded them.
    gone: usize,
}

impl InDoubt {
    fn sort(relay: &RelayState, present: &HashSet<i64>) -> InDoubt {
        let ids = relay.in_doubt.ids();
        let wanted = ids.iter().copied().filter(|id| present.contains(id)).collect();
        let (dead, gone): (Vec<i64>, Vec<i64>) =
            ids.into_iter().filter(|id| !present.contains(id)).partition(|id| relay.dead_letter.contains(id));
        InDoubt { wanted, dead: dead.len(), gone: gone.len() }
    }
}

impl Take for ReturnBatch<'_> {
    type Ready = Ready;
    type Done = ();

    /// Staging listed and the ids in doubt sorted by it; a resend admitted by the batch's own rule.
    async fn prepare(&mut self) -> Step<Ready> {
        let doubt = self.sort_in_doubt().await?;
        let target =
            if doubt.wanted.is_empty() { None } else { Some(go_on_step!(self.target_for_resend(&doubt.wanted).await)) };
        let session = self.source_conn.create_session(SessionOptions::transacted()).await?;
        let route = Route::with_routing(self.run, artemis_core::admin::RoutingType::Anycast);
        Ok(ControlFlow::Continue(Ready {
            doubt,
            target,
            session,
            consumer: None,
            target_conn: None,
            target_session: None,
            route,
        }))
    }

    /// Exactly the ids in doubt still in staging, all of them or none.
    async fn take(&mut self, ready: &mut Ready) -> Result<Taken, RelayError> {
        let wanted = &ready.doubt.wanted;
        if wanted.is_empty() {
            return Ok(Taken::new(Vec::new(), 0));
        }
        let mut consumer = ready.session.create_consumer(self.staging_queue, ConsumerOptions::default()).await?;
        ready.session.start().await?;
        let limits = Limits { messages: usize::MAX, bytes: u64::MAX };
        let receipt = receive_batch(&mut consumer, &self.h.spool, self.config, limits, Some(wanted)).await?;
        ready.consumer = Some(consumer);
        if receipt.received.len() != wanted.len() {
            return Err(RelayError::transient(
                Code::StagingHeld,
                format!(
                    "only {} of the {} in-doubt messages in staging {} could be received; the return tries again",
                    receipt.received.len(),
                    wanted.len(),
                    self.staging_queue
                ),
            ));
        }
        Ok(Taken::from_new_consumer(receipt))
    }

    /// Nothing in doubt is still in staging: what is gone is counted.
    async fn nothing_taken(&mut self, ready: Ready) -> Step<()> {
        self.record_settled(&ready.doubt, 0, 0, 0).await?;
        Ok(ControlFlow::Continue(()))
    }

    async fn open_target(&mut self, ready: &mut Ready) -> Result<(), RelayError> {
        let count = ready.doubt.wanted.len();
        let Some(target) = ready.target.as_ref() else {
            return Err(RelayError::transient(Code::Core, "the batch in doubt has no target to be sent to"));
        };
        fault::reach("receive");
        let conn = target.connect(self.config.connection_ttl).await.map_err(|e| self.unreachable(&e, count))?;
        ready.target_conn = Some(conn);
        Ok(())
    }

    /// Nothing to mark: these ids are the run's mark in doubt already.
    async fn mark_in_doubt(&mut self, _: &mut Ready, _: &Taken) -> Step {
        Ok(ControlFlow::Continue(()))
    }

    /// The target looked at, then the batch sent in one transaction and committed, poison proven. A target that
    /// refuses the batch, has no room or fails leaves it in staging, in doubt.
    async fn send(&mut self, ready: &mut Ready, taken: &Taken) -> Step<Landed> {
        let count = taken.ids.len();
        let stays = |words: String| in_doubt_stays(words, count, self.staging_queue, "accepts messages");
        let Some(conn) = ready.target_conn.as_ref() else {
            return Err(RelayError::transient(Code::Core, "the batch in doubt's target connection was not opened"));
        };
        let (queue, display) = (&self.run.plan.target.queue, self.run.plan.target.display());
        let watch = TargetWatch::start(conn, queue, &display).await.map_err(|e| match e {
            RelayError::Refused { words, .. } => stays(words),
            other => other,
        })?;
        let session = conn.create_session(SessionOptions::transacted()).await?;
        let (attempts, accepted_before) = (self.settings.target_attempts, self.run.counters.delivered > 0);
        let sent = send_taken(&session, &watch, taken, &ready.route, Mode::Move, attempts, accepted_before).await;
        ready.target_session = Some(session);
        match sent {
            Ok(landed) => {
                fault::reach("target-commit");
                Ok(ControlFlow::Continue(landed))
            }
            Err(SendFailure::Refused { words, .. }) => Err(stays(words)),
            Err(SendFailure::Full(f)) => Err(RelayError::transient_in(
                Code::Target("capacity-bytes"),
                "settling the batch in doubt: the target has no room",
                f.error,
            )),
            Err(SendFailure::Other(e)) => Err(RelayError::transient_in(Code::Core, "settling the batch in doubt", e)),
        }
    }

    /// The batch but its refused messages acknowledged from staging, and the source committed.
    async fn settle_source(&mut self, ready: &mut Ready, taken: &Taken, landed: &Landed) -> Result<(), RelayError> {
        let consumer = ready.consumer.as_mut().ok_or_else(|| {
            RelayError::transient(Code::Core, "the batch in doubt's staging consumer closed before it was settled")
        })?;
        taken.acknowledge_all_but(consumer, &ready.session, &landed.poisoned()).await?;
        fault::reach("source-commit");
        Ok(())
    }

    /// Nothing: a refused message is proven not on the target, so it is no longer in doubt and goes back to the
    /// source with the rest of staging.
    async fn dead_letter(&mut self, _: &mut Ready, _: Taken, _: Vec<Poison>) -> Result<dmq::Outcome, RelayError> {
        Ok(dmq::Outcome::default())
    }

    /// The batch counted and out of doubt, then its sessions and the target's connection closed (the refused
    /// messages go back to staging as the consumer closes).
    async fn record(&mut self, ready: Ready, dealt: Dealt) -> Step<()> {
        self.run.counters.delivered_bytes += dealt.count.delivered_bytes;
        let refused = dealt.poisoned.len();
        self.record_settled(&ready.doubt, dealt.count.delivered, dealt.count.already_on_target, refused).await?;
        if let Some(consumer) = ready.consumer {
            let _ = consumer.close().await;
        }
        let _ = ready.session.close().await;
        if let Some(session) = ready.target_session {
            let _ = session.close().await;
        }
        if let Some(conn) = ready.target_conn {
            let _ = conn.close().await;
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl ReturnBatch<'_> {
    /// The ids in doubt sorted by what staging lists now — once every message of staging is visible: one still in
    /// delivery to a consumer that is gone would look gone, and be counted delivered.
    async fn sort_in_doubt(&self) -> Result<InDoubt, RelayError> {
        let present: HashSet<i64> = list_staging(self.source_conn, self.staging_queue).await?.ids.into_iter().collect();
        let held = staging_depth(self.source_conn, self.staging_queue).await?;
        if held > present.len() as i64 {
            return Err(RelayError::transient(
                Code::StagingHeld,
                format!(
                    "staging {} holds {held} messages but only {} are visible: the rest are still in delivery to \
                     a consumer that is gone; the return tries again when the broker gives them back",
                    self.staging_queue,
                    present.len()
                ),
            ));
        }
        Ok(InDoubt::sort(&self.run.relay, &present))
    }

    /// The target the batch in doubt is sent to again — only where its cache still holds what landed of the
    /// batch (`window::resend`, the batch's own rule): a target that restarted or failed over since, with a cache
    /// that is not persisted, would not drop it, and the run stops naming the ids and the selector to check them
    /// by.
    async fn target_for_resend(&mut self, wanted: &HashSet<i64>) -> Step<NodeAccess> {
        let target = ends::resolve(&self.ctx.pool, self.run.plan.target.node_ref(), self.h.permits())
            .await
            .map_err(|e| self.unreachable(&e, wanted.len()))?;
        let broker = target.mgmt.broker_state().await.ok();
        let sent_again = self.run.relay.in_doubt.kept(|id| wanted.contains(&id));
        match window::resend_marks(&sent_again, broker.as_ref()) {
            Resend::Safe => Ok(ControlFlow::Continue(target)),
            Resend::Unknown(words) => Err(RelayError::transient(Code::DuplicateWindow, words)),
            Resend::CacheLost => {
                let mut ids: Vec<i64> = wanted.iter().copied().collect();
                ids.sort_unstable();
                let started = broker.as_ref().and_then(BrokerState::started_millis);
                let held_in = format!("the staging queue {} on {}", self.staging_queue, self.run.plan.source.node);
                Ok(ControlFlow::Break(stop_for_lost_cache(self.ctx, self.run, started, &ids, &held_in).await?))
            }
        }
    }

    /// The return's failure while the target cannot be reached.
    fn unreachable(&self, e: &dyn std::fmt::Display, count: usize) -> RelayError {
        in_doubt_stays(format!("the target cannot be reached ({e})"), count, self.staging_queue, "is back")
    }

    /// Counts a settled batch in doubt and clears it, with its event, in one fenced transaction: `resent` landed
    /// now (`already` of them the target had), `refused` are proven not on the target and stay in staging.
    async fn record_settled(
        &mut self,
        doubt: &InDoubt,
        resent: i64,
        already: i64,
        refused: usize,
    ) -> Result<(), RelayError> {
        let run = &mut *self.run;
        run.counters.delivered += resent + doubt.gone as i64;
        run.counters.dead_lettered += doubt.dead as i64;
        run.relay.dead_letter.clear();
        run.counters.already_on_target += already;
        run.relay.in_doubt.clear();
        let mut tx = self.ctx.lease.begin().await?;
        row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
        let event = json!({
            "resent": resent,
            "already_on_target": already,
            "refused_back_to_staging": refused,
            "gone": doubt.gone,
            "dead_lettered": doubt.dead,
        });
        row::event(tx.conn(), run.id, "in_doubt_settled", event).await?;
        tx.commit_progress().await?;
        Ok(())
    }
}

/// A return that cannot settle its batch in doubt (`why`): the `count` messages stay in staging, some perhaps
/// already on the target, until a return finds the target `until`.
fn in_doubt_stays(why: String, count: usize, staging_queue: &str, until: &str) -> RelayError {
    RelayError::refused(
        Code::InDoubtUnsettled,
        format!(
            "{why}: the {count} messages of the batch in doubt stay in staging {staging_queue}; some may already be \
             on the target. Return again once the target {until}."
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::InDoubt;
    use crate::transfer::relay::in_doubt::Marks;
    use crate::transfer::relay::state::RelayState;

    fn relay(in_doubt: &[i64], dead_letter: &[i64]) -> RelayState {
        let in_doubt = Marks::of(in_doubt.to_vec(), None);
        RelayState { in_doubt, dead_letter: dead_letter.to_vec(), ..RelayState::default() }
    }

    #[test]
    fn ids_still_in_staging_are_wanted_and_the_gone_ones_are_delivered_or_dead_lettered() {
        let present: HashSet<i64> = [2, 4, 9].into_iter().collect();
        let doubt = InDoubt::sort(&relay(&[1, 2, 3, 4, 5], &[3]), &present);
        assert_eq!(doubt.wanted, [2, 4].into_iter().collect());
        assert_eq!((doubt.gone, doubt.dead), (2, 1), "1 and 5 delivered, 3 dead-lettered");
    }

    #[test]
    fn an_id_named_by_the_dead_letter_intent_but_still_in_staging_is_sent_again() {
        // The intent is written before the DMQ's commit: an id it names that is still in staging never left.
        let present: HashSet<i64> = [3].into_iter().collect();
        let doubt = InDoubt::sort(&relay(&[1, 3], &[3]), &present);
        assert_eq!(doubt.wanted, [3].into_iter().collect());
        assert_eq!((doubt.gone, doubt.dead), (1, 0));
    }

    #[test]
    fn nothing_in_doubt_is_nothing_to_settle() {
        let doubt = InDoubt::sort(&relay(&[], &[7]), &HashSet::new());
        assert!(doubt.wanted.is_empty());
        assert_eq!((doubt.gone, doubt.dead), (0, 0));
    }
}
