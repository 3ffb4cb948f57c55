//! Queue and address management over Core (core-protocol.md §12).

use artemis_core::{QueueConfig, RoutingType, SessionOptions};

use crate::support::connect;

#[tokio::test]
async fn create_query_and_delete_a_queue() {
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let address = testbed::unique_name("admin_addr");
    let queue = testbed::unique_name("admin_q");
    let config = QueueConfig::anycast(&address, &queue).filter("color = 'red'");
    session.create_queue(&config).await.expect("create");
    let info = session.queue_query(&queue).await.expect("query").expect("exists");
    assert_eq!(info.name, queue);
    assert_eq!(info.address, address);
    assert_eq!(info.routing_type, Some(RoutingType::Anycast));
    assert!(info.durable && !info.temporary && !info.auto_created);
    assert_eq!(info.filter.as_deref(), Some("color = 'red'"));
    assert_eq!((info.message_count, info.consumer_count, info.max_consumers), (0, 0, -1));
    assert_eq!(info.auto_delete, Some(false));
    // The FQQN names the same queue (§8.3).
    let fqqn = session.queue_query(&format!("{address}::{queue}")).await.expect("query").expect("exists");
    assert_eq!(fqqn.address, address);

    let err = session.create_queue(&config).await.expect_err("exists");
    assert!(err.is_queue_exists(), "{err:?}");

    let addr = session.binding_query(&address).await.expect("binding query");
    assert!(addr.exists && addr.supports_anycast && !addr.supports_multicast);
    assert_eq!(addr.queue_names, std::slice::from_ref(&queue));
    let none = session.binding_query(&testbed::unique_name("no_addr")).await.expect("binding query");
    assert!(!none.exists && none.queue_names.is_empty());

    session.delete_queue(&queue).await.expect("delete");
    assert!(session.queue_query(&queue).await.expect("query").is_none());
    conn.close().await.expect("close");
}

/// A send to an FQQN `address::queue` reaches that queue only (§8.3).
#[tokio::test]
async fn send_to_an_fqqn_reaches_that_queue_only() {
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let address = testbed::unique_name("fqqn_addr");
    let (a, b) = (testbed::unique_name("fqqn_a"), testbed::unique_name("fqqn_b"));
    session.create_queue(&QueueConfig::multicast(&address, &a)).await.expect("a");
    session.create_queue(&QueueConfig::multicast(&address, &b)).await.expect("b");
    let target = format!("{address}::{b}");
    session.producer(Some(&target)).send(&crate::support::text(&target, "only-b")).await.expect("send");
    let count = |q: String| {
        let conn = &conn;
        async move { conn.queue_query(&q).await.expect("query").expect("exists").message_count }
    };
    assert_eq!((count(a.clone()).await, count(b.clone()).await), (0, 1));
    session.delete_queue(&a).await.expect("delete a");
    session.delete_queue(&b).await.expect("delete b");
    conn.close().await.expect("close");
}
