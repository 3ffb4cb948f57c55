//! The claim loop, as an apalis-core [`Backend`]: apalis-core's worker hosts it (concurrency, graceful
//! shutdown, events, the monitor), and every task it yields is a job already claimed in Postgres.
//!
//! Why this fits (docs/adr/0003-apalis-core-hosts-the-claim-loop.md): apalis-core asks the backend for a task
//! only after the service is ready (`CallAll`: backend `poll_ready`, then service `poll_ready`, then backend
//! `poll_next`), so with a concurrency limit in the stack a job is claimed only when a task is free to run it;
//! and the handler gets the claimed job itself, with its lease, so it owns its transaction.
//!
//! The loop: claim as many jobs as this process has free places for (`job_claim`, one statement and one WAL
//! flush for the lot) and hand them out one by one; if none is due, ask when one will be (`job_next_due`) and
//! sleep until then, or until the poll fallback, or until a wake-up ([`Wake`]: NOTIFY from other processes,
//! a poke from this one). Places are counted by [`Capacity`]: taken when a job is claimed, given back when its
//! execution ends, so the loop never claims a job it cannot start at once. A claim that fails (the database
//! is down) is logged and retried with backoff; it is never surfaced, because apalis-core ends the worker on
//! the first backend error. On shutdown (`poll_close`) a claim in flight is finished, and jobs claimed but not
//! handed out are released at once instead of waiting for their leases.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::finalize::Ephemeral;
use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::task::builder::TaskBuilder;
use apalis_core::task::task_id::{RandomId, TaskId};
use apalis_core::task::Task;
use apalis_core::worker::context::WorkerContext;
use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tower_layer::Identity;

use crate::jobs::error::Error;
use crate::jobs::lease::Lease;
use crate::jobs::model::ClaimedJob;
use crate::jobs::store::job as jobs;
use crate::jobs::wake::Wake;

/// How the claim loop claims and sleeps.
#[derive(Debug, Clone)]
pub struct ClaimConfig {
    /// The lease owner written on claimed jobs (unique per process: `admin rescue` names it).
    pub owner: String,
    /// The lease a claim takes.
    pub lease: Duration,
    /// The longest sleep without a claim attempt (the fallback when no notification arrives).
    pub poll_interval: Duration,
    /// The pause after a claim that found a due job being taken by someone else.
    pub claim_cooldown: Duration,
    /// The most jobs one claim takes.
    pub batch: usize,
}

/// How many jobs this process may hold at once (claimed, or running), shared by the claim loop, which claims
/// only for free places, and the executions, which give their place back when they end.
#[derive(Debug, Clone)]
pub struct Capacity {
    limit: usize,
    busy: Arc<AtomicUsize>,
}

impl Capacity {
    /// Room for `limit` jobs.
    pub fn new(limit: usize) -> Capacity {
        Capacity { limit, busy: Arc::new(AtomicUsize::new(0)) }
    }

    /// Places not taken.
    pub fn free(&self) -> usize {
        self.limit.saturating_sub(self.busy.load(Ordering::SeqCst))
    }

    fn take(&self) -> Place {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Place { busy: self.busy.clone() }
    }
}

/// One job's place in a [`Capacity`], given back when dropped (the execution ended, or was dropped).
#[derive(Debug)]
pub struct Place {
    busy: Arc<AtomicUsize>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A claimed job on its way to the executor, holding its place.
#[derive(Debug)]
pub struct Dispatched {
    /// The job.
    pub job: ClaimedJob,
    /// Its place; drop it when the job's execution ends.
    pub place: Place,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

enum ClaimResult {
    Claimed(Vec<ClaimedJob>),
    NothingDue(Option<DateTime<Utc>>),
    Failed(Error),
}

enum State {
    Idle,
    Claiming(BoxFuture<ClaimResult>),
    Waiting(BoxFuture<()>),
    Releasing(BoxFuture<()>),
    Closed,
}

/// The apalis-core backend over the job table: yields claimed jobs.
pub struct JobBackend {
    pool: PgPool,
    config: ClaimConfig,
    wake: Wake,
    capacity: Capacity,
    claimed: VecDeque<Dispatched>,
    state: State,
    failures: u32,
}

impl std::fmt::Debug for JobBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobBackend").field("owner", &self.config.owner).finish_non_exhaustive()
    }
}

impl JobBackend {
    /// A claim loop over `pool` for `capacity` jobs at once; `wake` is shared with this process's listener and
    /// executor.
    pub fn new(pool: PgPool, config: ClaimConfig, wake: Wake, capacity: Capacity) -> JobBackend {
        JobBackend { pool, config, wake, capacity, claimed: VecDeque::new(), state: State::Idle, failures: 0 }
    }

    fn start_claim(&self) -> BoxFuture<ClaimResult> {
        let (pool, owner, lease) = (self.pool.clone(), self.config.owner.clone(), self.config.lease);
        // The loop is asked for a task only when one can start, so there is at least one free place.
        let limit = self.capacity.free().min(self.config.batch).max(1);
        Box::pin(async move {
            match jobs::job_claim(&pool, &owner, lease, limit).await {
                Ok(jobs) if !jobs.is_empty() => ClaimResult::Claimed(jobs),
                Ok(_) => match jobs::job_next_due(&pool).await {
                    Ok(next) => ClaimResult::NothingDue(next),
                    Err(e) => ClaimResult::Failed(e),
                },
                Err(e) => ClaimResult::Failed(e),
            }
        })
    }

    fn start_wait(&self, sleep: Duration) -> BoxFuture<()> {
        let wake = self.wake.clone();
        Box::pin(async move {
            tokio::select! {
                _ = wake.poked() => {}
                _ = tokio::time::sleep(sleep) => {}
            }
        })
    }

