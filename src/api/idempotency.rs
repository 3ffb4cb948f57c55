//! `Idempotency-Key` on every POST of the API: a client that sends a key with a request and sends the same request
//! again with the same key — a retry after a timeout, a dropped connection, a crash of its own — gets the first
//! answer again, and nothing is done twice: one preview stored, not two; an execute answered 202 again, not 409.
//!
//! The key is the calling service's (two services may use the same key); the first request's fingerprint (method,
//! path, operator, body) is kept with it, so the same key with another request is refused (422
//! `idempotency-key-reused`) rather than answered with an answer to something else. A retry while the first
//! request is still being answered gets 409 `idempotency-in-progress`. An answer that is a failure of a system
//! (5xx) is not kept: the key is freed and a retry tries again. Keys are kept a day (the draft standard
//! `draft-ietf-httpapi-idempotency-key-header`; Stripe keeps them 24 h).
//!
//! A request without the header is served as before: the key is the client's to give.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::auth::Caller;
use super::error::ApiError;
use super::store::{self, KeptAnswer};
use super::ApiState;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// Set on an answer replayed from a key.
pub const REPLAYED: &str = "idempotency-replayed";
/// The longest key.
pub const MAX_KEY: usize = 255;
/// A key, as the document says it: visible ASCII ([`key_of`] checks the same).
const KEY_PATTERN: &str = "^[!-~]{1,255}$";
/// The largest body kept (an answer of the API is far smaller).
const MAX_BODY: usize = 1 << 20;

/// The middleware: see the module doc.
pub async fn layer(State(state): State<ApiState>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !request.headers().contains_key(HEADER) {
        return next.run(request).await;
    }
    let key = match key_of(request.headers().get_all(HEADER).iter().collect()) {
        Ok(key) => key,
        Err(e) => return e.into_response(),
    };
    let (mut parts, body) = request.into_parts();
    let Ok(caller) = Caller::from_request_parts(&mut parts, &state).await else {
        // Not a caller: the handler refuses it exactly as it would without a key.
        return next.run(Request::from_parts(parts, body)).await;
    };
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return ApiError::bad_request("invalid-request", "the body is over 1 MiB").into_response();
    };
    let fingerprint = fingerprint(&parts.method, parts.uri.path(), &caller.operator, &bytes);
    let kept = Kept { state: &state, service: &caller.service, key: &key };
    match kept.claim(&fingerprint).await {
        Ok(None) => {}
        Ok(Some(answer)) => return answer,
        Err(e) => return ApiError::internal("claiming an idempotency key", &e).into_response(),
    }
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    kept.keep(response).await
}

/// The one key of the request: 1 to [`MAX_KEY`] visible ASCII characters, sent once.
fn key_of(values: Vec<&HeaderValue>) -> Result<String, ApiError> {
    let refused = |why: &str| ApiError::bad_request("invalid-request", format!("Idempotency-Key: {why}"));
    let [value] = values.as_slice() else {
        return Err(refused("send it once"));
    };
    let key = value.to_str().map_err(|_| refused("visible ASCII characters only"))?;
    if key.is_empty() || key.len() > MAX_KEY || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(refused("1 to 255 visible ASCII characters (a UUID is a good key)"));
    }
    Ok(key.to_string())
}

/// What makes two requests the same request.
fn fingerprint(method: &Method, path: &str, operator: &str, body: &Bytes) -> Vec<u8> {
    let mut hash = Sha256::new();
    for part in [method.as_str().as_bytes(), path.as_bytes(), operator.as_bytes()] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.update(body);
    hash.finalize().to_vec()
}

/// One service's key.
struct Kept<'a> {
    state: &'a ApiState,
    service: &'a str,
    key: &'a str,
}

