//! The duplicate-id window (issue 14): a batch in doubt is sent again after a crash, and the target's
//! duplicate-id cache drops what already landed — only while the cache still holds the batch's ids. The cache is
//! per address, a ring shared by every run (and producer) that writes duplicate ids there.

use std::time::Duration;

use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::scratch::{ScratchBroker, ScratchOptions};
use testbed::{unique_name, TestBed};

use crate::support::{
    assert_accounting, census, create_queue, management, queue_ref, register_scratch, scratch_node, Census, World,
    SCRATCH_CREDENTIALS,
};
use artemis_transfer::transfer::{Mode, Selection};

/// Two runs into one target address whose duplicate-id cache holds 100 ids; batches of 20. Run A (a `first`: a
/// move or a copy) has its worker die
/// between a target commit and its source acknowledgement (the fault seam), leaving that batch in doubt for a
/// lease; meanwhile run B starts on another worker and writes into the same address. The batch in doubt must
/// not be doubled when A is taken over: B may not push A's ids out of the cache before they are settled.
async fn shared_window(first: Mode) {
    const SIZES: [u32; 2] = [200, 1000];
    let bed = TestBed::require().await;
    let (east, west) = (bed.node("east-1"), bed.node("west-1"));
    let target = unique_name("window_dst");
    // The cache is made with the address's size when the first duplicate id arrives: set it first.
    management(west).add_address_settings(&target, &json!({ "idCacheSize": 100 })).await.unwrap();
    create_queue(west, &target).await;
    let mut sources = Vec::new();
    let mut ids = Vec::new();
    for (run, count) in ["a", "b"].into_iter().zip(SIZES) {
        let source = unique_name(&format!("window_src_{run}"));
        create_queue(east, &source).await;
        let prefix = format!("window-{run}-");
        let produce =
            Produce { count, prefix: prefix.clone(), kinds: "bytes".into(), durable_only: true, ..Produce::default() };
        fidelity::produce(east, &source, &produce).await;
        ids.extend((0..count).map(|i| format!("{prefix}{i}")));
        sources.push(source);
    }

    let mut world = World::new("window_shared", &[("batch_size", json!(20))]).await;
    let mut runs = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let (from, to) = (queue_ref("east", "east-1", source), queue_ref("west", "west-1", &target));
        let stored = if i == 0 && first == Mode::Copy {
            world.preview_copy(from, to, Selection::All).await
        } else {
            world.preview_move(from, to, Selection::All).await
        };
        runs.push(stored);
    }
    let fault = if first == Mode::Copy { "copy-target-commit:3" } else { "target-commit:3" };
    // Run A alone on the doomed worker, which aborts after its third target commit.
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", fault)]).await;
    world.execute(&runs[0]).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort after a target commit, but exited {status}");
    // Run B at once on a fresh worker, while A's batch waits in doubt for its lease to run out.
    world.spawn_worker("rescuer", &[]).await;
    world.execute(&runs[1]).await;
    let mut counters = Vec::new();
    for stored in &runs {
        counters.push(world.wait_run(stored.run_id, &["succeeded"], Duration::from_secs(180)).await.1);
    }

    let on_target = census(west, &target).await;
    let doubled: Vec<String> = on_target.iter().filter(|(_, n)| **n > 1).map(|(id, n)| format!("{id}×{n}")).collect();
    let missing: Vec<&String> = ids.iter().filter(|id| !on_target.contains_key(*id)).collect();
    let waits: i64 = sqlx::query_scalar("SELECT count(*) FROM run_event WHERE kind = 'waiting_for_room'")
        .fetch_one(&world.pool)
        .await
        .unwrap();
    eprintln!(
        "window_shared {first:?}: doubled {doubled:?}; missing {missing:?}; waits {waits}; counters {counters:?}"
    );
    assert!(doubled.is_empty() && missing.is_empty(), "doubled {doubled:?}; missing {missing:?}");
    for (c, size) in counters.iter().zip(SIZES) {
        assert_eq!((c.selected, c.delivered), (Some(i64::from(size)), i64::from(size)), "{c:?}");
    }
    // The batch sent before the crash was sent again, and the target's cache still dropped it whole; run B had
    // to wait for that at least once.
    assert_eq!(counters[0].already_on_target, 20, "{:?}", counters[0]);
    assert!(waits > 0, "run B never waited for A's batch in doubt: the test proved nothing about the window");
    if first == Mode::Copy {
        let kept = census(east, &sources[0]).await;
        assert_eq!((kept.len(), kept.values().sum::<usize>()), (SIZES[0] as usize, SIZES[0] as usize));
    }
    let j = management(west);
    j.destroy_queue(&target).await.unwrap();
    let _ = j.remove_address_settings(&target).await;
    for source in &sources {
        management(east).destroy_queue(source).await.unwrap();
    }
}

