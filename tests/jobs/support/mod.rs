//! Shared helpers of the job-engine tests: a fresh migrated database per test, probe runs, worker processes,
//! in-process workers, bounded waiting, and the external log the probe handler writes.

pub mod log;
pub mod process;

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use artemis_transfer::config::Config;
use artemis_transfer::jobs::executor::ExecutorConfig;
use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::retry::RetryPolicy;
use artemis_transfer::jobs::runtime::ClaimConfig;
use artemis_transfer::jobs::settings::{self, Settings};
use artemis_transfer::jobs::{self, runs, RunId};
use artemis_transfer::worker::{self, WorkerOptions};
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio::task::JoinHandle;

/// Tests that start worker processes or measure rates take this lock, so they do not compete for the
/// machine's two cores with each other (light tests still run in parallel).
pub static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The actor the admin-command tests act as; an admin of every cluster in every [`db`].
pub const ADMIN_ACTOR: &str = "ops@test";

/// A fresh database with the schema and default settings.
pub struct Db {
    pub url: String,
    pub pool: PgPool,
}

/// A new database on the test bed's Postgres, migrated.
pub async fn db(label: &str) -> Db {
    let url = testbed::postgres::fresh_database(label).await;
    migrated(url).await
}

/// Connects to `url` and migrates it.
pub async fn migrated(url: String) -> Db {
    let pool = pool(&url, 12).await;
    jobs::migrate(&pool, &defaults(), "test").await.expect("migrate a fresh database");
    // The actor of the admin-command tests (tests/jobs/admin.rs) holds the admin grant they need (docs/permissions.md),
    // written as the Studio backend would, so no audit row of a grant precedes theirs.
    sqlx::query(
        "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ($1, '*', 'admin', 'test') \
         ON CONFLICT DO NOTHING",
    )
    .bind(ADMIN_ACTOR)
    .execute(&pool)
    .await
    .expect("grant the admin tests' actor");
    Db { url, pool }
}

/// A pool of `size` connections to `url`.
pub async fn pool(url: &str, size: u32) -> PgPool {
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(30))
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("connect to {url}: {e}"))
}

/// The built-in settings defaults (config/default.toml).
pub fn defaults() -> Settings {
    Config::from_sources(None, Vec::<(String, String)>::new()).expect("the defaults load").settings
}

/// Sets the `concurrent runs` cap.
pub async fn set_cap(pool: &PgPool, runs: u32) {
    settings::set(pool, "concurrent_runs", runs.into(), "test").await.expect("set concurrent_runs");
}

/// A folder for one test's external log (and its workers' stderr), removed when the test passes and kept for
/// inspection when it fails.
pub struct LogDir {
    path: PathBuf,
}

impl std::ops::Deref for LogDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.path
    }
}

impl Drop for LogDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("the external log is kept in {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A new [`LogDir`] named after the test.
pub fn log_dir(label: &str) -> LogDir {
    let path =
        std::env::temp_dir().join(format!("artemis-jobs-{label}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
    std::fs::create_dir_all(&path).expect("create the log folder");
    LogDir { path }
}

/// Creates a run and starts it with `spec` as its probe chain.
pub async fn start_probe_run(pool: &PgPool, spec: &ProbeSpec) -> RunId {
    start_run_with(pool, spec.first_job()).await
}

/// Creates a run and starts it with `first`.
pub async fn start_run_with(pool: &PgPool, first: jobs::NewJob) -> RunId {
    let run = RunId::new();
    runs::create(pool, run, Some("test")).await.expect("create a run");
    runs::start(pool, run, &first, "test", 10).await.expect("start a run");
    run
}

/// Waits until `check` returns `Some`, polling every 100 ms for at most `limit`; panics with `what` and the
/// last value seen otherwise. A bound on waiting, not a timed assertion: `limit` is generous.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "gave up after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every run in `runs` has state `state`.
pub async fn wait_runs_in_state(pool: &PgPool, runs: &[RunId], state: &str, limit: Duration) {
    let ids: Vec<uuid::Uuid> = runs.iter().map(|r| r.0).collect();
    wait_for(&format!("{} run(s) to be {state}", runs.len()), limit, || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM transfer_run WHERE id = ANY($1) AND state = $2")
            .bind(&ids)
            .bind(state)
            .fetch_one(pool)
            .await
            .ok()?;
        (n == ids.len() as i64).then_some(())
    })
    .await
}

/// Executor settings for in-process workers; no job of these tests runs near the deadline.
pub fn executor_config(lease: Duration, heartbeat: Duration) -> ExecutorConfig {
    ExecutorConfig {
        lease,
        heartbeat,
        deadline: Duration::from_secs(1800),
        retry: RetryPolicy {
            max_attempts: 10,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(2),
            factor: 2.0,
            jitter: false,
        },
    }
}

/// An in-process worker (the production `worker::run`), stopped by [`InProcessWorker::stop`].
pub struct InProcessWorker {
    stop: tokio_util::sync::CancellationToken,
    handle: JoinHandle<()>,
}

impl InProcessWorker {
    /// Starts a worker called `name` with `concurrency` tasks over its own pool to `url`.
    pub async fn start(url: &str, name: &str, concurrency: usize, executor: ExecutorConfig) -> InProcessWorker {
        let pool = worker::pool_options(concurrency).connect(url).await.expect("connect an in-process worker");
        let options = WorkerOptions {
            concurrency,
            claim: ClaimConfig {
                owner: name.to_owned(),
                lease: executor.lease,
                poll_interval: Duration::from_millis(500),
                claim_cooldown: Duration::from_millis(20),
                batch: concurrency,
            },
            executor,
            shutdown_timeout: Duration::from_secs(30),
        };
        let stop = tokio_util::sync::CancellationToken::new();
        let signal = stop.clone();
        let handle = tokio::spawn(async move {
            worker::run(pool, worker::registry(), options, async move { signal.cancelled().await })
                .await
                .expect("the in-process worker ends cleanly");
        });
        InProcessWorker { stop, handle }
    }

    /// Asks it to stop and waits until it has.
    pub async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.handle)
            .await
            .expect("the in-process worker stops within a minute")
            .expect("the in-process worker task did not panic");
    }
}
