//! The per-node token bucket: the SQL functions `transfer_node_permit(node, cost)` (`sql/functions/node_budget.sql`),
//! called from SQL as the Studio backend calls it, `transfer_node_reserve(node, cost)`, and
//! `transfer_node_reserve_ahead(node, cost, ahead)`, which the Rust limiter (`src/limiter.rs`) calls, tested here
//! through it too.

use artemis_transfer::jobs::settings;
use sqlx::PgPool;

use crate::support;

async fn permit(pool: &PgPool, node: &str, cost: f64) -> Result<f64, sqlx::Error> {
    sqlx::query_scalar("SELECT transfer_node_permit($1, $2)").bind(node).bind(cost).fetch_one(pool).await
}

#[tokio::test]
async fn a_node_gets_its_rate_and_then_a_wait() {
    let db = support::db("permit_rate").await;
    settings::set(&db.pool, "node_calls_per_second", 5.into(), "test").await.unwrap();
    for i in 0..5 {
        assert_eq!(permit(&db.pool, "east-1", 1.0).await.unwrap(), 0.0, "call {i} is within the burst");
    }
    let wait = permit(&db.pool, "east-1", 1.0).await.unwrap();
    assert!(wait > 0.0 && wait <= 0.2, "the sixth call waits for about one token (0.2 s at 5/s): {wait}");
    // Nothing was taken by the refused call: asking again at once gives the same answer, less the time passed.
    assert!(permit(&db.pool, "east-1", 1.0).await.unwrap() <= wait);
    // Buckets are per node.
    assert_eq!(permit(&db.pool, "east-2", 1.0).await.unwrap(), 0.0);
    // After the announced wait, the call is granted.
    tokio::time::sleep(std::time::Duration::from_secs_f64(wait + 0.02)).await;
    assert_eq!(permit(&db.pool, "east-1", 1.0).await.unwrap(), 0.0);
}

/// A request costing more than the bucket holds (a batch of reads at a low node rate) is granted from a full
/// bucket, which then owes the difference: the next call waits until the debt is repaid at the rate (migration
/// 0006). A cost must be positive.
#[tokio::test]
async fn a_cost_above_the_bucket_is_granted_from_a_full_bucket_and_repaid() {
    let db = support::db("permit_too_big").await;
    settings::set(&db.pool, "node_calls_per_second", 4.into(), "test").await.unwrap();
    assert_eq!(permit(&db.pool, "east-1", 6.0).await.unwrap(), 0.0, "a full bucket of 4 grants a cost of 6");
    let wait = permit(&db.pool, "east-1", 1.0).await.unwrap();
    // The bucket owes 2: one more token needs 3 to be refilled, 0.75 s at 4/s (less the time passed).
    assert!(wait > 0.6 && wait <= 0.75, "the next call waits for the debt and its own token: {wait}");
    // A big request waits for a full bucket, then goes.
    assert!(permit(&db.pool, "west-1", 3.0).await.unwrap() == 0.0);
    let wait = permit(&db.pool, "west-1", 9.0).await.unwrap();
    assert!(wait > 0.6 && wait <= 0.75, "9 at 4/s waits for a full bucket (3 more tokens): {wait}");
    tokio::time::sleep(std::time::Duration::from_secs_f64(wait + 0.02)).await;
    assert_eq!(permit(&db.pool, "west-1", 9.0).await.unwrap(), 0.0);
    assert!(permit(&db.pool, "east-2", 0.0).await.is_err(), "a cost must be positive");
}

/// Concurrent callers share one bucket: twenty callers at once against 10/s get exactly ten grants.
#[tokio::test]
async fn concurrent_callers_share_one_bucket() {
    let db = support::db("permit_shared").await;
    settings::set(&db.pool, "node_calls_per_second", 10.into(), "test").await.unwrap();
    let calls = (0..20).map(|_| {
        let pool = db.pool.clone();
        tokio::spawn(async move { permit(&pool, "east-1", 1.0).await.unwrap() })
    });
    let mut granted = 0;
    for call in calls {
        if call.await.unwrap() == 0.0 {
            granted += 1;
        }
    }
    // The refill during the calls (milliseconds at 10/s) can add at most one token.
    assert!((10..=11).contains(&granted), "{granted} of 20 granted from a bucket of 10");
}

