//! Copies across clusters (issue 7, SPEC §5): by the whole queue, a filter and ids, and the copy's crash matrix.
//! Judged by the Java client: the source browsed before and after must be the same byte for byte, delivery
//! counts included; the target holds each selected message once, with its expiration.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testbed::fidelity::{self, Observed, Produce};
use testbed::{unique_name, TestBed};

use crate::support::{assert_accounting, census, create_queue, management, queue_ref, remove_queues, Census, World};
use artemis_transfer::transfer::Selection;

const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A source queue on east-1 holding `count` messages of every kind, and an empty target queue on west-1.
async fn queues(label: &str, count: u32) -> (String, String, Vec<Observed>) {
    let bed = TestBed::require().await;
    let source = unique_name(&format!("{label}_src"));
    let target = unique_name(&format!("{label}_dst"));
    create_queue(bed.node("east-1"), &source).await;
    create_queue(bed.node("west-1"), &target).await;
    fidelity::produce(
        bed.node("east-1"),
        &source,
        &Produce { count, prefix: format!("{label}-"), ..Produce::default() },
    )
    .await;
    let before = fidelity::browse(bed.node("east-1"), &source).await;
    assert_eq!(before.len(), count as usize);
    (source, target, before)
}

/// By payload id, what the Java client saw of each message, without the fields a relay changes by design.
fn by_payload(observed: &[Observed], drop: &[&str]) -> BTreeMap<String, Value> {
    observed.iter().map(|o| (o.payload_id().unwrap().to_string(), o.without(drop))).collect()
}

/// The source is exactly as it was: same messages, same order, same bytes, same delivery counts. Returns its census.
async fn assert_source_untouched(source: &str, before: &[Observed]) -> BTreeMap<String, usize> {
    let after = fidelity::browse(TestBed::get().node("east-1"), source).await;
    assert_eq!(after.len(), before.len(), "the source lost or gained messages");
    for (a, b) in after.iter().zip(before) {
        assert_eq!(a.0, b.0, "the source changed");
    }
    fidelity::census(&after)
}

/// The target holds exactly `expected` (payload ids), each once, with the source's body, headers and
/// expiration; the relay's own properties aside.
async fn assert_target_holds(target: &str, before: &[Observed], expected: &[String]) -> Vec<Observed> {
    let on_target = fidelity::browse(TestBed::get().node("west-1"), target).await;
    let census = fidelity::census(&on_target);
    let want: BTreeMap<String, usize> = expected.iter().map(|id| (id.clone(), 1)).collect();
    assert_eq!(census, want, "the target does not hold each selected message exactly once");
    // Fields the target sets by design: its own message id and the address (the relay sends to the FQQN); the relay's trace
    // and duplicate-id properties are checked apart.
    let differ = ["message_id", "address", "properties"];
    let source = by_payload(before, &differ);
    for (id, seen) in by_payload(&on_target, &differ) {
        assert_eq!(Some(&seen), source.get(&id), "message {id} differs on the target");
    }
    for o in &on_target {
        let props = &o.0["properties"];
        assert!(props["_studio_orig_message_id"]["value"].is_i64(), "{o:?}");
        assert!(props["_AMQ_DUPL_ID"].is_object(), "{o:?}");
    }
    on_target
}

