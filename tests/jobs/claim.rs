//! Claims, slots, leases and fencing, one step at a time through the library (no timing involved: leases
//! are expired by UPDATE, as underway's `task_row_update_fenced_after_reclaim` does).

use std::time::Duration;

use artemis_transfer::jobs::executor::{Executed, Executor};
use artemis_transfer::jobs::handler::{Handler, HandlerFuture, JobContext, Outcome, Registry};
use artemis_transfer::jobs::lease::Lease;
use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::runs::{self, StopRequest};
use artemis_transfer::jobs::store::job as store;
use artemis_transfer::jobs::wake::Wake;
use artemis_transfer::jobs::{ClaimedJob, Error, JobState, NewJob, RunId, RunState};
use chrono::Utc;
use sqlx::PgPool;

use crate::support;

const LEASE: Duration = Duration::from_secs(30);

async fn claim(pool: &PgPool, owner: &str) -> Option<ClaimedJob> {
    let mut jobs = store::job_claim(pool, owner, LEASE, 1).await.expect("job_claim");
    assert!(jobs.len() <= 1);
    jobs.pop()
}

fn lease(pool: &PgPool, claimed: &ClaimedJob) -> Lease {
    Lease::new(pool.clone(), claimed, LEASE, 10, Wake::new())
}

