//! The staging queue (SPEC §4.1, §4.3's cleanup, §4.5's move back) against real brokers: the shared test bed's
//! east-1 for what any broker does, and two private brokers (ScratchBroker) for a `#` poisoned with every
//! default that could lose or park staged messages, and for a broker user without the staging rights.
//!
//! Each broker fact these tests rely on is recorded in `docs/broker-notes.md` ("Staging").

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use artemis_core::message::{PropertyValue, SimpleString};
use artemis_core::{ConnectOptions, Connection, ConsumerOptions, CoreMessage, SessionOptions};
use artemis_transfer::broker::jolokia::{BrokerManagement, ObjectName, QueueConfig, Request, RoutingType};
use artemis_transfer::transfer::staging::{self, NotTaken, Selected, StagingError, StagingSpec, SECURITY_SNIPPET};
use artemis_transfer::transfer::{Mode, Plan, QueueRef, Selection};
use serde_json::{json, Value};
use testbed::fidelity::{self, Produce};
use testbed::jolokia::{Jolokia, Permissions};
use testbed::scratch::{ScratchBroker, ScratchOptions};
use testbed::{unique_name, Node, TestBed};

use crate::support::scratch_node;
use uuid::Uuid;

// ------------------------------------------------------------------------------------------------ helpers

fn management_for(node: &Node) -> BrokerManagement {
    crate::support::management(node)
}

async fn core(node: &Node) -> Connection {
    let opts = ConnectOptions::new("127.0.0.1", node.core_port)
        .credentials(node.user.clone(), node.password.clone())
        .call_timeout(Duration::from_secs(20));
    Connection::connect(&opts).await.expect("a Core connection")
}

/// A durable text message to `queue` with `n` (an int property) and `payload_id` = `p<n>`.
fn message(queue: &str, n: i32) -> CoreMessage {
    let mut m = artemis_core::message::durable_message(queue);
    m.set_text(Some(&format!("body {n}")));
    m.headers.properties.insert("n", PropertyValue::Int(n));
    m.headers.properties.insert("payload_id", PropertyValue::String(SimpleString::new(&format!("p{n}"))));
    m
}

async fn send(conn: &Connection, messages: Vec<CoreMessage>) {
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let producer = session.producer(None);
    for m in &messages {
        producer.send(m).await.expect("send");
    }
    session.close().await.expect("close the producing session");
}

/// The broker's clock (what `t0` is read from).
async fn broker_now(mgmt: &BrokerManagement) -> i64 {
    mgmt.broker_state().await.unwrap().current_time_millis.expect("CurrentTimeMillis (2.40)")
}

/// The effective filter of a whole-queue (or filtered) selection frozen at `t0`, as the plan builds it.
fn frozen(t0_millis: i64, user_filter: Option<&str>) -> String {
    let q = |queue: &str| QueueRef { cluster: "c".into(), node: "n".into(), queue: queue.into(), address: None };
    let selection = user_filter.map_or(Selection::All, |f| Selection::Filter(f.into()));
    Plan { mode: Mode::Move, source: q("s"), target: q("t"), selection, t0_millis, destination: Default::default() }
        .effective_filter()
        .expect("the filter reads")
        .expect("a frozen selection has a filter")
}

/// A plain source queue (every field explicit) and its MBean.
async fn source_queue(mgmt: &BrokerManagement, label: &str) -> (String, ObjectName) {
    let name = unique_name(label);
    mgmt.create_queue(&QueueConfig::plain_anycast(&name)).await.expect("create the source queue");
    let mbean = mgmt.queue_mbean(&name, RoutingType::Anycast, &name);
    (name, mbean)
}

async fn read(mgmt: &BrokerManagement, mbean: &ObjectName, attributes: &[&str]) -> Value {
    mgmt.client().request(&Request::read(mbean.clone(), attributes)).await.expect("read attributes")
}

/// `(MessageCount, DeliveringCount, ScheduledCount)`.
async fn counts(mgmt: &BrokerManagement, mbean: &ObjectName) -> (i64, i64, i64) {
    let v = read(mgmt, mbean, &["MessageCount", "DeliveringCount", "ScheduledCount"]).await;
    (v["MessageCount"].as_i64().unwrap(), v["DeliveringCount"].as_i64().unwrap(), v["ScheduledCount"].as_i64().unwrap())
}

/// The `n` property of each listed message, in the broker's order.
fn ns(listed: &[Value]) -> Vec<i64> {
    listed.iter().map(|m| m["n"].as_i64().expect("n")).collect()
}

/// The staging spec of a fresh run.
fn fresh_spec(batch_size: u32) -> StagingSpec {
    StagingSpec::for_run(Uuid::new_v4(), batch_size)
}

// ------------------------------------------------------------------------------ shared bed (east-1)