#[tokio::test]
async fn a_whole_queue_copies_once_and_leaves_the_source_untouched() {
    let (source, target, before) = queues("copy_whole", 300).await;
    assert!(before.iter().any(|o| o.0["expiration"].as_i64().is_some_and(|e| e > 0)), "no expiring message");
    let mut world = World::new("copy_whole", &[("batch_size", json!(40))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_eq!(counters.delivered, 300, "{counters:?}");
    assert_eq!(counters.selected, Some(300));
    let ids: Vec<String> = before.iter().map(|o| o.payload_id().unwrap().to_string()).collect();
    let on_target = assert_target_holds(&target, &before, &ids).await;
    // The original id is the source's message id.
    let source_ids: BTreeMap<String, i64> =
        before.iter().map(|o| (o.payload_id().unwrap().to_string(), o.0["message_id"].as_i64().unwrap())).collect();
    for o in &on_target {
        let id = o.payload_id().unwrap();
        assert_eq!(o.0["properties"]["_studio_orig_message_id"]["value"].as_i64(), Some(source_ids[id]));
    }
    let left = assert_source_untouched(&source, &before).await;
    assert_accounting(&counters, &Census::copied(&ids, &fidelity::census(&on_target), &left));
    // The ledger is removed when the run ends.
    let ledger = artemis_transfer::transfer::relay::copy::ledger_size(&world.pool, stored.run_id).await.unwrap();
    assert_eq!(ledger, 0);
    let bed = TestBed::get();
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

#[tokio::test]
async fn a_filter_and_an_id_selection_copy_exactly_what_they_select() {
    let bed = TestBed::require().await;
    let (source, target, before) = queues("copy_sel", 90).await;
    let mut world = World::new("copy_sel", &[("batch_size", json!(16))]).await;
    world.spawn_worker("w1", &[]).await;

    // A filter: the Java helper sets `p_bool` on every other message.
    let stored = world
        .preview_copy(
            queue_ref("east", "east-1", &source),
            queue_ref("west", "west-1", &target),
            Selection::Filter("p_bool = TRUE".into()),
        )
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    let selected: Vec<String> = before
        .iter()
        .filter(|o| o.0["properties"]["p_bool"]["value"] == json!(true))
        .map(|o| o.payload_id().unwrap().to_string())
        .collect();
    assert!(!selected.is_empty() && selected.len() < 90);
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_eq!(counters.delivered, selected.len() as i64, "{counters:?}");
    let on_target = fidelity::census(&assert_target_holds(&target, &before, &selected).await);
    let left = assert_source_untouched(&source, &before).await;
    assert_accounting(&counters, &Census::copied(&selected, &on_target, &left));

    // Ids: every seventh message, to a second target.
    let target2 = unique_name("copy_ids_dst");
    create_queue(bed.node("west-1"), &target2).await;
    let picked: Vec<&Observed> = before.iter().step_by(7).collect();
    let ids = picked.iter().map(|o| o.0["message_id"].as_i64().unwrap()).collect();
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target2), Selection::Ids(ids))
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    assert_eq!(state, "succeeded", "{counters:?}");
    let expected: Vec<String> = picked.iter().map(|o| o.payload_id().unwrap().to_string()).collect();
    assert_eq!(counters.delivered, expected.len() as i64, "{counters:?}");
    let on_target = fidelity::census(&assert_target_holds(&target2, &before, &expected).await);
    let left = assert_source_untouched(&source, &before).await;
    assert_accounting(&counters, &Census::copied(&expected, &on_target, &left));
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target), (bed.node("west-1"), &target2)])
        .await;
}

