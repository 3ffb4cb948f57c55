//! Full addresses and producer flow control (core-protocol.md §8.6). Each test
//! limits its own queue's address with address settings added through Jolokia.

use std::time::Duration;

use artemis_core::SessionOptions;
use bytes::Bytes;
use testbed::jolokia::Jolokia;

use crate::support::{connect, drop_queue, fresh_queue, node, text};

fn two_kib(queue: &str, id: &str) -> artemis_core::CoreMessage {
    let mut m = text(queue, id);
    m.set_bytes(Bytes::from(vec![7u8; 2048]));
    m
}

/// Under the FAIL policy a full address refuses a send with code 210
/// (`AMQ229102`), and refuses producer credits (SESS_PRODUCER_FAIL_CREDITS);
/// both surface as `is_address_full()`.
#[tokio::test]
async fn full_address_under_fail_policy_is_a_typed_error() {
    let node = node().await;
    let queue = fresh_queue("full_fail").await;
    let jolokia = Jolokia::new(node);
    jolokia
        .add_address_settings(
            &queue,
            r#"{"maxSizeBytes": 20000, "pageSizeBytes": 10000, "addressFullMessagePolicy": "FAIL"}"#,
        )
        .await
        .expect("address settings");
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let producer = session.producer(Some(&queue));
    let mut refused = None;
    for i in 0..100 {
        if let Err(e) = producer.send(&two_kib(&queue, &format!("m{i}"))).await {
            refused = Some(e);
            break;
        }
    }
    let err = refused.expect("the address fills up");
    assert!(err.is_address_full(), "{err:?}");
    assert_eq!(err.broker_error().and_then(|b| b.amq_id()), Some("AMQ229102"));
    let flow = session.producer_with_flow_control(&queue, 64 * 1024, Duration::from_secs(5));
    let err = flow.send(&two_kib(&queue, "with-credits")).await.expect_err("credits refused");
    assert!(err.is_address_full(), "{err:?}");
    conn.close().await.expect("close");
    jolokia.remove_address_settings(&queue).await.expect("remove settings");
    drop_queue(&queue).await;
}

/// Under the BLOCK policy the broker withholds producer credits while the
/// address is full: a flow-controlled send fails with a timeout instead of
/// hanging, and the connection stays usable. A producer without flow control is
/// not held back at all (Core credits are cooperative, §8.6).
#[tokio::test]
async fn full_address_under_block_policy_times_out_a_flow_controlled_send() {
    let node = node().await;
    let queue = fresh_queue("full_block").await;
    let jolokia = Jolokia::new(node);
    jolokia
        .add_address_settings(
            &queue,
            r#"{"maxSizeBytes": 20000, "pageSizeBytes": 10000, "addressFullMessagePolicy": "BLOCK"}"#,
        )
        .await
        .expect("address settings");
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let flow = session.producer_with_flow_control(&queue, 4096, Duration::from_secs(2));
    flow.send(&two_kib(&queue, "first")).await.expect("credits while there is room");
    let plain = session.producer(Some(&queue));
    for i in 0..15 {
        plain.send(&two_kib(&queue, &format!("m{i}"))).await.expect("no flow control, no blocking");
    }
    let mut outcome = Ok(());
    for i in 0..10 {
        outcome = flow.send(&two_kib(&queue, &format!("f{i}"))).await;
        if outcome.is_err() {
            break;
        }
    }
    let err = outcome.expect_err("no credits for a full address");
    assert!(err.is_timeout() && err.is_producer_blocked() && !err.is_connection_lost(), "{err:?}");
    // Credits asked for an FQQN `address::queue` are the address's (the broker's paging manager takes the address
    // part): a full address blocks a producer bound to one of its queues too.
    let fqqn = format!("{queue}::{queue}");
    let by_queue = session.producer_with_flow_control(&fqqn, 4096, Duration::from_secs(2));
    let err = by_queue.send(&two_kib(&fqqn, "fqqn")).await.expect_err("no credits for a full address by FQQN");
    assert!(err.is_producer_blocked(), "{err:?}");
    assert!(session.queue_query(&queue).await.expect("still usable").is_some());
    conn.close().await.expect("close");
    jolokia.remove_address_settings(&queue).await.expect("remove settings");
    drop_queue(&queue).await;
}
