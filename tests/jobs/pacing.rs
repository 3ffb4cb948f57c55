//! Pacing reaches its rate (docs/settings.md): a worker sleeps until the earliest due `run_at`, not a coarse poll.
//! Judged by the start times in the external log. These are the only timed assertions of the suite.

use std::time::Duration;

use artemis_transfer::jobs::probe::ProbeSpec;
use uuid::Uuid;

use crate::support::{self, log, process::WorkerProcess};

/// Jobs per second between the first and the last start of `run`'s jobs.
fn measured_rate(lines: &[log::Line], run: Uuid) -> (usize, f64) {
    let starts: Vec<i64> = lines.iter().filter(|l| l.run == run && l.ev == "start").map(|l| l.t_us).collect();
    let span_s = (starts[starts.len() - 1] - starts[0]) as f64 / 1e6;
    (starts.len(), (starts.len() - 1) as f64 / span_s)
}

#[tokio::test]
async fn runs_paced_at_5_and_50_per_second_reach_90_percent_of_their_rate() {
    let _heavy = support::HEAVY.lock().await;
    let db = support::db("pacing").await;
    let dir = support::log_dir("pacing");
    // Workers first, so the runs do not pay for their start-up.
    let env = support::process::fast_lease_env(10.0, 3.0);
    let workers: Vec<_> = (0..2).map(|i| WorkerProcess::spawn(&db.url, &format!("pace-{i}"), 2, &env, &dir)).collect();
    for w in &workers {
        w.ready().await;
    }
    // About five seconds each, side by side.
    let slow = ProbeSpec { per_second: Some(5.0), log_dir: Some(dir.clone()), ..ProbeSpec::new(26) };
    let fast = ProbeSpec { per_second: Some(50.0), log_dir: Some(dir.clone()), ..ProbeSpec::new(251) };
    let slow_run = support::start_probe_run(&db.pool, &slow).await;
    let fast_run = support::start_probe_run(&db.pool, &fast).await;
    support::wait_runs_in_state(&db.pool, &[slow_run, fast_run], "succeeded", Duration::from_secs(60)).await;
    for w in workers {
        w.stop().await;
    }
    let lines = log::read(&dir);
    for (run, target, jobs) in [(slow_run, 5.0, 26), (fast_run, 50.0, 251)] {
        let (n, rate) = measured_rate(&lines, run.0);
        assert_eq!(n, jobs, "run {run}: every job started once");
        eprintln!("paced at {target}/s: measured {rate:.2}/s over {n} jobs");
        assert!(rate >= 0.9 * target, "run paced at {target}/s reached only {rate:.2}/s");
        // The pace is a ceiling too: jobs never start ahead of their schedule.
        assert!(rate <= 1.05 * target, "run paced at {target}/s ran at {rate:.2}/s");
    }
}