/// prepare → verify; prepare again; the Core view agrees; a non-empty staging is kept unless forced; removal
/// takes queue, address and address settings, and is idempotent.
#[tokio::test]
async fn prepare_verify_and_remove_round_trip() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let mgmt = management_for(node);
    let spec = fresh_spec(100);

    staging::prepare(&mgmt, &spec).await.expect("prepare");
    staging::verify(&mgmt, &spec).await.expect("verify after prepare");
    staging::prepare(&mgmt, &spec).await.expect("prepare is idempotent");

    // The exact-match settings shadow east's `#` (which has redistribution-delay 0, a DLQ and an ExpiryQueue).
    let settings = mgmt.address_settings(&spec.name).await.unwrap();
    assert_eq!(settings.redistribution_delay, -1);
    assert_eq!(settings.max_delivery_attempts, -1);
    assert_eq!(settings.management_browse_page_size, 400, "4 × batch");
    assert_eq!(settings.raw["deadLetterAddress"], "", "an empty string shadows the inherited DLQ");
    assert_eq!(settings.raw["expiryAddress"], "");

    // createQueue(json, ignoreIfExists=true) on an existing queue answers with the request, not the queue: a ring
    // of 5 is "returned" while the queue stays what it was, so only a read-back can verify.
    let mut other = spec.queue_config();
    other.ring_size = 5;
    let echo = mgmt.create_queue_if_absent(&other).await.unwrap();
    assert_eq!(echo["ring-size"], 5, "{echo}");
    staging::verify(&mgmt, &spec).await.expect("the existing queue is unchanged");

    // The Core queue query shows what management cannot (non-destructive).
    let conn = core(node).await;
    let info = conn.queue_query(&spec.name).await.unwrap().expect("staging exists over Core");
    assert_eq!(info.non_destructive, Some(false));
    staging::check_core_view(&info, &spec).expect("the Core view agrees");

    // One message in staging: removal without force refuses and keeps it.
    let (source, source_mbean) = source_queue(&mgmt, "staging_round_trip_src").await;
    send(&conn, vec![message(&source, 1)]).await;
    let t0 = broker_now(&mgmt).await;
    let moved =
        staging::refill_by_filter(&mgmt, &source_mbean, &spec.name, &frozen(t0, None), 10, Some(t0)).await.unwrap();
    assert_eq!(moved, 1);
    let depth = staging::depth(&mgmt, &spec.name).await.unwrap();
    assert_eq!((depth.messages, depth.in_delivery, depth.scheduled), (1, 0, 0));
    match staging::remove(&mgmt, &spec, false).await {
        Err(StagingError::NotEmpty { messages: 1, in_delivery: 0, .. }) => {}
        other => panic!("a non-empty staging must be kept: {other:?}"),
    }
    staging::verify(&mgmt, &spec).await.expect("still there");

    staging::remove(&mgmt, &spec, true).await.expect("forced removal");
    staging::remove(&mgmt, &spec, true).await.expect("removal is idempotent");
    staging::remove(&mgmt, &spec, false).await.expect("removal of nothing needs no force");
    assert!(matches!(staging::verify(&mgmt, &spec).await, Err(StagingError::Missing { .. })));
    assert!(matches!(staging::depth(&mgmt, &spec.name).await, Err(StagingError::Missing { .. })));
    let address =
        mgmt.client().request(&Request::read(ObjectName::address(node.name.as_str(), &spec.name), &["Address"])).await;
    assert!(address.is_err_and(|e| e.is_not_found()), "the staging address is gone");
    let after = mgmt.address_settings(&spec.name).await.unwrap();
    assert_eq!(after.redistribution_delay, 0, "the exact-match entry is gone: east's `#` applies again");
    assert_eq!(after.management_browse_page_size, 200);

    conn.close().await.unwrap();
    mgmt.destroy_queue(&source).await.unwrap();
}

