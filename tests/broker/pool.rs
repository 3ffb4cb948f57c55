//! The worker's Core connections kept between batches (`broker::core_pool`): a connection given back keeps the
//! transacted session its batch committed in, and the next batch on that endpoint works in the same session; a
//! connection that holds any other session is not kept.

use std::time::Duration;

use artemis_core::SessionOptions;
use artemis_transfer::broker::core_pool::CorePool;
use artemis_transfer::broker::node::{LiveEndpoint, NodeAccess};
use testbed::{Node, TestBed};

use super::management;

async fn live(node: &Node) -> NodeAccess {
    let mgmt = management(node).await;
    let node_id = mgmt.broker_state().await.expect("broker state").node_id.expect("a NodeID");
    NodeAccess::new(LiveEndpoint {
        label: format!("east/{}", node.name),
        unlimited: mgmt.clone(),
        mgmt,
        core_url: node.registered_core_url(),
        user: node.user.clone(),
        password: node.password.clone().into(),
        key_passphrase: None,
        node_id,
    })
}

#[tokio::test]
async fn a_connection_given_back_keeps_its_committed_session_for_the_next_batch() {
    let bed = TestBed::require().await;
    let end = live(bed.node("east-1")).await;
    let (pool, ttl) = (CorePool::default(), Duration::from_secs(30));

    let mut link = pool.take(&end, ttl).await.expect("a connection");
    let session = link.transacted_session().await.expect("a session");
    session.commit().await.expect("an empty commit");
    let channel = session.channel();
    link.keep(session);
    pool.give_back(link);

    let mut again = pool.take_idle(&end, ttl).expect("the connection kept");
    let session = again.transacted_session().await.expect("the kept session");
    assert_eq!(session.channel(), channel, "the next batch works in the session the last one committed in");
    session.commit().await.expect("the kept session still works on the broker");

    // Only a transacted session is kept, and a connection with another session left open is not.
    let auto = again.create_session(SessionOptions::auto_commit()).await.expect("another session");
    again.keep(session);
    pool.give_back(again);
    assert!(pool.take_idle(&end, ttl).is_none(), "a session left open besides the kept one: not kept");
    drop(auto);

    let mut fresh = pool.take(&end, ttl).await.expect("a new connection");
    let auto = fresh.create_session(SessionOptions::auto_commit()).await.expect("a session");
    let auto_channel = auto.channel();
    fresh.keep(auto);
    let session = fresh.transacted_session().await.expect("a session");
    assert_ne!(session.channel(), auto_channel, "an auto-commit session is never kept");
    assert_eq!(session.options(), SessionOptions::transacted());
    session.close().await.expect("closed");
    fresh.close().await.expect("closed");
}
