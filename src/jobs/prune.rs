//! Retention: deleting the history of runs that ended long ago, on a schedule in every worker process and on
//! demand (`admin prune --older-than`). Both go through [`prune`].
//!
//! What goes, for a retention cut-off `before`:
//! - a run that ended before `before` **and holds no staging**, with all its jobs and run events. A run holds
//!   no staging when it ended with its staging removed (succeeded, partial, returned), or ended stopped,
//!   interrupted or failed without ever recording a staging queue (nothing was ever moved into one: the relay
//!   records the queue before its first refill; an empty queue a failed prepare left on the broker becomes an
//!   orphan, which `orphans` lists and removes);
//! - a preview never executed whose preview expired before `before` (an expired preview can never start);
//! - jobs that finished before `before` of a run kept because it ended later, when it ended with its staging
//!   removed (a resumable run keeps its whole history, so a resume continues its sequence).
//!
//! What never goes: a live run (previewed and not yet expired, queued, running, waiting, returning — or any run that still has a
//! live job or a slot); a stopped, interrupted or failed run that names its staging queue, however old (it
//! may be resumed or returned, and its row is what ties the staging queue on the broker to it).
//!
//! The `audit` table outlives the runs its rows name: a scheduled prune deletes its rows older than their own
//! retention (`retention.audit_days`, a year by default), [`AUDIT_PER_TX`] at a time; an admin prune
//! (`--older-than`, meant for runs) leaves it alone.
//!
//! Many replicas: each prune takes a transaction-scoped advisory lock, so one replica prunes at a time; a
//! scheduled prune that finds it taken skips its round (the other replica is doing the work), an admin prune
//! waits for it. The deletes are idempotent and lock the runs they delete (`SKIP LOCKED`), so a run being
//! resumed at that moment is left for a later prune. Runs go in transactions of at most [`RUNS_PER_TX`], so a
//! first prune over a long history does not hold one huge transaction.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::jobs::error::{DbContext, Error};
use crate::jobs::store::{prune as store, record};

/// Runs deleted per transaction.
pub const RUNS_PER_TX: i64 = 500;

/// Audit rows deleted per statement.
pub const AUDIT_PER_TX: i64 = 10_000;

/// The audit action of a prune, scheduled or asked for.
pub const AUDIT_ACTION: &str = "jobs.prune";

/// How long ended runs are kept, and how often a worker prunes (`[retention]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Ended runs (and finished jobs) older than this go.
    pub keep: Duration,
    /// A worker prunes when it starts, then this often.
    pub interval: Duration,
    /// Audit rows older than this go.
    pub keep_audit: Duration,
}

impl Retention {
    /// The cut-off for a prune starting at `now`: what ended before it goes.
    pub fn cutoff(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        before(now, self.keep)
    }
}

/// `now - keep`, or the earliest time when `keep` reaches further back than chrono can count (nothing goes).
pub fn before(now: DateTime<Utc>, keep: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(keep)
        .ok()
        .and_then(|keep| now.checked_sub_signed(keep))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// What a prune deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Pruned {
    /// Jobs, of deleted runs and of kept ones.
    pub jobs: u64,
    /// Run events (of deleted runs).
    pub run_events: u64,
    /// Runs.
    pub runs: u64,
    /// Audit rows (a scheduled prune's; [`audit_prune`]).
    pub audit: u64,
}

impl Pruned {
    /// True when nothing was deleted.
    pub fn is_empty(&self) -> bool {
        self.jobs == 0 && self.run_events == 0 && self.runs == 0 && self.audit == 0
    }
}

impl std::fmt::Display for Pruned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} job(s), {} run event(s) and {} run(s)", self.jobs, self.run_events, self.runs)?;
        if self.audit > 0 {
            write!(f, ", and {} audit row(s)", self.audit)?;
        }
        Ok(())
    }
}

/// What a prune does when another prune holds the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenBusy {
    /// Wait for it (an operator asked for this prune).
    Wait,
    /// Skip this prune (a scheduled one: the other replica is doing the work).
    Skip,
}

