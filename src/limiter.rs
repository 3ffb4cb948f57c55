//! The per-node management rate limiter, backed by Postgres: a token bucket row per node, refilled at the
//! `node_calls_per_second` setting, taken in turn by `transfer_node_reserve(node, cost)` (`sql/functions/node_budget.sql`). Every
//! replica, and the Studio backend from SQL (`transfer_node_permit`), draws on the same bucket, so together they
//! stay under the node's rate.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use sqlx::PgPool;

use crate::broker::permits::{PermitError, PermitSource};

/// Permits from the Postgres token buckets.
#[derive(Debug, Clone)]
pub struct PgPermits {
    pool: PgPool,
}

impl PgPermits {
    /// Permits drawn through `pool`.
    pub fn new(pool: PgPool) -> PgPermits {
        PgPermits { pool }
    }

    async fn take(&self, node: &str, cost: u32) -> Result<(), PermitError> {
        let fail = |e: sqlx::Error| PermitError { node: node.to_string(), reason: e.to_string() };
        // One short statement (its own transaction): the bucket row is locked only while it runs. The tokens are
        // taken now, in turn (migration 0007), so a costly request is never overtaken by cheaper ones; the answer
        // is how long until the bucket would have held them.
        let wait: f64 = sqlx::query_scalar("SELECT transfer_node_reserve($1, $2)")
            .bind(node)
            .bind(f64::from(cost))
            .fetch_one(&self.pool)
            .await
            .map_err(fail)?;
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
        Ok(())
    }
}

impl PermitSource for PgPermits {
    fn acquire<'a>(
        &'a self,
        node: &'a str,
        cost: u32,
    ) -> Pin<Box<dyn Future<Output = Result<(), PermitError>> + Send + 'a>> {
        Box::pin(self.take(node, cost))
    }
}
