//! The Jolokia management client against the real test bed (Artemis 2.40.0): names, HA state, queue attributes,
//! batches with per-entry results, address settings, moves, and typed errors; the cluster registry; and the Core
//! connections a worker keeps between batches, with their sessions.

mod pool;
mod registry;

use std::time::Duration;

use artemis_transfer::broker::jolokia::{
    AgentErrorKind, BrokerManagement, Endpoint, JolokiaClient, JolokiaError, QueueConfig, Request, RoutingType,
    SessionStatus,
};
use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::{unique_name, Node, NodeRole, TestBed};

fn endpoint(node: &Node) -> Endpoint {
    Endpoint {
        node: node.name.clone(),
        url: node.jolokia_url(),
        user: node.user.clone(),
        password: node.password.clone().into(),
        origin: None,
        tls: artemis_transfer::registry::tls::of_endpoint(&node.registered_core_url(), None),
    }
}

pub(crate) async fn management(node: &Node) -> BrokerManagement {
    BrokerManagement::discover(JolokiaClient::new(endpoint(node), Duration::from_secs(10))).await.expect("discover")
}

#[tokio::test]
async fn discovers_broker_names_and_ha_state_on_every_node() {
    let bed = TestBed::require().await;
    for node in &bed.nodes {
        let mgmt = management(node).await;
        assert_eq!(mgmt.broker_name(), node.name);
        let state = mgmt.broker_state().await.unwrap();
        let expected = match node.role {
            NodeRole::Primary => (Some(true), Some(false)),
            NodeRole::Backup => (Some(false), Some(true)),
        };
        assert_eq!((state.active, state.backup), expected, "{}", node.name);
        assert_eq!(state.version.as_deref(), Some("2.40.0"));
        assert!(state.current_time_millis.is_some_and(|t| t > 1_700_000_000_000));
        assert_eq!(state.id_cache_size, Some(20_000));
        assert_eq!(state.persist_id_cache, Some(true));
        let version = mgmt.client().agent_version().await.unwrap();
        assert_eq!(version.major, 2, "Artemis 2.40 ships Jolokia 2.x: {version:?}");
    }
}

/// A queue named with quotes, backslashes, `*`, `?` and a comma works end to end: create, read, count, move,
/// list, destroy.
#[tokio::test]
async fn odd_queue_names_work_end_to_end() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let mgmt = management(node).await;
    let odd = format!("{}.q\"uo\\te*d?,x", unique_name("odd_names"));
    let plain_target = unique_name("odd_names_target");
    mgmt.create_queue(&QueueConfig::plain_anycast(&odd)).await.unwrap();
    mgmt.create_queue(&QueueConfig::plain_anycast(&plain_target)).await.unwrap();
    assert!(mgmt.queues().await.unwrap().iter().any(|(a, r, q)| a == &odd && q == &odd && *r == RoutingType::Anycast));

    // The Java client cannot name such a queue (JMS reads `?` as destination options), so the messages are
    // produced on a plain queue and moved in by the broker: the odd name is a move target, then a move source.
    let inbox = unique_name("odd_names_inbox");
    mgmt.create_queue(&QueueConfig::plain_anycast(&inbox)).await.unwrap();
    fidelity::produce(node, &inbox, &Produce { count: 6, durable_only: true, ..Produce::default() }).await;
    let inbox_mbean = mgmt.queue_mbean(&inbox, RoutingType::Anycast, &inbox);
    assert_eq!(mgmt.move_messages(&inbox_mbean, 100, None, &odd, false, -1).await.unwrap(), 6);
    let source = mgmt.queue_mbean(&odd, RoutingType::Anycast, &odd);
    let state = mgmt.queue_state(&odd, RoutingType::Anycast, &odd).await.unwrap().expect("queue exists");
    assert_eq!(state.message_count, Some(6));
    assert_eq!(state.filter, Some(None));
    assert_eq!(state.enabled, Some(true));
    assert_eq!(state.ring_size, Some(-1));
    assert_eq!(state.routing_type, Some(RoutingType::Anycast));

    assert_eq!(mgmt.count_messages(&source, Some("p_int >= 3000")).await.unwrap(), 3);
    assert_eq!(mgmt.list_messages(&source, None).await.unwrap().len(), 6);
    let moved = mgmt.move_messages(&source, 100, Some("p_int < 2000"), &plain_target, false, 10).await.unwrap();
    assert_eq!(moved, 2);
    let listed = mgmt.list_messages(&source, None).await.unwrap();
    let id = listed[0]["messageID"].as_i64().unwrap();
    assert!(mgmt.move_message(&source, id, &plain_target).await.unwrap());
    let target = mgmt.queue_state(&plain_target, RoutingType::Anycast, &plain_target).await.unwrap().unwrap();
    assert_eq!(target.message_count, Some(3));
    assert_eq!(fidelity::census(&fidelity::browse(node, &plain_target).await).len(), 3);

    mgmt.destroy_queue(&odd).await.unwrap();
    mgmt.destroy_queue(&plain_target).await.unwrap();
    mgmt.destroy_queue(&inbox).await.unwrap();
    assert_eq!(mgmt.queue_state(&odd, RoutingType::Anycast, &odd).await.unwrap(), None);
}

