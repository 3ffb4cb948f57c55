//! The crash-test fault seam: `ARTEMIS_TRANSFER_FAULT=<step>[:<occurrence>]` makes the worker process abort
//! (no unwinding, no cleanup, no socket goodbyes — as `kill -9` would leave it) the `occurrence`-th time
//! (default 1st) it passes `step`. Read once per process; unset in production, where [`reach`] is a
//! no-op costing one atomic load.
//!
//! Steps, in a relay batch's order (SPEC §4.2): `refill` (after the broker's move into staging),
//! `receive` (after the batch was received), `in-doubt` (after its ids were recorded), `target-commit`,
//! `source-commit`, `pg-commit` (after the job's fenced commit); `return` (after a return's broker move); and
//! `local-move` (after the broker's move of a chunk on one node, before its count is written). A copy's
//! (SPEC §5): `copy-browse` (a batch browsed, nothing sent), `copy-target-commit` (committed on the target, not
//! in the ledger), `copy-ledger` (after the ledger's fenced commit, mid-slice).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The environment variable naming the fault.
pub const VAR: &str = "ARTEMIS_TRANSFER_FAULT";

/// The steps a fault can name.
pub const STEPS: &[&str] = &[
    "refill",
    "receive",
    "in-doubt",
    "target-commit",
    "source-commit",
    "pg-commit",
    "return",
    "local-move",
    "copy-browse",
    "copy-target-commit",
    "copy-ledger",
];

struct Fault {
    step: String,
    occurrence: u32,
    seen: AtomicU32,
}

fn configured() -> Option<&'static Fault> {
    static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
    FAULT
        .get_or_init(|| {
            let spec = std::env::var(VAR).ok()?;
            let (step, occurrence) = match spec.split_once(':') {
                Some((s, n)) => (s.to_string(), n.parse().unwrap_or(1)),
                None => (spec.clone(), 1),
            };
            if !STEPS.contains(&step.as_str()) {
                eprintln!("{VAR}={spec}: unknown step (known: {STEPS:?}); no fault will fire");
                return None;
            }
            Some(Fault { step, occurrence: occurrence.max(1), seen: AtomicU32::new(0) })
        })
        .as_ref()
}

/// Marks that this process passed `step`; aborts it if the fault names this occurrence.
pub fn reach(step: &str) {
    debug_assert!(STEPS.contains(&step), "unknown fault step {step}");
    if let Some(fault) = configured() {
        if fault.step == step && fault.seen.fetch_add(1, Ordering::SeqCst) + 1 == fault.occurrence {
            eprintln!("{VAR}: aborting at step {step} (occurrence {})", fault.occurrence);
            std::process::abort();
        }
    }
}
