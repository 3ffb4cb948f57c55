//! A claimed job's lease: the only way to write anything about that job.
//!
//! [`Lease`] heartbeats, snoozes, retries and ends its job; [`Lease::begin`] opens the handler's transaction
//! ([`FencedTx`]), whose first statement locks the run and the job rows while the token still holds the
//! lease. From then on nobody can take the job over (claims skip locked rows) or change the run behind the
//! handler's back (admin actions lock the run first), so everything the handler writes in that transaction
//! — its run's progress, completing the job, enqueueing the next — commits together or not at all, and
//! not at all if the lease was lost before it began (docs/guarantees.md, I5).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgTransactionManager;
use sqlx::{PgConnection, PgPool, Postgres, TransactionManager};

use crate::jobs::error::{DbContext, Error};
use crate::jobs::model::{ClaimedJob, JobId, JobState, LeaseToken, NewJob, RunId, RunState};
use crate::jobs::store::{job as jobs, record, run as runs, session};
use crate::jobs::wake::Wake;

/// Proof that a handler's [`FencedTx`] committed; only [`FencedTx::commit`] makes one. It carries the run's
/// next job when the hand-off leased it to this worker to run at once (a continuation).
#[derive(Debug)]
#[must_use]
pub struct Committed {
    // Boxed: outcomes are moved around a lot and are otherwise a few words.
    next: Option<Box<Continued>>,
}

/// A continuation and the connection its hand-off committed on.
pub(crate) type NextOn = (ClaimedJob, PoolConnection<Postgres>);

/// A continuation and the connection its hand-off committed on.
#[derive(Debug)]
struct Continued {
    job: ClaimedJob,
    connection: PoolConnection<Postgres>,
}

impl Committed {
    /// The next job of the run, leased to this worker, if the hand-off continued.
    pub fn into_next(self) -> Option<ClaimedJob> {
        self.next.map(|next| next.job)
    }

    /// As [`Committed::into_next`], with the connection the hand-off committed on, for the next job's transaction.
    pub(crate) fn into_next_with_connection(self) -> Option<NextOn> {
        self.next.map(|next| (next.job, next.connection))
    }
}

/// How a run ends when its job cannot go on (see [`Lease::end_run`] and [`FencedTx::end_run`]).
#[derive(Debug, Clone)]
pub struct RunEnd {
    /// The job's final state: failed or cancelled.
    pub job_state: JobState,
    /// The run's state: an ended one.
    pub run_state: RunState,
    /// The error in words, for the job's and the run's `last_error`.
    pub error: Option<String>,
    /// Why it stopped, for the run's `stop_reason`.
    pub stop_reason: Option<String>,
    /// The run event to record (`stopped`, `retries_exhausted`, `failed`).
    pub event: &'static str,
    /// The error's stable name, recorded with the event, when the handler gave one.
    pub code: Option<&'static str>,
}

impl RunEnd {
    /// Stopped (its job cancelled) for `reason`.
    pub fn stopped(reason: String) -> RunEnd {
        RunEnd {
            job_state: JobState::Cancelled,
            run_state: RunState::Stopped,
            error: None,
            stop_reason: Some(reason),
            event: "stopped",
            code: None,
        }
    }
}

/// The lease of one claimed job.
#[derive(Debug, Clone)]
pub struct Lease {
    pool: PgPool,
    job: JobId,
    run: RunId,
    seq: i64,
    token: LeaseToken,
    duration: Duration,
    default_max_attempts: i32,
    wake: Wake,
    /// Set by the executor when this worker may take the run's next job straight from the hand-off.
    continue_as: Option<String>,
    /// The connection the predecessor's hand-off committed on, for this job's first transaction (see
    /// [`Lease::with_connection`]); shared by the lease's clones, taken once.
    spare: Arc<Mutex<Option<PoolConnection<Postgres>>>>,
}

impl Lease {
    /// Whether this worker still takes work: false once it is shutting down (SIGTERM), when a handler that runs
    /// many steps in one job (a copy's slice) should end at its next step and leave the rest to a continuation.
    pub fn worker_accepting(&self) -> bool {
        self.wake.is_accepting()
    }

    /// The lease `claimed` carries, renewed by `duration` at each heartbeat; successors enqueued through it get
    /// `default_max_attempts` unless they say otherwise; `wake` is this process's claim loop.
    pub fn new(pool: PgPool, claimed: &ClaimedJob, duration: Duration, default_max_attempts: i32, wake: Wake) -> Lease {
        Lease {
            pool,
            job: claimed.job.id,
            run: claimed.job.run_id,
            seq: claimed.job.seq,
            token: claimed.token,
            duration,
            default_max_attempts,
            wake,
            continue_as: None,
            spare: Arc::default(),
        }
    }

