//! Chaos (issue 13, "Prove"): a move and a copy run at once into one target broker on three worker processes
//! while every kind of fault strikes — workers killed with -9 at random, the copy's source broker killed and
//! started again on its journal, brokers frozen with SIGSTOP, Postgres crashed and restarted. Each run must end
//! Succeeded with its own numbers equal to the census taken by the Java client afterwards.
//!
//! It has a binary of its own (cargo runs test binaries one after another) so its load and its frozen brokers
//! never slow another test down. Everything it faults is its own: two scratch brokers and a private Postgres
//! cluster; the move's source is the test bed's east-1, which is never faulted.
//!
//! `CHAOS_FAULTS=<n>` (default 12) sets how many faults strike; the first seven are one of each kind in a fixed
//! order, so every kind strikes while both runs are in flight; the rest are random.

#[allow(dead_code)]
#[path = "../relay/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use artemis_transfer::transfer::relay::state::Counters;
use artemis_transfer::transfer::{actions, Selection};
use serde_json::json;
use sqlx::PgPool;
use testbed::fidelity::{self, Produce};
use testbed::private_postgres::{PrivatePostgres, StopMode};
use testbed::scratch::{ScratchBroker, ScratchOptions};
use testbed::{unique_name, TestBed};
use uuid::Uuid;

use support::{
    assert_exactly_once, census, create_queue, management, queue_ref, register_scratch, scratch_node, wait_for, World,
    SCRATCH_CREDENTIALS,
};

const MOVED: u32 = 20_000;
const COPIED: u32 = 8_000;
const FAULT_EVERY: Duration = Duration::from_secs(4);
const FREEZE: Duration = Duration::from_secs(4);

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `kill -9` of a worker picked at random; a fresh one is started.
    KillWorker,
    /// `kill -9` of the copy's source broker; started again on its journal 3 s later.
    KillCopySource,
    /// SIGSTOP of the target broker (both runs write there) for [`FREEZE`].
    FreezeTarget,
    /// SIGSTOP of the copy's source broker for [`FREEZE`].
    FreezeCopySource,
    /// Postgres stopped as a crash leaves it (`-m immediate`) and started 2 s later (WAL replay).
    CrashPostgres,
}

const ONE_OF_EACH: [Fault; 7] = [
    Fault::KillWorker,
    Fault::KillCopySource,
    Fault::FreezeTarget,
    Fault::KillWorker,
    Fault::CrashPostgres,
    Fault::FreezeCopySource,
    Fault::KillWorker,
];

const RANDOM: [Fault; 6] = [
    Fault::KillWorker,
    Fault::KillWorker,
    Fault::KillWorker,
    Fault::FreezeTarget,
    Fault::FreezeCopySource,
    Fault::CrashPostgres,
];

fn random_below(n: usize) -> usize {
    (Uuid::new_v4().as_u128() % n as u128) as usize
}

/// A run's state and counters, or `None` while Postgres does not answer.
async fn try_progress(pool: &PgPool, run: Uuid) -> Option<(String, Counters)> {
    let (state, counters): (String, serde_json::Value) =
        sqlx::query_as("SELECT state, counters FROM transfer_run WHERE id = $1")
            .bind(run)
            .fetch_one(pool)
            .await
            .ok()?;
    Some((state, serde_json::from_value(counters).ok()?))
}

/// Both runs ended Succeeded.
fn both_succeeded(states: &[(String, Counters)]) -> bool {
    states.iter().all(|(state, _)| state == "succeeded")
}

/// The brokers and database the faults strike.
struct Victims {
    copy_source: ScratchBroker,
    target: ScratchBroker,
    postgres: PrivatePostgres,
}

struct Chaos {
    world: World,
    victims: Victims,
    alive: Vec<usize>,
    next_worker: usize,
    worker_env: Vec<(&'static str, &'static str)>,
}

impl Chaos {
    async fn strike(&mut self, fault: Fault) {
        match fault {
            Fault::KillWorker => {
                // Half the time the worker holding a batch's lease (a kill of an idle worker proves little).
                let holders: Vec<String> = sqlx::query_scalar(
                    "SELECT lease_owner FROM job WHERE state = 'running' AND lease_owner IS NOT NULL",
                )
                .fetch_all(&self.world.pool)
                .await
                .unwrap_or_default();
                let holding: Vec<usize> = (0..self.alive.len())
                    .filter(|i| holders.contains(&self.world.workers[self.alive[*i]].name))
                    .collect();
                let pick = if !holding.is_empty() && random_below(2) == 0 {
                    holding[random_below(holding.len())]
                } else {
                    random_below(self.alive.len())
                };
                let victim = self.alive.remove(pick);
                self.world.workers[victim].kill9();
                let name = format!("w{}", self.next_worker);
                self.next_worker += 1;
                let env = self.worker_env.clone();
                self.alive.push(self.world.spawn_worker(&name, &env).await);
            }
            Fault::KillCopySource => {
                self.victims.copy_source.kill().await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.victims.copy_source.restart().await;
            }
            Fault::FreezeTarget => {
                self.victims.target.pause();
                tokio::time::sleep(FREEZE).await;
                self.victims.target.resume();
            }
            Fault::FreezeCopySource => {
                self.victims.copy_source.pause();
                tokio::time::sleep(FREEZE).await;
                self.victims.copy_source.resume();
            }
            Fault::CrashPostgres => {
                self.victims.postgres.stop(StopMode::Immediate);
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.victims.postgres.start_server();
            }
        }
    }
}

