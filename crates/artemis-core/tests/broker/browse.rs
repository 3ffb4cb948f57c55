//! Browsing (core-protocol.md §10): no consumption, no delivery-count change, a
//! clean end on empty and full queues.

use artemis_core::{ConsumerOptions, SessionOptions, Window};
use testbed::fidelity::{self, Produce};

use crate::support::{connect, depth, drop_queue, fresh_queue, node, payload_id};

#[tokio::test]
async fn browse_of_an_empty_queue_ends_cleanly() {
    let queue = fresh_queue("browse_empty").await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let mut browser = session.create_browser(&queue, ConsumerOptions::default()).await.expect("browser");
    assert!(browser.next().await.expect("browse").is_none());
    assert!(browser.is_finished());
    assert!(browser.next().await.expect("browse again").is_none());
    browser.close().await.expect("close browser");
    conn.close().await.expect("close");
    drop_queue(&queue).await;
}

/// 120 messages through a 4 KiB window: the browser runs out of credits many
/// times, so many markers arrive before the end (on 2.40.0 the Java browser with
/// such a window stops after 25); only a marker with nothing before it and credit
/// left ends the browse. Everything is seen once, in order, with delivery
/// count 0; the queue's depth and the Java client's delivery counts afterwards
/// show that nothing was consumed or counted as delivered.
#[tokio::test]
async fn browse_of_a_full_queue_sees_everything_and_changes_nothing() {
    let node = node().await;
    let queue = fresh_queue("browse_full").await;
    let produce = Produce { count: 120, kinds: "text,bytes,map".into(), ..Produce::default() };
    fidelity::produce(node, &queue, &produce).await;
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let options = ConsumerOptions::default().window(Window::Bytes(4096));
    let mut browser = session.create_browser(&queue, options).await.expect("browser");
    let seen = browser.collect_all().await.expect("browse");
    let ids: Vec<String> = seen.iter().map(|d| payload_id(d.message())).collect();
    // The queue's order is by priority, then arrival: the Java browser's order.
    let judged = fidelity::browse(node, &queue).await;
    let expected: Vec<String> = judged.iter().map(|o| o.payload_id().unwrap_or("").to_string()).collect();
    assert_eq!(expected.len(), 120);
    assert_eq!(ids, expected);
    assert!(seen.iter().all(|d| d.delivery_count() == 0));
    browser.close().await.expect("close browser");
    // A second browse sees the same again.
    let mut again = session.create_browser(&queue, ConsumerOptions::default()).await.expect("browser");
    assert_eq!(again.collect_all().await.expect("browse").len(), 120);
    conn.close().await.expect("close");
    assert_eq!(depth(&queue).await, 120);
    let consumed = fidelity::consume(node, &queue).await;
    assert_eq!(consumed.len(), 120);
    assert!(consumed.iter().all(|o| o.0["delivery_count"] == 1), "a browse must not count as a delivery");
    drop_queue(&queue).await;
}
