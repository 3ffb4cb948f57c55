//! The `probe` job kind: a diagnostic run that exercises the engine end to end with no broker.
//!
//! A probe run is a chain of `total` jobs; each one optionally works for a while, then in its fenced
//! transaction records its progress on the run, completes itself and enqueues the next (paced when asked),
//! and the last one ends the run Succeeded. It is the handler the engine's tests and `scripts/bench jobs` run
//! through the production worker, so they measure and judge the real claim/complete/enqueue path.
//!
//! With `log_dir` set, every step is appended as one JSON line to `<log_dir>/probe-<pid>.jsonl`: the
//! **external log** the tests judge by (start, pre-commit, committed or rejected, with run, sequence, attempt,
//! lease token and a wall-clock time in microseconds). One `write` per line on a file opened for appending,
//! so lines from concurrent tasks and processes never interleave.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::jobs::error::Error;
use crate::jobs::handler::{Handler, HandlerFuture, JobContext, Outcome};
use crate::jobs::model::{NewJob, RunState};

/// The job kind.
pub const KIND: &str = "probe";

/// How much delay a paced run may make up by running faster than its rate.
const MAX_CATCH_UP: chrono::Duration = chrono::Duration::milliseconds(250);

/// What a probe run does (the payload of each of its jobs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Jobs in the run (sequences 0..total); the last ends the run Succeeded.
    pub total: i64,
    /// Simulated work per job, before the commit.
    #[serde(default)]
    pub work_ms: u64,
    /// Pacing: the next job is due `1/per_second` after this one was due.
    #[serde(default)]
    pub per_second: Option<f64>,
    /// Where to append the external log; none = no log.
    #[serde(default)]
    pub log_dir: Option<PathBuf>,
    /// Injected transient failures: attempts up to this number of the job at `fail_seq` fail.
    #[serde(default)]
    pub fail_attempts: i32,
    /// The sequence whose first attempts fail (see `fail_attempts`).
    #[serde(default)]
    pub fail_seq: i64,
    /// Stall this long before the commit, on attempt `stall_attempt` of the job at `stall_seq` (simulates a
    /// worker that hangs and comes back: a zombie once its lease expired).
    #[serde(default)]
    pub stall_ms: u64,
    /// See `stall_ms`.
    #[serde(default)]
    pub stall_seq: i64,
    /// See `stall_ms`.
    #[serde(default = "first_attempt")]
    pub stall_attempt: i32,
    /// Linger this long after the commit before returning, as a handler closing its broker connections does:
    /// a heartbeat in between finds the job completed by the handler's own commit, which must not strand the
    /// continuation the commit leased to this worker.
    #[serde(default)]
    pub linger_ms: u64,
}

fn first_attempt() -> i32 {
    1
}

impl ProbeSpec {
    /// A run of `total` jobs doing nothing.
    pub fn new(total: i64) -> ProbeSpec {
        ProbeSpec { total, stall_attempt: 1, ..ProbeSpec::default() }
    }

    /// The first job of such a run.
    pub fn first_job(&self) -> NewJob {
        NewJob::new(KIND, serde_json::to_value(self).unwrap_or_default())
    }

    /// When the job after this one is due; `None` without pacing. The schedule is anchored where the run
    /// began — the first job's start, not its enqueue, so a late first pickup is not "caught up" in a burst —
    /// and then follows due times, so pickup latency does not accumulate. A run that fell behind (a busy
    /// machine, a slow commit) makes up at most [`MAX_CATCH_UP`] (or one interval, if longer) of its delay;
    /// beyond that its schedule restarts from now, so a long stall is not followed by a long burst.
    fn next_due(
        &self,
        due: DateTime<Utc>,
        started: DateTime<Utc>,
        first: bool,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let rate = self.per_second.filter(|r| *r > 0.0)?;
        let interval = chrono::Duration::microseconds((1e6 / rate) as i64);
        let anchor = if first { started.max(due) } else { due };
        let catch_up = interval.max(MAX_CATCH_UP);
        Some((anchor + interval).max(now - catch_up))
    }
}

/// The probe handler.
#[derive(Debug, Clone, Default)]
pub struct Probe;

impl Handler for Probe {
    fn handle<'a>(&'a self, ctx: &'a JobContext) -> HandlerFuture<'a> {
        Box::pin(run(ctx))
    }
}

