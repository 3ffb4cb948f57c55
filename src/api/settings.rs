//! The runtime settings (SPEC §8) and the orphans (SPEC §2), as the CLI's `settings` and `orphans` commands do
//! them: a change of a setting needs `admin` on `*` (or nobody holding it yet) and is audited with the old and the
//! new value; an orphan's return needs `message:move` on its cluster and moves its messages before answering.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::ApiError;
use super::ApiState;
use crate::broker::permits::PermitSource;
use crate::jobs::admin::{self, Actor};
use crate::jobs::settings;
use crate::limiter::PgPermits;
use crate::transfer::orphans::{self, ReturnRequest, RETURN_WARNING};
use crate::transfer::permissions::{self, EVERY_CLUSTER};

/// `GET /api/v1/settings`: every setting with who changed it last and when.
pub async fn show(State(state): State<ApiState>, _caller: Caller) -> Result<Json<Value>, ApiError> {
    let rows = settings::rows(&state.pool).await?;
    Ok(Json(json!({ "settings": rows })))
}

/// The body of `PUT /api/v1/settings/{key}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetBody {
    /// The new value: a number, a string in the CLI's words (`10m`, `64MiB`), a list of queue names, or null for
    /// none.
    pub value: Value,
}

/// A JSON value in the words `settings set` reads, so both take the same values with the same checks.
fn as_words(value: &Value) -> Result<String, ApiError> {
    match value {
        Value::Null => Ok("none".into()),
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(|names| names.join(","))
            .ok_or_else(|| ApiError::bad_request("invalid-setting", "a list setting takes a list of names (strings)")),
        Value::Bool(_) | Value::Object(_) => {
            Err(ApiError::bad_request("invalid-setting", "a setting's value is a number, a string, a list or null"))
        }
    }
}

/// `PUT /api/v1/settings/{key}`: changes one setting (audited, validated against the whole set); answers the old
/// and the new value.
pub async fn set(
    State(state): State<ApiState>,
    caller: Caller,
    Path(key): Path<String>,
    request: Result<Json<SetBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = request?;
    let words = as_words(&b.value)?;
    let target = format!("setting {key}");
    permissions::require_admin_audited(
        &state.pool,
        &caller.operator,
        EVERY_CLUSTER,
        "settings.set",
        target,
        json!({ "text": words }),
    )
    .await?;
    let changed = admin::set_setting(&state.pool, &Actor(caller.operator), &key, &words).await?;
    Ok(Json(serde_json::to_value(&changed).expect("a change serialises")))
}

/// `GET /api/v1/orphans`: staging queues no run owns, on every node of the clusters the operator may see, and the
/// nodes that could not be asked (whether they hold orphans is then unknown).
pub async fn orphans(State(state): State<ApiState>, caller: Caller) -> Result<Json<orphans::Orphans>, ApiError> {
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(state.pool.clone()));
    Ok(Json(orphans::list(&state.pool, Some(permits), &caller.operator).await?))
}

/// The body of `POST /api/v1/orphans/return`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReturnOrphanBody {
    /// The orphan's cluster.
    pub cluster: String,
    /// Its node.
    pub node: String,
    /// The staging queue, `studio.transfer.<uuid>`.
    pub queue: String,
    /// Where messages without an original queue go (a queue on the same node).
    pub to: Option<String>,
    /// The staging queue's name, typed to confirm.
    pub confirm: Option<String>,
}

/// `POST /api/v1/orphans/return`: each message back to the queue it came from; the staging queue is then removed.
/// Answers what went where.
pub async fn return_orphan(
    State(state): State<ApiState>,
    caller: Caller,
    request: Result<Json<ReturnOrphanBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<orphans::Returned>, ApiError> {
    let Json(b) = request?;
    if b.confirm.as_deref() != Some(b.queue.as_str()) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "confirmation-required",
            format!(
                "{RETURN_WARNING} To return {}/{}/{}, type the staging queue's name: confirm: {}",
                b.cluster, b.node, b.queue, b.queue
            ),
        ));
    }
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(state.pool.clone()));
    let request =
        ReturnRequest { cluster: b.cluster, node: b.node, queue: b.queue, to: b.to, operator: caller.operator };
    Ok(Json(orphans::return_orphan(&state.pool, Some(permits), &request).await?))
}