async fn reserve(pool: &PgPool, node: &str, cost: f64) -> f64 {
    sqlx::query_scalar("SELECT transfer_node_reserve($1, $2)").bind(node).bind(cost).fetch_one(pool).await.unwrap()
}

/// `transfer_node_reserve` takes the tokens at once and answers how long to wait: each caller
/// waits behind the debt of those before it, whatever its cost, so a costly request is served in its turn.
#[tokio::test]
async fn reservations_are_served_in_the_order_they_come() {
    let db = support::db("permit_reserve").await;
    settings::set(&db.pool, "node_calls_per_second", 5.into(), "test").await.unwrap();
    assert_eq!(reserve(&db.pool, "east-1", 5.0).await, 0.0, "a full bucket");
    let small = reserve(&db.pool, "east-1", 1.0).await;
    assert!(small > 0.15 && small <= 0.2, "one token at 5/s: {small}");
    let big = reserve(&db.pool, "east-1", 5.0).await;
    assert!(big > 1.1 && big <= 1.2, "behind the first small one: 6 tokens at 5/s: {big}");
    let after = reserve(&db.pool, "east-1", 1.0).await;
    assert!(after > big && after <= 1.4, "a small one after the big one waits for it: {after}");
    // The permit function (Studio's) sees the reservations' debt: it is not granted before them.
    let permit_wait = permit(&db.pool, "east-1", 1.0).await.unwrap();
    assert!(permit_wait > 1.3, "{permit_wait}");
    // Above the bucket: waits for a full bucket, then leaves the rest as debt.
    assert_eq!(reserve(&db.pool, "west-1", 9.0).await, 0.0, "a full bucket of 5 grants 9 at once");
    let next = reserve(&db.pool, "west-1", 1.0).await;
    assert!(next > 0.9 && next <= 1.0, "the debt of 4 and one token at 5/s: {next}");
}

