//! Connecting: version negotiation, keep-alive, clean close (core-protocol.md §3, §6).

use std::time::Duration;

use artemis_core::{Connection, ProtocolVersion, SessionOptions};

use crate::support::{connect, node, options};

/// 2.40 accepts 135 and answers with its own version, 136 (§3).
#[tokio::test]
async fn connect_announces_135_and_learns_the_server_version() {
    let conn = connect().await;
    assert_eq!(conn.protocol_version(), ProtocolVersion::ANNOUNCED);
    assert_eq!(conn.server_version(), 136, "Artemis 2.37+ answers 136");
    conn.close().await.expect("close");
}

/// An unknown version is refused with code 108 and the connection stays open for
/// the next one (§3, §18 item 2).
#[tokio::test]
async fn refused_version_falls_back_to_the_next_on_the_same_socket() {
    let node = node().await;
    let mut opts = options(node);
    opts.versions = vec![ProtocolVersion::new(999), ProtocolVersion::V134];
    let conn = Connection::connect(&opts).await.expect("connect with fallback");
    assert_eq!(conn.protocol_version(), ProtocolVersion::V134);
    // The session works with the 134 shapes (13-byte send trailer, V2 commit).
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    session.commit().await.expect("commit at 134");
    conn.close().await.expect("close");
}

/// No version accepted at all: a typed error, not a hang.
#[tokio::test]
async fn no_accepted_version_is_a_typed_error() {
    let node = node().await;
    let mut opts = options(node);
    opts.versions = vec![ProtocolVersion::new(998), ProtocolVersion::new(999)];
    let err = Connection::connect(&opts).await.expect_err("no version works");
    assert!(matches!(err, artemis_core::Error::VersionRejected { .. }), "{err:?}");
}

/// With a 3 s TTL the client pings every 1.5 s; the broker, which adopts the TTL
/// from our PING and checks every 2 s, would close a silent connection within
/// ~5 s (§6.2). After 7 s idle the connection is still up, and our own watchdog,
/// fed by the echoes, stayed quiet.
#[tokio::test]
async fn pings_keep_an_idle_connection_alive() {
    let node = node().await;
    let opts = options(node).connection_ttl(Duration::from_secs(3));
    let conn = Connection::connect(&opts).await.expect("connect");
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(!conn.is_closed(), "closed: {:?}", conn.close_reason());
    assert!(conn.queue_query("DLQ").await.expect("query after idling").is_some());
    conn.close().await.expect("close");
}

/// After `close`, calls fail with a typed error instead of hanging.
#[tokio::test]
async fn calls_after_close_fail_typed() {
    let conn = connect().await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    conn.close().await.expect("close");
    let err = session.queue_query("DLQ").await.expect_err("closed");
    assert!(err.is_connection_lost(), "{err:?}");
}