async fn expire_lease(pool: &PgPool, claimed: &ClaimedJob) {
    sqlx::query("UPDATE job SET lease_expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(claimed.job.id)
        .execute(pool)
        .await
        .unwrap();
}

async fn run_state(pool: &PgPool, run: RunId) -> RunState {
    runs::get(pool, run).await.unwrap().state
}

/// Completes the claimed job and enqueues the next one, as a handler does.
async fn hand_off(pool: &PgPool, claimed: &ClaimedJob) {
    let mut tx = lease(pool, claimed).begin().await.unwrap();
    tx.complete_and_enqueue(&NewJob::new("probe", claimed.job.payload.clone())).await.unwrap();
    let _committed = tx.commit().await.unwrap();
}

/// Completes the claimed job and ends its run Succeeded.
async fn finish(pool: &PgPool, claimed: &ClaimedJob) {
    let mut tx = lease(pool, claimed).begin().await.unwrap();
    tx.complete_and_end_run(RunState::Succeeded, None).await.unwrap();
    let _committed = tx.commit().await.unwrap();
}

#[tokio::test]
async fn a_claim_takes_a_free_slot_and_a_run_without_one_stays_queued() {
    let db = support::db("claim_takes_slot").await;
    support::set_cap(&db.pool, 2).await;
    let spec = ProbeSpec::new(5);
    let (a, b, c) = (
        support::start_probe_run(&db.pool, &spec).await,
        support::start_probe_run(&db.pool, &spec).await,
        support::start_probe_run(&db.pool, &spec).await,
    );
    assert_eq!(run_state(&db.pool, a).await, RunState::Queued);
    let first = claim(&db.pool, "w1").await.expect("a slot is free");
    let second = claim(&db.pool, "w1").await.expect("a second slot is free");
    assert_eq!((first.job.run_id, second.job.run_id), (a, b), "oldest first");
    assert_eq!(run_state(&db.pool, a).await, RunState::Running);
    assert!(claim(&db.pool, "w1").await.is_none(), "the cap of 2 is reached");
    assert_eq!(run_state(&db.pool, c).await, RunState::Queued);
    assert_eq!(runs::queue_position(&db.pool, c).await.unwrap(), Some(1));
    // The queued run's job is due, but no slot is free: nothing is claimable, so nothing is "due".
    assert_eq!(
        store::job_next_due(&db.pool).await.unwrap().map(|t| t > Utc::now()),
        Some(true),
        "only the leases' expiry"
    );

    finish(&db.pool, &first).await;
    assert_eq!(runs::slot_holders(&db.pool).await.unwrap(), vec![b]);
    let third = claim(&db.pool, "w1").await.expect("a slot freed");
    assert_eq!(third.job.run_id, c);
    assert_eq!(run_state(&db.pool, c).await, RunState::Running);
}

#[tokio::test]
async fn a_run_keeps_its_slot_between_batches() {
    let db = support::db("slot_between_batches").await;
    support::set_cap(&db.pool, 1).await;
    let spec = ProbeSpec::new(5);
    let a = support::start_probe_run(&db.pool, &spec).await;
    let b = support::start_probe_run(&db.pool, &spec).await;
    let mut job = claim(&db.pool, "w").await.unwrap();
    for seq in 0..3 {
        assert_eq!((job.job.run_id, job.job.seq), (a, seq));
        hand_off(&db.pool, &job).await;
        // Between batches the slot stays with A, so B's due job is not claimable.
        assert_eq!(runs::slot_holders(&db.pool).await.unwrap(), vec![a]);
        job = claim(&db.pool, "w").await.expect("A's next batch");
    }
    assert_eq!(run_state(&db.pool, b).await, RunState::Queued);
    finish(&db.pool, &job).await;
    let next = claim(&db.pool, "w").await.expect("B gets the slot");
    assert_eq!(next.job.run_id, b);
}

#[tokio::test]
async fn an_expired_lease_is_claimed_again_as_a_new_attempt_and_recorded() {
    let db = support::db("lease_reclaimed").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let first = claim(&db.pool, "w1").await.unwrap();
    assert!(claim(&db.pool, "w2").await.is_none(), "a live lease is not claimable");
    expire_lease(&db.pool, &first).await;
    let second = claim(&db.pool, "w2").await.expect("an expired lease is claimable");
    assert_eq!(second.job.id, first.job.id);
    assert_eq!(second.job.attempt, 2, "the lost lease cost an attempt");
    assert!(second.reclaimed);
    assert_ne!(second.token, first.token);
    assert!(second.job.last_error.as_deref().unwrap_or("").contains("w1"), "{:?}", second.job.last_error);
    let events = runs::events(&db.pool, run).await.unwrap();
    let expired: Vec<_> = events.iter().filter(|e| e.kind == "lease_expired").collect();
    assert_eq!(expired.len(), 1, "{events:?}");
    assert_eq!(expired[0].detail["lost_by"], "w1");
    assert_eq!(expired[0].detail["claimed_by"], "w2");
}

/// The zombie: a worker whose lease expired and was taken over writes nothing, whatever it tries.
#[tokio::test]
async fn a_lost_lease_writes_nothing() {
    let db = support::db("lost_lease_fenced").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let zombie = claim(&db.pool, "zombie").await.unwrap();
    expire_lease(&db.pool, &zombie).await;
    let successor = claim(&db.pool, "healthy").await.unwrap();

    let z = lease(&db.pool, &zombie);
    assert!(matches!(z.heartbeat().await, Err(Error::LeaseLost { .. })));
    assert!(matches!(z.begin().await.map(|_| ()), Err(Error::LeaseLost { .. })));
    assert!(matches!(z.retry(Utc::now(), "late").await, Err(Error::LeaseLost { .. })));
    assert!(matches!(z.snooze(Utc::now()).await, Err(Error::LeaseLost { .. })));
    assert!(matches!(z.release().await, Err(Error::LeaseLost { .. })));

    hand_off(&db.pool, &successor).await;
    let jobs = runs::jobs(&db.pool, run).await.unwrap();
    let states: Vec<_> = jobs.iter().map(|j| (j.seq, j.state, j.attempt)).collect();
    assert_eq!(states, [(0, JobState::Completed, 2), (1, JobState::Pending, 0)]);
}

/// A holder frozen inside its fenced transaction (SIGSTOP, a VM pause) does not keep the job's and run's rows
/// locked past its lease: Postgres ends the session once the transaction sits idle for the lease's length (the
/// bound travels with BEGIN, `session::begin_bounded`), the transaction rolls back, and the job can be taken over.
#[tokio::test]
async fn a_frozen_holder_loses_its_transaction_after_the_leases_length() {
    let db = support::db("fenced_idle_bound").await;
    support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let claimed = claim(&db.pool, "frozen").await.unwrap();
    let short = Lease::new(db.pool.clone(), &claimed, Duration::from_millis(500), 10, Wake::new());
    let mut tx = short.begin().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let late = tx.complete_and_enqueue(&NewJob::new("probe", claimed.job.payload.clone())).await;
    assert!(matches!(late, Err(Error::Db { .. })), "{late:?}");
    drop(tx);
    expire_lease(&db.pool, &claimed).await;
    let taken = claim(&db.pool, "healthy").await.expect("the rows are no longer locked");
    assert_eq!((taken.job.id, taken.job.attempt), (claimed.job.id, 2));
}

/// A handler's transaction commits all of its writes or none, and while it is open nobody can take the job
/// over, even once the lease has expired: the fence is the token plus the row lock, not the clock.
#[tokio::test]
async fn a_fenced_transaction_is_all_or_nothing() {
    let db = support::db("fenced_all_or_nothing").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let claimed = claim(&db.pool, "w").await.unwrap();
    // Committing without saying what became of the job is refused, and rolls back the handler's writes.
    let mut tx = lease(&db.pool, &claimed).begin().await.unwrap();
    tx.set_counters(&serde_json::json!({ "probe_done": 99 })).await.unwrap();
    assert!(matches!(tx.commit().await, Err(Error::JobRefused { .. })));
    assert_eq!(runs::get(&db.pool, run).await.unwrap().counters, serde_json::json!({}));

    // The lease expires but nobody has taken it yet: its holder may still begin…
    expire_lease(&db.pool, &claimed).await;
    let mut tx = lease(&db.pool, &claimed).begin().await.unwrap();
    // …and while its transaction is open the job is not claimable (the claim skips the locked row).
    assert!(claim(&db.pool, "thief").await.is_none());
    tx.complete_and_enqueue(&NewJob::new("probe", claimed.job.payload.clone())).await.unwrap();
    let _committed = tx.commit().await.unwrap();
    let jobs = runs::jobs(&db.pool, run).await.unwrap();
    let states: Vec<_> = jobs.iter().map(|j| (j.seq, j.state, j.attempt)).collect();
    assert_eq!(states, [(0, JobState::Completed, 1), (1, JobState::Pending, 0)]);
}

#[tokio::test]
async fn a_snooze_gives_its_attempt_back_and_a_retry_keeps_it() {
    let db = support::db("snooze_and_retry").await;
    support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let first = claim(&db.pool, "w").await.unwrap();
    assert_eq!(first.job.attempt, 1);
    let later = Utc::now() + chrono::Duration::seconds(60);
    lease(&db.pool, &first).snooze(later).await.unwrap();
    let row = store::job_get(&db.pool, first.job.id).await.unwrap().unwrap();
    assert_eq!((row.state, row.attempt), (JobState::Pending, 0));
    assert!(claim(&db.pool, "w").await.is_none(), "not due before run_at");
    assert_eq!(
        store::job_next_due(&db.pool).await.unwrap().map(|t| (t - later).num_milliseconds().abs() < 5),
        Some(true)
    );

    sqlx::query("UPDATE job SET run_at = now() WHERE id = $1").bind(first.job.id).execute(&db.pool).await.unwrap();
    let again = claim(&db.pool, "w").await.unwrap();
    assert_eq!(again.job.attempt, 1, "the snooze did not use an attempt");
    lease(&db.pool, &again).retry(later, "broker unreachable").await.unwrap();
    let row = store::job_get(&db.pool, first.job.id).await.unwrap().unwrap();
    assert_eq!((row.state, row.attempt), (JobState::Pending, 1));
    assert_eq!(row.last_error.as_deref(), Some("broker unreachable"));
    assert_eq!(row.run_at, later.with_timezone(&Utc).trunc_micros());
}

trait TruncMicros {
    fn trunc_micros(self) -> Self;
}

impl TruncMicros for chrono::DateTime<Utc> {
    fn trunc_micros(self) -> Self {
        chrono::DateTime::from_timestamp_micros(self.timestamp_micros()).unwrap()
    }
}

/// A handler that always fails transiently.
struct AlwaysFails;

impl Handler for AlwaysFails {
    fn handle<'a>(&'a self, _ctx: &'a JobContext) -> HandlerFuture<'a> {
        Box::pin(async { Ok(Outcome::Retry { error: "the target refused the connection".into(), code: None }) })
    }
}

fn executor(pool: &PgPool, registry: Registry) -> Executor {
    Executor::new(pool.clone(), registry, support::executor_config(LEASE, Duration::from_secs(10)), Wake::new())
}

#[tokio::test]
async fn a_spent_retry_budget_interrupts_the_run_with_the_error_in_words() {
    let db = support::db("budget_spent").await;
    let run = support::start_run_with(&db.pool, NewJob::new("flaky", serde_json::json!({})).max_attempts(2)).await;
    let exec = executor(&db.pool, Registry::new().with("flaky", AlwaysFails));
    let job = claim(&db.pool, "w").await.unwrap();
    assert_eq!(exec.execute(job).await.unwrap(), Executed::Retried);
    let row = store::job_list_for_run(&db.pool, run).await.unwrap().remove(0);
    assert!(row.run_at > Utc::now(), "the backoff is stored in run_at");
    sqlx::query("UPDATE job SET run_at = now() WHERE run_id = $1").bind(run).execute(&db.pool).await.unwrap();
    let job = claim(&db.pool, "w").await.unwrap();
    assert_eq!(exec.execute(job).await.unwrap(), Executed::RunEnded(RunState::Interrupted));
    let r = runs::get(&db.pool, run).await.unwrap();
    assert_eq!(r.state, RunState::Interrupted);
    assert_eq!(r.last_error.as_deref(), Some("gave up after 2 attempts: the target refused the connection"));
    assert!(runs::slot_holders(&db.pool).await.unwrap().is_empty(), "the slot is released");
    assert_eq!(runs::jobs(&db.pool, run).await.unwrap()[0].state, JobState::Failed);
}

/// A job whose workers keep dying (leases expire) runs out of attempts instead of killing every replica.
#[tokio::test]
async fn a_job_that_keeps_losing_its_workers_ends_interrupted() {
    let db = support::db("kills_workers").await;
    let run = support::start_run_with(&db.pool, ProbeSpec::new(3).first_job().max_attempts(2)).await;
    for owner in ["w1", "w2"] {
        let job = claim(&db.pool, owner).await.unwrap();
        expire_lease(&db.pool, &job).await;
    }
    let third = claim(&db.pool, "w3").await.unwrap();
    assert_eq!(third.job.attempt, 3);
    let exec = executor(&db.pool, artemis_transfer::worker::registry());
    assert_eq!(exec.execute(third).await.unwrap(), Executed::RunEnded(RunState::Interrupted));
    let r = runs::get(&db.pool, run).await.unwrap();
    let error = r.last_error.unwrap_or_default();
    assert!(error.starts_with("gave up after 2 attempts: the worker w2 stopped renewing its lease"), "{error}");
}

#[tokio::test]
async fn a_stop_request_stops_a_waiting_run_now_and_a_busy_one_at_its_next_claim() {
    let db = support::db("stop_request").await;
    let spec = ProbeSpec::new(5);
    // Nothing in flight: stopped at once, slot or not.
    let idle = support::start_probe_run(&db.pool, &spec).await;
    assert_eq!(runs::request_stop(&db.pool, idle, "operator asked").await.unwrap(), StopRequest::Stopped);
    let r = runs::get(&db.pool, idle).await.unwrap();
    assert_eq!((r.state, r.stop_reason.as_deref()), (RunState::Stopped, Some("operator asked")));
    assert!(claim(&db.pool, "w").await.is_none());

    // A batch in flight finishes; the next claim stops the run.
    let busy = support::start_probe_run(&db.pool, &spec).await;
    let job = claim(&db.pool, "w").await.unwrap();
    assert_eq!(runs::request_stop(&db.pool, busy, "operator asked").await.unwrap(), StopRequest::Requested);
    hand_off(&db.pool, &job).await;
    let next = claim(&db.pool, "w").await.unwrap();
    assert!(next.stop_requested);
    let exec = executor(&db.pool, artemis_transfer::worker::registry());
    assert_eq!(exec.execute(next).await.unwrap(), Executed::RunEnded(RunState::Stopped));
    assert_eq!(run_state(&db.pool, busy).await, RunState::Stopped);
    assert!(runs::slot_holders(&db.pool).await.unwrap().is_empty());
    let states: Vec<_> = runs::jobs(&db.pool, busy).await.unwrap().iter().map(|j| j.state).collect();
    assert_eq!(states, [JobState::Completed, JobState::Cancelled]);
    // A stopped run can be started again; it continues its sequence.
    let resumed = runs::start(&db.pool, busy, &spec.first_job(), "test", 10).await.unwrap();
    assert_eq!(resumed.seq, 2);
}

/// A claim never waits on a run row that an operator's action holds (a stop locks the run, then its job): it skips
/// that run's job this time. Before, the claim locked the job and then waited on the run row to mark a queued run
/// running, while the stop held the run row and waited on the job: Postgres broke the deadlock by failing one of
/// them, and an operator's stop was answered "deadlock detected" (seen in `prune::a_worker_process_prunes_on_its_schedule`).
#[tokio::test]
async fn a_claim_skips_a_run_an_action_holds_instead_of_deadlocking_with_it() {
    let db = support::db("claim_skips_held_run").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(2)).await;
    let mut action = db.pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM transfer_run WHERE id = $1 FOR UPDATE").bind(run).execute(&mut *action).await.unwrap();
    let claimed = tokio::time::timeout(Duration::from_secs(5), claim(&db.pool, "w"))
        .await
        .expect("the claim waited on a run row an action holds");
    assert!(claimed.is_none(), "the job of a run an action holds was claimed: {claimed:?}");
    // The action goes on to the run's job, which no claim holds.
    let job = sqlx::query("SELECT 1 FROM job WHERE run_id = $1 AND state = 'pending' FOR UPDATE").bind(run);
    tokio::time::timeout(Duration::from_secs(5), job.execute(&mut *action))
        .await
        .expect("the action waited on the run's job")
        .unwrap();
    action.rollback().await.unwrap();
    assert!(claim(&db.pool, "w").await.is_some(), "once the action is done, the job is claimed");
}

