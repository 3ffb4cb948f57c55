//! The preview against real brokers: each test creates the condition for real on the test bed, gathers the
//! facts (one batched Jolokia request per node) and checks the finding the preview raises.

mod cli;
mod conventions;
mod deployment;
mod filters;
mod limiter;
mod live_nodes;
mod readme;
mod service;

use std::time::Duration;

use artemis_transfer::broker::jolokia::{BrokerManagement, Endpoint, JolokiaClient, QueueConfig};
use artemis_transfer::transfer::gather::{gather, EndAccess, RunFacts};
use artemis_transfer::transfer::{preview, Kind, Mode, Plan, Preview, PreviewSettings, QueueRef, Selection};
use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::{unique_name, Node, TestBed, TestQueues};

fn management(node: &Node) -> BrokerManagement {
    let endpoint = Endpoint {
        node: node.name.clone(),
        url: node.jolokia_url(),
        user: node.user.clone(),
        password: node.password.clone().into(),
        origin: None,
        tls: artemis_transfer::registry::tls::of_endpoint(&node.registered_core_url(), None),
    };
    BrokerManagement::new(JolokiaClient::new(endpoint, Duration::from_secs(10)), node.name.clone())
}

fn core_addr(node: &Node) -> String {
    format!("127.0.0.1:{}", node.core_port)
}

fn queue_ref(node: &Node, queue: &str) -> QueueRef {
    QueueRef { cluster: node.cluster.clone(), node: node.name.clone(), queue: queue.to_string(), address: None }
}

/// A source queue on east-1 holding `count` durable messages, removed with `queues`.
async fn source_with(queues: &TestQueues, count: u32) -> String {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let name = queues.name(node, "preview_source");
    management(node).create_queue(&QueueConfig::plain_anycast(&name)).await.unwrap();
    if count > 0 {
        fidelity::produce(node, &name, &Produce { count, durable_only: true, ..Produce::default() }).await;
    }
    name
}

/// Previews moving everything (or `selection`) from `source` on east-1 to `target` on `target_node`.
async fn run_preview(source: &str, target_node: &str, target: &str, selection: Selection) -> Preview {
    let bed = TestBed::require().await;
    let (s, t) = (bed.node("east-1"), bed.node(target_node));
    let (sm, tm) = (management(s), management(t));
    let t0 = sm.broker_state().await.unwrap().current_time_millis.expect("2.40 has CurrentTimeMillis");
    let plan = Plan {
        mode: Mode::Move,
        source: queue_ref(s, source),
        target: queue_ref(t, target),
        selection,
        t0_millis: t0,
        destination: Default::default(),
    };
    let (sc, tc) = (core_addr(s), core_addr(t));
    let facts = gather(
        &plan,
        EndAccess { management: &sm, core_addr: Some(&sc) },
        EndAccess { management: &tm, core_addr: Some(&tc) },
        RunFacts {
            source_has_active_run: Some(false),
            target_is_source_of_active_run: Some(false),
            runs_into_target_address: Some(0),
        },
    )
    .await;
    preview(&plan, &facts, &PreviewSettings::default())
}

fn has(p: &Preview, kind: Kind, code: &str) -> bool {
    p.findings.iter().any(|f| f.kind == kind && f.code == code)
}

fn codes(p: &Preview) -> Vec<(Kind, &'static str)> {
    p.findings.iter().map(|f| (f.kind, f.code)).collect()
}

/// A target queue on `node`, configured by `config`, removed with `queues`.
async fn target_queue(queues: &TestQueues, node: &str, config: impl FnOnce(&mut QueueConfig)) -> String {
    let bed = TestBed::require().await;
    let name = queues.name(bed.node(node), "preview_target");
    let mut c = QueueConfig::plain_anycast(&name);
    config(&mut c);
    management(bed.node(node)).create_queue(&c).await.unwrap();
    name
}

async fn target_settings(node: &str, address: &str, settings: serde_json::Value) {
    let bed = TestBed::require().await;
    management(bed.node(node)).add_address_settings(address, &settings).await.unwrap();
}

#[tokio::test]
async fn a_healthy_move_can_start_and_counts_exactly() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 10).await;
    let target = target_queue(&queues, "west-1", |_| {}).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(p.can_start(), "{:?}", codes(&p));
    assert_eq!(p.selection_size, Some(10));
    assert!(p.projected_bytes.is_some_and(|b| b > 0));
    // The only things a healthy move may ask: staging rights (learnt at start) and, on a crowded disk, disk-tight.
    for (kind, code) in codes(&p) {
        assert!(
            matches!((kind, code), (Kind::Unknown, "staging-rights") | (Kind::NeedsAck, "disk-tight")),
            "{:?}",
            codes(&p)
        );
    }
}

