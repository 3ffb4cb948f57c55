//! Failover of the target node mid-move (issue 6, "Brokers"): `west-1`'s primary process is killed while a move
//! east-1 → west-1 runs; the shared-store backup `west-1-backup` becomes live and the run carries on there,
//! because every job re-resolves the node's live endpoint by its NodeID. Judged by the census on the backup.
//!
//! A second test fails west-1 over while a batch is in doubt (issue 14): the backup's duplicate-id cache, read from
//! the shared store's journal, must drop the batch when the run sends it again.
//!
//! Tests that stop a shared test-bed broker have binaries of their own (cargo runs test binaries one after
//! another; the chaos test is the other); these two take turns ([`ONE_AT_A_TIME`]). Whatever happens, each puts
//! the test bed back as it was — `west-1` live, `west-1-backup` passive — with `scripts/testbed up` (a guard runs
//! it on every path, panics included), and checks that it is (`support::west`).

#[allow(dead_code)]
#[path = "../relay/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use artemis_transfer::transfer::{actions, Selection};
use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::{unique_name, TestBed};

use support::west::{fail_west_over, node_status, status, west_as_it_should_be, RestoreTestBed};
use support::{
    assert_accounting, assert_exactly_once, census, create_queue, management, queue_ref, wait_for, Census, World,
};

