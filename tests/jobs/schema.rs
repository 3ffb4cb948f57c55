//! The schema refuses what the engine must never do, whatever the code above it does.

use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::jobs::settings;
use artemis_transfer::jobs::RunId;

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

/// `migrate` seeds every docs/settings.md setting, and a value changed later survives another migrate.
#[tokio::test]
async fn migrate_seeds_settings_and_keeps_changes() {
    let db = support::db("seed_settings").await;
    assert_eq!(settings::load(&db.pool).await.unwrap(), support::defaults());
    support::set_cap(&db.pool, 9).await;
    artemis_transfer::jobs::migrate(&db.pool, &support::defaults(), "test").await.unwrap();
    assert_eq!(settings::load(&db.pool).await.unwrap().concurrent_runs, 9);
}

/// Migration 0012 turns a run's one list of ids in doubt, with its window beside it, into one mark per batch
/// (`relay/in_doubt.rs`), and leaves rows already of the new shape as they are.
#[tokio::test]
async fn the_in_doubt_list_of_an_older_run_becomes_one_batch_mark() {
    let db = support::db("in_doubt_marks").await;
    let window = serde_json::json!({ "target": "west/west-1/q", "start": 40, "target_started": 7 });
    let marks = serde_json::json!([{ "ids": [1, 2], "window": window }, { "ids": [3], "window": null }]);
    let [old, fresh, empty] = runs_with_relays(
        &db,
        [
            serde_json::json!({ "in_doubt": [1, 2], "window": window, "exhausted": true }),
            serde_json::json!({ "in_doubt": marks }),
            serde_json::json!({ "in_doubt": [], "window": window }),
        ],
    )
    .await;
    sqlx::raw_sql(include_str!("../../migrations/0012_in_doubt_marks_per_batch.sql")).execute(&db.pool).await.unwrap();
    let relay = |run| {
        sqlx::query_scalar::<_, serde_json::Value>("SELECT relay FROM transfer_run WHERE id = $1")
            .bind(run)
            .fetch_one(&db.pool)
    };
    let converted = serde_json::json!({ "in_doubt": [{ "ids": [1, 2], "window": window }], "exhausted": true });
    assert_eq!(relay(old).await.unwrap(), converted);
    assert_eq!(relay(fresh).await.unwrap(), serde_json::json!({ "in_doubt": marks }), "already one mark per batch");
    assert_eq!(relay(empty).await.unwrap(), serde_json::json!({ "in_doubt": [] }));
    let state: artemis_transfer::transfer::relay::state::RelayState =
        serde_json::from_value(relay(old).await.unwrap()).unwrap();
    assert_eq!((state.in_doubt.ids(), state.exhausted), (vec![1, 2], true), "the worker reads what it wrote");
}

/// The window sees one holder per batch mark of every other run with the address in its window, and none of the
/// asking run's own (`window_holders.sql`).
#[tokio::test]
async fn every_batch_mark_of_another_run_holds_its_own_place_in_the_window() {
    use artemis_transfer::transfer::store::window::window_holders;
    let db = support::db("window_marks").await;
    let window = |target: &str, start: i64| serde_json::json!({ "target": target, "start": start });
    let marks = |target: &str| {
        serde_json::json!({ "in_doubt": [
            { "ids": [1, 2, 3], "window": window(target, 10) },
            { "ids": [4], "window": window(target, 13) },
            { "ids": [5], "window": null },
        ] })
    };
    let [asking, other, _elsewhere] =
        runs_with_relays(&db, [marks("west/west-1/q"), marks("west/west-1/q"), marks("west/west-1/r")]).await;
    let mut held: Vec<(i64, i32)> = window_holders(&db.pool, asking.0, "west/west-1/q")
        .await
        .unwrap()
        .into_iter()
        .inspect(|h| assert_eq!(h.run, other.0, "only the other run on that address"))
        .map(|h| (h.start.unwrap_or(-1), h.size))
        .collect();
    held.sort_unstable();
    assert_eq!(held, [(10, 3), (13, 1)], "one holder per batch mark with a window on the address");
}

/// `N` probe runs, each with its relay cursor set to the value at its place.
async fn runs_with_relays<const N: usize>(db: &support::Db, relays: [serde_json::Value; N]) -> [RunId; N] {
    let mut runs = Vec::with_capacity(N);
    for relay in relays {
        let run = support::start_probe_run(&db.pool, &ProbeSpec::new(3)).await;
        sqlx::query("UPDATE transfer_run SET relay = $2 WHERE id = $1")
            .bind(run)
            .bind(relay)
            .execute(&db.pool)
            .await
            .unwrap();
        runs.push(run);
    }
    runs.try_into().unwrap_or_else(|_| unreachable!("one run per relay"))
}

/// The start path writes the kind the worker runs (`transfer_first_job`, relay::KIND), for every action, and
/// migration 0013 renames the jobs written as `transfer.move` before it.
#[tokio::test]
async fn a_runs_jobs_are_of_the_kind_the_worker_runs() {
    use artemis_transfer::transfer::relay::KIND;
    let db = support::db("job_kind").await;
    let plans = [
        (serde_json::json!({ "mode": "copy" }), "execute"),
        (serde_json::json!({ "mode": "move", "source": { "node": "a" }, "target": { "node": "b" } }), "execute"),
        (serde_json::json!({ "mode": "move" }), "return"),
    ];
    for (plan, action) in plans {
        let (kind,): (String,) = sqlx::query_as("SELECT kind FROM transfer_first_job($1, NULL, $2)")
            .bind(&plan)
            .bind(action)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(kind, KIND, "{plan} {action}");
    }
    let [run] = runs_with_relays(&db, [serde_json::json!({})]).await;
    sqlx::query("UPDATE job SET kind = 'transfer.move' WHERE run_id = $1").bind(run).execute(&db.pool).await.unwrap();
    sqlx::raw_sql(include_str!("../../migrations/0013_job_kind_transfer_run.sql")).execute(&db.pool).await.unwrap();
    let kinds: Vec<String> =
        sqlx::query_scalar("SELECT kind FROM job WHERE run_id = $1").bind(run).fetch_all(&db.pool).await.unwrap();
    assert!(!kinds.is_empty() && kinds.iter().all(|k| k == KIND), "{kinds:?}");
}
