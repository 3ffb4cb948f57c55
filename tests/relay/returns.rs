//! Stop and return to source (SPEC §4.5): a stopped move's staging goes back to the source queue, in-doubt
//! batches are settled first, a target that cannot be reached leaves them in staging and fails the return in
//! words, and a worker that dies during a return is replaced. Judged by the census.

use std::time::Duration;

use serde_json::json;

use testbed::TestBed;

use std::collections::BTreeMap;

use crate::support::{assert_accounting, census, management, queue_ref, source_and_target_of, Census, World};
use artemis_transfer::transfer::actions;
use artemis_transfer::transfer::Selection;

const LIMIT: Duration = Duration::from_secs(300);

/// Every payload id is on the source or on the target exactly once in all, and staging is gone. Returns the census
/// of the source and of the target.
async fn assert_each_once_on_source_or_target(
    run: uuid::Uuid,
    source: &str,
    target: &str,
    ids: &[String],
) -> (BTreeMap<String, usize>, BTreeMap<String, usize>) {
    let bed = TestBed::get();
    let on_source = census(bed.node("east-1"), source).await;
    let on_target = census(bed.node("west-1"), target).await;
    let mut wrong = Vec::new();
    for id in ids {
        let n = on_source.get(id).copied().unwrap_or(0) + on_target.get(id).copied().unwrap_or(0);
        if n != 1 {
            wrong.push(format!("{id}×{n}"));
        }
    }
    assert!(wrong.is_empty(), "not exactly once across source and target: {wrong:?}");
    let staging = format!("studio.transfer.{run}");
    let queues = management(bed.node("east-1")).queues().await.unwrap();
    assert!(!queues.iter().any(|(_, _, q)| q == &staging), "{staging} is still on east-1");
    (on_source, on_target)
}

async fn delivered(world: &World, run: uuid::Uuid) -> i64 {
    let c: serde_json::Value = sqlx::query_scalar("SELECT counters FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    c["delivered"].as_i64().unwrap_or(0)
}

#[tokio::test]
async fn a_stopped_move_returns_what_staging_holds() {
    let (source, target, ids) = source_and_target_of("ret_stop", 300, "text,bytes").await;
    let mut world =
        World::new("return_after_stop", &[("batch_size", json!(20)), ("messages_per_second", json!(100))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    crate::support::wait_for("some batches", LIMIT, || async {
        (delivered(&world, stored.run_id).await >= 60).then_some(())
    })
    .await;
    actions::stop(&world.pool, stored.run_id, "test", "tester").await.unwrap();
    let (_, stopped) = world.wait_run(stored.run_id, &["stopped"], LIMIT).await;
    assert!(stopped.delivered >= 60 && stopped.delivered < 300, "{stopped:?}");
    // What the return will put back.
    let in_staging = census(TestBed::get().node("east-1"), &format!("studio.transfer.{}", stored.run_id)).await;

    actions::return_to_source(&world.pool, stored.run_id, "tester", 10).await.unwrap();
    let (_, returned) = world.wait_run(stored.run_id, &["returned"], LIMIT).await;
    assert_eq!(returned.delivered, stopped.delivered, "a return delivers nothing new: {returned:?}");
    assert!(returned.returned > 0, "staging held messages when the run stopped: {returned:?}");
    let (on_source, _) = assert_each_once_on_source_or_target(stored.run_id, &source, &target, &ids).await;
    // What the target holds is exactly what the run counted as delivered.
    let on_target = census(TestBed::get().node("west-1"), &target).await;
    assert_eq!(on_target.len() as i64, returned.delivered);
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source).returned(&in_staging));
}

#[tokio::test]
async fn a_return_settles_the_batch_in_doubt_and_fails_in_words_while_the_target_is_unreachable() {
    let (source, target, ids) = source_and_target_of("ret_doubt", 100, "text,bytes").await;
    let mut world = World::new("return_in_doubt", &[("batch_size", json!(20))]).await;
    // The worker aborts right after recording its first batch as in doubt: sent or not, nobody knows.
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "in-doubt:1")]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    world.workers[doomed].wait_exit(LIMIT).await;

    // The target becomes unreachable: this test's registry points west's management at a closed port (the live
    // endpoint is found over Jolokia, so nothing reaches west any more).
    let saved: Vec<(String, String)> =
        sqlx::query_as("SELECT core_url, jolokia_url FROM cluster_endpoint WHERE cluster = 'west'")
            .fetch_all(&world.pool)
            .await
            .unwrap();
    sqlx::query(
        "UPDATE cluster_endpoint SET jolokia_url = 'http://127.0.0.1:9/console/jolokia' WHERE cluster = 'west'",
    )
    .execute(&world.pool)
    .await
    .unwrap();
    // Few, quick retries, so the run is Interrupted soon.
    world
        .spawn_worker(
            "w2",
            &[("ARTEMIS_TRANSFER__RETRY__MAX_ATTEMPTS", "2"), ("ARTEMIS_TRANSFER__RETRY__MIN_DELAY_MS", "200")],
        )
        .await;
    world.wait_run(stored.run_id, &["interrupted"], LIMIT).await;
    let in_doubt: serde_json::Value = sqlx::query_scalar("SELECT relay->'in_doubt' FROM transfer_run WHERE id = $1")
        .bind(stored.run_id)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert_eq!(in_doubt.as_array().map(Vec::len), Some(20), "the first batch is in doubt: {in_doubt}");

    // A return cannot settle the batch in doubt: it fails in words, and the batch stays in staging.
    actions::return_to_source(&world.pool, stored.run_id, "tester", 10).await.unwrap();
    world.wait_run(stored.run_id, &["failed"], LIMIT).await;
    let error: String = sqlx::query_scalar("SELECT last_error FROM transfer_run WHERE id = $1")
        .bind(stored.run_id)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert!(error.contains("cannot be reached") && error.contains("in doubt"), "{error}");
    assert_eq!(world.end_code(stored.run_id).await.as_deref(), Some("in-doubt-unsettled"));
    let staged = census(TestBed::get().node("east-1"), &format!("studio.transfer.{}", stored.run_id)).await;
    assert!(staged.len() >= 20, "the batch in doubt stays in staging: {} there", staged.len());

    // The target is back: the return settles the batch (each lands once) and puts the rest back.
    for (core, jolokia) in &saved {
        sqlx::query("UPDATE cluster_endpoint SET jolokia_url = $2 WHERE cluster = 'west' AND core_url = $1")
            .bind(core)
            .bind(jolokia)
            .execute(&world.pool)
            .await
            .unwrap();
    }
    actions::return_to_source(&world.pool, stored.run_id, "tester", 10).await.unwrap();
    let (_, returned) = world.wait_run(stored.run_id, &["returned"], LIMIT).await;
    assert_eq!(returned.delivered, 20, "the settled batch is delivered: {returned:?}");
    let (on_source, on_target) = assert_each_once_on_source_or_target(stored.run_id, &source, &target, &ids).await;
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source));
}

