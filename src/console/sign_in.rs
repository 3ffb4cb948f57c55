//! The sign-in and sign-out pages (ADR 0014): the form that exchanges a service's API token and an operator's name
//! for a session ([`super::session`]), and the form that ends it.

use std::time::Instant;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;

use super::session::{self, Session};
use super::{ConsoleError, ConsoleState};
use crate::api::auth::{client_address, operator_name_fault};
use crate::api::limit::retry_after_secs;
use crate::api::tokens::token_digest;

/// `GET /console/sign-in`.
pub async fn sign_in_page(State(state): State<ConsoleState>, headers: HeaderMap) -> Response {
    match session::current(&state, &headers).await {
        Ok(Some(_)) => Redirect::to("/console/").into_response(),
        _ => super::pages::sign_in_form(StatusCode::OK, None, ""),
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
    match session::open(&state, &service.name, operator, &token_digest(form.token.trim())).await {
        Ok(cookie) => {
            let mut response = Redirect::to("/console/").into_response();
            response.headers_mut().insert(header::SET_COOKIE, cookie);
            response
        }
        Err(e) => e.into_response(),
    }
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
