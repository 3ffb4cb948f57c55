//! Each admin command, run as the real binary on a live system (worker processes running), does what it says
//! and leaves an audit row naming who did what to what, and the outcome.

use std::time::Duration;

use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::store::record::{self, AuditRow};
use artemis_transfer::jobs::{runs, JobState, RunState};
use chrono::Utc;
use sqlx::PgPool;

use crate::support::{self, log, process, process::WorkerProcess};

const ACTOR: &str = support::ADMIN_ACTOR;

async fn audit(pool: &PgPool) -> Vec<AuditRow> {
    let mut rows = record::audit_list(pool, 100).await.unwrap();
    rows.reverse();
    rows
}

fn ok_output(out: &std::process::Output) -> String {
    assert!(out.status.success(), "exit {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn admin_jobs_lists_what_the_filters_say() {
    let db = support::db("admin_jobs").await;
    let a = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let text = ok_output(&process::admin(&db.url, ACTOR, &["jobs", "--state", "pending"]));
    assert_eq!(text.lines().count(), 3, "a header and two jobs:\n{text}");
    let json = ok_output(&process::admin(&db.url, ACTOR, &["--json", "jobs", "--run", &a.to_string()]));
    let rows: Vec<serde_json::Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["run_id"], a.to_string());
    assert_eq!(rows[0]["state"], "pending");
    let trail = audit(&db.pool).await;
    assert_eq!(trail.len(), 2);
    assert!(trail.iter().all(|r| r.actor == ACTOR && r.action == "jobs.list" && r.outcome == "ok"));
    assert_eq!(trail[1].detail["run"], a.to_string());
}

#[tokio::test]
async fn admin_requeue_runs_a_failed_job_again_with_a_fresh_budget() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("admin_requeue").await;
    let dir = support::log_dir("admin_requeue");
    // One attempt only, and it fails: the run ends Interrupted.
    let spec = ProbeSpec { fail_seq: 0, fail_attempts: 1, log_dir: Some(dir.clone()), ..ProbeSpec::new(2) };
    let run = support::start_run_with(&db.pool, spec.first_job().max_attempts(1)).await;
    let worker = WorkerProcess::spawn(&db.url, "requeue-w", 2, &support::process::fast_lease_env(5.0, 1.0), &dir);
    support::wait_runs_in_state(&db.pool, &[run], "interrupted", Duration::from_secs(30)).await;

    // A running or completed job is refused, and the refusal is audited too.
    let refused = process::admin(&db.url, ACTOR, &["requeue", "999999"]);
    assert!(!refused.status.success());
    let requeued_at = Utc::now().timestamp_micros();
    let out = ok_output(&process::admin(&db.url, ACTOR, &["requeue", &run.to_string()]));
    assert!(out.contains("requeued job"), "{out}");
    // It runs again from attempt 1 (and, failing again, interrupts the run again).
    support::wait_for("the requeued job to run", Duration::from_secs(30), || async {
        log::read(&dir).into_iter().find(|l| l.ev == "start" && l.t_us > requeued_at && l.attempt == 1)
    })
    .await;
    support::wait_runs_in_state(&db.pool, &[run], "interrupted", Duration::from_secs(30)).await;
    worker.stop().await;
    let trail = audit(&db.pool).await;
    let outcomes: Vec<_> = trail.iter().map(|r| (r.action.as_str(), r.outcome.as_str(), r.target.as_str())).collect();
    assert_eq!(
        outcomes,
        [("jobs.requeue", "refused", "job 999999"), ("jobs.requeue", "ok", format!("run {run}").as_str())]
    );
    assert!(trail.iter().all(|r| r.actor == ACTOR));
    let events = runs::events(&db.pool, run).await.unwrap();
    assert!(events.iter().any(|e| e.kind == "requeued" && e.detail["by"] == ACTOR), "{events:?}");
}

