//! What the console's tests share: a fresh database with runs written as a worker would leave them, operators with
//! different grants, and the console's router over it (with the API's beside it, as `serve` has them).

use std::sync::Arc;
use std::time::Duration;

use artemis_transfer::api::limit::{Limits, Rate};
use artemis_transfer::api::{ApiState, LiveTokens, ServiceTokens};
use artemis_transfer::console::{self, ConsoleState};
use sqlx::PgPool;
use uuid::Uuid;

/// The service token the console is signed in with.
pub const TOKEN: &str = "console-test-token-0123456789abcdef";
/// May do anything on every cluster.
pub const ADMIN: &str = "alice";
/// May look at every cluster and read its messages, and nothing more: no move, no send.
pub const READER: &str = "rita";
/// Sees `east` only: a run from east to west is not theirs to see.
pub const EAST_ONLY: &str = "eve";
/// A queue name a hostile producer could choose.
pub const HOSTILE_QUEUE: &str = "q<script>alert(1)</script>\"'&<img src=x onerror=alert(2)>";

/// One test's database and the console over it.
pub struct ConsoleWorld {
    pub pool: PgPool,
    pub api: ApiState,
}

impl ConsoleWorld {
    /// A fresh, migrated database; the three operators' grants.
    pub async fn new(label: &str) -> ConsoleWorld {
        let url = testbed::postgres::fresh_database(label).await;
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(5).connect(&url).await.unwrap();
        let defaults = artemis_transfer::config::Config::from_sources(None, Vec::new()).unwrap().settings;
        artemis_transfer::jobs::migrate(&pool, &defaults, "test").await.unwrap();
        ConsoleWorld::on(pool).await
    }

    /// The console over `pool`, a migrated database (with the test bed's clusters registered, for the Queues and
    /// Messages pages); the three operators' grants.
    pub async fn on(pool: PgPool) -> ConsoleWorld {
        for (principal, cluster, permission) in [
            (ADMIN, "*", "admin"),
            (READER, "*", "cluster:read"),
            (READER, "*", "message:read"),
            (EAST_ONLY, "east", "admin"),
        ] {
            sqlx::query(
                "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ($1, $2, $3, 'test') \
                 ON CONFLICT DO NOTHING",
            )
            .bind(principal)
            .bind(cluster)
            .bind(permission)
            .execute(&pool)
            .await
            .unwrap();
        }
        let rate = Rate { per_second: 10_000.0, burst: 10_000 };
        let api = ApiState {
            pool: pool.clone(),
            tokens: Arc::new(LiveTokens::new(ServiceTokens::parse(&format!("console={TOKEN}")).unwrap())),
            metrics_token: None,
            max_attempts: 3,
            preview_valid_for: Duration::from_secs(600),
            events_every: Duration::from_millis(200),
            limits: Limits::new(rate, rate),
            request_timeout: Duration::from_secs(30),
            metrics_cache: Default::default(),
            feeds: Default::default(),
            closing: Default::default(),
        };
        ConsoleWorld { pool, api }
    }

    /// The app `serve` runs: the console beside the API.
    pub fn app(&self) -> axum::Router {
        self.app_over(false)
    }

    /// [`ConsoleWorld::app`] as `serve` has it over TLS (`tls`) or plain HTTP.
    pub fn app_over(&self, tls: bool) -> axum::Router {
        let console = console::router(ConsoleState::new(self.api.clone(), tls));
        console.merge(artemis_transfer::api::router(self.api.clone()))
    }

    /// A move from east to west in `state`, with `delivered` of `selected` delivered, written as a worker leaves it.
    pub async fn run(&self, state: &str, source_queue: &str, selected: i64, delivered: i64) -> Uuid {
        let id = Uuid::new_v4();
        let executed = (state != "previewed").then(chrono::Utc::now);
        sqlx::query(
            "INSERT INTO transfer_run (id, state, mode, source_cluster, source_node, source_queue, target_cluster, \
             target_node, target_queue, started_by, counters, executed_at, stop_reason) \
             VALUES ($1, $2, 'move', 'east', 'east-1', $3, 'west', 'west-1', 'orders_dst', $4, $5, $6, $7)",
        )
        .bind(id)
        .bind(state)
        .bind(source_queue)
        .bind(ADMIN)
        .bind(serde_json::json!({ "selected": selected, "staged": delivered, "delivered": delivered }))
        .bind(executed)
        .bind((state == "stopped").then_some("stopped by alice: operator request"))
        .execute(&self.pool)
        .await
        .unwrap();
        id
    }

    /// Sets the run's delivered count, as a relay batch does.
    pub async fn deliver(&self, run: Uuid, delivered: i64) {
        sqlx::query(
            "UPDATE transfer_run SET counters = counters || jsonb_build_object('staged', $2::bigint, \
             'delivered', $2::bigint) WHERE id = $1",
        )
        .bind(run)
        .bind(delivered)
        .execute(&self.pool)
        .await
        .unwrap();
    }
}
