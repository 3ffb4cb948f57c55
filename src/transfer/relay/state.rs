//! What a move keeps on its run row between batches (migration 0003): its cursor ([`RelayState`]) and its
//! counters ([`Counters`]). Both are read at the start of a job and written only inside transactions fenced by
//! the job's lease, so a worker that lost its lease never writes them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::in_doubt::Marks;
#[cfg(test)]
use super::in_doubt::WindowMark;
use crate::jobs::RunState;
use crate::transfer::plan::Plan;

/// The relay's cursor (the `relay` column).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RelayState {
    /// What is in doubt, one mark per batch: staging message ids (a copy: source ids) sent to the target whose
    /// source acknowledgement (a copy: ledger entry) is not known to have committed, each batch's with where it
    /// began in the target's duplicate-id window.
    pub in_doubt: Marks,
    /// For an id selection: how many of the plan's ids the refills have handed to the broker so far.
    pub ids_next: usize,
    /// A refill recorded before its broker call and not yet known to have finished.
    pub refill: Option<RefillIntent>,
    /// The source holds nothing more that matches the frozen selection.
    pub exhausted: bool,
    /// When the run began waiting for room on the target; `None` while it is not waiting.
    pub waiting_since: Option<DateTime<Utc>>,
    /// Staging was made and verified (a resumed run verifies it again).
    pub prepared: bool,
    /// For an id selection: the ids the broker did not move (not on the source queue, in delivery, scheduled,
    /// or gone); classified by cause at the finish.
    pub not_moved: Vec<i64>,
    /// How many extra passes over the source the end asked for: more of a filter's messages found on the source,
    /// or an end the source broker's counts did not prove (`transfer::proof`).
    pub finish_rechecks: u32,
    /// Since when staging has had a consumer that is not a batch's own (a previous worker's, gone within its
    /// connection TTL, or another client's); `None` while it has none.
    pub foreign_consumer_since: Option<DateTime<Utc>>,
    /// A copy: how many messages it had copied when its latest extra pass began (a pass that copies nothing more
    /// is a clean one).
    pub pass_started_at: Option<i64>,
    /// A move on one node: ids whose `moveMessage` failed with an error (not a "not found"), handed to the
    /// broker again before the cursor moves on. A failed call moved nothing: the broker's move is per message.
    pub retry_ids: Vec<i64>,
    /// Staging ids about to be dead-lettered (docs/dead-message-queue.md), recorded before the source transaction that sends them
    /// to a dead message queue and acknowledges them from staging: an in-doubt id gone from staging that is named
    /// here was dead-lettered, not delivered (see `dmq`'s module doc).
    pub dead_letter: Vec<i64>,
    /// A move on one node by a filter or the whole queue: how many of the plan's destinations (`Plan::destinations`:
    /// the target, or a retry's original queues) its chunks have emptied of the selection; the next chunk moves
    /// into the one at this index.
    pub destination_next: usize,
    /// A copy: the job and attempt that last recorded copied messages in the ledger. A slice is one job for many
    /// batches, so a later attempt of the same job after such progress hands over to a fresh job (copy.rs).
    pub progressed_in: Option<JobAttempt>,
}

/// One attempt of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobAttempt {
    /// The job's id.
    pub job: i64,
    /// Its attempt (1 for the first claim).
    pub attempt: i32,
}

impl JobAttempt {
    /// The attempt `job` is on.
    pub fn of(job: &crate::jobs::JobRow) -> JobAttempt {
        JobAttempt { job: job.id.0, attempt: job.attempt }
    }

    /// Whether this is an earlier attempt of the job `now` is an attempt of.
    pub fn is_earlier_attempt_of(&self, now: &JobAttempt) -> bool {
        self.job == now.job && self.attempt < now.attempt
    }
}

/// A refill's intent (SPEC §4.1): recorded, fenced, before the broker's move.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefillIntent {
    /// When it was recorded.
    pub at: DateTime<Utc>,
    /// How many messages were asked for.
    pub count: u32,
    /// For an id selection, the plan's ids `[from, to)` handed to the broker.
    pub ids: Option<(usize, usize)>,
}

