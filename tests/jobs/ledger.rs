//! A copy's ledger lookup stays a probe per id however the ledger grew since its statistics were taken.

use artemis_transfer::jobs::probe::ProbeSpec;
use artemis_transfer::transfer::store::ledger;
use serde_json::Value;

use crate::support;

/// The ledger's statistics are those of a young run (100 rows, all of one run) while the run has copied 30,000
/// more: the lookup of a browse's 200 ids must still probe the primary key, not read the run's whole ledger (with
/// `message_id = ANY($2)` the planner chose a sequential scan here, and a copy's browse cost grew with every batch
/// it had copied). Shown by the plan the lookup gets, custom and generic, and by its answer.
#[tokio::test]
async fn a_ledger_lookup_probes_the_key_whatever_the_statistics_say() {
    let db = support::db("ledger_probe").await;
    let run = support::start_probe_run(&db.pool, &ProbeSpec::new(1)).await.0;
    ledger::ledger_add(&db.pool, run, &(1..=100).collect::<Vec<i64>>()).await.unwrap();
    sqlx::query("ANALYZE transfer_copy_ledger").execute(&db.pool).await.unwrap();
    ledger::ledger_add(&db.pool, run, &(101..=30_100).collect::<Vec<i64>>()).await.unwrap();

    let wanted: Vec<i64> = (30_001..30_101).chain(50_001..50_101).collect();
    let lookup = include_str!("../../src/transfer/sql/ledger_holding.sql");
    let mut conn = db.pool.acquire().await.unwrap();
    for mode in ["force_custom_plan", "force_generic_plan"] {
        sqlx::query(&format!("SET plan_cache_mode = {mode}")).execute(&mut *conn).await.unwrap();
        let plan: Value = sqlx::query_scalar(&format!("EXPLAIN (FORMAT JSON) {lookup}"))
            .bind(run)
            .bind(&wanted)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let scans = scans_of(&plan[0]["Plan"], "transfer_copy_ledger");
        assert!(!scans.is_empty(), "{mode}: the plan does not read the ledger: {plan}");
        assert!(
            scans.iter().all(|s| s.ends_with("Index Only Scan") || s.ends_with("Index Scan")),
            "{mode}: the ledger is read by {scans:?}, not a probe of its key: {plan}"
        );
    }
    let mut held = ledger::ledger_holding(&db.pool, run, &wanted).await.unwrap();
    held.sort_unstable();
    assert_eq!(held, (30_001..30_101).collect::<Vec<i64>>());
}

/// The node types of the plan's nodes that read `relation`.
fn scans_of(node: &Value, relation: &str) -> Vec<String> {
    let mut found = Vec::new();
    if node["Relation Name"] == relation {
        found.push(node["Node Type"].as_str().unwrap_or_default().to_string());
    }
    for child in node["Plans"].as_array().into_iter().flatten() {
        found.extend(scans_of(child, relation));
    }
    found
}
