//! The guard's outcomes, asserted by the code of the condition that decided each (the preview's codes).

use super::*;
use crate::broker::jolokia::{AddressSettings, QueueState};
use crate::transfer::target_rules::tests::{healthy, queue, target};
use serde_json::json;

const BATCH: BatchSize = BatchSize { messages: 200, bytes: 200 * 1024 };

fn check(facts: &EndFacts) -> TargetCheck {
    check_target(&target(), facts, BATCH, 90)
}

/// One change to the target queue's state.
type QueueChange = fn(&mut QueueState);

fn with_settings(raw: serde_json::Value, address_size: i64, count: i64) -> EndFacts {
    let mut f = healthy();
    f.queue.settings = Some(AddressSettings::from_json(raw));
    f.queue.address_size = Some(address_size);
    queue(&mut f).message_count = Some(count);
    f
}

fn refused(code: &str, check: &TargetCheck) -> bool {
    matches!(check, TargetCheck::Refuse { code: c, .. } if *c == code)
}

fn waits(code: &str, check: &TargetCheck) -> bool {
    matches!(check, TargetCheck::Wait { code: c, .. } if *c == code)
}

fn unknown(code: &str, check: &TargetCheck) -> bool {
    matches!(check, TargetCheck::Unknown { code: c, .. } if *c == code)
}

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

#[test]
fn a_healthy_target_goes() {
    assert_eq!(check(&healthy()), TargetCheck::Go);
}

#[test]
fn an_unread_fact_of_the_target_queue_is_unknown_never_a_pass() {
    let rows: [(QueueChange, &str); 3] = [
        (|q| q.filter = None, "target-filter-unknown"),
        (|q| q.enabled = None, "target-enabled-unknown"),
        (|q| q.purge_on_no_consumers = None, "target-purge-unknown"),
    ];
    for (unread, code) in rows {
        let mut f = healthy();
        unread(queue(&mut f));
        let checked = check(&f);
        assert!(unknown(code, &checked), "{code}: {checked:?}");
        assert!(matches!(checked, TargetCheck::Unknown { words, .. } if words.contains("could not be read")));
    }
}

#[test]
fn a_target_that_became_unacceptable_is_refused() {
    // Gone mid-run: the run created it at its start (the preview's acknowledged `target-queue-created`), so it
    // was deleted since. The words keep what the run's error is tested for.
    let mut gone = healthy();
    gone.queue.queue = Some(None);
    let checked = check(&gone);
    assert!(refused("target-queue-created", &checked), "{checked:?}");
    assert!(
        matches!(&checked, TargetCheck::Refuse { words, .. } if words.contains("west/west-1/orders") && words.contains("deleted"))
    );
    let mut gone_no_auto_create = with_settings(json!({"autoCreateQueues": false}), 0, 0);
    gone_no_auto_create.queue.queue = Some(None);
    assert!(refused("target-queue-missing", &check_target(&target(), &gone_no_auto_create, BATCH, 90)));

    let rows: [(QueueChange, &str, &str); 4] = [
        (|q| q.filter = Some(Some("a = 1".into())), "target-filtered", "filter"),
        (|q| q.enabled = Some(false), "target-disabled", "disabled"),
        (|q| q.purge_on_no_consumers = Some(true), "target-purge-on-no-consumers", "purges"),
        (|q| q.internal = Some(true), "internal-queue", "internal"),
    ];
    for (change, code, says) in rows {
        let mut f = healthy();
        change(queue(&mut f));
        let checked = check(&f);
        assert!(refused(code, &checked), "{code}: {checked:?}");
        assert!(matches!(&checked, TargetCheck::Refuse { words, .. } if words.contains(says)), "{checked:?}");
    }

    let drop = with_settings(json!({"addressFullMessagePolicy": "DROP"}), 0, 0);
    assert!(refused("address-full-drop", &check(&drop)));
    let page_drop = with_settings(
        json!({"addressFullMessagePolicy": "PAGE", "pageLimitMessages": 10, "pageFullMessagePolicy": "DROP"}),
        0,
        0,
    );
    assert!(refused("page-full-drop", &check(&page_drop)));
}

