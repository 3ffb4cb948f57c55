//! What wraps every request: its id, its log line, and the framework's own refusals put in the API's form.
//!
//! The id is the caller's `X-Request-Id` when it is a sane token (so a console can follow its own ids through our
//! log), a new UUID otherwise. It is answered in `X-Request-Id` on every response, in `request_id` of every
//! problem document, and on the request's log line, so a caller quoting it leads to the line and its details.
//!
//! axum answers some requests itself, before any handler — 405 for a method the path does not serve, 404 for an
//! unknown path, 400/413/415 from its extractors — with plain text or no body. Those become problem documents
//! here, in one place, whatever produced them.
//!
//! Every request but an event stream is answered within the request timeout ([`deadline`]), or with 503
//! `request-timeout`; a broker-bound act that has begun is finished and audited all the same ([`to_the_end`]).

use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument as _;

use super::error::{in_the_log, ApiError, PROBLEM_JSON};
pub use super::request_id::current_id;
use super::request_id::REQUEST_ID;

/// The header carrying a request's id, both ways.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The longest request id taken from a caller.
const MAX_ID_CHARS: usize = 64;

/// The caller's id if it is one header of 1 to 64 letters, digits and `-._:` (nothing a log line or a header
/// could be bent by), else a new UUID.
fn request_id(headers: &HeaderMap) -> String {
    let mut sent = headers.get_all(REQUEST_ID_HEADER).iter();
    let theirs = match (sent.next(), sent.next()) {
        (Some(one), None) => one.to_str().ok().filter(|id| is_sane(id)),
        _ => None,
    };
    theirs.map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_string)
}

fn is_sane(id: &str) -> bool {
    (1..=MAX_ID_CHARS).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'))
}

/// Middleware, outermost: gives the request its id, serves it within it, puts a framework's refusal in the
/// API's form, answers the id, and writes one log line: the id, method, path (never the query string, which is
/// the caller's), status and time taken.
pub async fn around(request: Request, next: Next) -> Response {
    let id = request_id(request.headers());
    let method = request.method().clone();
    let route = request.uri().path().to_string();
    let started = Instant::now();
    let span = tracing::info_span!("request", request_id = %id);
    let served = async {
        let response = next.run(request).await;
        as_problem(response, &method, &route)
    };
    let mut response = REQUEST_ID.scope(id.clone(), served.instrument(span)).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let status = response.status().as_u16();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if status >= 500 {
        tracing::warn!(request_id = %id, %method, route, status, ms, "API request");
    } else {
        tracing::info!(request_id = %id, %method, route, status, ms, "API request");
    }
    response
}

/// Middleware, inside the idempotency layer: a request not answered within `ApiState::request_timeout` is
/// answered 503 `request-timeout`, and its handler is dropped (its open transaction, if any, rolls back). Inside
/// the idempotency layer so a timed-out request frees its key (a 5xx is not kept) instead of holding it "in
/// progress" for a day; inside [`around`], so the answer carries the request's id like every other. The time is
/// until the answer's head: a body is already made, but an event stream's (`GET /api/v1/runs/{run}/events`, and the
/// console's `GET /console/runs/{run}/events`) follows its run for as long as it lasts, so a stream is never timed, not even for its head.
pub async fn deadline(State(state): State<super::ApiState>, request: Request, next: Next) -> Response {
    if is_event_stream(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    within(state.request_timeout, next.run(request)).await
}

/// `work` carried to its end in a task of its own, whatever becomes of the request: the deadline drops a handler
/// that is late, and a broker-bound act dropped midway (an orphan's return) would have moved messages and written no
/// audit row. Awaited, it is the handler's answer; abandoned by a late request, it still finishes and audits itself
/// (the 503 says the request may have taken effect). Runs under the request's id and log span.
pub async fn to_the_end<T: Send + 'static>(
    work: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T, ApiError> {
    let work = REQUEST_ID.scope(current_id(), work).instrument(tracing::Span::current());
    tokio::spawn(work).await.map_err(|e| ApiError::internal("an action ended without an answer", &e))
}

/// `answer`, or 503 `request-timeout` when it takes longer than `limit`.
async fn within(limit: Duration, answer: impl std::future::Future<Output = Response>) -> Response {
    match tokio::time::timeout(limit, answer).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(request_id = %current_id(), limit_ms = limit.as_millis() as u64, "API request timed out");
            let words = format!(
                "the request was not answered within {} s, the service's request timeout; it may have taken effect: \
                 look before sending it again",
                limit.as_secs_f64()
            );
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "request-timeout", words).into_response()
        }
    }
}

/// Whether `method path` follows a run's events: `GET /api/v1/runs/{run}/events`.
fn is_event_stream(method: &Method, path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    method == Method::GET
        && matches!(segments.as_slice(),
            ["", "api", "v1", "runs", run, "events"] | ["", "console", "runs", run, "events"] if !run.is_empty())
}