#[tokio::test]
async fn drop_policy_is_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |_| {}).await;
    target_settings("west-1", &target, json!({"addressFullMessagePolicy": "DROP"})).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::Refused, "address-full-drop"), "{:?}", codes(&p));
    assert!(p
        .findings
        .iter()
        .find(|f| f.code == "address-full-drop")
        .unwrap()
        .snippet
        .as_deref()
        .unwrap()
        .contains("PAGE"));
}

#[tokio::test]
async fn page_limit_with_page_full_drop_is_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |_| {}).await;
    target_settings("west-1", &target, json!({"pageLimitMessages": 10, "pageFullMessagePolicy": "DROP"})).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::Refused, "page-full-drop"), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_filtered_target_is_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |c| c.filter_string = Some("color = 'red'".into())).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::Refused, "target-filtered"), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_disabled_target_is_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |c| c.enabled = false).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::Refused, "target-disabled"), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_purge_on_no_consumers_target_is_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |c| c.purge_on_no_consumers = true).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::Refused, "target-purge-on-no-consumers"), "{:?}", codes(&p));
}

#[tokio::test]
async fn ring_queues_too_small_or_pushing_out() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 6).await;
    let small = target_queue(&queues, "west-1", |c| c.ring_size = 4).await;
    let p = run_preview(&source, "west-1", &small, Selection::All).await;
    assert!(has(&p, Kind::Refused, "ring-too-small"), "{:?}", codes(&p));

    let full = target_queue(&queues, "west-1", |c| c.ring_size = 8).await;
    let bed = TestBed::require().await;
    fidelity::produce(bed.node("west-1"), &full, &Produce { count: 4, durable_only: true, ..Produce::default() }).await;
    let p = run_preview(&source, "west-1", &full, Selection::All).await;
    assert!(has(&p, Kind::NeedsAck, "ring-pushes-out"), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_last_value_target_needs_acknowledgement() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |c| c.last_value = true).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::NeedsAck, "last-value"), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_backup_target_is_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let p = run_preview(&source, "west-1-backup", &unique_name("on_backup"), Selection::All).await;
    assert!(has(&p, Kind::Refused, "target-backup"), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_missing_target_queue_is_created_or_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let missing = unique_name("missing_target");
    let p = run_preview(&source, "west-1", &missing, Selection::All).await;
    assert!(has(&p, Kind::NeedsAck, "target-queue-created"), "{:?}", codes(&p));

    let forbidden = unique_name("missing_no_autocreate");
    target_settings("west-1", &forbidden, json!({"autoCreateQueues": false})).await;
    let p = run_preview(&source, "west-1", &forbidden, Selection::All).await;
    assert!(has(&p, Kind::Refused, "target-queue-missing"), "{:?}", codes(&p));
}

#[tokio::test]
async fn the_source_as_target_is_refused() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let p = run_preview(&source, "east-1", &source, Selection::All).await;
    assert!(has(&p, Kind::Refused, "same-queue"), "{:?}", codes(&p));
}

#[tokio::test]
async fn room_under_fail_and_block_by_bytes_and_messages() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 20).await;
    for policy in ["FAIL", "BLOCK"] {
        let full = target_queue(&queues, "west-1", |_| {}).await;
        target_settings(
            "west-1",
            &full,
            json!({"addressFullMessagePolicy": policy, "maxSizeBytes": 4096, "pageSizeBytes": 1024}),
        )
        .await;
        let p = run_preview(&source, "west-1", &full, Selection::All).await;
        assert!(has(&p, Kind::Refused, "capacity-bytes"), "{policy}: {:?}", codes(&p));

        let tight = target_queue(&queues, "west-1", |_| {}).await;
        let bytes = p.projected_bytes.unwrap();
        target_settings(
            "west-1",
            &tight,
            json!({"addressFullMessagePolicy": policy, "maxSizeBytes": bytes + bytes / 20, "pageSizeBytes": 1024}),
        )
        .await;
        let p = run_preview(&source, "west-1", &tight, Selection::All).await;
        assert!(has(&p, Kind::NeedsAck, "capacity-tight"), "{policy}: {:?}", codes(&p));
    }
    let by_count = target_queue(&queues, "west-1", |_| {}).await;
    target_settings("west-1", &by_count, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 10})).await;
    let p = run_preview(&source, "west-1", &by_count, Selection::All).await;
    assert!(has(&p, Kind::Refused, "capacity-messages"), "{:?}", codes(&p));
}

