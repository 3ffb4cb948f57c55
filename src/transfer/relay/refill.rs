//! The broker's move of more of a move's selection into staging (SPEC §4.2 refill): the intent recorded, fenced,
//! before the broker's call and its result after, so a crash between them is settled from broker truth.

use std::collections::HashSet;

use chrono::Utc;

use super::fault;
use super::queues::source_queue_mbean;
use super::row;
use super::state::{RefillIntent, TransferRun};
use super::Code;
use super::RelayError;
use crate::broker::jolokia::BrokerManagement;
use crate::broker::jolokia::ObjectName;
use crate::broker::node::NodeAccess;
use crate::jobs::handler::JobContext;
use crate::jobs::settings::Settings;
use crate::transfer::plan::{stamped_part, Selection, Selector};
use crate::transfer::staging::{self, StagingError};

/// The broker's move of more of the selection into staging, its intent recorded (fenced) before the call and
/// its result after.
pub(crate) async fn refill(
    ctx: &JobContext,
    source: &NodeAccess,
    run: &mut TransferRun,
    staging_queue: &str,
    count: u32,
    chunk: usize,
) -> Result<(), RelayError> {
    let order = Refill::intend(run, source, staging_queue, count, chunk)?;
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.commit_progress().await?;
    order.run(source).await?.apply(run);
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    tx.commit_progress().await?;
    Ok(())
}

/// A refill decided, its intent set on the run (the caller records it, fenced, before [`Refill::run`]): what the
/// broker is asked to move, owned, so the move can run beside other work of the batch (a move's batch sends while
/// staging is refilled for the next one: `batch.rs`).
#[derive(Debug)]
pub(crate) struct Refill {
    what: Wanted,
    mbean: ObjectName,
    staging_queue: String,
    chunk: usize,
}

/// What a refill asks the broker for.
#[derive(Debug)]
enum Wanted {
    /// The plan's ids `[from, to)` of `all`.
    Ids { ids: Vec<i64>, to: usize, all: usize },
    /// Up to `count` of the frozen selection (see [`move_frozen_selection`]).
    Frozen { filter: Selector, t0: i64, count: u32, within_count: Option<u32> },
}

/// What a refill's broker move did, to be set on the run by [`Refilled::apply`].
#[derive(Debug)]
pub(crate) enum Refilled {
    /// The ids moved and not moved, the plan's ids handed to the broker up to `to` of `all`.
    Ids { moved: staging::IdsMoved, to: usize, all: usize },
    /// How many of the frozen selection moved.
    Frozen(u64),
}

impl Refill {
    /// The next refill of `count` messages, its intent set on `run` (`run.relay.refill`).
    pub(crate) fn intend(
        run: &mut TransferRun,
        source: &NodeAccess,
        staging_queue: &str,
        count: u32,
        chunk: usize,
    ) -> Result<Refill, RelayError> {
        let (what, ids_range) = match &run.plan.selection {
            Selection::Ids(ids) => {
                let from = run.relay.ids_next.min(ids.len());
                let to = (from + count as usize).min(ids.len());
                (Wanted::Ids { ids: ids[from..to].to_vec(), to, all: ids.len() }, Some((from, to)))
            }
            _ => {
                let Some(filter) = run.plan.frozen_selector()? else {
                    return Err(RelayError::refused(
                        Code::NotThisRun,
                        "an id selection has no frozen filter to refill by",
                    ));
                };
                let within_count = whole_queue_left(run, run.counters.staged);
                (Wanted::Frozen { filter, t0: run.plan.t0_millis, count, within_count }, None)
            }
        };
        run.relay.refill = Some(RefillIntent { at: Utc::now(), count, ids: ids_range });
        let mbean = source_queue_mbean(source, run);
        Ok(Refill { what, mbean, staging_queue: staging_queue.to_string(), chunk })
    }

    /// The broker's move into staging.
    pub(crate) async fn run(&self, source: &NodeAccess) -> Result<Refilled, RelayError> {
        let refilled = match &self.what {
            Wanted::Ids { ids, to, all } => {
                let moved = refill_ids_chunked(source, &self.mbean, &self.staging_queue, ids, self.chunk).await?;
                Refilled::Ids { moved, to: *to, all: *all }
            }
            Wanted::Frozen { filter, t0, count, within_count } => {
                let (frozen, into) = ((filter, *t0), &self.staging_queue);
                Refilled::Frozen(
                    move_frozen_selection(&source.mgmt, &self.mbean, into, frozen, *count, *within_count).await?,
                )
            }
        };
        fault::reach("refill");
        Ok(refilled)
    }
}

