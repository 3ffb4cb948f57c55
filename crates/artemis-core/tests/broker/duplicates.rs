//! Duplicate detection with `_AMQ_DUPL_ID` (core-protocol.md §8.5).

use artemis_core::{ConsumerOptions, SessionOptions};

use crate::support::{connect, depth, drop_queue, fresh_queue, payload_id, text, WAIT};

/// One duplicate in a transaction rejects the whole transaction at commit, as the
/// typed error (code 113): its other sends and its acks are rolled back too.
#[tokio::test]
async fn duplicate_in_a_transaction_rejects_it_whole() {
    let queue = fresh_queue("dup_tx").await;
    let conn = connect().await;
    let auto = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let mut seen = text(&queue, "first");
    seen.headers.set_duplicate_id(&format!("{queue}-d1"));
    auto.producer(None).send(&seen).await.expect("first send");

    let tx = conn.create_session(SessionOptions::transacted()).await.expect("tx session");
    let mut consumer = tx.create_consumer(&queue, ConsumerOptions::default()).await.expect("consumer");
    tx.start().await.expect("start");
    let d = consumer.recv(WAIT).await.expect("recv").expect("the first message");
    consumer.ack(&d).await.expect("ack joins the transaction");
    let producer = tx.producer(None);
    for (id, dup) in [("a", "d2"), ("b", "d1"), ("c", "d3")] {
        let mut m = text(&queue, id);
        m.headers.set_duplicate_id(&format!("{queue}-{dup}"));
        producer.send(&m).await.expect("send in transaction");
    }
    let err = tx.commit().await.expect_err("the duplicate rejects the commit");
    assert!(err.is_duplicate_id(), "{err:?}");
    assert!(!err.is_connection_lost());
    assert!(err.broker_error().and_then(|b| b.message.clone()).is_some());
    // Nothing of the transaction happened: the acked message is back, no send arrived.
    consumer.close().await.expect("close consumer");
    assert_eq!(depth(&queue).await, 1);
    let node = crate::support::node().await;
    let left = testbed::fidelity::consume(node, &queue).await;
    assert_eq!(left.iter().map(|o| o.payload_id().unwrap_or("").to_string()).collect::<Vec<_>>(), ["first"]);
    // The session goes on: a fresh transaction works.
    tx.commit().await.expect("empty commit after the rejected one");
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}

/// Outside a transaction a duplicate is dropped silently: the client sees a
/// normal confirmation (NULL_RESPONSE) and only one copy is in the queue.
#[tokio::test]
async fn non_transacted_duplicate_is_dropped_silently() {
    let queue = fresh_queue("dup_auto").await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let producer = session.producer(None);
    for id in ["one", "two"] {
        let mut m = text(&queue, id);
        m.headers.set_duplicate_id(&format!("{queue}-same"));
        producer.send(&m).await.expect("both sends are confirmed");
    }
    assert_eq!(depth(&queue).await, 1);
    let mut consumer = session.create_consumer(&queue, ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let d = consumer.recv(WAIT).await.expect("recv").expect("message");
    assert_eq!(payload_id(d.message()), "one");
    consumer.ack(&d).await.expect("ack");
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}
