//! A transfer run as jobs (SPEC §4, §5): one job kind, [`KIND`] (named for the move, which came first; a copy's
//! jobs are of it too), whose payload names its phase.
//!
//! ```text
//!   execute ──▶ prepare ──▶ relay ──▶ relay ──▶ … ──▶ finish ──▶ Succeeded | Partial | Unproven
//!               (staging     (one batch: §4.2 steps 0–6,           (staging empty and the
//!                made and     then the next batch, paced)           selection exhausted:
//!                verified)                                          staging removed)
//!   return ──▶ return (settle in-doubt, broker move back, remove staging) ──▶ Returned
//!
//!   execute (source and target on one node) ──▶ local_move ──▶ local_move ──▶ … ──▶ Succeeded | Partial | Unproven
//!                                               (one chunk: the broker's own move, no staging, no relay)
//!
//!   execute (a copy) ──▶ copy_slice ──▶ copy_slice ──▶ … ──▶ copy_finish ──▶ Succeeded | Partial | Unproven
//!                        (one browser, batches for a time slice;          (not copied counted,
//!                         ledger and counters per batch)                   ledger removed)
//! ```
//!
//! Parts: [`state`] (what the run row keeps), [`run`] (loading it; the outcomes that pause or end it; its ends
//! resolved by `crate::registry::ends`), [`queues`] (the run's source and target queue on them), [`guard`] (the target
//! re-check, pure), [`prepare`] (a move's first job), `pipeline` (one relay batch's steps in order, whatever its
//! take), [`batch`] (a move's take: received from staging), [`staged`] (staging seen over Core), [`refill`] (the broker's move into staging), [`receive`] and
//! [`send`] (a batch's source and target side), [`window`] (the target's duplicate-id window), [`finish`] (the
//! end and the return), `returning` (a return's batch in doubt: a take of the same driver),
//! [`local`] (a move on one node), [`copy`], [`spool`] (large bodies on disk), [`dmq`] (the dead message queue
//! for proven poison), [`fault`] (the crash-test seam).

/// The value of a step ([`run::Step`]) that goes on; a step that ends the job makes the driver calling it return
/// its outcome.
macro_rules! go_on {
    ($step:expr) => {
        match $step? {
            std::ops::ControlFlow::Continue(value) => value,
            std::ops::ControlFlow::Break(outcome) => return Ok(outcome),
        }
    };
}

/// The value of a step that goes on, inside a step ([`run::Step`]) made of steps: one that ends the job makes the
/// step calling it end with the same outcome.
macro_rules! go_on_step {
    ($step:expr) => {
        match $step? {
            std::ops::ControlFlow::Continue(value) => value,
            std::ops::ControlFlow::Break(outcome) => return Ok(std::ops::ControlFlow::Break(outcome)),
        }
    };
}

pub mod batch;
mod beside;
pub mod copy;
pub mod dmq;
pub mod error;
pub mod fault;
pub mod finish;
pub mod guard;
pub mod in_doubt;
mod laps;
pub mod local;
mod pipeline;
pub mod poison;
pub mod prepare;
pub mod queues;
pub mod receive;
pub mod record;
pub mod refill;
mod returning;
pub mod row;
pub mod run;
pub mod send;
pub mod spool;
pub mod staged;
pub mod state;
pub mod window;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::broker::core_pool::CorePool;
use crate::broker::permits::PermitSource;
use crate::jobs::handler::{Handler, HandlerFuture, JobContext, Outcome};
use crate::jobs::NewJob;
use crate::registry::ends::EndCache;

pub use self::error::{Code, ErrorKind, RelayError};
use self::spool::Spool;

/// The job kind of every job of a run — a move's, a copy's, a return's (the payload's [`Phase`] says which step).
/// Stored in job rows and written by the SQL start path (`sql/functions/runs.sql`). It was `transfer.move` until
/// migration 0013 renamed it: it runs copies too.
pub const KIND: &str = "transfer.run";

/// What a run's job does; its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Make and verify staging (and the target queue when the run creates it).
    Prepare,
    /// One relay batch.
    Relay,
    /// Staging is empty and the selection exhausted: count what was not taken, remove staging, end the run.
    Finish,
    /// Return to source (§4.5).
    Return,
    /// A move on one node (docs/guarantees.md): one chunk of the broker's own move straight into the target queue, or the
    /// end of the run once the selection is exhausted.
    LocalMove,
    /// A copy (SPEC §5): one time slice of batches from one browser of the source.
    CopySlice,
    /// A copy browsed to its end: count what was not copied, remove the ledger, end the run.
    CopyFinish,
}