/// `response` as a problem document when it is a refusal that is not one yet (no body, or plain text): the
/// framework's own. Its headers (`Allow` of a 405) are kept. A refusal with another body (the readiness 503's
/// JSON) is left as it is.
fn as_problem(response: Response, method: &Method, path: &str) -> Response {
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let is_plain = content_type.is_none_or(|t| t.starts_with("text/plain"));
    if status.as_u16() < 400 || content_type == Some(PROBLEM_JSON) || !is_plain {
        return response;
    }
    let (parts, _) = response.into_parts();
    let mut problem = framework_problem(status, method, path, &parts.headers).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            problem.headers_mut().insert(name.clone(), value.clone());
        }
    }
    problem
}

/// The problem for a status the framework answered on its own.
fn framework_problem(status: StatusCode, method: &Method, path: &str, headers: &HeaderMap) -> ApiError {
    match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = headers.get(header::ALLOW).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let words = format!("{path} does not serve {method}; it serves {allowed}");
            ApiError::new(status, "method-not-allowed", words)
        }
        StatusCode::NOT_FOUND => {
            ApiError::new(status, "no-such-route", format!("there is no {method} {path}: see /openapi.json"))
        }
        StatusCode::PAYLOAD_TOO_LARGE => super::input::body_too_large(),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
            status,
            "unsupported-media-type",
            "the body must be JSON: send Content-Type: application/json",
        ),
        s if s.is_client_error() => ApiError::new(s, "invalid-request", "the request is not one this API takes"),
        s => {
            tracing::error!(status = s.as_u16(), "API request: the framework failed without a problem document");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", in_the_log("the request", &current_id()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_caller_id_is_kept_any_other_replaced() {
        let with = |values: &[&str]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(REQUEST_ID_HEADER, HeaderValue::from_str(v).unwrap());
            }
            request_id(&h)
        };
        assert_eq!(with(&["console-7f3a.42:1_b"]), "console-7f3a.42:1_b");
        for replaced in [&[][..], &["a b"], &["<x>"], &[&"x".repeat(65)], &["a", "b"]] {
            let id = with(replaced);
            assert!(uuid::Uuid::parse_str(&id).is_ok(), "{replaced:?} kept as {id}");
        }
    }

    #[test]
    fn a_plain_refusal_becomes_a_problem_and_keeps_its_headers() {
        let plain = (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET,HEAD")], "").into_response();
        let problem = as_problem(plain, &Method::DELETE, "/api/v1/runs");
        assert_eq!(problem.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(problem.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        assert_eq!(problem.headers()[header::ALLOW], "GET,HEAD");
        let json = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({ "status": "not ready" })));
        let kept = as_problem(json.into_response(), &Method::GET, "/ready");
        assert_eq!(kept.headers()[header::CONTENT_TYPE], "application/json");
    }

    /// The timeout layer over a tiny router: a slow answer is cut at the deadline with a problem document carrying
    /// the request's id; an event stream is not timed.
    #[tokio::test]
    async fn a_slow_request_is_answered_503_in_time_and_an_event_stream_is_not_timed() {
        use axum::routing::get;
        use tower::ServiceExt as _;
        let mut state = super::super::doc_tests::unreachable_state();
        state.request_timeout = Duration::from_millis(50);
        let slow = || async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            "late"
        };
        let app = axum::Router::new()
            .route("/api/v1/slow", get(slow))
            .route("/api/v1/runs/{run}/events", get(slow))
            .layer(axum::middleware::from_fn_with_state(state, deadline))
            .layer(axum::middleware::from_fn(around));
        let call = |uri: &str| {
            let request =
                Request::builder().uri(uri).header(REQUEST_ID_HEADER, "slow-1").body(axum::body::Body::empty());
            app.clone().oneshot(request.unwrap())
        };
        let started = Instant::now();
        let response = call("/api/v1/slow").await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(250), "{:?}", started.elapsed());
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        assert_eq!(response.headers()[REQUEST_ID_HEADER], "slow-1");
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((&problem["type"], &problem["request_id"]), (&"/problems/request-timeout".into(), &"slow-1".into()));
        let stream = call("/api/v1/runs/00000000-0000-4000-8000-000000000000/events").await.unwrap();
        assert_eq!(stream.status(), StatusCode::OK);
    }

    #[test]
    fn only_a_runs_event_stream_is_one() {
        assert!(is_event_stream(&Method::GET, "/api/v1/runs/x/events"));
        assert!(is_event_stream(&Method::GET, "/console/runs/x/events"));
        for (method, path) in [
            (Method::POST, "/api/v1/runs/x/events"),
            (Method::GET, "/api/v1/runs//events"),
            (Method::GET, "/api/v1/runs/x/events/y"),
            (Method::GET, "/api/v1/runs/x"),
            (Method::GET, "/api/v2/runs/x/events"),
            (Method::POST, "/console/runs/x/events"),
            (Method::GET, "/console/runs/x"),
        ] {
            assert!(!is_event_stream(&method, path), "{method} {path}");
        }
    }
}
