//! Typed errors from broker codes (core-protocol.md §13).

use artemis_core::{Connection, ConsumerOptions, SessionOptions};
use testbed::jolokia::{Jolokia, Permissions};

use crate::support::{connect, drop_queue, fresh_queue, node, options, text};

/// Bad credentials at CREATESESSION: code 105, `AMQ229031`. A throwaway user
/// name, because the broker throttles failed logins per user name.
#[tokio::test]
async fn wrong_password_is_a_typed_security_error() {
    let node = node().await;
    let user = testbed::unique_name("nobody");
    let opts = options(node).credentials(user, "wrong-password");
    let err = Connection::connect(&opts).await.expect_err("login must fail");
    assert!(err.is_not_authorized(), "{err:?}");
    assert_eq!(err.broker_error().and_then(|b| b.amq_id()), Some("AMQ229031"));
    assert!(!err.is_connection_lost());
}

/// A missing queue: consumer creation and deletion give code 100; the session
/// stays usable afterwards.
#[tokio::test]
async fn missing_queue_is_a_typed_error() {
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let missing = testbed::unique_name("missing");
    let err = session.create_consumer(&missing, ConsumerOptions::default()).await.expect_err("no such queue");
    assert!(err.is_no_such_queue(), "{err:?}");
    assert_eq!(err.broker_error().and_then(|b| b.amq_id()), Some("AMQ229017"));
    let err = session.delete_queue(&missing).await.expect_err("no such queue");
    assert!(err.is_no_such_queue(), "{err:?}");
    assert!(session.queue_query(&missing).await.expect("query").is_none());
    let err = session.create_browser(&missing, ConsumerOptions::default()).await.expect_err("no such queue");
    assert!(err.is_no_such_queue(), "{err:?}");
    conn.close().await.expect("close");
}

/// A queue whose address lets the user consume but not send (a security setting
/// added for this queue only): a confirmed send fails with code 105 and the
/// broker's text; a transacted one fails at commit with the same code.
#[tokio::test]
async fn missing_permission_is_a_typed_error() {
    let node = node().await;
    let queue = fresh_queue("no_send").await;
    let jolokia = Jolokia::new(node);
    let permissions = Permissions { send: String::new(), ..Permissions::all("amq") };
    jolokia.add_security_settings(&queue, &permissions).await.expect("security setting");
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let err = session.producer(None).send(&text(&queue, "x")).await.expect_err("send denied");
    assert!(err.is_not_authorized(), "{err:?}");
    let amq = err.broker_error().and_then(|b| b.amq_id()).map(str::to_string);
    // An address-level denial: "AMQ229032: User: transfer does not have permission='SEND' on address …".
    assert_eq!(amq.as_deref(), Some("AMQ229032"), "{err:?}");
    let tx = conn.create_session(SessionOptions::transacted()).await.expect("tx session");
    tx.producer(None).send(&text(&queue, "y")).await.expect("queued in the transaction");
    let err = tx.commit().await.expect_err("commit of a denied send");
    assert!(err.is_not_authorized(), "{err:?}");
    // Consuming is still allowed.
    session.create_consumer(&queue, ConsumerOptions::default()).await.expect("consume allowed");
    conn.close().await.expect("close");
    jolokia.remove_security_settings(&queue).await.expect("remove security setting");
    drop_queue(&queue).await;
}
