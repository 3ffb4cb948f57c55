//! The schema refuses what the engine must never do, whatever the code above it does.

use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::settings;

use crate::support;

fn sqlstate(e: &sqlx::Error) -> Option<String> {
    e.as_database_error().and_then(|d| d.code()).map(|c| c.into_owned())
}

/// job_one_live_per_run: a second pending job for a run with a live one is a unique violation (23505).
#[tokio::test]
async fn a_run_cannot_have_two_live_jobs() {
    let db = support::db("two_live_jobs").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    let second = sqlx::query("INSERT INTO job (run_id, seq, kind, max_attempts) VALUES ($1, 1, 'probe', 3)")
        .bind(run)
        .execute(&db.pool)
        .await
        .expect_err("a second live job must be refused");
    assert_eq!(sqlstate(&second).as_deref(), Some("23505"), "{second}");
}

/// job_run_seq_unique: a finished sequence cannot be inserted again (no duplicate successor).
#[tokio::test]
async fn a_sequence_cannot_repeat_in_a_run() {
    let db = support::db("seq_repeats").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    sqlx::query("UPDATE job SET state = 'cancelled', finished_at = now() WHERE run_id = $1")
        .bind(run)
        .execute(&db.pool)
        .await
        .unwrap();
    let again = sqlx::query("INSERT INTO job (run_id, seq, kind, max_attempts) VALUES ($1, 0, 'probe', 3)")
        .bind(run)
        .execute(&db.pool)
        .await
        .expect_err("the same sequence twice must be refused");
    assert_eq!(sqlstate(&again).as_deref(), Some("23505"), "{again}");
}

/// CHECK constraints: unknown states, a running job without a lease, a finished job without finished_at.
#[tokio::test]
async fn state_checks_hold() {
    let db = support::db("state_checks").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
    for (what, sql) in [
        ("unknown job state", "UPDATE job SET state = 'done' WHERE run_id = $1"),
        ("running without a lease", "UPDATE job SET state = 'running' WHERE run_id = $1"),
        ("completed without finished_at", "UPDATE job SET state = 'completed' WHERE run_id = $1"),
        ("unknown run state", "UPDATE transfer_run SET state = 'paused' WHERE id = $1"),
    ] {
        let e = sqlx::query(sql).bind(run).execute(&db.pool).await.expect_err(what);
        assert_eq!(sqlstate(&e).as_deref(), Some("23514"), "{what}: {e}");
    }
}

/// The cap cannot exceed the 64 slot rows, in the table as in the API.
#[tokio::test]
async fn the_cap_is_bounded_by_the_slot_table() {
    let db = support::db("cap_bounds").await;
    let e = sqlx::query("UPDATE setting SET value = '65' WHERE key = 'concurrent_runs'")
        .execute(&db.pool)
        .await
        .expect_err("65 slots");
    assert_eq!(sqlstate(&e).as_deref(), Some("23514"), "{e}");
    assert!(settings::set(&db.pool, "concurrent_runs", 65.into(), "test").await.is_err());
    settings::set(&db.pool, "concurrent_runs", 64.into(), "test").await.unwrap();
    assert_eq!(settings::load(&db.pool).await.unwrap().concurrent_runs, 64);
}

/// `migrate` seeds every SPEC §8 setting, and a value changed later survives another migrate.
#[tokio::test]
async fn migrate_seeds_settings_and_keeps_changes() {
    let db = support::db("seed_settings").await;
    assert_eq!(settings::load(&db.pool).await.unwrap(), support::defaults());
    support::set_cap(&db.pool, 9).await;
    artemis_transfer::jobs::migrate(&db.pool, &support::defaults(), "test").await.unwrap();
    assert_eq!(settings::load(&db.pool).await.unwrap().concurrent_runs, 9);
}
