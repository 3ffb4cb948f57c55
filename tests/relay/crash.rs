//! The crash matrix (issue 6): a worker process aborts (the fault seam, as `kill -9` would leave it) right
//! after each step of a relay batch; a fresh worker takes the run over when the lease expires and finishes it.
//! Judged by the census: every selected message on the target exactly once, none left on the source or in
//! staging.

use std::time::Duration;

use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::{unique_name, TestBed};

use crate::support::{
    assert_accounting, assert_exactly_once, census, create_queue, management, queue_ref, remove_queues, Census, World,
};
use artemis_transfer::transfer::Selection;

/// Moves 120 messages in batches of 20 with a worker that aborts at the second time it passes `step`, then
/// lets a second worker finish; checks the census.
async fn crash_after(step: &str, selection_by_ids: bool) {
    let bed = TestBed::require().await;
    let label = format!("crash_{}", step.replace('-', "_"));
    let source = unique_name(&format!("{label}_src"));
    let target = unique_name(&format!("{label}_dst"));
    create_queue(bed.node("east-1"), &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let prefix = format!("{label}-");
    fidelity::produce(
        bed.node("east-1"),
        &source,
        &Produce { count: 120, prefix: prefix.clone(), ..Produce::default() },
    )
    .await;
    let ids: Vec<String> = (0..120).map(|i| format!("{prefix}{i}")).collect();
    let selection = if selection_by_ids {
        let mgmt = management(bed.node("east-1"));
        let mbean = mgmt.queue_mbean(&source, artemis_transfer::broker::jolokia::RoutingType::Anycast, &source);
        let listed = mgmt.list_messages(&mbean, None).await.unwrap();
        Selection::Ids(listed.iter().map(|m| m["messageID"].as_i64().unwrap()).collect())
    } else {
        Selection::All
    };

    let mut world = World::new(&label, &[("batch_size", json!(20))]).await;
    let fault = format!("{step}:2");
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", &fault)]).await;
    let stored =
        world.preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), selection).await;
    world.execute(&stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort at {step}, but exited {status}");

    world.spawn_worker("rescuer", &[]).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], Duration::from_secs(180)).await;
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_eq!(counters.delivered, 120, "{counters:?}");
    // Everything that entered staging was delivered: the run's "held in staging" (staged − delivered) ends at 0.
    assert_eq!(counters.staged, 120, "{counters:?}");

    let on_target = census(bed.node("west-1"), &target).await;
    let left = census(bed.node("east-1"), &source).await;
    assert_exactly_once(&ids, &on_target, &[&left]);
    assert_eq!(on_target.len(), 120);
    assert_accounting(&counters, &Census::moved(&ids, &on_target, &left));
    // The run shows the takeover.
    let events: Vec<String> = sqlx::query_scalar("SELECT kind FROM run_event WHERE run_id = $1 ORDER BY id")
        .bind(stored.run_id)
        .fetch_all(&world.pool)
        .await
        .unwrap();
    assert!(events.iter().any(|e| e.contains("reclaim") || e.contains("lease")), "no takeover event: {events:?}");
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

/// The second refill is the one beside the first batches' send (batch 20, staging topped up to 40 before the
/// first take, then by 20 while each batch sends): the abort leaves a batch in doubt, perhaps committed on the
/// target, and a refill's intent pending, both settled by the next claim's reconcile.
#[tokio::test]
async fn crash_after_refill() {
    crash_after("refill", false).await;
}

#[tokio::test]
async fn crash_after_refill_of_ids() {
    crash_after("refill", true).await;
}

#[tokio::test]
async fn crash_after_receive() {
    crash_after("receive", false).await;
}

#[tokio::test]
async fn crash_after_in_doubt_record() {
    crash_after("in-doubt", false).await;
}

#[tokio::test]
async fn crash_after_target_commit() {
    crash_after("target-commit", false).await;
}

#[tokio::test]
async fn crash_after_source_commit() {
    crash_after("source-commit", false).await;
}

#[tokio::test]
async fn crash_after_postgres_commit() {
    crash_after("pg-commit", false).await;
}
