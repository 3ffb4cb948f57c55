//! Retention: what a prune deletes and what it never touches, many prunes at once, and a worker process that
//! prunes on its own schedule. Runs are made the engine's way (start, stop, an in-process worker) and then
//! made old by moving their timestamps back with UPDATE.

use std::time::Duration;

use artemis_transfer::jobs::admin::{self, Actor};
use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::prune::{self, Pruned, Retention, WhenBusy};
use artemis_transfer::jobs::store::record;
use artemis_transfer::jobs::{runs, Error, RunId};
use chrono::Utc;
use sqlx::PgPool;

use crate::support::{self, process::WorkerProcess, InProcessWorker};

const DAY: Duration = Duration::from_secs(86_400);

fn retention(days: u64) -> Retention {
    Retention { keep: DAY * days as u32, interval: Duration::from_secs(3600), keep_audit: DAY * 365 }
}

/// Moves everything about `runs` (the run rows, their jobs and events) `days` into the past.
async fn make_old(pool: &PgPool, runs: &[RunId], days: i32) {
    let ids: Vec<uuid::Uuid> = runs.iter().map(|r| r.0).collect();
    let back = format!("{days} days");
    sqlx::query(
        "UPDATE transfer_run SET created_at = created_at - $2::interval, updated_at = updated_at - $2::interval, \
         ended_at = ended_at - $2::interval WHERE id = ANY($1)",
    )
    .bind(&ids)
    .bind(&back)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE job SET created_at = created_at - $2::interval, run_at = run_at - $2::interval, \
         finished_at = finished_at - $2::interval WHERE run_id = ANY($1)",
    )
    .bind(&ids)
    .bind(&back)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("UPDATE run_event SET at = at - $2::interval WHERE run_id = ANY($1)")
        .bind(&ids)
        .bind(&back)
        .execute(pool)
        .await
        .unwrap();
}

/// A run started and stopped at once: Stopped, with a cancelled job and its events, no staging. Each of its jobs
/// takes 200 ms, so that a worker running meanwhile cannot finish all three before the stop arrives (the run
/// then ended Succeeded, and a test waiting for it to be Stopped waited in vain, 1 run in 20).
async fn stopped_run(pool: &PgPool) -> RunId {
    let run = support::start_probe_run(pool, &ProbeSpec { work_ms: 200, ..ProbeSpec::new(3) }).await;
    runs::request_stop(pool, run, "test").await.unwrap();
    run
}

/// Says that `run` holds (or held) its staging queue, as the relay records it.
async fn name_staging(pool: &PgPool, run: RunId) {
    sqlx::query("UPDATE transfer_run SET staging_queue = 'studio.transfer.' || id::text WHERE id = $1")
        .bind(run.0)
        .execute(pool)
        .await
        .unwrap();
}

async fn set_state(pool: &PgPool, run: RunId, state: &str) {
    sqlx::query("UPDATE transfer_run SET state = $2 WHERE id = $1")
        .bind(run.0)
        .bind(state)
        .execute(pool)
        .await
        .unwrap();
}

/// (jobs, events) of `run`.
async fn history(pool: &PgPool, run: RunId) -> (usize, usize) {
    (runs::jobs(pool, run).await.unwrap().len(), runs::events(pool, run).await.unwrap().len())
}

async fn exists(pool: &PgPool, run: RunId) -> bool {
    match runs::get(pool, run).await {
        Ok(_) => true,
        Err(Error::RunNotFound(_)) => false,
        Err(e) => panic!("read run {run}: {e}"),
    }
}

async fn audit_count(pool: &PgPool) -> usize {
    record::audit_list(pool, 10_000).await.unwrap().len()
}