/// A pending job whose run has a batch in doubt (paced, snoozed or backing off) is not cancelled by a stop: the
/// job is made due now and the worker that claims it settles the batch, then stops the run (docs/guarantees.md, I6). Before
/// migration 0008 the run stopped at once with its batch in doubt.
#[tokio::test]
async fn a_stop_keeps_the_job_of_a_run_with_a_batch_in_doubt_and_makes_it_due_now() {
    let db = support::db("stop_in_doubt").await;
    let spec = ProbeSpec::new(5);
    let run = support::start_probe_run(&db.pool, &spec).await;
    let later = chrono::Utc::now() + chrono::Duration::minutes(10);
    sqlx::query("UPDATE job SET run_at = $2 WHERE run_id = $1 AND state = 'pending'")
        .bind(run)
        .bind(later)
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE transfer_run SET relay = '{\"in_doubt\": [{\"ids\": [7, 8]}]}'::jsonb WHERE id = $1")
        .bind(run)
        .execute(&db.pool)
        .await
        .unwrap();
    assert_eq!(runs::request_stop(&db.pool, run, "operator asked").await.unwrap(), StopRequest::Requested);
    assert_ne!(run_state(&db.pool, run).await, RunState::Stopped, "stopped with a batch in doubt");
    let (state, due): (String, bool) =
        sqlx::query_as("SELECT state::text, run_at <= now() FROM job WHERE run_id = $1 ORDER BY id DESC LIMIT 1")
            .bind(run)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), due), ("pending", true));
    let next = claim(&db.pool, "w").await.expect("the job is due now");
    assert!(next.stop_requested);
}

