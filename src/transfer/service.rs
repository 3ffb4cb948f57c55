//! The preview as a service: resolve both ends in the registry, find each node's live endpoint, gather the
//! facts, freeze the plan at the source broker's clock, evaluate, and store the result as a **Previewed run**
//! bound by its plan hash, valid until it expires. Nothing touches a broker beyond reads.
//!
//! Permissions (docs/permissions.md) come first: a source or target cluster the operator may not see answers exactly as an
//! unregistered one, and a preview of a run the operator could not start is refused naming the missing grant.
//! Every preview is audited — made, refused or failed — on both clusters. [`targets_for`] lists the clusters a
//! transfer could go to, each enabled or disabled with the reason.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use super::audit::{audit_logged, AuditEntry};
use super::gather::{gather, EndAccess, RunFacts};
use super::permissions::{self, Permission, PermissionError};
use super::plan::{Mode, Plan, QueueRef, Selection};
use super::preview::{preview, Kind, Preview, PreviewSettings};
use crate::broker::count::count_matching;
use crate::broker::jolokia::BrokerManagement;
use crate::broker::node::connect_core;
use crate::broker::permits::PermitSource;
use crate::limiter::PgPermits;
use crate::registry::discover::core_host_port;
use crate::registry::live::{limited, live_endpoint_limited, management};
use crate::registry::{store, ClusterNode, Credentials, RegistryError};
use crate::transfer::store::preview::{self as preview_store, PreviewedRun};

/// What the operator asked to preview.
#[derive(Debug, Clone)]
pub struct PreviewRequest {
    /// Move or copy.
    pub mode: Mode,
    /// `cluster/node/queue` of the source.
    pub source: QueueRef,
    /// `cluster/node/queue` of the target.
    pub target: QueueRef,
    /// Which messages.
    pub selection: Selection,
    /// Who asks (stored on the run).
    pub operator: String,
}

/// A stored preview.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct StoredPreview {
    /// The Previewed run.
    pub run_id: Uuid,
    /// The plan, frozen at `t0`.
    pub plan: Plan,
    /// The hash execute must echo.
    pub plan_hash: String,
    /// The findings, size and notes.
    pub preview: Preview,
    /// After this the preview must be made again.
    pub expires_at: DateTime<Utc>,
}

