//! The operator console (issue 30, ADR 0014): the user guide's screens as server-rendered HTML under `/console/`,
//! served by `serve` on the API's port, calling the same library functions with the same checks and audit.
//!
//! Pages are askama templates (`src/console/templates`, checked at compile time, every value HTML-escaped), with
//! one stylesheet and one small script embedded in the binary under content-hashed names ([`assets`]). Every page
//! works with JavaScript off: forms post, and each POST answers with a redirect (post/redirect/get); the script only
//! refreshes the live parts of a page while its tab is visible — a run's page when the run's event stream over the
//! session (`GET /console/runs/{run}/events`, the API's stream from the same shared feed) says its numbers changed,
//! and the Transfers list when the cheap poll of the runs list over the session (`GET /console/changes`) says a run
//! changed.
//!
//! Sign-in exchanges an API token and an operator name for a server-side session ([`session`]) in an `HttpOnly;
//! SameSite=Strict` cookie; the bearer API under `/api/v1` never reads a cookie. Every POST passes the origin check
//! ([`same_origin_posts`]) and echoes the session's form token. Every answer carries the security headers
//! ([`security_headers`]): a strict CSP with no inline script or style, `nosniff`, `Referrer-Policy`, and
//! `Cache-Control: no-store` on HTML.
//!
//! The console talks to Postgres over a pool of its own whose connections say `artemis_transfer.via = console`:
//! the audit trigger writes that into every audit row the console's acts cause, the SQL action functions' rows
//! included, so the trail names the operator and "console".

mod admin;
pub mod assets;
mod chart;
mod pages;
mod queues;
pub mod session;
mod sign_in;
mod store;
mod transfer;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use crate::api::{ApiError, ApiState};

/// The console's prefix.
pub const PREFIX: &str = "/console";

/// The Content-Security-Policy of every console answer: nothing but this service's own script, style, images and
/// fetches; no inline script or style; no framing; forms post only here.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
                       font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The Referrer-Policy: a run's URL (its id) never leaves the service in a Referer.
pub const REFERRER_POLICY: &str = "same-origin";

/// What the console's handlers share.
#[derive(Clone)]
pub struct ConsoleState {
    /// The API's state: its tokens, limits, settings.
    pub api: ApiState,
    /// The console's own pool: its connections mark the audit rows they cause as the console's.
    pub pool: PgPool,
    /// Whether the service is served over TLS: the session cookie is then `Secure` and `__Host-` prefixed.
    pub tls: bool,
    /// How long a session lasts without a request.
    pub idle: Duration,
    /// How long a session lasts at most.
    pub absolute: Duration,
    /// Sign-in by a trusted proxy's header (ADR 0021), when configured.
    pub proxy: Option<Arc<ProxySignIn>>,
}

/// The console's sign-in by a reverse proxy that has authenticated the person (ADR 0021): the header it names the
/// operator in, believed only from these peers, and the service such an operator acts through.
#[derive(Debug, Clone)]
pub struct ProxySignIn {
    /// The header naming the operator.
    pub header: axum::http::HeaderName,
    /// The TCP peers it is believed from.
    pub peers: crate::api::limit::TrustedProxies,
    /// The service of the tokens in force the operator acts through.
    pub service: String,
}

/// How many connections the console's own pool may hold: the console is people, few and slow.
const POOL_CONNECTIONS: u32 = 4;
/// A session's idle expiry.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// A session's absolute expiry.
pub const ABSOLUTE: Duration = Duration::from_secs(12 * 60 * 60);

impl ConsoleState {
    /// The console beside `api`, over TLS when `tls`. Its pool connects like the API's (lazily), marked as the
    /// console's.
    pub fn new(api: ApiState, tls: bool) -> ConsoleState {
        let options = (*api.pool.connect_options()).clone().options([("artemis_transfer.via", "console")]);
        let pool = PgPoolOptions::new()
            .max_connections(POOL_CONNECTIONS)
            .acquire_timeout(api.pool.options().get_acquire_timeout())
            .connect_lazy_with(options);
        ConsoleState { api, pool, tls, idle: IDLE, absolute: ABSOLUTE, proxy: None }
    }

    /// This console, signing in whom `proxy` names.
    pub fn with_proxy_sign_in(self, proxy: Option<ProxySignIn>) -> ConsoleState {
        ConsoleState { proxy: proxy.map(Arc::new), ..self }
    }
}

