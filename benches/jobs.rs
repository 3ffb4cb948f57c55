//! `scripts/bench jobs`: throughput and pickup latency of the job engine's production path — the
//! apalis-core-hosted worker, the SKIP LOCKED claim, the fenced transaction that completes a job and
//! enqueues the next — with a no-op handler (it opens the fenced transaction, completes its job and enqueues
//! the next, or ends the run, and commits: the engine's statements and nothing else), against the test bed's
//! Postgres with fsync on. No shortcuts: every job is claimed by a committed claim statement (batched up to the
//! free places) or leased by its predecessor's committed hand-off, and handed off by its own committed transaction.
//!
//! Beside it, in the same run, `pgbench` (the test bed's Postgres 15 binaries, C client, prepared statements) runs
//! the same transaction on the same schema: the ceiling for this work on this machine at this moment. Its script is
//! made from the engine's own SQL files (`src/jobs/sql/`, `$n` → pgbench variables), so the two cannot drift. One
//! job's life in the engine, as the executor runs a continuation (97 % of the jobs here; the engine's claim of a
//! run's first job and of every 32nd, and a run's start and end, are extra work pgbench does not do):
//!
//! ```text
//! BEGIN; SET LOCAL idle_in_transaction_session_timeout = <the lease's length>   -- session::begin_bounded
//! job_lock_fenced          -- lock the run row and the job row while the lease token holds (the fence)
//! job_complete_and_enqueue -- complete the job; insert the next one, already leased to this worker (the claim)
//! COMMIT
//! ```
//!
//! Each pgbench client holds one run's live job, as a worker task does, and carries the next job's id and lease
//! token from one transaction to the next (`\gset`).
//!
//! For 1 and 16 concurrent tasks in one worker (clients of pgbench), over 64 runs (one live job per run, so up to 64
//! jobs could run at once), three repetitions alternating which goes first: prints per case the medians of our
//! jobs/s, pgbench's transactions/s, their ratio, and our pickup latency (the predecessor's commit returning → the
//! job's handler starting) p50/p99. Last line: `jobs_ratio_vs_pgbench: <the lower of the two cases' ratios>`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use artemis_transfer::jobs::executor::ExecutorConfig;
use artemis_transfer::jobs::handler::{Handler, HandlerFuture, JobContext, Outcome, Registry};
use artemis_transfer::jobs::retry::RetryPolicy;
use artemis_transfer::jobs::runtime::ClaimConfig;
use artemis_transfer::jobs::store::{job as jobs, session};
use artemis_transfer::jobs::{runs, settings, NewJob, RunId, RunState};
use artemis_transfer::worker::{self, WorkerOptions};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

const RUNS: usize = 64;

/// Measured repetitions per case; the reported figure is their median.
const REPS: usize = 3;

/// The cases: concurrent tasks (pgbench clients), and jobs per run (so that each side runs for several seconds).
const CASES: [(usize, i64); 2] = [(1, 80), (16, 250)];

/// The lease of a claim and of a continuation, as the worker's default.
const LEASE: Duration = Duration::from_secs(30);

/// The attempts budget written on each job.
const MAX_ATTEMPTS: i32 = 10;

/// The job kind of the no-op handler.
const KIND: &str = "bench-noop";

/// One job as the handler saw it: its run, sequence, start, and when its commit returned.
type Sample = (RunId, i64, Instant, Instant);

/// A no-op handler (its payload is the run's length), timing each job from handler start to commit returned.
#[derive(Clone)]
struct NoOp {
    samples: Arc<Mutex<Vec<Sample>>>,
}

impl Handler for NoOp {
    fn handle<'a>(&'a self, ctx: &'a JobContext) -> HandlerFuture<'a> {
        Box::pin(async move {
            let start = Instant::now();
            let total = ctx.job.payload.as_i64().unwrap_or(1);
            let mut tx = ctx.lease.begin().await?;
            if ctx.job.seq + 1 < total {
                tx.complete_and_enqueue(&NewJob::new(KIND, ctx.job.payload.clone())).await?;
            } else {
                tx.complete_and_end_run(RunState::Succeeded, None).await?;
            }
            let committed = tx.commit().await?;
            self.samples.lock().expect("samples").push((ctx.job.run_id, ctx.job.seq, start, Instant::now()));
            Ok(Outcome::Committed(committed))
        })
    }
}

