//! Who calls the API (SPEC §10): a **service** that presents a bearer token, acting for an **operator** it names.
//!
//! The tokens are secrets, so they come from the environment only — `ARTEMIS_TRANSFER_API_TOKENS`, a comma-separated
//! list of `service=token` pairs, e.g. `studio=…,ops-bot=…` — never from a configuration file, and they are never
//! logged. Only their SHA-256 digests are kept in memory, and a presented token is compared with every digest in
//! time that does not depend on where they differ.
//!
//! The operator comes in the `X-Operator` header: it is who the grants are checked against and who the audit
//! names (the service vouches for them, as the Studio backend does on the SQL path). The service's name goes into
//! the log line of every request, so an audit row can be traced to the service that made it.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::input::single_header;
use super::ApiState;

/// The environment variable holding the service tokens.
pub const TOKENS_ENV: &str = "ARTEMIS_TRANSFER_API_TOKENS";

/// The environment variable holding the token a scrape of `/metrics` must present; unset, `/metrics` is open.
/// It is not a service token: a scraper's token sits in a Prometheus configuration and must not act for anyone,
/// and a service has no business scraping.
pub const METRICS_TOKEN_ENV: &str = "ARTEMIS_TRANSFER_METRICS_TOKEN";

/// The header naming the operator a call acts for.
pub const OPERATOR_HEADER: &str = "x-operator";

/// The longest operator name (the document says it too).
pub const MAX_OPERATOR_CHARS: usize = 200;

/// Tokens shorter than this are refused at start: a bearer token must not be guessable.
const MIN_TOKEN_CHARS: usize = 24;

/// The services that may call, each by the digest of its token.
#[derive(Clone)]
pub struct ServiceTokens {
    services: Vec<(String, [u8; 32])>,
}

impl std::fmt::Debug for ServiceTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.services.iter().map(|(s, _)| s.as_str()).collect();
        f.debug_struct("ServiceTokens").field("services", &names).finish_non_exhaustive()
    }
}

