//! Who calls the API: a **service** that presents a bearer token, acting for an **operator** it names.
//!
//! The tokens are secrets: they come from the environment or a mounted file ([`super::tokens`]), never from a
//! configuration file, and they are never logged. A presented token is looked up once per request, by the door
//! ([`door`]), which also charges the request to its rate limit ([`super::limit`]); the extractors below read
//! what the door found.
//!
//! The operator comes in the `X-Operator` header: it is who the grants are checked against and who the audit
//! names (the service vouches for them, as the Studio backend does on the SQL path). A service whose tokens name
//! its operators may act for those only (403 `operator-not-allowed-for-service`). The service's name goes into
//! the log line of every request, so an audit row can be traced to the service that made it.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::input::single_header;
use super::limit::retry_after_secs;
use super::tokens::Service;
use super::ApiState;

pub use super::tokens::{TokensError, MAX_OPERATOR_CHARS, METRICS_TOKEN_ENV, TOKENS_ENV, TOKENS_FILE_ENV};

/// The header naming the operator a call acts for.
pub const OPERATOR_HEADER: &str = "x-operator";

/// The paths a platform calls (probes, the scraper, a client fetching the document): no service token, and no
/// rate limit — a 429 on a probe would get a healthy replica restarted, and the scraper's rate is the
/// deployment's own. `/metrics` keeps its own token.
const OPEN_PATHS: [&str; 4] = ["/health", "/ready", "/metrics", "/openapi.json"];

/// What the door learnt of a request's token, for the extractors: the token is hashed once a request.
#[derive(Debug, Clone)]
enum Identity {
    /// A known service's token.
    Service(Arc<Service>),
    /// No token, or not a known one.
    Unknown,
}

/// Middleware: identifies the request first, then charges it to its rate limit — its caller's bucket (the service
/// and the operator it names) when it presents a known token, else its client address's ([`client_address`]).
/// Over a limit: 429 `rate-limited` with `Retry-After`. A known token is never charged to an address, so a flood
/// without one through a shared proxy delays only the requests without one.
pub async fn door(State(state): State<ApiState>, mut request: Request, next: Next) -> Response {
    if OPEN_PATHS.contains(&request.uri().path()) {
        return next.run(request).await;
    }
    let now = Instant::now();
    let limits = &state.limits;
    let service = bearer_token(request.headers()).ok().and_then(|t| state.tokens.current().identify(t));
    let identity = match service {
        Some(service) => {
            let operator = limited_operator(&service, request.headers());
            if let Err(wait) = limits.callers.take(&(service.name.clone(), operator.clone()), now) {
                let who = if operator.is_empty() { String::new() } else { format!(" acting for {operator}") };
                return too_many(wait, format!("service {}{who} is over its rate limit", service.name));
            }
            Identity::Service(service)
        }
        None => {
            let address = client_address(limits, request.extensions(), request.headers());
            if let Err(wait) = limits.unidentified.take(&address, now) {
                return too_many(wait, "too many requests without a known token came from this address".into());
            }
            Identity::Unknown
        }
    };
    request.extensions_mut().insert(identity);
    next.run(request).await
}

/// The operator whose bucket a request of `service` is charged to: the one `X-Operator` names when the service may
/// act for them, else none (the request is refused later, and charged to the service's bucket of no operator, so
/// made-up names do not make new buckets).
fn limited_operator(service: &Service, headers: &HeaderMap) -> String {
    let named = operator(headers).ok().filter(|o| service.may_act_for(o));
    named.unwrap_or_default().to_string()
}

/// The client address of a request: its peer's, or the one a trusted proxy names in `X-Forwarded-For`
/// ([`super::limit::TrustedProxies::client_address`]); `None` when the peer is not known (a router called in
/// memory).
pub fn client_address(
    limits: &super::limit::Limits,
    extensions: &axum::http::Extensions,
    headers: &HeaderMap,
) -> Option<std::net::IpAddr> {
    let peer = extensions.get::<ConnectInfo<super::PeerAddr>>().map(|c| c.0 .0.ip())?;
    Some(limits.trusted_proxies.client_address(peer, headers))
}