/// Through the Rust limiter (every broker call of the service): a request needing a whole bucket gets through in
/// about a bucket's time while four callers ask for single tokens as fast as they are granted, and all of them
/// together stay within the node's rate. (Before 0007 the costly request could wait as long as the others kept
/// asking.)
#[tokio::test]
async fn a_costly_request_is_not_starved_by_cheap_ones_and_the_rate_holds() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use artemis_transfer::broker::permits::PermitSource;
    use artemis_transfer::limiter::PgPermits;

    let _heavy = support::HEAVY.lock().await;
    let db = support::db("permit_fair").await;
    settings::set(&db.pool, "node_calls_per_second", 6.into(), "test").await.unwrap();
    let permits = PgPermits::new(db.pool.clone());
    let started = Instant::now();
    let granted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let greedy: Vec<_> = (0..4)
        .map(|_| {
            let (permits, granted, stop) = (permits.clone(), granted.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    permits.acquire("east-1", 1).await.unwrap();
                    granted.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let asked = Instant::now();
    permits.acquire("east-1", 6).await.unwrap();
    let waited = asked.elapsed();
    granted.fetch_add(6, Ordering::Relaxed);
    let at = started.elapsed().as_secs_f64();
    let tokens = granted.load(Ordering::Relaxed) as f64;
    stop.store(true, Ordering::Relaxed);
    for g in greedy {
        g.await.unwrap();
    }
    // Its turn comes after the four reservations already made (at most 4 tokens of debt) and its own 6.
    assert!(waited < Duration::from_millis(2500), "the costly request waited {waited:?}");
    // Everything granted until then fits the full bucket at the start plus the refill since.
    assert!(tokens <= 6.0 + 6.0 * at + 1.0, "{tokens} tokens in {at:.2} s at 6/s");
}

async fn reserve_ahead(pool: &PgPool, node: &str, cost: f64, ahead: f64) -> (f64, i32) {
    sqlx::query_as("SELECT wait, spare FROM transfer_node_reserve_ahead($1, $2, $3)")
        .bind(node)
        .bind(cost)
        .bind(ahead)
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn tokens(pool: &PgPool, node: &str) -> f64 {
    sqlx::query_scalar("SELECT tokens FROM node_budget WHERE node = $1").bind(node).fetch_one(pool).await.unwrap()
}

/// `transfer_node_reserve_ahead` takes the cost as `transfer_node_reserve` does, and with it spare tokens only from
/// what the bucket holds beyond the cost, up to `ahead` seconds' worth: never into debt, so a spare never makes
/// anybody wait.
#[tokio::test]
async fn spare_tokens_come_only_from_what_the_bucket_holds() {
    let db = support::db("permit_ahead").await;
    settings::set(&db.pool, "node_calls_per_second", 20.into(), "test").await.unwrap();
    assert_eq!(reserve_ahead(&db.pool, "east-1", 1.0, 0.1).await, (0.0, 2), "a full bucket of 20: 1 and 0.1 s's worth");
    assert_eq!(reserve_ahead(&db.pool, "east-1", 1.0, 0.0).await, (0.0, 0), "nothing ahead, no spare");
    assert!(tokens(&db.pool, "east-1").await <= 16.5, "4 taken in all, less the refill since");
    // A bucket drained to its last tokens gives what it holds beyond the cost, then none.
    assert_eq!(reserve_ahead(&db.pool, "east-1", 14.0, 0.0).await.1, 0);
    let (wait, spare) = reserve_ahead(&db.pool, "east-1", 1.0, 0.5).await;
    assert!(wait == 0.0 && (1..=2).contains(&spare), "~2 tokens left: one for the call, the rest spare ({spare})");
    let (wait, spare) = reserve_ahead(&db.pool, "east-1", 1.0, 0.5).await;
    assert!(wait > 0.0 && spare == 0, "an empty bucket: the call waits and takes no spare ({wait}, {spare})");
    let (wait, spare) = reserve_ahead(&db.pool, "east-1", 1.0, 0.5).await;
    assert!(wait > 0.0 && spare == 0, "in debt: behind the one before, no spare ({wait}, {spare})");
    assert!(sqlx::query("SELECT transfer_node_reserve_ahead('east-1', 1, -1)").execute(&db.pool).await.is_err());
}

/// Through the worker's limiter: calls to a node within [`SPARE_AHEAD`] of a reservation are paid from its spare
/// tokens without asking the database, and the bucket is charged for them all the same.
#[tokio::test]
async fn a_workers_calls_are_paid_from_spare_tokens_within_their_time() {
    use artemis_transfer::broker::permits::PermitSource;
    use artemis_transfer::limiter::{PgPermits, SPARE_AHEAD};

    let db = support::db("permit_spares").await;
    settings::set(&db.pool, "node_calls_per_second", 100.into(), "test").await.unwrap();
    let permits = PgPermits::with_spares(db.pool.clone());
    permits.acquire("east-1", 1).await.unwrap();
    let first = reserved_at(&db.pool, "east-1").await;
    assert!(tokens(&db.pool, "east-1").await <= 89.01, "the call and 0.1 s's worth at 100/s taken at once");
    for _ in 0..10 {
        permits.acquire("east-1", 1).await.unwrap();
    }
    assert_eq!(reserved_at(&db.pool, "east-1").await, first, "ten calls paid from the spare tokens");
    permits.acquire("east-1", 1).await.unwrap();
    let second = reserved_at(&db.pool, "east-1").await;
    assert_ne!(second, first, "the spare tokens spent, the next call reserves");
    // Unspent ones lapse.
    tokio::time::sleep(SPARE_AHEAD).await;
    permits.acquire("east-1", 1).await.unwrap();
    assert_ne!(reserved_at(&db.pool, "east-1").await, second, "after SPARE_AHEAD the call reserves again");
    // A caller that ends soon takes exactly its cost.
    let exact = PgPermits::new(db.pool.clone());
    exact.acquire("west-1", 1).await.unwrap();
    assert!((tokens(&db.pool, "west-1").await - 99.0).abs() < 0.01, "one token, no spare");
}

/// When `node`'s bucket was last reserved from (its refill time, set by every reservation).
async fn reserved_at(pool: &PgPool, node: &str) -> chrono::DateTime<chrono::Utc> {
    sqlx::query_scalar("SELECT refilled_at FROM node_budget WHERE node = $1").bind(node).fetch_one(pool).await.unwrap()
}
