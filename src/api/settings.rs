//! The runtime settings (SPEC §8), as the CLI's `settings` command does them: a change of a setting needs `admin`
//! on `*` (or nobody holding it yet) and is audited with the old and the new value.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Caller;
use super::error::ApiError;
use super::ApiState;
use crate::jobs::admin::{self, Actor};
use crate::jobs::settings;
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