async fn run(ctx: &JobContext) -> Result<Outcome, Error> {
    let job = &ctx.job;
    let spec: ProbeSpec = match serde_json::from_value(job.payload.clone()) {
        Ok(spec) => spec,
        Err(e) => return Ok(Outcome::Fail { error: format!("probe payload is not a probe spec: {e}"), code: None }),
    };
    let started = Utc::now();
    let log = Log { spec: &spec, ctx };
    log.write("start");
    if job.seq == spec.fail_seq && job.attempt <= spec.fail_attempts {
        log.write("failed");
        return Ok(Outcome::Retry { error: format!("probe: injected failure of attempt {}", job.attempt), code: None });
    }
    if spec.work_ms > 0 {
        tokio::time::sleep(Duration::from_millis(spec.work_ms)).await;
    }
    if spec.stall_ms > 0 && job.seq == spec.stall_seq && job.attempt == spec.stall_attempt {
        tokio::time::sleep(Duration::from_millis(spec.stall_ms)).await;
    }
    let result = async {
        let mut tx = ctx.lease.begin().await?;
        tx.set_counters(&json!({ "probe_done": job.seq + 1 })).await?;
        if job.seq + 1 < spec.total {
            let mut next = NewJob::new(KIND, job.payload.clone()).priority(job.priority).max_attempts(job.max_attempts);
            next.run_at = spec.next_due(job.run_at, started, job.seq == 0, Utc::now());
            tx.complete_and_enqueue(&next).await?;
        } else {
            tx.complete_and_end_run(RunState::Succeeded, None).await?;
        }
        log.write("precommit");
        tx.commit().await
    }
    .await;
    match result {
        Ok(committed) => {
            log.write("committed");
            if spec.linger_ms > 0 {
                tokio::time::sleep(Duration::from_millis(spec.linger_ms)).await;
            }
            Ok(Outcome::Committed(committed))
        }
        Err(e) => {
            log.write(if e.is_lease_lost() { "rejected" } else { "error" });
            Err(e)
        }
    }
}

struct Log<'a> {
    spec: &'a ProbeSpec,
    ctx: &'a JobContext,
}

impl Log<'_> {
    fn write(&self, event: &str) {
        let Some(dir) = &self.spec.log_dir else { return };
        let job = &self.ctx.job;
        let line = json!({
            "ev": event,
            "run": job.run_id,
            "seq": job.seq,
            "attempt": job.attempt,
            "token": self.ctx.lease.token().0,
            "owner": job.lease_owner,
            "t_us": Utc::now().timestamp_micros(),
        });
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        let path = dir.join(format!("probe-{}.jsonl", std::process::id()));
        let written =
            std::fs::OpenOptions::new().create(true).append(true).open(&path).and_then(|mut f| f.write_all(&bytes));
        if let Err(e) = written {
            // The log is the tests' judge: a line that cannot be written must be loud.
            tracing::error!(error = %e, path = %path.display(), "cannot append to the probe log");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_follows_the_schedule_not_the_clock() {
        let spec = ProbeSpec { per_second: Some(50.0), ..ProbeSpec::new(10) };
        let ms = chrono::Duration::milliseconds;
        let due = Utc::now();
        // On time or a little late: one interval after this one was due, however late this one ran.
        assert_eq!(spec.next_due(due, due + ms(5), false, due + ms(6)), Some(due + ms(20)));
        // Behind by less than the catch-up bound: due at once, the schedule kept.
        assert_eq!(spec.next_due(due, due + ms(80), false, due + ms(81)), Some(due + ms(20)));
        // Far behind: the schedule restarts a quarter second in the past, no longer burst than that.
        assert_eq!(spec.next_due(due, due + ms(3000), false, due + ms(3001)), Some(due + ms(2751)));
        // The first job anchors the schedule at its start, so a late pickup is not made up in a burst.
        assert_eq!(spec.next_due(due, due + ms(230), true, due + ms(235)), Some(due + ms(250)));
        assert_eq!(ProbeSpec::new(10).next_due(due, due, false, due), None);
    }

    #[test]
    fn a_spec_round_trips_through_its_payload() {
        let spec = ProbeSpec { work_ms: 3, log_dir: Some("/tmp/x".into()), ..ProbeSpec::new(7) };
        let job = spec.first_job();
        assert_eq!(job.kind, KIND);
        assert_eq!(serde_json::from_value::<ProbeSpec>(job.payload).unwrap(), spec);
    }
}
