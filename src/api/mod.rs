//! The HTTP API: what the management console's backend calls. JSON over HTTP, described by the OpenAPI
//! document it serves at `/openapi.json`.
//!
//! Every call under `/api/v1` is made by a service with a bearer token, for an operator it names
//! ([`auth`]); the operator's grants decide, exactly as on the command line and the SQL start path, because all
//! three call the same library functions (`transfer::service`, `transfer::actions`, `transfer::orphans`,
//! `jobs::admin`) — the API only translates. A cluster or run the operator may not see answers 404, as one that
//! does not exist. Every error, the framework's own included, is an RFC 9457 problem document
//! (`application/problem+json`, `type` = `/problems/<slug>`) with a fitting status ([`error`]); every answer
//! carries the request's id in `X-Request-Id` ([`request`]).
//!
//! `/health` (the process answers) and `/ready` (the database answers and its schema is this build's) need no
//! token: they say nothing about any message or operator. `/metrics` (Prometheus) needs one only when
//! `ARTEMIS_TRANSFER_METRICS_TOKEN` is set: its counts describe the traffic, which a deployment may keep to itself.
//!
//! Every other request is rate-limited at the door, per service and operator, and per client address without a
//! known token ([`limit`]; a trusted proxy's `X-Forwarded-For` names the client), and answered within the request timeout (event streams excepted; [`request::deadline`]).
//!
//! With a certificate and its key ([`tls`]) the API is served over TLS; without, over plain HTTP, which `serve`
//! (the command) allows beyond loopback only when told a proxy in front terminates TLS (`--behind-tls-proxy`):
//! bearer tokens would travel in clear.

mod audit;
pub mod auth;
pub mod doc;
pub mod error;
pub mod feed;
mod idempotency;
pub mod input;
pub mod limit;
mod ops;
mod orphans;
mod previews;
mod queues;
pub mod redact;
pub mod request;
mod request_id;
mod runs;
pub(crate) use runs::{follow as follow_run, last_event_id};
mod settings;
mod store;
pub mod tls;
pub mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use sqlx::PgPool;
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub(crate) use audit::answered as audit_row_as_answered;
pub use auth::Caller;
pub use error::ApiError;
pub use queues::FilterVerdict;
pub(crate) use runs::{changed_after, cursor_after, keyset_of};
pub(crate) use settings::as_words as setting_words;
pub use tokens::{LiveTokens, ServiceTokens};

/// What every handler shares.
#[derive(Clone)]
pub struct ApiState {
    /// The database (job queue, registry, grants, runs).
    pub pool: PgPool,
    /// The services that may call: the tokens in force, replaced whole when the tokens file changes.
    pub tokens: Arc<LiveTokens>,
    /// The token `/metrics` asks for, if any (`auth::METRICS_TOKEN_ENV`).
    pub metrics_token: Option<Arc<ServiceTokens>>,
    /// Attempts of a job before its run is Interrupted (`retry.max_attempts`), for the runs the API starts.
    pub max_attempts: i32,
    /// How long a preview may be executed after it was made.
    pub preview_valid_for: Duration,
    /// How often an event stream looks for news.
    pub events_every: Duration,
    /// The rate limits at the door.
    pub limits: Arc<limit::Limits>,
    /// How long a request may take to be answered (event streams excepted).
    pub request_timeout: Duration,
    /// The last rendering of `/metrics`, shared by the scrapes of a moment.
    pub metrics_cache: ops::MetricsCache,
    /// The shared polls of the runs whose event streams are open: one per run, whatever the number of streams.
    pub feeds: Arc<feed::Feeds>,
    /// Cancelled when the service begins to close: open event streams end at once (see [`serve`]).
    pub closing: tokio_util::sync::CancellationToken,
}

/// Every route with its operation: `routes!` adds a handler's route and its `#[utoipa::path]` entry together,
/// and nothing else adds a route (the test in `doc_tests` lists the router's paths to hold it so).
fn routes() -> OpenApiRouter<ApiState> {
    let v1 = OpenApiRouter::new()
        .routes(routes!(previews::clusters))
        .routes(routes!(previews::targets))
        .routes(routes!(previews::preview))
        .routes(routes!(runs::stored_preview))
        .routes(routes!(queues::queues))
        .routes(routes!(queues::messages))
        .routes(routes!(queues::check))
        .routes(routes!(runs::list))
        .routes(routes!(runs::get))
        .routes(routes!(runs::rate))
        .routes(routes!(runs::run_actions))
        .routes(routes!(runs::events))
        .routes(routes!(runs::execute))
        .routes(routes!(runs::stop))
        .routes(routes!(runs::resume))
        .routes(routes!(runs::return_to_source))
        .routes(routes!(audit::run_audit))
        .routes(routes!(audit::cluster_audit))
        .routes(routes!(audit::me))
        .routes(routes!(orphans::list))
        .routes(routes!(orphans::return_orphan))
        .routes(routes!(settings::show))
        .routes(routes!(settings::set));
    OpenApiRouter::with_openapi(doc::ApiDoc::openapi())
        .routes(routes!(ops::health))
        .routes(routes!(ops::ready))
        .routes(routes!(ops::metrics))
        .routes(routes!(ops::openapi))
        .nest("/api/v1", v1)
}

