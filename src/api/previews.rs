//! Clusters, targets and previews: what the console shows before anything moves. A preview reads the brokers and
//! stores a Previewed run; nothing is changed on any broker.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::input::ApiJson;
use super::ApiState;
use crate::jobs::settings;
use crate::registry::{store, ClusterNode};
use crate::transfer::permissions;
use crate::transfer::retry::preview_retry_and_store;
use crate::transfer::service::{preview_and_store, targets_for, PreviewRequest, StoredPreview, Target};
use crate::transfer::{Mode, PreviewSettings, QueueRef, Selection};

/// A cluster as a caller sees it: never its credentials, not even their reference.
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterShown {
    /// Its registered name.
    pub name: String,
    /// Its nodes, with their endpoints.
    pub nodes: Vec<ClusterNode>,
}

/// The answer of `GET /api/v1/clusters`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Clusters {
    /// The clusters the operator may see.
    pub clusters: Vec<ClusterShown>,
}

/// `GET /api/v1/clusters`: the clusters the operator may see, with their nodes and endpoints (never the
/// credentials, not even their reference).
#[utoipa::path(get, path = "/clusters", operation_id = "listClusters", tags = ["clusters"], summary = "Clusters",
    description = "The registered clusters the operator may see, with their nodes and endpoints (never credentials).",
    security(("bearer" = [])),
    responses((status = 200, description = "The clusters", body = Clusters)))]
pub async fn clusters(State(state): State<ApiState>, caller: Caller) -> Result<Json<Clusters>, ApiError> {
    let mut clusters = Vec::new();
    for cluster in store::list(&state.pool).await? {
        if permissions::can_see(&state.pool, &caller.operator, &cluster.name).await? {
            clusters.push(ClusterShown { name: cluster.name, nodes: cluster.nodes });
        }
    }
    Ok(Json(Clusters { clusters }))
}

/// The answer of `GET /api/v1/clusters/{cluster}/targets`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Targets {
    /// The cluster asked about.
    pub source_cluster: String,
    /// Every cluster the operator may see; those they may not send to are disabled, with the reason.
    pub targets: Vec<Target>,
}

/// `GET /api/v1/clusters/{cluster}/targets`: where a transfer from `cluster` could go; those the operator may not
/// send to are listed disabled, with the missing grant in words.
#[utoipa::path(get, path = "/clusters/{cluster}/targets", operation_id = "listTargets", tags = ["clusters"],
    summary = "Targets",
    description = "Where a transfer from the cluster could go; those the operator may not send to are listed \
        disabled, with the missing grant in words.",
    params(("cluster" = String, Path, description = "The source cluster's registered name")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The targets", body = Targets),
        (status = 404, description = "No such cluster, or one the operator may not see (not-found)",
            body = Problem),
    ))]
pub async fn targets(
    State(state): State<ApiState>,
    caller: Caller,
    Path(cluster): Path<String>,
) -> Result<Json<Targets>, ApiError> {
    let targets = targets_for(&state.pool, &caller.operator, &cluster).await?;
    Ok(Json(Targets { source_cluster: cluster, targets }))
}

/// The body of `POST /api/v1/previews`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "mode": "move",
    "source": { "cluster": "east", "node": "east-1", "queue": "orders" },
    "target": { "cluster": "west", "node": "west-1", "queue": "orders" },
    "selection": { "kind": "filter", "value": "region = 'eu'" }
}))]
pub struct PreviewBody {
    /// `move` (default) or `copy`.
    #[serde(default = "default_mode")]
    #[schema(default = "move")]
    pub mode: Mode,
    /// `{cluster, node, queue}` of the source.
    pub source: QueueBody,
    /// `{cluster, node, queue}` of the target; absent for a retry to the original queues.
    #[serde(default)]
    pub target: Option<QueueBody>,
    /// A retry from a dead-letter queue: each selected message goes back to the queue it was dead-lettered or
    /// expired from (`_AMQ_ORIG_QUEUE`), on the source's node; a move, without a `target`.
    #[serde(default)]
    pub to_original_queues: bool,
    /// `{"kind": "all"}`, `{"kind": "filter", "value": "<selector>"}` or `{"kind": "ids", "value": [..]}`.
    pub selection: SelectionBody,
}

