//! The duplicate-id window of a target address (ADR 0010).
//!
//! Exactly-once rests on the target's duplicate-id cache: a batch in doubt after a crash is sent again, and the
//! cache drops what already landed. The cache is per address on a broker, a ring of `id-cache-size` ids shared by
//! every run writing into the address, so another run can push a batch in doubt out of it before the batch is
//! sent again — and then the batch lands twice.
//!
//! So every run counts the ids it is about to send into an address (`duplicate_id_window.sent`, one row per
//! `cluster/node/address`), in the fenced transaction that records them in doubt, and the batch in doubt
//! remembers where in that count it began ([`WindowMark`]). Before counting a new batch, a run checks every
//! other run's batch in doubt on the address: the new ids must not be able to push its first id out of the ring
//! ([`room`]). If they could, the run waits until that batch is settled (a taken-over run re-sends it within a
//! lease), never doubling it.
//!
//! What this cannot see: producers outside this product that set duplicate ids on the same address share the
//! ring too. The preview asks for a cache of at least 10 × the batch size for that reason.

use sqlx::PgConnection;
use uuid::Uuid;

use super::in_doubt::Marks;
use super::state::TransferRun;
use crate::broker::jolokia::BrokerState;
use crate::transfer::outbound::duplicate_id;
use crate::transfer::plan::QueueRef;
use crate::transfer::proof::same_start;
use crate::transfer::store::window as window_store;
use artemis_core::message::names;
use artemis_selector::Expr;

pub use super::in_doubt::WindowMark;

/// The window's key for a target: its cluster, node and address. A failover keeps the node's name (and a shared
/// store keeps a persisted cache), so it keeps the key.
pub fn key(target: &QueueRef) -> String {
    format!("{}/{}/{}", target.cluster, target.node, target.address())
}

/// A batch in doubt on the same address: another run's, or the run's own still in flight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub run: Uuid,
    /// Its [`WindowMark::start`].
    pub start: i64,
    /// How many ids it holds in doubt.
    pub size: i64,
}

/// Whether the window has room for a run's next batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Room {
    /// Send; the batch is counted from `start`.
    Open { start: i64 },
    /// Sending could push a batch in doubt out of the cache: wait. Words for the operator.
    Full(String),
    /// The address keeps no duplicate ids (`id-cache-size` 0, acknowledged at the preview): nothing to protect.
    NoCache,
    /// The cache's size could not be read: try again.
    Unknown(String),
}

impl Room {
    /// The answer as the new batch's window: `Ok` to send — where the batch begins in the address's count
    /// (`None` where the address keeps no duplicate ids) — or `Err` with the answer to hold the batch back.
    /// `target_started`: the target broker's start as read for this batch. Ids already in doubt that the batch
    /// sends again keep their own marks: a duplicate the target drops does not move in its cache.
    pub fn window(self, target: String, target_started: Option<i64>) -> Result<Option<WindowMark>, Room> {
        match self {
            Room::Open { start } => Ok(Some(WindowMark { target, start, target_started })),
            Room::NoCache => Ok(None),
            held => Err(held),
        }
    }
}

/// Whether a batch in doubt may be sent again to the target as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resend {
    /// The target's cache still holds what landed (same broker start, or a persisted cache): send again.
    Safe,
    /// What is needed to tell could not be read: try again.
    Unknown(String),
    /// The target restarted or failed over since the batch was sent, and its cache is not persisted: what
    /// landed would not be dropped. Never sent again blind.
    CacheLost,
}

/// Decides [`Resend`] for the batch marked `mark` against the target broker as read now.
pub fn resend(mark: Option<&WindowMark>, target: Option<&BrokerState>) -> Resend {
    let Some(target) = target else {
        return Resend::Unknown("the target broker did not answer".into());
    };
    match target.persist_id_cache {
        // A persisted cache is reloaded from the journal on a restart, and a backup reads the same journal.
        Some(true) => return Resend::Safe,
        Some(false) => {}
        None => {
            return Resend::Unknown(
                "whether the target broker persists its duplicate-id cache could not be read".into(),
            )
        }
    }
    let (Some(then), Some(now)) = (mark.and_then(|m| m.target_started), target.started_millis()) else {
        return Resend::Unknown(
            "whether the target broker restarted since the batch in doubt was sent could not be read (its uptime), \
            and its duplicate-id cache is not persisted"
                .into(),
        );
    };
    if same_start(then, now) {
        Resend::Safe
    } else {
        Resend::CacheLost
    }
}

/// Decides [`Resend`] for every batch in doubt in `marks`: the one answer for them all, since they are sent
/// again together — a lost cache under any of them stops the run, an unknown under any of them waits.
pub fn resend_marks(marks: &Marks, target: Option<&BrokerState>) -> Resend {
    let answers = marks.marks().iter().map(|m| resend(m.window.as_ref(), target));
    let mut unknown = None;
    for answer in answers {
        match answer {
            Resend::CacheLost => return Resend::CacheLost,
            Resend::Unknown(words) => unknown = unknown.or(Some(words)),
            Resend::Safe => {}
        }
    }
    unknown.map_or(Resend::Safe, Resend::Unknown)
}

