//! Proven ends (issue 13): a run says Succeeded only when the brokers agree. Each test is judged by a census of
//! payload ids with the Java client, and the run's own numbers must equal that census.
//!
//! - A counted broker move takes every matching message out of its scheduler and moves only up to its count: a
//!   move of a queue holding messages in redelivery delay must strand none (across nodes and on one node).
//! - A browser passes over messages a consumer gives back behind it: a copy must notice (the proof of its end)
//!   and browse again.
//! - A copy to a queue that does not exist creates it, as its preview promised.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};

use crate::support::{census, create_queue, queue_ref, wait_for, World};
use artemis_transfer::transfer::Selection;

const RUN_LIMIT: Duration = Duration::from_secs(240);

/// A Core connection to `node` as the test bed's user.
async fn connect(node: &Node) -> artemis_core::Connection {
    let options = artemis_core::ConnectOptions::from_url(&node.core_url())
        .unwrap()
        .credentials(node.user.clone(), node.password.clone())
        .connection_ttl(Duration::from_secs(10));
    artemis_core::Connection::connect(&options).await.unwrap()
}

/// `ScheduledCount` of `queue` on `node`.
async fn scheduled_count(node: &Node, queue: &str) -> i64 {
    let j = Jolokia::new(node);
    let v = j.read(&j.queue_mbean(queue, queue), &["ScheduledCount"]).await.unwrap();
    v["ScheduledCount"].as_i64().unwrap()
}

/// `count` text messages on a new queue of `node`, `delayed` of them received in a transaction and rolled back
/// under a redelivery delay of ten minutes, so the broker holds them in its scheduler.
async fn queue_with_delayed_messages(node: &Node, label: &str, count: u32, delayed: usize) -> (String, Vec<String>) {
    let source = unique_name(&format!("{label}_src"));
    Jolokia::new(node)
        .add_address_settings(&source, r#"{"redeliveryDelay": 600000, "maxDeliveryAttempts": -1}"#)
        .await
        .unwrap();
    create_queue(node, &source).await;
    let prefix = format!("{label}-");
    let produce = Produce { count, prefix: prefix.clone(), kinds: "text".into(), ..Produce::default() };
    fidelity::produce(node, &source, &produce).await;

    let conn = connect(node).await;
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await.unwrap();
    let options = artemis_core::ConsumerOptions::default().window(artemis_core::Window::Bytes(1));
    let mut consumer = session.create_consumer(&source, options).await.unwrap();
    session.start().await.unwrap();
    for _ in 0..delayed {
        let d = consumer.recv(Duration::from_secs(10)).await.unwrap().expect("a message to roll back");
        consumer.ack(&d).await.unwrap();
    }
    session.rollback().await.unwrap();
    let _ = consumer.close().await;
    let _ = session.close().await;
    let _ = conn.close().await;
    let waiting = scheduled_count(node, &source).await;
    assert!(waiting >= delayed as i64, "only {waiting} of {delayed} messages wait out their redelivery delay");
    (source, (0..count).map(|i| format!("{prefix}{i}")).collect())
}

/// The run's proof of its end (`end_proof` event): proven by the broker's counts, not merely ended.
async fn assert_proven(world: &World, run: uuid::Uuid) {
    let proofs: Vec<serde_json::Value> =
        sqlx::query_scalar("SELECT detail FROM run_event WHERE run_id = $1 AND kind = 'end_proof' ORDER BY id")
            .bind(run)
            .fetch_all(&world.pool)
            .await
            .unwrap();
    assert_eq!(proofs.len(), 1, "{proofs:?}");
    assert_eq!(proofs[0]["proven"], json!(true), "{proofs:?}");
}

async fn clean_up(node: &Node, queue: &str, settings: bool) {
    let j = Jolokia::new(node);
    let _ = j.destroy_queue(queue).await;
    if settings {
        let _ = j.remove_address_settings(queue).await;
    }
}

/// Each of `expected` exactly once in `seen`, saying which are missing or doubled.
fn assert_each_once(expected: &[String], seen: &BTreeMap<String, usize>, what: &str) {
    let missing: Vec<&String> = expected.iter().filter(|id| !seen.contains_key(*id)).collect();
    let doubled: Vec<(&String, &usize)> = seen.iter().filter(|(_, n)| **n != 1).collect();
    let extra = seen.keys().filter(|id| !expected.contains(id)).count();
    assert!(
        missing.is_empty() && doubled.is_empty() && extra == 0,
        "{what}: {} of {} missing (first {:?}), doubled {doubled:?}, {extra} not selected",
        missing.len(),
        expected.len(),
        &missing[..5.min(missing.len())]
    );
}

/// Every payload id once on the target and none left on the source.
fn assert_all_moved_once(expected: &[String], on_target: &BTreeMap<String, usize>, left: i64) {
    assert_each_once(expected, on_target, "the target");
    assert_eq!(left, 0, "messages are left on the source");
}

#[tokio::test]
async fn a_move_strands_no_message_waiting_out_a_redelivery_delay() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, ids) = queue_with_delayed_messages(east, "ends_delay", 500, 300).await;
    let target = unique_name("ends_delay_dst");
    create_queue(bed.node("west-1"), &target).await;

    let mut world = World::new("ends_delay", &[("batch_size", json!(20))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    assert_eq!(stored.preview.selection_size, Some(500));
    assert!(
        stored.preview.notes.iter().any(|n| n.contains("wait for a delivery time")),
        "the preview does not say the source holds delayed messages: {:?}",
        stored.preview.notes
    );
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial"], RUN_LIMIT).await;

    let on_target = census(bed.node("west-1"), &target).await;
    let left = Jolokia::new(east).message_count(&source).await.unwrap();
    assert_all_moved_once(&ids, &on_target, left);
    // The run's own numbers are the census.
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    assert_eq!(counters.selected, Some(500), "{counters:?}");
    assert_eq!(counters.delivered, on_target.len() as i64, "{counters:?}");
    assert_eq!(counters.not_taken(), left, "{counters:?}");
    clean_up(east, &source, true).await;
    clean_up(bed.node("west-1"), &target, false).await;
}

#[tokio::test]
async fn a_move_on_one_node_strands_no_message_waiting_out_a_redelivery_delay() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, ids) = queue_with_delayed_messages(east, "ends_delay_local", 200, 120).await;
    let target = unique_name("ends_delay_local_dst");
    create_queue(east, &target).await;

    let mut world = World::new("ends_delay_local", &[("batch_size", json!(20))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("east", "east-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial"], RUN_LIMIT).await;

    let on_target = census(east, &target).await;
    let left = Jolokia::new(east).message_count(&source).await.unwrap();
    assert_all_moved_once(&ids, &on_target, left);
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    assert_eq!(counters.selected, Some(200), "{counters:?}");
    assert_eq!(counters.delivered, on_target.len() as i64, "{counters:?}");
    clean_up(east, &source, true).await;
    clean_up(east, &target, false).await;
}