#[tokio::test]
async fn a_move_in_doubt_is_not_doubled_by_another_run_filling_the_shared_cache() {
    shared_window(Mode::Move).await;
}

#[tokio::test]
async fn a_copy_in_doubt_is_not_doubled_by_another_run_filling_the_shared_cache() {
    shared_window(Mode::Copy).await;
}

/// A copy keeps two batches in flight (a batch's record is written beside the next one's send), so the next
/// batch is counted into the window beside the one before it. Into an address whose cache (30 ids) cannot hold two
/// batches of 20, that admission fails on the run's own batch: the batch before is recorded first and the next is
/// admitted then, with no wait. A worker dies after its third target commit; the copy ends exact, nothing doubled.
#[tokio::test]
async fn a_copy_into_a_cache_smaller_than_two_batches_records_before_it_sends_again() {
    const N: u32 = 100;
    let bed = TestBed::require().await;
    let (east, west) = (bed.node("east-1"), bed.node("west-1"));
    let (source, target) = (unique_name("window_small_src"), unique_name("window_small_dst"));
    management(west).add_address_settings(&target, &json!({ "idCacheSize": 30 })).await.unwrap();
    create_queue(west, &target).await;
    create_queue(east, &source).await;
    let produce =
        Produce { count: N, prefix: "small-".into(), kinds: "bytes".into(), durable_only: true, ..Produce::default() };
    fidelity::produce(east, &source, &produce).await;

    let mut world = World::new("window_small", &[("batch_size", json!(20))]).await;
    let (from, to) = (queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target));
    let stored = world.preview_copy(from, to, Selection::All).await;
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "copy-target-commit:3")]).await;
    world.execute(&stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort after its third target commit, but exited {status}");
    world.spawn_worker("rescuer", &[]).await;
    let (_, counters) = world.wait_run(stored.run_id, &["succeeded"], Duration::from_secs(180)).await;

    let on_target = census(west, &target).await;
    let doubled: Vec<String> = on_target.iter().filter(|(_, n)| **n > 1).map(|(id, n)| format!("{id}×{n}")).collect();
    assert!(doubled.is_empty(), "doubled {doubled:?}");
    assert_eq!(on_target.len(), N as usize, "{counters:?}");
    assert_eq!((counters.selected, counters.delivered), (Some(i64::from(N)), i64::from(N)), "{counters:?}");
    assert_eq!(counters.already_on_target, 20, "the batch in doubt came again whole: {counters:?}");
    let waits: i64 = sqlx::query_scalar("SELECT count(*) FROM run_event WHERE kind = 'waiting_for_room'")
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert_eq!(waits, 0, "the copy waited on its own batch in flight");
    let ids: Vec<String> = (0..N).map(|i| format!("small-{i}")).collect();
    let on_source = census(east, &source).await;
    assert_accounting(&counters, &Census::copied(&ids, &on_target, &on_source));
    let j = management(west);
    j.destroy_queue(&target).await.unwrap();
    let _ = j.remove_address_settings(&target).await;
    management(east).destroy_queue(&source).await.unwrap();
}