/// Deletes what ended before `before` (see the module's documentation). `None` when `when_busy` is
/// [`WhenBusy::Skip`] and another prune held the lock, so nothing was looked at.
pub async fn prune(pool: &PgPool, before: DateTime<Utc>, when_busy: WhenBusy) -> Result<Option<Pruned>, Error> {
    let mut total = Pruned::default();
    let mut first = true;
    loop {
        let mut tx = pool.begin().await.db("begin")?;
        match when_busy {
            WhenBusy::Wait => store::prune_lock(&mut *tx).await?,
            WhenBusy::Skip => {
                if !store::prune_try_lock(&mut *tx).await? {
                    // Another replica took over between two transactions of ours: it finishes the work.
                    return Ok((!first).then_some(total));
                }
            }
        }
        let batch = store::run_prune(&mut *tx, before, RUNS_PER_TX).await?;
        if first {
            total.jobs += store::job_prune(&mut *tx, before).await?;
        }
        tx.commit().await.db("commit")?;
        first = false;
        total.jobs += count(batch.jobs);
        total.run_events += count(batch.run_events);
        total.runs += count(batch.runs);
        if batch.runs < RUNS_PER_TX {
            return Ok(Some(total));
        }
    }
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// One scheduled prune by worker `worker`: logs what it deleted, and audits it (actor `worker:<worker>`) when
/// it deleted something. `None` when another replica was pruning.
pub async fn scheduled_prune(pool: &PgPool, worker: &str, retention: Retention) -> Result<Option<Pruned>, Error> {
    let now = Utc::now();
    let before = retention.cutoff(now);
    let Some(mut pruned) = prune(pool, before, WhenBusy::Skip).await? else {
        tracing::debug!(worker, "retention prune skipped: another replica is pruning");
        return Ok(None);
    };
    crate::transfer::relay::fault::pause("prune-committed").await;
    pruned.audit = audit_prune(pool, self::before(now, retention.keep_audit)).await?;
    tracing::info!(
        worker,
        %before,
        jobs = pruned.jobs,
        run_events = pruned.run_events,
        runs = pruned.runs,
        audit = pruned.audit,
        "retention prune: deleted {pruned} that ended before {before}"
    );
    if !pruned.is_empty() {
        let detail =
            json!({ "scheduled": true, "keep_secs": retention.keep.as_secs(), "before": before, "deleted": pruned });
        record::audit_insert(pool, &format!("worker:{worker}"), AUDIT_ACTION, "retention", "ok", &detail).await?;
    }
    Ok(Some(pruned))
}

/// Deletes the audit rows written before `before`, [`AUDIT_PER_TX`] a statement (a first prune over years of
/// audit does not hold one huge transaction); how many.
pub async fn audit_prune(pool: &PgPool, before: DateTime<Utc>) -> Result<u64, Error> {
    let mut total = 0;
    loop {
        let deleted = store::audit_prune(pool, before, AUDIT_PER_TX).await?;
        total += deleted;
        if deleted < count(AUDIT_PER_TX) {
            return Ok(total);
        }
    }
}

/// Prunes at once, then every `retention.interval`, until `stop` is cancelled: no round starts after that, and a
/// round in progress runs to its end. A failed prune is logged and tried again at the next interval.
pub async fn run_schedule(pool: PgPool, worker: String, retention: Retention, stop: CancellationToken) {
    let mut ticks = tokio::time::interval(retention.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        // A round once begun runs to its end, its audit row included: its deletions commit before that row is
        // written, so a stop between the two would leave deletions nobody audited (`worker::Pruner::stop` waits).
        if let Err(e) = scheduled_prune(&pool, &worker, retention).await {
            tracing::warn!(
                worker,
                error = %crate::jobs::executor::error_chain(&e),
                "retention prune failed; it is tried again in {:?}",
                retention.interval
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cutoff_is_keep_before_now_and_never_overflows() {
        let now = Utc::now();
        let retention = Retention {
            keep: Duration::from_secs(86_400),
            interval: Duration::from_secs(60),
            keep_audit: Duration::from_secs(86_400),
        };
        assert_eq!(retention.cutoff(now), now - chrono::Duration::days(1));
        assert_eq!(before(now, Duration::MAX), DateTime::<Utc>::MIN_UTC);
    }

    #[test]
    fn pruned_reads_as_words() {
        let pruned = Pruned { jobs: 5, run_events: 3, runs: 1, audit: 0 };
        assert_eq!(pruned.to_string(), "5 job(s), 3 run event(s) and 1 run(s)");
        assert!(!pruned.is_empty());
        assert!(Pruned::default().is_empty());
    }
}
