//! Sign-in (ADR 0014): an operator pastes a service's API token and names the operator it acts for; the console
//! checks them as the API does (a known token, an operator the service may act for) and keeps a session row in
//! Postgres ([`super::store`]). The browser holds only the session's random id, in an `HttpOnly; SameSite=Strict;
//! Path=/` cookie (`Secure` and `__Host-` prefixed under TLS); the row holds the id's SHA-256, the operator, the
//! token's digest and the form token. A session ends at its idle or absolute expiry, at sign-out, and as soon as
//! the token it was made with is no longer in force.
//!
//! Or (ADR 0021) a reverse proxy that authenticates people itself names the operator in a configured header; it is
//! believed only from the configured proxies' addresses ([`proxied`]), and the session it opens acts through a
//! configured service.

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{header, Extensions, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::store::{self, NewSession};
use super::{ConsoleError, ConsoleState};
use crate::api::auth::operator_name_fault;
use crate::transfer::audit::{audit_logged, AuditEntry};

/// The session cookie's name over plain HTTP.
pub const COOKIE: &str = "at_console";
/// Its name under TLS: the `__Host-` prefix makes the browser refuse it unless `Secure`, `Path=/` and host-only.
pub const SECURE_COOKIE: &str = "__Host-at_console";

/// A signed-in operator, as every console handler gets them (checked again at every request).
#[derive(Debug, Clone)]
pub struct Session {
    /// The service whose token signed in.
    pub service: String,
    /// The operator: whose grants decide, whom the audit names.
    pub operator: String,
    /// The token every form of this session carries.
    pub form_token: String,
}

impl Session {
    /// `Ok` when a form carries this session's form token (compared in full, in time that does not depend on where
    /// they differ); 403 otherwise.
    pub fn check_form_token(&self, sent: &str) -> Result<(), ConsoleError> {
        let (a, b) = (self.form_token.as_bytes(), sent.as_bytes());
        let differing = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
        if a.len() == b.len() && differing == 0 {
            Ok(())
        } else {
            Err(ConsoleError::new(
                StatusCode::FORBIDDEN,
                "refused: the form does not carry this session's form token; reload the page and send it again",
            ))
        }
    }
}

/// The cookie's name for `state`.
fn cookie_name(state: &ConsoleState) -> &'static str {
    if state.tls {
        SECURE_COOKIE
    } else {
        COOKIE
    }
}

/// The value of the cookie `name` in the request's `Cookie` headers.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value)
}

/// The SHA-256 of a session id: what the table keeps.
fn id_hash(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// 256 random bits, URL-safe base64.
fn random_token() -> Result<String, ConsoleError> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).map_err(|e| {
        tracing::error!(error = %e, "the console could not draw random bytes for a session");
        ConsoleError::new(StatusCode::SERVICE_UNAVAILABLE, "the service could not make a session; try again")
    })?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// What a trusted proxy says of a request (ADR 0021): nothing unless proxy sign-in is configured and the request's
/// TCP peer is one of its proxies — a header from anywhere else is ignored, whatever it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxied {
    /// Not from a configured proxy (or none is configured): the header is not read.
    NotAsked,
    /// From a proxy, which names no operator (one header, a valid name) or one that is not valid.
    NoOperator,
    /// From a proxy, naming this operator.
    Operator(String),
}

/// What the proxy that sent this request (if it is one) says of who is signed in.
pub fn proxied(state: &ConsoleState, extensions: &Extensions, headers: &HeaderMap) -> Proxied {
    let Some(proxy) = &state.proxy else { return Proxied::NotAsked };
    let peer = extensions.get::<ConnectInfo<crate::api::PeerAddr>>().map(|c| c.0 .0.ip());
    if !peer.is_some_and(|peer| proxy.peers.trusts(peer)) {
        return Proxied::NotAsked;
    }
    let mut values = headers.get_all(&proxy.header).iter();
    let (Some(value), None) = (values.next(), values.next()) else { return Proxied::NoOperator };
    match value.to_str().map(str::trim) {
        Ok(name) if operator_name_fault(name).is_none() => Proxied::Operator(name.to_string()),
        _ => Proxied::NoOperator,
    }
}