    /// Gives this lease's first transaction `connection` (the one its predecessor's hand-off just committed on)
    /// instead of one from the pool: no pool round trip, and no ping, which sqlx sends on every connection given
    /// back to its pool. Until taken it is held out of the pool, so the executor gives it back with
    /// [`Lease::give_back_connection`] as soon as the handler has started without taking it.
    pub(crate) fn with_connection(self, connection: PoolConnection<Postgres>) -> Lease {
        *self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(connection);
        self
    }

    /// Returns the connection of [`Lease::with_connection`] to the pool if no transaction has taken it.
    pub(crate) fn give_back_connection(&self) {
        drop(self.take_spare());
    }

    fn take_spare(&self) -> Option<PoolConnection<Postgres>> {
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    /// Lets a hand-off through this lease lease the run's next job to `owner` when it is due at once (while this
    /// process still accepts work): the executor runs it next, with no claim in between.
    pub fn continue_as(mut self, owner: Option<String>) -> Lease {
        self.continue_as = owner;
        self
    }

    /// The job.
    pub fn job(&self) -> JobId {
        self.job
    }

    /// The job's run.
    pub fn run(&self) -> RunId {
        self.run
    }

    /// This claim's token.
    pub fn token(&self) -> LeaseToken {
        self.token
    }

    fn lost(&self) -> Error {
        Error::LeaseLost { job: self.job, token: self.token }
    }

    /// Opens a transaction of this lease's holder whose idle time Postgres bounds by the lease's duration. A holder
    /// frozen inside it (SIGSTOP, a VM or GC pause) would otherwise keep the job's and run's rows locked for as
    /// long as it is frozen, and since claims skip locked rows, no other worker could take the job over however
    /// long ago its lease expired. Postgres ends such a session instead, rolling the transaction back; the holder,
    /// when it wakes, finds its connection gone and writes nothing (docs/guarantees.md, I5). No broker call is ever made inside
    /// these transactions, so a live holder never comes near the bound. One round trip: the bound travels with `BEGIN`.
    async fn begin_bounded(&self) -> Result<PooledTx, Error> {
        let connection = match self.take_spare() {
            Some(connection) => connection,
            None => self.pool.acquire().await.db("begin")?,
        };
        PooledTx::begin(connection, session::begin_bounded(self.duration)).await
    }

    /// Extends the lease; [`Error::LeaseLost`] when the token no longer holds it.
    pub async fn heartbeat(&self) -> Result<DateTime<Utc>, Error> {
        jobs::job_heartbeat(&self.pool, self.job, self.token, self.duration).await?.ok_or_else(|| self.lost())
    }

    /// Opens the handler's transaction, fenced by this lease; [`Error::LeaseLost`] when it is already lost.
    pub async fn begin(&self) -> Result<FencedTx, Error> {
        let mut tx = self.begin_bounded().await?;
        let stop_requested =
            jobs::job_lock_fenced(&mut *tx, self.run, self.job, self.token).await?.ok_or_else(|| self.lost())?;
        Ok(FencedTx { tx, lease: self.clone(), completed: false, poke_after_commit: false, stop_requested, next: None })
    }

    /// The job failed transiently: pending again at `at`, with `error` recorded.
    pub async fn retry(&self, at: DateTime<Utc>, error: &str) -> Result<(), Error> {
        self.retry_noting(at, error, None).await
    }

    /// As [`Lease::retry`], and `event` (kind, detail), when given, recorded on the run in the same transaction:
    /// for a retry the executor decided on (a job stopped at its deadline), which an operator should see.
    pub async fn retry_noting(
        &self,
        at: DateTime<Utc>,
        error: &str,
        event: Option<(&str, &serde_json::Value)>,
    ) -> Result<(), Error> {
        let mut tx = self.begin_bounded().await?;
        if !jobs::job_retry(&mut *tx, self.job, self.token, at, error).await? {
            return Err(self.lost());
        }
        if let Some((kind, detail)) = event {
            record::run_event_insert(&mut *tx, self.run, kind, detail).await?;
        }
        let poke = self.announce(&mut tx, at).await?;
        tx.commit().await?;
        self.after_commit(poke);
        Ok(())
    }

    /// The job is not ready (pacing, room, permits): pending again at `until`, attempt given back.
    pub async fn snooze(&self, until: DateTime<Utc>) -> Result<(), Error> {
        let mut tx = self.begin_bounded().await?;
        if !jobs::job_snooze(&mut *tx, self.job, self.token, until).await? {
            return Err(self.lost());
        }
        let poke = self.announce(&mut tx, until).await?;
        tx.commit().await?;
        self.after_commit(poke);
        Ok(())
    }

    /// Gives back a job that was claimed but never started (shutdown): due now, attempt given back.
    pub async fn release(&self) -> Result<(), Error> {
        let mut tx = self.begin_bounded().await?;
        if !jobs::job_release(&mut *tx, self.job, self.token).await? {
            return Err(self.lost());
        }
        // This process is leaving: tell the others.
        jobs::job_notify_due(&mut *tx, Utc::now()).await?;
        tx.commit().await.map(drop)
    }

    /// Ends the job and its run in one transaction: the job failed or cancelled, the run in an ended state,
    /// its slot released (and announced), an event recorded.
    pub async fn end_run(&self, end: &RunEnd) -> Result<(), Error> {
        let mut tx = self.begin().await?;
        tx.end_run(end).await?;
        tx.commit().await.map(|_| ())
    }

    /// Makes a job due at `at` known: a poke of this process after commit (returns true) while it still claims,
    /// otherwise a NOTIFY inside `conn`'s transaction so another process takes it.
    async fn announce(&self, conn: &mut PgConnection, at: DateTime<Utc>) -> Result<bool, Error> {
        if self.wake.is_accepting() {
            Ok(true)
        } else {
            jobs::job_notify_due(conn, at).await?;
            Ok(false)
        }
    }

    fn after_commit(&self, poke: bool) {
        if poke {
            self.wake.poke();
        }
    }
}

/// Ends `run` as `state` and releases its slot with a NOTIFY, inside the caller's transaction.
pub(crate) async fn end_run_and_release(
    conn: &mut PgConnection,
    run: RunId,
    state: RunState,
    error: Option<&str>,
    stop_reason: Option<&str>,
) -> Result<(), Error> {
    runs::run_end(&mut *conn, run, state, error, stop_reason).await?;
    if runs::slot_release(&mut *conn, run).await? {
        // A queued run elsewhere may now take the slot.
        jobs::job_notify(&mut *conn, jobs::NOTIFY_SLOT).await?;
    }
    Ok(())
}

/// A transaction on a connection taken from the pool, which gives the connection back when it commits, so a
/// continuation's transaction can run on it (sqlx's `Transaction` keeps its connection, and dropping a pool
/// connection sends it back to the pool with a ping: a round trip per job). Built on sqlx's own transaction manager,
/// as its `Transaction` is: dropped open, the transaction rolls back (the ROLLBACK is queued, and sent before the
/// connection serves anyone else).
#[derive(Debug)]
struct PooledTx {
    /// Always `Some` until [`PooledTx::commit`] takes it.
    connection: Option<PoolConnection<Postgres>>,
}

impl PooledTx {
    async fn begin(connection: PoolConnection<Postgres>, statement: String) -> Result<PooledTx, Error> {
        let mut tx = PooledTx { connection: Some(connection) };
        PgTransactionManager::begin(&mut tx, Some(statement.into())).await.db("begin")?;
        Ok(tx)
    }

