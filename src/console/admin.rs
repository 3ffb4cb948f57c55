//! Staging with no run (its return action) and Settings (admins only): the CLI's `orphans` and `settings`
//! commands, and the API's `/orphans` and `/settings`, as pages. The same library calls decide and audit; the
//! console's pool marks the audit rows "console".

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use serde::Deserialize;
use serde_json::json;

use super::pages::{form_urlencoded, some, Chrome};
use super::session::Session;
use super::{html, ConsoleError, ConsoleState};
use crate::api::request::to_the_end;
use crate::api::ApiError;
use crate::broker::permits::PermitSource;
use crate::jobs::admin::{self, Actor};
use crate::jobs::settings;
use crate::limiter::PgPermits;
use crate::transfer::orphans::{self, Orphan, ReturnRequest, Unchecked, RETURN_WARNING};
use crate::transfer::permissions::{self, Bootstrap, Permission, EVERY_CLUSTER};

/// One staging queue no run owns, and whether this operator may return it.
pub struct OrphanLine {
    orphan: Orphan,
    may_return: bool,
}

/// Staging with no run.
#[derive(Template)]
#[template(path = "staging.html")]
struct StagingPage {
    chrome: Chrome,
    orphans: Vec<OrphanLine>,
    unchecked: Vec<Unchecked>,
    /// Whether any node answered: with none, "no staging without a run" would claim what nobody said.
    answered: bool,
    warning: &'static str,
    form_token: String,
    notice: Option<String>,
    error: Option<String>,
}

/// Query of the staging page after a return (post/redirect/get).
#[derive(Debug, Default, Deserialize)]
pub struct StagingQuery {
    /// The staging queue returned.
    #[serde(default)]
    pub returned: String,
    /// How many messages went back.
    #[serde(default)]
    pub messages: String,
}

/// `GET /console/staging`: staging queues no live run owns, on the clusters the operator may see.
pub async fn staging(
    State(state): State<ConsoleState>,
    session: Session,
    Query(q): Query<StagingQuery>,
) -> Result<Response, ConsoleError> {
    let notice = some(&q.returned).map(|queue| format!("Returned {queue}: {} messages went back.", q.messages));
    let page = staging_page(&state, &session, notice, None).await?;
    Ok(html(page.render()))
}

fn permits(state: &ConsoleState) -> Arc<dyn PermitSource> {
    Arc::new(PgPermits::new(state.api.pool.clone()))
}

async fn staging_page(
    state: &ConsoleState,
    session: &Session,
    notice: Option<String>,
    error: Option<String>,
) -> Result<StagingPage, ConsoleError> {
    let pool = &state.api.pool;
    let found = orphans::list(pool, Some(permits(state)), &session.operator).await.map_err(ApiError::from)?;
    let mut lines = Vec::new();
    for orphan in found.orphans {
        let may_return =
            permissions::has_grant(pool, &session.operator, &orphan.cluster, Permission::MessageMove).await?;
        lines.push(OrphanLine { orphan, may_return });
    }
    Ok(StagingPage {
        chrome: Chrome::of(Some(session)),
        orphans: lines,
        unchecked: found.unchecked,
        answered: found.answered > 0,
        warning: RETURN_WARNING,
        form_token: session.form_token.clone(),
        notice,
        error,
    })
}

/// The return form of a staging queue.
#[derive(Debug, Deserialize)]
pub struct ReturnForm {
    /// The session's form token.
    pub form_token: String,
    pub cluster: String,
    pub node: String,
    pub queue: String,
    /// Where messages without an original queue go (blank: none named).
    #[serde(default)]
    pub to: String,
    /// The staging queue's name, typed.
    #[serde(default)]
    pub confirm: String,
}

/// `POST /console/staging/return`: a staging queue's messages back to the queues they came from, once its name is
/// typed; then the staging page again, saying how many went back. Refusals show the page with the reason.
pub async fn return_staging(
    State(state): State<ConsoleState>,
    session: Session,
    Form(form): Form<ReturnForm>,
) -> Result<Response, ConsoleError> {
    session.check_form_token(&form.form_token)?;
    if form.confirm.trim() != form.queue {
        let words = format!("Type the staging queue's name, {}, to confirm the return.", form.queue);
        return staging_refused(&state, &session, StatusCode::UNPROCESSABLE_ENTITY, words).await;
    }
    let request = ReturnRequest {
        cluster: form.cluster,
        node: form.node,
        queue: form.queue,
        to: some(&form.to).map(str::to_string),
        operator: session.operator.clone(),
    };
    // It moves messages: once begun it finishes, and audits itself, even when the request's deadline answers first.
    let (pool, permits) = (state.pool.clone(), permits(&state));
    let returned = to_the_end(async move { orphans::return_orphan(&pool, Some(permits), &request).await }).await?;
    match returned {
        Ok(r) => {
            let query = form_urlencoded(&[("returned", &r.queue), ("messages", &r.total().to_string())]);
            Ok(Redirect::to(&format!("/console/staging?{query}")).into_response())
        }
        Err(e) => {
            let e = ApiError::from(e);
            staging_refused(&state, &session, e.status, e.message).await
        }
    }
}

