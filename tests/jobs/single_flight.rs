//! 100 runs × 100 jobs over three worker processes of three tasks each, cap 4, judged by the external log:
//! never two jobs of one run overlapping, never more than `concurrent runs` runs active and the observed
//! concurrency reaching the cap (a global lock would fail that), every sequence completed exactly once.

use std::time::Duration;

use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::RunId;

use crate::support::{self, log, process::WorkerProcess};

const RUNS: usize = 100;
const JOBS: i64 = 100;
const CAP: u32 = 4;

#[tokio::test]
async fn hundred_runs_of_hundred_jobs_are_single_flight_capped_and_exactly_once() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("single_flight").await;
    support::set_cap(&db.pool, CAP).await;
    let dir = support::log_dir("single_flight");
    // A little work per job, so that jobs of different runs do overlap when the engine lets them.
    let spec = ProbeSpec { work_ms: 3, log_dir: Some(dir.clone()), ..ProbeSpec::new(JOBS) };
    let mut runs: Vec<RunId> = Vec::new();
    for _ in 0..RUNS {
        runs.push(support::start_probe_run(&db.pool, &spec).await);
    }
    let env = support::process::fast_lease_env(10.0, 3.0);
    let workers: Vec<_> = (0..3).map(|i| WorkerProcess::spawn(&db.url, &format!("sf-{i}"), 3, &env, &dir)).collect();
    support::wait_runs_in_state(&db.pool, &runs, "succeeded", Duration::from_secs(600)).await;
    for w in workers {
        w.stop().await;
    }

    let lines = log::read(&dir);
    let executions = log::executions(&lines);
    // Every execution ran to a commit: nothing failed, nothing was rejected, nothing ran twice.
    let not_committed: Vec<_> = executions.iter().filter(|e| !e.committed()).collect();
    assert!(not_committed.is_empty(), "executions that did not commit: {not_committed:?}");
    let commits = log::commits_per_run(&executions);
    assert_eq!(commits.len(), RUNS, "every run appears in the log");
    for run in &runs {
        let seqs = &commits[&run.0];
        let expected: Vec<i64> = (0..JOBS).collect();
        assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), expected, "run {run}: every sequence, no gaps");
        assert!(seqs.values().all(|n| *n == 1), "run {run}: a sequence committed twice: {seqs:?}");
    }
    // Single flight: within a run, each job starts after the previous one's work ended.
    let overlaps = log::overlaps_within_runs(&executions);
    assert!(overlaps.is_empty(), "{} overlapping pair(s) within runs, e.g. {:?}", overlaps.len(), overlaps.first());
    // The cap: never more runs active (first start to last pre-commit) than CAP…
    let active_runs = log::max_overlap(log::run_spans(&executions));
    assert!(active_runs <= CAP as usize, "{active_runs} runs were active at once; the cap is {CAP}");
    // …and jobs of CAP different runs did execute at the same instant.
    let in_flight = log::max_overlap(executions.iter().map(|e| (e.start, e.finish().unwrap())));
    assert_eq!(in_flight, CAP as usize, "observed job concurrency must reach the cap");
    // Work was spread over the processes.
    let owners: std::collections::HashSet<_> = executions.iter().filter_map(|e| e.owner.clone()).collect();
    assert_eq!(owners.len(), 3, "every worker process ran jobs: {owners:?}");
}