/// A preview says where the messages go — a `target`, or `to_original_queues` on a move — as `preview` refuses
/// anything else: written into the document's `PreviewBody` (utoipa has no attribute for it), so a client
/// generating bodies from the document sends none that is refused for a rule it could not read.
pub(super) fn where_messages_go(doc: &mut serde_json::Value) {
    let to_a_target = serde_json::json!({
        "required": ["target"],
        "properties": {
            "target": { "$ref": "#/components/schemas/QueueBody" },
            "to_original_queues": { "const": false },
        },
    });
    let back_where_they_were = serde_json::json!({
        "required": ["to_original_queues"],
        "properties": { "to_original_queues": { "const": true }, "target": { "type": "null" }, "mode": { "const": "move" } },
    });
    doc["components"]["schemas"]["PreviewBody"]["oneOf"] = serde_json::json!([to_a_target, back_where_they_were]);
}

/// A queue as a caller names it: the library's `QueueRef`, which also reads stored plans (so it takes unknown
/// fields there), refusing any field it does not know here — a misspelt `adress` must not be silently dropped.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueBody {
    /// The cluster's registered name.
    pub cluster: String,
    /// The node's name within the cluster.
    pub node: String,
    /// The queue (an anycast queue on the address of the same name unless `address` says otherwise).
    pub queue: String,
    /// The queue's address, when it differs from the queue's name.
    #[serde(default)]
    pub address: Option<String>,
}

impl From<QueueBody> for QueueRef {
    fn from(q: QueueBody) -> QueueRef {
        QueueRef { cluster: q.cluster, node: q.node, queue: q.queue, address: q.address }
    }
}

/// Which messages, as a caller says it: the library's `Selection`, with no field beside `kind` and `value`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value", deny_unknown_fields)]
pub enum SelectionBody {
    /// Broker message ids: each positive, each once.
    Ids(MessageIds),
    /// An Artemis core selector.
    Filter(FilterText),
    /// The whole queue.
    All,
}

/// An Artemis core selector: text with at least one character that is not white space.
#[derive(Debug, Deserialize)]
pub struct FilterText(pub String);

impl utoipa::PartialSchema for FilterText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        // Body text (no control character but line breaks and tab) holding one character that is neither white
        // space nor a control character.
        let pattern = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*\
            [^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$";
        ObjectBuilder::new().schema_type(Type::String).min_length(Some(1)).pattern(Some(pattern)).into()
    }
}

impl ToSchema for FilterText {}

/// Broker message ids (Artemis numbers its messages from 1).
#[derive(Debug)]
pub struct MessageIds(pub Vec<i64>);

/// Whole numbers, as JSON Schema's `integer` has them: `7.0` is 7 (a client's JSON library may write it so).
impl<'de> Deserialize<'de> for MessageIds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<MessageIds, D::Error> {
        let numbers = Vec::<serde_json::Number>::deserialize(deserializer)?;
        let ids: Option<Vec<i64>> = numbers.iter().map(whole_number).collect();
        ids.map(MessageIds).ok_or_else(|| serde::de::Error::custom("a message id is a whole number"))
    }
}

/// `n` as an i64 when it is a whole number that fits (a float beyond 2^53 is not exact, so not taken).
fn whole_number(n: &serde_json::Number) -> Option<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() <= EXACT).map(|f| f as i64))
}

/// What [`selection`] takes: at least one id, each at least 1, none twice.
impl utoipa::PartialSchema for MessageIds {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, KnownFormat, ObjectBuilder, SchemaFormat, Type};
        let id = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(1));
        ArrayBuilder::new().items(id).min_items(Some(1)).unique_items(true).into()
    }
}

impl ToSchema for MessageIds {}

fn default_mode() -> Mode {
    Mode::Move
}

/// `POST /api/v1/previews`: 201 with the stored preview — its run id, plan, plan hash, findings (each in words,
/// with its fix) and expiry — whether or not the findings allow the run to start (`can_start` says). Execute
/// needs the plan hash back.
#[utoipa::path(post, path = "/previews", operation_id = "createPreview", tags = ["previews"],
    summary = "Preview a move or copy",
    description = "Reads the brokers and stores a Previewed run: its plan, plan hash, findings (each in words, with \
        its fix) and expiry, whether or not the findings allow it to start (`can_start`). Nothing moves.",
    request_body = PreviewBody,
    security(("bearer" = [])),
    responses(
        (status = 201, description = "The stored preview", body = PreviewAnswer,
            headers(("Location" = String, description = "The run's address: /api/v1/runs/{run}"))),
        (status = 400, description = "Not the call's JSON (invalid-request), an empty selection \
            (invalid-selection), or no X-Operator (no-operator)", body = Problem),
        (status = 403, description = "The operator lacks a grant (missing-grant)", body = Problem),
        (status = 404, description = "No such cluster or node, or one the operator may not see (not-found)",
            body = Problem),
        (status = 409, description = "The registry disagrees (conflict)", body = Problem),
        (status = 422, description = "The cluster's credentials are not set (missing-credentials)", body = Problem),
        (status = 502, description = "A broker's management could not be asked (discovery)", body = Problem),
    ))]
