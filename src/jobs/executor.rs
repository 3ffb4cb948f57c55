//! Runs one claimed job: checks its run and budget, runs its handler while heartbeating the lease, and
//! turns the outcome into the job's next state.
//!
//! A handler that hands off to its run's next job, due at once, may receive that job leased to this worker
//! (a continuation, see `job_complete_and_enqueue.sql`): the executor runs it next in the same task, up to
//! [`CONTINUATION_LIMIT`] in a row, then lets the job go through a claim like any other (fairness between runs
//! when there are more runs than tasks).
//!
//! The handler races the heartbeat and the job's deadline. If the lease is lost (or cannot be renewed before it
//! expires), the handler's future is dropped on the spot, so it starts no further broker call, and nothing more is
//! written (docs/guarantees.md, I5). If the job is still running at its deadline (`worker.job_deadline_secs`), the handler is
//! dropped too — it stalled while its worker lives on, heartbeating, so no lease expiry would ever end it — and the
//! job is retried like a transient failure, with a `job_deadline` run event: it spends an attempt, so a handler
//! that always hangs ends its run Interrupted. Dropping it is safe at any point, as a crash is (every step is
//! fenced by the lease, docs/guarantees.md). Either way, a job that turns out completed by this very attempt (the heartbeat or
//! the deadline came between the handler's completing commit and its return) has its outcome awaited and taken as
//! it is.
//! Bookkeeping writes (retry, snooze, end) are retried briefly on transient database errors; if they still fail
//! the job stays leased and is taken over when the lease expires, at the cost of an attempt.

use std::task::Poll;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use chrono::Utc;
use serde::Serialize;
use serde_json::json;
use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio_util::sync::CancellationToken;

use crate::jobs::error::Error;
use crate::jobs::handler::{HandlerFuture, JobContext, Outcome, Registry};
use crate::jobs::lease::{Lease, NextOn, RunEnd};
use crate::jobs::model::{ClaimedJob, JobRow, JobState, RunState};
use crate::jobs::retry::RetryPolicy;
use crate::jobs::store::job as jobs;
use crate::jobs::wake::Wake;

/// Jobs of one run a task runs in a row through continuations before the next one goes back to the queue.
pub const CONTINUATION_LIMIT: usize = 32;

/// The stable name of the error of a job stopped at its deadline (`worker.job_deadline_secs`), recorded with its
/// run's `job_deadline` event, or its `retries_exhausted` event when that was its last attempt.
pub const DEADLINE_CODE: &str = "job-deadline";

/// Why a handler was dropped before it returned.
#[derive(Debug)]
enum Interruption {
    /// The lease was lost (or could not be renewed before it expired).
    LeaseLost(Error),
    /// The job ran past the configured deadline.
    DeadlinePassed,
}

impl std::fmt::Display for Interruption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interruption::LeaseLost(lost) => write!(f, "the lease was lost: {lost}"),
            Interruption::DeadlinePassed => f.write_str("the job's deadline passed"),
        }
    }
}

/// How the executor treats leases and failures.
#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// A claim's lease, renewed to this at every heartbeat.
    pub lease: Duration,
    /// How often the lease is renewed.
    pub heartbeat: Duration,
    /// How long one job may run before it is stopped and retried: a handler that hangs while its worker lives
    /// on keeps its lease by heartbeating, and would otherwise hold its run forever.
    pub deadline: Duration,
    /// Attempts and backoff.
    pub retry: RetryPolicy,
}

/// What the executor did with a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Executed {
    /// The handler committed (job completed; successor enqueued or run ended).
    Committed,
    /// Pending again, attempt given back.
    Snoozed,
    /// Pending again after a transient error, with backoff.
    Retried,
    /// The job ended and its run with it, in this state.
    RunEnded(RunState),
    /// The lease was lost; nothing more was written.
    LeaseLost,
}

/// Runs claimed jobs with the handlers of a [`Registry`].
#[derive(Debug, Clone)]
pub struct Executor {
    pool: PgPool,
    registry: Registry,
    config: ExecutorConfig,
    wake: Wake,
}

