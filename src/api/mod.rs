//! The HTTP API (SPEC §10): what the management console's backend calls. JSON over HTTP, described by the OpenAPI
//! document it serves at `/openapi.json`.
//!
//! Every call under `/api/v1` is made by a service with a bearer token, for an operator it names
//! ([`auth`]); the operator's grants decide, exactly as on the command line and the SQL start path, because all
//! three call the same library functions (`transfer::service`, `transfer::actions`, `transfer::orphans`,
//! `jobs::admin`) — the API only translates. A cluster or run the operator may not see answers 404, as one that
//! does not exist. Errors are `{"error": <slug>, "message": <words>}` with a fitting status ([`error`]).
//!
//! `/health` (the process answers), `/ready` (the database answers and its schema is this build's) and
//! `/metrics` (Prometheus) need no token: they say nothing about any message or operator.

pub mod auth;
pub mod error;
mod ops;
mod orphans;
mod previews;
mod runs;
mod settings;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, post, put};
use axum::Router;
use sqlx::PgPool;

pub use auth::{Caller, ServiceTokens};
pub use error::ApiError;

/// What every handler shares.
#[derive(Clone)]
pub struct ApiState {
    /// The database (job queue, registry, grants, runs).
    pub pool: PgPool,
    /// The services that may call.
    pub tokens: Arc<ServiceTokens>,
    /// Attempts of a job before its run is Interrupted (`retry.max_attempts`), for the runs the API starts.
    pub max_attempts: i32,
    /// How long a preview may be executed after it was made.
    pub preview_valid_for: Duration,
    /// How often an event stream looks for news.
    pub events_every: Duration,
}

/// The API's routes over `state`.
pub fn router(state: ApiState) -> Router {
    let v1 = Router::new()
        .route("/clusters", get(previews::clusters))
        .route("/clusters/{cluster}/targets", get(previews::targets))
        .route("/previews", post(previews::preview))
        .route("/runs", get(runs::list))
        .route("/runs/{run}", get(runs::get))
        .route("/runs/{run}/events", get(runs::events))
        .route("/runs/{run}/execute", post(runs::execute))
        .route("/runs/{run}/stop", post(runs::stop))
        .route("/runs/{run}/resume", post(runs::resume))
        .route("/runs/{run}/return", post(runs::return_to_source))
        .route("/orphans", get(orphans::list))
        .route("/orphans/return", post(orphans::return_orphan))
        .route("/settings", get(settings::show))
        .route("/settings/{key}", put(settings::set));
    Router::new()
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .nest("/api/v1", v1)
        .fallback(ops::no_such_route)
        .layer(axum::middleware::from_fn(ops::log_request))
        .with_state(state)
}

/// Serves the API on `listener` until `shutdown` resolves; requests in flight are answered first.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: ApiState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    tracing::info!(?addr, services = ?state.tokens, "the HTTP API is listening");
    axum::serve(listener, router(state)).with_graceful_shutdown(shutdown).await
}
