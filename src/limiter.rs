//! The per-node management rate limiter, backed by Postgres: a token bucket row per node, refilled at the
//! `node_calls_per_second` setting, taken in turn by `transfer_node_reserve(node, cost)` (`sql/functions/node_budget.sql`). Every
//! replica, and the Studio backend from SQL (`transfer_node_permit`), draws on the same bucket, so together they
//! stay under the node's rate.

use std::future::Future;
use std::pin::Pin;

use sqlx::PgPool;

use crate::broker::permits::{PermitError, PermitSource};
use crate::jobs::executor::error_chain;
use crate::jobs::store::budget;

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
        // One short statement (its own transaction): the bucket row is locked only while it runs. The tokens are
        // taken now, in turn (migration 0007), so a costly request is never overtaken by cheaper ones; the answer
        // is how long until the bucket would have held them.
        let wait = budget::node_reserve(&self.pool, node, cost)
            .await
            .map_err(|e| PermitError { node: node.to_string(), reason: error_chain(&e) })?;
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
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
