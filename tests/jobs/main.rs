//! The job engine (issue 5) against the test bed's real Postgres, fsync on. Each test works in a database of
//! its own; tests that start worker processes or measure rates hold `support::HEAVY` so they do not fight
//! over the machine's cores. Multi-worker outcomes are judged by the external log the probe handler appends
//! to (`support::log`), not by the engine's own tables.
//!
//! - `schema`: the constraints that make bad states impossible.
//! - `functions`: the database runs exactly the SQL functions of `sql/functions/`, applied again or at once alike, and
//!   their digest recorded for `/ready`.
//! - `claim`: claims, slots, leases, fencing, retries and snoozes, step by step through the library.
//! - `single_flight`: 100 runs × 100 jobs over several worker processes: single-flight, the cap, exactly once.
//! - `pacing`: paced runs reach their rate.
//! - `crash`: kill -9 mid-job, a zombie's late commit, backoff across a restart, graceful SIGTERM, a stalled
//!   handler stopped at its deadline.
//! - `restart`: Postgres restarted under load (a private cluster: the shared one is never restarted).
//! - `admin`: each admin command on a live system, and its audit row.
//! - `ledger`: a copy's ledger lookup probes its key whatever the statistics say.
//! - `permit`: the per-node token bucket SQL function.
//! - `prune`: retention: what goes, what never goes (staging, live runs, audit), concurrent and scheduled prunes.
//! - `settings_cli`: `artemis-transfer settings` show and set, refusals, audit rows.

mod admin;
mod claim;
mod crash;
mod functions;
mod ledger;
mod pacing;
mod permit;
mod prune;
mod restart;
mod schema;
mod settings_cli;
mod single_flight;
mod support;