/// A run's counters (the `counters` column), shown by the run view. Every field counts messages unless named
/// otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(default)]
pub struct Counters {
    /// The selection's size when known (ids, whole queue), else `None` until the run ends.
    pub selected: Option<i64>,
    /// Moved by the broker from the source into staging.
    pub staged: i64,
    /// Committed on the target and acknowledged from staging; for a copy, copied (committed on the target and
    /// recorded in its ledger). The API and the run view show it under the word their mode uses.
    pub delivered: i64,
    /// Body bytes delivered.
    pub delivered_bytes: i64,
    /// Selected but not taken: still in delivery to a consumer on the source.
    pub not_taken_in_delivery: i64,
    /// Selected but not taken: scheduled for later delivery.
    pub not_taken_scheduled: i64,
    /// Selected but not taken: gone from the source before the run reached them (an id selection).
    pub not_taken_gone: i64,
    /// Selected but not taken: left on the source because the run was returned before it reached them (what the
    /// selection counted at t0 leaves after everything the run delivered, dead-lettered, returned or found not
    /// takeable; counted at the return's end).
    pub not_taken_left: i64,
    /// Sent to a dead message queue.
    pub dead_lettered: i64,
    /// Put back on the source by a return.
    pub returned: i64,
    /// Delivered messages whose original source id was not on their staging copy (the broker drops
    /// `_AMQ_ORIG_MESSAGE_ID` for paged large messages): their `_studio_orig_message_id` is absent.
    pub original_id_missing: i64,
    /// Batches the target refused whole for a duplicate and that were sent again one message per transaction.
    pub one_by_one_batches: i64,
    /// Messages the target already had (its duplicate-id cache dropped them): delivered before, by an
    /// attempt whose acknowledgement did not commit.
    pub already_on_target: i64,
    /// Relay batches committed.
    pub batches: i64,
    /// A move on one node: messages whose fate the counters do not know, because the worker lost the broker's
    /// answer to a move (a crash or an error between the call and the count's write). The broker moved each at
    /// most once and never lost one, so each is either on the target queue or was never taken; for a filter this
    /// is an upper bound (the lost call asked for this many).
    pub uncertain: i64,
    /// A copy: messages its browsers delivered, re-browsed ones and those not selected included (the cost of
    /// browsing from the head after each slice).
    pub browsed: i64,
    /// A whole-queue move's end: messages on the source that match the frozen filter but came after the count at
    /// `t0` — committed after it, or stamped at or before `t0` by a producer that sends no timestamp or whose clock
    /// is slow. The run took the count, so these are not selected and were left there; counted so that a run
    /// that says Succeeded also says what it left that its filter alone would have matched. A lower bound: the
    /// broker's filtered count scans at most `managementBrowsePageSize` messages of the queue, in its delivery
    /// order (priority first), so on a deeper source some may lie beyond the scan.
    pub beyond_count: i64,
    /// A frozen selection's end: messages the run took beyond the broker's count at `t0` — stamped at or before
    /// `t0` (so in the selection, docs/guarantees.md) but committed after the count, by a producer whose transaction was open
    /// across it or whose clock is slow. `selected` stays the count; this says by how much the outcome exceeds
    /// it, as the end's proof found (at least this many: others may have taken counted messages meanwhile).
    pub taken_beyond_count: i64,
}

impl Counters {
    /// Everything not taken.
    pub fn not_taken(&self) -> i64 {
        self.not_taken_in_delivery + self.not_taken_scheduled + self.not_taken_gone + self.not_taken_left
    }

    /// What has left a move's staging queue for good: delivered, dead-lettered or returned to the source.
    pub fn left_staging(&self) -> i64 {
        self.delivered + self.dead_lettered + self.returned
    }

    /// What the run counts as still in staging: what entered it and has not left it (0 at least).
    pub fn held_in_staging(&self) -> i64 {
        (self.staged - self.left_staging()).max(0)
    }

    /// `staged` raised to what broker truth shows entered staging — what it holds now (`in_staging`) and what
    /// left it ([`Counters::left_staging`], with `left_uncounted` more found gone and not yet counted) — when a
    /// move into staging landed whose result was never written (a refill its worker lost the lease during, which
    /// the source broker made all the same). Never lowered: a move still finishing only adds. How many that
    /// raised it by (0: the count was whole).
    pub fn stage_unrecorded(&mut self, in_staging: i64, left_uncounted: i64) -> i64 {
        let entered = in_staging + self.left_staging() + left_uncounted;
        let unrecorded = (entered - self.staged).max(0);
        self.staged += unrecorded;
        unrecorded
    }

