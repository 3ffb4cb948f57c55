//! Clusters, targets and previews: what the console shows before anything moves. A preview reads the brokers and
//! stores a Previewed run; nothing is changed on any broker.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::auth::Caller;
use super::error::ApiError;
use super::ApiState;
use crate::jobs::settings;
use crate::registry::store;
use crate::transfer::permissions;
use crate::transfer::service::{preview_and_store, targets_for, PreviewRequest};
use crate::transfer::{Mode, PreviewSettings, QueueRef, Selection};

/// `GET /api/v1/clusters`: the clusters the operator may see, with their nodes and endpoints (never the
/// credentials, not even their reference).
pub async fn clusters(State(state): State<ApiState>, caller: Caller) -> Result<Json<serde_json::Value>, ApiError> {
    let mut shown = Vec::new();
    for cluster in store::list(&state.pool).await? {
        if permissions::can_see(&state.pool, &caller.operator, &cluster.name).await? {
            shown.push(json!({ "name": cluster.name, "nodes": cluster.nodes }));
        }
    }
    Ok(Json(json!({ "clusters": shown })))
}

/// `GET /api/v1/clusters/{cluster}/targets`: where a transfer from `cluster` could go; those the operator may not
/// send to are listed disabled, with the missing grant in words.
pub async fn targets(
    State(state): State<ApiState>,
    caller: Caller,
    Path(cluster): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let targets = targets_for(&state.pool, &caller.operator, &cluster).await?;
    Ok(Json(json!({ "source_cluster": cluster, "targets": targets })))
}

/// The body of `POST /api/v1/previews`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewBody {
    /// `move` (default) or `copy`.
    #[serde(default = "default_mode")]
    pub mode: Mode,
    /// `{cluster, node, queue}` of the source.
    pub source: QueueRef,
    /// `{cluster, node, queue}` of the target.
    pub target: QueueRef,
    /// `{"kind": "all"}`, `{"kind": "filter", "value": "<selector>"}` or `{"kind": "ids", "value": [..]}`.
    pub selection: Selection,
}

fn default_mode() -> Mode {
    Mode::Move
}

/// `POST /api/v1/previews`: 201 with the stored preview — its run id, plan, plan hash, findings (each in words,
/// with its fix) and expiry — whether or not the findings allow the run to start (`can_start` says). Execute
/// needs the plan hash back.
pub async fn preview(
    State(state): State<ApiState>,
    caller: Caller,
    body: Result<Json<PreviewBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    check_selection(&body.selection)?;
    let current = settings::load(&state.pool).await?;
    let preview_settings = PreviewSettings {
        batch_size: i64::from(current.batch_size),
        capacity_threshold_pct: i64::from(current.capacity_threshold_pct),
        safety_cap: i64::try_from(current.safety_cap).unwrap_or(i64::MAX),
    };
    let request = PreviewRequest {
        mode: body.mode,
        source: body.source,
        target: body.target,
        selection: body.selection,
        operator: caller.operator,
    };
    let stored = preview_and_store(&state.pool, &request, &preview_settings, state.preview_valid_for).await?;
    let mut answer = serde_json::to_value(&stored).expect("a stored preview serialises");
    answer["can_start"] = json!(stored.preview.can_start());
    let location = format!("/api/v1/runs/{}", stored.run_id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(answer)).into_response())
}

/// A selection the library would take but no operator means: an empty id list or filter.
fn check_selection(selection: &Selection) -> Result<(), ApiError> {
    match selection {
        Selection::Ids(ids) if ids.is_empty() => {
            Err(ApiError::bad_request("invalid-selection", "the selection names no message ids"))
        }
        Selection::Filter(f) if f.trim().is_empty() => Err(ApiError::bad_request(
            "invalid-selection",
            "the filter is empty: to take the whole queue, send {\"kind\": \"all\"}",
        )),
        _ => Ok(()),
    }
}
