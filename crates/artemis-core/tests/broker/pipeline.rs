//! Pipelined sends: many in flight, each matched to its answer by correlation id
//! (core-protocol.md §4.2), interleaved with in-order calls on the same session.

use artemis_core::SessionOptions;

use crate::support::{connect, depth, drop_queue, fresh_queue, text};

#[tokio::test]
async fn pipelined_sends_are_each_confirmed() {
    let queue = fresh_queue("pipeline").await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let producer = session.producer(Some(&queue));
    let mut confirmations = Vec::new();
    for i in 0..200 {
        confirmations.push(producer.send_pipelined(&text(&queue, &format!("m{i}"))).await.expect("queued"));
        if i == 100 {
            // An in-order call while sends are in flight still gets its own answer.
            let info = session.queue_query(&queue).await.expect("query").expect("exists");
            assert!(info.message_count <= 101);
        }
    }
    for c in confirmations {
        c.wait().await.expect("confirmed");
    }
    assert_eq!(depth(&queue).await, 200);
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}