/// What can go wrong making a preview (its findings are not errors: they are the preview).
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The registry could not resolve a cluster, node or credentials.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The operator lacks a grant the run would need (or the grants could not be read).
    #[error(transparent)]
    Permission(#[from] PermissionError),
    /// Postgres failed.
    #[error("the database: {0}")]
    Db(#[from] sqlx::Error),
}

impl ServiceError {
    /// A refusal the operator can act on (an unknown or invisible cluster or node, missing credentials, a missing
    /// grant), as opposed to a failure of a system.
    pub fn is_refusal(&self) -> bool {
        match self {
            ServiceError::Registry(RegistryError::Db(_)) | ServiceError::Db(_) => false,
            ServiceError::Permission(e) => e.is_refusal(),
            ServiceError::Registry(_) => true,
        }
    }
}

/// The registered cluster `name` if `principal` may see it; an invisible cluster gives exactly the error of an
/// unregistered one.
pub(crate) async fn visible_cluster(
    pool: &PgPool,
    principal: &str,
    name: &str,
) -> Result<crate::registry::Cluster, ServiceError> {
    if !permissions::can_see(pool, principal, name).await? {
        return Err(RegistryError::NotFound(format!("no cluster named {name} is registered")).into());
    }
    Ok(store::get(pool, name).await?)
}

/// How long management calls of a preview may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A management client for the node's live endpoint, or — when none is live — for its first endpoint, so the
/// preview reads and reports what that endpoint is (a backup, not active, or not answering), with that endpoint's
/// Core URL. Every call, the live-endpoint check included, takes the node's shared permits first.
pub(crate) async fn node_management(
    node: &ClusterNode,
    credentials: &Credentials,
    permits: &Arc<dyn PermitSource>,
) -> (BrokerManagement, String) {
    match live_endpoint_limited(node, credentials, CALL_TIMEOUT, Some(permits)).await {
        Ok((mgmt, endpoint)) => (mgmt, endpoint.core_url.clone()),
        Err(_) => {
            let endpoint = &node.endpoints[0];
            let mgmt = limited(management(node, endpoint, credentials, CALL_TIMEOUT), Some(permits));
            (mgmt, endpoint.core_url.clone())
        }
    }
}

/// Counts a filter selection's messages on the source by a Core browse with the frozen filter (`plan` is frozen at
/// `t0`), up to `limit`: exact at any depth, where the broker's own filtered count covers one browse page. `None`
/// when it is not a filter selection, the broker already refused the queue or the filter, or the source could not
/// be browsed (the preview then falls back on the broker's count, and says so).
async fn browse_count(
    plan: &Plan,
    facts: &crate::transfer::Facts,
    core_url: &str,
    credentials: &Credentials,
    limit: crate::broker::count::CountLimit,
) -> Option<crate::broker::count::Counted> {
    if !matches!(plan.selection, Selection::Filter(_)) || facts.filter_error.is_some() {
        return None;
    }
    facts.source.queue.state()?;
    // A filter that cannot be read is refused by the preview (`preview::filter_refusal`): nothing to count.
    let filter = plan.effective_filter().ok().flatten()?;
    let conn = connect_core(core_url, credentials.login(), CALL_TIMEOUT, None).await.ok()?;
    let counted = count_matching(&conn, &plan.source.queue, Some(&filter), limit).await;
    let _ = conn.close().await;
    counted.inspect_err(|e| tracing::warn!(queue = %plan.source.display(), error = %e, "the preview could not count the selection by a browse")).ok()
}

/// Active runs on the plan's queues, from Postgres.
pub(crate) async fn run_facts(pool: &PgPool, source: &QueueRef, target: &QueueRef) -> RunFacts {
    let active = |q| preview_store::run_active_on_queue(pool, q);
    let into_address = preview_store::run_count_into_address(pool, target);
    let (s, t, a) = tokio::join!(active(source), active(target), into_address);
    RunFacts { source_has_active_run: s.ok(), target_is_source_of_active_run: t.ok(), runs_into_target_address: a.ok() }
}

/// Previews a transfer and stores it as a Previewed run. Its management calls draw on the per-node permits in
/// `pool` (`transfer_node_permit`), like every other broker call, so the `setting` table must be seeded
/// (`artemis-transfer migrate`). The operator must see both clusters and hold what the run needs (docs/permissions.md: a move
/// needs message:move on the source, a copy message:read; both message:send on the target). Audited.
pub async fn preview_and_store(
    pool: &PgPool,
    request: &PreviewRequest,
    settings: &PreviewSettings,
    valid_for: Duration,
) -> Result<StoredPreview, ServiceError> {
    let result = preview_checked(pool, request, settings, valid_for).await;
    audit_preview(pool, request, &request.target.display(), &result).await;
    result
}

/// The audit row of a preview: who previewed what (`to`: where the messages would go, in words), and what came
/// of it.
pub(crate) async fn audit_preview(
    pool: &PgPool,
    request: &PreviewRequest,
    to: &str,
    result: &Result<StoredPreview, ServiceError>,
) {
    let mut detail = serde_json::json!({
        "mode": request.mode,
        "source": request.source.display(),
        "target": to,
        "selection": match &request.selection {
            Selection::Ids(ids) => format!("{} ids", ids.len()),
            Selection::Filter(_) => "filter".to_string(),
            Selection::All => "whole queue".to_string(),
        },
    });
    let (target, outcome) = match result {
        Ok(stored) => {
            let codes = |kind: Kind| -> Vec<&str> {
                stored.preview.findings.iter().filter(|f| f.kind == kind).map(|f| f.code).collect()
            };
            detail["result"] = serde_json::json!({
                "plan_hash": stored.plan_hash,
                "can_start": stored.preview.can_start(),
                "selection_size": stored.preview.selection_size,
                "refused": codes(Kind::Refused),
                "needs_ack": codes(Kind::NeedsAck),
                "unknown": codes(Kind::Unknown),
            });
            (format!("run:{}", stored.run_id), "ok")
        }
        Err(e) => {
            detail["reason"] = serde_json::json!(e.to_string());
            let target = format!("preview:{} -> {to}", request.source.display());
            (target, if e.is_refusal() { "refused" } else { "error" })
        }
    };
    let entry = AuditEntry {
        actor: &request.operator,
        action: "preview",
        target,
        outcome,
        detail,
        source_cluster: Some(&request.source.cluster),
        target_cluster: Some(&request.target.cluster),
    };
    audit_logged(pool, &entry).await;
}

async fn preview_checked(
    pool: &PgPool,
    request: &PreviewRequest,
    settings: &PreviewSettings,
    valid_for: Duration,
) -> Result<StoredPreview, ServiceError> {
    let operator = &request.operator;
    let source_cluster = visible_cluster(pool, operator, &request.source.cluster).await?;
    let target_cluster = visible_cluster(pool, operator, &request.target.cluster).await?;
    permissions::require_for_run(pool, operator, request.mode, &source_cluster.name, &target_cluster.name).await?;
    let source_node = source_cluster.node(&request.source.node)?;
    let target_node = target_cluster.node(&request.target.node)?;
    let source_credentials = Credentials::from_env(&source_cluster.credentials_ref)?;
    let target_credentials = Credentials::from_env(&target_cluster.credentials_ref)?;

    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(pool.clone()));
    let ((source_mgmt, source_core_url), (target_mgmt, target_core_url)) = tokio::join!(
        node_management(source_node, &source_credentials, &permits),
        node_management(target_node, &target_credentials, &permits)
    );
    let mut plan = Plan {
        mode: request.mode,
        source: request.source.clone(),
        target: request.target.clone(),
        selection: request.selection.clone(),
        t0_millis: 0,
        destination: Default::default(),
    };
    let (source_core, target_core) = (core_host_port(&source_core_url), core_host_port(&target_core_url));
    let mut facts = gather(
        &plan,
        EndAccess { management: &source_mgmt, core_addr: Some(&source_core) },
        EndAccess { management: &target_mgmt, core_addr: Some(&target_core) },
        run_facts(pool, &request.source, &request.target).await,
    )
    .await;
    let broker_clock = facts.source.node.as_ref().and_then(|n| n.broker.current_time_millis);
    plan.t0_millis = broker_clock.unwrap_or_else(|| Utc::now().timestamp_millis());
    facts.browsed = browse_count(&plan, &facts, &source_core_url, &source_credentials, settings.count_limit).await;
    let mut shown = preview(&plan, &facts, settings);
    if broker_clock.is_none() {
        shown.notes.push(
            "The source broker did not report its clock (CurrentTimeMillis needs Artemis 2.40), so t0 was taken \
             from this host's clock."
                .into(),
        );
    }

    store_preview(pool, &request.operator, plan, shown, valid_for).await
}