/// The words of a run stopped because its batch in doubt cannot be sent again safely: which messages, where
/// they are held, and what the operator can check before resuming (a resume sends them all again).
pub fn cache_lost_words(run: Uuid, target: &QueueRef, ids: &[i64], held_in: &str) -> String {
    let duplicate_ids = ids.iter().map(|id| duplicate_id(run, *id));
    let selector = Expr::is_in(Expr::property(names::DUPLICATE_ID), duplicate_ids);
    format!(
        "the target broker {node} restarted or failed over while {n} messages of this run were in doubt (sent to \
        it, their acknowledgement not recorded), and its duplicate-id cache is not persisted, so it would not drop \
        those that landed: sending them again could deliver them twice. They are held in {held_in}. Check the \
        target queue {queue} with the selector `{selector}`, remove what it finds there, then \
        resume the run (or return it): either sends them once. To avoid this: <persist-id-cache>true</persist-id-cache> on the \
        target broker",
        node = target.node,
        n = ids.len(),
        queue = target.display(),
    )
}

/// At most how many messages one batch may hold so that, alone, it fits the address's cache (a batch larger than
/// the cache pushes its own first ids out before it is settled).
pub fn batch_cap(batch_size: u32, cache: Option<i64>) -> u32 {
    match cache {
        Some(cache) if cache > 0 => batch_size.min(u32::try_from(cache).unwrap_or(u32::MAX)).max(1),
        _ => batch_size,
    }
}

/// Whether `n` more ids may be counted into an address whose cache keeps `cache` ids, `sent` counted so far,
/// while the batches `held` by other runs are in doubt there.
///
/// Ids enter the ring in the order they are sent. After a held batch `d` was counted, the ids sent after its
/// first one are at most those counted since (`sent + n - d.start`, its own included) plus the batches counted
/// before it whose sends were still to come — each of those is a batch in doubt at the time, so held:
/// `Σ x.size` over held `x` with `x.start < d.start`. `d`'s first id stays in the ring while that is at most the
/// cache's size.
pub fn room(sent: i64, n: i64, cache: i64, held: &[Held]) -> Result<(), Held> {
    for d in held {
        let earlier: i64 = held.iter().filter(|x| x.start < d.start).map(|x| x.size).sum();
        if sent + n - d.start + earlier > cache {
            return Err(d.clone());
        }
    }
    Ok(())
}

/// The words of a wait for the window.
fn full_words(target: &str, cache: i64, blocking: &Held) -> String {
    format!(
        "the target address {target} remembers only {cache} duplicate ids, and sending this batch could push run {}'s \
         {} messages in doubt out of them (they would be delivered twice when that run sends them again): waiting \
         until that run settles them (it does within a lease of its worker stopping; resume or return it if it is \
         stopped). A larger <id-cache-size> on the address lets runs share it without waiting",
        blocking.run, blocking.size
    )
}

/// Counts `new_ids` ids that `run` is about to send into `target` (inside the job's fenced transaction that
/// records them in doubt), unless they could push another run's batch in doubt, or the run's own batches still in
/// flight (`in_flight`: sent, not yet recorded), out of a cache of `cache` ids. The row is locked until the
/// transaction ends, so two runs never count past each other.
pub async fn reserve(
    conn: &mut PgConnection,
    run: Uuid,
    target: &str,
    cache: Option<i64>,
    new_ids: i64,
    in_flight: &[Held],
) -> Result<Room, sqlx::Error> {
    let cache = match cache {
        None => {
            return Ok(Room::Unknown(format!(
                "how many duplicate ids the target address {target} remembers could not be read"
            )))
        }
        Some(c) if c <= 0 => return Ok(Room::NoCache),
        Some(c) => c,
    };
    let sent = window_store::window_touch(&mut *conn, target).await?;
    let held: Vec<Held> = window_store::window_holders(&mut *conn, run, target)
        .await?
        .into_iter()
        .map(|h| Held { run: h.run, start: h.start.unwrap_or(0), size: i64::from(h.size) })
        .chain(in_flight.iter().cloned())
        .collect();
    if let Err(blocking) = room(sent, new_ids, cache, &held) {
        return Ok(Room::Full(full_words(target, cache, &blocking)));
    }
    window_store::window_advance(&mut *conn, target, new_ids).await?;
    Ok(Room::Open { start: sent })
}

