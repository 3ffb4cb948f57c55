//! The audit trail's rows (docs/permissions.md).

use sqlx::PgExecutor;

use crate::transfer::audit::AuditEntry;

/// `audit_insert.sql`: the new row's id.
pub async fn audit_insert(db: impl PgExecutor<'_>, entry: &AuditEntry<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/audit_insert.sql"))
        .bind(entry.actor)
        .bind(entry.action)
        .bind(&entry.target)
        .bind(entry.outcome)
        .bind(&entry.detail)
        .bind(entry.source_cluster)
        .bind(entry.target_cluster)
        .fetch_one(db)
        .await
}