/// What `moveMessages` does, seen through `refill_by_filter`, `not_taken` and `move_back`: it skips messages in
/// delivery, honours its count exactly, keeps the order within a priority, gives each copy a new id with
/// `_AMQ_ORIG_*` and no expiration; the frozen filter leaves out later and scheduled messages; the counts by cause.
#[tokio::test]
async fn filter_refills_follow_the_frozen_selection() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let mgmt = management_for(node);
    let spec = fresh_spec(10);
    staging::prepare(&mgmt, &spec).await.unwrap();
    let staging_mbean = staging::staging_mbean(&mgmt, &spec.name);
    let (source, source_mbean) = source_queue(&mgmt, "staging_filter_src").await;
    let conn = core(node).await;

    // n = 0..=8 plain (odd ones priority 6, even ones 4; n < 3 expire in an hour), n = 9 to be held by a
    // consumer, n = 10, 11 scheduled an hour ahead.
    let hour_ahead = broker_now(&mgmt).await + 3_600_000;
    let mut batch = Vec::new();
    for n in 0..=9 {
        let mut m = message(&source, n);
        m.headers.priority = if n % 2 == 1 { 6 } else { 4 };
        if n < 3 {
            m.headers.expiration = hour_ahead;
        }
        batch.push(m);
    }
    for n in 10..=11 {
        let mut m = message(&source, n);
        m.headers.properties.insert("_AMQ_SCHED_DELIVERY", PropertyValue::Long(hour_ahead));
        batch.push(m);
    }
    send(&conn, batch).await;
    let holder = conn.create_session(SessionOptions::transacted()).await.unwrap();
    let mut held = holder.create_consumer(&source, ConsumerOptions::default().filter("n = 9")).await.unwrap();
    holder.start().await.unwrap();
    let delivery = held.recv(Duration::from_secs(10)).await.unwrap().expect("n = 9 delivered");
    let held_id = delivery.message_id();
    let source_ids: BTreeMap<i64, i64> = mgmt
        .list_messages(&source_mbean, None)
        .await
        .unwrap()
        .iter()
        .map(|m| (m["n"].as_i64().unwrap(), m["messageID"].as_i64().unwrap()))
        .collect();

    // What the broker counts: MessageCount includes delivering and scheduled messages; a filtered count sees
    // neither (it browses the queue); countDeliveringMessages sees exactly the delivering one.
    assert_eq!(counts(&mgmt, &source_mbean).await, (12, 1, 2));
    assert_eq!(mgmt.count_messages(&source_mbean, None).await.unwrap(), 12, "no filter: MessageCount");
    assert_eq!(mgmt.count_messages(&source_mbean, Some("n >= 0")).await.unwrap(), 9, "filtered: visible only");
    assert_eq!(mgmt.count_delivering_messages(&source_mbean, Some("n >= 0")).await.unwrap(), 1);
    assert_eq!(mgmt.count_delivering_messages(&source_mbean, Some("n = 3")).await.unwrap(), 0);

    // Frozen at t0; three more stamped after it are not part of the selection.
    let t0 = broker_now(&mgmt).await;
    let late: Vec<CoreMessage> = (20..23)
        .map(|n| {
            let mut m = message(&source, n);
            m.headers.timestamp = t0 + 60_000;
            m
        })
        .collect();
    send(&conn, late).await;
    let filter = frozen(t0, None);

    assert_eq!(
        staging::refill_by_filter(&mgmt, &source_mbean, &spec.name, &filter, 3, Some(t0)).await.unwrap(),
        3,
        "count"
    );
    assert_eq!(staging::refill_by_filter(&mgmt, &source_mbean, &spec.name, &filter, 100, Some(t0)).await.unwrap(), 6);
    assert_eq!(staging::refill_by_filter(&mgmt, &source_mbean, &spec.name, &filter, 100, Some(t0)).await.unwrap(), 0);
    for invalid in [("", 5), (filter.as_str(), 0)] {
        let e =
            staging::refill_by_filter(&mgmt, &source_mbean, &spec.name, invalid.0, invalid.1, None).await.unwrap_err();
        assert!(matches!(e, StagingError::Invalid(_)) && e.is_refusal(), "{e}");
    }

    // Staging: priority 6 first, then 4, each in send order; new ids, the origin recorded, expiration cleared.
    let staged = mgmt.list_messages(&staging_mbean, None).await.unwrap();
    assert_eq!(ns(&staged), vec![1, 3, 5, 7, 0, 2, 4, 6, 8]);
    for m in &staged {
        let n = m["n"].as_i64().unwrap();
        let id = m["messageID"].as_i64().unwrap();
        assert_ne!(id, source_ids[&n], "a moved copy has a new message id");
        assert_eq!(m["_AMQ_ORIG_MESSAGE_ID"].as_i64(), Some(source_ids[&n]), "{m}");
        assert_eq!(m["_AMQ_ORIG_QUEUE"], json!(source), "{m}");
        assert_eq!(m["_AMQ_ORIG_ADDRESS"], json!(source), "{m}");
        assert_eq!(m["expiration"], 0, "the move clears expiration (n = {n} had one: {})", n < 3);
    }

    // Not taken, by cause: one in delivery, two scheduled for later; nothing else still matches.
    let whole = Selected::Frozen { effective_filter: &filter, user_filter: None, t0_millis: t0 };
    let left = staging::not_taken(&mgmt, &source_mbean, whole).await.unwrap();
    assert_eq!(left, NotTaken { in_delivery: 1, scheduled: 2, scheduled_exact: true, other: 0 });
    let user = frozen(t0, Some("n >= 0"));
    let filtered = Selected::Frozen { effective_filter: &user, user_filter: Some("n >= 0"), t0_millis: t0 };
    let left = staging::not_taken(&mgmt, &source_mbean, filtered).await.unwrap();
    assert_eq!(left, NotTaken { in_delivery: 1, scheduled: 2, scheduled_exact: false, other: 0 });

    // The consumer gives n = 9 back (rollback): it matches again and another refill takes it.
    holder.rollback().await.unwrap();
    held.close().await.unwrap();
    holder.close().await.unwrap();
    let left = staging::not_taken(&mgmt, &source_mbean, whole).await.unwrap();
    assert_eq!((left.in_delivery, left.other), (0, 1), "{left:?}");
    assert_eq!(staging::refill_by_filter(&mgmt, &source_mbean, &spec.name, &filter, 100, Some(t0)).await.unwrap(), 1);
    let staged = mgmt.list_messages(&staging_mbean, None).await.unwrap();
    let origins: HashSet<i64> = staged.iter().filter_map(|m| m["_AMQ_ORIG_MESSAGE_ID"].as_i64()).collect();
    assert!(origins.contains(&held_id), "n = 9 was moved by the later refill");

    // Return to source: everything in staging goes back, with new ids, at the tail.
    assert_eq!(staging::move_back(&mgmt, &spec.name, &source).await.unwrap(), 10);
    assert_eq!(staging::depth(&mgmt, &spec.name).await.unwrap().messages, 0);
    assert_eq!(counts(&mgmt, &source_mbean).await, (15, 0, 2), "10 back + 3 late + 2 scheduled");
    let back = mgmt.list_messages(&source_mbean, None).await.unwrap();
    let returned: Vec<&Value> = back.iter().filter(|m| m["n"].as_i64().is_some_and(|n| n < 10)).collect();
    assert_eq!(returned.len(), 10);
    for m in returned {
        assert_eq!(m["_AMQ_ORIG_QUEUE"], json!(spec.name), "the last move was from staging: {m}");
        assert!(!source_ids.values().any(|id| m["messageID"].as_i64() == Some(*id)), "new ids: {m}");
    }

    conn.close().await.unwrap();
    staging::remove(&mgmt, &spec, false).await.expect("empty staging needs no force");
    mgmt.destroy_queue(&source).await.unwrap();
}

