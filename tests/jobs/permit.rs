//! The per-node token bucket SQL function `transfer_node_permit(node, cost)` (migration 0001), called from SQL
//! as the Studio backend calls it. (The Rust limiter over it, `src/limiter.rs`, has its own tests.)

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