/// One claim statement takes several jobs, but never more runs than there are free slots, and never two
/// jobs of one run.
#[tokio::test]
async fn a_batch_claim_takes_only_as_many_new_runs_as_free_slots() {
    let db = support::db("batch_claim").await;
    support::set_cap(&db.pool, 3).await;
    let spec = ProbeSpec::new(5);
    let mut started = Vec::new();
    for _ in 0..5 {
        started.push(support::start_probe_run(&db.pool, &spec).await);
    }
    let batch = store::job_claim(&db.pool, "w", LEASE, 10).await.unwrap();
    let claimed: Vec<RunId> = batch.iter().map(|j| j.job.run_id).collect();
    assert_eq!(claimed, started[..3], "the three oldest runs, one job each");
    let mut holders = runs::slot_holders(&db.pool).await.unwrap();
    holders.sort();
    let mut expected = started[..3].to_vec();
    expected.sort();
    assert_eq!(holders, expected);
    assert!(store::job_claim(&db.pool, "w", LEASE, 10).await.unwrap().is_empty());
    for run in &started[3..] {
        assert_eq!(run_state(&db.pool, *run).await, RunState::Queued);
    }
}

/// A hand-off whose next job is due now leases it to the same worker, which runs it at once (no claim in
/// between), up to CONTINUATION_LIMIT jobs in a row; then the next job waits for a claim like any other.
#[tokio::test]
async fn a_hand_off_due_now_continues_in_the_same_worker_up_to_a_limit() {
    use artemis_transfer::jobs::executor::CONTINUATION_LIMIT;
    let db = support::db("continuation").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(CONTINUATION_LIMIT as i64 + 5)).await;
    let exec = executor(&db.pool, artemis_transfer::worker::registry());
    let job = claim(&db.pool, "w").await.unwrap();
    assert_eq!(exec.execute(job).await.unwrap(), Executed::Committed);
    let jobs = runs::jobs(&db.pool, run).await.unwrap();
    assert_eq!(jobs.len(), CONTINUATION_LIMIT + 1);
    for j in &jobs[..CONTINUATION_LIMIT] {
        assert_eq!((j.state, j.attempt, j.lease_owner.as_deref()), (JobState::Completed, 1, Some("w")), "{j:?}");
    }
    let last = &jobs[CONTINUATION_LIMIT];
    assert_eq!((last.state, last.attempt), (JobState::Pending, 0));
}