pub async fn preview(
    State(state): State<ApiState>,
    caller: Caller,
    ApiJson(body): ApiJson<PreviewBody>,
) -> Result<Response, ApiError> {
    let selection = selection(body.selection)?;
    let current = settings::load(&state.pool).await?;
    let preview_settings = PreviewSettings::from_settings(&current);
    let source = QueueRef::from(body.source);
    let target = match (body.target, body.to_original_queues, body.mode) {
        (Some(target), false, _) => target.into(),
        (None, true, Mode::Move) => source.clone(),
        (None, false, _) => {
            return Err(ApiError::bad_request(
                "invalid-request",
                "say where the messages go: a `target`, or `to_original_queues`",
            ))
        }
        (Some(_), true, _) => {
            return Err(ApiError::bad_request("invalid-request", "a `target` or `to_original_queues`, not both"))
        }
        (None, true, Mode::Copy) => {
            return Err(ApiError::bad_request(
                "invalid-request",
                "a retry to the original queues is a move, not a copy",
            ))
        }
    };
    let request = PreviewRequest { mode: body.mode, source, target, selection, operator: caller.operator };
    let stored = if body.to_original_queues {
        preview_retry_and_store(&state.pool, &request, &preview_settings, state.preview_valid_for).await?
    } else {
        preview_and_store(&state.pool, &request, &preview_settings, state.preview_valid_for).await?
    };
    let location = format!("/api/v1/runs/{}", stored.run_id);
    let answer = PreviewAnswer { can_start: stored.preview.can_start(), stored };
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(answer)).into_response())
}

/// The answer of `POST /api/v1/previews`: the stored preview and whether its findings let it start.
#[derive(Debug, Serialize, ToSchema)]
pub struct PreviewAnswer {
    /// The stored preview.
    #[serde(flatten)]
    pub stored: StoredPreview,
    /// No finding refuses the run.
    pub can_start: bool,
}

/// The library's selection, refusing what it would take but no operator means: an empty id list or filter,
/// an id that is not a message's (below 1), an id named twice.
fn selection(body: SelectionBody) -> Result<Selection, ApiError> {
    let invalid = |words: &str| Err(ApiError::bad_request("invalid-selection", words));
    match body {
        SelectionBody::Ids(MessageIds(ids)) if ids.is_empty() => invalid("the selection names no message ids"),
        SelectionBody::Ids(MessageIds(ids)) if ids.iter().any(|id| *id < 1) => {
            invalid("a message id is a positive number: the selection names one below 1")
        }
        SelectionBody::Ids(MessageIds(ids)) if has_duplicates(&ids) => {
            invalid("the selection names a message id more than once")
        }
        SelectionBody::Ids(MessageIds(ids)) => Ok(Selection::Ids(ids)),
        SelectionBody::Filter(FilterText(f)) if f.trim().is_empty() => {
            invalid("the filter is empty: to take the whole queue, send {\"kind\": \"all\"}")
        }
        SelectionBody::Filter(FilterText(f)) => Ok(Selection::Filter(f)),
        SelectionBody::All => Ok(Selection::All),
    }
}

fn has_duplicates(ids: &[i64]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    !ids.iter().all(|id| seen.insert(*id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selection_of(value: serde_json::Value) -> Result<Selection, ApiError> {
        let body: SelectionBody =
            serde_json::from_value(value).map_err(|e| ApiError::bad_request("invalid-request", e.to_string()))?;
        selection(body)
    }

    #[test]
    fn message_ids_are_whole_positive_and_named_once() {
        assert_eq!(selection_of(json!({ "kind": "ids", "value": [3, 7.0] })).unwrap(), Selection::Ids(vec![3, 7]));
        for (ids, slug) in [
            (json!([1, 1]), "invalid-selection"),
            (json!([0]), "invalid-selection"),
            (json!([-4]), "invalid-selection"),
            (json!([]), "invalid-selection"),
            (json!([1.5]), "invalid-request"),
            (json!([1e300]), "invalid-request"),
        ] {
            let e = selection_of(json!({ "kind": "ids", "value": ids })).unwrap_err();
            assert_eq!((e.status, e.slug), (StatusCode::BAD_REQUEST, slug), "{ids}");
        }
        let e = selection_of(json!({ "kind": "all", "limit": 5 })).unwrap_err();
        assert_eq!(e.slug, "invalid-request");
        assert_eq!(selection_of(json!({ "kind": "filter", "value": " \n" })).unwrap_err().slug, "invalid-selection");
    }
}
