//! The proof of a run's end (SPEC §7, I2): before a move or a copy says Succeeded, the source broker is asked
//! again, and the run's own outcome must account for what the broker counted at `t0`.
//!
//! A run's end signals can lie — a browser's end of queue comes early after a journal reload or when a consumer
//! gives messages back behind it, and a counted broker move can drop what it takes out of its scheduler — so "the
//! refills found nothing more" or "the browser reached the end" is never taken as "done" on its own. What the
//! broker counts is compared instead:
//!
//! ```text
//!   selected at t0  =  delivered + dead-lettered + not taken + returned  +  taken by others meanwhile
//! ```
//!
//! `taken by others` is what left the source queue by any other hand than the run's (consumers, expiry, the
//! broker's dead-lettering): the change of the queue's `MessagesAcknowledged + MessagesExpired + MessagesKilled`
//! since `t0`, less what the run itself moved out of the queue (a move's refills, which the broker counts as
//! acknowledgements). Those counters live in the broker's memory: after a restart (or a failover) they began
//! again, and what others took cannot be told apart from a loss — the proof then says so ([`Proof::Unknowable`]).
//! Others may have taken messages outside the selection (a filter, or messages that arrived after `t0`), so what
//! they took is an upper bound: the run is proven when its outcome is no more than exact, and no less than exact
//! less what others took.
//!
//! Or more than exact by messages that arrived after the count: a message stamped at or before `t0` is in the
//! frozen selection (SPEC §2) even when its producer committed it after the broker counted — a transaction open
//! across the count, a slow clock — and the run takes it. What arrived on the source since `t0` (the change of
//! `MessageCount + removed`, which the run's own moves leave alone) bounds how many such messages there can be.
//!
//! `selected` is the broker's count at `t0` (the preview's), never recomputed from the run's outcomes: a
//! selection recomputed from what was done cannot reveal what was not.
//!
//! Where no count can prove the end — the selection was too large for the preview to count, or the source broker
//! restarted and its counters began again — the end is proven **by exhaustion** ([`by_exhaustion`]): the
//! broker's own full iteration of the source (a Core browse with the frozen filter; a copy's pass) finds nothing
//! left that the selection matches and the run has not accounted for, and everything the run took is delivered,
//! dead-lettered or reported. An end neither proves is **unproven**, and the run says so in its state
//! ([`crate::jobs::RunState::Unproven`]), never Succeeded (ADR 0015).

use serde::{Deserialize, Serialize};

use crate::broker::jolokia::{BrokerState, QueueState};

/// How far apart two readings of the broker's start may lie and still be the same start: the broker's clock and
/// its uptime are read in one request, but not in one instant.
const SAME_START_TOLERANCE_MS: i64 = 5_000;

/// Whether two readings of a broker's start ([`BrokerState::started_millis`]) are the same start.
pub fn same_start(a: i64, b: i64) -> bool {
    (a - b).abs() <= SAME_START_TOLERANCE_MS
}

/// How many extra passes a run makes when its end is not proven (a copy browses again, skipping what its ledger
/// holds; a move refills again) before it ends Partial, saying what differs.
pub const MAX_PASSES: u32 = 3;

/// The source queue as its broker counted it at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SourceCount {
    /// `MessageCount`: every message of the queue (scheduled, paged and in delivery included).
    pub message_count: i64,
    /// `MessagesAcknowledged + MessagesExpired + MessagesKilled`: everything that left the queue since the broker
    /// started.
    pub removed: i64,
    /// When the broker started, by its own clock (`CurrentTimeMillis − UptimeMillis`).
    pub broker_started_millis: i64,
}

impl SourceCount {
    /// From a read of the queue and of its broker; `None` when any needed attribute is unknown.
    pub fn read(queue: &QueueState, broker: &BrokerState) -> Option<SourceCount> {
        Some(SourceCount {
            message_count: queue.message_count?,
            removed: queue.messages_acknowledged? + queue.messages_expired? + queue.messages_killed?,
            broker_started_millis: broker.started_millis()?,
        })
    }
}