async fn staging_refused(
    state: &ConsoleState,
    session: &Session,
    status: StatusCode,
    words: String,
) -> Result<Response, ConsoleError> {
    let page = staging_page(state, session, None, Some(words)).await?;
    Ok((status, html(page.render())).into_response())
}

/// One setting as the page shows it.
pub struct SettingLine {
    key: String,
    /// Its value in the words the form takes back (`10m`, `64MiB`, a list joined by commas, `none`).
    value: String,
    updated_by: String,
    updated_at: String,
    etag: String,
}

/// Settings.
#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    chrome: Chrome,
    settings: Vec<SettingLine>,
    form_token: String,
    notice: Option<String>,
    error: Option<String>,
}

/// Query of the settings page after a change (post/redirect/get).
#[derive(Debug, Default, Deserialize)]
pub struct SettingsQuery {
    /// The setting changed.
    #[serde(default)]
    pub changed: String,
}

/// 404 unless the operator is an admin on every cluster: Settings is theirs alone (the API answers 403 to a
/// change; a page of buttons nobody else may press is not shown at all).
async fn require_settings_admin(state: &ConsoleState, session: &Session) -> Result<(), ConsoleError> {
    if permissions::has_grant(&state.api.pool, &session.operator, EVERY_CLUSTER, Permission::Admin).await? {
        Ok(())
    } else {
        Err(ConsoleError::not_found(format!(
            "Settings are for admins of every cluster (admin on *): {} is not one",
            session.operator
        )))
    }
}

/// `GET /console/settings`: every setting with who changed it last, each with its form (admins only).
pub async fn settings_page(
    State(state): State<ConsoleState>,
    session: Session,
    Query(q): Query<SettingsQuery>,
) -> Result<Response, ConsoleError> {
    require_settings_admin(&state, &session).await?;
    let notice = some(&q.changed).map(|key| format!("Changed {key}."));
    let page = settings_of(&state, &session, notice, None).await?;
    Ok(html(page.render()))
}

async fn settings_of(
    state: &ConsoleState,
    session: &Session,
    notice: Option<String>,
    error: Option<String>,
) -> Result<SettingsPage, ConsoleError> {
    let rows = settings::rows(&state.api.pool).await.map_err(ApiError::from)?;
    let mut lines = Vec::new();
    for row in rows {
        let value = crate::api::setting_words(&row.value)?;
        let updated_at = row.updated_at.format("%Y-%m-%d %H:%M:%S UTC").to_string();
        lines.push(SettingLine { key: row.key, value, updated_by: row.updated_by, updated_at, etag: row.etag });
    }
    Ok(SettingsPage {
        chrome: Chrome::of(Some(session)),
        settings: lines,
        form_token: session.form_token.clone(),
        notice,
        error,
    })
}

/// A setting's form.
#[derive(Debug, Deserialize)]
pub struct SettingForm {
    /// The session's form token.
    pub form_token: String,
    /// The new value, in the CLI's words.
    #[serde(default)]
    pub value: String,
    /// The setting's tag as the page showed it: the change is made only if nobody changed it since.
    #[serde(default)]
    pub etag: String,
}

/// `POST /console/settings/{key}`: one setting changed (admin on *, audited, validated against the whole set), only
/// if nobody changed it since the page was read; refusals show the page with the reason in words.
pub async fn set_setting(
    State(state): State<ConsoleState>,
    session: Session,
    Path(key): Path<String>,
    Form(form): Form<SettingForm>,
) -> Result<Response, ConsoleError> {
    session.check_form_token(&form.form_token)?;
    let value = form.value.trim();
    let allowed = permissions::require_admin_audited(
        &state.pool,
        &session.operator,
        EVERY_CLUSTER,
        Bootstrap::Refused,
        "settings.set",
        format!("setting {key}"),
        json!({ "text": value }),
    )
    .await;
    if let Err(e) = allowed {
        let e = ApiError::from(e);
        return Err(ConsoleError::new(e.status, e.message));
    }
    let etag = some(&form.etag);
    match admin::set_setting(&state.pool, &Actor(session.operator.clone()), &key, value, etag).await {
        Ok(_) => {
            Ok(Redirect::to(&format!("/console/settings?{}", form_urlencoded(&[("changed", &key)]))).into_response())
        }
        Err(e) => {
            let e = ApiError::from(e);
            let page = settings_of(&state, &session, None, Some(e.message)).await?;
            Ok((e.status, html(page.render())).into_response())
        }
    }
}