    /// How long to sleep after an empty claim, given when something will next be due.
    fn sleep_for(&self, next_due: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Duration {
        sleep_until_due(next_due, now, self.config.poll_interval, self.config.claim_cooldown)
    }

    fn failure_backoff(&mut self) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let exp = 100u64.saturating_mul(1 << self.failures.min(6));
        Duration::from_millis(exp).min(self.config.poll_interval.max(Duration::from_millis(100)) * 5)
    }

    fn release_claimed(&mut self) -> Option<BoxFuture<()>> {
        if self.claimed.is_empty() {
            return None;
        }
        let leases: Vec<Lease> = self
            .claimed
            .drain(..)
            .map(|d| {
                Lease::new(self.pool.clone(), &d.job, self.config.lease, d.job.job.max_attempts, self.wake.clone())
            })
            .collect();
        Some(Box::pin(async move {
            for lease in leases {
                if let Err(e) = lease.release().await {
                    tracing::warn!(error = %e, job_id = %lease.job(), "could not release a job at shutdown; its lease will expire");
                }
            }
        }))
    }
}

/// The sleep after an empty claim: until `next_due`, but at most `poll` (the fallback), and at least
/// `cooldown` when something was already due (another worker was taking it: do not spin).
pub fn sleep_until_due(
    next_due: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    poll: Duration,
    cooldown: Duration,
) -> Duration {
    match next_due {
        None => poll,
        Some(due) => match (due - now).to_std() {
            Ok(wait) if !wait.is_zero() => wait.min(poll),
            _ => cooldown,
        },
    }
}

impl Backend for JobBackend {
    type Task = Task<Dispatched>;
    type Error = Error;

    fn poll_ready(&mut self, _cx: &mut Context<'_>, _worker: &WorkerContext) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        _worker: &WorkerContext,
    ) -> Poll<Option<Result<Self::Task, Self::Error>>> {
        loop {
            if let Some(dispatched) = self.claimed.pop_front() {
                let id = u64::try_from(dispatched.job.job.id.0).unwrap_or_default();
                let task = TaskBuilder::new(dispatched).task_id(TaskId::from_int(id)).build();
                return Poll::Ready(Some(Ok(task)));
            }
            match &mut self.state {
                State::Idle => self.state = State::Claiming(self.start_claim()),
                State::Claiming(claim) => match claim.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(ClaimResult::Claimed(jobs)) => {
                        self.failures = 0;
                        self.state = State::Idle;
                        for job in jobs {
                            let place = self.capacity.take();
                            self.claimed.push_back(Dispatched { job, place });
                        }
                    }
                    Poll::Ready(ClaimResult::NothingDue(next_due)) => {
                        self.failures = 0;
                        let sleep = self.sleep_for(next_due, Utc::now());
                        self.state = State::Waiting(self.start_wait(sleep));
                    }
                    Poll::Ready(ClaimResult::Failed(e)) => {
                        let sleep = self.failure_backoff();
                        tracing::warn!(error = %e, retry_in = ?sleep, "claim failed");
                        self.state = State::Waiting(Box::pin(tokio::time::sleep(sleep)));
                    }
                },
                State::Waiting(wait) => match wait.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => self.state = State::Idle,
                },
                // Not polled for tasks once closing; stay quiet if it is.
                State::Releasing(_) | State::Closed => return Poll::Pending,
            }
        }
    }

    fn poll_close(&mut self, cx: &mut Context<'_>, _worker: &WorkerContext) -> Poll<Result<(), Self::Error>> {
        // From now on a handler's hand-off must NOTIFY: this process claims nothing more.
        self.wake.stop_accepting();
        loop {
            match &mut self.state {
                State::Claiming(claim) => match claim.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(ClaimResult::Claimed(jobs)) => {
                        // Claimed as the shutdown began: give them back now rather than leave them to their leases.
                        for job in jobs {
                            let place = self.capacity.take();
                            self.claimed.push_back(Dispatched { job, place });
                        }
                        self.state = State::Idle;
                    }
                    Poll::Ready(_) => self.state = State::Idle,
                },
                State::Releasing(release) => match release.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => self.state = State::Idle,
                },
                State::Idle | State::Waiting(_) => match self.release_claimed() {
                    Some(release) => self.state = State::Releasing(release),
                    None => self.state = State::Closed,
                },
                State::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

impl BackendConfig for JobBackend {
    type Args = Dispatched;
    type Id = RandomId;
    type Kind = Ephemeral;
    type Config = ClaimConfig;
    type Layer = Identity;

    fn config(&self) -> &Self::Config {
        &self.config
    }

    fn middleware(&mut self, _worker: &mut WorkerContext) -> Self::Layer {
        Identity::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLL: Duration = Duration::from_secs(1);
    const COOLDOWN: Duration = Duration::from_millis(20);

    #[test]
    fn sleeps_until_the_next_due_job_within_the_poll_interval() {
        let now = Utc::now();
        let soon = now + chrono::Duration::milliseconds(200);
        assert_eq!(sleep_until_due(Some(soon), now, POLL, COOLDOWN), Duration::from_millis(200));
        let later = now + chrono::Duration::seconds(30);
        assert_eq!(sleep_until_due(Some(later), now, POLL, COOLDOWN), POLL);
        assert_eq!(sleep_until_due(None, now, POLL, COOLDOWN), POLL);
    }

    #[test]
    fn a_job_already_due_means_a_short_cooldown_not_a_spin() {
        let now = Utc::now();
        assert_eq!(sleep_until_due(Some(now), now, POLL, COOLDOWN), COOLDOWN);
        let past = now - chrono::Duration::seconds(5);
        assert_eq!(sleep_until_due(Some(past), now, POLL, COOLDOWN), COOLDOWN);
    }
}