/// Copies 150 messages in batches of 20 with a worker that aborts the second time it passes `step`; a second
/// worker finishes. The target must hold each message once; the source must be untouched.
async fn copy_crash_after(step: &str) {
    let label = format!("copy_crash_{}", step.replace('-', "_"));
    let (source, target, before) = queues(&label, 150).await;
    let mut world = World::new(&label, &[("batch_size", json!(20))]).await;
    let fault = format!("{step}:2");
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", &fault)]).await;
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort at {step}, but exited {status}");
    world.spawn_worker("rescuer", &[]).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    assert_eq!(state, "succeeded", "{counters:?}");
    let ids: Vec<String> = before.iter().map(|o| o.payload_id().unwrap().to_string()).collect();
    let on_target = fidelity::census(&assert_target_holds(&target, &before, &ids).await);
    let left = assert_source_untouched(&source, &before).await;
    assert_accounting(&counters, &Census::copied(&ids, &on_target, &left));
    if step == "copy-target-commit" || step == "copy-in-doubt" {
        // The batch committed on the target but not in the ledger came again and the target dropped it. At
        // `copy-in-doubt` that is the batch before the one just marked: its record waited for this one's send.
        assert!(counters.already_on_target > 0, "{counters:?}");
    }
    let bed = TestBed::get();
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

#[tokio::test]
async fn copy_crash_mid_slice_while_browsing() {
    copy_crash_after("copy-browse").await;
}

/// Two batches in flight: the second batch marked in doubt, the first committed on the target and its record not
/// yet written (it is written beside the second's send).
#[tokio::test]
async fn copy_crash_with_the_batch_before_committed_and_unrecorded() {
    copy_crash_after("copy-in-doubt").await;
}

#[tokio::test]
async fn copy_crash_after_target_commit() {
    copy_crash_after("copy-target-commit").await;
}

#[tokio::test]
async fn copy_crash_after_ledger_insert() {
    copy_crash_after("copy-ledger").await;
}

/// A slice is one job for many batches; its retry budget must count attempts that copied nothing, as a move's
/// batch does, not every worker it outlived. Four workers die in turn, each after two batches of progress, with a
/// budget of two attempts: the copy carries on (it ended Interrupted, "gave up after 2 attempts", when the third
/// claim of the one slice job spent the budget).
#[tokio::test]
async fn a_copy_outlives_more_worker_deaths_than_its_retry_budget_while_it_makes_progress() {
    let label = "copy_budget";
    let (source, target, before) = queues(label, 120).await;
    let mut world = World::new(label, &[("batch_size", json!(10))]).await;
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute_with_budget(&stored, 2).await;
    for n in 0..4 {
        let doomed = world.spawn_worker(&format!("doomed-{n}"), &[("ARTEMIS_TRANSFER_FAULT", "copy-ledger:2")]).await;
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = world.workers[doomed].exited() {
                break status;
            }
            let (state, counters) = world.state(stored.run_id).await;
            assert_ne!(state, "interrupted", "the slice's budget ran out while it copied: {counters:?}");
            assert!(Instant::now() < deadline, "worker {n} did not reach its second batch: {state} {counters:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(!status.success(), "worker {n} was meant to abort after its second batch, but exited {status}");
    }
    world.spawn_worker("rescuer", &[]).await;
    let (_, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    let ids: Vec<String> = before.iter().map(|o| o.payload_id().unwrap().to_string()).collect();
    let on_target = fidelity::census(&assert_target_holds(&target, &before, &ids).await);
    let left = assert_source_untouched(&source, &before).await;
    assert_accounting(&counters, &Census::copied(&ids, &on_target, &left));
    let bed = TestBed::get();
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

#[tokio::test]
async fn a_copy_counts_what_the_browser_cannot_see_and_ends_partial() {
    let bed = TestBed::require().await;
    let (source, target, before) = queues("copy_sched", 30).await;
    // Five more, scheduled an hour from now: selected by the frozen filter's time but invisible to a browser.
    fidelity::produce_scheduled(
        bed.node("east-1"),
        &source,
        &Produce { count: 5, prefix: "copy_sched-later-".into(), ..Produce::default() },
        3_600_000,
    )
    .await;
    let mut world = World::new("copy_sched", &[("batch_size", json!(10))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["partial", "succeeded"], RUN_LIMIT).await;
    let ids: Vec<String> = before.iter().map(|o| o.payload_id().unwrap().to_string()).collect();
    let on_target = fidelity::census(&assert_target_holds(&target, &before, &ids).await);
    // As a move counts them (tests/relay/conditions.rs): sent before t0, scheduled after it, not copied.
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!(counters.delivered, 30, "{counters:?}");
    assert_eq!(counters.not_taken_scheduled, 5, "{counters:?}");
    assert_eq!(counters.selected, Some(35), "{counters:?}");
    let mgmt = management(bed.node("east-1"));
    let mbean = mgmt.queue_mbean(&source, artemis_transfer::broker::jolokia::RoutingType::Anycast, &source);
    let scheduled = mgmt.list_scheduled_messages(&mbean).await.unwrap().len();
    assert_eq!(scheduled, 5, "the scheduled messages were touched");
    // The selection is the 30 and the 5 scheduled ones, which a browse of the source cannot see.
    let selected: Vec<String> = ids.iter().cloned().chain((0..5).map(|i| format!("copy_sched-later-{i}"))).collect();
    let left = census(bed.node("east-1"), &source).await;
    assert_accounting(&counters, &Census::copied(&selected, &on_target, &left).unbrowsable(scheduled));
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}