/// Stores `shown`, the preview of `plan`, as a Previewed run of `operator` valid for `valid_for`.
pub(crate) async fn store_preview(
    pool: &PgPool,
    operator: &str,
    plan: Plan,
    shown: Preview,
    valid_for: Duration,
) -> Result<StoredPreview, ServiceError> {
    let run_id = Uuid::new_v4();
    let plan_hash = plan.hash();
    let expires_at = Utc::now() + chrono::Duration::from_std(valid_for).unwrap_or(chrono::Duration::minutes(10));
    let stored = PreviewedRun { id: run_id, operator, plan: &plan, plan_hash: &plan_hash, preview: &shown, expires_at };
    preview_store::run_insert_previewed(pool, &stored).await?;
    Ok(StoredPreview { run_id, plan, plan_hash, preview: shown, expires_at })
}

/// A cluster a transfer could go to, as the operator sees the list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct Target {
    /// The registered cluster.
    pub cluster: String,
    /// The operator may send to it.
    pub enabled: bool,
    /// Why not, in words naming the missing grant; `None` when enabled.
    pub reason: Option<String>,
}

/// The clusters a transfer from `source_cluster` could go to, for `principal`: every cluster they may see, those
/// they may not send to disabled with the reason (docs/permissions.md). A cluster they may not see is absent, and an invisible
/// `source_cluster` is not found, exactly as if it were not registered.
pub async fn targets_for(pool: &PgPool, principal: &str, source_cluster: &str) -> Result<Vec<Target>, ServiceError> {
    visible_cluster(pool, principal, source_cluster).await?;
    let mut targets = Vec::new();
    for cluster in store::list(pool).await? {
        if !permissions::can_see(pool, principal, &cluster.name).await? {
            continue;
        }
        let target = match permissions::require(pool, principal, &cluster.name, Permission::MessageSend).await {
            Ok(()) => Target { cluster: cluster.name, enabled: true, reason: None },
            Err(PermissionError::Missing(missing)) => {
                Target { cluster: cluster.name, enabled: false, reason: Some(missing.to_string()) }
            }
            Err(e) => return Err(e.into()),
        };
        targets.push(target);
    }
    Ok(targets)
}
