//! The sign-in and sign-out pages (ADR 0014): the form that exchanges a service's API token and an operator's name
//! for a session ([`super::session`]), and the form that ends it.

use std::time::Instant;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use super::session::{self, Proxied, Session};
use super::{ConsoleError, ConsoleState};
use crate::api::auth::{client_address, operator_name_fault};
use crate::api::limit::retry_after_secs;
use crate::api::tokens::token_digest;

/// `GET /console/sign-in`: the form; or, for a request a trusted proxy sends naming an operator (ADR 0021), their
/// session at once.
pub async fn sign_in_page(
    State(state): State<ConsoleState>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
) -> Response {
    match session::current(&state, &extensions, &headers).await {
        Ok(Some(_)) => Redirect::to("/console/").into_response(),
        _ => match session::proxied(&state, &extensions, &headers) {
            Proxied::Operator(operator) => proxy_sign_in(&state, &operator).await,
            Proxied::NoOperator => super::pages::sign_in_form(
                StatusCode::UNAUTHORIZED,
                Some("The proxy in front of the console named no operator (or not one valid name): sign in there."),
                "",
            ),
            Proxied::NotAsked => super::pages::sign_in_form(StatusCode::OK, None, ""),
        },
    }
}

/// A session for the operator a trusted proxy named, acting through the configured service: refused in words when
/// that service has no token in force or may not act for them.
async fn proxy_sign_in(state: &ConsoleState, operator: &str) -> Response {
    let Some(proxy) = &state.proxy else { return super::pages::sign_in_form(StatusCode::OK, None, "") };
    let Some((service, digest)) = state.api.tokens.current().named(&proxy.service) else {
        let words = format!(
            "The console signs in through service {} (api.console_operator_service), which has no token in force.",
            proxy.service
        );
        return ConsoleError::new(StatusCode::SERVICE_UNAVAILABLE, words).into_response();
    };
    if !service.may_act_for(operator) {
        let words = format!(
            "Service {} may not act for operator {operator}: its token names the operators it acts for.",
            service.name
        );
        return ConsoleError::new(StatusCode::FORBIDDEN, words).into_response();
    }
    signed_in(session::open(state, &service.name, operator, &digest, "proxy header").await)
}

/// To Transfers with the new session's cookie; or the page saying why no session was made.
fn signed_in(opened: Result<axum::http::HeaderValue, ConsoleError>) -> Response {
    match opened {
        Ok(cookie) => {
            let mut response = Redirect::to("/console/").into_response();
            response.headers_mut().insert(header::SET_COOKIE, cookie);
            response
        }
        Err(e) => e.into_response(),
    }
}

/// The sign-in form.
#[derive(Debug, Deserialize)]
pub struct SignIn {
    /// A service's API token.
    pub token: String,
    /// The operator it acts for.
    pub operator: String,
}

/// `POST /console/sign-in`: a known token and an operator its service may act for make a session; anything else
/// shows the form again, saying what was wrong (never the token).
pub async fn sign_in(
    State(state): State<ConsoleState>,
    extensions: axum::http::Extensions,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    let operator = form.operator.trim();
    let refuse = |status, words: &str| super::pages::sign_in_form(status, Some(words), operator);
    // Tokens guessed here are limited as the API's door limits requests without a known token: per client address
    // (a trusted proxy's X-Forwarded-For names it), checked before the token is hashed, charged when it is not known.
    let address = client_address(&state.api.limits, &extensions, &headers);
    let limit = &state.api.limits.unidentified;
    if let Err(wait) = limit.check(&address, Instant::now()) {
        let words = format!(
            "Too many sign-ins with unknown tokens came from this address: try again in {} s.",
            retry_after_secs(wait)
        );
        return refuse(StatusCode::TOO_MANY_REQUESTS, &words);
    }
    if let Some(why) = operator_name_fault(operator) {
        return refuse(StatusCode::BAD_REQUEST, &format!("The operator {why}."));
    }
    let Some(service) = state.api.tokens.current().identify(form.token.trim()) else {
        let _ = limit.take(&address, Instant::now());
        tracing::warn!(operator, "console sign-in refused: the token is not known");
        return refuse(StatusCode::UNAUTHORIZED, "That token is not known. Paste a service's API token.");
    };
    if !service.may_act_for(operator) {
        let words = format!(
            "Service {} may not act for operator {operator}: its token names the operators it acts for.",
            service.name
        );
        return refuse(StatusCode::FORBIDDEN, &words);
    }
    signed_in(session::open(&state, &service.name, operator, &token_digest(form.token.trim()), "token").await)
}

/// The sign-out form.
#[derive(Debug, Deserialize)]
pub struct SignOut {
    /// The session's form token.
    pub form_token: String,
}

/// `POST /console/sign-out`: the session row is deleted and the cookie cleared.
pub async fn sign_out(
    State(state): State<ConsoleState>,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<SignOut>,
) -> Result<Response, ConsoleError> {
    session.check_form_token(&form.form_token)?;
    let cleared = session::close(&state, &session, &headers).await?;
    let mut response = Redirect::to("/console/sign-in").into_response();
    if let Some(value) = cleared {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}
