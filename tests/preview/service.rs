//! The preview service end to end: registry → live endpoints → facts → findings → a stored Previewed run.

use std::collections::BTreeMap;
use std::sync::Once;
use std::time::Duration;

use artemis_transfer::broker::jolokia::QueueConfig;
use artemis_transfer::registry::discover::{discover, Seed};
use artemis_transfer::registry::{store, Cluster, Credentials};
use artemis_transfer::transfer::service::{preview_and_store, PreviewRequest};
use artemis_transfer::transfer::{Kind, Mode, PreviewSettings, QueueRef, Selection};
use sqlx::Row;
use testbed::{TestBed, TestQueues};

/// The registry names credentials `testbed`; the process reads them from its environment.
fn export_credentials(bed: &TestBed) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::env::set_var("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__USER", &bed.nodes[0].user);
        std::env::set_var("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__PASSWORD", &bed.nodes[0].password);
    });
}

async fn registered_pool(bed: &TestBed) -> sqlx::PgPool {
    let url = testbed::postgres::fresh_database("preview_service").await;
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    // Migrations and the settings' defaults: the preview's management calls take permits at the node rate.
    let defaults = artemis_transfer::config::Config::from_sources(None, Vec::new()).unwrap().settings;
    artemis_transfer::jobs::migrate(&pool, &defaults, "test").await.unwrap();
    export_credentials(bed);
    let credentials = Credentials::from_env("testbed").unwrap();
    for (cluster, seed) in [("east", "east-1"), ("west", "west-1")] {
        let seed = Seed { jolokia_url: bed.node(seed).jolokia_url(), core_url: None, jolokia_by_core: BTreeMap::new() };
        let nodes = discover(&seed, &credentials, Duration::from_secs(10)).await.unwrap();
        store::add(&pool, &Cluster { name: cluster.into(), credentials_ref: "testbed".into(), nodes }).await.unwrap();
    }
    // The operators of these tests may move from and send to every cluster (docs/permissions.md).
    sqlx::query(
        "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) \
         SELECT p, '*', 'admin', 'test' FROM unnest(ARRAY['alice', 'bob', 'carol']) AS p",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool
}

fn queue(cluster: &str, node: &str, queue: &str) -> QueueRef {
    QueueRef { cluster: cluster.into(), node: node.into(), queue: queue.into(), address: None }
}

#[tokio::test]
async fn a_preview_is_stored_as_a_previewed_run_bound_by_its_hash() {
    let bed = TestBed::require().await;
    let pool = registered_pool(bed).await;
    let queues = TestQueues::new();
    let source = super::source_with(&queues, 5).await;
    let target = queues.name(bed.node("west-1"), "service_target");
    super::management(bed.node("west-1")).create_queue(&QueueConfig::plain_anycast(&target)).await.unwrap();

    let request = PreviewRequest {
        mode: Mode::Move,
        source: queue("east", "east-1", &source),
        target: queue("west", "west-1", &target),
        selection: Selection::All,
        operator: "alice".into(),
    };
    let stored =
        preview_and_store(&pool, &request, &PreviewSettings::default(), Duration::from_secs(600)).await.unwrap();
    assert!(stored.preview.can_start(), "{:?}", stored.preview.findings);
    assert_eq!(stored.preview.selection_size, Some(5));
    assert!(stored.plan.t0_millis > 1_700_000_000_000, "t0 from the source broker's clock");
    assert_eq!(stored.plan_hash, stored.plan.hash());

    let row = sqlx::query("SELECT state, started_by, plan_hash, plan, preview, preview_expires_at > now() AS valid FROM transfer_run WHERE id = $1")
        .bind(stored.run_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(row.get::<String, _>("state"), "previewed");
    assert_eq!(row.get::<String, _>("started_by"), "alice");
    assert_eq!(row.get::<String, _>("plan_hash"), stored.plan_hash);
    assert!(row.get::<bool, _>("valid"));
    let preview: serde_json::Value = row.get("preview");
    assert_eq!(preview["selection_size"], 5);
    let stored_plan: serde_json::Value = row.get("plan");
    assert_eq!(stored_plan["t0_millis"], stored.plan.t0_millis);
    let text = serde_json::to_string(&preview).unwrap() + &serde_json::to_string(&stored_plan).unwrap();
    assert!(!text.contains(&bed.nodes[0].password), "no secret in the run record");
}

#[tokio::test]
async fn an_unknown_node_or_cluster_is_an_error_in_words() {
    let bed = TestBed::require().await;
    let pool = registered_pool(bed).await;
    let mut request = PreviewRequest {
        mode: Mode::Copy,
        source: queue("east", "east-9", "q"),
        target: queue("west", "west-1", "q"),
        selection: Selection::All,
        operator: "bob".into(),
    };
    let err =
        preview_and_store(&pool, &request, &PreviewSettings::default(), Duration::from_secs(60)).await.unwrap_err();
    assert!(err.to_string().contains("cluster east has no node east-9"), "{err}");
    request.source = queue("north", "n1", "q");
    let err =
        preview_and_store(&pool, &request, &PreviewSettings::default(), Duration::from_secs(60)).await.unwrap_err();
    assert!(err.to_string().contains("no cluster named north"), "{err}");
}

/// Another active run on the target queue is a refusal (two runs would ping-pong messages).
#[tokio::test]
async fn a_target_that_is_the_source_of_an_active_run_is_refused() {
    let bed = TestBed::require().await;
    let pool = registered_pool(bed).await;
    let queues = TestQueues::new();
    let source = super::source_with(&queues, 2).await;
    let target = queues.name(bed.node("west-1"), "pingpong_target");
    super::management(bed.node("west-1")).create_queue(&QueueConfig::plain_anycast(&target)).await.unwrap();
    sqlx::query("INSERT INTO transfer_run (id, state, source_cluster, source_node, source_queue) VALUES ($1, 'running', 'west', 'west-1', $2)")
        .bind(uuid::Uuid::new_v4())
        .bind(&target)
        .execute(&pool)
        .await
        .unwrap();
    let request = PreviewRequest {
        mode: Mode::Move,
        source: queue("east", "east-1", &source),
        target: queue("west", "west-1", &target),
        selection: Selection::All,
        operator: "carol".into(),
    };
    let stored =
        preview_and_store(&pool, &request, &PreviewSettings::default(), Duration::from_secs(60)).await.unwrap();
    assert!(stored.preview.findings.iter().any(|f| f.kind == Kind::Refused && f.code == "target-in-active-run"));
}
