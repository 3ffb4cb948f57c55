//! The worker process: an apalis-core monitor hosting one worker whose backend is the claim loop
//! ([`crate::jobs::runtime::JobBackend`]), with a concurrency limit, tasks spread over the runtime's threads,
//! and the job [`Executor`] as its handler; plus the LISTEN task that wakes the claim loop.
//!
//! Shutdown (SIGTERM, SIGINT, or the future passed to [`run`]): the claim loop stops claiming, jobs in
//! flight finish — their heartbeats keep running, since they live in the executor, not in apalis-core —
//! and the process exits. After `shutdown_timeout` the monitor gives up on them; their leases expire and
//! other workers take them over.

pub mod shutdown;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apalis_core::monitor::Monitor;
use apalis_core::task::data::Data;
use apalis_core::worker::builder::WorkerBuilder;
use apalis_core::worker::event::Event;
use apalis_core::worker::ext::event_listener::EventListenerExt;
use apalis_core::worker::ext::parallelize::ParallelizeExt;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;
use tower::limit::ConcurrencyLimitLayer;

use crate::broker::permits::PermitSource;
use crate::jobs::executor::{Executed, Executor, ExecutorConfig};
use crate::jobs::handler::Registry;
use crate::jobs::probe::{self, Probe};
use crate::jobs::prune::{self, Retention};
use crate::jobs::runtime::{Capacity, ClaimConfig, Dispatched, JobBackend};
use crate::jobs::wake::{self, Wake};
use crate::jobs::Error as JobError;
use crate::limiter::PgPermits;
use crate::transfer::relay::{self, spool::SpoolError, RelayConfig, TransferHandler};

/// Everything a worker process needs besides its pool and handlers.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Jobs run at once.
    pub concurrency: usize,
    /// How the claim loop claims (its `owner` is this worker's name).
    pub claim: ClaimConfig,
    /// How jobs are run.
    pub executor: ExecutorConfig,
    /// How long a graceful shutdown may take.
    pub shutdown_timeout: Duration,
}

/// Why the worker stopped other than by a shutdown request.
#[derive(Debug, thiserror::Error)]
#[error("the worker stopped")]
pub struct WorkerError(#[source] apalis_core::monitor::MonitorError);

/// The engine's own handlers: the diagnostic `probe` kind only (the engine's tests and benchmarks).
pub fn registry() -> Registry {
    Registry::new().with(probe::KIND, Probe)
}

/// Every handler of this build: `probe` and the transfer kinds, whose management calls draw from the per-node
/// permits in `pool`, keeping spare tokens for the next calls as a long-lived worker does
/// ([`PgPermits::with_spares`]). Makes the relay's spool (refused when its directory is not private).
pub fn transfer_registry(pool: &PgPool, relay: RelayConfig) -> Result<Registry, SpoolError> {
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::with_spares(pool.clone()));
    Ok(registry().with(relay::KIND, TransferHandler::new(relay, Some(permits))?))
}

/// The pool options of a worker process running `concurrency` jobs: one connection per job in flight, one for
/// the claim loop, one for LISTEN, one spare. Connections are not pinged before each use: that would add a
/// round trip to every claim and every job; a connection that broke (Postgres restarted) fails its statement,
/// which the claim loop and the executor treat as a transient error, and is then replaced.
pub fn pool_options(concurrency: usize) -> PgPoolOptions {
    PgPoolOptions::new().max_connections(concurrency as u32 + 3).test_before_acquire(false)
}

/// A worker name unique to this process: `<host>:<pid>:<random>` (lease owner; `admin rescue` names it).
pub fn default_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_else(|_| "host".into());
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}:{}:{}", std::process::id(), &random[..6])
}

/// The scheduled retention prune of a worker process ([`crate::jobs::prune::run_schedule`]), running until
/// [`Pruner::stop`] or until this is dropped.
pub struct Pruner {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Pruner {
    /// Starts no new round and waits, up to `wait`, for the round in progress to end: a round's deletions commit
    /// before its audit row is written, so a process that ended between the two would leave deletions nobody
    /// audited.
    pub async fn stop(mut self, wait: Duration) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            if tokio::time::timeout(wait, task).await.is_err() {
                tracing::warn!(
                    "the retention prune in progress did not end within {wait:?}; its audit row may be missing"
                );
            }
        }
    }
}

