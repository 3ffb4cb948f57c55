//! The audit trail (docs/permissions.md): who did what to which run, cluster or grant, and with what outcome. Every action of
//! an operator or a service writes a row, refused ones too; rows are never pruned.

use sqlx::PgPool;
use uuid::Uuid;

use crate::transfer::store;

/// One audit row: `actor` did `action` to `target` with `outcome`, concerning `source_cluster` (and
/// `target_cluster`). A row that names a run (`run:<id>`) and no cluster gets the run's clusters from the
/// database (trigger `audit_fill_clusters`); one that names neither concerns the whole deployment (`*`).
#[derive(Debug, Clone)]
pub struct AuditEntry<'a> {
    /// Who.
    pub actor: &'a str,
    /// What.
    pub action: &'a str,
    /// To what (`run:<id>`, `grant:<principal>/<cluster>/<permission>`, …).
    pub target: String,
    /// `ok`, `refused` or `error`.
    pub outcome: &'a str,
    /// The particulars (never a secret).
    pub detail: serde_json::Value,
    /// The cluster acted on (a run's source; `*` for every cluster).
    pub source_cluster: Option<&'a str>,
    /// A run's target cluster.
    pub target_cluster: Option<&'a str>,
}

/// Writes `entry`; returns its id.
pub async fn audit_entry(pool: &PgPool, entry: &AuditEntry<'_>) -> Result<i64, sqlx::Error> {
    store::audit::audit_insert(pool, entry).await
}

/// Writes an audit row: `actor` did `action` to run `run` with `outcome` (the run's clusters are filled in by the
/// database). A row that cannot be written is logged.
pub async fn audit(pool: &PgPool, actor: &str, action: &str, run: Uuid, outcome: &str, detail: serde_json::Value) {
    let entry = AuditEntry {
        actor,
        action,
        target: format!("run:{run}"),
        outcome,
        detail,
        source_cluster: None,
        target_cluster: None,
    };
    if let Err(e) = audit_entry(pool, &entry).await {
        tracing::error!(error = %e, %action, %run, "could not write the audit row");
    }
}

/// Writes `entry`, logging a failure (for actions whose own result must not be hidden by the audit's).
pub async fn audit_logged(pool: &PgPool, entry: &AuditEntry<'_>) {
    if let Err(e) = audit_entry(pool, entry).await {
        tracing::error!(error = %e, action = %entry.action, target = %entry.target, "could not write the audit row");
    }
}
