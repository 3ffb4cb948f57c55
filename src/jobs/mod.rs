//! The durable Postgres job engine (SPEC §1, §7; issue 5): each relay batch is a small idempotent job.
//!
//! ```text
//!            start / requeue                 claim (SKIP LOCKED, + a slot)
//!   (none) ─────────────────▶ pending ─────────────────────────────────▶ running
//!                              ▲  ▲                                        │ │ │
//!          retry (backoff) /   │  └──── lease expired: the claim takes ────┘ │ │
//!          snooze (no attempt) │        it over as a new attempt + event     │ │
//!                              └─────────────────────────────────────────────┘ │
//!                                  handler's fenced tx: completed (+ next job   │
//!                                  pending, or the run ends) ◀─────────────────┤
//!                                  out of attempts / refused: failed ◀─────────┤
//!                                  stop / admin cancel: cancelled ◀────────────┘
//! ```
//!
//! Guarantees, and what gives them:
//! - **One batch per run in flight** (docs/guarantees.md, I4): at most one live (pending/running) job per run, enforced
//!   by a partial unique index; a handler completes its job before inserting the successor, in one
//!   transaction; `(run_id, seq)` is unique, so no successor is ever duplicated.
//! - **At most `concurrent runs` runs executing**: the claim takes a free `run_slot` in the same statement
//!   that claims a run's first job; the run keeps it, waiting included, until it ends or stops.
//! - **Fenced leases** (I5): every write after a claim names the lease token ([`lease`]); a worker that lost
//!   its lease writes nothing, and its handler is dropped when a heartbeat finds the lease gone.
//! - **Transactional hand-off**: the handler's [`lease::FencedTx`] updates the run, completes the job and
//!   enqueues the next one, and commits all of it or none. A next job due at once is leased to the same
//!   worker in that transaction (a continuation, at most [`executor::CONTINUATION_LIMIT`] in a row), so a
//!   run's batches follow each other without a claim in between.
//! - **No run held by a stalled handler**: a job still running at its deadline (`worker.job_deadline_secs`) is
//!   dropped and retried, spending an attempt, although its worker heartbeats on ([`executor`]).
//! - **Durable retries**: backoff (computed by `backon`) is stored in `run_at`; pacing and waiting snooze
//!   without spending an attempt; a spent budget ends the run Interrupted with the last error in words.
//!
//! Parts: [`model`] (ids, states, rows), [`store`] (one function per SQL statement in `sql/`), [`functions`]
//! (the SQL functions' current definitions, `sql/functions/`, applied after the migrations), [`lease`],
//! [`executor`] (one job), [`runtime`] (the claim loop as an apalis-core backend), [`wake`] (LISTEN/NOTIFY
//! and local pokes), [`runs`] (the API for the transfer layer), [`admin`], [`settings`], [`retry`],
//! [`prune`] (retention, scheduled in every worker), [`probe`] (a diagnostic job kind for tests and benchmarks).

pub mod admin;
pub mod error;
pub mod executor;
pub mod functions;
pub mod handler;
pub mod lease;
pub mod model;
pub mod probe;
pub mod prune;
pub mod retry;
pub mod runs;
pub mod runtime;
pub mod settings;
pub mod store;
pub mod wake;

pub use error::Error;
pub use model::{ClaimedJob, JobId, JobRow, JobState, LeaseToken, NewJob, RunId, RunRow, RunState};

use sqlx::PgPool;

/// The schema's migrations (`migrations/`), embedded in the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Brings the database's schema up to date — the migrations, then the current definition of every SQL function
/// ([`functions`]) — and writes the settings' defaults where none is set. Every path that brings a schema up (the
/// `migrate` command, the tests' databases) goes through here, so no database runs a function body that is only
/// in a migration.
pub async fn migrate(pool: &PgPool, defaults: &settings::Settings, by: &str) -> Result<(), Error> {
    MIGRATOR.run(pool).await.map_err(Error::Migrate)?;
    functions::apply(pool).await?;
    settings::seed(pool, defaults, by).await
}