#[tokio::test]
async fn a_copy_copies_what_a_consumer_gives_back_behind_its_browser() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let source = unique_name("ends_released_src");
    let target = unique_name("ends_released_dst");
    create_queue(east, &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let produce = Produce { count: 300, prefix: "ends_released-".into(), kinds: "text".into(), ..Produce::default() };
    fidelity::produce(east, &source, &produce).await;
    let ids: Vec<String> = (0..300).map(|i| format!("ends_released-{i}")).collect();

    // A consumer holds the first 50 unacknowledged while the copy starts, and gives them back 8 s later.
    let conn = connect(east).await;
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await.unwrap();
    let options = artemis_core::ConsumerOptions::default().window(artemis_core::Window::Bytes(1));
    let mut consumer = session.create_consumer(&source, options).await.unwrap();
    session.start().await.unwrap();
    for _ in 0..50 {
        consumer.recv(Duration::from_secs(10)).await.unwrap().expect("a message to hold");
    }

    let mut world =
        World::new("ends_released", &[("batch_size", json!(10)), ("messages_per_second", json!(20.0))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    assert_eq!(stored.preview.selection_size, Some(300));
    world.execute(&stored).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    let _ = consumer.close().await;
    let _ = session.close().await;
    let _ = conn.close().await;
    wait_for("the consumer's messages back on the source", Duration::from_secs(30), || async {
        let j = Jolokia::new(east);
        let v = j.read(&j.queue_mbean(&source, &source), &["DeliveringCount"]).await.unwrap();
        (v["DeliveringCount"].as_i64() == Some(0)).then_some(())
    })
    .await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial"], RUN_LIMIT).await;

    let on_target = census(bed.node("west-1"), &target).await;
    assert_each_once(&ids, &on_target, &format!("the target after a run that ended {state} with {counters:?}"));
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    assert_eq!(counters.selected, Some(300), "{counters:?}");
    assert_eq!(counters.delivered, 300, "{counters:?}");
    assert_eq!(Jolokia::new(east).message_count(&source).await.unwrap(), 300, "the copy changed the source");
    clean_up(east, &source, false).await;
    clean_up(bed.node("west-1"), &target, false).await;
}

#[tokio::test]
async fn a_copy_creates_the_target_queue_its_preview_promised() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let source = unique_name("ends_create_src");
    let target = unique_name("ends_create_dst");
    create_queue(east, &source).await;
    let produce = Produce { count: 40, prefix: "ends_create-".into(), kinds: "text".into(), ..Produce::default() };
    fidelity::produce(east, &source, &produce).await;

    let mut world = World::new("ends_create", &[("batch_size", json!(16))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    assert!(stored.preview.findings.iter().any(|f| f.code == "target-queue-created"), "{:#?}", stored.preview.findings);
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial"], RUN_LIMIT).await;
    let on_target = census(bed.node("west-1"), &target).await;
    let want: BTreeMap<String, usize> = (0..40).map(|i| (format!("ends_create-{i}"), 1)).collect();
    assert_eq!(on_target, want, "{counters:?}");
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    assert_eq!(counters.delivered, 40, "{counters:?}");
    clean_up(east, &source, false).await;
    clean_up(bed.node("west-1"), &target, false).await;
}

/// Sends `count` durable text messages over Core whose float and double properties are NaN and infinite (legal
/// in JMS; the broker's JSON rendering of a message refuses them), with payload ids `<prefix><n>`.
async fn send_odd_floats(node: &Node, queue: &str, prefix: &str, count: u32) {
    use artemis_core::message::{CoreMessage, MessageHeaders, PropertyValue};
    let conn = connect(node).await;
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await.unwrap();
    let producer = session.producer(None);
    for i in 0..count {
        let mut headers = MessageHeaders {
            address: Some(format!("{queue}::{queue}").as_str().into()),
            durable: true,
            timestamp: chrono::Utc::now().timestamp_millis(),
            user_id: Some(artemis_core::message::new_user_id()),
            ..MessageHeaders::default()
        };
        headers.properties.insert("_AMQ_ROUTING_TYPE", PropertyValue::Byte(1));
        headers.properties.insert("payload_id", PropertyValue::String(format!("{prefix}{i}").as_str().into()));
        headers.properties.insert("p_nan", PropertyValue::Double(f64::NAN));
        headers.properties.insert("p_inf", PropertyValue::Float(f32::INFINITY));
        headers.properties.insert("p_neg_inf", PropertyValue::Double(f64::NEG_INFINITY));
        producer.send(&CoreMessage { headers, body: b"odd floats".to_vec().into() }).await.unwrap();
    }
    session.commit().await.unwrap();
    let _ = conn.close().await;
}

/// A worker crashes with a batch in doubt while staging holds messages whose properties are NaN or infinite: the
/// next worker's reconcile reads staging (a Core browse; the broker's JSON listing fails on such a message) and
/// the run ends exact.
#[tokio::test]
async fn a_move_recovers_from_a_crash_with_nan_properties_in_staging() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let source = unique_name("ends_nan_src");
    let target = unique_name("ends_nan_dst");
    create_queue(east, &source).await;
    create_queue(bed.node("west-1"), &target).await;
    send_odd_floats(east, &source, "ends_nan-", 100).await;
    let ids: Vec<String> = (0..100).map(|i| format!("ends_nan-{i}")).collect();

    let mut world = World::new("ends_nan", &[("batch_size", json!(20))]).await;
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "target-commit:2")]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort with a batch in doubt, but exited {status}");
    world.spawn_worker("rescuer", &[]).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial"], RUN_LIMIT).await;

    let on_target = census(bed.node("west-1"), &target).await;
    let left = Jolokia::new(east).message_count(&source).await.unwrap();
    assert_all_moved_once(&ids, &on_target, left);
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    assert_eq!(counters.delivered, 100, "{counters:?}");
    assert_eq!(counters.selected, Some(100), "{counters:?}");
    clean_up(east, &source, false).await;
    clean_up(bed.node("west-1"), &target, false).await;
}
