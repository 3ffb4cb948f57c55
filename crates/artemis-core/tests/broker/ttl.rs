//! The broker's side of the connection TTL (core-protocol.md §6.2), on a private
//! scratch broker. `connect::pings_keep_an_idle_connection_alive` shows the other
//! half: a client that pings is never dropped.

use std::time::{Duration, Instant};

use artemis_core::{CloseReason, ConnectOptions, Connection, ConsumerOptions, QueueConfig, SessionOptions};
use testbed::scratch::ScratchBroker;

/// The broker's `connection-ttl-check-interval` (default 2000 ms): how often it looks for silent connections.
const BROKER_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// A client that announces a 2 s TTL in its first PING and then sends nothing
/// (`ConnectOptions::keepalive = false`: no pings, and no watchdog of its own
/// that could end the connection first) is dropped by the broker: the socket is
/// closed without a DISCONNECT, after the TTL and before the broker's next check
/// past it. A receive that was waiting fails with "connection lost" (EOF), not
/// its own 60 s timeout, and later calls fail the same way.
#[tokio::test]
async fn broker_drops_a_client_that_stops_pinging_after_the_announced_ttl() {
    testbed::TestBed::require().await;
    let broker = ScratchBroker::start("ttl").await;
    let ttl = Duration::from_secs(2);
    let mut opts = ConnectOptions::new("127.0.0.1", broker.core_port)
        .credentials(broker.user.clone(), broker.password.clone())
        .connection_ttl(ttl);
    opts.keepalive = false;
    let conn = Connection::connect(&opts).await.expect("connect to the scratch broker");
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    session.create_queue(&QueueConfig::anycast("ttl", "ttl")).await.expect("queue");
    let mut consumer = session.create_consumer("ttl", ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    // SESS_START was the last packet this client sends: from here on the broker hears nothing.
    let silent_since = Instant::now();

    let err = consumer.recv(Duration::from_secs(60)).await.expect_err("the broker must drop the silent connection");
    let after = silent_since.elapsed();
    assert!(err.is_connection_lost() && !err.is_timeout(), "{err:?}");
    assert!(
        matches!(conn.close_reason(), Some(CloseReason::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof),
        "the broker closes the socket without a DISCONNECT: {:?}",
        conn.close_reason()
    );
    // Not before the TTL; at the latest one check interval after it (plus scheduling slack on a busy machine).
    assert!(after >= ttl, "dropped after {after:?}, before the {ttl:?} TTL");
    assert!(after <= ttl + BROKER_CHECK_INTERVAL + Duration::from_secs(3), "dropped only after {after:?}");

    let later = session.queue_query("ttl").await.expect_err("the connection is gone");
    assert!(later.is_connection_lost(), "{later:?}");
    // The broker says why in its log, naming the TTL our PING announced (2.40: "AMQ212037: CORE connection failure
    // to … has been detected: AMQ229014: Did not receive data from … within the 2000ms connection TTL. The
    // connection will now be closed. [code=CONNECTION_TIMEDOUT]").
    let log = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let text = std::fs::read_to_string(broker.dir().join("run.out")).unwrap_or_default();
            if text.contains("AMQ229014") {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("the broker logs AMQ229014 for the dropped connection");
    let line = log.lines().find(|l| l.contains("AMQ229014")).unwrap_or_default();
    assert!(line.contains("2000ms"), "the broker names the TTL the client announced: {line}");
    eprintln!("dropped {after:?} after the last packet; the broker logged: {line}");
}
