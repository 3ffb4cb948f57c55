//! The orphans (SPEC §2), as the CLI's `orphans` command does them: staging queues no run owns, listed over the
//! clusters the operator may see; a return needs `message:move` on the orphan's cluster and moves its messages
//! before answering.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;

use super::auth::Caller;
use super::error::ApiError;
use super::ApiState;
use crate::broker::permits::PermitSource;
use crate::limiter::PgPermits;
use crate::transfer::orphans::{self, ReturnRequest, RETURN_WARNING};

/// `GET /api/v1/orphans`: staging queues no run owns, on every node of the clusters the operator may see, and the
/// nodes that could not be asked (whether they hold orphans is then unknown).
pub async fn list(State(state): State<ApiState>, caller: Caller) -> Result<Json<orphans::Orphans>, ApiError> {
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