/// What a run says became of its selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// On the target (a copy: copied).
    pub delivered: i64,
    /// In a dead message queue.
    pub dead_lettered: i64,
    /// Left on the source, with a cause (in delivery, scheduled, gone).
    pub not_taken: i64,
    /// Put back on the source by a return.
    pub returned: i64,
    /// What the run itself took out of the source queue (a move's refills; a copy takes nothing), which the
    /// broker counts with what others took.
    pub moved_out_by_run: i64,
}

impl Outcome {
    fn accounted(&self) -> i64 {
        self.delivered + self.dead_lettered + self.not_taken + self.returned
    }
}

/// What the broker's counts say of a run's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// The outcome accounts for the selection counted at `t0`.
    Proven {
        /// What others took from the source meanwhile (0 when nobody did: the accounting is then exact).
        taken_by_others: i64,
        /// How many more the outcome holds than were counted at `t0`: messages of the frozen selection that
        /// arrived after the count (no more than arrived on the source since `t0`).
        taken_beyond_count: i64,
    },
    /// No count could prove the end, but the source was exhausted: a full iteration of it by the broker found
    /// nothing left that the frozen selection matches (and the run did not account for), and everything the run
    /// took is delivered, dead-lettered or reported.
    Exhausted {
        /// Why the counts could not prove it, in words.
        no_count: String,
    },
    /// The outcome does not account for the selection.
    Differs {
        /// Counted at `t0`.
        selected: i64,
        /// What the run accounts for.
        accounted: i64,
        /// What others took from the source meanwhile.
        taken_by_others: i64,
        /// What arrived on the source since `t0`.
        arrived: i64,
    },
    /// Counts cannot prove or disprove the end; why, in words.
    Unknowable(String),
}

impl Proof {
    /// Whether the end is proven, by the counts or by exhaustion.
    pub fn is_proven(&self) -> bool {
        matches!(self, Proof::Proven { .. } | Proof::Exhausted { .. })
    }

    /// What proved the end, for machines: `counts`, `exhaustion`, or `none` (a difference, or unproven).
    pub fn by(&self) -> &'static str {
        match self {
            Proof::Proven { .. } => "counts",
            Proof::Exhausted { .. } => "exhaustion",
            Proof::Differs { .. } | Proof::Unknowable(_) => "none",
        }
    }

    /// How many more the outcome holds than were counted at `t0` (see [`Proof::Proven`]); 0 unless proven.
    pub fn taken_beyond_count(&self) -> i64 {
        match self {
            Proof::Proven { taken_beyond_count, .. } => *taken_beyond_count,
            _ => 0,
        }
    }

    /// What the proof found, in words for the operator.
    pub fn words(&self) -> String {
        match self {
            Proof::Proven { taken_by_others, taken_beyond_count } => {
                let mut words = "the source broker's counts account for every selected message".to_string();
                if *taken_by_others > 0 {
                    words.push_str(&format!(
                        ", given that {taken_by_others} messages left the source queue by other hands during the \
                         run (consumers, expiry)"
                    ));
                }
                if *taken_beyond_count > 0 {
                    words.push_str(&format!("; {}", taken_beyond_count_words(*taken_beyond_count)));
                }
                words
            }
            Proof::Differs { selected, accounted, taken_by_others, arrived } => {
                let missing = selected - accounted - taken_by_others;
                if missing > 0 {
                    format!(
                        "{missing} of the {selected} messages the source broker counted at t0 are not accounted for: \
                         the run accounts for {accounted} (delivered, dead-lettered, not taken) and {taken_by_others} \
                         left the source by other hands; look for them on the source queue (a broker restart brings \
                         back messages its move left in no queue)"
                    )
                } else {
                    format!(
                        "the run accounts for {accounted} messages, more than the {selected} the source broker \
                         counted at t0 and the {arrived} that arrived on the source since: a message may have \
                         been counted or taken twice"
                    )
                }
            }
            Proof::Exhausted { no_count } => format!(
                "proven by exhaustion: a full pass over the source found nothing left that the frozen selection \
                 matches, and every message the run took is delivered, dead-lettered or reported (the broker's counts \
                 could not prove it: {no_count})"
            ),
            Proof::Unknowable(why) => format!(
                "not proven: the broker's counts cannot prove this end ({why}), and no full pass over the source has \
                 shown that nothing the selection matches is left"
            ),
        }
    }
}