#[tokio::test]
async fn a_worker_that_dies_during_a_return_is_replaced() {
    let (source, target, ids) = source_and_target_of("ret_crash", 200, "text,bytes").await;
    let mut world = World::new("return_crash", &[("batch_size", json!(20)), ("messages_per_second", json!(100))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    crate::support::wait_for("some batches", LIMIT, || async {
        (delivered(&world, stored.run_id).await >= 40).then_some(())
    })
    .await;
    actions::stop(&world.pool, stored.run_id, "test", "tester").await.unwrap();
    world.wait_run(stored.run_id, &["stopped"], LIMIT).await;
    // What the return will put back.
    let in_staging = census(TestBed::get().node("east-1"), &format!("studio.transfer.{}", stored.run_id)).await;
    let w1 = world.workers.remove(0);
    w1.stop().await;

    // This worker aborts right after the broker moved staging back, before it counted or removed anything.
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "return:1")]).await;
    actions::return_to_source(&world.pool, stored.run_id, "tester", 10).await.unwrap();
    world.workers[doomed].wait_exit(LIMIT).await;
    world.spawn_worker("rescuer", &[]).await;
    let (_, returned) = world.wait_run(stored.run_id, &["returned"], LIMIT).await;
    assert!(returned.delivered >= 40, "{returned:?}");
    let (on_source, on_target) = assert_each_once_on_source_or_target(stored.run_id, &source, &target, &ids).await;
    // The run's numbers are the census: what reached the target was delivered, and everything else that entered
    // staging was returned — the crash lost the broker's answer, not the count.
    let bed = TestBed::get();
    assert_eq!(crate::support::census(bed.node("west-1"), &target).await.len() as i64, returned.delivered);
    assert!(returned.returned > 0, "{returned:?}");
    assert_eq!(returned.returned, returned.staged - returned.delivered - returned.dead_lettered, "{returned:?}");
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source).returned(&in_staging));
}
