//! `scripts/bench jobs`: throughput and pickup latency of the job engine's production path — the
//! apalis-core-hosted worker, the SKIP LOCKED claim, the fenced transaction that completes a job and
//! enqueues the next — with a no-op handler (it opens the fenced transaction, completes its job and enqueues
//! the next, or ends the run, and commits: the engine's statements and nothing else), against the test bed's
//! Postgres with fsync on. No shortcuts: every job is claimed by a committed claim statement (batched up to the
//! free places) and handed off by its own committed transaction.
//!
//! For 1, 4 and 16 concurrent tasks in one worker, over 64 runs (one live job per run, so up to 64 jobs
//! could run at once): prints jobs/s (claimed and completed) and pickup latency (the predecessor's commit
//! returning → the job's handler starting) p50/p99. Last line: `jobs_per_s: <best>`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use artemis_transfer::jobs::executor::ExecutorConfig;
use artemis_transfer::jobs::handler::{Handler, HandlerFuture, JobContext, Outcome, Registry};
use artemis_transfer::jobs::retry::RetryPolicy;
use artemis_transfer::jobs::runtime::ClaimConfig;
use artemis_transfer::jobs::{runs, settings, NewJob, RunId, RunState};
use artemis_transfer::worker::{self, WorkerOptions};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

const RUNS: usize = 64;

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

async fn measure(concurrency: usize, jobs_per_run: i64) -> Result<Report> {
    let (url, pool) = fresh(&format!("bench_jobs_{concurrency}")).await?;
    let pool = &pool;
    let url = url.as_str();
    let mut ids = Vec::new();
    for _ in 0..RUNS {
        let run = RunId::new();
        runs::create(pool, run, Some("bench")).await?;
        runs::start(pool, run, &NewJob::new(KIND, jobs_per_run.into()), "bench", 10).await?;
        ids.push(run.0);
    }
    let samples = Arc::new(Mutex::new(Vec::new()));
    let registry = Registry::new().with(KIND, NoOp { samples: samples.clone() });
    let worker_pool = worker::pool_options(concurrency).connect(url).await?;
    let options = WorkerOptions {
        concurrency,
        claim: ClaimConfig {
            owner: format!("bench-{concurrency}"),
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_secs(1),
            claim_cooldown: Duration::from_millis(20),
            batch: concurrency,
        },
        executor: ExecutorConfig {
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            deadline: Duration::from_secs(1800),
            retry: RetryPolicy::default(),
        },
        shutdown_timeout: Duration::from_secs(30),
    };
    let syncs_before = wal_syncs(pool).await?;
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
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let (_, pool) = fresh("bench_jobs_settings").await?;
    let fsync: String = sqlx::query_scalar("SELECT current_setting('fsync')").fetch_one(&pool).await?;
    let sync: String = sqlx::query_scalar("SELECT current_setting('synchronous_commit')").fetch_one(&pool).await?;
    println!("postgres: fsync={fsync} synchronous_commit={sync}; {RUNS} runs; no-op handler");
    let mut best: f64 = 0.0;
    for (concurrency, jobs_per_run) in [(1, 40), (4, 120), (16, 250)] {
        let r = measure(concurrency, jobs_per_run).await?;
        println!(
            "workers={:<2} jobs={:<6} jobs_per_s={:>7.0} pickup_p50_ms={:>6.2} pickup_p99_ms={:>6.2} wal_flushes_per_job={:.2} \
             claimed={:.0}% claimed_pickup_p50_ms={:.2} claimed_pickup_p99_ms={:.2}",
            r.concurrency,
            r.jobs,
            r.jobs_per_s,
            r.pickup_p50_ms,
            r.pickup_p99_ms,
            r.wal_syncs_per_job,
            r.claimed_share * 100.0,
            r.claimed_pickup_p50_ms,
            r.claimed_pickup_p99_ms
        );
        best = best.max(r.jobs_per_s);
    }
    println!("jobs_per_s: {best:.0}");
    Ok(())
}
