//! The runtime settings (docs/settings.md), as the CLI's `settings` command does them: a change of a setting needs `admin`
//! on `*` — through the API on a fresh database too, where the command line would bootstrap (see
//! [`Bootstrap::Refused`]) — and is audited with the old and the new value.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::input::{single_header, ApiJson};
use super::ApiState;
use crate::jobs::admin::{self, Actor};
use crate::jobs::settings::{self, Changed};
use crate::jobs::store::record::SettingRow;
use crate::transfer::permissions::{self, Bootstrap, EVERY_CLUSTER};

/// The answer of `GET /api/v1/settings`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Settings {
    /// Every setting, by key.
    pub settings: Vec<SettingRow>,
}

/// `GET /api/v1/settings`: every setting with who changed it last and when.
#[utoipa::path(get, path = "/settings", operation_id = "listSettings", tags = ["settings"], summary = "Settings",
    description = "Every setting with who changed it last and when.",
    security(("bearer" = [])),
    responses((status = 200, description = "The settings", body = Settings)))]
pub async fn show(State(state): State<ApiState>, _caller: Caller) -> Result<Json<Settings>, ApiError> {
    let settings = settings::rows(&state.pool).await?;
    Ok(Json(Settings { settings }))
}

/// The body of `PUT /api/v1/settings/{key}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetBody {
    /// The new value: a number, a string in the CLI's words (`10m`, `64MiB`), a list of queue names, or null for
    /// none.
    #[schema(schema_with = new_value_schema)]
    pub value: Value,
}

/// The `{key}` of `PUT /api/v1/settings/{key}`: one of the settings' keys (`settings::KEYS`, which the change
/// checks against), so the document lists exactly the keys the service knows.
pub struct SettingKey;

impl utoipa::PartialSchema for SettingKey {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let keys = settings::KEYS.iter().map(|(key, _)| *key);
        ObjectBuilder::new().schema_type(Type::String).enum_values(Some(keys)).into()
    }
}

impl ToSchema for SettingKey {}

/// What [`SetBody::value`] takes: what a stored value may be, or a string in the CLI's words.
fn new_value_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let one_of = OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Number))
        .item(string())
        .item(ArrayBuilder::new().items(string()))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some("A number, a string in the CLI's words (`10m`, `64MiB`), a list of names, or null."))
        .build();
    Schema::OneOf(one_of)
}

/// A JSON value in the words `settings set` reads, so both take the same values with the same checks.
pub(crate) fn as_words(value: &Value) -> Result<String, ApiError> {
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
#[utoipa::path(put, path = "/settings/{key}", operation_id = "setSetting", tags = ["settings"],
    summary = "Change a setting",
    description = "Changes one setting (audited, validated against the whole set); answers the old and the new \
        value. Needs admin on *, on a fresh database too (its first admin comes from the command line or the SQL \
        path). With If-Match naming the setting's etag (from the list, or the last change's ETag), the change is \
        made only if nobody changed the setting since: otherwise 412.",
    params(
        ("key" = inline(SettingKey), Path, description = "The setting (docs/settings.md)"),
        ("If-Match" = Option<String>, Header,
            description = "The setting's etag as read (or *): change it only if it is still that value"),
    ),
    request_body = SetBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The old and the new value", body = Changed,
            headers(("ETag" = String, description = "The new value's tag, for the next change's If-Match"))),
        (status = 412, description = "The setting changed since the tag in If-Match was read \
            (precondition-failed)", body = Problem),
        (status = 400, description = "Not the call's JSON (invalid-request), a value of no setting's kind \
            (invalid-setting), or no X-Operator (no-operator)", body = Problem),
        (status = 403, description = "The operator lacks admin on * (missing-grant)", body = Problem),
        (status = 422, description = "No such setting, or the value is refused (invalid-setting)",
            body = Problem),
    ))]
pub async fn set(
    State(state): State<ApiState>,
    caller: Caller,
    Path(key): Path<String>,
    headers: HeaderMap,
    ApiJson(b): ApiJson<SetBody>,
) -> Result<([(HeaderName, HeaderValue); 1], Json<Changed>), ApiError> {
    let if_match = if_match(&headers)?;
    let words = as_words(&b.value)?;
    let target = format!("setting {key}");
    permissions::require_admin_audited(
        &state.pool,
        &caller.operator,
        EVERY_CLUSTER,
        Bootstrap::Refused,
        "settings.set",
        target,
        json!({ "text": words }),
    )
    .await?;
    let changed = admin::set_setting(&state.pool, &Actor(caller.operator), &key, &words, if_match.as_deref()).await?;
    let etag = HeaderValue::from_str(&changed.etag).map_err(|e| ApiError::internal("the setting's tag", &e))?;
    Ok(([(header::ETAG, etag)], Json(changed)))
}

/// The request's `If-Match`, sent once, as text.
fn if_match(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = single_header(headers, header::IF_MATCH.as_str())? else { return Ok(None) };
    let text = value
        .to_str()
        .map_err(|_| ApiError::bad_request("invalid-request", "If-Match must be visible ASCII: an etag, or *"))?;
    Ok(Some(text.to_string()))
}
