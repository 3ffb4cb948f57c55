//! A move under hard conditions on the target and the source (issue 6, "Prove"): a target that is full, a target
//! deleted or disabled mid-run, messages scheduled for later, and a producer that keeps sending during the run;
//! plus the broker facts about a target that changes under a send, which the relay's pre-commit re-check rests on.
//! Every run is judged by a census of payload ids taken with the Java client (source, staging, target), never by
//! the run's own counters alone.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};

use crate::support::{
    assert_accounting, assert_exactly_once, census, create_queue, management, queue_ref, source_and_target, wait_for,
    Census, World,
};
use artemis_transfer::transfer::actions;
use artemis_transfer::transfer::relay::state::Counters;
use artemis_transfer::transfer::Selection;

const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The run's state, stop reason and last error.
async fn run_words(world: &World, run: uuid::Uuid) -> (String, Option<String>, Option<String>) {
    sqlx::query_as("SELECT state, stop_reason, last_error FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap()
}

/// The run's counters now.
async fn counters_now(world: &World, run: uuid::Uuid) -> Counters {
    let v: Value = sqlx::query_scalar("SELECT counters FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    serde_json::from_value(v).unwrap()
}

/// The kinds of the run's events, in order.
async fn event_kinds(world: &World, run: uuid::Uuid) -> Vec<String> {
    sqlx::query_scalar("SELECT kind FROM run_event WHERE run_id = $1 ORDER BY id")
        .bind(run)
        .fetch_all(&world.pool)
        .await
        .unwrap()
}

/// Several censuses added up.
fn merged(parts: &[&BTreeMap<String, usize>]) -> BTreeMap<String, usize> {
    let mut all = BTreeMap::new();
    for part in parts {
        for (id, n) in *part {
            *all.entry(id.clone()).or_insert(0) += n;
        }
    }
    all
}

/// Every id of `expected` exactly once across `parts`, and nothing else in them.
fn assert_each_once_across(expected: &[String], parts: &[&BTreeMap<String, usize>]) {
    let all = merged(parts);
    assert_exactly_once(expected, &all, &[]);
    let extra: Vec<&String> = all.keys().filter(|id| !expected.contains(id)).collect();
    assert!(extra.is_empty(), "ids nobody produced: {extra:?}");
}

/// The census of `queue` on `node`, or empty when the queue does not exist.
async fn census_if_exists(node: &Node, queue: &str) -> BTreeMap<String, usize> {
    match Jolokia::new(node).message_count(queue).await {
        Ok(_) => census(node, queue).await,
        Err(_) => BTreeMap::new(),
    }
}

fn staging_of(run: uuid::Uuid) -> String {
    format!("studio.transfer.{run}")
}

/// Whether `queue` exists on `node`.
async fn exists(node: &Node, queue: &str) -> bool {
    management(node).queues().await.unwrap().iter().any(|(_, _, q)| q == queue)
}

/// Destroys the queues a test made (and their addresses), whatever they hold.
async fn clean_up(node: &Node, queues: &[&str]) {
    let j = Jolokia::new(node);
    for q in queues {
        let _ = j.destroy_queue(q).await;
    }
}

/// Sends one durable message to the FQQN `queue::queue` on `node` over Core (our client, as the relay does) in
/// a transaction, runs `between` once the broker has routed the send and before the commit, and returns the
/// commit's result.
async fn send_one_fqqn<F: std::future::Future<Output = ()>>(
    node: &Node,
    queue: &str,
    between: F,
) -> Result<(), artemis_core::Error> {
    use artemis_core::message::{CoreMessage, MessageHeaders, PropertyValue};
    let options = artemis_core::ConnectOptions::from_url(&node.core_url())?
        .credentials(node.user.clone(), node.password.clone())
        .connection_ttl(Duration::from_secs(10));
    let conn = artemis_core::Connection::connect(&options).await?;
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await?;
    let mut headers = MessageHeaders {
        address: Some(format!("{queue}::{queue}").as_str().into()),
        durable: true,
        timestamp: 1,
        ..MessageHeaders::default()
    };
    headers.properties.insert("_AMQ_ROUTING_TYPE", PropertyValue::Byte(1));
    let sent = async {
        // Confirmed before `between`: a transacted send is otherwise not answered, and the broker could route it
        // only after `between` changed the queue (a run of this test saw a disable overtake its send).
        session
            .producer(None)
            .send_pipelined(&CoreMessage { headers, body: b"probe".to_vec().into() })
            .await?
            .wait()
            .await?;
        between.await;
        session.commit().await
    }
    .await;
    let _ = conn.close().await;
    sent
}

/// What the broker does with a relay's send to a target queue that changed under it (the facts the pre-commit
/// re-check of a batch rests on, docs/broker-notes.md): a queue **deleted** (with its address, or alone) before
/// the send is re-created by auto-create under the default `#` and keeps the message; a queue **disabled** before
/// the send takes the send and the commit and drops the message. Routing happens at the send: a queue disabled
/// between the send and the commit keeps the message, and one deleted then takes it with it (the commit succeeds).
#[tokio::test]
async fn the_broker_recreates_a_deleted_target_and_drops_into_a_disabled_one() {
    let bed = TestBed::require().await;
    let west = bed.node("west-1");
    let j = Jolokia::new(west);
    let broker = west.broker_mbean();
    let state = |q: &str| {
        let (j, mbean) = (j.clone(), j.queue_mbean(q, q));
        async move { j.read(&mbean, &["MessageCount", "Enabled"]).await.ok() }
    };
    let disable = |q: &str| {
        let (j, mbean) = (j.clone(), j.queue_mbean(q, q));
        async move {
            j.exec(&mbean, "disable()", json!([])).await.unwrap();
        }
    };
    let delete_queue_only = |q: &str| {
        let (j, broker, q) = (j.clone(), broker.clone(), q.to_string());
        async move {
            j.exec(&broker, "destroyQueue(java.lang.String,boolean,boolean)", json!([q, true, false])).await.unwrap();
        }
    };
    let names: Vec<String> = ["gone", "alone", "off", "off_late", "gone_late"]
        .iter()
        .map(|label| unique_name(&format!("fact_{label}")))
        .collect();
    let [gone, alone, off, off_late, gone_late] = [&names[0], &names[1], &names[2], &names[3], &names[4]];
    for q in &names {
        j.create_queue(q).await.unwrap();
    }

    j.destroy_queue(gone).await.unwrap();
    send_one_fqqn(west, gone, async {}).await.unwrap();
    assert_eq!(state(gone).await, Some(json!({"MessageCount": 1, "Enabled": true})), "deleted with its address");

    delete_queue_only(alone).await;
    send_one_fqqn(west, alone, async {}).await.unwrap();
    assert_eq!(state(alone).await, Some(json!({"MessageCount": 1, "Enabled": true})), "deleted, address kept");

    disable(off).await;
    send_one_fqqn(west, off, async {}).await.unwrap();
    assert_eq!(state(off).await, Some(json!({"MessageCount": 0, "Enabled": false})), "disabled before the send");

    send_one_fqqn(west, off_late, disable(off_late)).await.unwrap();
    assert_eq!(state(off_late).await, Some(json!({"MessageCount": 1, "Enabled": false})), "disabled before commit");

    send_one_fqqn(west, gone_late, delete_queue_only(gone_late)).await.unwrap();
    assert_eq!(state(gone_late).await, None, "deleted between the send and the commit: gone, message and all");

    clean_up(west, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
}

/// FAIL at `max` bytes. The broker counts about 3.4 kB for each of the helper's small messages (measured: a 40 kB
/// limit at the 90 % threshold took 10), so 40 kB holds about one batch of 10 and 150 kB about four.
fn full_fails_at(max: i64) -> Value {
    json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": max, "pageSizeBytes": 10_000})
}

/// Why the run first waited for room, in the words of its `waiting_for_room` event.
async fn first_wait_words(world: &World, run: uuid::Uuid) -> Option<String> {
    sqlx::query_scalar(
        "SELECT detail->>'why' FROM run_event WHERE run_id = $1 AND kind = 'waiting_for_room' ORDER BY id",
    )
    .bind(run)
    .fetch_optional(&world.pool)
    .await
    .unwrap()
    .flatten()
}

/// A target whose address refuses messages when full (FAIL, small `max-size-bytes`): the run waits for room
/// (state `waiting`, event `waiting_for_room`) instead of failing or spinning; each time a Java consumer drains
/// the target, the run carries on, and it ends Succeeded. Census: every message once across what the consumer
/// took and what is left on the target; nothing on the source; staging removed.
#[tokio::test]
async fn a_full_target_makes_the_run_wait_and_it_proceeds_when_drained() {
    full_target_waits_and_proceeds_when_drained("cap_drain", "FAIL").await;
}

/// The same with a target that **blocks** its producers when full (BLOCK): the relay's guard reads the address
/// before every batch, so the run waits for room in the same words rather than sending into a full address, and
/// it ends Succeeded once drained; census exact.
#[tokio::test]
async fn a_blocking_full_target_makes_the_run_wait_and_it_proceeds_when_drained() {
    full_target_waits_and_proceeds_when_drained("cap_block", "BLOCK").await;
}

async fn full_target_waits_and_proceeds_when_drained(label: &str, policy: &str) {
    let bed = TestBed::require().await;
    let (source, target, ids) = source_and_target(label, 100).await;
    let mut world = World::new(label, &[("batch_size", json!(10))]).await;
    world.spawn_worker("w1", &[]).await;
    // Previewed while the target has room (a preview refuses a selection that cannot fit); then the target's
    // address gets a small FAIL limit, as if another producer had filled it since.
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    let west = management(bed.node("west-1"));
    let mut limit = full_fails_at(150_000);
    limit["addressFullMessagePolicy"] = json!(policy);
    west.add_address_settings(&target, &limit).await.unwrap();
    let started = Instant::now();
    world.execute(&stored).await;

    let run = stored.run_id;
    let mut consumed = BTreeMap::new();
    let mut waits_seen = 0;
    let deadline = Instant::now() + RUN_LIMIT;
    loop {
        let (state, _, error) = run_words(&world, run).await;
        match state.as_str() {
            "succeeded" => break,
            "waiting" => {
                waits_seen += 1;
                // Drain the target with the official client (it stops after 2 s without a message).
                for o in fidelity::consume(bed.node("west-1"), &target).await {
                    *consumed.entry(o.payload_id().unwrap_or("<none>").to_string()).or_insert(0) += 1;
                }
            }
            "running" | "queued" => tokio::time::sleep(Duration::from_millis(100)).await,
            other => panic!("run {run} is {other}: {error:?} (logs in {})", world.log_dir.display()),
        }
        assert!(Instant::now() < deadline, "run {run} did not end within {RUN_LIMIT:?}");
    }
    let took = started.elapsed();
    let counters = counters_now(&world, run).await;
    println!(
        "capacity drain ({policy}): {waits_seen} waits seen, {} consumed, ended in {took:?}; first wait: {:?}; \
         {counters:?}",
        consumed.len(),
        first_wait_words(&world, run).await
    );
    assert!(waits_seen >= 1, "the run never waited for room");
    let events = event_kinds(&world, run).await;
    assert!(events.iter().any(|e| e == "waiting_for_room"), "no waiting_for_room event: {events:?}");
    assert_eq!(counters.delivered, 100, "{counters:?}");
    // Address-full waits; it never proves a message poison (docs/dead-message-queue.md).
    assert_eq!(counters.dead_lettered, 0, "{counters:?}");

    let left_on_target = census(bed.node("west-1"), &target).await;
    let on_source = census(bed.node("east-1"), &source).await;
    assert_each_once_across(&ids, &[&consumed, &left_on_target, &on_source]);
    assert!(on_source.is_empty(), "left on the source: {on_source:?}");
    // What the test's consumer drained from the target was delivered there too.
    assert_accounting(&counters, &Census::moved(&ids, &merged(&[&consumed, &left_on_target]), &on_source));
    assert!(!exists(bed.node("east-1"), &staging_of(run)).await, "staging is still on east-1");

    west.remove_address_settings(&target).await.unwrap();
    clean_up(bed.node("east-1"), &[&source]).await;
    clean_up(bed.node("west-1"), &[&target]).await;
}

/// The same full target with a short `capacity wait` (5 s) and nobody draining: the run ends Stopped, its reason
/// naming the capacity wait; nothing is lost (every message once across source, staging and target). A return to
/// source then puts staging back: Returned, each message on the source or the target, never both, never lost.
#[tokio::test]
async fn a_capacity_wait_that_runs_out_stops_the_run_and_return_puts_staging_back() {
    let bed = TestBed::require().await;
    let (source, target, ids) = source_and_target("cap_stop", 100).await;
    let mut world = World::new("cap_stop", &[("batch_size", json!(10)), ("capacity_wait_secs", json!(5))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    let west = management(bed.node("west-1"));
    west.add_address_settings(&target, &full_fails_at(40_000)).await.unwrap();
    let started = Instant::now();
    world.execute(&stored).await;
    let run = stored.run_id;

    let (_, counters) = world.wait_run(run, &["stopped"], RUN_LIMIT).await;
    let took = started.elapsed();
    let (_, reason, _) = run_words(&world, run).await;
    let reason = reason.unwrap_or_default();
    println!(
        "capacity stop: stopped after {took:?}: {reason}; first wait: {:?}; {counters:?}",
        first_wait_words(&world, run).await
    );
    assert!(reason.contains("capacity wait"), "the reason does not name the capacity wait: {reason}");
    assert_eq!(counters.dead_lettered, 0, "address-full dead-lettered a message: {counters:?}");
    assert!(took >= Duration::from_secs(5), "stopped before the capacity wait ran out ({took:?})");
    let events = event_kinds(&world, run).await;
    assert!(events.iter().any(|e| e == "waiting_for_room"), "no waiting_for_room event: {events:?}");

    let on_target = census(bed.node("west-1"), &target).await;
    let in_staging = census(bed.node("east-1"), &staging_of(run)).await;
    let on_source = census(bed.node("east-1"), &source).await;
    assert_each_once_across(&ids, &[&on_source, &in_staging, &on_target]);
    assert!(!on_target.is_empty() && on_target.len() < ids.len(), "the target took {} of 100", on_target.len());
    assert!(!in_staging.is_empty(), "staging holds nothing: the test would not show the return");
    assert_eq!(counters.delivered, on_target.len() as i64, "{counters:?}");

    actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
    let (_, counters) = world.wait_run(run, &["returned"], RUN_LIMIT).await;
    assert_eq!(counters.returned, in_staging.len() as i64, "{counters:?}");
    let on_target_after = census(bed.node("west-1"), &target).await;
    let on_source_after = census(bed.node("east-1"), &source).await;
    assert_eq!(on_target_after, on_target, "the return changed the target");
    assert_each_once_across(&ids, &[&on_source_after, &on_target_after]);
    assert_accounting(&counters, &Census::moved(&ids, &on_target_after, &on_source_after).returned(&in_staging));
    assert!(!exists(bed.node("east-1"), &staging_of(run)).await, "staging is still on east-1");

    west.remove_address_settings(&target).await.unwrap();
    clean_up(bed.node("east-1"), &[&source]).await;
    clean_up(bed.node("west-1"), &[&target]).await;
}

/// Returns `run`, whose target queue on west-1 is disabled and which holds `in_doubt` ids in doubt: while any are,
/// a return cannot settle them — it fails in words, the target unchanged — so the target is enabled again and a
/// return settles them (the duplicate-id cache keeps each once) and puts the rest back. Every message is then once
/// on the target (as `on_target` had it) or back on the source, the run's numbers are the census, and staging is
/// gone. Returns the run's counters.
async fn return_past_a_disabled_target(
    world: &World,
    run: uuid::Uuid,
    (source, target): (&str, &str),
    ids: &[String],
    on_target: &BTreeMap<String, usize>,
    in_doubt: usize,
) -> Counters {
    let bed = TestBed::get();
    let (west, east) = (bed.node("west-1"), bed.node("east-1"));
    let j = Jolokia::new(west);
    if in_doubt > 0 {
        actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
        world.wait_run(run, &["failed"], RUN_LIMIT).await;
        assert_eq!(world.end_code(run).await.as_deref(), Some("in-doubt-unsettled"));
        assert_eq!(&census(west, target).await, on_target, "the failed return changed the target");
        j.exec(&j.queue_mbean(target, target), "enable()", json!([])).await.unwrap();
    }
    actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
    let (_, returned) = world.wait_run(run, &["returned"], RUN_LIMIT).await;
    let on_target_after = census(west, target).await;
    let on_source_after = census(east, source).await;
    assert_eq!(&on_target_after, on_target, "the return changed the target");
    assert_each_once_across(ids, &[&on_target_after, &on_source_after]);
    assert_accounting(&returned, &Census::moved(ids, &on_target_after, &on_source_after));
    assert!(!exists(east, &staging_of(run)).await, "staging is still on east-1");
    returned
}

/// A slow run (batches of 10 at 50 messages/s) that is past its first batches.
async fn slow_run(label: &str) -> (World, uuid::Uuid, String, String, Vec<String>) {
    let (source, target, ids) = source_and_target(label, 300).await;
    let mut world = World::new(label, &[("batch_size", json!(10)), ("messages_per_second", json!(50))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let run = stored.run_id;
    wait_for("a few batches delivered", RUN_LIMIT, || async {
        let c = counters_now(&world, run).await;
        (c.delivered >= 30).then_some(())
    })
    .await;
    (world, run, source, target, ids)
}

/// The target queue deleted mid-run (while a batch may be in flight: the worker is paused at whatever step it
/// was, the target's census taken, the queue deleted, the worker resumed). The run ends Failed, saying the target
/// is gone, and nothing is lost: what was on the target when it was deleted, plus source, staging and whatever
/// is on the target now, hold every message once. A return then puts staging back.
#[tokio::test]
async fn a_target_deleted_mid_run_fails_the_run_and_loses_nothing() {
    let bed = TestBed::require().await;
    let (world, run, source, target, ids) = slow_run("gone_dst").await;
    let west = bed.node("west-1");
    world.workers[0].pause();
    let deleted_with_the_queue = census(west, &target).await;
    Jolokia::new(west).destroy_queue(&target).await.unwrap();
    world.workers[0].resume();

    let (state, counters) = world.wait_run(run, &["failed", "succeeded", "partial"], RUN_LIMIT).await;
    let (_, _, error) = run_words(&world, run).await;
    let error = error.unwrap_or_default();
    println!("target deleted: {state} after {} on the target: {error}; {counters:?}", deleted_with_the_queue.len());
    assert_eq!(state, "failed", "a run whose target was deleted must fail; {counters:?}");
    assert!(error.contains(&target), "the words do not name the target: {error}");
    assert!(error.contains("no longer exists") || error.contains("deleted"), "the words do not say why: {error}");
    let code = world.end_code(run).await;
    assert!(
        matches!(code.as_deref(), Some("target-queue-created" | "target-queue-missing" | "target-changed")),
        "the code says why: {code:?}"
    );

    let on_target = census_if_exists(west, &target).await;
    let in_staging = census(bed.node("east-1"), &staging_of(run)).await;
    let on_source = census(bed.node("east-1"), &source).await;
    // The worker may have been paused between a batch's commit and its look after the commit: the batch then went
    // with the queue and also stays in staging, unacknowledged (the look cannot tell "committed before the delete"
    // from "lost by it"), and the words say so. Those ids, one batch at most, count once: in staging.
    let mut deleted_with_the_queue = deleted_with_the_queue;
    if error.contains("found just after a batch was committed") {
        let kept: Vec<String> =
            deleted_with_the_queue.keys().filter(|id| in_staging.contains_key(*id)).cloned().collect();
        assert!(kept.len() <= 10, "more than one batch kept in staging and deleted with the queue: {kept:?}");
        println!("target deleted right after a commit: {} messages kept in staging were in the queue too", kept.len());
        deleted_with_the_queue.retain(|id, _| !kept.contains(id));
    }
    assert_each_once_across(&ids, &[&deleted_with_the_queue, &on_target, &in_staging, &on_source]);
    assert!(!in_staging.is_empty() || !on_source.is_empty(), "the run had nothing left: the test shows nothing");

    actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
    let (_, returned) = world.wait_run(run, &["returned"], RUN_LIMIT).await;
    let on_target_after = census_if_exists(west, &target).await;
    let on_source_after = census(bed.node("east-1"), &source).await;
    assert_each_once_across(&ids, &[&deleted_with_the_queue, &on_target_after, &on_source_after]);
    // What the test deleted with the target queue had been delivered.
    let delivered_ever = merged(&[&deleted_with_the_queue, &on_target_after]);
    assert_accounting(&returned, &Census::moved(&ids, &delivered_ever, &on_source_after));
    assert!(!exists(bed.node("east-1"), &staging_of(run)).await, "staging is still on east-1");

    clean_up(bed.node("east-1"), &[&source]).await;
    clean_up(west, &[&target]).await;
}

/// The target queue disabled mid-run (the broker then drops what is sent to it and the commit still succeeds).
/// The run ends Failed, saying the target was disabled, before any commit that would have dropped messages:
/// source, staging and target hold every message once — but for a batch the disable came just after, which is on
/// the target and in staging, in doubt. A return then puts staging back, settling that batch first once the target
/// is enabled again.
#[tokio::test]
async fn a_target_disabled_mid_run_fails_the_run_and_loses_nothing() {
    let bed = TestBed::require().await;
    let (world, run, source, target, ids) = slow_run("off_dst").await;
    let west = bed.node("west-1");
    let j = Jolokia::new(west);
    j.exec(&j.queue_mbean(&target, &target), "disable()", json!([])).await.unwrap();

    let (state, counters) = world.wait_run(run, &["failed", "succeeded", "partial"], RUN_LIMIT).await;
    let (_, _, error) = run_words(&world, run).await;
    let error = error.unwrap_or_default();
    println!("target disabled: {state}: {error}; {counters:?}");
    assert_eq!(state, "failed", "a run whose target was disabled must fail; {counters:?}");
    assert!(error.contains(&target) && error.contains("disabled"), "the words do not say why: {error}");
    // Found by the guard before a batch, or by the watch on the target queue while one was sent.
    let code = world.end_code(run).await;
    assert!(matches!(code.as_deref(), Some("target-disabled" | "target-changed")), "the code says why: {code:?}");

    let on_target = census(west, &target).await;
    let in_staging = census(bed.node("east-1"), &staging_of(run)).await;
    let on_source = census(bed.node("east-1"), &source).await;
    // The disable may have come just after a batch's commit (the look after the commit cannot tell): that batch is
    // then in the disabled queue, which keeps what it holds, and in staging, unacknowledged and in doubt — never
    // out of doubt, or a return would put it back on the source as well (seen in a clean-clone CI run).
    let both: BTreeMap<String, usize> =
        on_target.iter().filter(|(id, _)| in_staging.contains_key(*id)).map(|(id, n)| (id.clone(), *n)).collect();
    let in_doubt = crate::support::in_doubt_ids(&world, run).await.len();
    if error.contains("found just after a batch was committed") {
        println!("target disabled right after a commit: {} messages on the target and in staging", both.len());
        assert!(both.len() <= 10 && both.len() <= in_doubt, "{} on both ends, {in_doubt} in doubt", both.len());
    } else {
        assert!(both.is_empty(), "on the target and in staging: {both:?}");
    }
    let staging_only: BTreeMap<String, usize> =
        in_staging.iter().filter(|(id, _)| !both.contains_key(*id)).map(|(id, n)| (id.clone(), *n)).collect();
    assert_each_once_across(&ids, &[&on_target, &staging_only, &on_source]);
    assert_eq!(counters.delivered + both.len() as i64, on_target.len() as i64, "{counters:?}");

    return_past_a_disabled_target(&world, run, (&source, &target), &ids, &on_target, in_doubt).await;

    clean_up(bed.node("east-1"), &[&source]).await;
    clean_up(west, &[&target]).await;
}

/// The target queue disabled just after a batch's target commit, before the look after it (the seam holds the
/// worker there): the batch is in the disabled queue, which keeps it, and in staging, unacknowledged. It stays in
/// doubt: a return fails in words while the target is disabled, and settles it once the target is enabled again —
/// every message once, on the target or back on the source. Before, the look after the commit took the batch out
/// of doubt, and a return put it back on the source as well: ten messages twice (first seen in a clean-clone CI run
/// of `a_target_disabled_mid_run_fails_the_run_and_loses_nothing`, where the disable fell in that window by chance).
#[tokio::test]
async fn a_target_disabled_just_after_a_commit_keeps_the_batch_in_doubt_and_a_return_does_not_double_it() {
    let bed = TestBed::require().await;
    let (source, target, ids) = source_and_target("off_after", 100).await;
    let mut world = World::new("off_after", &[("batch_size", json!(10))]).await;
    world.spawn_worker("w1", &[("ARTEMIS_TRANSFER_FAULT_PAUSE", "target-committed:5000")]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let run = stored.run_id;
    let west = bed.node("west-1");
    let j = Jolokia::new(west);
    wait_for("the first batch committed on the target", RUN_LIMIT, || async {
        (j.message_count(&target).await.unwrap_or(0) >= 10).then_some(())
    })
    .await;
    j.exec(&j.queue_mbean(&target, &target), "disable()", json!([])).await.unwrap();

    let (state, counters) = world.wait_run(run, &["failed", "succeeded", "partial"], RUN_LIMIT).await;
    let (_, _, error) = run_words(&world, run).await;
    let error = error.unwrap_or_default();
    assert_eq!(state, "failed", "a run whose target was disabled must fail; {counters:?}");
    assert!(error.contains("found just after a batch was committed") && error.contains("in doubt"), "{error}");
    assert_eq!(world.end_code(run).await.as_deref(), Some("target-changed"));
    assert_eq!(
        crate::support::in_doubt_ids(&world, run).await.len(),
        10,
        "the batch on the target and in staging stays in doubt"
    );
    let on_target = census(west, &target).await;
    let in_staging = census(bed.node("east-1"), &staging_of(run)).await;
    assert_eq!(on_target.len(), 10, "the first batch is in the disabled queue: {on_target:?}");
    assert!(on_target.keys().all(|id| in_staging.contains_key(id)), "and in staging");
    assert_eq!(counters.delivered, 0, "{counters:?}");

    let returned = return_past_a_disabled_target(&world, run, (&source, &target), &ids, &on_target, 10).await;
    assert_eq!(returned.delivered, 10, "{returned:?}");

    clean_up(bed.node("east-1"), &[&source]).await;
    clean_up(west, &[&target]).await;
}

/// Messages scheduled for delivery an hour ahead, among normal ones, in a whole-queue move: the run ends Partial
/// with `not_taken_scheduled` = their number; they are still scheduled on the source (`ScheduledCount`: a browse
/// cannot see them), and the others are on the target once. This also shows the broker's counted-move bug
/// (docs/broker-notes.md: a counted `moveMessages` cancels every matching scheduled message) does not strand
/// them: the frozen filter never matches them.
#[tokio::test]
async fn scheduled_messages_are_not_taken_stay_on_the_source_and_are_counted() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let source = unique_name("sched_src");
    let target = unique_name("sched_dst");
    create_queue(east, &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let now = |prefix: &str| Produce { count: 30, prefix: prefix.into(), ..Produce::default() };
    fidelity::produce(east, &source, &now("sched-a-")).await;
    fidelity::produce_scheduled(east, &source, &Produce { count: 12, ..now("sched-later-") }, 3_600_000).await;
    fidelity::produce(east, &source, &now("sched-b-")).await;
    let normal: Vec<String> =
        ["sched-a-", "sched-b-"].iter().flat_map(|p| (0..30).map(move |i| format!("{p}{i}"))).collect();
    let j = Jolokia::new(east);
    let before = j.read(&j.queue_mbean(&source, &source), &["MessageCount", "ScheduledCount"]).await.unwrap();
    assert_eq!((before["MessageCount"].as_i64(), before["ScheduledCount"].as_i64()), (Some(72), Some(12)));

    // Batches of 7: every refill is a counted move (2 × 7 at a time) while the scheduled messages sit there.
    let mut world = World::new("sched", &[("batch_size", json!(7))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["partial", "succeeded"], RUN_LIMIT).await;
    let (_, _, words) = run_words(&world, stored.run_id).await;
    println!("scheduled: {state}: {words:?}; {counters:?}");
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!(counters.not_taken_scheduled, 12, "{counters:?}");
    assert_eq!(counters.not_taken(), 12, "{counters:?}");
    assert_eq!(counters.delivered, 60, "{counters:?}");
    assert_eq!(counters.selected, Some(72), "{counters:?}");
    assert!(words.unwrap_or_default().contains("12 scheduled"), "the run's words do not count them");

    let after = j.read(&j.queue_mbean(&source, &source), &["MessageCount", "ScheduledCount"]).await.unwrap();
    assert_eq!(after["ScheduledCount"].as_i64(), Some(12), "scheduled messages left the source's schedule: {after}");
    assert_eq!(after["MessageCount"].as_i64(), Some(12), "{after}");
    let scheduled = management(east)
        .list_scheduled_messages(&management(east).queue_mbean(
            &source,
            artemis_transfer::broker::jolokia::RoutingType::Anycast,
            &source,
        ))
        .await
        .unwrap();
    let mut later: Vec<String> = scheduled.iter().filter_map(|m| m["payload_id"].as_str().map(String::from)).collect();
    later.sort();
    let mut expected_later: Vec<String> = (0..12).map(|i| format!("sched-later-{i}")).collect();
    expected_later.sort();
    assert_eq!(later, expected_later, "the source's schedule does not hold exactly the scheduled messages");

    let on_target = census(bed.node("west-1"), &target).await;
    let visible_on_source = census(east, &source).await;
    assert_each_once_across(&normal, &[&on_target, &visible_on_source]);
    assert!(visible_on_source.is_empty(), "{visible_on_source:?}");
    // The selection is the 60 and the 12 scheduled ones, which a browse of the source cannot see.
    let selected: Vec<String> = normal.iter().cloned().chain(expected_later.iter().cloned()).collect();
    let unbrowsable = after["ScheduledCount"].as_i64().unwrap_or(0) as usize;
    assert_accounting(&counters, &Census::moved(&selected, &on_target, &visible_on_source).unbrowsable(unbrowsable));
    assert!(!exists(east, &staging_of(stored.run_id)).await, "staging is still on east-1");

    clean_up(east, &[&source]).await;
    clean_up(bed.node("west-1"), &[&target]).await;
}

/// A producer keeps sending to the source while the run moves the whole queue: the run still ends (the selection
/// was frozen at `t0`), everything on the target is stamped at or before `t0`, nothing stamped at or before `t0`
/// is left on the source, and every message produced is on exactly one of the two.
#[tokio::test]
async fn a_live_producer_cannot_keep_a_frozen_selection_from_ending() {
    let bed = TestBed::require().await;
    let (source, target, initial) = source_and_target("frozen", 300).await;
    let east = bed.node("east-1").clone();

    // The live producer: one Java producer after another, 100 messages each, until told to stop — faster than the
    // run's 50 messages/s, so a selection that was not frozen would never run out.
    let stop = Arc::new(AtomicBool::new(false));
    let produced_batches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let producer = {
        let (stop, done, source) = (stop.clone(), produced_batches.clone(), source.clone());
        tokio::spawn(async move {
            let mut ids = Vec::new();
            let mut k = 0;
            while !stop.load(Ordering::SeqCst) {
                let prefix = format!("live{k}-");
                fidelity::produce(
                    &east,
                    &source,
                    &Produce { count: 100, prefix: prefix.clone(), ..Produce::default() },
                )
                .await;
                ids.extend((0..100).map(|i| format!("{prefix}{i}")));
                done.fetch_add(1, Ordering::SeqCst);
                k += 1;
            }
            ids
        })
    };
    wait_for("the live producer's first messages", Duration::from_secs(60), || async {
        (produced_batches.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;

    let mut world = World::new("live", &[("batch_size", json!(20)), ("messages_per_second", json!(50))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    let t0 = stored.plan.t0_millis;
    world.execute(&stored).await;
    let started = Instant::now();
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    let took = started.elapsed();
    let during = produced_batches.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    let live = producer.await.unwrap();
    println!(
        "live producer: {state} in {took:?}, {} live messages in {during} rounds by the end; {counters:?}",
        live.len()
    );

    let on_target = fidelity::browse(bed.node("west-1"), &target).await;
    let on_source = fidelity::browse(bed.node("east-1"), &source).await;
    let stamped = |o: &fidelity::Observed| o.0["timestamp"].as_i64().expect("every message has a timestamp");
    let late_moved: Vec<_> = on_target.iter().filter(|o| stamped(o) > t0).map(|o| o.payload_id()).collect();
    assert!(late_moved.is_empty(), "moved messages stamped after t0 {t0}: {late_moved:?}");
    let early_left: Vec<_> = on_source.iter().filter(|o| stamped(o) <= t0).map(|o| o.payload_id()).collect();
    assert!(early_left.is_empty(), "left on the source though stamped at or before t0 {t0}: {early_left:?}");

    let live_moved = on_target.iter().filter(|o| o.payload_id().is_some_and(|id| id.starts_with("live"))).count();
    println!("live producer: t0 {t0}; {live_moved} live messages moved, {} left on the source", on_source.len());
    let all: Vec<String> = initial.iter().chain(live.iter()).cloned().collect();
    assert_each_once_across(&all, &[&fidelity::census(&on_target), &fidelity::census(&on_source)]);
    assert!(!on_source.is_empty(), "nothing was produced after t0: the test shows nothing");
    assert!(
        on_target.iter().any(|o| o.payload_id().is_some_and(|id| id.starts_with("live"))),
        "none of the live producer's messages from before t0 was moved"
    );
    assert_eq!(counters.delivered, on_target.len() as i64, "{counters:?}");
    // The frozen selection: every message stamped at or before t0, wherever it is now.
    let selected: Vec<String> = on_target
        .iter()
        .chain(on_source.iter())
        .filter(|o| stamped(o) <= t0)
        .map(|o| o.payload_id().expect("a payload id").to_string())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_accounting(
        &counters,
        &Census::moved(&selected, &fidelity::census(&on_target), &fidelity::census(&on_source)),
    );
    assert!(!exists(bed.node("east-1"), &staging_of(stored.run_id)).await, "staging is still on east-1");

    clean_up(bed.node("east-1"), &[&source]).await;
    clean_up(bed.node("west-1"), &[&target]).await;
}
