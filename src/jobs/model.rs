//! The engine's vocabulary: identifiers, job and run states, and the rows the store reads.
//!
//! The states here mirror the CHECK constraints of `migrations/0001_job_engine.sql`; each variant says who moves
//! a row out of it. Nothing here touches the database.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

/// A transfer run's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, sqlx::Type)]
#[sqlx(transparent)]
pub struct RunId(pub Uuid);

impl RunId {
    /// A new random run id.
    pub fn new() -> RunId {
        RunId(Uuid::new_v4())
    }
}

impl Default for RunId {
    fn default() -> Self {
        RunId::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for RunId {
    type Err = uuid::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s).map(RunId)
    }
}

/// A job's id (the `job` table's identity column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, sqlx::Type)]
#[sqlx(transparent)]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The token of one claim. Every write of the lease holder names it, so a worker whose lease was taken over
/// writes nothing (SPEC §7 I5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, sqlx::Type)]
#[sqlx(transparent)]
pub struct LeaseToken(pub Uuid);

impl fmt::Display for LeaseToken {
    /// The first 8 hex digits: enough to tell leases apart in a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.simple().to_string();
        f.write_str(&s[..8])
    }
}

/// A job's state. See the `job` table in `migrations/0001_job_engine.sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for `run_at`: new, paced, snoozed, or backing off. Left when `job_claim` takes it.
    Pending,
    /// Leased by one worker. Left by the lease holder's fenced writes, or by `job_claim` once the lease has
    /// expired (a new attempt for another worker), or by an admin cancel.
    Running,
    /// Done; its successor, if any, was inserted in the same transaction. Final.
    Completed,
    /// Out of attempts, or refused by its handler; its run was ended in the same transaction. Left only by
    /// an admin requeue.
    Failed,
    /// Its run was stopped or cancelled. Left only by an admin requeue.
    Cancelled,
}

impl JobState {
    /// Every state, in the order of the life of a job.
    pub const ALL: [JobState; 5] =
        [JobState::Pending, JobState::Running, JobState::Completed, JobState::Failed, JobState::Cancelled];

    /// The name stored in the `state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Pending or running: the states the one-live-job-per-run index covers.
    pub fn is_live(self) -> bool {
        matches!(self, JobState::Pending | JobState::Running)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} state {name:?}")]
pub struct UnknownState {
    what: &'static str,
    name: String,
}

impl FromStr for JobState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState { what: "job", name: s.to_owned() })
    }
}

impl TryFrom<String> for JobState {
    type Error = UnknownState;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// A run's state: what each means is in docs/guarantees.md. See the `transfer_run` table in `migrations/0001_job_engine.sql`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    /// Created by a preview; nothing has touched a broker. Left by [`crate::jobs::runs::start`].
    Previewed,
    /// Its first job is enqueued but every `concurrent runs` slot is held. Left by the claim that takes a slot.
    Queued,
    /// Holds a slot; a job is pending or in flight.
    Running,
    /// Holds a slot; waiting for the target to have room (set by the transfer layer).
    Waiting,
    /// Holds a slot; putting staged messages back (set by the transfer layer).
    Returning,
    /// Ended; everything selected was delivered. Final.
    Succeeded,
    /// Ended; some selected messages could not be taken (counted). Final.
    Partial,
    /// Ended, but the brokers could not prove the end: neither their counts at `t0` and now, nor a full pass over
    /// the source finding nothing left, account for the selection (`end_proof` says why). Never Succeeded, which
    /// means proven. Final.
    Unproven,
    /// Stopped by an operator, an admin cancel, a withdrawn permission or a capacity wait that ran out.
    /// Resumable.
    Stopped,
    /// A job's retry budget was spent; `last_error` says why. Resumable.
    Interrupted,
    /// A refusal discovered mid-run. Resumable once fixed.
    Failed,
    /// Staged messages were put back. Final.
    Returned,
}

impl RunState {
    /// Every state.
    pub const ALL: [RunState; 12] = [
        RunState::Previewed,
        RunState::Queued,
        RunState::Running,
        RunState::Waiting,
        RunState::Returning,
        RunState::Succeeded,
        RunState::Partial,
        RunState::Unproven,
        RunState::Stopped,
        RunState::Interrupted,
        RunState::Failed,
        RunState::Returned,
    ];

