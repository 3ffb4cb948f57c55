//! Runs with a TLS-only broker at one end (issue 28): the test bed's `secure-1` speaks Core over TLS only and serves
//! Jolokia over HTTPS only, requiring a client certificate, all signed by the test bed's private CA. Registered
//! as an operator would (its Core URL with the TLS parameters), it is then moved to, copied from and returned to
//! like any node; every run is judged by the census of the Java client, which reaches the TLS node through its
//! own TLS (the PEM trust and key stores of the distribution's `pem-keystore`), never by a plain side door.

use std::time::Duration;

use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::{unique_name, Node, TestBed};

use crate::support::{
    assert_accounting, census, create_queue, queue_ref, register_secure, remove_queues, wait_for, Census, World,
};
use artemis_transfer::transfer::{actions, Selection};

const LIMIT: Duration = Duration::from_secs(180);

fn secure() -> &'static Node {
    TestBed::get().node("secure-1")
}

/// A queue on `from` holding `count` text and bytes messages (payload ids `<label>-<n>`), an empty one on `to`.
async fn queues(label: &str, from: &Node, to: &Node, count: u32) -> (String, String, Vec<String>) {
    let source = unique_name(&format!("{label}_src"));
    let target = unique_name(&format!("{label}_dst"));
    create_queue(from, &source).await;
    create_queue(to, &target).await;
    let prefix = format!("{label}-");
    let produce = Produce { count, prefix: prefix.clone(), kinds: "text,bytes".into(), ..Produce::default() };
    fidelity::produce(from, &source, &produce).await;
    (source, target, (0..count).map(|i| format!("{prefix}{i}")).collect())
}

/// A move from a plain node to the TLS node: previewed over HTTPS, relayed over Core TLS, judged by the census.
#[tokio::test]
async fn a_move_to_a_tls_node_is_judged_by_the_census() {
    let bed = TestBed::require().await;
    let (source, target, ids) = queues("tls_move", bed.node("east-1"), secure(), 120).await;
    let mut world = World::new("tls_move", &[("batch_size", json!(40))]).await;
    register_secure(&world).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("secure", "secure-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], LIMIT).await;
    assert_eq!(state, "succeeded");
    assert_eq!(counters.delivered, 120, "{counters:?}");
    let on_target = census(secure(), &target).await;
    let left = census(bed.node("east-1"), &source).await;
    assert_accounting(&counters, &Census::moved(&ids, &on_target, &left));
    assert_no_key_material(&world).await;
    remove_queues(&[(bed.node("east-1"), &source), (secure(), &target)]).await;
}

/// Nothing the run left behind — its record, its events, the registry's rows, the worker's log — holds a line of
/// the client's private key or the broker password. The registry holds the key's path, never what it holds.
async fn assert_no_key_material(world: &World) {
    let key = std::fs::read_to_string(secure().tls.as_ref().unwrap().client_key_pem()).unwrap();
    let secrets: Vec<&str> =
        key.lines().filter(|l| !l.starts_with("-----") && l.len() > 16).chain([secure().password.as_str()]).collect();
    let mut texts: Vec<(String, String)> = Vec::new();
    for table in ["transfer_run", "run_event", "cluster", "cluster_node", "cluster_endpoint", "audit", "job"] {
        let rows: Vec<String> = sqlx::query_scalar(&format!("SELECT row_to_json(t)::text FROM {table} t"))
            .fetch_all(&world.pool)
            .await
            .unwrap();
        texts.push((table.to_string(), rows.join("\n")));
    }
    for entry in std::fs::read_dir(&world.log_dir).unwrap() {
        let path = entry.unwrap().path();
        texts.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap_or_default()));
    }
    assert!(texts.iter().any(|(place, text)| place.ends_with(".log") && !text.is_empty()), "no worker log was read");
    let endpoints = &texts.iter().find(|(t, _)| t == "cluster_endpoint").unwrap().1;
    assert!(endpoints.contains("client-bundle.pem"), "the registry holds the key's path: {endpoints}");
    for (place, text) in &texts {
        for secret in &secrets {
            assert!(!text.contains(secret), "{place} holds a secret (a key line or the password)");
        }
    }
}

/// A copy from the TLS node: browsed over Core TLS, the source untouched, judged by the census.
#[tokio::test]
async fn a_copy_from_a_tls_node_is_judged_by_the_census() {
    let bed = TestBed::require().await;
    let (source, target, ids) = queues("tls_copy", secure(), bed.node("east-1"), 80).await;
    let mut world = World::new("tls_copy", &[("batch_size", json!(30))]).await;
    register_secure(&world).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_copy(queue_ref("secure", "secure-1", &source), queue_ref("east", "east-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (_, counters) = world.wait_run(stored.run_id, &["succeeded"], LIMIT).await;
    assert_eq!(counters.delivered, 80, "{counters:?}");
    let on_target = census(bed.node("east-1"), &target).await;
    let on_source = census(secure(), &source).await;
    assert_accounting(&counters, &Census::copied(&ids, &on_target, &on_source));
    remove_queues(&[(secure(), &source), (bed.node("east-1"), &target)]).await;
}

/// A move from the TLS node, stopped part way and returned: staging on the TLS node, the return's broker-side
/// move over HTTPS, every message once on the source or the target.
#[tokio::test]
async fn a_stopped_move_from_a_tls_node_returns_what_staging_holds() {
    let bed = TestBed::require().await;
    let (source, target, ids) = queues("tls_return", secure(), bed.node("east-1"), 200).await;
    let mut world = World::new("tls_return", &[("batch_size", json!(20)), ("messages_per_second", json!(100))]).await;
    register_secure(&world).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("secure", "secure-1", &source), queue_ref("east", "east-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let run = stored.run_id;
    wait_for("some batches", LIMIT, || async {
        let c: serde_json::Value = sqlx::query_scalar("SELECT counters FROM transfer_run WHERE id = $1")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
        (c["delivered"].as_i64().unwrap_or(0) >= 40).then_some(())
    })
    .await;
    actions::stop(&world.pool, run, "test", "tester").await.unwrap();
    world.wait_run(run, &["stopped"], LIMIT).await;
    let in_staging = census(secure(), &format!("studio.transfer.{run}")).await;
    actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
    let (_, returned) = world.wait_run(run, &["returned"], LIMIT).await;
    assert!(returned.returned > 0, "staging held messages when the run stopped: {returned:?}");
    let on_source = census(secure(), &source).await;
    let on_target = census(bed.node("east-1"), &target).await;
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source).returned(&in_staging));
    remove_queues(&[(secure(), &source), (bed.node("east-1"), &target)]).await;
}