/// A run taken over after a crash between its target commit and its source acknowledgement, with `batch_size`
/// raised tenfold meanwhile: the batch in doubt is settled and the larger batches that follow land once each.
#[tokio::test]
async fn a_takeover_with_the_batch_size_raised_tenfold_lands_every_message_once() {
    const N: u32 = 1000;
    let bed = TestBed::require().await;
    let (east, west) = (bed.node("east-1"), bed.node("west-1"));
    let (source, target) = (unique_name("window_resize_src"), unique_name("window_resize_dst"));
    create_queue(east, &source).await;
    let produce =
        Produce { count: N, prefix: "resize-".into(), kinds: "bytes".into(), durable_only: true, ..Produce::default() };
    fidelity::produce(east, &source, &produce).await;
    let ids: Vec<String> = (0..N).map(|i| format!("resize-{i}")).collect();

    let mut world = World::new("window_resize", &[("batch_size", json!(20))]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "target-commit:3")]).await;
    world.execute(&stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort after a target commit, but exited {status}");
    artemis_transfer::jobs::settings::set(&world.pool, "batch_size", json!(200), "test").await.unwrap();
    world.spawn_worker("rescuer", &[]).await;
    let (_, counters) = world.wait_run(stored.run_id, &["succeeded"], Duration::from_secs(180)).await;

    let on_target = census(west, &target).await;
    let left = census(east, &source).await;
    crate::support::assert_exactly_once(&ids, &on_target, &[&left]);
    assert_eq!(counters.selected, Some(i64::from(N)), "{counters:?}");
    assert_eq!(counters.delivered, on_target.values().sum::<usize>() as i64, "{counters:?}");
    assert_eq!((counters.delivered, counters.staged), (i64::from(N), i64::from(N)), "{counters:?}");
    assert_eq!(counters.already_on_target, 20, "the batch in doubt was not dropped by the cache: {counters:?}");
    // After the takeover the batches are the larger size: fewer than 1000 / 20.
    assert!(counters.batches < 30, "{counters:?}");
    management(west).destroy_queue(&target).await.unwrap();
    management(east).destroy_queue(&source).await.unwrap();
}