/// A paced next job (due later) and a run asked to stop are never continued.
#[tokio::test]
async fn paced_or_stopping_runs_are_not_continued() {
    let db = support::db("no_continuation").await;
    let exec = executor(&db.pool, artemis_transfer::worker::registry());
    let paced = support::start_probe_run(&db.pool, &ProbeSpec { per_second: Some(1.0), ..ProbeSpec::new(5) }).await;
    let job = claim(&db.pool, "w").await.unwrap();
    assert_eq!(exec.execute(job).await.unwrap(), Executed::Committed);
    let states: Vec<_> = runs::jobs(&db.pool, paced).await.unwrap().iter().map(|j| j.state).collect();
    assert_eq!(states, [JobState::Completed, JobState::Pending]);

    let stopping = support::start_probe_run(&db.pool, &ProbeSpec::new(5)).await;
    let job = claim(&db.pool, "w").await.unwrap();
    assert_eq!(job.job.run_id, stopping);
    assert_eq!(runs::request_stop(&db.pool, stopping, "operator asked").await.unwrap(), StopRequest::Requested);
    assert_eq!(exec.execute(job).await.unwrap(), Executed::Committed);
    let states: Vec<_> = runs::jobs(&db.pool, stopping).await.unwrap().iter().map(|j| j.state).collect();
    assert_eq!(
        states,
        [JobState::Completed, JobState::Pending],
        "the batch in flight finished; the next waits to be stopped"
    );
}

