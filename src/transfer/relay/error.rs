//! Why a relay job could not go on: a **kind** (what becomes of the run), a stable **code** (what a caller,
//! a test or a console matches on) and **words** (what an operator reads). The code reaches the run's
//! `failed` or `retries_exhausted` event; the words its `last_error`. Tests assert on the kind and the code,
//! never on the words.

use crate::broker::jolokia::JolokiaError;
use crate::jobs::handler::Outcome;
use crate::registry::ends::EndError;
use crate::transfer::staging::StagingError;

use super::row::StateError;
use super::spool::SpoolError;

/// What becomes of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No retry cures it: the run is Failed (resumable once fixed).
    Refused,
    /// Worth retrying with backoff; when the attempts are spent, the run is Interrupted.
    Transient,
}

/// A stable name for why a relay job could not go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Code {
    /// A condition of the target, by the code the preview gives it (the rule table's, e.g. `target-filtered`).
    Target(&'static str),
    /// The target queue was gone, or changed (deleted, disabled, filtered …) while a batch was sent to it: the
    /// transaction was rolled back.
    TargetChanged,
    /// The job belongs to another kind of run (a copy's job given to a move, a payload this worker cannot read,
    /// a run that was never prepared or made by a preview).
    NotThisRun,
    /// The run's staging queue is gone from the source broker.
    StagingGone,
    /// Staging holds messages still in delivery to a consumer that is gone: the broker gives them back later.
    StagingHeld,
    /// A batch in doubt could not be settled (the target unreachable or refusing): it stays in staging.
    InDoubtUnsettled,
    /// The cluster, node or credentials of an end are no longer registered.
    EndUnregistered,
    /// No endpoint of a node is live now (failing over?).
    EndNotLive,
    /// A broker refused the relay's user (a role or permission is missing).
    NotAuthorized,
    /// A broker refused an operation for another reason that no retry cures.
    BrokerRefused,
    /// A Core call failed (a connection lost, a timeout, a broker error worth retrying).
    Core,
    /// A management (Jolokia) call failed.
    Management,
    /// The duplicate-id window could not be read or decided.
    DuplicateWindow,
    /// Postgres.
    Database,
    /// The local spool of large bodies.
    Spool,
    /// The run's filter cannot be read as the broker's selector grammar (a run previewed before filters were
    /// parsed): its effective filter cannot be built, so nothing is taken by it.
    InvalidFilter,
}

impl Code {
    /// The code as callers see it, in kebab case.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Target(code) => code,
            Code::TargetChanged => "target-changed",
            Code::NotThisRun => "not-this-run",
            Code::StagingGone => "staging-gone",
            Code::StagingHeld => "staging-held",
            Code::InDoubtUnsettled => "in-doubt-unsettled",
            Code::EndUnregistered => "end-unregistered",
            Code::EndNotLive => "end-not-live",
            Code::NotAuthorized => "not-authorized",
            Code::BrokerRefused => "broker-refused",
            Code::Core => "core",
            Code::Management => "management",
            Code::DuplicateWindow => "duplicate-window",
            Code::Database => "database",
            Code::Spool => "spool",
            Code::InvalidFilter => "invalid-filter",
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a relay job could not do its work, sorted by what becomes of the run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The engine (a lost lease ends the attempt without another write).
    #[error(transparent)]
    Jobs(#[from] crate::jobs::Error),
    /// A refusal no retry cures: the run is Failed with these words.
    #[error("{words}")]
    Refused {
        /// Why, by name.
        code: Code,
        /// Why, in words.
        words: String,
    },
    /// A transient failure: retried with backoff, then Interrupted.
    #[error("{words}")]
    Transient {
        /// Why, by name.
        code: Code,
        /// Why, in words.
        words: String,
    },
}

impl From<crate::transfer::plan::FilterError> for RelayError {
    fn from(e: crate::transfer::plan::FilterError) -> RelayError {
        RelayError::refused(Code::InvalidFilter, format!("the run's filter cannot be used: {e}; preview it again"))
    }
}

impl RelayError {
    /// A refusal `code`, in `words`.
    pub fn refused(code: Code, words: impl Into<String>) -> RelayError {
        RelayError::Refused { code, words: words.into() }
    }

    /// A transient failure `code`, in `words`.
    pub fn transient(code: Code, words: impl Into<String>) -> RelayError {
        RelayError::Transient { code, words: words.into() }
    }

    /// A transient failure `code` described as `what: error`.
    pub fn transient_in(code: Code, what: &str, error: impl std::fmt::Display) -> RelayError {
        RelayError::transient(code, format!("{what}: {error}"))
    }

