//! What a request may carry, checked once at the door for every call rather than field by field in the handlers:
//! a body is JSON of the call's exact shape (no unknown field), at most [`MAX_BODY_BYTES`]; no text anywhere in
//! it, nor in the path or the query, holds a NUL (Postgres refuses byte 0x00, which would surface as a 500) or a
//! control character (the CLI prints names and reasons to a terminal, where ESC sequences act); a header the
//! call depends on is sent once. Each refusal is a 400 (413, 415) in words that name the field, never echoing
//! the value, which may be the very bytes refused.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::error::ApiError;

/// The largest body any call takes: the largest real one (a preview naming message ids) is far below it.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A field name longer than this is not repeated in the words (it is the caller's text, not ours).
const MAX_NAMED_FIELD: usize = 64;

/// Why a piece of text is refused. The words name the field, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Byte 0x00, which Postgres refuses in any text.
    #[error("{field} contains a NUL character (U+0000), which no name or text may hold")]
    Nul {
        /// Where.
        field: String,
    },
    /// A control character where only printable text belongs.
    #[error("{field} contains the control character U+{code:04X}: send printable text")]
    Control {
        /// Where.
        field: String,
        /// The character's code point.
        code: u32,
    },
    /// Longer than the field takes.
    #[error("{field} is longer than {max} characters")]
    TooLong {
        /// Where.
        field: String,
        /// Its bound.
        max: usize,
    },
}

impl From<TextError> for ApiError {
    fn from(e: TextError) -> ApiError {
        ApiError::bad_request("invalid-request", e.to_string())
    }
}

/// Which control characters a text may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controls {
    /// Tab, line feed and carriage return: a selector or a name typed into a text area may break lines.
    LineBreaks,
    /// None: one line of text that a terminal prints (a stop reason, a path, a header).
    None,
}

/// `text` holds no NUL, and no control character beyond what `allowed` lets through.
pub fn check_text(field: &str, text: &str, allowed: Controls) -> Result<(), TextError> {
    let line_break = |c: char| matches!(c, '\t' | '\n' | '\r');
    match text.chars().find(|c| c.is_control() && !(allowed == Controls::LineBreaks && line_break(*c))) {
        Some('\0') => Err(TextError::Nul { field: field.into() }),
        Some(c) => Err(TextError::Control { field: field.into(), code: c.into() }),
        None => Ok(()),
    }
}

/// Free text a person wrote and others read on one line (a stop reason): printable, at most `max` characters.
pub fn check_free_text(field: &str, text: &str, max: usize) -> Result<(), TextError> {
    check_text(field, text, Controls::None)?;
    if text.chars().count() > max {
        return Err(TextError::TooLong { field: field.into(), max });
    }
    Ok(())
}

/// Every string and every key of `value`, at `at` (a path such as `source.queue` or `acknowledged[0]`).
fn check_json(value: &Value, at: &str) -> Result<(), TextError> {
    match value {
        Value::String(s) => check_text(&field_name(at), s, Controls::LineBreaks),
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| check_json(v, &format!("{at}[{i}]"))),
        Value::Object(map) => map.iter().try_for_each(|(key, v)| {
            check_text(&format!("a field name in {}", field_name(at)), key, Controls::None)?;
            let inner = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
            check_json(v, &inner)
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

/// How the words name the field at `at`.
fn field_name(at: &str) -> String {
    match at {
        "" => "the body".into(),
        long if long.len() > MAX_NAMED_FIELD => "a field of the body".into(),
        at => format!("`{at}`"),
    }
}

/// A JSON body of the call's shape, checked as the module says. Its content type must be JSON.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

/// A body that may be left out (none, or only white space, is `T::default()`); one that is sent is checked as
/// [`ApiJson`]'s, though a missing content type is taken as JSON (`curl -X POST` sends none).
#[derive(Debug)]
pub struct OptionalJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<ApiJson<T>, ApiError> {
        require_json(request.headers(), false)?;
        let bytes = body_bytes(request, state).await?;
        parse(&bytes).map(ApiJson)
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<OptionalJson<T>, ApiError> {
        let headers = request.headers().clone();
        let bytes = body_bytes(request, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        require_json(&headers, true)?;
        parse(&bytes).map(OptionalJson)
    }
}

/// 415 unless the content type is JSON (`application/json` or `application/<x>+json`); none at all passes only
/// when `missing_is_json`.
fn require_json(headers: &HeaderMap, missing_is_json: bool) -> Result<(), ApiError> {
    let is_json = |v: &HeaderValue| {
        let essence = v.to_str().unwrap_or_default().split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
    };
    match headers.get(header::CONTENT_TYPE) {
        Some(v) if is_json(v) => Ok(()),
        None if missing_is_json => Ok(()),
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
            "the body must be JSON: send Content-Type: application/json",
        )),
    }
}

/// The body's bytes, at most [`MAX_BODY_BYTES`] (the router's limit): 413 beyond.
async fn body_bytes<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            body_too_large()
        } else {
            ApiError::bad_request("invalid-request", "the body could not be read")
        }
    })
}

/// 413 in words.
pub fn body_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body-too-large",
        format!("the body is larger than {} KiB", MAX_BODY_BYTES / 1024),
    )
}

/// JSON, its text checked, then of `T`'s shape; each failure a 400 naming where.
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request("invalid-request", format!("the body is not JSON: {e}")))?;
    check_json(&value, "")?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let at = e.path().to_string();
        let words = if at == "." { e.inner().to_string() } else { format!("{}: {}", field_name(&at), e.inner()) };
        ApiError::bad_request("invalid-request", format!("the body is not this call's: {words}"))
    })
}