#[tokio::test]
async fn admin_cancel_stops_a_running_run_and_its_worker_commits_nothing_more() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("admin_cancel").await;
    let dir = support::log_dir("admin_cancel");
    let spec = ProbeSpec { work_ms: 300, log_dir: Some(dir.clone()), ..ProbeSpec::new(1000) };
    let run = support::start_probe_run(&db.pool, &spec).await;
    let worker = WorkerProcess::spawn(&db.url, "cancel-w", 2, &support::process::fast_lease_env(5.0, 1.0), &dir);
    support::wait_for("two jobs committed", Duration::from_secs(30), || async {
        (log::read(&dir).iter().filter(|l| l.ev == "committed").count() >= 2).then_some(())
    })
    .await;
    let out = ok_output(&process::admin(&db.url, ACTOR, &["cancel", &run.to_string()]));
    let cancelled_at = Utc::now().timestamp_micros();
    assert!(out.contains("the run is stopped"), "{out}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    worker.stop().await;

    let r = runs::get(&db.pool, run).await.unwrap();
    assert_eq!(r.state, RunState::Stopped);
    assert_eq!(r.stop_reason.as_deref(), Some("cancelled by ops@test"));
    assert!(runs::slot_holders(&db.pool).await.unwrap().is_empty());
    let jobs = runs::jobs(&db.pool, run).await.unwrap();
    assert!(jobs.iter().all(|j| !j.state.is_live()), "no live job is left");
    assert_eq!(jobs.last().unwrap().state, JobState::Cancelled);
    let late = log::read(&dir).into_iter().filter(|l| l.ev == "committed" && l.t_us > cancelled_at).count();
    assert_eq!(late, 0, "the worker committed after the cancel");
    let trail = audit(&db.pool).await;
    assert_eq!((trail[0].action.as_str(), trail[0].outcome.as_str()), ("runs.cancel", "ok"));
    // Cancelling an ended run is refused, and audited as such.
    let again = process::admin(&db.url, ACTOR, &["cancel", &run.to_string()]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is stopped"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(audit(&db.pool).await.last().unwrap().outcome, "refused");
}

/// A hung worker (SIGSTOP) holds a 30 s lease; `admin rescue` hands its job to another worker at once, and
/// the hung one, resumed, writes nothing.
#[tokio::test]
async fn admin_rescue_hands_a_hung_workers_job_to_another_at_once() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("admin_rescue").await;
    let dir = support::log_dir("admin_rescue");
    let spec = ProbeSpec { stall_ms: 3_000, stall_seq: 1, log_dir: Some(dir.clone()), ..ProbeSpec::new(3) };
    let run = support::start_probe_run(&db.pool, &spec).await;
    let env = support::process::fast_lease_env(30.0, 1.0);
    let hung = WorkerProcess::spawn(&db.url, "rescue-hung", 1, &env, &dir);
    support::wait_for("seq 1 to start", Duration::from_secs(30), || async {
        log::read(&dir).into_iter().find(|l| l.ev == "start" && l.seq == 1)
    })
    .await;
    hung.pause();
    let other = WorkerProcess::spawn(&db.url, "rescue-other", 1, &env, &dir);
    let out = ok_output(&process::admin(&db.url, ACTOR, &["rescue", "rescue-hung"]));
    assert!(out.contains("rotated 1 lease"), "{out}");
    // Well inside the hung worker's 30 s lease.
    support::wait_runs_in_state(&db.pool, &[run], "succeeded", Duration::from_secs(20)).await;
    hung.resume();
    tokio::time::sleep(Duration::from_secs(4)).await;
    hung.stop().await;
    other.stop().await;

    let executions = log::executions(&log::read(&dir));
    let commits = log::commits_per_run(&executions);
    assert_eq!(commits[&run.0].iter().map(|(s, n)| (*s, *n)).collect::<Vec<_>>(), [(0, 1), (1, 1), (2, 1)]);
    let hung_seq1 = executions.iter().find(|e| e.seq == 1 && e.owner.as_deref() == Some("rescue-hung")).unwrap();
    assert!(!hung_seq1.committed(), "the rescued worker's late commit must fail: {hung_seq1:?}");
    let trail = audit(&db.pool).await;
    assert_eq!(
        (trail[0].action.as_str(), trail[0].target.as_str(), trail[0].outcome.as_str()),
        ("jobs.rescue", "worker rescue-hung", "ok")
    );
    assert_eq!(trail[0].detail["jobs"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn admin_prune_deletes_old_finished_jobs_of_ended_runs_only() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("admin_prune").await;
    let dir = support::log_dir("admin_prune");
    let done = support::start_probe_run(&db.pool, &ProbeSpec::new(5)).await;
    let worker = WorkerProcess::spawn(&db.url, "prune-w", 2, &support::process::fast_lease_env(5.0, 1.0), &dir);
    support::wait_runs_in_state(&db.pool, &[done], "succeeded", Duration::from_secs(30)).await;
    worker.stop().await;
    // A stopped run that still holds staging: its history is kept.
    let stopped = support::start_probe_run(&db.pool, &ProbeSpec::new(5)).await;
    runs::request_stop(&db.pool, stopped, "test").await.unwrap();
    sqlx::query("UPDATE transfer_run SET staging_queue = 'studio.transfer.' || id::text WHERE id = $1")
        .bind(stopped.0)
        .execute(&db.pool)
        .await
        .unwrap();

    let none = ok_output(&process::admin(&db.url, ACTOR, &["prune", "--older-than", "1d"]));
    assert!(none.contains("deleted 0 "), "{none}");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let out = ok_output(&process::admin(&db.url, ACTOR, &["prune", "--older-than", "1s"]));
    assert!(out.contains("deleted 5 "), "{out}");
    assert!(runs::jobs(&db.pool, done).await.unwrap().is_empty());
    assert_eq!(runs::jobs(&db.pool, stopped).await.unwrap().len(), 1);
    let trail = audit(&db.pool).await;
    let deleted: Vec<_> = trail.iter().map(|r| (r.action.as_str(), r.detail["deleted"]["jobs"].as_u64())).collect();
    assert_eq!(deleted, [("jobs.prune", Some(0)), ("jobs.prune", Some(5))]);
}

/// `artemis-transfer migrate` builds the schema on an empty database, seeds the settings, and can run again.
#[tokio::test]
async fn the_migrate_command_builds_the_schema_and_can_run_again() {
    let url = testbed::postgres::fresh_database("migrate_cmd").await;
    for round in 0..2 {
        let out = std::process::Command::new(process::binary())
            .arg("migrate")
            .env("DATABASE_URL", &url)
            .env("ARTEMIS_TRANSFER__SETTINGS__CONCURRENT_RUNS", "7")
            .output()
            .unwrap();
        assert!(out.status.success(), "round {round}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let pool = support::pool(&url, 2).await;
    let cap: serde_json::Value =
        sqlx::query_scalar("SELECT value FROM setting WHERE key = 'concurrent_runs'").fetch_one(&pool).await.unwrap();
    assert_eq!(cap, 7, "the default came from the environment override");
    let slots: i64 = sqlx::query_scalar("SELECT count(*) FROM run_slot").fetch_one(&pool).await.unwrap();
    assert_eq!(slots, 64);
    // Without a database URL, the command says so and fails.
    let out = std::process::Command::new(process::binary()).arg("migrate").env_remove("DATABASE_URL").output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("DATABASE_URL is not set"));
}
