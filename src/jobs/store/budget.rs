//! The per-node management budget (`sql/functions/node_budget.sql`), drawn by [`crate::limiter`].

use std::time::Duration;

use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};

/// `node_reserve.sql`: takes `cost` tokens from `node`'s bucket; how long until the bucket would have held them.
pub async fn node_reserve(db: impl PgExecutor<'_>, node: &str, cost: u32) -> Result<Duration, Error> {
    let wait: f64 = sqlx::query_scalar(include_str!("../sql/node_reserve.sql"))
        .bind(node)
        .bind(f64::from(cost))
        .fetch_one(db)
        .await
        .db("node_reserve")?;
    // 0 when the tokens were there. Anything but a finite, positive number is no wait: a sleep cannot take it.
    Ok(Duration::try_from_secs_f64(wait.max(0.0)).unwrap_or(Duration::ZERO))
}