/// The OpenAPI document of [`router`]'s routes, as served (JSON).
pub fn document() -> serde_json::Value {
    let mut document = routes().into_openapi();
    // The idempotency key's answers first: Common gives every answer its request id and problem type.
    idempotency::Documented.modify(&mut document);
    doc::Common.modify(&mut document);
    doc::finish(serde_json::to_value(&document).expect("the OpenAPI document serialises"))
}

/// The API's routes over `state`.
pub fn router(state: ApiState) -> Router {
    Router::from(routes())
        .fallback(ops::no_such_route)
        .layer(axum::middleware::from_fn_with_state(state.clone(), request::deadline))
        .layer(axum::middleware::from_fn_with_state(state.clone(), idempotency::layer))
        .layer(axum::middleware::from_fn(input::refuse_bad_target))
        .layer(axum::extract::DefaultBodyLimit::max(input::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(state.clone(), auth::door))
        .layer(axum::middleware::from_fn(request::around))
        .with_state(state)
}

/// Serves the API, and `beside` it other routes on the same port (the console, `crate::console`), on `listener` until `shutdown` resolves — over TLS with `tls`, else plain HTTP; requests in
/// flight are answered first, and open event streams end at once (`ApiState::closing`) — a stream follows its run
/// to the end, which may be hours away, and a graceful shutdown would wait for it past any grace period.
pub async fn serve(
    listener: tokio::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    state: ApiState,
    beside: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    tracing::info!(?addr, tls = tls.is_some(), services = ?state.tokens, "the HTTP API is listening");
    if tls.is_none() && reachable_from_elsewhere(addr) {
        // `serve` starts so only when told a proxy in front terminates TLS (--behind-tls-proxy).
        tracing::info!(?addr, "the API listens in plain HTTP beyond loopback: a proxy in front terminates TLS");
    }
    let closing = state.closing.clone();
    let shutdown = async move {
        shutdown.await;
        tracing::info!("closing: open event streams end, requests in flight are answered");
        closing.cancel();
    };
    // With the peer's address: the door limits requests without a known token per client address.
    let app = beside.merge(router(state)).into_make_service_with_connect_info::<PeerAddr>();
    match tls {
        Some(config) => {
            let listener = tls::TlsListener::new(listener, config);
            axum::serve(listener, app).with_graceful_shutdown(shutdown).await
        }
        None => axum::serve(listener, app).with_graceful_shutdown(shutdown).await,
    }
}

/// The address of a request's peer, over plain TCP or TLS: axum's own `ConnectInfo<SocketAddr>` knows only its
/// `TcpListener`, and the door limits requests without a known token per client address whichever is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>> for PeerAddr {
    fn connect_info(stream: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> PeerAddr {
        PeerAddr(*stream.remote_addr())
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, tls::TlsListener>> for PeerAddr {
    fn connect_info(stream: axum::serve::IncomingStream<'_, tls::TlsListener>) -> PeerAddr {
        PeerAddr(*stream.remote_addr())
    }
}

/// Whether another host may reach `addr`: anything but a loopback address, and an address not known (`None`)
/// since it cannot be shown to be loopback. An IPv4 loopback address mapped into IPv6 is loopback too.
pub(crate) fn reachable_from_elsewhere(addr: Option<SocketAddr>) -> bool {
    addr.is_none_or(|a| !a.ip().to_canonical().is_loopback())
}

#[cfg(test)]
mod doc_tests;

#[cfg(test)]
mod tests {
    use super::reachable_from_elsewhere;

    #[test]
    fn only_loopback_addresses_are_private_to_this_host() {
        for private in ["127.0.0.1:8080", "127.1.2.3:8080", "[::1]:8080", "[::ffff:127.0.0.1]:8080"] {
            assert!(!reachable_from_elsewhere(Some(private.parse().unwrap())), "{private}");
        }
        for open in ["0.0.0.0:8080", "[::]:8080", "10.1.2.3:8080", "192.168.0.7:8080", "[2001:db8::1]:8080"] {
            assert!(reachable_from_elsewhere(Some(open.parse().unwrap())), "{open}");
        }
        assert!(reachable_from_elsewhere(None), "an unknown address may be anyone's");
    }
}
