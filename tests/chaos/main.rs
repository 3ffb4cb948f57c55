//! Chaos (issues 13 and 14, "Prove"): two moves and a copy write at once into **one target address** — whose
//! duplicate-id cache holds only ten batches, so the runs share its window — on three worker processes, while
//! every kind of fault strikes: workers killed with -9 (half the time the one holding a batch's lease), the
//! copy's source broker killed and started again on its journal, the target and the copy's source frozen with
//! SIGSTOP, Postgres crashed and restarted, and the target node failed over to its backup once. Each run must end
//! Succeeded with its own numbers equal to the census taken by the Java client afterwards: every message on the
//! target once, none left on a move's source, every copied one still on the copy's source.
//!
//! It has a binary of its own (cargo runs test binaries one after another): it fails the test bed's `west-1`
//! over, and its load and frozen brokers must not slow another test down. The move sources are east-1 and east-2
//! (never faulted); the copy's source is a scratch broker; Postgres is a private cluster. Whatever happens, the
//! test bed is put back (`scripts/testbed up`).
//!
//! A second, shorter part (issue 28) moves into the TLS node `secure-1` over TLS (Core with a client certificate,
//! Jolokia over HTTPS) while workers are killed with -9 and `secure-1` itself is killed and started again mid-run;
//! it too must end Succeeded with its numbers equal to the census. The two parts take turns ([`ONE_AT_A_TIME`]):
//! each strikes brokers of the test bed and puts it back with `scripts/testbed up`, which must not run while the
//! other's faults are in flight.
//!
//! Scale by environment: `CHAOS_MESSAGES` per run (default 8,000), `CHAOS_RATE` per run in messages a second
//! (default 100), `CHAOS_FAULTS` (default 13). The first eight faults are one of each kind in a fixed order, so
//! every kind strikes while the runs are in flight; the rest are random. The long run of `docs/BENCHMARKS.md`:
//! `CHAOS_MESSAGES=100000 CHAOS_RATE=80 CHAOS_FAULTS=100000 cargo test --test chaos -- --nocapture`. The TLS
//! part: `CHAOS_TLS_MESSAGES` (default 2,000) at `CHAOS_TLS_RATE` (default 100), about 80 s in CI.

#[allow(dead_code)]
#[path = "../relay/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use artemis_transfer::transfer::relay::state::Counters;
use artemis_transfer::transfer::{actions, Selection};
use serde_json::json;
use sqlx::PgPool;
use testbed::fidelity::{self, Produce};
use testbed::private_postgres::{PrivatePostgres, StopMode};
use testbed::scratch::{ScratchBroker, ScratchOptions};
use testbed::{unique_name, Node, TestBed};
use uuid::Uuid;

use support::west::{self, RestoreTestBed};
use support::{
    census, create_queue, management, queue_ref, register_scratch, register_secure, scratch_node, wait_for, World,
    SCRATCH_CREDENTIALS,
};

const BATCH: u32 = 100;
/// The shared target address's `id-cache-size`: ten batches for three runs, so they take turns around each
/// other's batches in doubt (ADR 0010).
const CACHE: i64 = 1_000;
const FAULT_EVERY: Duration = Duration::from_secs(4);
const FREEZE: Duration = Duration::from_secs(4);

/// One part at a time: see the module doc.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `kill -9` of a worker; a fresh one is started.
    KillWorker,
    /// `kill -9` of the copy's source broker; started again on its journal 3 s later.
    KillCopySource,
    /// SIGSTOP of the live target broker for [`FREEZE`].
    FreezeTarget,
    /// SIGSTOP of the copy's source broker for [`FREEZE`].
    FreezeCopySource,
    /// Postgres stopped as a crash leaves it (`-m immediate`) and started 2 s later (WAL replay).
    CrashPostgres,
    /// `kill -9` of west-1's primary: west-1-backup takes over from the shared store (once).
    FailTargetOver,
}

