//! The target re-check before every relay batch (SPEC §4.2 step 1), as a pure function of the target's facts
//! (read in one batched request): is it still acceptable, and has it room for one more batch?
//!
//! The conditions are the preview's (`transfer::target_rules`: the same rules, codes and words), judged against
//! the next batch instead of the whole selection, and the rule table says what each means mid-run. A target that
//! became unacceptable (a filter, a drop policy, disabled, purging, gone) fails the run **before** the commit that
//! would have dropped messages. A target short of room makes the run wait. A fact that could not be read is never
//! taken as a pass: the batch is retried later.

use super::state::Counters;
use super::{Code, RelayError};
use crate::broker::jolokia::HeapUsage;
use crate::transfer::facts::EndFacts;
use crate::transfer::plan::QueueRef;
use crate::transfer::preview::SOURCE_HEAP_WAIT_PCT;
use crate::transfer::target_rules::{self, Judged, Load, Response, Verdict};

/// What the guard decided, with the finding code of the condition that decided it (`docs/findings.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetCheck {
    /// Acceptable, with room for the batch.
    Go,
    /// Acceptable but short of room: wait, saying why.
    Wait { code: &'static str, words: String },
    /// No longer acceptable: the run fails, saying why.
    Refuse { code: &'static str, words: String },
    /// Something could not be read: try again later, saying what.
    Unknown { code: &'static str, words: String },
}

impl TargetCheck {
    /// What the relay does with it, in one place for the move, the copy and the move on one node: go on
    /// (`Ok(None)`), wait for room saying why (`Ok(Some(words))`), or end the job with the condition's code — a
    /// refusal fails the run, an unknown is retried.
    pub fn decided(self) -> Result<Option<String>, RelayError> {
        match self {
            TargetCheck::Go => Ok(None),
            TargetCheck::Wait { words, .. } => Ok(Some(words)),
            TargetCheck::Refuse { code, words } => Err(RelayError::refused(Code::Target(code), words)),
            TargetCheck::Unknown { code, words } => Err(RelayError::transient(Code::Target(code), words)),
        }
    }

    /// The code of the condition that decided it (`None` for [`TargetCheck::Go`]).
    pub fn code(&self) -> Option<&'static str> {
        match self {
            TargetCheck::Go => None,
            TargetCheck::Wait { code, .. } | TargetCheck::Refuse { code, .. } | TargetCheck::Unknown { code, .. } => {
                Some(code)
            }
        }
    }
}

/// Whether a move by filter may refill staging from a **paging** source now. The broker's filtered move keeps in
/// its heap every paged message its scan passes over (until consumed), so a scan started with the heap nearly
/// full can take the broker down: the refill waits instead, as for room on the target (consumers draining the
/// queue, or a collection of garbage that `used` still counts, give the heap back). `source` names the queue.
pub fn check_source_heap(source: &str, heap: Option<HeapUsage>) -> TargetCheck {
    match heap {
        None => TargetCheck::Unknown {
            code: "source-heap-unknown",
            words: format!(
                "the heap of the source broker holding {source} could not be read: a filtered refill from its paged \
                 queue makes the broker hold more, so it waits until the heap can be read"
            ),
        },
        Some(h) if i128::from(h.used) * 100 >= i128::from(h.max) * i128::from(SOURCE_HEAP_WAIT_PCT) => {
            TargetCheck::Wait {
                // The condition the preview asked to acknowledge: each refill waits while the heap is this full.
                code: "source-paged",
                words: format!(
                    "the source broker holding {source} has {} of its {} MiB heap in use (at least \
                     {SOURCE_HEAP_WAIT_PCT}%): a filtered refill from its paged queue would make it hold more, so \
                     staging is refilled only when it has room again",
                    h.used / 1_048_576,
                    h.max / 1_048_576
                ),
            }
        }
        Some(_) => TargetCheck::Go,
    }
}

/// What the next batch may add to the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSize {
    /// Messages.
    pub messages: i64,
    /// Body bytes (an estimate is fine: it only decides whether to wait).
    pub bytes: i64,
}

/// The body size a batch's estimate assumes per message while the run has not yet seen one (a move on one node
/// never does: the broker moves its bodies).
const ASSUMED_MESSAGE_BYTES: i64 = 1024;

impl BatchSize {
    /// A batch of `messages` at the run's average body size so far ([`ASSUMED_MESSAGE_BYTES`] before there is
    /// one), at most `batch_bytes`: one estimate for a move, a copy and a move on one node.
    pub fn estimate(counters: &Counters, messages: u32, batch_bytes: u64) -> BatchSize {
        let average = match (counters.delivered, counters.delivered_bytes) {
            (n, bytes) if n > 0 && bytes > 0 => bytes / n,
            _ => ASSUMED_MESSAGE_BYTES,
        };
        let messages = i64::from(messages);
        BatchSize {
            messages,
            bytes: average.saturating_mul(messages).min(i64::try_from(batch_bytes).unwrap_or(i64::MAX)),
        }
    }
}

/// Checks the target against `facts` for a batch of `batch`, waiting when an address or the disk would pass
/// `threshold_pct`.
pub fn check_target(target: &QueueRef, facts: &EndFacts, batch: BatchSize, threshold_pct: u32) -> TargetCheck {
    let load = Load { messages: Some(batch.messages), bytes: Some(batch.bytes), of: Judged::Batch };
    decide(&target_rules::judge(target, facts, &load, i64::from(threshold_pct)))
}

