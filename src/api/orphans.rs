//! The orphans (docs/guarantees.md), as the CLI's `orphans` command does them: staging queues no run owns, listed over the
//! clusters the operator may see; a return needs `message:move` on the orphan's cluster and moves its messages
//! before answering — to the end and audited even when the request's deadline answers first (a 503 that says it
//! may have taken effect).

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa::ToSchema;

use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::input::ApiJson;
use super::request::to_the_end;
use super::ApiState;
use crate::broker::permits::PermitSource;
use crate::limiter::PgPermits;
use crate::transfer::orphans::{self, ReturnRequest, RETURN_WARNING};

/// `GET /api/v1/orphans`: staging queues no run owns, on every node of the clusters the operator may see, and the
/// nodes that could not be asked (whether they hold orphans is then unknown).
#[utoipa::path(get, path = "/orphans", operation_id = "listOrphans", tags = ["orphans"], summary = "Orphans",
    description = "Staging queues no run owns, on every node of the clusters the operator may see, and the nodes \
        that could not be asked (whether they hold orphans is then unknown).",
    security(("bearer" = [])),
    responses((status = 200, description = "The orphans and the unchecked nodes", body = orphans::Orphans)))]
pub async fn list(State(state): State<ApiState>, caller: Caller) -> Result<Json<orphans::Orphans>, ApiError> {
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(state.pool.clone()));
    Ok(Json(orphans::list(&state.pool, Some(permits), &caller.operator).await?))
}

/// The body of `POST /api/v1/orphans/return`.
#[derive(Debug, Deserialize, ToSchema)]
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
    /// The staging queue's name, typed to confirm; without it the return is refused (422
    /// `confirmation-required`, with what a return does).
    pub confirm: Option<String>,
}

/// `POST /api/v1/orphans/return`: each message back to the queue it came from; the staging queue is then removed.
/// Answers what went where.
#[utoipa::path(post, path = "/orphans/return", operation_id = "returnOrphan", tags = ["orphans"],
    summary = "Return an orphan",
    description = "Each message back to the queue it came from; the staging queue is then removed. Needs the \
        staging queue's name typed in `confirm`; without it, 422 says what a return does. Once begun, a return \
        finishes and is audited even when the request timeout answers first (503 request-timeout): list the \
        orphans or read the audit before sending it again.",
    request_body = ReturnOrphanBody,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "What went where", body = orphans::Returned),
        (status = 400, description = "Not the call's JSON (invalid-request), or no X-Operator (no-operator)",
            body = Problem),
        (status = 403, description = "The operator lacks message:move on the orphan's cluster (missing-grant)",
            body = Problem),
        (status = 404, description = "No such cluster, node or staging queue, or one the operator may not see \
            (not-found)", body = Problem),
        (status = 409, description = "A run owns it, it is in use, or messages were left (orphan-state), or the \
            registry disagrees (conflict)", body = Problem),
        (status = 422, description = "The staging queue's name was not typed (confirmation-required), the return \
            is refused (orphan-refused), or the cluster's credentials are not set (missing-credentials)",
            body = Problem),
        (status = 502, description = "A broker's management could not be asked (discovery)", body = Problem),
    ))]
pub async fn return_orphan(
    State(state): State<ApiState>,
    caller: Caller,
    ApiJson(b): ApiJson<ReturnOrphanBody>,
) -> Result<Json<orphans::Returned>, ApiError> {
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
    // It moves messages: once begun it finishes, and audits itself, even when the request's deadline answers first.
    let pool = state.pool.clone();
    let returned = to_the_end(async move { orphans::return_orphan(&pool, Some(permits), &request).await }).await?;
    Ok(Json(returned?))
}