/// `moveMessage(id)` for a visible, an in-delivery, a scheduled, a paged-out and an absent message, through
/// `refill_by_ids` (one batched request), and the not-taken ids by cause.
#[tokio::test]
async fn id_refills_report_what_the_broker_could_not_move() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let mgmt = management_for(node);
    let spec = fresh_spec(10);
    staging::prepare(&mgmt, &spec).await.unwrap();
    let (source, source_mbean) = source_queue(&mgmt, "staging_ids_src").await;
    // A small address limit makes the source page after a few messages, and small read limits keep the queue from
    // reading the pages back into memory (by default it reads up to 20 MiB of them, and a message read back is
    // moved by id like any other).
    let settings = json!({"maxSizeBytes": 20_000, "pageSizeBytes": 10_000, "addressFullMessagePolicy": "PAGE",
        "maxReadPageMessages": 10, "maxReadPageBytes": 20_000});
    mgmt.add_address_settings(&source, &settings).await.unwrap();
    let conn = core(node).await;
    let hour_ahead = broker_now(&mgmt).await + 3_600_000;
    let mut batch = vec![message(&source, 0), message(&source, 1)];
    let mut scheduled = message(&source, 2);
    scheduled.headers.properties.insert("_AMQ_SCHED_DELIVERY", PropertyValue::Long(hour_ahead));
    batch.push(scheduled);
    for n in 3..60 {
        let mut m = message(&source, n);
        m.set_text(Some(&"x".repeat(1_000)));
        batch.push(m);
    }
    send(&conn, batch).await;
    let paging = read(&mgmt, &ObjectName::address(node.name.as_str(), &source), &["Paging", "NumberOfPages"]).await;
    assert_eq!(paging["Paging"], true, "the source pages: {paging}");

    let holder = conn.create_session(SessionOptions::transacted()).await.unwrap();
    let mut held = holder.create_consumer(&source, ConsumerOptions::default().filter("n = 1")).await.unwrap();
    holder.start().await.unwrap();
    let held_id = held.recv(Duration::from_secs(10)).await.unwrap().expect("n = 1 delivered").message_id();
    let listed = mgmt.list_messages(&source_mbean, None).await.unwrap();
    let id_of = |n: i64| listed.iter().find(|m| m["n"].as_i64() == Some(n)).and_then(|m| m["messageID"].as_i64());
    let visible_id = id_of(0).expect("n = 0 listed");
    let paged_id = id_of(59).expect("listing reads pages too: n = 59 listed");
    assert!(id_of(2).is_none() && id_of(1).is_none(), "a listing shows neither scheduled nor delivering messages");
    let scheduled_list = mgmt.list_scheduled_messages(&source_mbean).await.unwrap();
    assert_eq!(scheduled_list.len(), 1);
    let scheduled_id = scheduled_list[0]["messageID"].as_i64().expect("messageID");
    assert_eq!(scheduled_list[0]["_AMQ_SCHED_DELIVERY"].as_i64(), Some(hour_ahead));
    assert!(scheduled_list[0]["timestamp"].as_i64().is_some(), "{}", scheduled_list[0]);
    let delivering = mgmt.list_delivering_messages(&source_mbean).await.unwrap();
    assert_eq!(delivering.iter().filter_map(|m| m["messageID"].as_i64()).collect::<Vec<_>>(), vec![held_id]);
    let absent_id = i64::MAX - 7;
    assert_eq!(counts(&mgmt, &source_mbean).await, (60, 1, 1), "MessageCount includes paged messages too");

    let asked = [visible_id, held_id, scheduled_id, paged_id, absent_id];
    let moved = staging::refill_by_ids(&mgmt, &source_mbean, &spec.name, &asked).await.unwrap();
    assert_eq!(moved.moved, vec![visible_id]);
    assert_eq!(moved.not_moved, vec![held_id, scheduled_id, paged_id, absent_id]);
    let left = staging::not_taken(&mgmt, &source_mbean, Selected::Ids(&moved.not_moved)).await.unwrap();
    assert_eq!(left, NotTaken { in_delivery: 1, scheduled: 1, scheduled_exact: true, other: 2 });
    assert_eq!(staging::depth(&mgmt, &spec.name).await.unwrap().messages, 1);

    // Moving an id twice: the second time it is gone from the source.
    let again = staging::refill_by_ids(&mgmt, &source_mbean, &spec.name, &[visible_id]).await.unwrap();
    assert_eq!((again.moved.len(), again.not_moved), (0, vec![visible_id]));

    holder.rollback().await.unwrap();
    holder.close().await.unwrap();
    conn.close().await.unwrap();
    staging::remove(&mgmt, &spec, true).await.unwrap();
    mgmt.destroy_queue(&source).await.unwrap();
    mgmt.remove_address_settings(&source).await.unwrap();
}