/// The one outcome of a batch's verdicts, each read through the rule table's guard column. A refusal comes first
/// (a known reason to fail needs no other fact), then a wait (a known shortage of room: the batch is guarded again
/// when the wait is over), then anything unknown (retried later, never a pass).
fn decide(verdicts: &[Verdict]) -> TargetCheck {
    let first = |response: Response| verdicts.iter().find(|v| v.condition.guard == response);
    let said = |v: &Verdict| (v.condition.code, v.words.clone());
    if let Some((code, words)) = first(Response::Refuse).map(said) {
        TargetCheck::Refuse { code, words }
    } else if let Some((code, words)) = first(Response::Wait).map(said) {
        TargetCheck::Wait { code, words }
    } else if let Some((code, words)) = first(Response::Unknown).map(said) {
        TargetCheck::Unknown { code, words }
    } else {
        TargetCheck::Go
    }
}

/// The parts of a Core queue query (no management permit) that decide whether the target keeps what is sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueView {
    /// Created by the broker's auto-create.
    pub auto_created: bool,
    /// Enabled (`None`: the broker did not say).
    pub enabled: Option<bool>,
    /// The queue's filter.
    pub filter: Option<String>,
    /// Purges its messages when its last consumer leaves.
    pub purge_on_no_consumers: bool,
}

impl From<&artemis_core::QueueInfo> for QueueView {
    fn from(q: &artemis_core::QueueInfo) -> QueueView {
        QueueView {
            auto_created: q.auto_created,
            enabled: q.enabled,
            filter: q.filter.clone(),
            purge_on_no_consumers: q.purge_on_no_consumers,
        }
    }
}

/// The target queue as a Core queue query saw it just before a batch was sent (`before`) and just before the
/// target commit (`after`, `None` when it no longer exists). The guard reads the target at the start of a batch,
/// but the broker does not refuse what happens after that (seen live, docs/broker-notes.md): a send to the FQQN
/// of a queue **deleted** since auto-creates a new one under the default `#` settings, and a queue **disabled**
/// since takes the send and the commit and drops the messages. Neither may get a commit: `Err` says why, and the
/// batch stays in staging.
///
/// A deleted queue that was itself auto-created cannot be told from its auto-created successor; the messages then
/// land on the successor (kept, not dropped), and the run carries on there.
pub fn recheck_before_commit(queue: &str, before: &QueueView, after: Option<&QueueView>) -> Result<(), String> {
    match change_of(before, after) {
        None => Ok(()),
        Some(change) => Err(format!("the target queue {queue} {change}: the batch being sent was not committed")),
    }
}

/// The same look just **after** the target commit. A change found there came between the look before the commit
/// and this one — before the commit reached the broker, or after. A send is routed to the queue when it is sent, and
/// a commit adds it to that queue even if it was deleted meanwhile (it is then lost with it) or disabled (dropped),
/// and the commit still succeeds: so the batch is not acknowledged and stays in staging, and nothing is lost. But
/// where the queue is still there ([`may_hold_the_batch`]), the change may have come after the commit and the batch
/// be in the queue as well: it stays in doubt, and a resume or a return sends it again once the target accepts
/// messages — the target's duplicate-id cache keeps each message once. `Err` says which.
pub fn recheck_after_commit(queue: &str, before: &QueueView, after: Option<&QueueView>) -> Result<(), String> {
    let Some(change) = change_of(before, after) else {
        return Ok(());
    };
    let fate = if may_hold_the_batch(after) {
        "so it was not acknowledged and stays in staging, in doubt (nothing is lost): if the change came after the \
         commit, the batch is in the queue as well, and a resume or a return sends it again once the target accepts \
         messages (the target's duplicate-id cache keeps each message once)"
    } else {
        "so it was not acknowledged and stays in staging (nothing is lost): the batch went with the queue or never \
         reached it"
    };
    Err(format!("the target queue {queue} {change}, found just after a batch was committed to it: {fate}"))
}

/// Whether a target queue found changed just after a batch's commit (`after`, `None` once deleted) may hold the
/// batch: one still there kept what was routed to it before the change (a disabled queue keeps its messages, an
/// auto-created successor holds what was sent to it); a deleted one took it along.
pub fn may_hold_the_batch(after: Option<&QueueView>) -> bool {
    after.is_some()
}

/// What changed in the target queue between `before` and `after` that would lose a batch, in words; `None`: nothing.
fn change_of(before: &QueueView, after: Option<&QueueView>) -> Option<String> {
    let Some(after) = after else {
        return Some("was deleted while a batch was being sent".into());
    };
    if after.auto_created && !before.auto_created {
        return Some("was deleted while a batch was being sent (the broker re-created it by auto-create)".into());
    }
    if after.enabled == Some(false) {
        return Some("was disabled: the broker drops what is sent to it".into());
    }
    if after.filter.as_deref().is_some_and(|f| !f.is_empty()) && after.filter != before.filter {
        return Some(format!(
            "now has a filter ({}): messages it does not match would be dropped",
            after.filter.as_deref().unwrap_or_default()
        ));
    }
    if after.purge_on_no_consumers && !before.purge_on_no_consumers {
        return Some("now purges when it has no consumer".into());
    }
    None
}

#[cfg(test)]
#[path = "guard_tests.rs"]
mod tests;