#[tokio::test]
async fn an_expiry_delay_on_the_target_needs_acknowledgement() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |_| {}).await;
    target_settings("west-1", &target, json!({"expiryDelay": 60000})).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::NeedsAck, "target-expiry-delay"), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_small_per_address_duplicate_cache_needs_acknowledgement() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |_| {}).await;
    target_settings("west-1", &target, json!({"idCacheSize": 100})).await;
    let p = run_preview(&source, "west-1", &target, Selection::All).await;
    assert!(has(&p, Kind::NeedsAck, "duplicate-cache-small"), "{:?}", codes(&p));
}

/// east-2 has redistribution-delay 0 on `#` (the test bed's east cluster), and the new queue has no consumer.
#[tokio::test]
async fn no_consumer_with_redistribution_on_needs_acknowledgement() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "east-2", |_| {}).await;
    let p = run_preview(&source, "east-2", &target, Selection::All).await;
    assert!(has(&p, Kind::NeedsAck, "may-redistribute"), "{:?}", codes(&p));
}

#[tokio::test]
async fn an_invalid_selector_is_refused_in_the_brokers_words() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 3).await;
    let target = target_queue(&queues, "west-1", |_| {}).await;
    // The grammar reads it; the broker's type rule refuses it (an AND of a number): its words are shown.
    let p = run_preview(&source, "west-1", &target, Selection::Filter("color = 'red' AND 5".into())).await;
    let f = p.findings.iter().find(|f| f.code == "invalid-filter").unwrap_or_else(|| panic!("{:?}", codes(&p)));
    assert_eq!(f.kind, Kind::Refused);
    assert!(f.words.contains("AMQ229020"), "{}", f.words);
    // What the grammar cannot read is refused by the product's parser, at its position (`filters::`).
    let p = run_preview(&source, "west-1", &target, Selection::Filter("color = = 'red'".into())).await;
    let f = p.findings.iter().find(|f| f.code == "invalid-filter").unwrap_or_else(|| panic!("{:?}", codes(&p)));
    assert_eq!(
        f.words,
        "The filter cannot be read at position 9: expected a property name, a value or '(', found '='."
    );
}

#[tokio::test]
async fn a_filter_is_counted_exactly_on_a_shallow_queue() {
    let queues = TestQueues::new();
    let source = source_with(&queues, 12).await;
    let target = target_queue(&queues, "west-1", |_| {}).await;
    let p = run_preview(&source, "west-1", &target, Selection::Filter("p_int >= 6000".into())).await;
    assert_eq!(p.selection_size, Some(6), "{:?}", codes(&p));
}

#[tokio::test]
async fn a_node_that_does_not_answer_could_not_be_checked() {
    let queues = TestQueues::new();
    let bed = TestBed::require().await;
    let source = source_with(&queues, 3).await;
    let s = bed.node("east-1");
    let sm = management(s);
    let dead = Endpoint {
        node: "west-9".into(),
        url: "http://127.0.0.1:9/console/jolokia".into(),
        user: "u".into(),
        password: "p".into(),
        origin: None,
        tls: None,
    };
    let tm = BrokerManagement::new(JolokiaClient::new(dead, Duration::from_secs(2)), "west-9");
    let plan = Plan {
        mode: Mode::Move,
        source: queue_ref(s, &source),
        target: QueueRef { cluster: "west".into(), node: "west-9".into(), queue: "q".into(), address: None },
        selection: Selection::All,
        t0_millis: i64::MAX,
        destination: Default::default(),
    };
    let sc = core_addr(s);
    let facts = gather(
        &plan,
        EndAccess { management: &sm, core_addr: Some(&sc) },
        EndAccess { management: &tm, core_addr: Some("127.0.0.1:9") },
        RunFacts::default(),
    )
    .await;
    let p = preview(&plan, &facts, &PreviewSettings::default());
    assert!(has(&p, Kind::Unknown, "target-unreachable"), "{:?}", codes(&p));
    assert!(has(&p, Kind::Unknown, "source-busy-unknown"), "{:?}", codes(&p));
}