/// The session of a request, if it has one in force. A session whose token was removed (or whose service may no
/// longer act for its operator) is ended here. Through a trusted proxy, a session is honoured only for the
/// operator the proxy names now (another person at the same browser is not the session's operator).
pub async fn current(
    state: &ConsoleState,
    extensions: &Extensions,
    headers: &HeaderMap,
) -> Result<Option<Session>, ConsoleError> {
    let Some(id) = cookie(headers, cookie_name(state)) else { return Ok(None) };
    let hash = id_hash(id);
    let Some(row) = store::console_session_touch(&state.pool, &hash, state.idle.as_secs_f64()).await? else {
        return Ok(None);
    };
    match proxied(state, extensions, headers) {
        Proxied::NotAsked => {}
        Proxied::Operator(named) if named == row.operator => {}
        Proxied::Operator(_) | Proxied::NoOperator => return Ok(None),
    }
    let service = state.api.tokens.current().identify_digest(&row.token_digest);
    let in_force = service.is_some_and(|s| s.name == row.service && s.may_act_for(&row.operator));
    if !in_force {
        store::console_session_delete(&state.pool, &hash).await?;
        return Ok(None);
    }
    Ok(Some(Session { service: row.service, operator: row.operator, form_token: row.form_token }))
}

impl FromRequestParts<ConsoleState> for Session {
    type Rejection = Response;

    /// The request's session; without one, a redirect to the sign-in page (a link followed from elsewhere arrives
    /// without the `SameSite=Strict` cookie: the sign-in page says what to do, it is not an error).
    async fn from_request_parts(parts: &mut Parts, state: &ConsoleState) -> Result<Session, Response> {
        match current(state, &parts.extensions, &parts.headers).await {
            Ok(Some(session)) => Ok(session),
            Ok(None) => Err(Redirect::to("/console/sign-in").into_response()),
            Err(e) => Err(e.into_response()),
        }
    }
}

/// Makes a session for `operator` acting through `service`; audits it; answers its `Set-Cookie`.
pub(super) async fn open(
    state: &ConsoleState,
    service: &str,
    operator: &str,
    token_digest: &[u8],
    how: &'static str,
) -> Result<HeaderValue, ConsoleError> {
    let id = random_token()?;
    let form_token = random_token()?;
    let hash = id_hash(&id);
    let expired = store::console_session_expire(&state.pool).await?;
    tracing::debug!(expired, "console sessions past their expiry removed");
    let row = NewSession {
        id_hash: &hash,
        service,
        operator,
        token_digest,
        form_token: &form_token,
        idle_secs: state.idle.as_secs_f64(),
        absolute_secs: state.absolute.as_secs_f64(),
    };
    store::console_session_insert(&state.pool, &row).await?;
    audit(state, operator, "console.sign_in", json!({ "service": service, "by": how })).await;
    let cookie = format!("{}={id}; {}", cookie_name(state), attributes(state, state.absolute.as_secs()));
    HeaderValue::from_str(&cookie).map_err(|_| ConsoleError::new(StatusCode::INTERNAL_SERVER_ERROR, "no cookie"))
}

/// The cookie's attributes, living `max_age` seconds.
fn attributes(state: &ConsoleState, max_age: u64) -> String {
    let secure = if state.tls { "; Secure" } else { "" };
    format!("HttpOnly; SameSite=Strict; Path=/; Max-Age={max_age}{secure}")
}

/// Ends the session the request's cookie names (its row deleted), audited; answers the `Set-Cookie` that clears
/// the cookie.
pub(super) async fn close(
    state: &ConsoleState,
    session: &Session,
    headers: &HeaderMap,
) -> Result<Option<HeaderValue>, ConsoleError> {
    if let Some(id) = cookie(headers, cookie_name(state)) {
        store::console_session_delete(&state.pool, &id_hash(id)).await?;
    }
    audit(state, &session.operator, "console.sign_out", json!({ "service": session.service })).await;
    Ok(HeaderValue::from_str(&format!("{}=; {}", cookie_name(state), attributes(state, 0))).ok())
}

/// An audit row of a console act that is not one of the run actions (those write their own).
async fn audit(state: &ConsoleState, operator: &str, action: &str, detail: serde_json::Value) {
    let entry = AuditEntry {
        actor: operator,
        action,
        target: format!("operator:{operator}"),
        outcome: "ok",
        detail,
        source_cluster: None,
        target_cluster: None,
    };
    audit_logged(&state.pool, &entry).await;
}