/// Middleware: under `/api/`, the path and the query, percent-decoded, are UTF-8 text without control
/// characters; otherwise 400 before any handler (a cluster name or a setting key from the path would reach
/// Postgres). Elsewhere no path takes a parameter, and an unknown one is a 404 whatever it holds.
pub async fn refuse_bad_target(request: Request, next: Next) -> Response {
    if !request.uri().path().starts_with("/api/") {
        return next.run(request).await;
    }
    match check_target(request.uri()) {
        Ok(()) => next.run(request).await,
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Why a request's target is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Percent-decoded, not UTF-8.
    #[error("{0} is not UTF-8 text once percent-decoded")]
    NotUtf8(&'static str),
    /// Holds what no text may.
    #[error(transparent)]
    Text(#[from] TextError),
}

impl From<TargetError> for ApiError {
    fn from(e: TargetError) -> ApiError {
        ApiError::bad_request("invalid-request", e.to_string())
    }
}

fn check_target(uri: &Uri) -> Result<(), TargetError> {
    let path = percent_decode_str(uri.path()).decode_utf8().map_err(|_| TargetError::NotUtf8("the path"))?;
    check_text("the path", &path, Controls::None)?;
    for pair in uri.query().unwrap_or_default().split('&') {
        let pair = pair.replace('+', " ");
        let decoded = percent_decode_str(&pair).decode_utf8().map_err(|_| TargetError::NotUtf8("the query"))?;
        check_text("the query", &decoded, Controls::None)?;
    }
    Ok(())
}

/// The one value of header `name`, if sent: a header sent twice is ambiguous (which would win is an accident of
/// the code), so it is refused.
pub fn single_header<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h HeaderValue>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::bad_request("invalid-request", format!("send the {name} header once")));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nul_and_control_characters_are_named_by_field() {
        assert_eq!(check_text("f", "a\tb\nc\r", Controls::LineBreaks), Ok(()));
        assert_eq!(check_text("f", "a\0", Controls::LineBreaks), Err(TextError::Nul { field: "f".into() }));
        assert_eq!(
            check_text("f", "\u{1b}[2J", Controls::LineBreaks),
            Err(TextError::Control { field: "f".into(), code: 0x1b })
        );
        assert_eq!(check_text("f", "a\tb", Controls::None), Err(TextError::Control { field: "f".into(), code: 9 }));
        assert!(matches!(check_text("f", "\u{85}", Controls::LineBreaks), Err(TextError::Control { code: 0x85, .. })));
        assert_eq!(check_text("f", "Zoë ✓", Controls::None), Ok(()));
    }

    #[test]
    fn free_text_is_bounded_by_characters() {
        assert_eq!(check_free_text("reason", &"é".repeat(1000), 1000), Ok(()));
        assert!(matches!(check_free_text("reason", &"é".repeat(1001), 1000), Err(TextError::TooLong { .. })));
    }

    #[test]
    fn every_string_and_key_of_a_body_is_checked_where_it_stands() {
        let body = json!({ "source": { "queue": "q\u{0}" } });
        assert_eq!(check_json(&body, ""), Err(TextError::Nul { field: "`source.queue`".into() }));
        let body = json!({ "acknowledged": ["ok", "\u{7}"] });
        assert!(
            matches!(check_json(&body, ""), Err(TextError::Control { code: 7, ref field }) if field == "`acknowledged[1]`")
        );
        let body = json!({ "a\u{1b}": 1 });
        assert!(matches!(check_json(&body, ""), Err(TextError::Control { code: 0x1b, .. })));
        assert_eq!(check_json(&json!({ "filter": "a = 1\n AND b = 2", "n": [1, null, true] }), ""), Ok(()));
    }

    #[test]
    fn a_shape_error_names_the_field() {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Inner {
            queue: String,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Outer {
            source: Inner,
        }
        let e = parse::<Outer>(br#"{"source": {"queue": "q", "adress": "a"}}"#).unwrap_err();
        assert_eq!((e.status, e.slug), (StatusCode::BAD_REQUEST, "invalid-request"));
        assert!(e.message.contains("`source.adress`"), "the words name the field: {}", e.message);
        let e = parse::<Outer>(b"{").unwrap_err();
        assert_eq!(e.slug, "invalid-request");
    }

    #[test]
    fn a_target_is_utf8_text_without_controls() {
        let check = |uri: &str| check_target(&uri.parse::<Uri>().unwrap());
        assert_eq!(check("/api/v1/clusters/east/targets?x=a+b&y=%C3%A9"), Ok(()));
        assert!(matches!(check("/api/v1/clusters/ea%00st/targets"), Err(TargetError::Text(TextError::Nul { .. }))));
        assert_eq!(check("/api/v1/runs/%FF"), Err(TargetError::NotUtf8("the path")));
        assert!(matches!(check("/api/v1/runs?state=%1B"), Err(TargetError::Text(TextError::Control { .. }))));
        assert_eq!(check("/api/v1/runs?state=%FE"), Err(TargetError::NotUtf8("the query")));
    }

    #[test]
    fn a_header_sent_twice_is_refused() {
        let mut headers = HeaderMap::new();
        assert!(single_header(&headers, "x-operator").unwrap().is_none());
        headers.append("x-operator", HeaderValue::from_static("alice"));
        assert_eq!(single_header(&headers, "x-operator").unwrap().unwrap(), "alice");
        headers.append("x-operator", HeaderValue::from_static("bob"));
        let e = single_header(&headers, "x-operator").unwrap_err();
        assert_eq!((e.status, e.slug), (StatusCode::BAD_REQUEST, "invalid-request"));
    }
}