/// One batched request answers each entry on its own: a missing queue is NotFound, the broker read succeeds.
#[tokio::test]
async fn a_batch_reports_each_entry() {
    let bed = TestBed::require().await;
    let mgmt = management(bed.node("east-2")).await;
    let missing = unique_name("missing");
    let results = mgmt
        .batch(&[
            mgmt.broker_state_request(),
            mgmt.queue_state_request(&missing, RoutingType::Anycast, &missing),
            mgmt.address_settings_request(&missing),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_ref().unwrap()["Active"], json!(true));
    assert_eq!(results[1].as_ref().unwrap_err().kind, AgentErrorKind::NotFound);
    assert!(results[2].is_ok());
}

/// Address settings: add (2.32+ JSON), read back merged with defaults filled in, remove.
#[tokio::test]
async fn address_settings_round_trip() {
    let bed = TestBed::require().await;
    let mgmt = management(bed.node("west-1")).await;
    let address = unique_name("settings");
    mgmt.add_address_settings(&address, &json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1048576, "pageSizeBytes": 65536, "idCacheSize": 5000}))
        .await
        .unwrap();
    let s = mgmt.address_settings(&address).await.unwrap();
    assert_eq!(s.address_full_policy.as_str(), "FAIL");
    assert_eq!(s.max_size_bytes, 1_048_576);
    assert_eq!(s.id_cache_size, Some(5000));
    assert_eq!(s.max_delivery_attempts, 10, "a default filled in");
    mgmt.remove_address_settings(&address).await.unwrap();
    let s = mgmt.address_settings(&address).await.unwrap();
    assert_eq!(s.address_full_policy.as_str(), "PAGE", "back to the # settings");
    assert_eq!(s.id_cache_size, None);
}

/// The broker's own words come back for a refused operation (moving to a queue that does not exist).
#[tokio::test]
async fn broker_refusals_carry_the_brokers_words() {
    let bed = TestBed::require().await;
    let mgmt = management(bed.node("east-1")).await;
    let q = unique_name("refusal");
    mgmt.create_queue(&QueueConfig::plain_anycast(&q)).await.unwrap();
    let err = mgmt
        .move_messages(&mgmt.queue_mbean(&q, RoutingType::Anycast, &q), 100, None, "no.such.queue.anywhere", false, -1)
        .await
        .unwrap_err();
    let agent = err.agent().expect("an agent error");
    assert!(agent.message.contains("no.such.queue.anywhere"), "{agent:?}");
    assert_eq!(agent.amq_id(), Some("AMQ229049"), "{agent:?}");
    mgmt.destroy_queue(&q).await.unwrap();
}

/// A user the broker does not know is refused with a typed error (a throwaway name: the 2.40 console throttles
/// a username after three failures, and that must never hit the test bed's real user).
#[tokio::test]
async fn wrong_credentials_are_a_typed_error() {
    let bed = TestBed::require().await;
    let node = bed.node("east-2");
    let mut ep = endpoint(node);
    ep.user = unique_name("nobody");
    ep.password = "wrong".into();
    let err = JolokiaClient::new(ep, Duration::from_secs(10)).request(&Request::Version).await.unwrap_err();
    assert!(matches!(err, JolokiaError::NotAuthenticated { .. } | JolokiaError::LoginThrottled { .. }), "{err:?}");
    assert!(!format!("{err} {err:?}").contains("wrong"), "no secret in the error");
}

