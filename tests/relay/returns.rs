//! Stop and return to source (docs/guarantees.md, "Stop, resume, return"): a stopped move's staging goes back to the source queue, in-doubt
//! batches are settled first, a target that cannot be reached leaves them in staging and fails the return in
//! words, and a worker that dies during a return is replaced. Judged by the census.

use std::time::Duration;

use serde_json::json;

use testbed::TestBed;

use std::collections::BTreeMap;

use crate::support::{
    assert_accounting, census, in_doubt_ids, management, queue_ref, remove_queues, source_and_target_of, Census, World,
};
use artemis_transfer::transfer::actions;
use artemis_transfer::transfer::service::StoredPreview;
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
    let bed = TestBed::get();
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

#[tokio::test]
async fn a_return_settles_the_batch_in_doubt_and_fails_in_words_while_the_target_is_unreachable() {
    let (source, target, ids) = source_and_target_of("ret_doubt", 100, "text,bytes").await;
    let (world, stored, saved, _) = interrupted_with_a_batch_in_doubt("return_in_doubt", &source, &target).await;

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
    restore_west(&world, &saved).await;
    actions::return_to_source(&world.pool, stored.run_id, "tester", 10).await.unwrap();
    let (_, returned) = world.wait_run(stored.run_id, &["returned"], LIMIT).await;
    assert_eq!(returned.delivered, 20, "the settled batch is delivered: {returned:?}");
    let (on_source, on_target) = assert_each_once_on_source_or_target(stored.run_id, &source, &target, &ids).await;
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source));
    let bed = TestBed::get();
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

/// A message of the batch in doubt that the target refuses on its own (the seam) is proven not on the target, as a
/// batch proves its poison: the return goes on, the rest of the batch lands once, and the refused message goes back
/// to the source with the rest of staging. Before the return ran its batch in doubt through the relay's steps, one
/// refused message kept the whole batch in doubt and the return retried until the run was Interrupted.
#[tokio::test]
async fn a_return_sends_its_batch_in_doubt_back_to_the_source_when_the_target_refuses_one_message() {
    let (source, target, ids) = source_and_target_of("ret_refused", 100, "text,bytes").await;
    let (mut world, stored, saved, w2) = interrupted_with_a_batch_in_doubt("return_refused", &source, &target).await;
    world.workers[w2].kill9();
    restore_west(&world, &saved).await;
    let in_doubt = in_doubt_ids(&world, stored.run_id).await;

    // West is back, but it refuses one message of the batch in doubt.
    let staged = census_by_staging_id(stored.run_id, &in_doubt).await;
    let refused = staged.first().cloned().expect("a message of the batch in doubt is in staging");
    let refuse = format!("payload_id={refused}");
    world
        .spawn_worker(
            "w3",
            &[
                ("ARTEMIS_TRANSFER_FAULT_REFUSE", refuse.as_str()),
                ("ARTEMIS_TRANSFER__RETRY__MAX_ATTEMPTS", "2"),
                ("ARTEMIS_TRANSFER__RETRY__MIN_DELAY_MS", "200"),
                ("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "1"),
            ],
        )
        .await;
    let in_staging = census(TestBed::get().node("east-1"), &format!("studio.transfer.{}", stored.run_id)).await;
    actions::return_to_source(&world.pool, stored.run_id, "tester", 10).await.unwrap();
    let (state, returned) = world.wait_run(stored.run_id, &["returned", "interrupted", "failed"], LIMIT).await;
    let error: Option<String> = sqlx::query_scalar("SELECT last_error FROM transfer_run WHERE id = $1")
        .bind(stored.run_id)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert_eq!(state, "returned", "{returned:?}, {error:?}");
    assert_eq!(returned.delivered, 19, "the batch in doubt but its refused message is delivered: {returned:?}");
    assert_eq!(returned.dead_lettered, 0, "a return sends nothing to a dead message queue: {returned:?}");
    let (on_source, on_target) = assert_each_once_on_source_or_target(stored.run_id, &source, &target, &ids).await;
    assert_eq!(on_source.get(&refused), Some(&1), "the refused message is back on the source");
    assert_eq!(on_target.len() as i64, returned.delivered);
    // What the return put back is what staging held but for the batch in doubt it delivered.
    let put_back: BTreeMap<String, usize> =
        in_staging.into_iter().filter(|(id, _)| !on_target.contains_key(id)).collect();
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source).returned(&put_back));
    let bed = TestBed::get();
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

/// A worker killed as a return settles its batch in doubt — right after the target's commit, or right after
/// staging's — is replaced, and the batch lands once: the next attempt sends what is still in staging again (the
/// target's duplicate cache drops what it has) and counts what is gone from staging as delivered.
#[tokio::test]
async fn a_worker_killed_while_a_return_settles_its_batch_in_doubt_is_replaced_and_the_batch_lands_once() {
    tokio::join!(
        killed_while_settling_the_batch_in_doubt("ret_kill_tc", "target-commit"),
        killed_while_settling_the_batch_in_doubt("ret_kill_sc", "source-commit"),
    );
}