struct Report {
    concurrency: usize,
    jobs: usize,
    jobs_per_s: f64,
    pickup_p50_ms: f64,
    pickup_p99_ms: f64,
    wal_syncs_per_job: f64,
    /// Share of jobs that went through a claim statement (the rest were continuations of their run's hand-off).
    claimed_share: f64,
    /// Pickup of those, by the database clock: the predecessor's hand-off transaction → the claim.
    claimed_pickup_p50_ms: f64,
    claimed_pickup_p99_ms: f64,
    /// CPU time of this process (the worker, its tokio runtime and sqlx) per job, in microseconds.
    client_cpu_us_per_job: f64,
}

/// The cluster's WAL flush count (`pg_stat_wal.wal_sync`; cluster-wide, so other databases' work counts too).
async fn wal_syncs(pool: &PgPool) -> Result<i64> {
    Ok(sqlx::query_scalar("SELECT wal_sync FROM pg_stat_wal").fetch_one(pool).await?)
}

/// A fresh database with the schema, the defaults, and a cap that lets every run hold a slot.
async fn fresh(label: &str) -> Result<(String, PgPool)> {
    let url = testbed::postgres::fresh_database(label).await;
    let pool = PgPoolOptions::new().max_connections(4).connect(&url).await?;
    let defaults = artemis_transfer::config::Config::from_sources(None, Vec::<(String, String)>::new())?.settings;
    artemis_transfer::jobs::migrate(&pool, &defaults, "bench").await?;
    settings::set(&pool, "concurrent_runs", 64.into(), "bench").await?;
    Ok((url, pool))
}

/// Creates and starts [`RUNS`] runs of `jobs_per_run` no-op jobs each; returns their ids.
async fn start_runs(pool: &PgPool, jobs_per_run: i64) -> Result<Vec<uuid::Uuid>> {
    let mut ids = Vec::new();
    for _ in 0..RUNS {
        let run = RunId::new();
        runs::create(pool, run, Some("bench")).await?;
        runs::start(pool, run, &NewJob::new(KIND, jobs_per_run.into()), "bench", MAX_ATTEMPTS).await?;
        ids.push(run.0);
    }
    Ok(ids)
}

