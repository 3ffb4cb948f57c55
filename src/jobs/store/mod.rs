//! Thin async functions, one per SQL statement in `src/jobs/sql/` (the file and the function share a name).
//!
//! Each takes any executor (`&PgPool`, `&mut PgConnection`, `&mut *tx`), so the same statement serves a
//! pool call and a step of a caller's transaction. Writes after a claim name the lease token and report
//! whether a row matched; turning "no row" into [`crate::jobs::Error::LeaseLost`] is the caller's job
//! ([`crate::jobs::lease`]). Nothing here decides policy.

pub mod budget;
pub mod job;
pub mod metrics;
pub mod prune;
pub mod record;
pub mod run;
pub mod schema;
pub mod session;