impl Drop for Pruner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// How long a stopping worker waits for its retention prune in progress ([`Pruner::stop`]).
pub const PRUNE_STOP_WAIT: Duration = Duration::from_secs(10);

/// Starts the retention prune of worker `worker`: at once, then every `retention.interval`, one replica at a
/// time. [`Pruner::stop`] lets a round in progress end; dropping the [`Pruner`] starts no new round.
pub fn spawn_pruner(pool: PgPool, worker: String, retention: Retention) -> Pruner {
    let stop = CancellationToken::new();
    let task = tokio::spawn(prune::run_schedule(pool, worker, retention, stop.clone()));
    Pruner { stop, task: Some(task) }
}

/// How long a stopping process waits for each console logout.
pub const CONSOLE_LOGOUT_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs a worker over `pool` until `shutdown` resolves, then drains and returns.
pub async fn run(
    pool: PgPool,
    registry: Registry,
    options: WorkerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WorkerError> {
    // A worker makes management calls for as long as it runs: one console login per broker, not one per call.
    crate::broker::jolokia::use_console_sessions();
    let wake = Wake::new();
    let executor = Arc::new(Executor::new(pool.clone(), registry, options.executor.clone(), wake.clone()));
    let listener_stop = CancellationToken::new();
    let listener = tokio::spawn(wake::listen(pool.clone(), wake.clone(), listener_stop.clone()));
    tracing::info!(worker = %options.claim.owner, concurrency = options.concurrency, "worker started");

    let factory = {
        let (pool, wake, options) = (pool.clone(), wake.clone(), options.clone());
        move |_restarts: usize| {
            WorkerBuilder::new(options.claim.owner.clone())
                .backend(JobBackend::new(
                    pool.clone(),
                    options.claim.clone(),
                    wake.clone(),
                    Capacity::new(options.concurrency),
                ))
                .layer(ConcurrencyLimitLayer::new(options.concurrency))
                .parallelize(tokio::spawn)
                .data(executor.clone())
                .on_event(log_event)
                .build(execute)
        }
    };
    let signal = {
        let wake = wake.clone();
        async move {
            shutdown.await;
            tracing::info!("shutting down: no more claims; jobs in flight finish");
            wake.stop_accepting();
            Ok(())
        }
    };
    let result =
        Monitor::new().register(factory).shutdown_timeout(options.shutdown_timeout).run_with_signal(signal).await;
    listener_stop.cancel();
    let _ = listener.await;
    crate::broker::jolokia::log_out_console_sessions(CONSOLE_LOGOUT_TIMEOUT).await;
    tracing::info!("worker stopped");
    result.map_err(WorkerError)
}

/// The apalis-core handler: hands the claimed job to the executor, and its place back when done.
async fn execute(dispatched: Dispatched, executor: Data<Arc<Executor>>) -> Result<Executed, JobError> {
    let Dispatched { job, place } = dispatched;
    let executed = executor.execute(job).await;
    drop(place);
    executed
}

fn log_event(worker: &apalis_core::worker::context::WorkerContext, event: &Event) {
    match event {
        Event::Error(e) => tracing::error!(worker = worker.name(), error = %e, "job failed in the executor"),
        other => tracing::trace!(worker = worker.name(), event = ?other, "worker event"),
    }
}

#[cfg(test)]
mod tests {
    use super::PRUNE_STOP_WAIT;

    /// The operators' words give the same wait as the rule.
    #[test]
    fn the_docs_give_the_prune_stop_wait() {
        let secs = PRUNE_STOP_WAIT.as_secs();
        crate::docs_said::assert_says(
            "docs/configuration.md",
            include_str!("../../docs/configuration.md"),
            &[format!("lets a prune in progress end (up to {secs} s)")],
            &format!("worker::PRUNE_STOP_WAIT is {secs} s"),
        );
    }
}
