//! The grants (docs/permissions.md): who holds what on which cluster, and what a run needs. The rules themselves are SQL
//! functions (`sql/functions/permissions.sql`) shared with the Studio start path.

use sqlx::PgExecutor;
use uuid::Uuid;

use chrono::{DateTime, Utc};
use serde::Serialize;

/// What decides the grants a run needs (`run_grant_needs.sql`); each may be missing on a hand-made row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RunGrantNeeds {
    /// The operator who started it.
    pub started_by: Option<String>,
    /// `move` or `copy`.
    pub mode: Option<String>,
    /// Its source cluster.
    pub source_cluster: Option<String>,
    /// Its target cluster.
    pub target_cluster: Option<String>,
}

/// A row of `transfer_grant`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct GrantRow {
    /// Who holds it.
    pub principal: String,
    /// On which cluster (`*`: every cluster).
    pub cluster: String,
    /// What.
    pub permission: String,
    /// Who granted it.
    pub granted_by: String,
    /// When.
    pub granted_at: DateTime<Utc>,
}

/// `grant_held.sql`: whether `principal` holds `permission` (its stored name) on `cluster`.
pub async fn grant_held(
    db: impl PgExecutor<'_>,
    principal: &str,
    cluster: &str,
    permission: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/grant_held.sql"))
        .bind(principal)
        .bind(cluster)
        .bind(permission)
        .fetch_one(db)
        .await
}

/// `grant_can_see.sql`: whether `principal` may see `cluster` at all.
pub async fn grant_can_see(db: impl PgExecutor<'_>, principal: &str, cluster: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/grant_can_see.sql")).bind(principal).bind(cluster).fetch_one(db).await
}

/// `grant_missing_for_run.sql`: the first (permission, cluster) `principal` lacks for a run of `mode` (the
/// column's word) from `source` to `target`; `None` when they hold everything it needs.
pub async fn grant_missing_for_run(
    db: impl PgExecutor<'_>,
    principal: &str,
    mode: &str,
    source: &str,
    target: &str,
) -> Result<Option<(String, String)>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/grant_missing_for_run.sql"))
        .bind(principal)
        .bind(mode)
        .bind(source)
        .bind(target)
        .fetch_optional(db)
        .await
}

/// `grant_admin_exists.sql`: whether anybody holds admin on `*`.
pub async fn grant_admin_exists(db: impl PgExecutor<'_>) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/grant_admin_exists.sql")).fetch_one(db).await
}

/// `grant_insert.sql`: `permission` (its stored name) on `cluster` to `principal`, granted by `by`; false when it
/// was held already.
pub async fn grant_insert(
    db: impl PgExecutor<'_>,
    principal: &str,
    cluster: &str,
    permission: &str,
    by: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(include_str!("../sql/grant_insert.sql"))
        .bind(principal)
        .bind(cluster)
        .bind(permission)
        .bind(by)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// `grant_delete.sql`: false when `principal` did not hold `permission` (its stored name) on `cluster`.
pub async fn grant_delete(
    db: impl PgExecutor<'_>,
    principal: &str,
    cluster: &str,
    permission: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(include_str!("../sql/grant_delete.sql"))
        .bind(principal)
        .bind(cluster)
        .bind(permission)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// `grant_list.sql`: the grants of `principal` on `cluster` (`None`: any).
pub async fn grant_list(
    db: impl PgExecutor<'_>,
    principal: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<GrantRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/grant_list.sql")).bind(principal).bind(cluster).fetch_all(db).await
}

/// `run_clusters.sql`: the run's (source, target) cluster; `None` when it does not exist.
pub async fn run_clusters(
    db: impl PgExecutor<'_>,
    run: Uuid,
) -> Result<Option<(Option<String>, Option<String>)>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_clusters.sql")).bind(run).fetch_optional(db).await
}

/// `run_grant_needs.sql`: `None` when the run does not exist.
pub async fn run_grant_needs(db: impl PgExecutor<'_>, run: Uuid) -> Result<Option<RunGrantNeeds>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_grant_needs.sql")).bind(run).fetch_optional(db).await
}