#[tokio::test]
async fn an_old_ended_run_goes_with_its_jobs_and_events_and_audit_rows_past_their_own_retention() {
    let db = support::db("prune_old").await;
    let worker = InProcessWorker::start(
        &db.url,
        "prune-old-w",
        2,
        support::executor_config(Duration::from_secs(10), Duration::from_secs(2)),
    )
    .await;
    let old_done = support::start_probe_run(&db.pool, &ProbeSpec::new(4)).await;
    let recent_done = support::start_probe_run(&db.pool, &ProbeSpec::new(2)).await;
    support::wait_runs_in_state(&db.pool, &[old_done, recent_done], "succeeded", Duration::from_secs(60)).await;
    worker.stop().await;
    let old_stopped = stopped_run(&db.pool).await;
    // Audit rows older than the audit's retention (a year): they go; a recent one stays.
    admin::list_jobs(&db.pool, &Actor("ops@test".into()), None, None, 1).await.unwrap();
    sqlx::query("UPDATE audit SET at = at - interval '400 days'").execute(&db.pool).await.unwrap();
    admin::list_jobs(&db.pool, &Actor("ops@recent".into()), None, None, 1).await.unwrap();
    make_old(&db.pool, &[old_done, old_stopped], 40).await;

    let (done_jobs, done_events) = history(&db.pool, old_done).await;
    let (stopped_jobs, stopped_events) = history(&db.pool, old_stopped).await;
    assert_eq!(done_jobs, 4);
    assert!(
        done_events >= 2 && stopped_events >= 2,
        "started and ended/stopped events: {done_events} {stopped_events}"
    );
    let recent_before = history(&db.pool, recent_done).await;
    let audit_before = audit_count(&db.pool).await;

    let pruned = prune::scheduled_prune(&db.pool, "w1", retention(30)).await.unwrap();
    assert_eq!(
        pruned,
        Some(Pruned {
            jobs: (done_jobs + stopped_jobs) as u64,
            run_events: (done_events + stopped_events) as u64,
            runs: 2,
            audit: (audit_before - 1) as u64,
        })
    );
    for run in [old_done, old_stopped] {
        assert!(!exists(&db.pool, run).await, "run {run} is gone");
        assert_eq!(history(&db.pool, run).await, (0, 0), "run {run}'s jobs and events are gone");
    }
    assert!(exists(&db.pool, recent_done).await);
    assert_eq!(history(&db.pool, recent_done).await, recent_before, "a run inside the retention keeps everything");

    // The recent audit row is still there, the old ones are gone, and the prune added one naming the worker.
    let trail = record::audit_list(&db.pool, 100).await.unwrap();
    assert_eq!(trail.len(), 2, "{trail:?}");
    assert!(trail.iter().any(|r| r.action == "jobs.list" && r.actor == "ops@recent"));
    assert!(!trail.iter().any(|r| r.at < Utc::now() - chrono::Duration::days(365)));
    let row = &trail[0];
    assert_eq!((row.actor.as_str(), row.action.as_str(), row.outcome.as_str()), ("worker:w1", "jobs.prune", "ok"));
    assert_eq!(row.detail["deleted"]["runs"], 2);
    assert_eq!(row.detail["deleted"]["jobs"], (done_jobs + stopped_jobs) as u64);
    assert_eq!(row.detail["deleted"]["audit"], (audit_before - 1) as u64);

    // Idempotent: the next prune finds nothing, and a prune that deleted nothing leaves no audit row.
    assert_eq!(prune::scheduled_prune(&db.pool, "w1", retention(30)).await.unwrap(), Some(Pruned::default()));
    assert_eq!(audit_count(&db.pool).await, 2);
}

#[tokio::test]
async fn a_run_that_holds_staging_is_kept_however_old() {
    let db = support::db("prune_staging").await;
    let mut holding = Vec::new();
    for state in ["stopped", "interrupted", "failed"] {
        let run = stopped_run(&db.pool).await;
        set_state(&db.pool, run, state).await;
        name_staging(&db.pool, run).await;
        holding.push(run);
    }
    // The same, but ended with its staging removed: the name is kept on the row, and the run may go.
    let removed = stopped_run(&db.pool).await;
    set_state(&db.pool, removed, "succeeded").await;
    name_staging(&db.pool, removed).await;
    let mut all = holding.clone();
    all.push(removed);
    make_old(&db.pool, &all, 3650).await;
    let mut before = Vec::new();
    for run in &holding {
        before.push(history(&db.pool, *run).await);
    }

    let pruned = admin::prune(&db.pool, &Actor("ops@test".into()), DAY).await.unwrap();
    assert_eq!(pruned.runs, 1, "only the run whose staging was removed: {pruned:?}");
    assert!(!exists(&db.pool, removed).await);
    for (run, kept) in holding.iter().zip(before) {
        assert!(exists(&db.pool, *run).await, "run {run} holds staging: kept");
        assert_eq!(history(&db.pool, *run).await, kept, "run {run} keeps its jobs and events");
        assert!(kept.0 > 0 && kept.1 > 0);
    }
}

