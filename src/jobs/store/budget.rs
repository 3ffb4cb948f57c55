//! The per-node management budget (`sql/functions/node_budget.sql`), drawn by [`crate::limiter`].

use std::time::Duration;

use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};

/// What a reservation of a node's tokens gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved {
    /// How long until the bucket would have held the tokens asked for: zero when they were there.
    pub wait: Duration,
    /// The spare tokens taken with them, beyond what was asked for.
    pub spare: u32,
}

/// `node_reserve_ahead.sql`: takes `cost` tokens from `node`'s bucket, and up to `ahead`'s worth of spare tokens it
/// holds beyond them.
pub async fn node_reserve_ahead(
    db: impl PgExecutor<'_>,
    node: &str,
    cost: u32,
    ahead: Duration,
) -> Result<Reserved, Error> {
    let (wait, spare): (f64, i32) = sqlx::query_as(include_str!("../sql/node_reserve_ahead.sql"))
        .bind(node)
        .bind(f64::from(cost))
        .bind(ahead.as_secs_f64())
        .fetch_one(db)
        .await
        .db("node_reserve_ahead")?;
    // 0 when the tokens were there. Anything but a finite, positive number is no wait: a sleep cannot take it.
    let wait = Duration::try_from_secs_f64(wait.max(0.0)).unwrap_or(Duration::ZERO);
    Ok(Reserved { wait, spare: u32::try_from(spare).unwrap_or(0) })
}