    /// The name stored in the `state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Previewed => "previewed",
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Waiting => "waiting",
            RunState::Returning => "returning",
            RunState::Succeeded => "succeeded",
            RunState::Partial => "partial",
            RunState::Unproven => "unproven",
            RunState::Stopped => "stopped",
            RunState::Interrupted => "interrupted",
            RunState::Failed => "failed",
            RunState::Returned => "returned",
        }
    }

    /// A state a run can be (re)started from: never started, or ended in a resumable way.
    pub fn is_startable(self) -> bool {
        matches!(self, RunState::Previewed | RunState::Stopped | RunState::Interrupted | RunState::Failed)
    }

    /// A state in which a run has ended (no live job, no slot).
    pub fn is_ended(self) -> bool {
        matches!(
            self,
            RunState::Succeeded
                | RunState::Partial
                | RunState::Unproven
                | RunState::Returned
                | RunState::Stopped
                | RunState::Interrupted
                | RunState::Failed
        )
    }

    /// Ended with its staging removed: its job history may be pruned.
    pub fn is_final(self) -> bool {
        matches!(self, RunState::Succeeded | RunState::Partial | RunState::Unproven | RunState::Returned)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState { what: "run", name: s.to_owned() })
    }
}

impl TryFrom<String> for RunState {
    type Error = UnknownState;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// One row of the `job` table.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct JobRow {
    pub id: JobId,
    #[sqlx(try_from = "String")]
    pub state: JobState,
    pub kind: String,
    pub run_id: RunId,
    pub seq: i64,
    pub attempt: i32,
    pub max_attempts: i32,
    pub priority: i16,
    pub run_at: DateTime<Utc>,
    pub lease_owner: Option<String>,
    pub lease_token: Option<LeaseToken>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub attempted_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub payload: serde_json::Value,
    pub created_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// A job just claimed: its row (state running, with this claim's lease) and what the claim saw of its run.
#[derive(Debug, Clone)]
pub struct ClaimedJob {
    /// The row as the claim left it.
    pub job: JobRow,
    /// The token of this claim (the row's `lease_token`, never null for a claimed job).
    pub token: LeaseToken,
    /// The lease's expiry as the claim set it.
    pub lease_expires_at: DateTime<Utc>,
    /// The run asked to stop: the executor ends it instead of running the job.
    pub stop_requested: bool,
    /// The claim took over a running job whose lease had expired (a worker died or stalled).
    pub reclaimed: bool,
}

/// One row of the `transfer_run` table (the columns the engine owns).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct RunRow {
    pub id: RunId,
    #[sqlx(try_from = "String")]
    pub state: RunState,
    pub stop_requested: bool,
    pub stop_reason: Option<String>,
    pub last_error: Option<String>,
    pub counters: serde_json::Value,
    pub started_by: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
}

/// A job to insert: the first of a run, or the successor a handler enqueues.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// Which handler runs it.
    pub kind: String,
    /// The handler's input.
    pub payload: serde_json::Value,
    /// Not before this instant (pacing); `None` = now.
    pub run_at: Option<DateTime<Utc>>,
    /// Higher first among due jobs.
    pub priority: i16,
    /// `None` = the engine's configured budget.
    pub max_attempts: Option<i32>,
}

impl NewJob {
    /// A job of `kind` with `payload`, due now, default priority and budget.
    pub fn new(kind: impl Into<String>, payload: serde_json::Value) -> NewJob {
        NewJob { kind: kind.into(), payload, run_at: None, priority: 0, max_attempts: None }
    }

    /// Not before `at`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> NewJob {
        self.run_at = Some(at);
        self
    }

    /// At most `n` attempts.
    pub fn max_attempts(mut self, n: i32) -> NewJob {
        self.max_attempts = Some(n);
        self
    }

    /// Priority among due jobs (higher first; -100..=100).
    pub fn priority(mut self, priority: i16) -> NewJob {
        self.priority = priority;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_round_trip() {
        for state in JobState::ALL {
            assert_eq!(state.as_str().parse::<JobState>(), Ok(state));
        }
        for state in RunState::ALL {
            assert_eq!(state.as_str().parse::<RunState>(), Ok(state));
        }
        assert!("Running".parse::<JobState>().is_err());
    }

    #[test]
    fn only_pending_and_running_are_live() {
        let live: Vec<_> = JobState::ALL.into_iter().filter(|s| s.is_live()).collect();
        assert_eq!(live, [JobState::Pending, JobState::Running]);
    }

    #[test]
    fn final_runs_are_ended_and_not_startable() {
        for state in RunState::ALL {
            if state.is_final() {
                assert!(state.is_ended() && !state.is_startable(), "{state}");
            }
            if state.is_startable() && state != RunState::Previewed {
                assert!(state.is_ended(), "{state}");
            }
        }
    }

    #[test]
    fn lease_token_displays_short() {
        let token = LeaseToken(Uuid::parse_str("0123456789abcdef0123456789abcdef").unwrap());
        assert_eq!(token.to_string(), "01234567");
    }
}
