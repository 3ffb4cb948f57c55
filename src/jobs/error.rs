//! The job engine's error type: what went wrong, with the operation or object it concerns.
//!
//! A lost lease is an error *kind*, not a message: callers match on [`Error::LeaseLost`] to stop writing.

use crate::jobs::model::{JobId, LeaseToken, RunId, RunState};

/// An error of the job engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A statement failed; `op` names it (the store function, e.g. `job_claim`).
    #[error("database operation {op} failed")]
    Db {
        /// The statement's name.
        op: &'static str,
        /// What the driver said.
        #[source]
        source: sqlx::Error,
    },
    /// The lease of `job` is no longer held by `token`: it expired and was claimed again, was rescued, or the
    /// job was cancelled. Its holder must stop and write nothing more.
    #[error("lease {token} on job {job} is lost (expired and re-claimed, rescued or cancelled)")]
    LeaseLost {
        /// The job.
        job: JobId,
        /// The token that no longer matches.
        token: LeaseToken,
    },
    /// No run with this id.
    #[error("run {0} does not exist")]
    RunNotFound(RunId),
    /// No job with this id.
    #[error("job {0} does not exist")]
    JobNotFound(JobId),
    /// The run is in a state that does not allow the action.
    #[error("run {run} is {state}: cannot {action}")]
    RunState {
        /// The run.
        run: RunId,
        /// Its current state.
        state: RunState,
        /// What was asked (`start`, `requeue`, …).
        action: &'static str,
    },
    /// The action does not apply to this job as it is.
    #[error("job {job}: {reason}")]
    JobRefused {
        /// The job.
        job: JobId,
        /// Why, in words.
        reason: String,
    },
    /// Applying the migrations failed.
    #[error("applying the database migrations failed")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// Applying the SQL functions' current definitions (`sql/functions/`) failed.
    #[error(transparent)]
    Functions(#[from] crate::jobs::functions::ApplyError),
    /// A setting is missing or has the wrong type.
    #[error("setting {key}: {problem}")]
    Setting {
        /// The setting's key.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A change sent with a tag of the setting (`If-Match`) that no longer names it: it changed since it was read.
    #[error("setting {key} was changed by {by} at {at} since it was read; read it again and decide")]
    SettingChanged {
        /// The setting's key.
        key: String,
        /// Who changed it last.
        by: String,
        /// When.
        at: chrono::DateTime<chrono::Utc>,
    },
    /// A row broke an invariant the schema should have enforced (a bug or a hand edit).
    #[error("inconsistent row: {0}")]
    Inconsistent(String),
}

impl Error {
    /// True when the caller lost its lease and must stop writing.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, Error::LeaseLost { .. })
    }

    /// True for errors a retry may cure (the database was unreachable, a deadlock, a serialization failure).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Db { source, .. } => match source {
                sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_) => true,
                sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => true,
                sqlx::Error::Database(db) => {
                    // 40001 serialization_failure, 40P01 deadlock_detected, 57P01..03 admin shutdown / crash
                    // shutdown / cannot connect now, 08xxx connection exceptions.
                    let code = db.code();
                    let code = code.as_deref().unwrap_or("");
                    matches!(code, "40001" | "40P01" | "57P01" | "57P02" | "57P03") || code.starts_with("08")
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// Names the statement a driver error came from.
pub(crate) trait DbContext<T> {
    /// Wraps a driver error as [`Error::Db`] for the statement `op`.
    fn db(self, op: &'static str) -> Result<T, Error>;
}

impl<T> DbContext<T> for Result<T, sqlx::Error> {
    fn db(self, op: &'static str) -> Result<T, Error> {
        self.map_err(|source| Error::Db { op, source })
    }
}