#[tokio::test]
async fn a_live_run_is_kept_however_old() {
    let db = support::db("prune_live").await;
    // Resumed after a stop: a cancelled job from before and a pending one now.
    let resumed = stopped_run(&db.pool).await;
    runs::start(&db.pool, resumed, &ProbeSpec::new(3).first_job(), "test", 10).await.unwrap();
    let queued = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let previewed = RunId::new();
    runs::create(&db.pool, previewed, Some("test")).await.unwrap();
    let live = [resumed, queued, previewed];
    make_old(&db.pool, &live, 3650).await;
    // Even with a stale end time on the row, a live state keeps it.
    sqlx::query("UPDATE transfer_run SET ended_at = now() - interval '3650 days' WHERE id = ANY($1)")
        .bind(live.iter().map(|r| r.0).collect::<Vec<_>>())
        .execute(&db.pool)
        .await
        .unwrap();
    let mut before = Vec::new();
    for run in live {
        before.push(history(&db.pool, run).await);
    }
    assert_eq!(before[0].0, 2, "the resumed run has its old cancelled job and a pending one");

    let pruned = admin::prune(&db.pool, &Actor("ops@test".into()), DAY).await.unwrap();
    assert_eq!(pruned, Pruned::default());
    for (run, kept) in live.iter().zip(before) {
        assert!(exists(&db.pool, *run).await, "live run {run} kept");
        assert_eq!(history(&db.pool, *run).await, kept, "live run {run} keeps its jobs and events");
    }
}

/// Previews never executed: one whose preview expired before the cut-off goes (it can never start); one that
/// expired since, and one without an expiry, stay.
#[tokio::test]
async fn a_preview_that_expired_before_the_cut_off_goes() {
    let db = support::db("prune_previews").await;
    let (long_expired, recently_expired, no_expiry) = (RunId::new(), RunId::new(), RunId::new());
    for run in [long_expired, recently_expired, no_expiry] {
        runs::create(&db.pool, run, Some("test")).await.unwrap();
    }
    for (run, days) in [(long_expired, 40), (recently_expired, 10)] {
        sqlx::query("UPDATE transfer_run SET preview_expires_at = now() - make_interval(days => $2) WHERE id = $1")
            .bind(run.0)
            .bind(days)
            .execute(&db.pool)
            .await
            .unwrap();
    }
    let pruned = admin::prune(&db.pool, &Actor("ops@test".into()), DAY * 30).await.unwrap();
    assert_eq!(pruned.runs, 1, "{pruned:?}");
    assert!(!exists(&db.pool, long_expired).await, "a preview expired 40 days ago goes");
    assert!(exists(&db.pool, recently_expired).await, "a preview expired 10 days ago stays (30 days kept)");
    assert!(exists(&db.pool, no_expiry).await, "a preview without an expiry stays");
}