#[test]
fn a_limit_of_zero_is_the_strictest_limit_not_none() {
    // Artemis takes only a negative max-size or page limit as none (`SizeAwareMetric`, `PagingStoreImpl`): the
    // preview refused these, and the guard let a batch through (`> 0`) when one was set mid-run.
    let bytes = with_settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 0}), 0, 0);
    assert!(waits("capacity-bytes", &check(&bytes)), "max-size-bytes 0: {:?}", check(&bytes));
    let messages = with_settings(json!({"addressFullMessagePolicy": "BLOCK", "maxSizeMessages": 0}), 0, 0);
    assert!(waits("capacity-messages", &check(&messages)), "max-size-messages 0: {:?}", check(&messages));
    for limit in ["pageLimitBytes", "pageLimitMessages"] {
        let raw = json!({"addressFullMessagePolicy": "PAGE", limit: 0, "pageFullMessagePolicy": "DROP"});
        let page = with_settings(raw, 0, 0);
        assert!(refused("page-full-drop", &check(&page)), "{limit} 0 then DROP: {:?}", check(&page));
    }
    // Only a negative limit is none: page-full DROP without a page limit never drops.
    let unlimited = with_settings(json!({"addressFullMessagePolicy": "PAGE", "pageFullMessagePolicy": "DROP"}), 0, 0);
    assert_eq!(check(&unlimited), TargetCheck::Go);
}

#[test]
fn a_target_short_of_room_waits_at_the_threshold() {
    let fail =
        |used: i64| with_settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1_000_000}), used, 0);
    // 600,000 + 204,800 = 804,800 < 900,000: room.
    assert_eq!(check(&fail(600_000)), TargetCheck::Go);
    // 695,200 + 204,800 = 900,000: exactly at the threshold waits.
    assert!(waits("capacity-tight", &check(&fail(695_200))));
    assert_eq!(check(&fail(695_199)), TargetCheck::Go);
    // A batch that cannot fit at all waits too (the preview would refuse the selection).
    assert!(waits("capacity-bytes", &check(&fail(900_000))));

    let by_count =
        |count: i64| with_settings(json!({"addressFullMessagePolicy": "BLOCK", "maxSizeMessages": 1000}), 0, count);
    assert_eq!(check(&by_count(699)), TargetCheck::Go);
    let tight = check(&by_count(700));
    assert!(waits("capacity-tight", &tight), "{tight:?}");
    assert!(
        matches!(tight, TargetCheck::Wait { words, .. } if words.contains("messages") && words.contains("next batch"))
    );

    let mut disk = healthy();
    disk.node.as_mut().unwrap().broker.disk_store_usage = Some(0.81);
    let tight = check(&disk);
    assert!(waits("disk-tight", &tight), "{tight:?}");
    assert!(matches!(tight, TargetCheck::Wait { words, .. } if words.contains("journal disk")));
    disk.node.as_mut().unwrap().broker.disk_store_usage = Some(0.80);
    assert_eq!(check(&disk), TargetCheck::Go);
    // A disk at its limit waits (the preview refuses it).
    disk.node.as_mut().unwrap().broker.disk_store_usage = Some(0.95);
    assert!(waits("disk-full", &check(&disk)));
    // The test bed's limit: 100 never blocks, nor does -1 (off); 0 blocks every message.
    disk.node.as_mut().unwrap().broker.disk_store_usage = Some(0.99);
    for (max, waiting) in [(100, false), (-1, false), (0, true), (99, true)] {
        disk.node.as_mut().unwrap().broker.max_disk_usage = Some(max);
        let checked = check(&disk);
        assert_eq!(matches!(checked, TargetCheck::Wait { .. }), waiting, "max-disk-usage {max}: {checked:?}");
    }
}

#[test]
fn paging_targets_never_wait_for_address_size() {
    let page = with_settings(json!({"addressFullMessagePolicy": "PAGE", "maxSizeBytes": 1000}), 1_000_000, 0);
    assert_eq!(check(&page), TargetCheck::Go);
}

#[test]
fn what_could_not_be_read_is_never_a_pass() {
    let mut silent = healthy();
    silent.node = None;
    assert!(unknown("target-unreachable", &check(&silent)));
    let mut no_settings = healthy();
    no_settings.queue.settings = None;
    assert!(unknown("address-settings-unknown", &check(&no_settings)));
    let mut no_disk = healthy();
    no_disk.node.as_mut().unwrap().broker.disk_store_usage = None;
    assert!(unknown("disk-unknown", &check(&no_disk)));
    let mut no_size = with_settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1000}), 0, 0);
    no_size.queue.address_size = None;
    assert!(unknown("capacity-unknown", &check(&no_size)));
    let mut no_count = with_settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 1000}), 0, 0);
    queue(&mut no_count).message_count = None;
    assert!(unknown("capacity-messages-unknown", &check(&no_count)));
    let mut no_queue = healthy();
    no_queue.queue.queue = None;
    assert!(unknown("target-queue-unknown", &check(&no_queue)));
    // Whether the node is live, unread, was a pass before the rule table.
    let mut no_ha = healthy();
    no_ha.node.as_mut().unwrap().broker.active = None;
    assert!(unknown("target-ha-unknown", &check(&no_ha)));
}

