//! Postgres restarted (crashed: `pg_ctl stop -m immediate`, then started, replaying its WAL) under load:
//! workers reconnect and finish; nothing is lost or doubled.
//!
//! This runs on a private throwaway cluster (`testbed::private_postgres`), never on the shared test bed's
//! Postgres, which other tests and engineers use at the same time.

use std::time::Duration;

use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::{runs, JobState, RunId};
use testbed::private_postgres::{PrivatePostgres, StopMode};

use crate::support::{self, log, process::WorkerProcess};

const RUNS: usize = 8;
const JOBS: i64 = 60;

#[tokio::test]
async fn workers_finish_every_run_exactly_once_across_a_postgres_crash_restart() {
    let _heavy = support::HEAVY.lock().await;
    let pg = PrivatePostgres::start("jobs_restart").await;
    let db = support::migrated(pg.url.clone()).await;
    let dir = support::log_dir("pg_restart");
    let spec = ProbeSpec { work_ms: 5, log_dir: Some(dir.clone()), ..ProbeSpec::new(JOBS) };
    let mut ids: Vec<RunId> = Vec::new();
    for _ in 0..RUNS {
        ids.push(support::start_probe_run(&db.pool, &spec).await);
    }
    let env = support::process::fast_lease_env(3.0, 1.0);
    let workers: Vec<_> = (0..2).map(|i| WorkerProcess::spawn(&db.url, &format!("pgr-{i}"), 2, &env, &dir)).collect();
    // Mid-load: some work done, most not.
    support::wait_for("a hundred jobs committed", Duration::from_secs(120), || async {
        let n = log::read(&dir).iter().filter(|l| l.ev == "committed").count();
        (n >= 100).then_some(())
    })
    .await;
    pg.stop(StopMode::Immediate);
    tokio::time::sleep(Duration::from_secs(1)).await;
    pg.start_server();
    support::wait_runs_in_state(&db.pool, &ids, "succeeded", Duration::from_secs(300)).await;
    for w in workers {
        w.stop().await;
    }

    let executions = log::executions(&log::read(&dir));
    let commits = log::commits_per_run(&executions);
    for run in &ids {
        // Nothing doubled: no sequence committed twice (the log), one completed row per sequence (the table).
        let seqs = commits.get(&run.0).cloned().unwrap_or_default();
        assert!(seqs.values().all(|n| *n == 1), "run {run}: a sequence committed twice: {seqs:?}");
        let jobs = runs::jobs(&db.pool, *run).await.unwrap();
        let completed: Vec<i64> = jobs.iter().filter(|j| j.state == JobState::Completed).map(|j| j.seq).collect();
        assert_eq!(completed, (0..JOBS).collect::<Vec<_>>(), "run {run}: nothing lost");
        assert_eq!(runs::get(&db.pool, *run).await.unwrap().counters["probe_done"], JOBS);
        // A sequence the log does not show committed was an ambiguous commit (the connection died during
        // COMMIT, which had been applied): the log must show that attempt ending in an error.
        for seq in (0..JOBS).filter(|s| !seqs.contains_key(s)) {
            assert!(
                executions
                    .iter()
                    .any(|e| e.run == run.0 && e.seq == seq && matches!(&e.end, Some((ev, _)) if ev == "error")),
                "run {run} seq {seq}: completed in the table but neither committed nor failed at commit in the log"
            );
        }
    }
    let interrupted = executions.iter().filter(|e| !e.committed()).count();
    assert!(interrupted > 0, "the restart interrupted nothing: it happened too late to test anything");
}