/// Many replicas prune at once (scheduled ones skip while another holds the lock, admin ones wait): none
/// fails, and every old run is deleted exactly once — more runs than one transaction takes, so the prunes'
/// transactions interleave.
#[tokio::test]
async fn concurrent_prunes_do_not_fail_and_count_each_run_once() {
    let db = support::db("prune_concurrent").await;
    let runs = prune::RUNS_PER_TX * 2 + 37;
    sqlx::query(
        "WITH r AS (INSERT INTO transfer_run (id, state, ended_at) \
                    SELECT gen_random_uuid(), 'stopped', now() - interval '400 days' FROM generate_series(1, $1) \
                    RETURNING id) \
         INSERT INTO job (kind, run_id, seq, max_attempts, state, finished_at) \
         SELECT 'probe', id, 0, 1, 'cancelled', now() - interval '400 days' FROM r",
    )
    .bind(runs as i32)
    .execute(&db.pool)
    .await
    .unwrap();
    let before = Utc::now() - chrono::Duration::days(30);
    let pool = &db.pool;
    let prunes: Vec<_> = [WhenBusy::Skip, WhenBusy::Wait, WhenBusy::Skip, WhenBusy::Wait]
        .into_iter()
        .map(|when_busy| {
            let pool = pool.clone();
            tokio::spawn(async move { prune::prune(&pool, before, when_busy).await })
        })
        .collect();
    let mut results = Vec::new();
    for prune in prunes {
        results.push(prune.await.expect("the prune task did not panic"));
    }
    let mut deleted = Pruned::default();
    for result in results {
        let pruned = result.expect("a concurrent prune does not fail");
        if let Some(p) = pruned {
            deleted.runs += p.runs;
            deleted.jobs += p.jobs;
        }
    }
    assert_eq!(deleted, Pruned { jobs: runs as u64, run_events: 0, runs: runs as u64, audit: 0 });
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM transfer_run").fetch_one(pool).await.unwrap();
    assert_eq!(left, 0);
}

/// `artemis-transfer worker` prunes when it starts and then every `retention.prune_interval_secs`, and audits
/// what it deleted under its own name.
#[tokio::test]
async fn a_worker_process_prunes_on_its_schedule() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("prune_worker").await;
    let dir = support::log_dir("prune_worker");
    let first = stopped_run(&db.pool).await;
    make_old(&db.pool, &[first], 40).await;
    let mut env = support::process::fast_lease_env(5.0, 1.0);
    env.push(("ARTEMIS_TRANSFER__RETENTION__PRUNE_INTERVAL_SECS".into(), "1".into()));
    let worker = WorkerProcess::spawn(&db.url, "prune-sched", 1, &env, &dir);
    worker.ready().await;
    support::wait_for("the worker to prune the old run", Duration::from_secs(30), || async {
        (!exists(&db.pool, first).await).then_some(())
    })
    .await;
    // A run that becomes old while the worker runs goes at a later round.
    let second = stopped_run(&db.pool).await;
    // The worker may have claimed its job first: then the stop ends the run after that batch.
    support::wait_runs_in_state(&db.pool, &[second], "stopped", Duration::from_secs(30)).await;
    make_old(&db.pool, &[second], 40).await;
    support::wait_for("the worker to prune the second run", Duration::from_secs(30), || async {
        (!exists(&db.pool, second).await).then_some(())
    })
    .await;
    worker.stop().await;
    let trail = record::audit_list(&db.pool, 100).await.unwrap();
    let by_worker: Vec<_> = trail.iter().filter(|r| r.actor == "worker:prune-sched").collect();
    assert_eq!(by_worker.len(), 2, "one audit row per prune that deleted something: {trail:?}");
    assert!(by_worker.iter().all(|r| r.action == "jobs.prune" && r.detail["deleted"]["runs"] == 1));
}

/// A worker stopped while its prune round is between the deletions' commit and the audit row lets the round end,
/// so what it deleted is audited. The fault seam holds the round there for 2 s; before, the stop cancelled it.
#[tokio::test]
async fn a_worker_stopped_mid_prune_audits_what_it_deleted() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("prune_stop").await;
    let dir = support::log_dir("prune_stop");
    let old = stopped_run(&db.pool).await;
    make_old(&db.pool, &[old], 40).await;
    let mut env = support::process::fast_lease_env(5.0, 1.0);
    env.push(("ARTEMIS_TRANSFER_FAULT_PAUSE".into(), "prune-committed:2000".into()));
    let worker = WorkerProcess::spawn(&db.url, "prune-stop", 1, &env, &dir);
    worker.ready().await;
    support::wait_for("the worker to delete the old run", Duration::from_secs(30), || async {
        (!exists(&db.pool, old).await).then_some(())
    })
    .await;
    worker.stop().await;
    let trail = record::audit_list(&db.pool, 100).await.unwrap();
    let audited = trail.iter().filter(|r| r.actor == "worker:prune-stop" && r.action == "jobs.prune").count();
    assert_eq!(audited, 1, "the deletion is audited although the worker was stopped mid-round: {trail:?}");
}