/// A target restarted (kill -9, started again on its journal) while a batch is in doubt. A persisted cache (the
/// default) drops what landed: the batch is sent again, once. A cache that is not persisted would not: the run
/// stops naming the ids and the selector to check them by, and the operator's path its words give — remove what
/// the selector finds on the target, then resume — ends with every message once.
async fn target_restart_in_doubt(persisted: bool, first_rescuer_dies_stopping: bool) {
    const N: u32 = 300;
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let mut options = ScratchOptions { web: true, ..ScratchOptions::default() };
    if !persisted {
        options.broker_xml = vec![(
            "<journal-type>NIO</journal-type>".into(),
            "<journal-type>NIO</journal-type>\n      <persist-id-cache>false</persist-id-cache>".into(),
        )];
    }
    let mut broker = ScratchBroker::start_with("window_restart_dst", options).await;
    let target_node = scratch_node(&broker, "target");
    let label = if persisted { "window_restart_persisted" } else { "window_restart_lost" };
    let (source, target) = (unique_name(&format!("{label}_src")), unique_name(&format!("{label}_dst")));
    create_queue(east, &source).await;
    let prefix = format!("{label}-");
    let produce =
        Produce { count: N, prefix: prefix.clone(), kinds: "bytes".into(), durable_only: true, ..Produce::default() };
    fidelity::produce(east, &source, &produce).await;
    let ids: Vec<String> = (0..N).map(|i| format!("{prefix}{i}")).collect();

    let mut world = World::new(label, &[("batch_size", json!(20))]).await;
    register_scratch(&world, "target", &broker).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("target", "scratch", &target), Selection::All)
        .await;
    let mut doomed_env = SCRATCH_CREDENTIALS.to_vec();
    doomed_env.push(("ARTEMIS_TRANSFER_FAULT", "target-commit:3"));
    let doomed = world.spawn_worker("doomed", &doomed_env).await;
    world.execute(&stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort after a target commit, but exited {status}");
    broker.kill().await;
    broker.restart().await;
    if first_rescuer_dies_stopping {
        // It records the stop and dies before its process could write anything more: the run must be stopped
        // already, or the next worker would take the batch's new mark for the operator's word and send it again.
        let mut env = SCRATCH_CREDENTIALS.to_vec();
        env.push(("ARTEMIS_TRANSFER_FAULT", "cache-lost"));
        let first = world.spawn_worker("first-rescuer", &env).await;
        let status = world.workers[first].wait_exit(Duration::from_secs(120)).await;
        assert!(!status.success(), "the first rescuer was meant to abort as it stopped the run, but exited {status}");
    }
    world.spawn_worker("rescuer", &SCRATCH_CREDENTIALS).await;
    let run = stored.run_id;

    let mut removed = 0;
    if !persisted {
        let (state, _) = world.wait_run(run, &["stopped"], Duration::from_secs(180)).await;
        let reason: String = sqlx::query_scalar("SELECT stop_reason FROM transfer_run WHERE id = $1")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
        assert!(
            reason.contains("restarted or failed over") && reason.contains("_AMQ_DUPL_ID IN ("),
            "{state}: {reason}"
        );
        let event: serde_json::Value = sqlx::query_scalar(
            "SELECT detail FROM run_event WHERE run_id = $1 AND kind = 'in_doubt_cache_lost' ORDER BY id DESC LIMIT 1",
        )
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
        let in_doubt: Vec<i64> = serde_json::from_value(event["ids"].clone()).unwrap();
        assert_eq!(in_doubt.len(), 20, "{event}");
        // The operator's check, as the words give it: the batch landed before the crash, so the target holds it.
        let selector = reason.split('`').nth(1).expect("the words quote the selector");
        let j = Jolokia::new(&target_node);
        let mbean = j.queue_mbean(&target, &target);
        let found = j.exec(&mbean, "countMessages(java.lang.String)", json!([selector])).await.unwrap();
        assert_eq!(found.as_i64(), Some(20), "the selector {selector} found {found} on the target");
        removed =
            j.exec(&mbean, "removeMessages(java.lang.String)", json!([selector])).await.unwrap().as_i64().unwrap();
        assert_eq!(removed, 20);
        artemis_transfer::transfer::actions::resume(&world.pool, run, "tester", 10).await.unwrap();
    }
    let (_, counters) = world.wait_run(run, &["succeeded"], Duration::from_secs(180)).await;

    let on_target = census(&target_node, &target).await;
    let left = census(east, &source).await;
    crate::support::assert_exactly_once(&ids, &on_target, &[&left]);
    assert_eq!(counters.selected, Some(i64::from(N)), "{counters:?}");
    assert_eq!(counters.delivered, on_target.values().sum::<usize>() as i64, "{counters:?}");
    assert_eq!(counters.delivered, i64::from(N), "{counters:?}");
    // Persisted: the batch sent again was dropped whole by the cache. Lost: the operator removed it, so it landed.
    assert_eq!(counters.already_on_target, if persisted { 20 } else { 0 }, "{counters:?}");
    eprintln!("{label}: removed {removed} on the operator's check; counters {counters:?}");
    management(east).destroy_queue(&source).await.unwrap();
}

#[tokio::test]
async fn a_target_restart_with_a_persisted_cache_drops_the_batch_sent_again() {
    target_restart_in_doubt(true, false).await;
}

#[tokio::test]
async fn a_target_restart_that_lost_its_cache_stops_the_run_naming_the_batch_in_doubt() {
    target_restart_in_doubt(false, false).await;
}

#[tokio::test]
async fn a_worker_that_dies_as_it_stops_for_a_lost_cache_leaves_the_run_stopped() {
    target_restart_in_doubt(false, true).await;
}

