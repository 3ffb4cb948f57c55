//! The transfer layer's store: thin async functions, one per SQL statement in `src/transfer/sql/` (the file and
//! the function share a name), grouped by concern.
//!
//! Like the jobs store ([`crate::jobs::store`]) each takes any executor, so one statement serves a pool call and a
//! step of a fenced transaction, and nothing here decides policy. Unlike it, these return the driver's error: the
//! transfer layer's error types wrap [`sqlx::Error`] themselves, and a relay job's database failure is a transient
//! [`crate::transfer::relay::RelayError`] of code `database`, not the engine's own error.

pub mod action;
pub mod audit;
pub mod grant;
pub mod ledger;
pub mod orphan;
pub mod preview;
pub mod relay;
pub mod view;
pub mod window;

use crate::transfer::plan::Mode;

/// The name a run's `mode` column holds.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Move => "move",
        Mode::Copy => "copy",
    }
}
