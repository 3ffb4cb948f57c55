//! Worker failures: kill -9 mid-job, a zombie that comes back late, a retry's backoff across a restart, and a
//! graceful SIGTERM. Worker processes are the real binary; the external log is the judge.

use std::time::Duration;

use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::{runs, JobState};
use chrono::Utc;

use crate::support::{self, log, process::WorkerProcess, InProcessWorker};

/// Waits until the log shows `ev` for (`seq`, `attempt`) and returns that line.
async fn wait_line(dir: &std::path::Path, ev: &str, seq: i64, attempt: i32) -> log::Line {
    support::wait_for(&format!("{ev} of seq {seq} attempt {attempt}"), Duration::from_secs(60), || async {
        log::read(dir).into_iter().find(|l| l.ev == ev && l.seq == seq && l.attempt == attempt)
    })
    .await
}

#[tokio::test]
async fn a_worker_killed_mid_job_loses_it_to_another_after_the_lease_expires() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("kill9").await;
    let dir = support::log_dir("kill9");
    // Job 1's first attempt hangs (busy, heartbeating) until its worker is killed.
    let spec = ProbeSpec { stall_ms: 120_000, stall_seq: 1, log_dir: Some(dir.clone()), ..ProbeSpec::new(3) };
    let run = support::start_probe_run(&db.pool, &spec).await;
    let (lease, heartbeat) = (2.0, 0.5);
    let env = support::process::fast_lease_env(lease, heartbeat);
    let mut a = WorkerProcess::spawn(&db.url, "kill9-a", 2, &env, &dir);
    let hung = wait_line(&dir, "start", 1, 1).await;
    assert_eq!(hung.owner.as_deref(), Some("kill9-a"));
    // B runs alongside while A is alive and heartbeating: it must not take the job.
    let b = WorkerProcess::spawn(&db.url, "kill9-b", 2, &env, &dir);
    tokio::time::sleep(Duration::from_secs_f64(lease * 2.0)).await;
    assert!(
        !log::read(&dir).iter().any(|l| l.seq == 1 && l.owner.as_deref() == Some("kill9-b")),
        "B took a job whose lease A kept renewing"
    );
    a.kill9();
    let killed_at = Utc::now().timestamp_micros();
    support::wait_runs_in_state(&db.pool, &[run], "succeeded", Duration::from_secs(60)).await;
    b.stop().await;

    let executions = log::executions(&log::read(&dir));
    let of_seq1: Vec<_> = executions.iter().filter(|e| e.seq == 1).collect();
    assert_eq!(of_seq1.len(), 2, "{of_seq1:?}");
    assert_eq!((of_seq1[0].owner.as_deref(), of_seq1[0].precommit, &of_seq1[0].end), (Some("kill9-a"), None, &None));
    assert_eq!((of_seq1[1].owner.as_deref(), of_seq1[1].attempt), (Some("kill9-b"), 2));
    assert!(of_seq1[1].committed());
    // B could only claim once A's last renewal (at most one heartbeat before the kill) had expired.
    let earliest = killed_at + ((lease - heartbeat) * 1e6) as i64 - 100_000;
    assert!(
        of_seq1[1].start >= earliest,
        "B claimed {} µs before the lease could have expired",
        earliest - of_seq1[1].start
    );
    let commits = log::commits_per_run(&executions);
    assert_eq!(commits[&run.0].iter().map(|(s, n)| (*s, *n)).collect::<Vec<_>>(), [(0, 1), (1, 1), (2, 1)]);
    let events = runs::events(&db.pool, run).await.unwrap();
    assert!(events.iter().any(|e| e.kind == "lease_expired" && e.detail["lost_by"] == "kill9-a"), "{events:?}");
}