    /// One committed relay batch added (a move's or a copy's): the one place a batch is counted.
    pub fn add_batch(&mut self, batch: &BatchCount) {
        self.delivered += batch.delivered;
        self.delivered_bytes += batch.delivered_bytes;
        self.dead_lettered += batch.dead_lettered;
        self.already_on_target += batch.already_on_target;
        self.original_id_missing += batch.original_id_missing;
        self.batches += 1;
        if batch.one_by_one {
            self.one_by_one_batches += 1;
        }
    }
}

/// What one committed relay batch adds to a run's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchCount {
    /// Delivered (a copy: copied) — the batch's proven poison not among them.
    pub delivered: i64,
    /// Their body bytes.
    pub delivered_bytes: i64,
    /// Proven poison a dead message queue took.
    pub dead_lettered: i64,
    /// Messages the target already had (its duplicate-id cache dropped them).
    pub already_on_target: i64,
    /// Whether the batch went one message per transaction.
    pub one_by_one: bool,
    /// Delivered messages without their original source id.
    pub original_id_missing: i64,
}

/// The run row's parts a job of the run reads (a move's or a copy's).
#[derive(Debug, Clone)]
pub struct TransferRun {
    /// The run.
    pub id: Uuid,
    /// The plan, frozen at preview.
    pub plan: Plan,
    /// The relay cursor.
    pub relay: RelayState,
    /// The counters.
    pub counters: Counters,
    /// The staging queue, once prepared.
    pub staging_queue: Option<String>,
    /// The run's state when the job read it.
    pub state: RunState,
    /// Whether the preview found the target queue missing, to be created by the run.
    pub create_target: bool,
    /// Whether the preview found the source paging (`source-paged`): a filtered refill then makes the broker read
    /// page files back into its heap, so each refill first looks at the source broker's heap.
    pub source_paged: bool,
    /// The preview's selection size, when it was known.
    pub selection_size: Option<i64>,
    /// The source queue's counters at `t0` (the preview's), which the end is proven against.
    pub source_count_at_t0: Option<crate::transfer::proof::SourceCount>,
    /// Why the run was asked to stop, when it was.
    pub stop_reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_counted_once_in_every_counter_it_touches() {
        let mut c = Counters { delivered: 10, batches: 1, ..Counters::default() };
        let batch = BatchCount {
            delivered: 19,
            delivered_bytes: 1900,
            dead_lettered: 1,
            already_on_target: 4,
            one_by_one: true,
            original_id_missing: 2,
        };
        c.add_batch(&batch);
        assert_eq!((c.delivered, c.delivered_bytes, c.dead_lettered), (29, 1900, 1));
        assert_eq!((c.already_on_target, c.original_id_missing), (4, 2));
        assert_eq!((c.batches, c.one_by_one_batches), (2, 1));
        c.add_batch(&BatchCount::default());
        assert_eq!((c.batches, c.one_by_one_batches, c.delivered), (3, 1, 29));
    }

    #[test]
    fn an_empty_column_reads_as_a_fresh_state() {
        let relay: RelayState = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(relay, RelayState::default());
        let counters: Counters = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(counters.selected, None);
        assert_eq!(counters.not_taken(), 0);
    }

    #[test]
    fn only_a_later_attempt_of_the_same_job_follows_progress() {
        let progressed = JobAttempt { job: 12, attempt: 2 };
        assert!(progressed.is_earlier_attempt_of(&JobAttempt { job: 12, attempt: 3 }));
        assert!(!progressed.is_earlier_attempt_of(&JobAttempt { job: 12, attempt: 2 }), "the same attempt");
        assert!(!progressed.is_earlier_attempt_of(&JobAttempt { job: 13, attempt: 3 }), "a fresh job");
    }

    #[test]
    fn state_round_trips_through_json() {
        let relay = RelayState {
            in_doubt: Marks::of(
                vec![3, 4],
                Some(WindowMark {
                    target: "west/west-1/q".into(),
                    start: 400,
                    target_started: Some(1_700_000_000_000),
                }),
            ),
            ids_next: 7,
            refill: Some(RefillIntent { at: Utc::now(), count: 400, ids: Some((0, 7)) }),
            exhausted: true,
            waiting_since: None,
            prepared: true,
            not_moved: vec![9],
            finish_rechecks: 1,
            pass_started_at: Some(5),
            foreign_consumer_since: None,
            retry_ids: vec![11],
            dead_letter: vec![4],
            destination_next: 1,
            progressed_in: Some(JobAttempt { job: 12, attempt: 2 }),
        };
        let back: RelayState = serde_json::from_value(serde_json::to_value(&relay).unwrap()).unwrap();
        assert_eq!(back, relay);
    }
}
