//! Transactions and acknowledgements (core-protocol.md §8.4, §9.4).

use artemis_core::{ConsumerOptions, Error, SessionOptions};

use crate::support::{connect, depth, drop_queue, fresh_queue, payload_id, text, QUIET, WAIT};

/// Acked in a transaction, then rolled back: the messages come back as
/// redeliveries, and an ack of a pre-rollback delivery is refused before it can
/// poison the next transaction. Acked again and committed, they are gone.
#[tokio::test]
async fn rollback_redelivers() {
    let queue = fresh_queue("rollback").await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    let producer = session.producer(Some(&queue));
    for i in 0..3 {
        producer.send(&text(&queue, &format!("m{i}"))).await.expect("send");
    }
    session.commit().await.expect("commit sends");
    let mut consumer = session.create_consumer(&queue, ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let mut first = Vec::new();
    for _ in 0..3 {
        let d = consumer.recv(WAIT).await.expect("recv").expect("message");
        assert_eq!(d.delivery_count(), 1);
        consumer.ack(&d).await.expect("ack");
        first.push(d);
    }
    session.rollback().await.expect("rollback");
    let stale = consumer.ack(&first[0]).await.expect_err("stale ack");
    assert!(matches!(stale, Error::StaleDelivery { .. }), "{stale:?}");
    let mut again = Vec::new();
    for _ in 0..3 {
        let d = consumer.recv(WAIT).await.expect("recv").expect("redelivered message");
        assert!(d.is_redelivered(), "delivery count {}", d.delivery_count());
        consumer.ack(&d).await.expect("ack");
        again.push(payload_id(d.message()));
    }
    again.sort();
    assert_eq!(again, ["m0", "m1", "m2"]);
    session.commit().await.expect("commit acks");
    assert!(consumer.recv(QUIET).await.expect("recv").is_none());
    assert_eq!(depth(&queue).await, 0);
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}

/// Sends in a transaction are invisible until commit, then all there.
#[tokio::test]
async fn commit_makes_sends_visible() {
    let queue = fresh_queue("commit").await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    let producer = session.producer(Some(&queue));
    for i in 0..5 {
        producer.send(&text(&queue, &format!("m{i}"))).await.expect("send");
    }
    let observer = conn.create_session(SessionOptions::auto_commit()).await.expect("observer");
    let mut browser = observer.create_browser(&queue, ConsumerOptions::default()).await.expect("browser");
    assert!(browser.next().await.expect("browse").is_none(), "uncommitted sends are invisible");
    assert_eq!(depth(&queue).await, 0);
    session.commit().await.expect("commit");
    assert_eq!(depth(&queue).await, 5);
    let info = conn.queue_query(&queue).await.expect("query").expect("exists");
    assert_eq!(info.message_count, 5);
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}

/// An individual ack removes that message only: the others go back to the queue
/// when the consumer closes.
#[tokio::test]
async fn individual_ack_acks_only_that_message() {
    let queue = fresh_queue("individual_ack").await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let producer = session.producer(Some(&queue));
    for i in 0..3 {
        producer.send(&text(&queue, &format!("m{i}"))).await.expect("send");
    }
    let mut consumer = session.create_consumer(&queue, ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(consumer.recv(WAIT).await.expect("recv").expect("message"));
    }
    let middle = got.iter().find(|d| payload_id(d.message()) == "m1").expect("m1");
    consumer.ack(middle).await.expect("ack m1");
    consumer.close().await.expect("close consumer");
    let node = crate::support::node().await;
    let left = testbed::fidelity::consume(node, &queue).await;
    let census = testbed::fidelity::census(&left);
    assert_eq!(census.keys().map(String::as_str).collect::<Vec<_>>(), ["m0", "m2"]);
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}

/// A cumulative ack in a transaction (`ack_through`, SESS_ACKNOWLEDGE) takes every message delivered to the
/// consumer up to and including the one named — m0 and m1 were never acknowledged on their own — and none after
/// it, though m3 and m4 were delivered too: they go back to the queue when the consumer closes.
#[tokio::test]
async fn a_cumulative_ack_takes_every_earlier_delivery_and_none_after() {
    let queue = fresh_queue("cumulative_ack").await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    let producer = session.producer(Some(&queue));
    for i in 0..5 {
        producer.send(&text(&queue, &format!("m{i}"))).await.expect("send");
    }
    session.commit().await.expect("commit sends");
    let mut consumer = session.create_consumer(&queue, ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(consumer.recv(WAIT).await.expect("recv").expect("message"));
    }
    let ids: Vec<String> = got.iter().map(|d| payload_id(d.message())).collect();
    assert_eq!(ids, ["m0", "m1", "m2", "m3", "m4"], "delivered in the order sent");
    consumer.ack_through(&got[2]).await.expect("cumulative ack joins the transaction");
    session.commit().await.expect("commit acks");
    consumer.close().await.expect("close consumer");
    let node = crate::support::node().await;
    let left = testbed::fidelity::consume(node, &queue).await;
    let census = testbed::fidelity::census(&left);
    assert_eq!(census.keys().map(String::as_str).collect::<Vec<_>>(), ["m3", "m4"]);
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}