/// A worker that stalls without heartbeating (its heartbeat is disabled) comes back after another worker
/// took its job over: its commit is rejected and nothing it did survives.
#[tokio::test]
async fn a_zombies_late_commit_is_rejected() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("zombie").await;
    let dir = support::log_dir("zombie");
    let spec = ProbeSpec { stall_ms: 4_000, stall_seq: 1, log_dir: Some(dir.clone()), ..ProbeSpec::new(3) };
    let run = support::start_probe_run(&db.pool, &spec).await;
    let zombie = InProcessWorker::start(
        &db.url,
        "zombie",
        1,
        support::executor_config(Duration::from_secs(1), Duration::from_secs(3600)),
    )
    .await;
    wait_line(&dir, "start", 1, 1).await;
    let healthy = InProcessWorker::start(
        &db.url,
        "healthy",
        1,
        support::executor_config(Duration::from_secs(1), Duration::from_millis(300)),
    )
    .await;
    support::wait_runs_in_state(&db.pool, &[run], "succeeded", Duration::from_secs(60)).await;
    let rejected = wait_line(&dir, "rejected", 1, 1).await;
    assert_eq!(rejected.owner.as_deref(), Some("zombie"));
    zombie.stop().await;
    healthy.stop().await;

    let executions = log::executions(&log::read(&dir));
    let zombie_run = executions.iter().find(|e| e.token == rejected.token).unwrap();
    assert_eq!(zombie_run.precommit, None, "the zombie's transaction never got past its fence");
    let commits = log::commits_per_run(&executions);
    assert_eq!(commits[&run.0].iter().map(|(s, n)| (*s, *n)).collect::<Vec<_>>(), [(0, 1), (1, 1), (2, 1)]);
    assert!(executions
        .iter()
        .any(|e| e.seq == 1 && e.attempt == 2 && e.committed() && e.owner.as_deref() == Some("healthy")));
    assert_eq!(runs::get(&db.pool, run).await.unwrap().counters["probe_done"], 3);
}

/// A transient failure's next attempt time is stored in `run_at`: a worker started after the one that saw the
/// failure waits for it instead of retrying at once.
#[tokio::test]
async fn a_retry_backoff_survives_a_worker_restart() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("backoff_restart").await;
    let dir = support::log_dir("backoff_restart");
    let spec = ProbeSpec { fail_seq: 0, fail_attempts: 1, log_dir: Some(dir.clone()), ..ProbeSpec::new(2) };
    let run = support::start_probe_run(&db.pool, &spec).await;
    let mut env = support::process::fast_lease_env(5.0, 1.0);
    env.push(("ARTEMIS_TRANSFER__RETRY__MIN_DELAY_MS".into(), "4000".into()));
    env.push(("ARTEMIS_TRANSFER__RETRY__JITTER".into(), "false".into()));
    let mut first = WorkerProcess::spawn(&db.url, "backoff-a", 1, &env, &dir);
    let retry_at = support::wait_for("the retry to be written", Duration::from_secs(60), || async {
        let job = runs::jobs(&db.pool, run).await.ok()?.into_iter().next()?;
        (job.state == JobState::Pending && job.attempt == 1).then_some(job.run_at)
    })
    .await;
    first.kill9();
    let second = WorkerProcess::spawn(&db.url, "backoff-b", 1, &env, &dir);
    support::wait_runs_in_state(&db.pool, &[run], "succeeded", Duration::from_secs(60)).await;
    second.stop().await;

    let lines = log::read(&dir);
    let failed = lines.iter().find(|l| l.ev == "failed").expect("the injected failure is logged");
    let retried = lines.iter().find(|l| l.ev == "start" && l.seq == 0 && l.attempt == 2).expect("a second attempt");
    assert_eq!(retried.owner.as_deref(), Some("backoff-b"));
    assert!(retry_at.timestamp_micros() - failed.t_us >= 3_900_000, "the stored backoff is the configured 4 s");
    assert!(retried.t_us >= retry_at.timestamp_micros(), "the new worker retried before the stored time");
}

