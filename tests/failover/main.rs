//! Failover of the target node mid-move (issue 6, "Brokers"): `west-1`'s primary process is killed while a move
//! east-1 → west-1 runs; the shared-store backup `west-1-backup` becomes live and the run carries on there,
//! because every job re-resolves the node's live endpoint by its NodeID. Judged by the census on the backup.
//!
//! This is the one test allowed to stop a shared test-bed broker, so it has a binary of its own (cargo runs test
//! binaries one after another) and exactly one test. Whatever happens, it puts the test bed back as it was —
//! `west-1` live, `west-1-backup` passive — with `scripts/testbed up` (a guard runs it on every path, panics
//! included), and checks that it is.

#[allow(dead_code)]
#[path = "../relay/support/mod.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use artemis_transfer::transfer::{actions, Selection};
use serde_json::{json, Value};
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, TestBed};

use support::{assert_exactly_once, census, create_queue, management, queue_ref, wait_for, World};

fn testbed_script() -> std::path::PathBuf {
    testbed::config::repo_root().join("scripts").join("testbed")
}

/// `scripts/testbed status --json`.
fn status() -> Value {
    let out = Command::new(testbed_script()).args(["status", "--json"]).output().expect("run scripts/testbed status");
    assert!(out.status.success(), "scripts/testbed status failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("scripts/testbed status --json prints JSON")
}

fn node_status<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["nodes"].as_array().into_iter().flatten().find(|n| n["name"] == name).expect("the node is in the status")
}

/// `west-1` live and `west-1-backup` passive, as `scripts/testbed up` leaves them; otherwise what is wrong.
fn west_as_it_should_be(status: &Value) -> Result<(), String> {
    let (primary, backup) = (node_status(status, "west-1"), node_status(status, "west-1-backup"));
    let ok = primary["Active"] == json!(true)
        && primary["Backup"] == json!(false)
        && backup["Active"] == json!(false)
        && backup["Backup"] == json!(true)
        && primary["pid"].is_u64()
        && backup["pid"].is_u64();
    if ok {
        Ok(())
    } else {
        Err(format!("west-1: {primary}; west-1-backup: {backup}"))
    }
}

/// Puts the test bed back (`scripts/testbed up`, idempotent) when dropped, unless that was already done.
struct RestoreTestBed {
    restored: bool,
}

impl RestoreTestBed {
    /// Runs `scripts/testbed up` and checks west is as it should be; returns how long it took.
    fn restore(&mut self) -> Result<Duration, String> {
        self.restored = true;
        let started = Instant::now();
        let out = Command::new(testbed_script()).arg("up").output().map_err(|e| format!("scripts/testbed up: {e}"))?;
        if !out.status.success() {
            return Err(format!("scripts/testbed up failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        west_as_it_should_be(&status())?;
        Ok(started.elapsed())
    }
}

impl Drop for RestoreTestBed {
    fn drop(&mut self) {
        if !self.restored {
            match self.restore() {
                Ok(took) => eprintln!("failover: test bed restored after a failure in {took:?}"),
                Err(e) => eprintln!("failover: COULD NOT RESTORE THE TEST BED: {e}; run scripts/testbed up"),
            }
        }
    }
}

#[tokio::test]
async fn a_move_carries_on_on_the_backup_when_the_target_primary_is_killed() {
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
    let mut guard = RestoreTestBed { restored: false };
    let killed = Instant::now();
    let kill = Command::new("kill").args(["-KILL", &primary_pid.to_string()]).status().expect("run kill");
    assert!(kill.success(), "kill -KILL {primary_pid} (west-1) failed");
    let backup = Jolokia::new(bed.node("west-1-backup"));
    wait_for("west-1-backup to become live", Duration::from_secs(120), || async {
        backup.broker_state().await.ok().filter(|s| s["Active"] == json!(true)).map(|_| ())
    })
    .await;
    let failover_secs = killed.elapsed().as_secs_f64();

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