/// A handler's refusal fails the run, its stop stops it, an unknown kind fails it; each with words, slot freed.
#[tokio::test]
async fn handler_refusals_and_stops_end_the_run_in_words() {
    struct Says(Outcome2);
    #[derive(Clone, Copy)]
    enum Outcome2 {
        Fail,
        Stop,
    }
    impl Handler for Says {
        fn handle<'a>(&'a self, _ctx: &'a JobContext) -> HandlerFuture<'a> {
            let outcome = match self.0 {
                Outcome2::Fail => Outcome::Fail { error: "the target queue has a filter".into(), code: None },
                Outcome2::Stop => Outcome::Stop { reason: "message:send was revoked".into() },
            };
            Box::pin(async move { Ok(outcome) })
        }
    }
    let db = support::db("handler_refusals").await;
    let registry = Registry::new().with("refuses", Says(Outcome2::Fail)).with("stops", Says(Outcome2::Stop));
    let exec = executor(&db.pool, registry);
    for (kind, state, error, reason) in [
        ("refuses", RunState::Failed, Some("the target queue has a filter"), None),
        ("stops", RunState::Stopped, None, Some("message:send was revoked")),
        ("unknown", RunState::Failed, Some("this worker has no handler for job kind \"unknown\""), None),
    ] {
        let run = support::start_run_with(&db.pool, NewJob::new(kind, serde_json::json!({}))).await;
        let job = claim(&db.pool, "w").await.unwrap();
        assert_eq!(exec.execute(job).await.unwrap(), Executed::RunEnded(state), "{kind}");
        let r = runs::get(&db.pool, run).await.unwrap();
        assert_eq!((r.state, r.last_error.as_deref(), r.stop_reason.as_deref()), (state, error, reason), "{kind}");
        assert!(runs::slot_holders(&db.pool).await.unwrap().is_empty(), "{kind}: the slot is released");
    }
}