/// What a run's end can show without a count (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhaustion {
    /// A full iteration of the source by the broker (a Core browse with the frozen filter, a copy's pass skipping
    /// what it copied) found nothing the selection matches that the run has not accounted for. `None`: not looked.
    pub nothing_left: Option<bool>,
    /// Everything the run took from the source is delivered, dead-lettered or reported: nothing of it is held
    /// anywhere else (a move's staging is empty and no batch is in doubt; a move on one node lost no answer).
    pub taken_accounted: bool,
}

/// The proof of an end the counts cannot prove (`count_proof` is [`Proof::Unknowable`]) by exhaustion; any other
/// proof as it is.
pub fn by_exhaustion(count_proof: Proof, evidence: Exhaustion) -> Proof {
    match count_proof {
        Proof::Unknowable(no_count) if evidence.nothing_left == Some(true) && evidence.taken_accounted => {
            Proof::Exhausted { no_count }
        }
        other => other,
    }
}

/// The state a run ends in, given its proof and whether anything selected was not delivered (`shortfall`: not
/// taken, dead-lettered, or a difference the words name): **Succeeded only for a proven end** with nothing short;
/// Partial for an end whose shortfall is counted (proven, or a difference after the passes); Unproven for an end
/// nothing proves, whatever else it says.
pub fn end_state(proof: &Proof, shortfall: bool) -> crate::jobs::RunState {
    use crate::jobs::RunState;
    match proof {
        Proof::Unknowable(_) => RunState::Unproven,
        Proof::Differs { .. } => RunState::Partial,
        Proof::Proven { .. } | Proof::Exhausted { .. } if shortfall => RunState::Partial,
        Proof::Proven { .. } | Proof::Exhausted { .. } => RunState::Succeeded,
    }
}

/// Compares a run's outcome with the broker's counts at `t0` and now (see the module doc).
pub fn prove(selected: Option<i64>, at_t0: Option<SourceCount>, now: Option<SourceCount>, outcome: Outcome) -> Proof {
    let Some(selected) = selected else {
        return Proof::Unknowable(
            "the selection was not counted at t0: more matched the filter than the preview counts, or the source \
             could not be read to count it"
                .into(),
        );
    };
    let (Some(t0), Some(now)) = (at_t0, now) else {
        return Proof::Unknowable("the source queue's counters could not be read at t0 and at the end".into());
    };
    if !same_start(now.broker_started_millis, t0.broker_started_millis) {
        return Proof::Unknowable(
            "the source broker restarted or failed over during the run, so its counters began again and what \
             consumers took meanwhile cannot be told apart from a loss"
                .into(),
        );
    }
    let taken_by_others = (now.removed - t0.removed - outcome.moved_out_by_run).max(0);
    let arrived = (now.message_count + now.removed - t0.message_count - t0.removed).max(0);
    let accounted = outcome.accounted();
    if accounted <= selected + arrived && selected <= accounted + taken_by_others {
        Proof::Proven { taken_by_others, taken_beyond_count: (accounted - selected).max(0) }
    } else {
        Proof::Differs { selected, accounted, taken_by_others, arrived }
    }
}

/// What a run took beyond the count at `t0` ([`Proof::taken_beyond_count`]), in words.
pub fn taken_beyond_count_words(n: i64) -> String {
    format!(
        "{n} more than the count at t0 were in the selection and included: stamped at or before t0, but committed \
         after the count (a producer's transaction open across it, or a slow clock)"
    )
}

/// An id selection: each id is accounted for one by one (delivered, dead-lettered, or not taken with its cause,
/// the broker's own answer for each), so the sum must be exact.
pub fn prove_each(selected: i64, outcome: Outcome) -> Proof {
    let accounted = outcome.accounted();
    if accounted == selected {
        Proof::Proven { taken_by_others: 0, taken_beyond_count: 0 }
    } else {
        Proof::Differs { selected, accounted, taken_by_others: 0, arrived: 0 }
    }
}