/// `list` finds staging queues with their depth, and neither the dead message queues nor look-alike names.
#[tokio::test]
async fn list_finds_staging_queues_only() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let mgmt = management_for(node);
    let spec = fresh_spec(10);
    staging::prepare(&mgmt, &spec).await.unwrap();
    let empty = fresh_spec(10);
    staging::prepare(&mgmt, &empty).await.unwrap();
    let dmq = format!("studio.dmq.{}", Uuid::new_v4());
    let look_alike = format!("studio.transfer.{}", unique_name("not_a_run"));
    for q in [&dmq, &look_alike] {
        mgmt.create_queue(&QueueConfig::plain_anycast(q)).await.unwrap();
    }
    let conn = core(node).await;
    send(&conn, vec![message(&spec.name, 1), message(&spec.name, 2), message(&dmq, 3), message(&look_alike, 4)]).await;

    let listed: BTreeMap<String, u64> = staging::list(&mgmt).await.unwrap().into_iter().collect();
    assert_eq!(listed.get(&spec.name), Some(&2), "{listed:?}");
    assert_eq!(listed.get(&empty.name), Some(&0), "{listed:?}");
    assert!(!listed.contains_key(&dmq) && !listed.contains_key(&look_alike), "{listed:?}");
    assert!(listed.keys().all(|q| staging::run_of_staging_queue(q).is_some()), "{listed:?}");

    conn.close().await.unwrap();
    staging::remove(&mgmt, &spec, true).await.unwrap();
    staging::remove(&mgmt, &empty, false).await.unwrap();
    for q in [&dmq, &look_alike] {
        mgmt.destroy_queue(q).await.unwrap();
    }
    let listed = staging::list(&mgmt).await.unwrap();
    assert!(!listed.iter().any(|(q, _)| q == &spec.name || q == &empty.name), "{listed:?}");
}

// -------------------------------------------------------------------------------- private brokers