async fn measure(concurrency: usize, jobs_per_run: i64) -> Result<Report> {
    let (url, pool) = fresh(&format!("bench_jobs_{concurrency}")).await?;
    let pool = &pool;
    let url = url.as_str();
    let ids = start_runs(pool, jobs_per_run).await?;
    let samples = Arc::new(Mutex::new(Vec::new()));
    let registry = Registry::new().with(KIND, NoOp { samples: samples.clone() });
    let worker_pool = worker::pool_options(concurrency).connect(url).await?;
    let options = WorkerOptions {
        concurrency,
        claim: ClaimConfig {
            owner: format!("bench-{concurrency}"),
            lease: LEASE,
            poll_interval: Duration::from_secs(1),
            claim_cooldown: Duration::from_millis(20),
            batch: concurrency,
        },
        executor: ExecutorConfig {
            lease: LEASE,
            heartbeat: Duration::from_secs(10),
            deadline: Duration::from_secs(1800),
            retry: RetryPolicy::default(),
        },
        shutdown_timeout: Duration::from_secs(30),
    };
    let syncs_before = wal_syncs(pool).await?;
    let cpu_before = cpu_times()?;
    let stop = tokio_util::sync::CancellationToken::new();
    let signal = stop.clone();
    let worker = tokio::spawn(worker::run(worker_pool, registry, options, async move { signal.cancelled().await }));
    loop {
        let open: i64 =
            sqlx::query_scalar("SELECT count(*) FROM transfer_run WHERE id = ANY($1) AND state <> 'succeeded'")
                .bind(&ids)
                .fetch_one(pool)
                .await?;
        if open == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let syncs = wal_syncs(pool).await? - syncs_before;
    let cpu = cpu_times()?.own - cpu_before.own;
    stop.cancel();
    worker.await?.context("the worker")?;

    // A continued job was leased in its predecessor's hand-off transaction: same now(), so attempted_at equals
    // the predecessor's finished_at. Any other job was claimed by job_claim.
    let (claimed, claimed_p50, claimed_p99): (i64, Option<f64>, Option<f64>) = sqlx::query_as(
        "SELECT count(*), \
                percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.attempted_at - p.finished_at) * 1000), \
                percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM j.attempted_at - p.finished_at) * 1000) \
         FROM job j JOIN job p ON p.run_id = j.run_id AND p.seq = j.seq - 1 \
         WHERE j.attempted_at <> p.finished_at",
    )
    .fetch_one(pool)
    .await?;
    let mut samples = std::mem::take(&mut *samples.lock().expect("samples"));
    samples.sort_by_key(|s| (s.0, s.1));
    let first = samples.iter().map(|s| s.2).min().context("no samples")?;
    let last = samples.iter().map(|s| s.3).max().context("no samples")?;
    let mut pickups: Vec<f64> = samples
        .windows(2)
        .filter(|w| w[0].0 == w[1].0 && w[1].1 == w[0].1 + 1)
        .map(|w| w[1].2.saturating_duration_since(w[0].3).as_secs_f64() * 1000.0)
        .collect();
    pickups.sort_by(f64::total_cmp);
    let pct = |p: f64| pickups[((pickups.len() as f64 - 1.0) * p).round() as usize];
    Ok(Report {
        concurrency,
        jobs: samples.len(),
        jobs_per_s: samples.len() as f64 / (last - first).as_secs_f64(),
        pickup_p50_ms: pct(0.50),
        pickup_p99_ms: pct(0.99),
        wal_syncs_per_job: syncs as f64 / samples.len() as f64,
        claimed_share: (claimed as f64 + RUNS as f64) / samples.len() as f64,
        claimed_pickup_p50_ms: claimed_p50.unwrap_or(f64::NAN),
        claimed_pickup_p99_ms: claimed_p99.unwrap_or(f64::NAN),
        client_cpu_us_per_job: cpu.as_secs_f64() * 1e6 / samples.len() as f64,
    })
}

/// pgbench's figures for one case.
struct PgbenchReport {
    tps: f64,
    latency_ms: f64,
    wal_syncs_per_tx: f64,
    /// pgbench's CPU time per transaction, in microseconds.
    client_cpu_us_per_tx: f64,
}

/// CPU time (user + system) of this process and of its waited-for children, from `/proc/self/stat`.
struct CpuTimes {
    own: Duration,
    children: Duration,
}

fn cpu_times() -> Result<CpuTimes> {
    // Clock ticks: 100 a second on Linux (USER_HZ).
    const TICK: Duration = Duration::from_millis(10);
    let stat = std::fs::read_to_string("/proc/self/stat").context("read /proc/self/stat")?;
    // The fields after the command name, which is in parentheses and may hold spaces: state is field 3, so
    // utime (14), stime (15), cutime (16) and cstime (17) are at 11..=14 here.
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .context("/proc/self/stat has a command name")?
        .1
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = |i: usize| fields.get(i).copied().unwrap_or(0);
    Ok(CpuTimes {
        own: TICK * u32::try_from(ticks(11) + ticks(12)).unwrap_or(u32::MAX),
        children: TICK * u32::try_from(ticks(13) + ticks(14)).unwrap_or(u32::MAX),
    })
}

/// `sql` (one of the engine's statement files) with its leading comment lines dropped and `$1`, `$2`, … replaced by
/// `args` (pgbench variables such as `:id`, or literals).
fn with_arguments(sql: &str, args: &[&str]) -> String {
    let mut statement: String =
        sql.lines().filter(|line| !line.trim_start().starts_with("--")).collect::<Vec<_>>().join("\n");
    // From the highest number down, so `$1` never eats the start of `$10`.
    for (i, arg) in args.iter().enumerate().rev() {
        statement = statement.replace(&format!("${}", i + 1), arg);
    }
    statement.trim().to_owned()
}

/// The pgbench script: one continuation's transaction, statement for statement the engine's (module docs). A
/// client first finds the live job of "its" run (the `client_id`-th); after that the hand-off's `\gset` gives it the
/// next job's `id` and `lease_token`, leased to it, as the executor gets its continuation.
fn pgbench_script() -> String {
    // pgbench sends `BEGIN` and the bound as two commands (prepared mode takes one statement per command).
    let begin = session::begin_bounded(LEASE);
    let lock = with_arguments(include_str!("../src/jobs/sql/job_lock_fenced.sql"), &[":run_id", ":id", ":lease_token"]);
    let hand_off = with_arguments(
        include_str!("../src/jobs/sql/job_complete_and_enqueue.sql"),
        &[
            ":id",
            ":lease_token",
            ":kind",
            ":payload",
            "NULL::timestamptz",
            "0",
            ":max_attempts",
            ":owner",
            ":lease_secs",
        ],
    );
    format!(
        "\\if :id = 0\n\
         SELECT id, lease_token, run_id FROM job WHERE state = 'running' ORDER BY run_id OFFSET :client_id LIMIT 1 \\gset\n\
         \\endif\n\
         {begin};\n{lock};\n{hand_off} \\gset\nCOMMIT;\n"
    )
}

/// Runs the pgbench side of a case: `clients` clients, each `jobs_per_client` transactions, on a fresh database
/// whose [`RUNS`] runs' first jobs are claimed (leased to "pgbench") by the engine's own claim.
async fn measure_pgbench(clients: usize, jobs_per_client: usize) -> Result<PgbenchReport> {
    let (url, pool) = fresh(&format!("bench_pgbench_{clients}")).await?;
    start_runs(&pool, i64::MAX).await?;
    let claimed = jobs::job_claim(&pool, "pgbench", LEASE, RUNS).await?;
    anyhow::ensure!(claimed.len() == RUNS, "claimed {} of {RUNS} first jobs for pgbench", claimed.len());
    let script = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("jobs-pgbench.sql");
    std::fs::write(&script, pgbench_script()).context("write the pgbench script")?;
    let url = url::Url::parse(&url).context("the database URL")?;
    let syncs_before = wal_syncs(&pool).await?;
    let variables = [
        "id=0".to_owned(),
        format!("kind={KIND}"),
        "payload=0".to_owned(),
        format!("max_attempts={MAX_ATTEMPTS}"),
        "owner=pgbench".to_owned(),
        format!("lease_secs={}", LEASE.as_secs()),
    ];
    let mut command = tokio::process::Command::new(testbed::private_postgres::postgres_program("pgbench"));
    command
        .args(["--no-vacuum", "--protocol=prepared", "--jobs=1"])
        .arg(format!("--client={clients}"))
        .arg(format!("--transactions={jobs_per_client}"))
        .args(variables.iter().flat_map(|v| ["--define", v.as_str()]))
        .arg("--file")
        .arg(&script)
        // The connection by environment, so the password is on no command line.
        .env("PGHOST", url.host_str().unwrap_or("127.0.0.1"))
        .env("PGPORT", url.port().unwrap_or(5432).to_string())
        .env("PGUSER", url.username())
        .env("PGPASSWORD", url.password().unwrap_or_default())
        .env("PGDATABASE", url.path().trim_start_matches('/'));
    let cpu_before = cpu_times()?;
    let output = command.output().await.context("run pgbench (the test bed's Postgres binaries)")?;
    let cpu = cpu_times()?.children - cpu_before.children;
    let syncs = wal_syncs(&pool).await? - syncs_before;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "pgbench failed ({}):\n{stdout}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let done: i64 = sqlx::query_scalar("SELECT count(*) FROM job WHERE state = 'completed'").fetch_one(&pool).await?;
    let expected = clients * jobs_per_client;
    anyhow::ensure!(done == expected as i64, "pgbench completed {done} jobs, not {expected}:\n{stdout}");
    Ok(PgbenchReport {
        tps: pgbench_figure(&stdout, "tps = ")?,
        latency_ms: pgbench_figure(&stdout, "latency average = ")?,
        wal_syncs_per_tx: syncs as f64 / expected as f64,
        client_cpu_us_per_tx: cpu.as_secs_f64() * 1e6 / expected as f64,
    })
}

/// The number after `label` on pgbench's summary line that starts with it.
fn pgbench_figure(stdout: &str, label: &str) -> Result<f64> {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no `{label}` line in pgbench's output:\n{stdout}"))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

#[tokio::main]
async fn main() -> Result<()> {
    let (_, pool) = fresh("bench_jobs_settings").await?;
    let fsync: String = sqlx::query_scalar("SELECT current_setting('fsync')").fetch_one(&pool).await?;
    let sync: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')").fetch_one(&pool).await?;
    println!(
        "postgres: fsync={fsync} synchronous_commit={sync}; {RUNS} runs; no-op handler; load average {}",
        load_average()
    );
    let mut lowest = f64::INFINITY;
    for (concurrency, jobs_per_run) in CASES {
        let jobs = RUNS * jobs_per_run as usize;
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for rep in 0..REPS {
            let pgbench_first = rep % 2 == 1;
            if pgbench_first {
                theirs.push(measure_pgbench(concurrency, jobs / concurrency).await?);
            }
            ours.push(measure(concurrency, jobs_per_run).await?);
            if !pgbench_first {
                theirs.push(measure_pgbench(concurrency, jobs / concurrency).await?);
            }
            let (r, p) = (&ours[rep], &theirs[rep]);
            println!(
                "workers={:<2} rep={} jobs={:<6} ours_jobs_per_s={:>6.0} pgbench_tps={:>6.0} ratio={:.2} \
                 pickup_p50_ms={:.2} pickup_p99_ms={:.2} wal_flushes_per_job={:.2} pgbench_wal_flushes_per_tx={:.2} \
                 pgbench_latency_ms={:.2} claimed={:.0}% claimed_pickup_p50_ms={:.2} claimed_pickup_p99_ms={:.2} \
                 client_cpu_us_per_job={:.0} pgbench_cpu_us_per_tx={:.0} load={}",
                r.concurrency,
                rep + 1,
                r.jobs,
                r.jobs_per_s,
                p.tps,
                r.jobs_per_s / p.tps,
                r.pickup_p50_ms,
                r.pickup_p99_ms,
                r.wal_syncs_per_job,
                p.wal_syncs_per_tx,
                p.latency_ms,
                r.claimed_share * 100.0,
                r.claimed_pickup_p50_ms,
                r.claimed_pickup_p99_ms,
                r.client_cpu_us_per_job,
                p.client_cpu_us_per_tx,
                load_average(),
            );
        }
        let ours_median = median(ours.iter().map(|r| r.jobs_per_s).collect());
        let theirs_median = median(theirs.iter().map(|p| p.tps).collect());
        let ratio = ours_median / theirs_median;
        println!(
            "workers={concurrency:<2} median of {REPS}: ours_jobs_per_s={ours_median:.0} pgbench_tps={theirs_median:.0} \
             ratio={ratio:.2} pickup_p50_ms={:.2} pickup_p99_ms={:.2} client_cpu_us_per_job={:.0} \
             pgbench_cpu_us_per_tx={:.0}",
            median(ours.iter().map(|r| r.pickup_p50_ms).collect()),
            median(ours.iter().map(|r| r.pickup_p99_ms).collect()),
            median(ours.iter().map(|r| r.client_cpu_us_per_job).collect()),
            median(theirs.iter().map(|p| p.client_cpu_us_per_tx).collect()),
        );
        lowest = lowest.min(ratio);
    }
    println!("load average at the end: {}", load_average());
    println!("jobs_ratio_vs_pgbench: {lowest:.2}");
    Ok(())
}
