//! Who did what: a run's audit trail (docs/guarantees.md: a run's page links to it), a cluster's, and the caller's own grants
//! (`/me`), so a console can show them and enable only the actions the operator may take.
//!
//! An audit row's detail is written for the audit, not for callers: the answer leaves out what only the service
//! may know — a preview's plan hash (execute must echo the hash of a preview its caller *saw*; reading it from the
//! audit would bypass that) and the words of internal errors (a database's or a broker's, which name hosts).

use axum::extract::{Path, Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::runs::{require_visible, run_id, OnOneRun, RunParam};
use super::ApiState;
use crate::jobs::store::record::{self, AuditRow};
use crate::transfer::permissions;

/// Detail keys an answer never carries (the module doc says why).
const WITHHELD: [&str; 3] = ["plan_hash", "error", "sqlstate"];

/// `row` as callers may read it: its detail without the keys of [`WITHHELD`].
pub(crate) fn answered(row: AuditRow) -> AuditRow {
    AuditRow { detail: withheld(row.detail), ..row }
}

/// `detail` without the keys of [`WITHHELD`], at any depth.
fn withheld(detail: serde_json::Value) -> serde_json::Value {
    match detail {
        serde_json::Value::Object(map) => map
            .into_iter()
            .filter(|(k, _)| !WITHHELD.contains(&k.as_str()))
            .map(|(k, v)| (k, withheld(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        serde_json::Value::Array(items) => items.into_iter().map(withheld).collect::<Vec<_>>().into(),
        other => other,
    }
}

/// The audit trail of a run or a cluster.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditTrail {
    /// The entries (a run's oldest first; a cluster's newest first), an internal error's words and a preview's
    /// plan hash left out of their detail.
    pub entries: Vec<AuditRow>,
    /// A cluster's: the `before` of the next (older) page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

/// `GET /api/v1/runs/{run}/audit`: every audited action on the run, oldest first.
#[utoipa::path(get, path = "/runs/{run}/audit", operation_id = "getRunAudit", tags = ["runs"],
    summary = "A run's audit trail",
    description = "Every audited action on the run — its preview, execute, stop, resume, return, each refused or \
        failed attempt too — oldest first: who, when, what, and what came of it.",
    params(RunParam),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The run's audit trail", body = AuditTrail),
        OnOneRun,
    ))]
pub async fn run_audit(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
) -> Result<Json<AuditTrail>, ApiError> {
    let run = run_id(&run)?;
    require_visible(&state, run, &caller).await?;
    let rows = record::audit_for_run(&state.pool, run).await?;
    Ok(Json(AuditTrail { entries: rows.into_iter().map(answered).collect(), next_before: None }))
}

/// Query of `GET /api/v1/clusters/{cluster}/audit`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ClusterAuditQuery {
    /// At most this many (1–500, default 100).
    #[param(minimum = 1, maximum = 500, default = 100)]
    pub limit: Option<i64>,
    /// Only entries older than this entry's id (the `next_before` of the previous page).
    #[param(minimum = 1)]
    pub before: Option<i64>,
}

/// `GET /api/v1/clusters/{cluster}/audit`: the audited actions concerning a cluster, newest first, a page at a
/// time.
#[utoipa::path(get, path = "/clusters/{cluster}/audit", operation_id = "getClusterAudit", tags = ["clusters"],
    summary = "A cluster's audit trail",
    description = "The audited actions concerning the cluster — runs from or to it, and administration on it — \
        newest first, a page at a time (`before` = the previous page's `next_before`).",
    params(("cluster" = String, Path, description = "The cluster's registered name"), ClusterAuditQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of the cluster's audit trail", body = AuditTrail),
        (status = 400, description = "A limit or cursor out of range, or an unknown query field (invalid-request)",
            body = Problem),
        (status = 404, description = "No such cluster, or one the operator may not see (not-found)",
            body = Problem),
    ))]
pub async fn cluster_audit(
    State(state): State<ApiState>,
    caller: Caller,
    Path(cluster): Path<String>,
    query: Result<Query<ClusterAuditQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<AuditTrail>, ApiError> {
    let Query(q) = query?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) || q.before.is_some_and(|b| b < 1) {
        return Err(ApiError::bad_request("invalid-request", "limit is 1 to 500, and before a positive entry id"));
    }
    if !permissions::can_see(&state.pool, &caller.operator, &cluster).await? {
        return Err(ApiError::not_found(format!("no cluster named {cluster} is registered")));
    }
    let rows = record::audit_for_cluster(&state.pool, &cluster, limit, q.before).await?;
    let next_before = (rows.len() as i64 == limit).then(|| rows.last().map(|r| r.id)).flatten();
    Ok(Json(AuditTrail { entries: rows.into_iter().map(answered).collect(), next_before }))
}

/// Who the caller is and what they may do.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    /// The service whose token called.
    pub service: String,
    /// The operator it acts for (`X-Operator`), whose grants decide.
    pub operator: String,
    /// The operator's grants, by cluster (`*`: every cluster) and permission.
    pub grants: Vec<MyGrant>,
}

/// One grant of the caller's operator.
#[derive(Debug, Serialize, ToSchema)]
pub struct MyGrant {
    /// The cluster, or `*` for every cluster.
    pub cluster: String,
    /// e.g. `cluster:view`, `message:move`, `admin`.
    pub permission: String,
}

/// `GET /api/v1/me`: the caller's service and operator, and the operator's grants — what a console enables.
#[utoipa::path(get, path = "/me", operation_id = "getMe", tags = ["clusters"], summary = "Who am I",
    description = "The service whose token called, the operator it acts for, and that operator's grants: what a \
        console should enable. Reading them is not audited: a read is not an act.",
    security(("bearer" = [])),
    responses((status = 200, description = "The caller", body = Me)))]
pub async fn me(State(state): State<ApiState>, caller: Caller) -> Result<Json<Me>, ApiError> {
    let rows = permissions::own(&state.pool, &caller.operator).await?;
    let grants = rows.into_iter().map(|g| MyGrant { cluster: g.cluster, permission: g.permission }).collect();
    Ok(Json(Me { service: caller.service, operator: caller.operator, grants }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_never_carries_the_plan_hash_or_an_internal_errors_words() {
        let detail = json!({
            "result": { "plan_hash": "abc", "can_start": true },
            "error": "connection to db.internal:5432 refused",
            "sqlstate": "08006",
            "reason": "the plan hash does not match",
            "list": [{ "plan_hash": "x", "n": 1 }],
        });
        assert_eq!(
            withheld(detail),
            json!({
                "result": { "can_start": true },
                "reason": "the plan hash does not match",
                "list": [{ "n": 1 }],
            })
        );
    }
}