/// The `#` address setting of a scratch broker with every default that would lose, park, scatter or alter
/// staged messages: purge on no consumers, last-value (and a key), a ring of 3, an expiry delay, DROP over
/// 20 kB, auto-delete, no consumers allowed, non-destructive, exclusive, dispatch held back, groups with a
/// first key, dead-lettering after one delivery, a minute's redelivery delay, redistribution, slow-consumer KILL,
/// a browse page of 5, ingress timestamps, multicast by default.
fn poisoned_hash() -> Vec<(String, String)> {
    let poisons = r##"<address-setting match="#">
            <default-purge-on-no-consumers>true</default-purge-on-no-consumers>
            <default-last-value-queue>true</default-last-value-queue>
            <default-last-value-key>lvk</default-last-value-key>
            <default-ring-size>3</default-ring-size>
            <expiry-delay>1000</expiry-delay>
            <default-max-consumers>0</default-max-consumers>
            <default-non-destructive>true</default-non-destructive>
            <default-exclusive-queue>true</default-exclusive-queue>
            <default-consumers-before-dispatch>5</default-consumers-before-dispatch>
            <default-delay-before-dispatch>600000</default-delay-before-dispatch>
            <default-group-first-key>first</default-group-first-key>
            <default-group-buckets>4</default-group-buckets>
            <default-group-rebalance>true</default-group-rebalance>
            <default-queue-routing-type>MULTICAST</default-queue-routing-type>
            <default-address-routing-type>MULTICAST</default-address-routing-type>
            <max-delivery-attempts>1</max-delivery-attempts>
            <redistribution-delay>0</redistribution-delay>
            <auto-delete-created-queues>true</auto-delete-created-queues>
            <auto-delete-queues-delay>0</auto-delete-queues-delay>
            <auto-delete-queues-message-count>-1</auto-delete-queues-message-count>
            <slow-consumer-threshold>1</slow-consumer-threshold>
            <slow-consumer-policy>KILL</slow-consumer-policy>
            <slow-consumer-check-period>1</slow-consumer-check-period>
            <management-browse-page-size>5</management-browse-page-size>
            <enable-ingress-timestamp>true</enable-ingress-timestamp>
            <retroactive-message-count>0</retroactive-message-count>"##;
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    vec![
        // The management block comes first and carries the same elements: mark its copies (whitespace before
        // `>` of an end tag is valid XML) so the next replacement of each finds the `#` block's.
        pair("<address-full-policy>PAGE</address-full-policy>", "<address-full-policy>PAGE</address-full-policy >"),
        pair("<address-full-policy>PAGE</address-full-policy>", "<address-full-policy>DROP</address-full-policy>"),
        pair("<max-size-bytes>-1</max-size-bytes>", "<max-size-bytes>-1</max-size-bytes >"),
        pair("<max-size-bytes>-1</max-size-bytes>", "<max-size-bytes>20000</max-size-bytes>"),
        pair("<redelivery-delay>0</redelivery-delay>", "<redelivery-delay>0</redelivery-delay >"),
        pair("<redelivery-delay>0</redelivery-delay>", "<redelivery-delay>60000</redelivery-delay>"),
        pair("<page-size-bytes>10M</page-size-bytes>", "<page-size-bytes>10000</page-size-bytes>"),
        pair("<auto-delete-queues>false</auto-delete-queues>", "<auto-delete-queues>true</auto-delete-queues>"),
        pair(
            "<auto-delete-addresses>false</auto-delete-addresses>",
            "<auto-delete-addresses>true</auto-delete-addresses>",
        ),
        pair(r##"<address-setting match="#">"##, poisons),
    ]
}

/// Staging poisoned by `#` defaults (issue 6): under a `#` carrying every poison at once, prepare still makes a
/// staging verify accepts (and the Core view agrees), a naively created queue shows the poisons (so the check can
/// fail), and a refill of 30 messages, a relay rollback and a consume lose none of them.
#[tokio::test]
async fn staging_is_explicit_under_a_poisoned_hash() {
    let broker = ScratchBroker::start_with(
        "staging_poisoned_hash",
        ScratchOptions { web: true, broker_xml: poisoned_hash(), ..ScratchOptions::default() },
    )
    .await;
    let node = scratch_node(&broker, "scratch");
    let mgmt = management_for(&node);
    let hash = mgmt.address_settings("anything").await.unwrap();
    assert_eq!(
        (hash.address_full_policy.as_str(), hash.max_size_bytes, hash.default_ring_size, hash.max_delivery_attempts),
        ("DROP", 20_000, 3, 1),
        "the poisoned `#` is in force: {}",
        hash.raw
    );

    // A queue made the naive way (name, address, routing type, durable, auto-delete) takes the poisons.
    let naive = fresh_spec(10);
    let naive_json = json!({"name": naive.name, "address": naive.name, "routing-type": "ANYCAST", "durable": true,
        "auto-delete": false, "auto-create-address": true})
    .to_string();
    let echo = mgmt
        .client()
        .request(&Request::exec(
            mgmt.broker_mbean(),
            "createQueue(java.lang.String,boolean)",
            vec![json!(naive_json), json!(true)],
        ))
        .await
        .unwrap();
    // On creation the answer shows the fields the address settings filled in (not the static defaults: no
    // `enabled`), so the poisons are visible in it.
    let echo: Value = serde_json::from_str(echo.as_str().expect("a JSON string")).unwrap();
    let poisoned = json!({"ring-size": 3, "last-value": true, "last-value-key": "lvk", "max-consumers": 0,
        "non-destructive": true, "purge-on-no-consumers": true, "exclusive": true, "group-buckets": 4,
        "group-first-key": "first", "group-rebalance": true, "consumers-before-dispatch": 5,
        "delay-before-dispatch": 600000, "routing-type": "ANYCAST", "auto-delete": false});
    for (key, want) in poisoned.as_object().unwrap() {
        assert_eq!(&echo[key], want, "{key} in {echo}");
    }
    assert!(echo.get("enabled").is_none(), "{echo}");
    match staging::verify(&mgmt, &naive).await {
        Err(StagingError::Mismatch { differences, .. }) => {
            let all = differences.join("\n");
            for poison in [
                "PurgeOnNoConsumers is true",
                "LastValue is true",
                "LastValueKey is lvk",
                "RingSize is 3",
                "MaxConsumers is 0",
                "Exclusive is true",
                "ConsumersBeforeDispatch is 5",
                "GroupBuckets is 4",
                "address setting maxDeliveryAttempts is 1",
                "address setting addressFullMessagePolicy is DROP",
                "address setting expiryDelay is 1000",
                "address setting redeliveryDelay is 60000",
                "address setting managementBrowsePageSize is 5",
            ] {
                assert!(all.contains(poison), "verify must name `{poison}`:\n{all}");
            }
        }
        other => panic!("a naive queue under a poisoned `#` must not verify: {other:?}"),
    }
    let conn = core(&node).await;
    let naive_info = conn.queue_query(&naive.name).await.unwrap().expect("naive queue");
    assert_eq!(naive_info.non_destructive, Some(true), "non-destructive is poisoned too (Core view only)");
    assert!(staging::check_core_view(&naive_info, &naive).is_err());
    staging::remove(&mgmt, &naive, true).await.unwrap();

    // Staging made by prepare is explicit.
    let spec = fresh_spec(10);
    staging::prepare(&mgmt, &spec).await.expect("prepare under a poisoned `#`");
    staging::verify(&mgmt, &spec).await.expect("verify");
    let info = conn.queue_query(&spec.name).await.unwrap().expect("staging");
    staging::check_core_view(&info, &spec).expect("the Core view of staging");

    // A source protected the same way (its own exact settings; every queue field explicit), 30 messages of 1 kB:
    // 30 kB, over the 20 kB the `#` would drop beyond.
    let (source, source_mbean) = source_queue(&mgmt, "staging_poison_src").await;
    let protect: serde_json::Map<String, Value> =
        spec.address_settings().into_iter().map(|(k, v, _)| (k.to_string(), v)).collect();
    mgmt.add_address_settings(&source, &Value::Object(protect)).await.unwrap();
    let produce =
        Produce { count: 30, prefix: "poison-".into(), kinds: "bytes".into(), body_size: 1_000, durable_only: true };
    fidelity::produce(&node, &source, &produce).await;
    assert_eq!(counts(&mgmt, &source_mbean).await, (30, 0, 0));
    let t0 = broker_now(&mgmt).await;
    let moved =
        staging::refill_by_filter(&mgmt, &source_mbean, &spec.name, &frozen(t0, None), 30, Some(t0)).await.unwrap();
    assert_eq!(moved, 30);

    // A relay that takes one message and rolls back: with `#`'s settings it would be dead-lettered (one attempt)
    // or parked for a minute; from staging it is back at once.
    let relay = conn.create_session(SessionOptions::transacted()).await.unwrap();
    let mut consumer = relay.create_consumer(&spec.name, ConsumerOptions::default()).await.unwrap();
    relay.start().await.unwrap();
    let first = consumer.recv(Duration::from_secs(10)).await.unwrap().expect("staging delivers (max-consumers -1)");
    consumer.ack(&first).await.unwrap();
    relay.rollback().await.unwrap();
    consumer.close().await.unwrap();
    relay.close().await.unwrap();
    // Past the `#` expiry delay and a slow-consumer check period.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let d = staging::depth(&mgmt, &spec.name).await.unwrap();
    assert_eq!((d.messages, d.in_delivery, d.scheduled), (30, 0, 0), "nothing expired, parked or purged");
    let listed = mgmt.list_messages(&staging::staging_mbean(&mgmt, &spec.name), None).await.unwrap();
    assert_eq!(listed.len(), 30, "the browse page covers staging (the `#` says 5)");

    let consumed = fidelity::consume(&node, &spec.name).await;
    let census = fidelity::census(&consumed);
    let expected: BTreeMap<String, usize> = (0..30).map(|i| (format!("poison-{i}"), 1)).collect();
    assert_eq!(census, expected, "every message once, none lost");
    let d = staging::depth(&mgmt, &spec.name).await.unwrap();
    assert_eq!(d.messages, 0, "consumed messages leave staging (not non-destructive)");

    conn.close().await.unwrap();
    staging::remove(&mgmt, &spec, false).await.unwrap();
}

/// A broker whose `studio.transfer.#` security setting grants nothing to the product's role: prepare refuses at
/// once with the snippet and creates nothing; management itself is not checked against security settings, but
/// the relay's Core consumer is. With the snippet applied, prepare and the consumer work. On the same broker: a
/// counted move takes every matching scheduled message out of the scheduler but moves only its count.
#[tokio::test]
async fn staging_without_rights_is_refused_with_the_snippet() {
    let deny = r#"<security-setting match="studio.transfer.#">
            <permission type="createAddress" roles="stager"/>
            <permission type="deleteAddress" roles="stager"/>
            <permission type="createDurableQueue" roles="stager"/>
            <permission type="deleteDurableQueue" roles="stager"/>
            <permission type="send" roles="stager"/>
            <permission type="consume" roles="stager"/>
            <permission type="browse" roles="stager"/>
         </security-setting>
      </security-settings>"#;
    let broker = ScratchBroker::start_with(
        "staging_no_rights",
        ScratchOptions {
            web: true,
            broker_xml: vec![("</security-settings>".into(), deny.into())],
            ..ScratchOptions::default()
        },
    )
    .await;
    let node = scratch_node(&broker, "scratch");
    let mgmt = management_for(&node);
    let spec = fresh_spec(10);

    match staging::prepare(&mgmt, &spec).await {
        Err(e @ StagingError::NotAuthorized { .. }) => {
            assert!(e.is_refusal());
            let StagingError::NotAuthorized { words, snippet } = &e else { unreachable!() };
            assert_eq!(*snippet, SECURITY_SNIPPET);
            for p in [
                "createAddress",
                "deleteAddress",
                "createDurableQueue",
                "deleteDurableQueue",
                "send",
                "consume",
                "browse",
            ] {
                assert!(words.contains(p), "{words}");
            }
            assert!(e.to_string().contains(SECURITY_SNIPPET), "shown at once: {e}");
        }
        other => panic!("staging without rights must be refused: {other:?}"),
    }
    assert!(matches!(staging::verify(&mgmt, &spec).await, Err(StagingError::Missing { .. })), "nothing created");
    assert_eq!(mgmt.address_settings(&spec.name).await.unwrap().max_delivery_attempts, 10, "no settings added");

    // Management is not checked against security settings: a queue is created there all the same. The relay's
    // Core consumer on it is refused.
    let bypass = fresh_spec(10);
    mgmt.create_queue(&bypass.queue_config()).await.expect("management createQueue ignores security-settings");
    let conn = core(&node).await;
    let session = conn.create_session(SessionOptions::transacted()).await.unwrap();
    let refused = session.create_consumer(&bypass.name, ConsumerOptions::default()).await.unwrap_err();
    assert!(refused.is_not_authorized(), "{refused}");
    let shown = StagingError::refused_over_core(&bypass.name, &refused.to_string());
    assert!(shown.is_refusal() && shown.to_string().contains(SECURITY_SNIPPET));
    mgmt.destroy_queue(&bypass.name).await.expect("management destroyQueue ignores security-settings too");
    session.close().await.ok();

    // The snippet, applied as it stands (role amq, the seven permissions), is enough.
    let snippet = Permissions {
        send: "amq".into(),
        consume: "amq".into(),
        create_durable_queue: "amq".into(),
        delete_durable_queue: "amq".into(),
        browse: "amq".into(),
        create_address: "amq".into(),
        delete_address: "amq".into(),
        ..Permissions::default()
    };
    Jolokia::new(&node).add_security_settings("studio.transfer.#", &snippet).await.unwrap();
    staging::prepare(&mgmt, &spec).await.expect("prepare with the snippet's rights");
    let session = conn.create_session(SessionOptions::transacted()).await.unwrap();
    let consumer = session.create_consumer(&spec.name, ConsumerOptions::default()).await.expect("the relay's consumer");
    consumer.close().await.unwrap();
    session.close().await.unwrap();
    staging::remove(&mgmt, &spec, false).await.unwrap();

    // A counted move and scheduled messages: all three matching scheduled messages leave the scheduler, one
    // moves, and the other two are nowhere a management call or a consumer can reach until a restart.
    let (source, source_mbean) = source_queue(&mgmt, "staging_strand_src").await;
    let (target, target_mbean) = source_queue(&mgmt, "staging_strand_dst").await;
    let later = broker_now(&mgmt).await + 3_600_000;
    let scheduled: Vec<CoreMessage> = (0..3)
        .map(|n| {
            let mut m = message(&source, n);
            m.headers.properties.insert("_AMQ_SCHED_DELIVERY", PropertyValue::Long(later));
            m
        })
        .collect();
    send(&conn, scheduled).await;
    assert_eq!(counts(&mgmt, &source_mbean).await, (3, 0, 3));
    assert_eq!(mgmt.move_messages(&source_mbean, 10, None, &target, false, 1).await.unwrap(), 1);
    assert_eq!(counts(&mgmt, &target_mbean).await, (1, 0, 1), "the moved copy is scheduled again");
    let stranded = counts(&mgmt, &source_mbean).await;
    let rescued = mgmt.move_messages(&source_mbean, 10, None, &target, false, -1).await.unwrap();
    let seen: HashSet<i64> = mgmt
        .list_scheduled_messages(&source_mbean)
        .await
        .unwrap()
        .iter()
        .filter_map(|m| m["messageID"].as_i64())
        .collect();
    assert_eq!((stranded, rescued, seen.len()), ((0, 0, 0), 0, 0), "two scheduled messages stranded by a counted move");

    conn.close().await.unwrap();
    for q in [&source, &target] {
        mgmt.destroy_queue(q).await.unwrap();
    }
}
