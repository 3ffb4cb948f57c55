//! The crash-test fault seam: `ARTEMIS_TRANSFER_FAULT=<step>[:<occurrence>]` makes the worker process abort
//! (no unwinding, no cleanup, no socket goodbyes — as `kill -9` would leave it) the `occurrence`-th time
//! (default 1st) it passes `step`. Read once per process.
//!
//! Both seams exist only in a build with the `fault-injection` cargo feature (the tests'); a production build
//! compiles [`reach`] and [`refusal`] to nothing, so no environment can make it abort or refuse a message.
//!
//! Steps, in a relay batch's order (SPEC §4.2): `refill` (after the broker's move into staging),
//! `receive` (after the batch was received), `in-doubt` (after its ids were recorded), `target-commit`,
//! `source-commit`, `pg-commit` (after the job's fenced commit) — a return's batch in doubt passes `receive`,
//! `target-commit` and `source-commit` too; `return` (after a return's broker move); and
//! `local-move` (after the broker's move of a chunk on one node, before its count is written). A copy's
//! (SPEC §5): `copy-browse` (a batch browsed, nothing sent), `copy-in-doubt` (a batch marked in doubt, not sent;
//! the batch before it committed on the target and not yet recorded, its record being written beside this one's
//! send), `copy-target-commit` (committed on the target, not
//! in the ledger), `copy-ledger` (after the ledger's fenced commit, mid-slice). The dead message queue's (docs/dead-message-queue.md):
//! `dmq-commit` (a poison message committed on a DMQ, its batch not yet recorded in Postgres). A run stopped
//! because its target lost the duplicate-id cache while a batch was in doubt: `cache-lost` (after the stop's
//! commit).
//!
//! A second seam, for the dead message queue's tests (docs/dead-message-queue.md): `ARTEMIS_TRANSFER_FAULT_REFUSE=<property>=<value>`
//! makes every target send of a message whose property `<property>` reads `<value>` (a string, or an integer
//! written in decimal) fail as the target broker's refusal would, without sending it: a real poison message is
//! rare, and the relay must be shown to prove and dead-letter one.
//!
//! A third, for a window one round trip wide: `ARTEMIS_TRANSFER_FAULT_PAUSE=<step>:<milliseconds>` makes the worker
//! wait that long the first time it passes `step` (one of [`PAUSE_STEPS`]), so a test can change the target there:
//! `target-committed` is just after a batch's target commit, before the look at the target queue after it;
//! `finish` is at the start of a move's finish, once staging is found empty, before what is left on the source is
//! counted; `prune-committed` is in a worker's scheduled retention prune, after its deletions committed and before
//! its audit row is written.

#[cfg(feature = "fault-injection")]
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
#[cfg(feature = "fault-injection")]
use std::sync::OnceLock;

/// The environment variable naming the fault.
pub const VAR: &str = "ARTEMIS_TRANSFER_FAULT";

/// The environment variable naming the message the target "refuses" (`<property>=<value>`).
pub const REFUSE_VAR: &str = "ARTEMIS_TRANSFER_FAULT_REFUSE";

/// The environment variable naming the step a worker waits at once, and for how long (`<step>:<milliseconds>`).
pub const PAUSE_VAR: &str = "ARTEMIS_TRANSFER_FAULT_PAUSE";

/// The steps [`PAUSE_VAR`] can name.
pub const PAUSE_STEPS: &[&str] = &["target-committed", "finish", "prune-committed"];

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
    "copy-in-doubt",
    "copy-target-commit",
    "copy-ledger",
    "dmq-commit",
    "cache-lost",
];

#[cfg(feature = "fault-injection")]
struct Fault {
    step: String,
    occurrence: u32,
    seen: AtomicU32,
}

#[cfg(feature = "fault-injection")]
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
#[cfg(feature = "fault-injection")]
pub fn reach(step: &str) {
    debug_assert!(STEPS.contains(&step), "unknown fault step {step}");
    if let Some(fault) = configured() {
        if fault.step == step && fault.seen.fetch_add(1, Ordering::SeqCst) + 1 == fault.occurrence {
            eprintln!("{VAR}: aborting at step {step} (occurrence {})", fault.occurrence);
            std::process::abort();
        }
    }
}

#[cfg(feature = "fault-injection")]
fn refuse_configured() -> Option<&'static (String, String)> {
    static REFUSE: OnceLock<Option<(String, String)>> = OnceLock::new();
    REFUSE
        .get_or_init(|| {
            let spec = std::env::var(REFUSE_VAR).ok()?;
            match spec.split_once('=') {
                Some((name, value)) if !name.is_empty() => Some((name.to_string(), value.to_string())),
                _ => {
                    eprintln!("{REFUSE_VAR}={spec}: expected <property>=<value>; nothing will be refused");
                    None
                }
            }
        })
        .as_ref()
}

/// The test seam's refusal of a target send of a message with these headers, if [`REFUSE_VAR`] names it: a
/// broker error, as the target's own refusal would read.
#[cfg(feature = "fault-injection")]
pub fn refusal(headers: &artemis_core::MessageHeaders) -> Option<artemis_core::Error> {
    let (name, value) = refuse_configured()?;
    let matches = match headers.property(name)? {
        artemis_core::PropertyValue::String(s) => s.eq_str(value),
        other => other.as_i64().is_some_and(|n| n.to_string() == *value),
    };
    matches.then(|| {
        artemis_core::Error::Broker(artemis_core::BrokerError {
            kind: artemis_core::ExceptionType::GenericException,
            code: artemis_core::ExceptionType::GenericException.code(),
            message: Some(format!("{REFUSE_VAR}: the test seam refused the message whose {name} is {value}")),
            op: "send",
        })
    })
}

#[cfg(feature = "fault-injection")]
fn pause_configured() -> Option<&'static (String, std::time::Duration, AtomicBool)> {
    static PAUSE: OnceLock<Option<(String, std::time::Duration, AtomicBool)>> = OnceLock::new();
    PAUSE
        .get_or_init(|| {
            let spec = std::env::var(PAUSE_VAR).ok()?;
            match spec.split_once(':').map(|(step, ms)| (step, ms.parse::<u64>())) {
                Some((step, Ok(ms))) if PAUSE_STEPS.contains(&step) => {
                    Some((step.to_string(), std::time::Duration::from_millis(ms), AtomicBool::new(false)))
                }
                _ => {
                    eprintln!("{PAUSE_VAR}={spec}: expected <step>:<milliseconds>, step one of {PAUSE_STEPS:?}");
                    None
                }
            }
        })
        .as_ref()
}

/// Waits at `step` the first time this process passes it, if [`PAUSE_VAR`] names it.
#[cfg(feature = "fault-injection")]
pub async fn pause(step: &str) {
    debug_assert!(PAUSE_STEPS.contains(&step), "unknown pause step {step}");
    if let Some((at, wait, done)) = pause_configured() {
        if at == step && !done.swap(true, Ordering::SeqCst) {
            eprintln!("{PAUSE_VAR}: waiting {wait:?} at step {step}");
            tokio::time::sleep(*wait).await;
        }
    }
}

/// Without the `fault-injection` feature: no wait.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub async fn pause(step: &str) {
    debug_assert!(PAUSE_STEPS.contains(&step), "unknown pause step {step}");
}

/// Without the `fault-injection` feature: nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn reach(step: &str) {
    debug_assert!(STEPS.contains(&step), "unknown fault step {step}");
}

/// Without the `fault-injection` feature: nothing is refused.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn refusal(_headers: &artemis_core::MessageHeaders) -> Option<artemis_core::Error> {
    None
}