/// Counts a batch's `new_ids` the run is about to send into the duplicate-id window of its target address, inside
/// the fenced transaction that marks them in doubt, and marks them so with their window ([`Room::window`]).
/// `in_flight`: the ids of the run's own batch sent and not yet recorded (a copy's batch whose record is written
/// beside this one's send), whose marks must stay in the cache too. `Err(room)`: hold the batch back, nothing
/// marked. The one admission of a batch for a move and a copy.
pub async fn admit(
    conn: &mut PgConnection,
    run: &mut TransferRun,
    cache: Option<i64>,
    target_started: Option<i64>,
    new_ids: Vec<i64>,
    in_flight: &[i64],
) -> Result<Result<(), Room>, sqlx::Error> {
    let target = key(&run.plan.target);
    let own = own_marks(run, &target, in_flight);
    let room = reserve(conn, run.id, &target, cache, new_ids.len() as i64, &own).await?;
    Ok(room.window(target, target_started).map(|window| run.relay.in_doubt.push(new_ids, window)))
}

/// The run's own marks in `target`'s window that hold any of `ids`, as holders.
fn own_marks(run: &TransferRun, target: &str, ids: &[i64]) -> Vec<Held> {
    run.relay
        .in_doubt
        .marks()
        .iter()
        .filter(|m| m.ids.iter().any(|id| ids.contains(id)))
        .filter_map(|m| m.window.as_ref().filter(|w| w.target == target).map(|w| (w.start, m.ids.len())))
        .map(|(start, size)| Held { run: run.id, start, size: size as i64 })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(start: i64, size: i64) -> Held {
        Held { run: Uuid::nil(), start, size }
    }

    #[test]
    fn the_lost_cache_words_name_the_selector_and_read_as_one_sentence_each() {
        let target = QueueRef { cluster: "west".into(), node: "west-1".into(), queue: "orders".into(), address: None };
        let words = cache_lost_words(Uuid::nil(), &target, &[7, 9], "the staging queue s on east-1");
        assert!(words.contains("_AMQ_DUPL_ID IN ('studio:00000000-0000-0000-0000-000000000000:7', "), "{words}");
        assert!(!words.contains("  "), "a line break of the source leaked into the words: {words}");
    }

    #[test]
    fn nothing_in_doubt_elsewhere_leaves_the_window_open() {
        assert_eq!(room(1_000_000, 200, 1000, &[]), Ok(()));
    }

    #[test]
    fn a_batch_may_fill_the_ring_up_to_the_first_id_of_one_in_doubt() {
        // d counted at 100 (20 ids): 80 more after it plus 20 new = 100 ids after d's first: still there.
        let d = held(100, 20);
        assert_eq!(room(180, 20, 100, std::slice::from_ref(&d)), Ok(()));
        assert_eq!(room(181, 20, 100, std::slice::from_ref(&d)), Err(d));
    }

    #[test]
    fn a_batch_counted_earlier_but_sent_later_counts_against_a_later_one() {
        // x counted at 0 (20 ids) may still be sending after d (counted at 20) sent: its 20 count after d's first.
        let (x, d) = (held(0, 20), held(20, 20));
        assert_eq!(room(40, 60, 100, &[x.clone(), d.clone()]), Ok(()));
        assert!(room(40, 61, 100, &[x, d]).is_err());
    }

    fn broker(persisted: Option<bool>, started: i64) -> BrokerState {
        BrokerState {
            persist_id_cache: persisted,
            current_time_millis: Some(started + 60_000),
            uptime_millis: Some(60_000),
            ..BrokerState::default()
        }
    }

    fn mark(started: Option<i64>) -> WindowMark {
        WindowMark { target: "west/west-1/q".into(), start: 0, target_started: started }
    }

    #[test]
    fn a_batch_in_doubt_is_sent_again_unless_a_restart_lost_an_unpersisted_cache() {
        let t = 1_700_000_000_000;
        assert_eq!(resend(Some(&mark(Some(t))), Some(&broker(Some(true), t + 3_600_000))), Resend::Safe, "persisted");
        assert_eq!(resend(Some(&mark(Some(t))), Some(&broker(Some(false), t + 1_000))), Resend::Safe, "same start");
        assert_eq!(resend(Some(&mark(Some(t))), Some(&broker(Some(false), t + 60_000))), Resend::CacheLost);
        assert!(matches!(resend(Some(&mark(None)), Some(&broker(Some(false), t))), Resend::Unknown(_)));
        assert!(matches!(resend(None, Some(&broker(Some(false), t))), Resend::Unknown(_)));
        assert!(matches!(resend(Some(&mark(Some(t))), Some(&broker(None, t))), Resend::Unknown(_)));
        assert!(matches!(resend(Some(&mark(Some(t))), None), Resend::Unknown(_)));
    }

    #[test]
    fn the_batch_cap_fits_the_cache() {
        assert_eq!(batch_cap(200, Some(100)), 100);
        assert_eq!(batch_cap(200, Some(20_000)), 200);
        assert_eq!(batch_cap(200, Some(0)), 200, "no cache: nothing to fit");
        assert_eq!(batch_cap(200, None), 200);
    }
}
