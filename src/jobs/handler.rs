//! What a job kind's handler is given, what it returns, and the registry that maps kinds to handlers.
//!
//! A handler's result is a value, not an error path (River's snooze/cancel, style-examples §5.3): it either
//! committed its own fenced transaction ([`Outcome::Committed`]) or tells the executor what to do instead.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::jobs::error::Error;
use crate::jobs::lease::{Committed, Lease};
use crate::jobs::model::JobRow;

/// What became of a job, as its handler says.
#[derive(Debug)]
pub enum Outcome {
    /// The handler's [`crate::jobs::lease::FencedTx`] committed: the job is completed and its successor
    /// enqueued, or its run ended.
    Committed(Committed),
    /// Not ready (pacing, waiting for room, no permit): run again at `until` without using an attempt.
    Snooze {
        /// When to run again.
        until: DateTime<Utc>,
        /// Why, for the log.
        reason: String,
    },
    /// A transient failure: retried with backoff while attempts remain; after the last, the run is
    /// Interrupted with this error.
    Retry {
        /// The error in words.
        error: String,
        /// Its stable name, when the handler has one (recorded with the run's event if the retries run out).
        code: Option<&'static str>,
    },
    /// A refusal no retry cures: the run is Failed with this error.
    Fail {
        /// The error in words.
        error: String,
        /// Its stable name, when the handler has one (recorded with the run's `failed` event).
        code: Option<&'static str>,
    },
    /// The run must stop (a withdrawn permission, a capacity wait that ran out): Stopped with this reason.
    Stop {
        /// Why, in words.
        reason: String,
    },
}

/// What a handler gets for one job.
#[derive(Debug)]
pub struct JobContext {
    /// The job as claimed (state running, this claim's attempt).
    pub job: JobRow,
    /// Its lease: the only way to write about it ([`Lease::begin`]).
    pub lease: Lease,
    /// Cancelled when the lease is lost or the job's deadline passed (the handler is then dropped); a handler in
    /// a long loop should check it between steps.
    pub cancel: CancellationToken,
    /// For reads outside the fenced transaction.
    pub pool: PgPool,
    /// The run was asked to stop before this claim (only a handler that [`Handler::settles_on_stop`] sees
    /// this true: it settles what it must and returns [`Outcome::Stop`]).
    pub stop_requested: bool,
    /// This claim took the job over from a worker whose lease expired (it may have died mid-job).
    pub reclaimed: bool,
}

/// The future a handler returns.
pub type HandlerFuture<'a> = Pin<Box<dyn Future<Output = Result<Outcome, Error>> + Send + 'a>>;

/// Runs the jobs of one kind.
pub trait Handler: Send + Sync + 'static {
    /// Does the job's work. An `Err` is treated as [`Outcome::Retry`] unless it is
    /// [`Error::LeaseLost`], which ends the attempt without another write.
    fn handle<'a>(&'a self, ctx: &'a JobContext) -> HandlerFuture<'a>;

    /// True when a claim of a stopped run must still reach this handler, because the run has loose ends
    /// only it can settle before stopping (default: false, the executor stops the run without the handler).
    fn settles_on_stop(&self) -> bool {
        false
    }
}

/// The handlers of a worker, by job kind.
#[derive(Clone, Default)]
pub struct Registry {
    handlers: HashMap<String, Arc<dyn Handler>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kinds: Vec<_> = self.handlers.keys().collect();
        kinds.sort();
        f.debug_struct("Registry").field("kinds", &kinds).finish()
    }
}

impl Registry {
    /// No handlers.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds (or replaces) the handler of `kind`.
    pub fn with(mut self, kind: impl Into<String>, handler: impl Handler) -> Registry {
        self.handlers.insert(kind.into(), Arc::new(handler));
        self
    }

    /// The handler of `kind`.
    pub fn get(&self, kind: &str) -> Option<&Arc<dyn Handler>> {
        self.handlers.get(kind)
    }
}