/// A run Interrupted with a batch in doubt while its target was down (its retries ran out), the target then
/// started again with a cache that is not persisted, and the operator asks for a return: the return settles the
/// batch in doubt first, and must not send it again blind — the target would not drop what landed. It stops naming
/// the ids and the selector, as a batch does; after the operator's check (remove what the selector finds) a second
/// return settles them once.
#[tokio::test]
async fn a_return_does_not_send_a_batch_in_doubt_again_to_a_target_that_lost_its_cache() {
    const N: u32 = 200;
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let options = ScratchOptions {
        web: true,
        broker_xml: vec![(
            "<journal-type>NIO</journal-type>".into(),
            "<journal-type>NIO</journal-type>\n      <persist-id-cache>false</persist-id-cache>".into(),
        )],
        ..ScratchOptions::default()
    };
    let mut broker = ScratchBroker::start_with("window_return_dst", options).await;
    let target_node = scratch_node(&broker, "target");
    let (source, target) = (unique_name("window_return_src"), unique_name("window_return_dst"));
    create_queue(east, &source).await;
    let prefix = "window_return-".to_string();
    let produce =
        Produce { count: N, prefix: prefix.clone(), kinds: "bytes".into(), durable_only: true, ..Produce::default() };
    fidelity::produce(east, &source, &produce).await;
    let ids: Vec<String> = (0..N).map(|i| format!("{prefix}{i}")).collect();

    let mut world = World::new("window_return", &[("batch_size", json!(20))]).await;
    register_scratch(&world, "target", &broker).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("target", "scratch", &target), Selection::All)
        .await;
    let mut doomed_env = SCRATCH_CREDENTIALS.to_vec();
    doomed_env.push(("ARTEMIS_TRANSFER_FAULT", "target-commit:3"));
    let doomed = world.spawn_worker("doomed", &doomed_env).await;
    world.execute_with_budget(&stored, 2).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort after a target commit, but exited {status}");
    let run = stored.run_id;

    // The target is down: the batch's second attempt cannot reach it, and the run is Interrupted, still in doubt.
    broker.kill().await;
    let mut env = SCRATCH_CREDENTIALS.to_vec();
    env.extend([("ARTEMIS_TRANSFER__RETRY__MIN_DELAY_MS", "200"), ("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "1")]);
    world.spawn_worker("rescuer", &env).await;
    world.wait_run(run, &["interrupted"], Duration::from_secs(120)).await;
    broker.restart().await;

    artemis_transfer::transfer::actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
    let (state, _) = world.wait_run(run, &["stopped", "returned", "failed"], Duration::from_secs(120)).await;
    let on_target = census(&target_node, &target).await;
    let doubled: Vec<&String> = on_target.iter().filter(|(_, n)| **n > 1).map(|(id, _)| id).collect();
    assert!(doubled.is_empty(), "the return sent the batch in doubt again: {} landed twice ({state})", doubled.len());
    assert_eq!(state, "stopped");
    let reason: String = sqlx::query_scalar("SELECT stop_reason FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    let selector = reason.split('`').nth(1).unwrap_or_else(|| panic!("the words quote the selector: {reason}"));
    let j = Jolokia::new(&target_node);
    let mbean = j.queue_mbean(&target, &target);
    let removed = j.exec(&mbean, "removeMessages(java.lang.String)", json!([selector])).await.unwrap();
    assert_eq!(removed.as_i64(), Some(20), "the selector {selector}");

    artemis_transfer::transfer::actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
    let (_, counters) = world.wait_run(run, &["returned"], Duration::from_secs(120)).await;
    let on_target = census(&target_node, &target).await;
    let left = census(east, &source).await;
    let wrong: Vec<String> = ids
        .iter()
        .map(|id| (id, on_target.get(id).copied().unwrap_or(0) + left.get(id).copied().unwrap_or(0)))
        .filter(|(_, n)| *n != 1)
        .map(|(id, n)| format!("{id}×{n}"))
        .collect();
    assert!(wrong.is_empty(), "not exactly once across the source and the target: {wrong:?}");
    assert_eq!(counters.delivered, on_target.values().sum::<usize>() as i64, "{counters:?}");
    assert_eq!(counters.returned + counters.not_taken_left, left.values().sum::<usize>() as i64, "{counters:?}");
    eprintln!("window_return: counters {counters:?}");
    management(east).destroy_queue(&source).await.unwrap();
}