/// What a run does at its end, given the proof and how many passes it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// End the run: proven, or not provable by counts after a pass that found nothing more.
    End,
    /// Take another pass over the source (it may find what the last one missed).
    AnotherPass,
    /// Passes are used up and the proof still differs: the run ends Partial, saying so.
    EndDiffering,
}

/// `passes` is how many extra passes the run already made; `last_pass_found_nothing` says whether the latest
/// complete pass over the source found nothing more to take (a move's refills always end so; a copy's first
/// browse is not such a pass).
pub fn verdict(proof: &Proof, passes: u32, last_pass_found_nothing: bool) -> Verdict {
    match proof {
        Proof::Proven { taken_by_others: 0, .. } | Proof::Exhausted { .. } => Verdict::End,
        // Others took from the source: a copy's browser may have passed over messages given back behind it, so a
        // copy makes sure with one pass that finds nothing more.
        Proof::Proven { .. } | Proof::Unknowable(_) if last_pass_found_nothing || passes >= MAX_PASSES => Verdict::End,
        Proof::Proven { .. } | Proof::Unknowable(_) => Verdict::AnotherPass,
        Proof::Differs { .. } if passes < MAX_PASSES => Verdict::AnotherPass,
        Proof::Differs { .. } => Verdict::EndDiffering,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(message_count: i64, removed: i64, started: i64) -> Option<SourceCount> {
        Some(SourceCount { message_count, removed, broker_started_millis: started })
    }

    fn moved(delivered: i64, not_taken: i64, moved_out_by_run: i64) -> Outcome {
        Outcome { delivered, not_taken, moved_out_by_run, ..Outcome::default() }
    }

    #[test]
    fn an_exact_move_is_proven() {
        let p = prove(Some(500), count(500, 10, 1_000), count(0, 510, 1_000), moved(500, 0, 500));
        assert_eq!(p, Proof::Proven { taken_by_others: 0, taken_beyond_count: 0 });
        assert_eq!(verdict(&p, 0, true), Verdict::End);
    }

    #[test]
    fn messages_the_broker_left_in_no_queue_are_a_difference() {
        // 500 counted; the broker's counted move took 300 delayed messages out of its scheduler and moved 20.
        let p = prove(Some(500), count(500, 0, 1_000), count(0, 220, 1_000), moved(220, 0, 220));
        assert_eq!(p, Proof::Differs { selected: 500, accounted: 220, taken_by_others: 0, arrived: 0 });
        assert!(p.words().contains("280 of the 500"), "{}", p.words());
        assert_eq!(verdict(&p, 0, true), Verdict::AnotherPass);
        assert_eq!(verdict(&p, MAX_PASSES, true), Verdict::EndDiffering);
    }

    #[test]
    fn a_copy_that_missed_messages_given_back_behind_its_browser_differs() {
        // 300 counted, 280 copied, nothing acknowledged by anyone: 20 were never seen.
        let p = prove(Some(300), count(300, 0, 7), count(300, 0, 7), moved(280, 0, 0));
        assert!(matches!(p, Proof::Differs { .. }));
    }

    #[test]
    fn what_consumers_took_is_an_upper_bound() {
        // 100 counted, 90 delivered, consumers acknowledged 15 (some outside the selection).
        let p = prove(Some(100), count(100, 0, 7), count(10, 105, 7), moved(90, 0, 90));
        assert_eq!(p, Proof::Proven { taken_by_others: 15, taken_beyond_count: 0 });
        assert_eq!(verdict(&p, 0, false), Verdict::AnotherPass);
        assert_eq!(verdict(&p, 1, true), Verdict::End);
        // 70 delivered and 15 taken by others cannot make 100.
        let p = prove(Some(100), count(100, 0, 7), count(10, 85, 7), moved(70, 0, 70));
        assert!(matches!(p, Proof::Differs { .. }));
    }

    #[test]
    fn more_than_counted_is_proven_when_as_many_arrived_after_the_count() {
        // 100 counted; 60 more stamped at or before t0 were committed after the count, and the move took all 160.
        let p = prove(Some(100), count(100, 0, 7), count(0, 160, 7), moved(160, 0, 160));
        assert_eq!(p, Proof::Proven { taken_by_others: 0, taken_beyond_count: 60 });
        assert_eq!(p.taken_beyond_count(), 60);
        assert_eq!(verdict(&p, 0, true), Verdict::End);
        assert!(p.words().contains("60 more than the count at t0"), "{}", p.words());
    }

    #[test]
    fn more_than_counted_and_arrived_is_a_difference() {
        // 100 counted, 20 arrived since, 160 accounted for: 40 are counted twice somewhere.
        let p = prove(Some(100), count(100, 0, 7), count(0, 120, 7), moved(160, 0, 120));
        assert_eq!(p, Proof::Differs { selected: 100, accounted: 160, taken_by_others: 0, arrived: 20 });
        assert!(p.words().contains("more than the 100"), "{}", p.words());
        assert_eq!(p.taken_beyond_count(), 0);
    }

    #[test]
    fn a_restart_or_an_unknown_count_cannot_prove_anything() {
        let restarted = prove(Some(500), count(500, 900, 1_000), count(0, 220, 60_000), moved(220, 0, 220));
        assert!(matches!(restarted, Proof::Unknowable(_)));
        assert_eq!(verdict(&restarted, 0, false), Verdict::AnotherPass);
        assert_eq!(verdict(&restarted, 1, true), Verdict::End);
        assert!(matches!(prove(None, count(1, 0, 0), count(1, 0, 0), moved(1, 0, 1)), Proof::Unknowable(_)));
        assert!(matches!(prove(Some(1), None, count(1, 0, 0), moved(1, 0, 1)), Proof::Unknowable(_)));
    }

    #[test]
    fn an_end_no_count_proves_is_proven_by_exhaustion_or_unproven() {
        let unknowable = prove(None, count(900, 0, 7), count(0, 900, 7), moved(900, 0, 900));
        let exhausted = Exhaustion { nothing_left: Some(true), taken_accounted: true };
        let proof = by_exhaustion(unknowable.clone(), exhausted);
        assert!(matches!(proof, Proof::Exhausted { .. }), "{proof:?}");
        assert!(proof.is_proven());
        assert_eq!(verdict(&proof, 0, true), Verdict::End);
        assert!(proof.words().starts_with("proven by exhaustion"), "{}", proof.words());
        assert_eq!(end_state(&proof, false), crate::jobs::RunState::Succeeded);
        assert_eq!(end_state(&proof, true), crate::jobs::RunState::Partial);

        for evidence in [
            Exhaustion { nothing_left: Some(false), taken_accounted: true },
            Exhaustion { nothing_left: None, taken_accounted: true },
            Exhaustion { nothing_left: Some(true), taken_accounted: false },
        ] {
            let proof = by_exhaustion(unknowable.clone(), evidence);
            assert!(matches!(proof, Proof::Unknowable(_)), "{evidence:?}: {proof:?}");
            assert!(!proof.is_proven());
            assert_eq!(end_state(&proof, false), crate::jobs::RunState::Unproven, "never Succeeded unproven");
            assert!(proof.words().starts_with("not proven"), "{}", proof.words());
        }
        // A count's proof, or its difference, is never replaced by exhaustion.
        let differs = prove(Some(500), count(500, 0, 1_000), count(0, 220, 1_000), moved(220, 0, 220));
        assert_eq!(by_exhaustion(differs.clone(), exhausted), differs);
        assert_eq!(end_state(&differs, true), crate::jobs::RunState::Partial);
    }

    #[test]
    fn a_reading_needs_every_counter_and_the_broker_start() {
        let queue = QueueState {
            message_count: Some(5),
            messages_acknowledged: Some(3),
            messages_expired: Some(1),
            messages_killed: Some(1),
            ..QueueState::default()
        };
        let broker =
            BrokerState { current_time_millis: Some(10_000), uptime_millis: Some(4_000), ..Default::default() };
        assert_eq!(
            SourceCount::read(&queue, &broker),
            Some(SourceCount { message_count: 5, removed: 5, broker_started_millis: 6_000 })
        );
        let unknown = QueueState { messages_killed: None, ..queue };
        assert_eq!(SourceCount::read(&unknown, &broker), None);
    }
}