#[tokio::test]
async fn a_node_that_does_not_answer_is_unreachable() {
    TestBed::require().await;
    let ep = Endpoint {
        node: "nowhere".into(),
        url: "http://127.0.0.1:9/console/jolokia".into(),
        user: "u".into(),
        password: "p".into(),
        origin: None,
        tls: None,
    };
    let err = JolokiaClient::new(ep, Duration::from_secs(2)).request(&Request::Version).await.unwrap_err();
    assert!(err.is_unreachable(), "{err:?}");
}

/// Broker fact (docs/broker-notes.md, "A console session spares the broker a login per call"): the console's login
/// page gives a session; a Jolokia request carrying only its cookie is answered as that user; a second login
/// with the cookie replaces the session, after which the old cookie alone is refused and the old cookie with
/// basic auth is answered by the basic auth.
#[tokio::test]
async fn the_console_answers_a_session_cookie_and_ends_a_replaced_session() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let http = reqwest::Client::new();
    let jolokia = format!("{}/", node.jolokia_url().trim_end_matches('/'));
    let login_page = jolokia.replace("/jolokia/", "/auth/login");
    let read = json!({"type": "version"});
    let login = |cookie: Option<String>| {
        let mut post = http.post(&login_page).json(&json!({"username": node.user, "password": node.password}));
        if let Some(c) = cookie {
            post = post.header("Cookie", c);
        }
        async move {
            let resp = post.send().await.expect("login answered");
            assert_eq!(resp.status().as_u16(), 200, "a login with the test bed's user");
            let set = resp.headers().get("set-cookie").expect("a session cookie").to_str().unwrap().to_string();
            set.split(';').next().unwrap().to_string()
        }
    };
    let status = |cookie: Option<String>, basic: bool| {
        let mut post = http.post(&jolokia).header("Origin", "http://127.0.0.1").json(&read);
        if let Some(c) = cookie {
            post = post.header("Cookie", c);
        }
        if basic {
            post = post.basic_auth(&node.user, Some(&node.password));
        }
        async move { post.send().await.expect("answered").status().as_u16() }
    };

    let first = login(None).await;
    assert_eq!(status(Some(first.clone()), false).await, 200, "the cookie alone is enough");
    let second = login(Some(first.clone())).await;
    assert_ne!(first, second, "a login gives a new session");
    assert_eq!(status(Some(second.clone()), false).await, 200);
    assert_eq!(status(Some(first.clone()), false).await, 403, "the replaced session is ended");
    assert_eq!(status(Some(first), true).await, 200, "a forgotten session with basic auth is answered by it");
    assert_eq!(status(Some("JSESSIONID=made-up".into()), false).await, 403);
}

/// In a process that uses console sessions (a worker, `serve`) the client logs in once and its requests carry the
/// session (a wrong password never rides it: the session's key holds a digest of the password,
/// `session::tests::a_wrong_password_has_a_session_of_its_own`); at the end the process logs it out and goes on
/// with basic auth alone.
#[tokio::test]
async fn a_client_logs_in_once_and_its_requests_carry_the_session() {
    let bed = TestBed::require().await;
    // A test of its own process: no other test here runs a worker, which turns sessions on and off.
    artemis_transfer::broker::jolokia::use_console_sessions();
    let client = JolokiaClient::new(endpoint(bed.node("east-1")), Duration::from_secs(10));
    client.request(&Request::Version).await.expect("first request");
    assert_eq!(client.session_status().await, SessionStatus::Open);
    for _ in 0..3 {
        client.request(&Request::Version).await.expect("a request on the session");
    }
    artemis_transfer::broker::jolokia::log_out_console_sessions(Duration::from_secs(2)).await;
    assert_eq!(client.session_status().await, SessionStatus::NotTried, "logged out");
    client.request(&Request::Version).await.expect("basic auth alone after the logout");
    assert_eq!(client.session_status().await, SessionStatus::NotTried, "no login once sessions are off");
}