/// 429 with `Retry-After` (whole seconds) and `why`.
fn too_many(wait: std::time::Duration, why: String) -> Response {
    let secs = retry_after_secs(wait);
    let words = format!("{why}: retry after {secs} s (Retry-After)");
    let mut response = ApiError::new(StatusCode::TOO_MANY_REQUESTS, "rate-limited", words).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
    response
}

/// The service of the request: as the door found it, or — where no door ran — looked up now.
fn service(parts: &Parts, state: &ApiState) -> Result<Arc<Service>, ApiError> {
    let not_known = || unauthenticated("the token is not known");
    match parts.extensions.get::<Identity>() {
        Some(Identity::Service(service)) => Ok(service.clone()),
        // The token's own fault (none, another scheme, sent twice) if it has one, else it is not known.
        Some(Identity::Unknown) => Err(bearer_token(&parts.headers).err().unwrap_or_else(not_known)),
        None => state.tokens.current().identify(bearer_token(&parts.headers)?).ok_or_else(not_known),
    }
}

/// An authenticated call: the service that made it and the operator it acts for.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The service (from its token).
    pub service: String,
    /// The operator (from `X-Operator`).
    pub operator: String,
}

impl FromRequestParts<ApiState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Caller, ApiError> {
        let service = service(parts, state)?;
        let operator = operator(&parts.headers)?;
        if !service.may_act_for(operator) {
            return Err(operator_not_allowed(&service.name, operator));
        }
        tracing::debug!(service = service.name, operator, "API caller");
        Ok(Caller { service: service.name.clone(), operator: operator.to_string() })
    }
}

/// A scrape of `/metrics`: it presents the metrics token when one is set ([`METRICS_TOKEN_ENV`]).
#[derive(Debug)]
pub struct Scraper;

impl FromRequestParts<ApiState> for Scraper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &ApiState) -> Result<Scraper, ApiError> {
        let Some(expected) = &state.metrics_token else { return Ok(Scraper) };
        let token = bearer_token(&parts.headers)?;
        expected.service_of(token).map(|_| Scraper).ok_or_else(|| unauthenticated("the token is not the metrics token"))
    }
}

/// 403: `service`'s tokens name the operators it may act for, and `operator` is not one.
fn operator_not_allowed(service: &str, operator: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "operator-not-allowed-for-service",
        format!("service {service} may not act for operator {operator}: its token names the operators it acts for"),
    )
}

/// 401 with `why` and what to send.
fn unauthenticated(why: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthenticated", format!("{why}: send Authorization: Bearer <token>"))
}

/// The token of the one `Authorization` header, whose scheme is `Bearer` in any case (RFC 9110 §11.1: schemes
/// are case-insensitive).
fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = single_header(headers, header::AUTHORIZATION.as_str())?.ok_or_else(|| unauthenticated("no token"))?;
    let not_bearer = || unauthenticated("the Authorization header is not a bearer token");
    let (scheme, token) = value.to_str().ok().and_then(|v| v.trim().split_once(' ')).ok_or_else(not_bearer)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(not_bearer());
    }
    Ok(token)
}

/// The operator the one `X-Operator` header names ([`operator_name_fault`]).
fn operator(headers: &HeaderMap) -> Result<&str, ApiError> {
    let value = single_header(headers, OPERATOR_HEADER)?;
    let invalid = |why: &str| ApiError::bad_request("invalid-operator", format!("X-Operator {why}"));
    let operator = match value.map(|v| v.to_str()) {
        None => None,
        Some(Ok(v)) => Some(v.trim()).filter(|o| !o.is_empty()),
        Some(Err(_)) => {
            return Err(invalid(
                "must be printable US-ASCII (HTTP header values are, RFC 9110 §5.5): name the operator by an \
                 ASCII login",
            ))
        }
    };
    let operator = operator.ok_or_else(|| {
        ApiError::bad_request(
            "no-operator",
            "name the operator this call acts for in the X-Operator header (grants are checked against them, and \
             the audit names them)",
        )
    })?;
    match operator_name_fault(operator) {
        Some(why) => Err(invalid(&why)),
        None => Ok(operator),
    }
}