    /// What becomes of the run (`None` for the engine's own error, which the executor handles).
    pub fn kind(&self) -> Option<ErrorKind> {
        match self {
            RelayError::Refused { .. } => Some(ErrorKind::Refused),
            RelayError::Transient { .. } => Some(ErrorKind::Transient),
            RelayError::Jobs(_) => None,
        }
    }

    /// Why, by name (`None` for the engine's own error).
    pub fn code(&self) -> Option<Code> {
        match self {
            RelayError::Refused { code, .. } | RelayError::Transient { code, .. } => Some(*code),
            RelayError::Jobs(_) => None,
        }
    }

    /// The same failure in other words (the code and the kind kept).
    pub fn reworded(self, words: impl FnOnce(String) -> String) -> RelayError {
        match self {
            RelayError::Refused { code, words: w } => RelayError::Refused { code, words: words(w) },
            RelayError::Transient { code, words: w } => RelayError::Transient { code, words: words(w) },
            jobs => jobs,
        }
    }

    /// The job's outcome: Failed for a refusal, a retry for a transient failure, each with its code.
    pub(super) fn into_outcome(self) -> Outcome {
        match self {
            RelayError::Refused { code, words } => Outcome::Fail { error: words, code: Some(code.as_str()) },
            RelayError::Transient { code, words } => Outcome::Retry { error: words, code: Some(code.as_str()) },
            // Handled before: the executor sees the engine's own error.
            RelayError::Jobs(e) => Outcome::Retry { error: e.to_string(), code: None },
        }
    }
}

impl From<sqlx::Error> for RelayError {
    fn from(e: sqlx::Error) -> RelayError {
        RelayError::transient_in(Code::Database, "the database", e)
    }
}

impl From<StateError> for RelayError {
    fn from(e: StateError) -> RelayError {
        match e {
            StateError::Db(e) => e.into(),
            other => RelayError::refused(Code::NotThisRun, other.to_string()),
        }
    }
}

impl From<EndError> for RelayError {
    fn from(e: EndError) -> RelayError {
        match e {
            EndError::Gone(words) => RelayError::refused(Code::EndUnregistered, words),
            EndError::NotLive(words) => RelayError::transient(Code::EndNotLive, words),
            EndError::Db(e) => e.into(),
        }
    }
}

impl From<JolokiaError> for RelayError {
    fn from(e: JolokiaError) -> RelayError {
        RelayError::transient_in(Code::Management, "a management call", e)
    }
}

impl From<StagingError> for RelayError {
    fn from(e: StagingError) -> RelayError {
        let code = match &e {
            StagingError::NotAuthorized { .. } => Code::NotAuthorized,
            StagingError::Management(_) => Code::Management,
            _ => Code::BrokerRefused,
        };
        if e.is_refusal() {
            RelayError::refused(code, e.to_string())
        } else {
            RelayError::transient(code, e.to_string())
        }
    }
}

impl From<artemis_core::Error> for RelayError {
    fn from(e: artemis_core::Error) -> RelayError {
        if e.is_not_authorized() {
            RelayError::refused(Code::NotAuthorized, format!("the broker refused the relay: {e}"))
        } else {
            RelayError::transient_in(Code::Core, "a Core call", e)
        }
    }
}

impl From<SpoolError> for RelayError {
    fn from(e: SpoolError) -> RelayError {
        RelayError::transient(Code::Spool, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_becomes_its_outcome_with_its_code() {
        let refused = RelayError::refused(Code::StagingGone, "gone");
        assert_eq!(refused.kind(), Some(ErrorKind::Refused));
        assert!(matches!(
            refused.into_outcome(),
            Outcome::Fail { code: Some("staging-gone"), ref error } if error == "gone"
        ));
        let transient = RelayError::transient_in(Code::Core, "a Core call", "closed");
        assert_eq!(transient.code(), Some(Code::Core));
        assert!(matches!(
            transient.into_outcome(),
            Outcome::Retry { code: Some("core"), ref error } if error == "a Core call: closed"
        ));
    }

    #[test]
    fn a_target_condition_keeps_the_previews_code_and_rewording_keeps_the_code() {
        let e = RelayError::refused(Code::Target("target-filtered"), "filtered").reworded(|w| format!("{w}; stays"));
        assert_eq!(e.code().map(Code::as_str), Some("target-filtered"));
        assert_eq!(e.kind(), Some(ErrorKind::Refused));
        assert_eq!(e.to_string(), "filtered; stays");
    }

    #[test]
    fn the_databases_failures_are_transient_and_a_run_without_a_plan_is_not_this_run() {
        assert_eq!(RelayError::from(sqlx::Error::PoolTimedOut).kind(), Some(ErrorKind::Transient));
        let e = RelayError::from(StateError::NoPlan(uuid::Uuid::nil()));
        assert_eq!((e.kind(), e.code()), (Some(ErrorKind::Refused), Some(Code::NotThisRun)));
    }
}