impl Refilled {
    /// The move's result set on the run, its intent settled.
    pub(crate) fn apply(self, run: &mut TransferRun) {
        match self {
            Refilled::Ids { moved, to, all } => {
                run.counters.staged += moved.moved.len() as i64;
                run.relay.not_moved.extend(moved.not_moved.iter().copied());
                run.relay.ids_next = to;
                run.relay.exhausted = to >= all;
            }
            Refilled::Frozen(moved) => {
                run.counters.staged += moved as i64;
                // Zero moved: nothing more on the source matches the frozen selection (what is in delivery to a
                // consumer or scheduled is counted as not taken at the finish).
                run.relay.exhausted = moved == 0;
            }
        }
        run.relay.refill = None;
    }
}

/// How many more messages without a timestamp a whole-queue run may take: the broker's count at `t0` less what
/// it took (`taken`). A message stamped at or before `t0` is in the selection whatever the count (committed after
/// it, or by a slow clock), and is taken first; one sent with timestamp 0 (JMS `setDisableMessageTimestamp`)
/// matches the frozen filter however late it came, so the count keeps such a producer from keeping a run going for
/// ever. `None`: no cap (a filter, whose count is rarely exact, or ids).
pub(crate) fn whole_queue_left(run: &TransferRun, taken: i64) -> Option<u32> {
    match (&run.plan.selection, run.selection_size) {
        (Selection::All, Some(counted)) => Some(u32::try_from((counted - taken).max(0)).unwrap_or(u32::MAX)),
        _ => None,
    }
}

/// Which part of a frozen selection one refill asks the broker for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrozenPart {
    /// Up to this many of the whole frozen selection, in the broker's order: every message the source held at
    /// `t0` matches it, so the broker's walk takes from the head and passes over nothing.
    Whole(u32),
    /// Up to this many of its stamped part only: a whole-queue run that has taken the count at `t0` takes no more
    /// messages without a timestamp, but still every one stamped at or before `t0`.
    Stamped(u32),
}

/// The part of a frozen selection a refill of `count` asks for, given what the count at `t0` still leaves a
/// whole-queue run (`within_count`, see [`whole_queue_left`]; `None` for a filter).
///
/// Never a part the broker must walk the queue to find: a filtered `moveMessages` on a paging queue puts every
/// paged message it passes over and does not take into the queue's memory (docs/broker-notes.md, ADR 0007), so
/// asking a queue of a million messages without a timestamp for its stamped part first read the whole queue onto
/// the source broker's heap and exhausted it. Within the count the whole selection is asked for (what the queue
/// held at `t0` all matches, so nothing is passed over); the stamped part alone only once the count is taken, when
/// what is left on the queue came after `t0` — the same walk any filtered run's last refill makes.
pub(crate) fn frozen_part(count: u32, within_count: Option<u32>) -> FrozenPart {
    match within_count {
        None => FrozenPart::Whole(count),
        Some(0) => FrozenPart::Stamped(count),
        Some(left) => FrozenPart::Whole(count.min(left)),
    }
}

/// The broker's move of up to `count` messages of a frozen selection (`frozen`: its filter and `t0`) from `source`
/// into `into`, of the part [`frozen_part`] chooses: for a whole-queue run (`within_count`, see
/// [`whole_queue_left`]) no more messages without a timestamp than the count at `t0` leaves, and every one stamped
/// at or before `t0` however late it was committed. How many moved.
pub(crate) async fn move_frozen_selection(
    mgmt: &BrokerManagement,
    source: &ObjectName,
    into: &str,
    frozen: (&Selector, i64),
    count: u32,
    within_count: Option<u32>,
) -> Result<u64, StagingError> {
    let (filter, t0) = frozen;
    let (part, count) = match frozen_part(count, within_count) {
        FrozenPart::Whole(count) => (filter.to_string(), count),
        FrozenPart::Stamped(count) => (stamped_part(filter), count),
    };
    staging::refill_by_filter(mgmt, source, into, &part, count, Some(t0)).await
}

/// How many ids one batched management request moves: a batch costs one permit per id, and the per-node
/// bucket never holds more than a second's worth, so half of that keeps room for the other calls.
pub(crate) fn id_chunk(settings: &Settings) -> usize {
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
pub(crate) async fn settle_refill_intent(
    source: &NodeAccess,
    run: &mut TransferRun,
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

#[cfg(test)]
mod tests {
    use super::{frozen_part, FrozenPart};

    #[test]
    fn a_whole_queue_run_within_its_count_asks_for_the_whole_selection_never_a_part_to_walk_for() {
        // The first refill of a queue of a million messages without a timestamp: asking for the stamped part would
        // walk (and depage) the whole queue to find none.
        assert_eq!(frozen_part(200, Some(1_000_000)), FrozenPart::Whole(200));
        assert_eq!(frozen_part(200, Some(150)), FrozenPart::Whole(150));
    }

    #[test]
    fn a_whole_queue_run_that_took_its_count_asks_only_for_what_is_stamped_at_or_before_t0() {
        assert_eq!(frozen_part(200, Some(0)), FrozenPart::Stamped(200));
    }

    #[test]
    fn a_filter_asks_for_its_whole_frozen_selection() {
        assert_eq!(frozen_part(200, None), FrozenPart::Whole(200));
    }
}
