//! A broker that dies mid-session (a private scratch broker: the shared ones are
//! never stopped). Every pending call must end with an error, never hang.

use std::time::Duration;

use artemis_core::{ConnectOptions, Connection, ConsumerOptions, QueueConfig, SessionOptions};
use testbed::scratch::ScratchBroker;

fn scratch_options(broker: &ScratchBroker, call_timeout: Duration) -> ConnectOptions {
    ConnectOptions::new("127.0.0.1", broker.core_port)
        .credentials(broker.user.clone(), broker.password.clone())
        .call_timeout(call_timeout)
}

/// Calls are left pending on a frozen broker (SIGSTOP), then the broker is
/// killed: every one of them — a commit, a queue query, a confirmed send, a
/// consumer's receive — returns "connection lost" (not its own timeout), and so
/// does every later call.
#[tokio::test]
async fn killed_broker_fails_every_pending_call() {
    testbed::TestBed::require().await;
    let mut broker = ScratchBroker::start("kill").await;
    let conn = Connection::connect(&scratch_options(&broker, Duration::from_secs(60)))
        .await
        .expect("connect to the scratch broker");
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    let other = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    session.create_queue(&QueueConfig::anycast("k", "k")).await.expect("queue");
    let mut consumer = session.create_consumer("k", ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");

    broker.pause();
    let commit = tokio::spawn(async move { session.commit().await });
    let query = {
        let other_query = other.queue_query("k");
        async move { other_query.await.map(|_| ()) }
    };
    let producer = conn.create_session(SessionOptions::auto_commit());
    let recv = tokio::spawn(async move { consumer.recv(Duration::from_secs(60)).await.map(|_| ()) });
    // Give the calls time to be written to the frozen broker, then kill it.
    let killer = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        broker.kill().await;
    };
    let (query, producer, ()) = tokio::join!(query, producer, killer);
    let results = [
        ("commit", commit.await.expect("task")),
        ("queue query", query),
        ("create session", producer.map(|_| ())),
        ("receive", recv.await.expect("task")),
    ];
    for (what, r) in results {
        let err = r.expect_err(what);
        assert!(err.is_connection_lost() && !err.is_timeout(), "{what}: {err:?}");
    }
    assert!(conn.is_closed());
    let later = conn.queue_query("k").await.expect_err("after the kill");
    assert!(later.is_connection_lost(), "{later:?}");
}

/// A frozen broker that never answers: the call fails with its timeout, the
/// connection is failed with it (its state is unknown, §4.2), and a call that
/// was pending beside it fails too.
#[tokio::test]
async fn frozen_broker_times_calls_out() {
    testbed::TestBed::require().await;
    let broker = ScratchBroker::start("freeze").await;
    let conn = Connection::connect(&scratch_options(&broker, Duration::from_secs(2)))
        .await
        .expect("connect to the scratch broker");
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    broker.pause();
    let (a, b) = tokio::join!(conn.queue_query("x"), session.queue_query("y"));
    let (a, b) = (a.expect_err("no answer"), b.expect_err("no answer"));
    assert!(a.is_timeout() && b.is_timeout(), "{a:?} / {b:?}");
    assert!(conn.is_closed());
    let later = session.queue_query("z").await.expect_err("the connection was failed");
    assert!(later.is_connection_lost() && later.is_timeout(), "{later:?}");
    broker.resume();
}

/// A broker shutting down cleanly tells its clients (DISCONNECT, §6.3): the
/// connection ends with `CloseReason::Disconnected` and a waiting receive
/// returns that error. On 2.40.0 the reason is 2 (SCALE_DOWN, with no target),
/// not 4 (SHUT_DOWN): `RemotingServiceImpl.freeze` calls
/// `disconnect(scaleDownNodeID = null, false)`.
#[tokio::test]
async fn broker_shutdown_disconnects_with_the_reason() {
    testbed::TestBed::require().await;
    let mut broker = ScratchBroker::start("shutdown").await;
    let conn = Connection::connect(&scratch_options(&broker, Duration::from_secs(60)))
        .await
        .expect("connect to the scratch broker");
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    session.create_queue(&QueueConfig::anycast("s", "s")).await.expect("queue");
    let mut consumer = session.create_consumer("s", ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let recv = tokio::spawn(async move { consumer.recv(Duration::from_secs(120)).await });
    broker.terminate().await;
    let err = recv.await.expect("task").expect_err("the broker went away");
    assert!(err.is_connection_lost(), "{err:?}");
    let scale_down = artemis_core::protocol::packet::DisconnectReason::SCALE_DOWN.0;
    assert!(
        matches!(
            conn.close_reason(),
            Some(artemis_core::CloseReason::Disconnected { reason: Some(r), node_id: Some(_) }) if r == scale_down
        ),
        "{:?}",
        conn.close_reason()
    );
}