/// Why the tokens cannot be used; the words never repeat a token.
#[derive(Debug, thiserror::Error)]
pub enum TokensError {
    /// None set.
    #[error(
        "no API tokens: set {TOKENS_ENV} to service=token pairs, e.g. {TOKENS_ENV}=studio=$(openssl rand -hex 32)"
    )]
    None,
    /// A pair is not `service=token`.
    #[error("{TOKENS_ENV}: entry {0} is not service=token")]
    Malformed(usize),
    /// A token is too short.
    #[error("{TOKENS_ENV}: the token of service {service} is shorter than {MIN_TOKEN_CHARS} characters")]
    Short {
        /// The service.
        service: String,
    },
    /// Two services share a name or a token.
    #[error("{TOKENS_ENV}: {0}")]
    Duplicate(String),
    /// The metrics token is too short.
    #[error("{METRICS_TOKEN_ENV} is shorter than {MIN_TOKEN_CHARS} characters")]
    ShortMetrics,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl ServiceTokens {
    /// Parses `service=token,service=token`.
    pub fn parse(text: &str) -> Result<ServiceTokens, TokensError> {
        let mut services: Vec<(String, [u8; 32])> = Vec::new();
        for (i, entry) in text.split(',').map(str::trim).filter(|e| !e.is_empty()).enumerate() {
            let (service, token) = entry.split_once('=').ok_or(TokensError::Malformed(i + 1))?;
            let (service, token) = (service.trim(), token.trim());
            if service.is_empty() || token.is_empty() {
                return Err(TokensError::Malformed(i + 1));
            }
            if token.chars().count() < MIN_TOKEN_CHARS {
                return Err(TokensError::Short { service: service.into() });
            }
            let d = digest(token);
            if services.iter().any(|(s, _)| s == service) {
                return Err(TokensError::Duplicate(format!("service {service} is named twice")));
            }
            if services.iter().any(|(_, other)| *other == d) {
                return Err(TokensError::Duplicate(format!("service {service} shares its token with another")));
            }
            services.push((service.to_string(), d));
        }
        if services.is_empty() {
            return Err(TokensError::None);
        }
        Ok(ServiceTokens { services })
    }

    /// From [`TOKENS_ENV`].
    pub fn from_env() -> Result<ServiceTokens, TokensError> {
        ServiceTokens::parse(&std::env::var(TOKENS_ENV).unwrap_or_default())
    }

    /// The token `/metrics` asks for, from [`METRICS_TOKEN_ENV`]; `None` when it is unset or empty.
    pub fn metrics_from_env() -> Result<Option<ServiceTokens>, TokensError> {
        let token = std::env::var(METRICS_TOKEN_ENV).unwrap_or_default();
        ServiceTokens::metrics(token.trim())
    }

    /// `token` as the one token of a scraper (none when empty).
    fn metrics(token: &str) -> Result<Option<ServiceTokens>, TokensError> {
        match token.chars().count() {
            0 => Ok(None),
            n if n < MIN_TOKEN_CHARS => Err(TokensError::ShortMetrics),
            _ => Ok(Some(ServiceTokens { services: vec![("metrics".into(), digest(token))] })),
        }
    }

    /// The service whose token `presented` is. Every digest is compared in full, whatever matches.
    pub fn service_of(&self, presented: &str) -> Option<&str> {
        let d = digest(presented);
        let mut found = None;
        for (service, known) in &self.services {
            let differing = known.iter().zip(d.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if differing == 0 {
                found = Some(service.as_str());
            }
        }
        found
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
        let token = bearer_token(&parts.headers)?;
        let service = state.tokens.service_of(token).ok_or_else(|| unauthenticated("the token is not known"))?;
        let operator = operator(&parts.headers)?;
        tracing::debug!(service, operator, "API caller");
        Ok(Caller { service: service.to_string(), operator: operator.to_string() })
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

/// The operator the one `X-Operator` header names: printable US-ASCII of at most [`MAX_OPERATOR_CHARS`]. Non-ASCII
/// bytes are refused rather than guessed at: RFC 9110 §5.5 makes a field value ASCII (other octets are opaque
/// data, in no defined encoding), so "jürgen" could arrive as UTF-8 or Latin-1 and name two people.
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
    if operator.chars().any(char::is_control) {
        return Err(invalid("must be printable text, without control characters such as a tab"));
    }
    if operator.len() > MAX_OPERATOR_CHARS {
        return Err(invalid(&format!("must be at most {MAX_OPERATOR_CHARS} characters")));
    }
    Ok(operator)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn tokens_name_their_service() {
        let t = ServiceTokens::parse(&format!("studio={A}, ops = {B}")).unwrap();
        assert_eq!(t.service_of(A), Some("studio"));
        assert_eq!(t.service_of(B), Some("ops"));
        assert_eq!(t.service_of("aaaa"), None);
        assert_eq!(t.service_of(""), None);
    }

    #[test]
    fn bad_token_lists_are_refused_without_repeating_a_token() {
        for (text, words) in [
            ("", "no API tokens"),
            ("studio", "entry 1 is not service=token"),
            ("studio=tiny-token", "shorter than 24"),
            (&format!("a={A},a={B}") as &str, "named twice"),
            (&format!("a={A},b={A}"), "shares its token"),
        ] {
            let e = ServiceTokens::parse(text).unwrap_err().to_string();
            assert!(e.contains(words), "{text}: {e}");
            assert!(!e.contains(A) && !e.contains("tiny-token"), "{e}");
        }
        let debug = format!("{:?}", ServiceTokens::parse(&format!("studio={A}")).unwrap());
        assert!(debug.contains("studio") && !debug.contains(A), "{debug}");
    }

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

    #[test]
    fn a_metrics_token_is_optional_and_long() {
        assert!(ServiceTokens::metrics("").unwrap().is_none());
        assert!(matches!(ServiceTokens::metrics("short"), Err(TokensError::ShortMetrics)));
        let t = ServiceTokens::metrics(A).unwrap().unwrap();
        assert_eq!(t.service_of(A), Some("metrics"));
        assert_eq!(t.service_of(B), None);
    }
}