/// The tests of this binary each fail west-1 over: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_move_carries_on_on_the_backup_when_the_target_primary_is_killed() {
    let _turn = ONE_AT_A_TIME.lock().await;
    const N: u32 = 2000;
    let bed = TestBed::require().await;
    let before = status();
    west_as_it_should_be(&before).expect("the test bed's west cluster must be healthy before the failover test");
    let primary_pid = node_status(&before, "west-1")["pid"].as_u64().expect("west-1's pid");
    let backup_pid = node_status(&before, "west-1-backup")["pid"].as_u64().expect("west-1-backup's pid");

    let source = unique_name("failover_src");
    let target = unique_name("failover_dst");
    create_queue(bed.node("east-1"), &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let prefix = "failover-".to_string();
    let produce = Produce { count: N, prefix: prefix.clone(), durable_only: true, ..Produce::default() };
    fidelity::produce(bed.node("east-1"), &source, &produce).await;
    let ids: Vec<String> = (0..N).map(|i| format!("{prefix}{i}")).collect();

    let mut world = World::new("failover", &[("batch_size", json!(50)), ("messages_per_second", json!(200))]).await;
    // Retries at most 4 s apart while the backup takes over.
    world.spawn_worker("w1", &[("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "4")]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let run = stored.run_id;
    wait_for("the run to deliver 300", Duration::from_secs(120), || async {
        let delivered: i64 =
            sqlx::query_scalar("SELECT coalesce((counters->>'delivered')::bigint, 0) FROM transfer_run WHERE id = $1")
                .bind(run)
                .fetch_one(&world.pool)
                .await
                .unwrap();
        (delivered >= 300).then_some(())
    })
    .await;

    // From here on the test bed is put back whatever happens.
    let mut guard = RestoreTestBed::armed();
    let killed = Instant::now();
    let failover_secs = fail_west_over(bed, primary_pid).await;

    let (mut state, mut counters) = world.wait_run(run, &["succeeded", "interrupted"], Duration::from_secs(240)).await;
    if state == "interrupted" {
        eprintln!("failover: the run was Interrupted while the backup took over; resuming it");
        actions::resume(&world.pool, run, "tester", 10).await.unwrap();
        (state, counters) = world.wait_run(run, &["succeeded"], Duration::from_secs(240)).await;
    }
    let run_secs = killed.elapsed().as_secs_f64();
    assert_eq!(state, "succeeded");
    assert_eq!(counters.delivered, i64::from(N), "{counters:?}");

    // The census on the backup, which holds west-1's journal now.
    let on_backup = census(bed.node("west-1-backup"), &target).await;
    let left = census(bed.node("east-1"), &source).await;
    assert_exactly_once(&ids, &on_backup, &[&left]);
    assert_eq!(on_backup.len(), N as usize);
    assert_accounting(&counters, &Census::moved(&ids, &on_backup, &left));
    let staging = format!("studio.transfer.{run}");
    let east_queues = management(bed.node("east-1")).queues().await.unwrap();
    assert!(!east_queues.iter().any(|(_, _, q)| q == &staging), "{staging} is still on east-1");
    let errors: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT left(last_error, 200) FROM job WHERE run_id = $1 AND last_error IS NOT NULL",
    )
    .bind(run)
    .fetch_all(&world.pool)
    .await
    .unwrap();
    assert!(!errors.is_empty(), "no job of the run saw the primary go: did the kill strike mid-run?");

    // Put the test bed back: west-1 live again (the backup fails back), west-1-backup passive.
    let took = guard.restore().unwrap_or_else(|e| panic!("the test bed could not be restored: {e}"));
    let after = status();
    let new_backup_pid = node_status(&after, "west-1-backup")["pid"].as_u64();
    // The moved messages are on west-1 again after the failback (one journal).
    let on_primary = census(bed.node("west-1"), &target).await;
    assert_exactly_once(&ids, &on_primary, &[]);
    for (node, queue) in [(bed.node("east-1"), &source), (bed.node("west-1"), &target)] {
        management(node).destroy_queue(queue).await.unwrap();
    }
    eprintln!(
        "failover: west-1 (pid {primary_pid}) killed; west-1-backup live {failover_secs:.1} s later; run {state} \
         {run_secs:.1} s after the kill; job errors {errors:#?}; counters {counters:?}; test bed restored in \
         {took:?} (west-1 pid {:?}, west-1-backup pid {backup_pid} → {new_backup_pid:?})",
        node_status(&after, "west-1")["pid"]
    );
}

/// A batch in doubt across a failover (issue 14): the worker dies between its target commit on west-1 and its
/// source acknowledgement (the fault seam), west-1's primary is killed, and the run, taken over by another worker,
/// sends the batch again to the backup — whose duplicate-id cache, persisted in the journal it now serves, drops
/// it whole. Census exact on the backup.
#[tokio::test]
async fn a_batch_in_doubt_across_a_failover_is_dropped_by_the_backups_cache() {
    let _turn = ONE_AT_A_TIME.lock().await;
    const N: u32 = 300;
    let bed = TestBed::require().await;
    let before = status();
    west_as_it_should_be(&before).expect("the test bed's west cluster must be healthy before the failover test");
    let primary_pid = node_status(&before, "west-1")["pid"].as_u64().expect("west-1's pid");

    let (source, target) = (unique_name("failover_doubt_src"), unique_name("failover_doubt_dst"));
    create_queue(bed.node("east-1"), &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let prefix = "failover-doubt-".to_string();
    let produce = Produce { count: N, prefix: prefix.clone(), durable_only: true, ..Produce::default() };
    fidelity::produce(bed.node("east-1"), &source, &produce).await;
    let ids: Vec<String> = (0..N).map(|i| format!("{prefix}{i}")).collect();

    let mut world = World::new("failover_doubt", &[("batch_size", json!(20))]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "target-commit:3")]).await;
    world.execute(&stored).await;
    let run = stored.run_id;
    let status_of_doomed = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status_of_doomed.success(), "the worker was meant to abort after a target commit: {status_of_doomed}");

    let mut guard = RestoreTestBed::armed();
    let failover_secs = fail_west_over(bed, primary_pid).await;
    world.spawn_worker("rescuer", &[("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "4")]).await;
    let (mut state, mut counters) = world.wait_run(run, &["succeeded", "interrupted"], Duration::from_secs(240)).await;
    if state == "interrupted" {
        actions::resume(&world.pool, run, "tester", 10).await.unwrap();
        (state, counters) = world.wait_run(run, &["succeeded"], Duration::from_secs(240)).await;
    }
    let on_backup = census(bed.node("west-1-backup"), &target).await;
    let left = census(bed.node("east-1"), &source).await;
    assert_exactly_once(&ids, &on_backup, &[&left]);
    assert_eq!(counters.selected, Some(i64::from(N)), "{counters:?}");
    assert_eq!(counters.delivered, on_backup.values().sum::<usize>() as i64, "{counters:?}");
    assert_eq!(counters.delivered, i64::from(N), "{counters:?}");
    assert_eq!(counters.already_on_target, 20, "the backup's cache did not drop the batch in doubt: {counters:?}");

    let took = guard.restore().unwrap_or_else(|e| panic!("the test bed could not be restored: {e}"));
    for (node, queue) in [(bed.node("east-1"), &source), (bed.node("west-1"), &target)] {
        management(node).destroy_queue(queue).await.unwrap();
    }
    eprintln!(
        "failover_doubt: west-1 killed with a batch in doubt; backup live in {failover_secs:.1} s; run {state}; \
         counters {counters:?}; test bed restored in {took:?}"
    );
}