/// What is wrong with `name` as an operator's name — what it "must be", in words that name no header or field —
/// or `None` when it is one: printable US-ASCII of 1 to [`MAX_OPERATOR_CHARS`] characters. Non-ASCII is refused
/// rather than guessed at: RFC 9110 §5.5 makes a header value ASCII (other octets are opaque data, in no defined
/// encoding), so "jürgen" could arrive as UTF-8 or Latin-1 and name two people. The console's sign-in holds names
/// to the same rule.
pub fn operator_name_fault(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some("must name the operator (grants are checked against them, and the audit names them)".into());
    }
    if name.chars().any(char::is_control) {
        return Some("must be printable text, without control characters such as a tab".into());
    }
    if !name.is_ascii() {
        return Some("must be printable US-ASCII: name the operator by an ASCII login".into());
    }
    if name.len() > MAX_OPERATOR_CHARS {
        return Some(format!("must be at most {MAX_OPERATOR_CHARS} characters"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &[u8])]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                axum::http::HeaderValue::from_bytes(value).unwrap(),
            );
        }
        h
    }

    #[test]
    fn the_bearer_scheme_is_any_case_and_a_token_is_sent_once() {
        for value in ["Bearer t0k", "bearer t0k", "BEARER t0k", "  BeArEr   t0k "] {
            assert_eq!(bearer_token(&headers(&[("authorization", value.as_bytes())])).unwrap(), "t0k", "{value}");
        }
        for value in ["Basic dXNlcg==", "Bearer", "Bearer  ", "Bearert0k"] {
            let e = bearer_token(&headers(&[("authorization", value.as_bytes())])).unwrap_err();
            assert_eq!((e.status, e.slug), (StatusCode::UNAUTHORIZED, "unauthenticated"), "{value}");
        }
        let twice = headers(&[("authorization", b"Bearer a"), ("authorization", b"Bearer b")]);
        assert_eq!(bearer_token(&twice).unwrap_err().slug, "invalid-request");
    }

    #[test]
    fn an_operator_is_one_printable_ascii_name() {
        assert_eq!(operator(&headers(&[("x-operator", b" alice ")])).unwrap(), "alice");
        let slug = |pairs: &[(&str, &[u8])]| operator(&headers(pairs)).unwrap_err().slug;
        assert_eq!(slug(&[]), "no-operator");
        assert_eq!(slug(&[("x-operator", b"  ")]), "no-operator");
        assert_eq!(slug(&[("x-operator", "j\u{fc}rgen".as_bytes())]), "invalid-operator");
        assert_eq!(slug(&[("x-operator", b"a\tb")]), "invalid-operator");
        assert_eq!(slug(&[("x-operator", "a".repeat(201).as_bytes())]), "invalid-operator");
        assert_eq!(slug(&[("x-operator", b"alice"), ("x-operator", b"bob")]), "invalid-request");
    }

    /// The door over the real router (its database never reached): a service limited to named operators is
    /// refused for another one, and past its burst a service — or an address without a known token — gets 429
    /// with Retry-After.
    #[tokio::test]
    async fn the_door_limits_operators_and_rates() {
        use axum::body::Body;
        use tower::ServiceExt as _;
        const BOT: &str = "ops-bot-token-0123456789abcdef";
        let mut state = super::super::doc_tests::unreachable_state();
        let entries = format!("ops-bot={BOT} operators=alice|bob");
        state.tokens = Arc::new(super::super::LiveTokens::new(super::super::ServiceTokens::parse(&entries).unwrap()));
        let rate = super::super::limit::Rate { per_second: 0.5, burst: 3 };
        state.limits = super::super::limit::Limits::new(rate, rate);
        let app = super::super::router(state);
        // An unknown path answers 404 without the Caller; `/me` asks for one first.
        let call = |token: &str, operator: &str| {
            let uri = if token == BOT { "/api/v1/no/such/thing" } else { "/api/v1/me" };
            let request = axum::http::Request::builder()
                .uri(uri)
                .header("authorization", format!("Bearer {token}"))
                .header(OPERATOR_HEADER, operator)
                .body(Body::empty())
                .unwrap();
            app.clone().oneshot(request)
        };
        let answer = |response: Response| async move {
            let (status, retry) = (response.status(), response.headers().get(header::RETRY_AFTER).cloned());
            let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
            let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
            (status, problem["type"].as_str().unwrap().trim_start_matches("/problems/").to_string(), problem, retry)
        };
        // The operator check is the Caller's: an unknown path answers 404 whoever acts; a handler is needed.
        let request = axum::http::Request::builder()
            .uri("/api/v1/me")
            .header("authorization", format!("Bearer {BOT}"))
            .header(OPERATOR_HEADER, "carol")
            .body(Body::empty())
            .unwrap();
        let (status, slug, problem, _) = answer(app.clone().oneshot(request).await.unwrap()).await;
        assert_eq!((status, slug.as_str()), (StatusCode::FORBIDDEN, "operator-not-allowed-for-service"));
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("ops-bot") && detail.contains("carol") && !detail.contains(BOT), "{detail}");
        // Alice's burst is her own (the 403 above was charged to the service's bucket of no operator): three pass,
        // the fourth is refused.
        for _ in 0..3 {
            let (status, slug, _, _) = answer(call(BOT, "alice").await.unwrap()).await;
            assert_eq!((status, slug.as_str()), (StatusCode::NOT_FOUND, "no-such-route"));
        }
        let (status, slug, problem, retry) = answer(call(BOT, "alice").await.unwrap()).await;
        assert_eq!((status, slug.as_str()), (StatusCode::TOO_MANY_REQUESTS, "rate-limited"), "{problem}");
        assert!(problem["detail"].as_str().unwrap().contains("ops-bot acting for alice"), "{problem}");
        assert!(retry.is_some_and(|r| r.to_str().unwrap().parse::<u64>().unwrap() >= 1));
        // Made-up tokens: 401 for the address's burst, then 429.
        for _ in 0..3 {
            let (status, ..) = answer(call("made-up-token-0123456789abcdef", "alice").await.unwrap()).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED);
        }
        let (status, slug, problem, retry) =
            answer(call("made-up-token-0123456789abcdef", "alice").await.unwrap()).await;
        assert_eq!((status, slug.as_str()), (StatusCode::TOO_MANY_REQUESTS, "rate-limited"), "{problem}");
        assert!(retry.is_some());
        assert!(!problem.to_string().contains("made-up"), "{problem}");
    }

    /// Identified first: a flood without a known token from the callers' shared address (a load balancer's) starves
    /// neither the service's callers, nor one operator of a service its other operators.
    #[tokio::test]
    async fn a_flood_without_a_token_or_from_one_operator_starves_no_other_caller() {
        use axum::body::Body;
        use tower::ServiceExt as _;
        const STUDIO: &str = "studio-token-0123456789abcdef01";
        let mut state = super::super::doc_tests::unreachable_state();
        state.tokens = Arc::new(super::super::LiveTokens::new(
            super::super::ServiceTokens::parse(&format!("studio={STUDIO}")).unwrap(),
        ));
        let rate = super::super::limit::Rate { per_second: 0.01, burst: 2 };
        state.limits = super::super::limit::Limits::new(rate, rate);
        let app = super::super::router(state);
        let status = |token: &'static str, operator: &'static str| {
            let request = axum::http::Request::builder()
                .uri("/api/v1/no/such/thing")
                .header("authorization", format!("Bearer {token}"))
                .header(OPERATOR_HEADER, operator)
                .body(Body::empty())
                .unwrap();
            let app = app.clone();
            async move { app.oneshot(request).await.unwrap().status() }
        };
        for _ in 0..5 {
            status("made-up-token-0123456789abcdef", "alice").await;
        }
        assert_eq!(status("made-up-token-0123456789abcdef", "alice").await, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(status(STUDIO, "alice").await, StatusCode::NOT_FOUND, "a known token is not the address's");
        assert_eq!(status(STUDIO, "alice").await, StatusCode::NOT_FOUND);
        assert_eq!(status(STUDIO, "alice").await, StatusCode::TOO_MANY_REQUESTS, "alice's burst is spent");
        assert_eq!(status(STUDIO, "bob").await, StatusCode::NOT_FOUND, "bob has his own bucket");
    }

    #[test]
    fn the_operator_refusal_names_the_service_and_the_operator() {
        let e = operator_not_allowed("ops-bot", "carol");
        assert_eq!((e.status, e.slug), (StatusCode::FORBIDDEN, "operator-not-allowed-for-service"));
        assert!(e.message.contains("service ops-bot") && e.message.contains("operator carol"), "{}", e.message);
    }
}