const ONE_OF_EACH: [Fault; 8] = [
    Fault::KillWorker,
    Fault::KillCopySource,
    Fault::FreezeTarget,
    Fault::KillWorker,
    Fault::CrashPostgres,
    Fault::FailTargetOver,
    Fault::FreezeCopySource,
    Fault::KillWorker,
];

const RANDOM: [Fault; 7] = [
    Fault::KillWorker,
    Fault::KillWorker,
    Fault::KillWorker,
    Fault::FreezeTarget,
    Fault::FreezeCopySource,
    Fault::CrashPostgres,
    Fault::KillCopySource,
];

fn random_below(n: usize) -> usize {
    (Uuid::new_v4().as_u128() % n as u128) as usize
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
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

/// What the faults strike, and the workers.
struct Chaos {
    world: World,
    copy_source: ScratchBroker,
    postgres: PrivatePostgres,
    alive: Vec<usize>,
    next_worker: usize,
    failed_over: bool,
}

impl Chaos {
    fn worker_env() -> Vec<(&'static str, &'static str)> {
        let mut env: Vec<(&'static str, &'static str)> = SCRATCH_CREDENTIALS.to_vec();
        env.push(("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "4"));
        env
    }

    async fn spawn_worker(&mut self) {
        let name = format!("w{}", self.next_worker);
        self.next_worker += 1;
        self.alive.push(self.world.spawn_worker(&name, &Chaos::worker_env()).await);
    }

    /// Strikes `fault`; returns what actually struck (a second failover is a worker kill instead).
    async fn strike(&mut self, bed: &TestBed, fault: Fault) -> Fault {
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
                self.spawn_worker().await;
            }
            Fault::KillCopySource => {
                self.copy_source.kill().await;
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.copy_source.restart().await;
            }
            Fault::FreezeTarget => {
                if let Some((pid, _)) = west::live_west() {
                    let pid = pid.to_string();
                    let _ = std::process::Command::new("kill").args(["-STOP", &pid]).status();
                    tokio::time::sleep(FREEZE).await;
                    let _ = std::process::Command::new("kill").args(["-CONT", &pid]).status();
                }
            }
            Fault::FreezeCopySource => {
                self.copy_source.pause();
                tokio::time::sleep(FREEZE).await;
                self.copy_source.resume();
            }
            Fault::CrashPostgres => {
                self.postgres.stop(StopMode::Immediate);
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.postgres.start_server();
            }
            Fault::FailTargetOver if self.failed_over => return Box::pin(self.strike(bed, Fault::KillWorker)).await,
            Fault::FailTargetOver => {
                let primary = west::node_status(&west::status(), "west-1")["pid"].as_u64().expect("west-1's pid");
                west::fail_west_over(bed, primary).await;
                self.failed_over = true;
            }
        }
        fault
    }
}

/// One run of the chaos: what it carries and from where.
struct Run {
    label: &'static str,
    prefix: String,
    source: Node,
    queue: String,
    copy: bool,
    id: Uuid,
}

#[tokio::test]
async fn two_moves_and_a_copy_into_one_address_under_every_fault_end_with_their_numbers_equal_to_the_census() {
    let messages: u32 = env_or("CHAOS_MESSAGES", 8_000);
    let rate: f64 = env_or("CHAOS_RATE", 100.0);
    let faults: usize = env_or("CHAOS_FAULTS", 13);
    let _one = ONE_AT_A_TIME.lock().await;
    let bed = TestBed::require().await;
    west::west_as_it_should_be(&west::status()).expect("the test bed's west cluster must be healthy first");
    let options = ScratchOptions { web: true, ..ScratchOptions::default() };
    let (copy_source, postgres) =
        tokio::join!(ScratchBroker::start_with("chaos_copy_src", options), PrivatePostgres::start("chaos"));
    let copy_node = scratch_node(&copy_source, "copysrc");

    // One target address on west-1 for all three runs, its cache set before the first duplicate id makes it.
    let target = unique_name("chaos_shared_dst");
    let west_1 = management(bed.node("west-1"));
    west_1.add_address_settings(&target, &json!({ "idCacheSize": CACHE })).await.unwrap();
    create_queue(bed.node("west-1"), &target).await;
    let mut runs = vec![
        Run {
            label: "move A",
            prefix: "chaos-a-".into(),
            source: bed.node("east-1").clone(),
            queue: unique_name("chaos_a_src"),
            copy: false,
            id: Uuid::nil(),
        },
        Run {
            label: "move B",
            prefix: "chaos-b-".into(),
            source: bed.node("east-2").clone(),
            queue: unique_name("chaos_b_src"),
            copy: false,
            id: Uuid::nil(),
        },
        Run {
            label: "copy C",
            prefix: "chaos-c-".into(),
            source: copy_node.clone(),
            queue: unique_name("chaos_c_src"),
            copy: true,
            id: Uuid::nil(),
        },
    ];
    let produced = Instant::now();
    for run in &runs {
        create_queue(&run.source, &run.queue).await;
    }
    let kinds = |copy: bool| if copy { Produce::default().kinds } else { "bytes,text".to_string() };
    futures_util::future::join_all(runs.iter().map(|run| {
        let produce = Produce {
            count: messages,
            prefix: run.prefix.clone(),
            kinds: kinds(run.copy),
            durable_only: true,
            ..Produce::default()
        };
        let (node, queue) = (run.source.clone(), run.queue.clone());
        async move { fidelity::produce(&node, &queue, &produce).await }
    }))
    .await;
    let produce_secs = produced.elapsed().as_secs_f64();

    let settings = [("batch_size", json!(BATCH)), ("messages_per_second", json!(rate))];
    let world = World::on_database("chaos", postgres.url.clone(), &settings).await;
    register_scratch(&world, "copysrc", &copy_source).await;
    let mut chaos = Chaos { world, copy_source, postgres, alive: Vec::new(), next_worker: 0, failed_over: false };
    for _ in 0..3 {
        chaos.spawn_worker().await;
    }
    let mut stored = Vec::new();
    for run in &mut runs {
        let cluster = if run.copy { "copysrc" } else { "east" };
        let from = queue_ref(cluster, &run.source.name, &run.queue);
        let to = queue_ref("west", "west-1", &target);
        let preview = if run.copy {
            chaos.world.preview_copy(from, to, Selection::All).await
        } else {
            chaos.world.preview_move(from, to, Selection::All).await
        };
        run.id = preview.run_id;
        stored.push(preview);
    }
    let mut guard = RestoreTestBed::armed();
    let started = Instant::now();
    for preview in &stored {
        chaos.world.execute(preview).await;
    }
    let ids: Vec<Uuid> = runs.iter().map(|r| r.id).collect();
    // Strike only once every run carries messages.
    wait_for("every run delivering", Duration::from_secs(180), || async {
        let mut delivering = true;
        for run in &ids {
            delivering &= try_progress(&chaos.world.pool, *run).await.is_some_and(|(_, c)| c.delivered > 0);
        }
        delivering.then_some(())
    })
    .await;

    // Fault after fault; a run the faults Interrupted (its retry budget spent) is resumed, as an operator would.
    let mut log = Vec::new();
    let mut resumes = 0u32;
    let mut struck = 0usize;
    let enough = faults.min(ONE_OF_EACH.len());
    loop {
        let pause_until = Instant::now() + FAULT_EVERY;
        let mut states: Vec<(String, Counters)> = Vec::new();
        while Instant::now() < pause_until {
            states.clear();
            for run in &ids {
                match try_progress(&chaos.world.pool, *run).await {
                    Some(progress) => states.push(progress),
                    None => break,
                }
            }
            if states.len() == ids.len() {
                for (run, (state, _)) in ids.iter().zip(&states) {
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
                if states.iter().all(|(s, _)| s == "succeeded") && struck >= enough {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if states.len() == ids.len() && states.iter().all(|(s, _)| s == "succeeded") && struck >= enough {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(3 * 3600), "the runs did not end within 3 hours: {log:#?}");
        if struck >= faults {
            continue;
        }
        let fault = ONE_OF_EACH.get(struck).copied().unwrap_or_else(|| RANDOM[random_below(RANDOM.len())]);
        let during: Vec<String> = states.iter().map(|(s, c)| format!("{s} {}", c.delivered)).collect();
        let at = started.elapsed().as_secs_f64();
        let done = chaos.strike(bed, fault).await;
        log.push(format!("{at:.1} s {done:?} while {during:?}"));
        struck += 1;
    }
    let took = started.elapsed().as_secs_f64();
    // Every fault of the fixed sequence struck while every run was still in flight, or the test proved less.
    let early: Vec<&String> = log.iter().take(ONE_OF_EACH.len()).filter(|l| l.contains("succeeded")).collect();
    assert!(early.is_empty(), "a fault of the fixed sequence struck after a run ended: {early:#?}");

    // wait_run also checks that each Succeeded run judged its end against its source broker (end_proof).
    let mut counters = BTreeMap::new();
    for run in &runs {
        counters.insert(run.label, chaos.world.wait_run(run.id, &["succeeded"], Duration::from_secs(30)).await.1);
    }
    // West back as it was (west-1 live again, failed back from the shared store): the census is taken there.
    let restored = guard.restore().unwrap_or_else(|e| panic!("the test bed could not be restored: {e}"));
    let on_target = census(bed.node("west-1"), &target).await;
    let known: usize = runs.len() * messages as usize;
    assert_eq!(on_target.len(), known, "the target holds ids no run sent, or misses some");
    for run in &runs {
        let c = &counters[run.label];
        let expected: Vec<String> = (0..messages).map(|i| format!("{}{i}", run.prefix)).collect();
        let landed: Vec<usize> = expected.iter().map(|id| on_target.get(id).copied().unwrap_or(0)).collect();
        let missing = landed.iter().filter(|n| **n == 0).count();
        let doubled = landed.iter().filter(|n| **n > 1).count();
        assert_eq!((missing, doubled), (0, 0), "{}: missing {missing}, doubled {doubled}; {c:?}", run.label);
        let on_source = census(&run.source, &run.queue).await;
        assert_eq!(c.selected, Some(i64::from(messages)), "{}: {c:?}", run.label);
        assert_eq!(c.delivered, landed.iter().sum::<usize>() as i64, "{}: {c:?}", run.label);
        assert_eq!(c.dead_lettered + c.returned + c.not_taken(), 0, "{}: {c:?}", run.label);
        if run.copy {
            // A copy leaves every message on its source, once.
            let kept = expected.iter().filter(|id| on_source.get(*id) == Some(&1)).count();
            assert_eq!((kept, on_source.len()), (expected.len(), expected.len()), "{}: the source changed", run.label);
        } else {
            assert!(on_source.is_empty(), "{}: {} left on the source", run.label, on_source.len());
            assert_eq!(c.staged, i64::from(messages), "{}: {c:?}", run.label);
        }
    }

    let count = |kind: &'static str| {
        let pool = chaos.world.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM run_event WHERE kind = $1")
                .bind(kind)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let (takeovers, waits) = (count("lease_expired").await, count("waiting_for_room").await);
    assert!(takeovers > 0, "no worker kill struck a batch in flight: the test proved nothing about takeovers");
    let already: i64 = counters.values().map(|c| c.already_on_target).sum();
    let proofs: Vec<String> = sqlx::query_scalar(
        "SELECT detail->>'words' FROM run_event WHERE kind = 'end_proof' AND run_id = ANY($1) ORDER BY id",
    )
    .bind(&ids[..])
    .fetch_all(&chaos.world.pool)
    .await
    .unwrap();
    eprintln!(
        "chaos: 3 runs × {messages} messages (produced in {produce_secs:.0} s) into one address (id-cache-size \
         {CACHE}, batch {BATCH}, {rate} msg/s a run) in {took:.0} s under {struck} faults: {resumes} resumes, \
         {takeovers} lease takeovers, {waits} waits for the duplicate-id window, {already} messages dropped as \
         already on the target; census exact; test bed restored in {restored:?}\n  {}\n  end proofs {proofs:#?}\n  \
         counters {counters:#?}",
        log.join("\n  ")
    );
    west_1.destroy_queue(&target).await.unwrap();
    let _ = west_1.remove_address_settings(&target).await;
    for run in runs.iter().filter(|r| !r.copy) {
        management(&run.source).destroy_queue(&run.queue).await.unwrap();
    }
    // The killed workers are gone; the live ones stop cleanly (SIGTERM).
    let alive = chaos.alive.clone();
    for (_, worker) in chaos.world.workers.drain(..).enumerate().filter(|(i, _)| alive.contains(i)) {
        worker.stop().await;
    }
}

/// What strikes the TLS part, in order, once the run carries messages: each fault after its pause from the end of
/// the one before. The last comes soon after secure-1 is back, while the run catches up (its rate limit lets it
/// move a burst then), so that it strikes in flight.
const TLS_FAULTS: [(Duration, TlsFault); 3] = [
    (Duration::from_secs(4), TlsFault::KillWorker),
    (Duration::from_secs(4), TlsFault::RestartSecure),
    (Duration::from_secs(1), TlsFault::KillWorker),
];

/// A fault of the TLS part.
#[derive(Debug, Clone, Copy)]
enum TlsFault {
    /// `kill -9` of a worker (the one holding the batch's lease when there is one); a fresh one is started.
    KillWorker,
    /// `kill -9` of secure-1, the run's target; started again on its journal by `scripts/testbed up` 3 s later.
    RestartSecure,
}

/// Kills the worker holding a running job's lease (else the first alive) with -9 and starts a fresh one.
async fn kill_a_worker(world: &mut World, alive: &mut Vec<usize>, spawned: &mut usize) {
    let holders: Vec<String> =
        sqlx::query_scalar("SELECT lease_owner FROM job WHERE state = 'running' AND lease_owner IS NOT NULL")
            .fetch_all(&world.pool)
            .await
            .unwrap_or_default();
    let pick = (0..alive.len()).find(|i| holders.contains(&world.workers[alive[*i]].name)).unwrap_or(0);
    world.workers[alive.remove(pick)].kill9();
    *spawned += 1;
    alive.push(world.spawn_worker(&format!("t{spawned}"), &Chaos::worker_env()).await);
}

/// Kills secure-1 (-9) and starts it again on its journal; how long it was away.
fn restart_secure(guard: &mut RestoreTestBed) -> Duration {
    let killed = Instant::now();
    let pid = west::node_status(&west::status(), "secure-1")["pid"].as_u64().expect("secure-1's pid");
    let kill = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().expect("run kill");
    assert!(kill.success(), "kill -KILL {pid} (secure-1) failed");
    std::thread::sleep(Duration::from_secs(3));
    guard.restore().unwrap_or_else(|e| panic!("secure-1 could not be started again: {e}"));
    killed.elapsed()
}

#[tokio::test]
async fn a_move_into_the_tls_node_under_worker_kills_and_its_restart_ends_with_its_numbers_equal_to_the_census() {
    let messages: u32 = env_or("CHAOS_TLS_MESSAGES", 2_000);
    let rate: f64 = env_or("CHAOS_TLS_RATE", 100.0);
    let _one = ONE_AT_A_TIME.lock().await;
    let began = Instant::now();
    let bed = TestBed::require().await;
    let (east, secure) = (bed.node("east-1"), bed.node("secure-1"));
    let (source, target) = (unique_name("chaos_tls_src"), unique_name("chaos_tls_dst"));
    create_queue(east, &source).await;
    create_queue(secure, &target).await;
    let produce = Produce {
        count: messages,
        prefix: "chaos-tls-".into(),
        kinds: "bytes,text".into(),
        durable_only: true,
        ..Produce::default()
    };
    fidelity::produce(east, &source, &produce).await;
    let settings = [("batch_size", json!(BATCH)), ("messages_per_second", json!(rate))];
    let mut world = World::new("chaos_tls", &settings).await;
    register_secure(&world).await;
    let (mut alive, mut spawned) = (Vec::new(), 0usize);
    for name in ["t0", "t1"] {
        alive.push(world.spawn_worker(name, &Chaos::worker_env()).await);
    }
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("secure", "secure-1", &target), Selection::All)
        .await;
    let run = stored.run_id;
    let mut guard = RestoreTestBed::armed();
    let started = Instant::now();
    world.execute(&stored).await;
    wait_for("the run delivering", Duration::from_secs(120), || async {
        try_progress(&world.pool, run).await.filter(|(_, c)| c.delivered > 0).map(|_| ())
    })
    .await;

    let (mut log, mut resumes, mut away) = (Vec::new(), 0u32, Duration::ZERO);
    let mut faults = TLS_FAULTS.iter().peekable();
    let mut last_fault = Instant::now();
    loop {
        match try_progress(&world.pool, run).await {
            Some((state, _)) if state == "succeeded" => break,
            Some((state, _)) if state == "interrupted" => {
                resumes += u32::from(actions::resume(&world.pool, run, "tester", 10).await.is_ok());
            }
            Some((state, c)) if ["failed", "partial", "stopped"].contains(&state.as_str()) => {
                panic!("the run ended {state} ({c:?}; worker logs in {})", world.log_dir.display())
            }
            _ => {}
        }
        if let Some((_, fault)) = faults.next_if(|(pause, _)| last_fault.elapsed() >= *pause) {
            let delivered = try_progress(&world.pool, run).await.map(|(s, c)| format!("{s} {}", c.delivered));
            log.push(format!("{:.1} s {fault:?} while {delivered:?}", started.elapsed().as_secs_f64()));
            match fault {
                TlsFault::KillWorker => kill_a_worker(&mut world, &mut alive, &mut spawned).await,
                TlsFault::RestartSecure => away = restart_secure(&mut guard),
            }
            last_fault = Instant::now();
        }
        assert!(started.elapsed() < Duration::from_secs(600), "the run did not end within 10 minutes: {log:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let took = started.elapsed().as_secs_f64();
    assert!(faults.next().is_none(), "the run ended before every fault struck: {log:#?}");
    let late: Vec<&String> = log.iter().filter(|l| l.contains("succeeded")).collect();
    assert!(late.is_empty(), "a fault struck after the run ended: {late:#?}");

    let (_, c) = world.wait_run(run, &["succeeded"], Duration::from_secs(30)).await;
    let on_target = census(secure, &target).await;
    let expected: Vec<String> = (0..messages).map(|i| format!("chaos-tls-{i}")).collect();
    let missing = expected.iter().filter(|id| !on_target.contains_key(*id)).count();
    let doubled = on_target.values().filter(|n| **n > 1).count();
    assert_eq!((missing, doubled, on_target.len()), (0, 0, expected.len()), "the census of the target; {c:?}");
    assert!(census(east, &source).await.is_empty(), "messages left on the source; {c:?}");
    assert_eq!(c.selected, Some(i64::from(messages)), "{c:?}");
    assert_eq!((c.delivered, c.staged), (i64::from(messages), i64::from(messages)), "{c:?}");
    assert_eq!(c.dead_lettered + c.returned + c.not_taken(), 0, "{c:?}");
    eprintln!(
        "chaos over TLS: {messages} messages east-1 -> secure-1 at {rate} msg/s in {took:.0} s ({:.0} s in all) \
         under {} faults (secure-1 away {away:?}), {resumes} resumes; census exact\n  {}",
        began.elapsed().as_secs_f64(),
        log.len(),
        log.join("\n  ")
    );
    management(east).destroy_queue(&source).await.unwrap();
    management(secure).destroy_queue(&target).await.unwrap();
    // The killed workers are gone; the live ones stop cleanly (SIGTERM).
    for (_, worker) in world.workers.drain(..).enumerate().filter(|(i, _)| alive.contains(i)) {
        worker.stop().await;
    }
}