impl Executor {
    /// An executor over `pool` with `registry`'s handlers; `wake` is this process's claim loop.
    pub fn new(pool: PgPool, registry: Registry, config: ExecutorConfig, wake: Wake) -> Executor {
        Executor { pool, registry, config, wake }
    }

    /// The lease of `claimed`, as this executor's handlers see it.
    pub fn lease(&self, claimed: &ClaimedJob) -> Lease {
        Lease::new(self.pool.clone(), claimed, self.config.lease, self.config.retry.max_attempts, self.wake.clone())
    }

    /// Runs `claimed` to its next state, then any continuation its handler received.
    pub async fn execute(&self, claimed: ClaimedJob) -> Result<Executed, Error> {
        let (mut job, mut connection) = (claimed, None);
        let mut run_in_a_row = 1;
        loop {
            let (executed, next) = self.execute_one(job, connection, run_in_a_row < CONTINUATION_LIMIT).await;
            match (executed, next) {
                (Ok(Executed::Committed), Some((next, committed_on))) => {
                    (job, connection) = (next, Some(committed_on));
                    run_in_a_row += 1;
                }
                (executed, _) => return executed,
            }
        }
    }

    /// Runs one job, whose first transaction may take `connection` (its predecessor's, see [`Lease::with_connection`]);
    /// returns what became of it and the continuation its hand-off leased to this worker, with the connection the
    /// hand-off committed on.
    #[tracing::instrument(name = "job", skip_all, fields(job_id = %claimed.job.id, run_id = %claimed.job.run_id,
        seq = claimed.job.seq, kind = %claimed.job.kind, attempt = claimed.job.attempt, lease_token = %claimed.token))]
    async fn execute_one(
        &self,
        claimed: ClaimedJob,
        connection: Option<PoolConnection<Postgres>>,
        may_continue: bool,
    ) -> (Result<Executed, Error>, Option<NextOn>) {
        let lease = self.lease(&claimed).continue_as(if may_continue { claimed.job.lease_owner.clone() } else { None });
        let lease = match connection {
            Some(connection) => lease.with_connection(connection),
            None => lease,
        };
        let job = &claimed.job;
        if claimed.reclaimed {
            tracing::warn!(reason = ?job.last_error, "took over a job whose lease expired");
        }
        let handler = self.registry.get(&job.kind).cloned();
        // A handler that settles its run's loose ends on a stop (a move's in-doubt batch, docs/guarantees.md, I6) is called
        // and returns Stop itself; any other run stops here without running its job.
        if claimed.stop_requested && !handler.as_ref().is_some_and(|h| h.settles_on_stop()) {
            return (self.end(&lease, RunEnd::stopped("stop requested".into())).await, None);
        }
        if job.attempt > job.max_attempts {
            let error = format!(
                "gave up after {} attempts: {}",
                job.max_attempts,
                job.last_error.as_deref().unwrap_or("no error recorded")
            );
            return (self.end(&lease, interrupted_end(error, None)).await, None);
        }
        let Some(handler) = handler else {
            let error = format!("this worker has no handler for job kind {:?}", job.kind);
            return (self.end(&lease, failed_end(error, None)).await, None);
        };

        let ctx = JobContext {
            job: job.clone(),
            lease: lease.clone(),
            cancel: CancellationToken::new(),
            pool: self.pool.clone(),
            stop_requested: claimed.stop_requested,
            reclaimed: claimed.reclaimed,
        };
        let mut handled = handler.handle(&ctx);
        // The handler's first step, up to its first wait: one that opens its transaction at once has taken its
        // predecessor's connection by then; one that does other work first (broker calls) must not hold a pool
        // connection idle meanwhile, so whatever was not taken goes back now.
        let first_step = std::future::poll_fn(|cx| Poll::Ready(handled.as_mut().poll(cx))).await;
        lease.give_back_connection();
        let raced =
            if let Poll::Ready(outcome) = first_step { Ok(outcome) } else { self.race(&lease, &mut handled).await };
        let outcome = match raced {
            Ok(outcome) => outcome,
            Err(interruption) if self.completed_by(&claimed).await => {
                // The heartbeat or the deadline came between the handler's completing commit and its return (it
                // ticked while the handler closed its connections, or waited on the rows the commit held): only
                // the lease holder completes a job, so this attempt did. Its outcome carries any continuation the
                // commit leased to this worker; dropping it would strand that job until its lease ran out.
                tracing::debug!(%interruption, "the job was found completed by this attempt's commit");
                handled.await
            }
            Err(interruption) => {
                ctx.cancel.cancel();
                // Dropped before anything more is written: a handler stalled inside its fenced transaction holds
                // the job's row, which the retry below must update.
                drop(handled);
                return (self.interrupted(&lease, job, interruption).await, None);
            }
        };
        let executed = match outcome {
            Ok(Outcome::Committed(committed)) => {
                return (Ok(Executed::Committed), committed.into_next_with_connection())
            }
            Ok(Outcome::Snooze { until, reason }) => {
                tracing::debug!(%until, %reason, "snoozed");
                self.bookkeep(|| lease.snooze(until)).await.map(|()| Executed::Snoozed)
            }
            Ok(Outcome::Retry { error, code }) => self.retry_or_interrupt(&lease, job, error, code, None).await,
            Ok(Outcome::Fail { error, code }) => self.end(&lease, failed_end(error, code)).await,
            Ok(Outcome::Stop { reason }) => self.end(&lease, RunEnd::stopped(reason)).await,
            Err(e) if e.is_lease_lost() => {
                tracing::warn!(error = %e, "the handler found its lease lost; nothing was written");
                Ok(Executed::LeaseLost)
            }
            Err(e) => {
                let error = error_chain(&e);
                self.retry_or_interrupt(&lease, job, error, None, None).await
            }
        };
        (executed, None)
    }

    /// Races the handler against its lease and its deadline.
    async fn race(
        &self,
        lease: &Lease,
        handled: &mut HandlerFuture<'_>,
    ) -> Result<Result<Outcome, Error>, Interruption> {
        tokio::select! {
            // The handler first: when it finished in the same instant the lease went (its own commit ended
            // the lease) or the deadline passed, its outcome is the truth.
            biased;
            outcome = handled => Ok(outcome),
            lost = keep_alive(lease, self.config.heartbeat, self.config.lease) => Err(Interruption::LeaseLost(lost)),
            () = tokio::time::sleep(self.config.deadline) => Err(Interruption::DeadlinePassed),
        }
    }

    /// What becomes of a job whose handler was dropped (docs/guarantees.md: every step is fenced by the lease, so a handler
    /// may be dropped at any point, as a crash would stop it). A lost lease writes nothing more. A passed deadline
    /// is retried like a transient failure and spends an attempt, so a handler that always hangs ends its run
    /// Interrupted after its attempts instead of never.
    async fn interrupted(&self, lease: &Lease, job: &JobRow, interruption: Interruption) -> Result<Executed, Error> {
        match interruption {
            Interruption::LeaseLost(lost) => {
                tracing::warn!(reason = %lost, "lease lost: the handler was dropped and nothing more is written");
                Ok(Executed::LeaseLost)
            }
            Interruption::DeadlinePassed => {
                let secs = self.config.deadline.as_secs_f64();
                let error = format!(
                    "the job was still running after its deadline of {secs} s (a stalled handler) and was stopped; \
                     it is retried while attempts remain"
                );
                tracing::warn!(deadline_secs = secs, "{error}");
                let event = json!({
                    "job_id": job.id,
                    "seq": job.seq,
                    "attempt": job.attempt,
                    "deadline_secs": secs,
                    "code": DEADLINE_CODE,
                });
                self.retry_or_interrupt(lease, job, error, Some(DEADLINE_CODE), Some(("job_deadline", &event))).await
            }
        }
    }

    /// Whether `claimed`'s job was completed by this very attempt: completed, and not claimed again since (a claim
    /// counts an attempt; only the lease holder completes a job). `false` when that cannot be read: the handler is
    /// then dropped, as for any lost lease.
    async fn completed_by(&self, claimed: &ClaimedJob) -> bool {
        match jobs::job_get(&self.pool, claimed.job.id).await {
            Ok(Some(row)) => row.state == JobState::Completed && row.attempt == claimed.job.attempt,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the job after its lease was lost");
                false
            }
        }
    }

    /// Retries `job` with backoff while it has attempts left, recording `event` (kind, detail) on its run with the
    /// retry when given; ends its run Interrupted after the last.
    async fn retry_or_interrupt(
        &self,
        lease: &Lease,
        job: &JobRow,
        error: String,
        code: Option<&'static str>,
        event: Option<(&'static str, &serde_json::Value)>,
    ) -> Result<Executed, Error> {
        let (attempt, max) = (job.attempt, job.max_attempts);
        if attempt >= max {
            return self.end(lease, interrupted_end(format!("gave up after {max} attempts: {error}"), code)).await;
        }
        let delay = self.config.retry.delay_after(attempt);
        let at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
        tracing::info!(%error, retry_at = %at, "transient failure; retrying later");
        self.bookkeep(|| lease.retry_noting(at, &error, event)).await.map(|()| Executed::Retried)
    }

    async fn end(&self, lease: &Lease, end: RunEnd) -> Result<Executed, Error> {
        tracing::info!(run_state = %end.run_state, error = ?end.error, reason = ?end.stop_reason, "run ends");
        self.bookkeep(|| lease.end_run(&end)).await.map(|()| Executed::RunEnded(end.run_state))
    }

    /// Runs a bookkeeping write, retrying transient database errors for about a lease's length.
    async fn bookkeep<F, Fut>(&self, write: F) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<(), Error>>,
    {
        let policy = ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(2))
            .with_total_delay(Some(self.config.lease))
            .without_max_times();
        let result = write.retry(policy).when(Error::is_transient).await;
        match result {
            Err(e) if e.is_lease_lost() => {
                tracing::warn!(error = %e, "lease lost before the job's next state was written");
                Ok(())
            }
            other => other,
        }
    }
}