/// [`a_worker_killed_while_a_return_settles_its_batch_in_doubt_is_replaced_and_the_batch_lands_once`] at `step`.
async fn killed_while_settling_the_batch_in_doubt(label: &str, step: &str) {
    let (source, target, ids) = source_and_target_of(label, 100, "text,bytes").await;
    let (mut world, stored, saved, w2) = interrupted_with_a_batch_in_doubt(label, &source, &target).await;
    world.workers[w2].kill9();
    restore_west(&world, &saved).await;
    let in_staging = census(TestBed::get().node("east-1"), &format!("studio.transfer.{}", stored.run_id)).await;

    let fault = format!("{step}:1");
    let doomed = world.spawn_worker("doomed_return", &[("ARTEMIS_TRANSFER_FAULT", fault.as_str())]).await;
    actions::return_to_source(&world.pool, stored.run_id, "tester", 10).await.unwrap();
    let status = world.workers[doomed].wait_exit(LIMIT).await;
    assert!(!status.success(), "the worker was meant to abort at {step}, but exited {status}");
    world.spawn_worker("rescuer", &[]).await;
    let (_, returned) = world.wait_run(stored.run_id, &["returned"], LIMIT).await;
    assert_eq!(returned.delivered, 20, "{step}: the batch in doubt is delivered once: {returned:?}");
    let (on_source, on_target) = assert_each_once_on_source_or_target(stored.run_id, &source, &target, &ids).await;
    let put_back: BTreeMap<String, usize> =
        in_staging.into_iter().filter(|(id, _)| !on_target.contains_key(id)).collect();
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source).returned(&put_back));
    let bed = TestBed::get();
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

/// A move of `source` (east-1) to `target` (west-1) in batches of 20 whose worker aborts right after recording its
/// first batch in doubt (sent or not, nobody knows), then Interrupted by a second worker's few quick retries while
/// west cannot be reached: its batch of 20 still in doubt. Returns the world, the run, west's endpoints as they
/// were ([`restore_west`]) and the second worker, still running.
async fn interrupted_with_a_batch_in_doubt(
    label: &str,
    source: &str,
    target: &str,
) -> (World, StoredPreview, Vec<(String, String)>, usize) {
    let mut world = World::new(label, &[("batch_size", json!(20))]).await;
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "in-doubt:1")]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", source), queue_ref("west", "west-1", target), Selection::All)
        .await;
    world.execute(&stored).await;
    world.workers[doomed].wait_exit(LIMIT).await;
    let saved = point_west_at_a_closed_port(&world).await;
    // The job was enqueued with ten attempts: short delays between them keep the wait for Interrupted to seconds.
    let retries = [
        ("ARTEMIS_TRANSFER__RETRY__MAX_ATTEMPTS", "2"),
        ("ARTEMIS_TRANSFER__RETRY__MIN_DELAY_MS", "200"),
        ("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "1"),
    ];
    let w2 = world.spawn_worker("w2", &retries).await;
    world.wait_run(stored.run_id, &["interrupted"], LIMIT).await;
    let in_doubt = in_doubt_ids(&world, stored.run_id).await;
    assert_eq!(in_doubt.len(), 20, "the first batch is in doubt: {in_doubt:?}");
    (world, stored, saved, w2)
}

/// The payload ids of the messages in `run`'s staging whose staging message ids are `ids`.
async fn census_by_staging_id(run: uuid::Uuid, ids: &[i64]) -> Vec<String> {
    let staging = format!("studio.transfer.{run}");
    let browsed = testbed::fidelity::browse(TestBed::get().node("east-1"), &staging).await;
    browsed
        .iter()
        .filter(|m| m.0["message_id"].as_i64().is_some_and(|id| ids.contains(&id)))
        .filter_map(|m| m.payload_id().map(str::to_string))
        .collect()
}

/// Points west's management at a closed port (the live endpoint is found over Jolokia, so nothing reaches west
/// any more); returns what it was.
async fn point_west_at_a_closed_port(world: &World) -> Vec<(String, String)> {
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
    saved
}

/// West's endpoints as [`point_west_at_a_closed_port`] found them.
async fn restore_west(world: &World, saved: &[(String, String)]) {
    for (core, jolokia) in saved {
        sqlx::query("UPDATE cluster_endpoint SET jolokia_url = $2 WHERE cluster = 'west' AND core_url = $1")
            .bind(core)
            .bind(jolokia)
            .execute(&world.pool)
            .await
            .unwrap();
    }
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
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}