/// SIGTERM: the worker stops claiming, finishes the job in flight — heartbeating, since the job outlives its
/// lease — and exits 0, leaving the next job unclaimed.
#[tokio::test]
async fn sigterm_finishes_the_job_in_flight_then_exits() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("sigterm").await;
    let dir = support::log_dir("sigterm");
    let spec = ProbeSpec { work_ms: 4_000, log_dir: Some(dir.clone()), ..ProbeSpec::new(2) };
    let run = support::start_probe_run(&db.pool, &spec).await;
    let env = support::process::fast_lease_env(1.5, 0.4);
    let mut worker = WorkerProcess::spawn(&db.url, "term", 2, &env, &dir);
    let started = wait_line(&dir, "start", 0, 1).await;
    worker.terminate();
    let signalled = Utc::now().timestamp_micros();
    let status = worker.wait_exit(Duration::from_secs(60)).await;
    assert!(status.success(), "exit status {status}");

    let executions = log::executions(&log::read(&dir));
    assert_eq!(executions.len(), 1, "nothing was claimed after SIGTERM: {executions:?}");
    let job = &executions[0];
    assert!(job.committed(), "the job in flight finished: {job:?}");
    assert!(job.precommit.unwrap() > signalled, "it was still working when the signal came");
    assert!(
        job.precommit.unwrap() - started.t_us > 1_500_000,
        "it outlived one lease, so its heartbeat ran while draining"
    );
    let jobs = runs::jobs(&db.pool, run).await.unwrap();
    let states: Vec<_> = jobs.iter().map(|j| (j.seq, j.state, j.attempt)).collect();
    assert_eq!(states, [(0, JobState::Completed, 1), (1, JobState::Pending, 0)]);
    assert!(runs::events(&db.pool, run).await.unwrap().iter().all(|e| e.kind != "lease_expired"));
}

/// A handler that hangs while its worker stays alive keeps its lease by heartbeating, so no lease expiry would
/// ever end it: the executor stops it at `worker.job_deadline_secs` and retries the job. The stalled attempt
/// never commits, the job's second attempt does, and the run's events say the deadline (not an expiry) ended
/// the first.
#[tokio::test]
async fn a_stalled_handler_is_stopped_at_its_deadline_and_retried() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("deadline").await;
    let dir = support::log_dir("deadline");
    // Job 1's first attempt stalls far longer than the deadline, heartbeating all along.
    let spec = ProbeSpec { stall_ms: 120_000, stall_seq: 1, log_dir: Some(dir.clone()), ..ProbeSpec::new(3) };
    let run = support::start_probe_run(&db.pool, &spec).await;
    let deadline_secs = 3;
    let mut env = support::process::fast_lease_env(2.0, 0.5);
    env.push(("ARTEMIS_TRANSFER__WORKER__JOB_DEADLINE_SECS".into(), deadline_secs.to_string()));
    env.push(("ARTEMIS_TRANSFER__RETRY__MIN_DELAY_MS".into(), "200".into()));
    env.push(("ARTEMIS_TRANSFER__RETRY__JITTER".into(), "false".into()));
    let worker = WorkerProcess::spawn(&db.url, "deadline", 2, &env, &dir);
    support::wait_runs_in_state(&db.pool, &[run], "succeeded", Duration::from_secs(40)).await;
    worker.stop().await;

    let executions = log::executions(&log::read(&dir));
    let of_seq1: Vec<_> = executions.iter().filter(|e| e.seq == 1).collect();
    assert_eq!(of_seq1.len(), 2, "{of_seq1:?}");
    assert_eq!((of_seq1[0].attempt, of_seq1[0].precommit, &of_seq1[0].end), (1, None, &None), "never committed");
    assert_eq!(of_seq1[1].attempt, 2);
    assert!(of_seq1[1].committed());
    assert!(
        of_seq1[1].start - of_seq1[0].start >= deadline_secs * 1_000_000,
        "the stalled attempt was stopped at its deadline, not before"
    );
    let commits = log::commits_per_run(&executions);
    assert_eq!(commits[&run.0].iter().map(|(s, n)| (*s, *n)).collect::<Vec<_>>(), [(0, 1), (1, 1), (2, 1)]);
    let jobs = runs::jobs(&db.pool, run).await.unwrap();
    let attempts: Vec<_> = jobs.iter().map(|j| (j.seq, j.state, j.attempt)).collect();
    assert_eq!(attempts, [(0, JobState::Completed, 1), (1, JobState::Completed, 2), (2, JobState::Completed, 1)]);

    let events = runs::events(&db.pool, run).await.unwrap();
    let stopped: Vec<_> = events.iter().filter(|e| e.kind == "job_deadline").collect();
    assert_eq!(stopped.len(), 1, "{events:?}");
    assert_eq!(stopped[0].detail["code"], "job-deadline");
    assert_eq!((stopped[0].detail["seq"].as_i64(), stopped[0].detail["attempt"].as_i64()), (Some(1), Some(1)));
    assert_eq!(stopped[0].detail["deadline_secs"].as_f64(), Some(deadline_secs as f64));
    assert!(events.iter().all(|e| e.kind != "lease_expired"), "the worker kept its lease: {events:?}");
}