/// Renews `lease` every `every` until it is lost; returns why. A renewal that keeps failing (the database is
/// unreachable) counts as lost once the lease would have expired, since another worker may then take it.
async fn keep_alive(lease: &Lease, every: Duration, duration: Duration) -> Error {
    let mut expires = tokio::time::Instant::now() + duration;
    loop {
        tokio::time::sleep(every).await;
        match lease.heartbeat().await {
            Ok(_) => expires = tokio::time::Instant::now() + duration,
            Err(e) if e.is_lease_lost() => return e,
            Err(e) => {
                tracing::warn!(error = %e, "heartbeat failed");
                if tokio::time::Instant::now() + every >= expires {
                    return Error::LeaseLost { job: lease.job(), token: lease.token() };
                }
            }
        }
    }
}

fn interrupted_end(error: String, code: Option<&'static str>) -> RunEnd {
    RunEnd {
        job_state: JobState::Failed,
        run_state: RunState::Interrupted,
        error: Some(error),
        stop_reason: None,
        event: "retries_exhausted",
        code,
    }
}

fn failed_end(error: String, code: Option<&'static str>) -> RunEnd {
    RunEnd {
        job_state: JobState::Failed,
        run_state: RunState::Failed,
        error: Some(error),
        stop_reason: None,
        event: "failed",
        code,
    }
}

/// An error with its causes, on one line: what an operator reads in `last_error`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut words = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        words.push_str(": ");
        words.push_str(&cause.to_string());
        source = cause.source();
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_names_every_cause() {
        let e = Error::Db { op: "job_claim", source: sqlx::Error::PoolTimedOut };
        let words = error_chain(&e);
        assert!(words.starts_with("database operation job_claim failed: "), "{words}");
        assert!(words.len() > "database operation job_claim failed: ".len(), "{words}");
    }
}