#[test]
fn a_target_node_not_live_mid_run_is_tried_again_as_a_failover() {
    let mut passive = healthy();
    passive.node.as_mut().unwrap().broker.active = Some(false);
    assert!(unknown("target-not-live", &check(&passive)));
    passive.node.as_mut().unwrap().broker.backup = Some(true);
    assert!(unknown("target-backup", &check(&passive)));
    // A passive backup shows no queues: the run is retried (and re-resolves the live node), never failed as if
    // its target had been deleted.
    passive.queue.queue = Some(None);
    assert!(unknown("target-backup", &check(&passive)), "{:?}", check(&passive));
}

#[test]
fn what_the_preview_acknowledged_once_never_stops_a_batch() {
    let rows: [fn(&mut EndFacts); 7] = [
        |f| queue(f).last_value = Some(true),
        |f| queue(f).last_value = None,
        |f| queue(f).ring_size = Some(0),
        |f| queue(f).ring_size = None,
        |f| {
            queue(f).consumer_count = Some(0);
            f.queue.settings = Some(AddressSettings::from_json(json!({"redistributionDelay": 0})))
        },
        |f| queue(f).consumer_count = None,
        |f| f.queue.settings = Some(AddressSettings::from_json(json!({"expiryDelay": 0}))),
    ];
    for (i, change) in rows.into_iter().enumerate() {
        let mut f = healthy();
        change(&mut f);
        assert_eq!(check(&f), TargetCheck::Go, "row {i}");
    }
}

#[test]
fn a_refusal_comes_before_a_wait_and_a_wait_before_an_unknown() {
    let mut f = with_settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 0}), 0, 0);
    f.node.as_mut().unwrap().broker.disk_store_usage = None;
    assert!(waits("capacity-bytes", &check(&f)), "{:?}", check(&f));
    queue(&mut f).enabled = Some(false);
    assert!(refused("target-disabled", &check(&f)), "{:?}", check(&f));
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
    // Found after the commit: the same changes, and words that do not claim nothing was committed.
    assert_eq!(recheck_after_commit("q", &plain, Some(&plain)), Ok(()));
    let after = recheck_after_commit("q", &plain, None).unwrap_err();
    assert!(after.contains("deleted") && after.contains("stays in staging") && !after.contains("not committed"));
    assert!(after.contains("went with the queue") && !after.contains("in doubt"), "{after}");
}

#[test]
fn a_target_found_changed_after_a_commit_may_hold_the_batch_unless_it_was_deleted() {
    let plain = QueueView { enabled: Some(true), ..QueueView::default() };
    let disabled = QueueView { enabled: Some(false), ..plain.clone() };
    // A disabled queue keeps what was routed to it before: the batch may be there as well as in staging.
    assert!(may_hold_the_batch(Some(&disabled)));
    let words = recheck_after_commit("q", &plain, Some(&disabled)).unwrap_err();
    assert!(
        words.contains("disabled") && words.contains("in doubt") && words.contains("in the queue as well"),
        "{words}"
    );
    // An auto-created successor holds what was sent to it.
    assert!(may_hold_the_batch(Some(&QueueView { auto_created: true, ..plain.clone() })));
    // A deleted queue took the batch with it.
    assert!(!may_hold_the_batch(None));
}

#[test]
fn a_paged_filtered_refill_waits_while_the_source_heap_is_nearly_full() {
    let mib = 1_048_576;
    let heap = |used: i64| Some(HeapUsage { used: used * mib, max: 512 * mib });
    assert_eq!(check_source_heap("east/east-1/q", heap(200)), TargetCheck::Go);
    // 90% of 512 MiB is 460.8 MiB: just under it goes, at or over it waits.
    assert_eq!(check_source_heap("east/east-1/q", heap(460)), TargetCheck::Go);
    match check_source_heap("east/east-1/q", heap(461)) {
        TargetCheck::Wait { code, words } => {
            assert_eq!(code, "source-paged");
            assert!(words.contains("461 of its 512 MiB heap"), "{words}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(check_source_heap("east/east-1/q", None).code(), Some("source-heap-unknown"));
}