impl Phase {
    /// The job that runs this phase.
    pub fn job(self) -> NewJob {
        NewJob::new(KIND, serde_json::to_value(self).expect("a phase serialises"))
    }
}

/// How a worker runs moves.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// The base directory large bodies are spooled under (a subdirectory per worker process; see [`spool`]).
    pub spool_dir: PathBuf,
    /// The TTL of the worker's Core connections: how soon a broker gives back what a dead worker was
    /// receiving. Kept under the job lease, so a re-claimed batch finds its messages back in staging.
    pub connection_ttl: Duration,
    /// How long the first receive of a batch waits for a message staging says it holds.
    pub first_receive: Duration,
    /// How long later receives wait before the batch is taken as complete.
    pub next_receive: Duration,
    /// How long one copy job keeps its browser ([`copy::SLICE`], or less under a short job deadline).
    pub copy_slice: Duration,
}

impl RelayConfig {
    /// This configuration for a worker that stops a job still running at `deadline`: a copy's slice ends by half of
    /// it, so a slice that is working ends on its own and hands over to its continuation, never stopped midway.
    pub fn within_deadline(mut self, deadline: Duration) -> RelayConfig {
        self.copy_slice = copy::SLICE.min(deadline / 2);
        self
    }
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            spool_dir: spool::default_base(),
            connection_ttl: Duration::from_secs(10),
            first_receive: Duration::from_secs(2),
            next_receive: Duration::from_millis(200),
            copy_slice: copy::SLICE,
        }
    }
}

/// The handler of [`KIND`]: every job of a transfer run, a move's and a copy's.
#[derive(Debug, Clone)]
pub struct TransferHandler {
    config: RelayConfig,
    spool: Spool,
    permits: Option<Arc<dyn PermitSource>>,
    /// Core connections kept between batches.
    links: Arc<CorePool>,
    /// Ends resolved recently.
    ends: Arc<EndCache>,
    /// The target's facts read for a run's next batch while this one records.
    ahead: Arc<queues::FactsAhead>,
}

impl TransferHandler {
    /// A handler spooling under `config.spool_dir` (made private, or refused, now; what gone workers left there
    /// removed); management calls take `permits`.
    pub fn new(
        config: RelayConfig,
        permits: Option<Arc<dyn PermitSource>>,
    ) -> Result<TransferHandler, spool::SpoolError> {
        let spool = Spool::create(&config.spool_dir)?;
        Ok(TransferHandler {
            config,
            spool,
            permits,
            links: Arc::default(),
            ends: Arc::default(),
            ahead: Arc::default(),
        })
    }

    /// The permits management calls take.
    pub(crate) fn permits(&self) -> Option<Arc<dyn PermitSource>> {
        self.permits.clone()
    }

    async fn run(&self, ctx: &JobContext) -> Result<Outcome, RelayError> {
        let phase: Phase = serde_json::from_value(ctx.job.payload.clone()).map_err(|e| {
            RelayError::refused(
                Code::NotThisRun,
                format!("job {} has a payload this worker cannot read: {e}", ctx.job.id),
            )
        })?;
        match phase {
            Phase::Prepare => prepare::prepare(self, ctx).await,
            Phase::Relay => batch::relay(self, ctx, &self.config, &self.spool).await,
            Phase::Finish => finish::finish(self, ctx).await,
            Phase::Return => finish::return_to_source(self, ctx, &self.config).await,
            Phase::LocalMove => local::local_move(self, ctx).await,
            Phase::CopySlice => copy::copy_slice(self, ctx, &self.config).await,
            Phase::CopyFinish => copy::copy_finish(self, ctx).await,
        }
    }
}

impl Handler for TransferHandler {
    fn handle<'a>(&'a self, ctx: &'a JobContext) -> HandlerFuture<'a> {
        Box::pin(async move {
            match self.run(ctx).await {
                Ok(outcome) => Ok(outcome),
                Err(RelayError::Jobs(e)) => Err(e),
                Err(e) => Ok(e.into_outcome()),
            }
        })
    }

    /// A stop must first settle an in-doubt batch while the target's duplicate cache still holds it (I6).
    fn settles_on_stop(&self) -> bool {
        true
    }
}