/// The console's routes, with `/` sending a browser to it.
pub fn router(state: ConsoleState) -> Router {
    let api = state.api.clone();
    Router::new()
        .route("/", get(|| async { Redirect::to("/console/") }))
        .route("/console", get(|| async { Redirect::to("/console/") }))
        .route("/console/", get(pages::transfers))
        .route("/console/sign-in", get(sign_in::sign_in_page).post(sign_in::sign_in))
        .route("/console/sign-out", post(sign_in::sign_out))
        .route("/console/changes", get(pages::changes))
        .route("/console/runs/{run}", get(pages::run))
        .route("/console/runs/{run}/events", get(pages::run_events))
        .route("/console/runs/{run}/{action}", post(pages::act))
        .route("/console/clusters", get(queues::clusters))
        .route("/console/clusters/{cluster}/nodes/{node}/queues", get(queues::queues))
        .route("/console/clusters/{cluster}/nodes/{node}/queues/{queue}", get(queues::messages))
        .route("/console/selector/check", get(queues::check))
        .route("/console/transfer/new", get(transfer::new))
        .route("/console/transfer/preview", post(transfer::preview))
        .route("/console/transfer/{run}", get(transfer::show))
        .route("/console/transfer/{run}/execute", post(transfer::execute))
        .route("/console/staging", get(admin::staging))
        .route("/console/staging/return", post(admin::return_staging))
        .route("/console/settings", get(admin::settings_page))
        .route("/console/settings/{key}", post(admin::set_setting))
        .route("/console/assets/{name}", get(assets::serve))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(axum::middleware::from_fn(same_origin_posts))
        .layer(axum::middleware::from_fn(security_headers))
        .layer(axum::middleware::from_fn_with_state(api, crate::api::request::deadline))
        .layer(axum::middleware::from_fn(crate::api::request::around))
        .with_state(state)
}

/// The largest form the console takes: its forms hold a token, a name and a few fields.
const MAX_FORM_BYTES: usize = 16 * 1024;

/// Middleware: the security headers on every answer, and `no-store` on HTML (a page holds what this operator may
/// see, and the form token).
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static(REFERRER_POLICY));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    let html = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("text/html"));
    if html || !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// Middleware: a POST (or any method that may change something) is served only when the browser says it comes
/// from a page of this service — `Sec-Fetch-Site: same-origin` when the browser sends Fetch Metadata, else an
/// `Origin` whose host is the `Host` asked for (browsers send no Fetch Metadata to plain-HTTP addresses other than
/// localhost). Neither: refused, since a request that cannot be shown to be ours is not served. The form token
/// each handler checks is the second lock ([`session::Session::check_form_token`]).
pub async fn same_origin_posts(request: Request, next: Next) -> Response {
    if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(request).await;
    }
    match cross_origin(request.headers()) {
        None => next.run(request).await,
        Some(why) => ConsoleError::new(StatusCode::FORBIDDEN, why).into_response(),
    }
}

/// Why a request that may change something is not shown to come from this service's own pages; `None` when it is.
pub fn cross_origin(headers: &HeaderMap) -> Option<String> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = text("sec-fetch-site") {
        return (site != "same-origin").then(|| {
            format!("refused: the browser says this form was sent from another site (Sec-Fetch-Site: {site})")
        });
    }
    let refused = "refused: the request does not say it comes from this service's own page (no Origin or \
                   Sec-Fetch-Site header); send the form from the console";
    let (Some(origin), Some(host)) = (text("origin"), text("host")) else { return Some(refused.into()) };
    let origin_host = origin.split_once("://").map(|(_, rest)| rest).unwrap_or_default();
    if origin_host.eq_ignore_ascii_case(host) {
        None
    } else {
        Some("refused: the form was sent from a page of another origin".into())
    }
}

/// A page that could not be served: its status and the words a person reads, on the console's error page.
#[derive(Debug)]
pub struct ConsoleError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What happened and what to do.
    pub words: String,
}

impl ConsoleError {
    /// An error with `status` and `words`.
    pub fn new(status: StatusCode, words: impl Into<String>) -> ConsoleError {
        ConsoleError { status, words: words.into() }
    }

    /// 404, as for a run that does not exist (docs/permissions.md: one the operator may not see answers alike).
    pub fn not_found(words: impl Into<String>) -> ConsoleError {
        ConsoleError::new(StatusCode::NOT_FOUND, words)
    }
}

impl From<ApiError> for ConsoleError {
    fn from(e: ApiError) -> ConsoleError {
        ConsoleError { status: e.status, words: e.message }
    }
}

impl From<sqlx::Error> for ConsoleError {
    fn from(e: sqlx::Error) -> ConsoleError {
        ApiError::from(e).into()
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let page = pages::ErrorPage::new(self.status, &self.words);
        (self.status, page.html()).into_response()
    }
}

/// A rendered page, or the error page when a template fails (it cannot: every value is a string or a number, but
/// the failure is still not a panic).
pub(crate) fn html(rendered: Result<String, askama::Error>) -> Response {
    match rendered {
        Ok(text) => Html(text).into_response(),
        Err(e) => ConsoleError::from(ApiError::internal("a console page", &e)).into_response(),
    }
}

#[cfg(test)]
mod tests;