impl Kept<'_> {
    /// Claims the key for this request (`None`: it is the first, go on), or the answer it gets instead: the first
    /// answer replayed, or a refusal. Old keys are removed first.
    async fn claim(&self, fingerprint: &[u8]) -> Result<Option<Response>, sqlx::Error> {
        let pool = &self.state.pool;
        store::idempotency_expire(pool).await?;
        if store::idempotency_claim(pool, self.service, self.key, fingerprint).await? {
            return Ok(None);
        }
        let Some(kept) = store::idempotency_get(pool, self.service, self.key).await? else {
            // Freed between the claim and the read (its first request failed on a system): claim it again.
            return Ok((!store::idempotency_claim(pool, self.service, self.key, fingerprint).await?)
                .then(|| in_progress().into_response()));
        };
        Ok(Some(match kept.status {
            _ if kept.fingerprint != fingerprint => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency-key-reused",
                "this Idempotency-Key was sent with another request (method, path, operator or body): a key names \
                 one request; use a new key for a new request",
            )
            .into_response(),
            None => in_progress().into_response(),
            Some(_) => replay(kept),
        }))
    }

    /// Keeps `response` as the key's answer — or frees the key when it is a failure of a system — and returns it.
    async fn keep(&self, response: Response) -> Response {
        let (parts, body) = response.into_parts();
        let pool = &self.state.pool;
        let bytes = match axum::body::to_bytes(body, MAX_BODY).await {
            Ok(bytes) if !parts.status.is_server_error() => bytes,
            read => {
                if let Err(e) = store::idempotency_release(pool, self.service, self.key).await {
                    tracing::warn!(error = %e, "could not free an idempotency key after a failure");
                }
                let bytes = read.unwrap_or_default();
                return Response::from_parts(parts, Body::from(bytes));
            }
        };
        let header_text = |name| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let answer = KeptAnswer {
            fingerprint: Vec::new(),
            status: Some(parts.status.as_u16() as i16),
            content_type: header_text(header::CONTENT_TYPE),
            location: header_text(header::LOCATION),
            body: Some(bytes.to_vec()),
        };
        if let Err(e) = store::idempotency_answer(pool, self.service, self.key, &answer).await {
            // The request was done: its answer goes out. A retry then finds the key in progress until it expires,
            // which is refused, never done twice.
            tracing::warn!(error = %e, "could not keep the answer of an idempotency key");
        }
        Response::from_parts(parts, Body::from(bytes))
    }
}

fn in_progress() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "idempotency-in-progress",
        "the first request with this Idempotency-Key is still being answered: send it again in a moment",
    )
}

/// The first answer, again, marked as replayed.
fn replay(kept: KeptAnswer) -> Response {
    let status = kept.status.and_then(|s| StatusCode::from_u16(s as u16).ok()).unwrap_or(StatusCode::OK);
    let mut response = Response::new(Body::from(kept.body.unwrap_or_default()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in [(header::CONTENT_TYPE, kept.content_type), (header::LOCATION, kept.location)] {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            headers.insert(name, value);
        }
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// The document's side: every POST of the API takes the header, and may answer 409 and 422 for it.
pub struct Documented;

impl utoipa::Modify for Documented {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        use utoipa::openapi::Required;
        let parameter = ParameterBuilder::new()
            .name("Idempotency-Key")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(
                "Sent again with the same request, the first answer is answered again (marked `Idempotency-Replayed: \
                 true`) and nothing is done twice; with another request, 422 (idempotency-key-reused). Kept a day.",
            ))
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(MAX_KEY))
                    .pattern(Some(KEY_PATTERN)),
            ))
            .build();
        let answers = super::doc::error_answers(&[
            (409, "The first request with this Idempotency-Key is still being answered (idempotency-in-progress)"),
            (422, "The Idempotency-Key was sent with another request (idempotency-key-reused)"),
        ]);
        for (path, item) in openapi.paths.paths.iter_mut() {
            let Some(post) = item.post.as_mut().filter(|_| path.starts_with("/api/")) else {
                continue;
            };
            post.parameters.get_or_insert_with(Vec::new).push(parameter.clone());
            for (status, answer) in &answers {
                post.responses.responses.entry(status.clone()).or_insert_with(|| answer.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_short_visible_token() {
        let value = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(key_of(vec![&value("8e3f-a1")]).unwrap(), "8e3f-a1");
        let long = "k".repeat(MAX_KEY + 1);
        for bad in [vec![], vec![&value("a"), &value("b")]] {
            assert_eq!(key_of(bad).unwrap_err().slug, "invalid-request");
        }
        for bad in ["", "with space", long.as_str()] {
            assert_eq!(key_of(vec![&value(bad)]).unwrap_err().slug, "invalid-request", "{bad:?}");
        }
    }

    #[test]
    fn the_same_request_is_the_same_fingerprint_and_any_part_changes_it() {
        let body = Bytes::from_static(b"{\"a\":1}");
        let base = fingerprint(&Method::POST, "/api/v1/previews", "alice", &body);
        assert_eq!(base, fingerprint(&Method::POST, "/api/v1/previews", "alice", &body));
        assert_ne!(base, fingerprint(&Method::POST, "/api/v1/previews", "bob", &body));
        assert_ne!(base, fingerprint(&Method::POST, "/api/v1/runs", "alice", &body));
        assert_ne!(base, fingerprint(&Method::POST, "/api/v1/previews", "alice", &Bytes::from_static(b"{}")));
        // The parts are length-prefixed: moving a character from one to the next is another request.
        assert_ne!(fingerprint(&Method::POST, "/a", "bc", &body), fingerprint(&Method::POST, "/ab", "c", &body));
    }
}