    /// Commits; returns the connection, ready for another transaction.
    async fn commit(mut self) -> Result<PoolConnection<Postgres>, Error> {
        PgTransactionManager::commit(&mut self).await.db("commit")?;
        Ok(self.connection.take().expect("a PooledTx holds its connection until it commits"))
    }
}

impl Deref for PooledTx {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.connection.as_ref().expect("a PooledTx holds its connection until it commits")
    }
}

impl DerefMut for PooledTx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.connection.as_mut().expect("a PooledTx holds its connection until it commits")
    }
}

impl Drop for PooledTx {
    fn drop(&mut self) {
        if let Some(connection) = &mut self.connection {
            // A no-op unless the transaction is still open (not begun, or committed).
            PgTransactionManager::start_rollback(connection);
        }
    }
}

/// A handler's transaction, fenced by its lease: commit it with [`FencedTx::commit`]; dropping it rolls back.
#[derive(Debug)]
pub struct FencedTx {
    tx: PooledTx,
    lease: Lease,
    completed: bool,
    poke_after_commit: bool,
    /// The run's stop request, as of the lock (it cannot change before commit).
    stop_requested: bool,
    /// The run's next job, leased to this worker by the hand-off.
    next: Option<ClaimedJob>,
}

impl FencedTx {
    /// The transaction's connection, for the handler's own writes (they are fenced too: the run and job rows
    /// stay locked by this transaction).
    pub fn conn(&mut self) -> &mut PgConnection {
        &mut self.tx
    }

    /// The lease this transaction is fenced by.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// Merges `counters` (a JSON object) into the run's counters.
    pub async fn set_counters(&mut self, counters: &serde_json::Value) -> Result<(), Error> {
        runs::run_set_counters(&mut *self.tx, self.lease.run, counters).await
    }

