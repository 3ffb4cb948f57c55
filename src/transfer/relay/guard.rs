//! The target re-check before every relay batch (SPEC §4.2 step 1), as a pure function of the target's facts
//! (read in one batched request): is it still acceptable, and has it room for one more batch?
//!
//! A target that became unacceptable mid-run (a filter, a drop policy, disabled, purging, gone) fails the run
//! **before** the commit that would have dropped messages. A target short of room makes the run wait. A fact
//! that could not be read is never taken as a pass: the batch is retried later.

use super::state::Counters;
use crate::broker::jolokia::{FullPolicy, HeapUsage};
use crate::transfer::facts::EndFacts;
use crate::transfer::preview::SOURCE_HEAP_WAIT_PCT;

/// What the guard decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetCheck {
    /// Acceptable, with room for the batch.
    Go,
    /// Acceptable but short of room: wait, saying why.
    Wait(String),
    /// No longer acceptable: the run fails, saying why.
    Refuse(String),
    /// Something could not be read: try again later, saying what.
    Unknown(String),
}

/// Whether a move by filter may refill staging from a **paging** source now. The broker's filtered move keeps in
/// its heap every paged message its scan passes over (until consumed), so a scan started with the heap nearly
/// full can take the broker down: the refill waits instead, as for room on the target (consumers draining the
/// queue, or a collection of garbage that `used` still counts, give the heap back). `source` names the queue.
pub fn check_source_heap(source: &str, heap: Option<HeapUsage>) -> TargetCheck {
    match heap {
        None => TargetCheck::Unknown(format!(
            "the heap of the source broker holding {source} could not be read: a filtered refill from its paged \
             queue makes the broker hold more, so it waits until the heap can be read"
        )),
        Some(h) if i128::from(h.used) * 100 >= i128::from(h.max) * i128::from(SOURCE_HEAP_WAIT_PCT) => {
            TargetCheck::Wait(format!(
                "the source broker holding {source} has {} of its {} MiB heap in use (at least {SOURCE_HEAP_WAIT_PCT}%): \
                 a filtered refill from its paged queue would make it hold more, so staging is refilled only when \
                 it has room again",
                h.used / 1_048_576,
                h.max / 1_048_576
            ))
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

/// Checks the target `queue` (display name for words) against `facts` for a batch of `batch`, waiting when an
/// address or the disk would pass `threshold_pct`.
pub fn check_target(queue: &str, facts: &EndFacts, batch: BatchSize, threshold_pct: u32) -> TargetCheck {
    let Some(node) = &facts.node else {
        return TargetCheck::Unknown(format!("the target node holding {queue} did not answer"));
    };
    if node.broker.active == Some(false) {
        return TargetCheck::Unknown(format!("the target node holding {queue} is not active (failing over?)"));
    }
    let state = match &facts.queue.queue {
        None => return TargetCheck::Unknown(format!("whether the target queue {queue} exists could not be read")),
        Some(None) => {
            return TargetCheck::Refuse(format!(
                "the target queue {queue} no longer exists: a send would be dropped or re-create it by auto-create, \
                 so nothing was sent"
            ))
        }
        Some(Some(state)) => state,
    };
    // What could not be read is unknown, never a pass (as the preview says it): the batch is tried again later.
    match &state.filter {
        None => {
            return TargetCheck::Unknown(format!("whether the target queue {queue} has a filter could not be read"))
        }
        Some(Some(filter)) => {
            return TargetCheck::Refuse(format!(
                "the target queue {queue} now has a filter ({filter}): messages it does not match would be dropped"
            ))
        }
        Some(None) => {}
    }
    match state.enabled {
        None => return TargetCheck::Unknown(format!("whether the target queue {queue} is enabled could not be read")),
        Some(false) => {
            return TargetCheck::Refuse(format!(
                "the target queue {queue} was disabled: the broker drops what is sent to it"
            ))
        }
        Some(true) => {}
    }
    match state.purge_on_no_consumers {
        None => {
            return TargetCheck::Unknown(format!(
                "whether the target queue {queue} purges when it has no consumer could not be read"
            ))
        }
        Some(true) => {
            return TargetCheck::Refuse(format!(
                "the target queue {queue} now purges when it has no consumer: messages could be deleted on arrival"
            ))
        }
        Some(false) => {}
    }
    let Some(settings) = &facts.queue.settings else {
        return TargetCheck::Unknown(format!("the address settings of the target queue {queue} could not be read"));
    };
    match settings.address_full_policy {
        FullPolicy::Drop => {
            return TargetCheck::Refuse(format!(
                "the target address of {queue} now drops messages when full (address-full-policy DROP)"
            ))
        }
        FullPolicy::Page => {
            let limited = settings.page_limit_bytes > 0 || settings.page_limit_messages > 0;
            if limited && settings.page_full_policy == Some(FullPolicy::Drop) {
                return TargetCheck::Refuse(format!(
                    "the target address of {queue} now drops messages past its page limit (page-full-policy DROP)"
                ));
            }
        }
        FullPolicy::Fail | FullPolicy::Block => {
            let threshold = i128::from(threshold_pct);
            if settings.max_size_bytes > 0 {
                let Some(used) = facts.queue.address_size else {
                    return TargetCheck::Unknown(format!(
                        "how full the target address of {queue} is could not be read"
                    ));
                };
                let after = i128::from(used) + i128::from(batch.bytes);
                if after * 100 >= i128::from(settings.max_size_bytes) * threshold {
                    return TargetCheck::Wait(format!(
                        "the target address of {queue} holds {used} of its {} bytes (max-size-bytes); one more batch \
                         would take it past {threshold_pct}%",
                        settings.max_size_bytes
                    ));
                }
            }
            if settings.max_size_messages > 0 {
                let Some(count) = state.message_count else {
                    return TargetCheck::Unknown(format!("how many messages {queue} holds could not be read"));
                };
                let after = i128::from(count) + i128::from(batch.messages);
                if after * 100 >= i128::from(settings.max_size_messages) * threshold {
                    return TargetCheck::Wait(format!(
                        "the target queue {queue} holds {count} messages of its address's {} (max-size-messages); \
                         one more batch would take it past {threshold_pct}%",
                        settings.max_size_messages
                    ));
                }
            }
        }
    }
    match (node.broker.disk_store_usage, node.broker.max_disk_usage) {
        // -1 turns the broker's check off and 100 is never exceeded (it blocks only above the limit); 0 blocks
        // every message, so it waits below like any disk at its limit (as the preview refuses it).
        (_, Some(max)) if !(0..100).contains(&max) => TargetCheck::Go,
        (Some(usage), Some(max)) => {
            let pct = usage * 100.0;
            if pct >= max as f64 * f64::from(threshold_pct) / 100.0 {
                TargetCheck::Wait(format!(
                    "the target node's journal disk is {pct:.0}% full, within {threshold_pct}% of its max-disk-usage \
                     of {max}%"
                ))
            } else {
                TargetCheck::Go
            }
        }
        _ => TargetCheck::Unknown("how full the target node's journal disk is could not be read".into()),
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
    let Some(after) = after else {
        return Err(format!(
            "the target queue {queue} was deleted while a batch was being sent: nothing of that batch was committed"
        ));
    };
    if after.auto_created && !before.auto_created {
        return Err(format!(
            "the target queue {queue} was deleted while a batch was being sent (the broker re-created it by \
             auto-create): nothing of that batch was committed"
        ));
    }
    if after.enabled == Some(false) {
        return Err(format!(
            "the target queue {queue} was disabled: the broker drops what is sent to it, so the batch being sent \
             was not committed"
        ));
    }
    if after.filter.as_deref().is_some_and(|f| !f.is_empty()) && after.filter != before.filter {
        return Err(format!(
            "the target queue {queue} now has a filter ({}): messages it does not match would be dropped, so the \
             batch being sent was not committed",
            after.filter.as_deref().unwrap_or_default()
        ));
    }
    if after.purge_on_no_consumers && !before.purge_on_no_consumers {
        return Err(format!(
            "the target queue {queue} now purges when it has no consumer: the batch being sent was not committed"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::jolokia::{AddressSettings, BrokerState, QueueState};
    use crate::transfer::facts::{NodeFacts, QueueFacts};
    use serde_json::json;

    fn healthy() -> EndFacts {
        EndFacts {
            node: Some(NodeFacts {
                broker: BrokerState {
                    active: Some(true),
                    disk_store_usage: Some(0.10),
                    max_disk_usage: Some(90),
                    ..BrokerState::default()
                },
                core_acceptor: Some(true),
                heap: None,
            }),
            queue: QueueFacts {
                queue: Some(Some(QueueState {
                    filter: Some(None),
                    enabled: Some(true),
                    purge_on_no_consumers: Some(false),
                    message_count: Some(0),
                    ..QueueState::default()
                })),
                settings: Some(AddressSettings::from_json(json!({}))),
                address_size: Some(0),
                paging: Some(false),
            },
        }
    }

    const BATCH: BatchSize = BatchSize { messages: 200, bytes: 200 * 1024 };

    #[test]
    fn a_batch_is_estimated_at_the_runs_average_body_or_a_kibibyte_before_there_is_one() {
        let mut counters = Counters::default();
        assert_eq!(BatchSize::estimate(&counters, 200, 1 << 30), BatchSize { messages: 200, bytes: 200 * 1024 });
        counters.delivered = 10;
        assert_eq!(BatchSize::estimate(&counters, 200, 1 << 30).bytes, 200 * 1024, "no bytes seen: assumed");
        counters.delivered_bytes = 10 * 5000;
        assert_eq!(BatchSize::estimate(&counters, 200, 1 << 30).bytes, 200 * 5000);
        assert_eq!(BatchSize::estimate(&counters, 200, 300_000).bytes, 300_000, "bounded by batch bytes");
    }

    fn with_settings(raw: serde_json::Value, address_size: i64, count: i64) -> EndFacts {
        let mut f = healthy();
        f.queue.settings = Some(AddressSettings::from_json(raw));
        f.queue.address_size = Some(address_size);
        if let Some(Some(q)) = f.queue.queue.as_mut() {
            q.message_count = Some(count);
        }
        f
    }

    #[test]
    fn a_healthy_target_goes() {
        assert_eq!(check_target("q", &healthy(), BATCH, 90), TargetCheck::Go);
    }

    #[test]
    fn an_unread_fact_of_the_target_queue_is_unknown_never_a_pass() {
        for unread in [
            |q: &mut QueueState| q.filter = None,
            |q: &mut QueueState| q.enabled = None,
            |q: &mut QueueState| q.purge_on_no_consumers = None,
        ] {
            let mut f = healthy();
            if let Some(Some(q)) = f.queue.queue.as_mut() {
                unread(q);
            }
            assert!(
                matches!(check_target("q", &f, BATCH, 90), TargetCheck::Unknown(w) if w.contains("could not be read"))
            );
        }
    }

    #[test]
    fn a_target_that_became_unacceptable_is_refused() {
        let mut gone = healthy();
        gone.queue.queue = Some(None);
        assert!(
            matches!(check_target("q", &gone, BATCH, 90), TargetCheck::Refuse(w) if w.contains("no longer exists"))
        );

        let mut filtered = healthy();
        if let Some(Some(q)) = filtered.queue.queue.as_mut() {
            q.filter = Some(Some("a = 1".into()));
        }
        assert!(matches!(check_target("q", &filtered, BATCH, 90), TargetCheck::Refuse(w) if w.contains("filter")));

        let mut disabled = healthy();
        if let Some(Some(q)) = disabled.queue.queue.as_mut() {
            q.enabled = Some(false);
        }
        assert!(matches!(check_target("q", &disabled, BATCH, 90), TargetCheck::Refuse(w) if w.contains("disabled")));

        let mut purging = healthy();
        if let Some(Some(q)) = purging.queue.queue.as_mut() {
            q.purge_on_no_consumers = Some(true);
        }
        assert!(matches!(check_target("q", &purging, BATCH, 90), TargetCheck::Refuse(w) if w.contains("purges")));

        let drop = with_settings(json!({"addressFullMessagePolicy": "DROP"}), 0, 0);
        assert!(matches!(check_target("q", &drop, BATCH, 90), TargetCheck::Refuse(w) if w.contains("DROP")));

        let page_drop = with_settings(
            json!({"addressFullMessagePolicy": "PAGE", "pageLimitMessages": 10, "pageFullMessagePolicy": "DROP"}),
            0,
            0,
        );
        assert!(matches!(check_target("q", &page_drop, BATCH, 90), TargetCheck::Refuse(w) if w.contains("page")));
    }

    #[test]
    fn a_target_short_of_room_waits_at_the_threshold() {
        let fail =
            |used: i64| with_settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1_000_000}), used, 0);
        // 600,000 + 204,800 = 804,800 < 900,000: room.
        assert_eq!(check_target("q", &fail(600_000), BATCH, 90), TargetCheck::Go);
        // 695,200 + 204,800 = 900,000: exactly at the threshold waits.
        assert!(matches!(check_target("q", &fail(695_200), BATCH, 90), TargetCheck::Wait(_)));
        assert_eq!(check_target("q", &fail(695_199), BATCH, 90), TargetCheck::Go);

        let by_count =
            |count: i64| with_settings(json!({"addressFullMessagePolicy": "BLOCK", "maxSizeMessages": 1000}), 0, count);
        assert_eq!(check_target("q", &by_count(699), BATCH, 90), TargetCheck::Go);
        assert!(
            matches!(check_target("q", &by_count(700), BATCH, 90), TargetCheck::Wait(w) if w.contains("max-size-messages"))
        );

        let mut disk = healthy();
        disk.node.as_mut().unwrap().broker.disk_store_usage = Some(0.81);
        assert!(matches!(check_target("q", &disk, BATCH, 90), TargetCheck::Wait(w) if w.contains("disk")));
        disk.node.as_mut().unwrap().broker.disk_store_usage = Some(0.80);
        assert_eq!(check_target("q", &disk, BATCH, 90), TargetCheck::Go);
        // The test bed's limit: 100 never blocks, nor does -1 (off); 0 blocks every message.
        disk.node.as_mut().unwrap().broker.disk_store_usage = Some(0.99);
        for (max, waits) in [(100, false), (-1, false), (0, true), (99, true)] {
            disk.node.as_mut().unwrap().broker.max_disk_usage = Some(max);
            let check = check_target("q", &disk, BATCH, 90);
            assert_eq!(matches!(check, TargetCheck::Wait(_)), waits, "max-disk-usage {max}: {check:?}");
        }
    }

    #[test]
    fn paging_targets_never_wait_for_address_size() {
        let page = with_settings(json!({"addressFullMessagePolicy": "PAGE", "maxSizeBytes": 1000}), 1_000_000, 0);
        assert_eq!(check_target("q", &page, BATCH, 90), TargetCheck::Go);
    }

    #[test]
    fn a_target_changed_while_a_batch_was_sent_gets_no_commit() {
        let plain = QueueView { enabled: Some(true), ..QueueView::default() };
        assert_eq!(recheck_before_commit("q", &plain, Some(&plain)), Ok(()));
        // An older broker that does not say whether the queue is enabled: unchanged is fine.
        let silent = QueueView::default();
        assert_eq!(recheck_before_commit("q", &silent, Some(&silent)), Ok(()));
        let words = |after: Option<&QueueView>| recheck_before_commit("q", &plain, after).unwrap_err();
        assert!(words(None).contains("deleted"));
        assert!(words(Some(&QueueView { auto_created: true, ..plain.clone() })).contains("re-created"));
        assert!(words(Some(&QueueView { enabled: Some(false), ..plain.clone() })).contains("disabled"));
        assert!(words(Some(&QueueView { filter: Some("a = 1".into()), ..plain.clone() })).contains("filter"));
        assert!(words(Some(&QueueView { purge_on_no_consumers: true, ..plain.clone() })).contains("purges"));
        // A target that was auto-created to begin with stays acceptable (its successor cannot be told apart).
        let auto = QueueView { auto_created: true, ..plain.clone() };
        assert_eq!(recheck_before_commit("q", &auto, Some(&auto)), Ok(()));
        // An empty filter is no filter.
        assert_eq!(
            recheck_before_commit("q", &plain, Some(&QueueView { filter: Some(String::new()), ..plain.clone() })),
            Ok(())
        );
    }

    #[test]
    fn what_could_not_be_read_is_never_a_pass() {
        let mut silent = healthy();
        silent.node = None;
        assert!(matches!(check_target("q", &silent, BATCH, 90), TargetCheck::Unknown(_)));
        let mut no_settings = healthy();
        no_settings.queue.settings = None;
        assert!(matches!(check_target("q", &no_settings, BATCH, 90), TargetCheck::Unknown(_)));
        let mut no_disk = healthy();
        no_disk.node.as_mut().unwrap().broker.disk_store_usage = None;
        assert!(matches!(check_target("q", &no_disk, BATCH, 90), TargetCheck::Unknown(_)));
        let mut no_size = with_settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1000}), 0, 0);
        no_size.queue.address_size = None;
        assert!(matches!(check_target("q", &no_size, BATCH, 90), TargetCheck::Unknown(_)));
    }

    #[test]
    fn a_paged_filtered_refill_waits_while_the_source_heap_is_nearly_full() {
        let mib = 1_048_576;
        let heap = |used: i64| Some(HeapUsage { used: used * mib, max: 512 * mib });
        assert_eq!(check_source_heap("east/east-1/q", heap(200)), TargetCheck::Go);
        // 90% of 512 MiB is 460.8 MiB: just under it goes, at or over it waits.
        assert_eq!(check_source_heap("east/east-1/q", heap(460)), TargetCheck::Go);
        match check_source_heap("east/east-1/q", heap(461)) {
            TargetCheck::Wait(words) => assert!(words.contains("461 of its 512 MiB heap"), "{words}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(check_source_heap("east/east-1/q", None), TargetCheck::Unknown(_)));
    }
}
