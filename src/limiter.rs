//! The per-node management rate limiter, backed by Postgres: a token bucket row per node, refilled at the
//! `node_calls_per_second` setting, taken in turn by `transfer_node_reserve_ahead(node, cost, ahead)`
//! (`sql/functions/node_budget.sql`). Every replica, and the Studio backend from SQL (`transfer_node_permit`), draws
//! on the same bucket, so together they stay under the node's rate.
//!
//! A long-lived process ([`PgPermits::with_spares`]) also takes the spare tokens the bucket holds beyond a call's
//! cost, up to [`SPARE_AHEAD`]'s worth, and spends them on its next calls to that node within [`SPARE_AHEAD`]; what
//! it has not spent by then lapses. A relay batch makes three to five management calls, most to the same node
//! within milliseconds, so its calls cost the database one reservation where they cost one each: a transaction
//! and a commit on the batch's path. Every call is still paid for from the shared bucket before it is made, and
//! spare tokens are only taken from what the bucket holds, so nobody waits for them.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::broker::permits::{PermitError, PermitSource};
use crate::jobs::executor::error_chain;
use crate::jobs::store::budget;

/// How long a process keeps the spare tokens a reservation took for its next calls to the node; unspent ones lapse.
/// At most this much of a node's rate is held by one process at a time.
pub const SPARE_AHEAD: Duration = Duration::from_millis(100);

/// Permits from the Postgres token buckets.
#[derive(Debug, Clone)]
pub struct PgPermits {
    pool: PgPool,
    /// How far ahead spare tokens are taken: zero for a process that makes a few calls and ends.
    ahead: Duration,
    spares: Arc<Spares>,
}

impl PgPermits {
    /// Permits drawn through `pool`, exactly what each call costs: for a short-lived caller, which would leave
    /// spare tokens unspent.
    pub fn new(pool: PgPool) -> PgPermits {
        PgPermits { pool, ahead: Duration::ZERO, spares: Arc::default() }
    }

    /// Permits drawn through `pool` for a long-lived process (a worker), which keeps spare tokens for
    /// [`SPARE_AHEAD`] (the module doc).
    pub fn with_spares(pool: PgPool) -> PgPermits {
        PgPermits { ahead: SPARE_AHEAD, ..PgPermits::new(pool) }
    }

    async fn take(&self, node: &str, cost: u32) -> Result<(), PermitError> {
        if self.spares.spend(node, cost, Instant::now()) {
            return Ok(());
        }
        // Spare tokens lapse counting from before the reservation: never later than `ahead` after the bucket
        // gave them.
        let asked = Instant::now();
        // One short statement (its own transaction): the bucket row is locked only while it runs. The tokens are
        // taken now, in turn (migration 0007), so a costly request is never overtaken by cheaper ones; the answer
        // is how long until the bucket would have held them.
        let reserved = budget::node_reserve_ahead(&self.pool, node, cost, self.ahead)
            .await
            .map_err(|e| PermitError { node: node.to_string(), reason: error_chain(&e) })?;
        self.spares.keep(node, reserved.spare, asked + self.ahead);
        if !reserved.wait.is_zero() {
            tokio::time::sleep(reserved.wait).await;
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

/// The spare tokens a process holds, per node, each lot until it lapses.
#[derive(Debug, Default)]
struct Spares {
    held: Mutex<HashMap<String, Lot>>,
}

/// Spare tokens of one node, and when they lapse.
#[derive(Debug, Clone, Copy)]
struct Lot {
    tokens: u32,
    until: Instant,
}

impl Spares {
    /// Spends `cost` of `node`'s spare tokens when that many are held and have not lapsed at `now`; whether it did.
    fn spend(&self, node: &str, cost: u32, now: Instant) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        match held.get_mut(node) {
            Some(lot) if now < lot.until && lot.tokens >= cost => {
                lot.tokens -= cost;
                true
            }
            _ => false,
        }
    }

    /// Holds `tokens` spare tokens of `node` until `until`, in place of what was held: a lot not spent by the time
    /// a new one comes is too small for the call that asked, and the new lot lapses no earlier.
    fn keep(&self, node: &str, tokens: u32, until: Instant) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if tokens == 0 {
            held.remove(node);
        } else {
            held.insert(node.to_string(), Lot { tokens, until });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_tokens_are_spent_until_they_run_out() {
        let spares = Spares::default();
        let now = Instant::now();
        spares.keep("east-1", 3, now + SPARE_AHEAD);
        assert!(spares.spend("east-1", 2, now));
        assert!(!spares.spend("east-1", 2, now), "one left: too few for a cost of 2");
        assert!(spares.spend("east-1", 1, now));
        assert!(!spares.spend("east-1", 1, now), "none left");
    }

    #[test]
    fn spare_tokens_lapse_and_belong_to_their_node() {
        let spares = Spares::default();
        let now = Instant::now();
        spares.keep("east-1", 5, now + SPARE_AHEAD);
        assert!(!spares.spend("west-1", 1, now), "another node's tokens are not these");
        assert!(!spares.spend("east-1", 1, now + SPARE_AHEAD), "lapsed at their time");
    }

    /// The words operators and Studio's integrators read give the same time as the rule.
    #[test]
    fn the_docs_give_spare_tokens_their_time() {
        let ms = SPARE_AHEAD.as_millis();
        let rule = format!("limiter::SPARE_AHEAD is {ms} ms");
        for (page, text, words) in [
            (
                "docs/studio-integration.md",
                include_str!("../docs/studio-integration.md"),
                format!("`limiter::SPARE_AHEAD`, {ms} ms"),
            ),
            ("docs/settings.md", include_str!("../docs/settings.md"), format!("spends them within {ms} ms")),
            (
                "docs/adr/0011-a-batch-is-a-pipeline-of-steps.md",
                include_str!("../docs/adr/0011-a-batch-is-a-pipeline-of-steps.md"),
                format!("up to `SPARE_AHEAD` ({ms} ms)"),
            ),
        ] {
            crate::docs_said::assert_says(page, text, &[words], &rule);
        }
    }

    #[test]
    fn a_new_lot_replaces_the_old_and_none_clears_it() {
        let spares = Spares::default();
        let now = Instant::now();
        spares.keep("east-1", 1, now + SPARE_AHEAD);
        spares.keep("east-1", 4, now + 2 * SPARE_AHEAD);
        assert!(spares.spend("east-1", 4, now + SPARE_AHEAD), "the new lot, with its own time");
        spares.keep("east-1", 2, now + SPARE_AHEAD);
        spares.keep("east-1", 0, now + SPARE_AHEAD);
        assert!(!spares.spend("east-1", 1, now), "a reservation without spare tokens leaves none held");
    }
}