    async fn complete(&mut self) -> Result<(), Error> {
        if self.completed {
            return Err(Error::JobRefused {
                job: self.lease.job,
                reason: "already completed in this transaction".into(),
            });
        }
        if !jobs::job_complete(&mut *self.tx, self.lease.job, self.lease.token).await? {
            return Err(self.lease.lost());
        }
        self.completed = true;
        Ok(())
    }

    /// Completes the job and enqueues `next` as its run's next job (sequence + 1), in one statement. When the
    /// executor allows it and `next` is due now, it is leased to this worker, which runs it right after commit.
    pub async fn complete_and_enqueue(&mut self, next: &NewJob) -> Result<JobId, Error> {
        if self.completed {
            return Err(Error::JobRefused {
                job: self.lease.job,
                reason: "already completed in this transaction".into(),
            });
        }
        let continuation = match &self.lease.continue_as {
            Some(owner) if self.lease.wake.is_accepting() && !self.stop_requested => {
                Some(jobs::Continuation { owner: owner.as_str(), lease: self.lease.duration })
            }
            _ => None,
        };
        let row = jobs::job_complete_and_enqueue(
            &mut *self.tx,
            self.lease.job,
            self.lease.token,
            next,
            self.lease.default_max_attempts,
            continuation,
        )
        .await?
        .ok_or_else(|| self.lease.lost())?;
        self.completed = true;
        let id = row.id;
        match (row.lease_token, row.lease_expires_at) {
            (Some(token), Some(lease_expires_at)) => {
                self.next =
                    Some(ClaimedJob { job: row, token, lease_expires_at, stop_requested: false, reclaimed: false });
            }
            _ => self.poke_after_commit |= self.lease.announce(&mut self.tx, row.run_at).await?,
        }
        Ok(id)
    }

    /// Completes the job, ends its run as `state` (succeeded, partial, returned, …) and releases its slot.
    pub async fn complete_and_end_run(&mut self, state: RunState, error: Option<&str>) -> Result<(), Error> {
        self.complete().await?;
        end_run_and_release(&mut self.tx, self.lease.run, state, error, None).await?;
        let detail = json!({ "job_id": self.lease.job, "seq": self.lease.seq, "state": state });
        record::run_event_insert(&mut *self.tx, self.lease.run, "ended", &detail).await
    }

    /// Ends the job and its run with the handler's own writes of this transaction: the job failed or cancelled,
    /// the run in an ended state, its slot released (and announced), an event recorded. For an end that must land
    /// with what the handler wrote, or not at all: written apart, a lease lost between the two would leave the
    /// writes without the end, and the next attempt would read them as if the run had gone on.
    pub async fn end_run(&mut self, end: &RunEnd) -> Result<(), Error> {
        if self.completed {
            return Err(Error::JobRefused {
                job: self.lease.job,
                reason: "already completed in this transaction".into(),
            });
        }
        let lease = &self.lease;
        if !jobs::job_finish(&mut *self.tx, lease.job, lease.token, end.job_state, end.error.as_deref()).await? {
            return Err(lease.lost());
        }
        self.completed = true;
        end_run_and_release(&mut self.tx, lease.run, end.run_state, end.error.as_deref(), end.stop_reason.as_deref())
            .await?;
        let detail = json!({
            "job_id": lease.job,
            "seq": lease.seq,
            "error": end.error,
            "code": end.code,
            "reason": end.stop_reason,
        });
        record::run_event_insert(&mut *self.tx, lease.run, end.event, &detail).await
    }

    /// Whether the run was asked to stop, as of this transaction's lock (it cannot change before commit).
    pub fn stop_requested(&self) -> bool {
        self.stop_requested
    }

    /// Commits the handler's writes **without** completing the job: the lease stays held and the job running.
    /// For a step that must be durable before the handler's next broker call (a refill's recorded intent, a
    /// batch's in-doubt ids). Fenced like every write here: nothing is written if the lease was lost.
    pub async fn commit_progress(self) -> Result<(), Error> {
        if self.completed {
            return Err(Error::JobRefused {
                job: self.lease.job,
                reason: "a progress commit must not complete the job; use commit".into(),
            });
        }
        self.tx.commit().await.map(drop)
    }

    /// Commits everything; an error means nothing of it happened.
    pub async fn commit(self) -> Result<Committed, Error> {
        if !self.completed {
            // A handler that commits must say what became of its job, or the job would run again.
            return Err(Error::JobRefused {
                job: self.lease.job,
                reason: "a handler's transaction must complete its job before committing".into(),
            });
        }
        let connection = self.tx.commit().await?;
        self.lease.after_commit(self.poke_after_commit);
        Ok(Committed { next: self.next.map(|job| Box::new(Continued { job, connection })) })
    }
}