#[tokio::test]
async fn a_move_and_a_copy_under_every_fault_end_with_their_numbers_equal_to_the_census() {
    let faults: usize = std::env::var("CHAOS_FAULTS").ok().and_then(|v| v.parse().ok()).unwrap_or(12);
    let bed = TestBed::require().await;
    let options = || ScratchOptions { web: true, ..ScratchOptions::default() };
    let (copy_source, target, postgres) = tokio::join!(
        ScratchBroker::start_with("chaos_copy_src", options()),
        ScratchBroker::start_with("chaos_dst", options()),
        PrivatePostgres::start("chaos")
    );
    let (copy_node, target_node) = (scratch_node(&copy_source, "copysrc"), scratch_node(&target, "target"));

    // The move: east-1 → target; the copy: copy source → target. Both target queues on one broker.
    let move_source = unique_name("chaos_move_src");
    let move_target = unique_name("chaos_move_dst");
    let copy_from = unique_name("chaos_copy_src");
    let copy_to = unique_name("chaos_copy_dst");
    create_queue(bed.node("east-1"), &move_source).await;
    create_queue(&copy_node, &copy_from).await;
    let move_produce = Produce {
        count: MOVED,
        prefix: "chaos-m-".into(),
        kinds: "bytes,text".into(),
        durable_only: true,
        ..Produce::default()
    };
    let copy_produce = Produce { count: COPIED, prefix: "chaos-c-".into(), durable_only: true, ..Produce::default() };
    tokio::join!(
        fidelity::produce(bed.node("east-1"), &move_source, &move_produce),
        fidelity::produce(&copy_node, &copy_from, &copy_produce)
    );
    let move_ids: Vec<String> = (0..MOVED).map(|i| format!("chaos-m-{i}")).collect();
    let copy_ids: Vec<String> = (0..COPIED).map(|i| format!("chaos-c-{i}")).collect();

    let settings = [("batch_size", json!(100)), ("messages_per_second", json!(400))];
    let world = World::on_database("chaos", postgres.url.clone(), &settings).await;
    register_scratch(&world, "copysrc", &copy_source).await;
    register_scratch(&world, "target", &target).await;
    let mut worker_env: Vec<(&'static str, &'static str)> = SCRATCH_CREDENTIALS.to_vec();
    worker_env.push(("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "4"));
    let mut chaos = Chaos {
        world,
        victims: Victims { copy_source, target, postgres },
        alive: Vec::new(),
        next_worker: 0,
        worker_env,
    };
    for _ in 0..3 {
        let name = format!("w{}", chaos.next_worker);
        chaos.next_worker += 1;
        let env = chaos.worker_env.clone();
        chaos.alive.push(chaos.world.spawn_worker(&name, &env).await);
    }

    let moving = chaos
        .world
        .preview_move(
            queue_ref("east", "east-1", &move_source),
            queue_ref("target", "scratch", &move_target),
            Selection::All,
        )
        .await;
    let copying = chaos
        .world
        .preview_copy(
            queue_ref("copysrc", "scratch", &copy_from),
            queue_ref("target", "scratch", &copy_to),
            Selection::All,
        )
        .await;
    let runs = [moving.run_id, copying.run_id];
    let started = Instant::now();
    chaos.world.execute(&moving).await;
    chaos.world.execute(&copying).await;
    // Strike only once both runs carry messages.
    wait_for("both runs delivering", Duration::from_secs(120), || async {
        let mut delivering = true;
        for run in runs {
            delivering &= try_progress(&chaos.world.pool, run).await.is_some_and(|(_, c)| c.delivered > 0);
        }
        delivering.then_some(())
    })
    .await;

    // Fault after fault; a run the faults Interrupted (its retry budget spent) is resumed, as an operator would.
    let mut log = Vec::new();
    let mut resumes = 0u32;
    let mut struck = 0usize;
    let final_states = loop {
        let pause_until = Instant::now() + FAULT_EVERY;
        let mut states = Vec::new();
        while Instant::now() < pause_until {
            states.clear();
            for run in runs {
                match try_progress(&chaos.world.pool, run).await {
                    Some(progress) => states.push(progress),
                    None => break,
                }
            }
            if states.len() == runs.len() {
                for (run, (state, _)) in runs.iter().zip(&states) {
                    match state.as_str() {
                        "interrupted" if actions::resume(&chaos.world.pool, *run, "tester", 10).await.is_ok() => {
                            resumes += 1;
                        }
                        "failed" | "partial" | "stopped" => {
                            panic!("run {run} ended {state} (worker logs in {})", chaos.world.log_dir.display())
                        }
                        _ => {}
                    }
                }
                if both_succeeded(&states) && struck >= faults.min(ONE_OF_EACH.len()) {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if states.len() == runs.len() && both_succeeded(&states) && struck >= faults.min(ONE_OF_EACH.len()) {
            break states;
        }
        assert!(started.elapsed() < Duration::from_secs(900), "the runs did not end within 15 minutes: {log:#?}");
        if struck >= faults {
            continue;
        }
        let fault = ONE_OF_EACH.get(struck).copied().unwrap_or_else(|| RANDOM[random_below(RANDOM.len())]);
        let during: Vec<String> = states.iter().map(|(s, c)| format!("{s} {}", c.delivered)).collect();
        let at = started.elapsed().as_secs_f64();
        chaos.strike(fault).await;
        log.push(format!("{at:.1} s {fault:?} while {during:?}"));
        struck += 1;
    };
    let took = started.elapsed().as_secs_f64();
    // Every fault of the fixed sequence struck while both runs were still in flight, or the test proved less.
    let early: Vec<&String> = log.iter().take(ONE_OF_EACH.len()).filter(|l| l.contains("succeeded")).collect();
    assert!(early.is_empty(), "a fault of the fixed sequence struck after a run ended: {early:#?}");

    // wait_run also checks that each Succeeded run judged its end against its source broker (end_proof).
    let (_, moved) = chaos.world.wait_run(moving.run_id, &["succeeded"], Duration::from_secs(30)).await;
    let (_, copied) = chaos.world.wait_run(copying.run_id, &["succeeded"], Duration::from_secs(30)).await;
    let target_node = &target_node;

    // The move: every message on the target once, none left on the source; its numbers say exactly that.
    let on_target = census(target_node, &move_target).await;
    let left = census(bed.node("east-1"), &move_source).await;
    assert_exactly_once(&move_ids, &on_target, &[&left]);
    assert_eq!(moved.selected, Some(i64::from(MOVED)), "{moved:?}");
    assert_eq!(moved.delivered, on_target.values().sum::<usize>() as i64, "{moved:?}");
    assert_eq!(moved.delivered, i64::from(MOVED), "{moved:?}");
    assert_eq!(moved.staged, i64::from(MOVED), "{moved:?}");
    assert_eq!((moved.dead_lettered, moved.returned), (0, 0), "{moved:?}");
    assert_eq!(moved.not_taken_in_delivery + moved.not_taken_scheduled + moved.not_taken_gone, 0, "{moved:?}");

    // The copy: every message on the target once and still on its source once; its numbers say exactly that.
    let copies = census(target_node, &copy_to).await;
    let kept = census(&copy_node, &copy_from).await;
    assert_exactly_once(&copy_ids, &copies, &[]);
    assert_exactly_once(&copy_ids, &kept, &[]);
    assert_eq!(copied.selected, Some(i64::from(COPIED)), "{copied:?}");
    assert_eq!(copied.delivered, copies.values().sum::<usize>() as i64, "{copied:?}");
    assert_eq!(copied.delivered, i64::from(COPIED), "{copied:?}");
    assert_eq!(copied.dead_lettered, 0, "{copied:?}");

    let takeovers: i64 = sqlx::query_scalar("SELECT count(*) FROM run_event WHERE kind = 'lease_expired'")
        .fetch_one(&chaos.world.pool)
        .await
        .unwrap();
    assert!(takeovers > 0, "no worker kill struck a batch in flight: the test proved nothing about takeovers");
    let proofs: Vec<String> = sqlx::query_scalar(
        "SELECT detail->>'words' FROM run_event WHERE kind = 'end_proof' AND run_id = ANY($1) ORDER BY id",
    )
    .bind(&runs[..])
    .fetch_all(&chaos.world.pool)
    .await
    .unwrap();
    eprintln!("chaos: end proofs {proofs:#?}");
    eprintln!(
        "chaos: {MOVED} moved and {COPIED} copied in {took:.1} s under {struck} faults ({resumes} resumes, {takeovers} \
         lease takeovers):\n  {}\n  final {final_states:?}",
        log.join("\n  ")
    );
    management(bed.node("east-1")).destroy_queue(&move_source).await.unwrap();
    // The killed workers are gone; the live ones stop cleanly (SIGTERM).
    let mut workers: Vec<_> = chaos.world.workers.drain(..).enumerate().collect();
    for (_, worker) in workers.drain(..).filter(|(i, _)| chaos.alive.contains(i)) {
        worker.stop().await;
    }
}
