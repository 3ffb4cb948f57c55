//! Statements on the record-keeping tables: `run_event`, `audit`, `setting`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};
use crate::jobs::model::RunId;

/// One row of `run_event`.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct RunEvent {
    /// The event's id, increasing (the SSE id of its event).
    pub id: i64,
    /// When it was written.
    pub at: DateTime<Utc>,
    /// What happened (`started`, `batch`, `stopped`, …); the SSE event's name.
    pub kind: String,
    /// The kind's own fields: free-form, each kind has its own.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

/// One row of `audit`: an audited action.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct AuditRow {
    /// Its place in the audit (ascending with time): the cursor of a cluster's trail.
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// Who: the operator (`service:operator` when a service acted for them).
    pub actor: String,
    /// What, e.g. `preview`, `execute`, `stop`, `settings.set`.
    pub action: String,
    /// On what, e.g. `run:<id>`, `cluster:<name>`.
    pub target: String,
    /// `ok`, `refused` or `error`.
    pub outcome: String,
    /// What the action was given and what came of it: free-form, each action has its own.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

/// `run_event_insert.sql`.
pub async fn run_event_insert(
    db: impl PgExecutor<'_>,
    run: RunId,
    kind: &str,
    detail: &serde_json::Value,
) -> Result<(), Error> {
    sqlx::query(include_str!("../sql/run_event_insert.sql"))
        .bind(run)
        .bind(kind)
        .bind(detail)
        .execute(db)
        .await
        .db("run_event_insert")?;
    Ok(())
}

/// `run_event_list.sql`.
pub async fn run_event_list(db: impl PgExecutor<'_>, run: RunId) -> Result<Vec<RunEvent>, Error> {
    sqlx::query_as(include_str!("../sql/run_event_list.sql")).bind(run).fetch_all(db).await.db("run_event_list")
}

/// `audit_insert.sql`: the new row's id.
pub async fn audit_insert(
    db: impl PgExecutor<'_>,
    actor: &str,
    action: &str,
    target: &str,
    outcome: &str,
    detail: &serde_json::Value,
) -> Result<i64, Error> {
    sqlx::query_scalar(include_str!("../sql/audit_insert.sql"))
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(outcome)
        .bind(detail)
        .fetch_one(db)
        .await
        .db("audit_insert")
}

/// `audit_list.sql`: the newest `limit` rows.
pub async fn audit_list(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<AuditRow>, Error> {
    sqlx::query_as(include_str!("../sql/audit_list.sql")).bind(limit).fetch_all(db).await.db("audit_list")
}

/// `audit_for_run.sql`: every row about `run`, oldest first.
pub async fn audit_for_run(db: impl PgExecutor<'_>, run: uuid::Uuid) -> Result<Vec<AuditRow>, Error> {
    sqlx::query_as(include_str!("../sql/audit_for_run.sql")).bind(run).fetch_all(db).await.db("audit_for_run")
}

/// `audit_for_cluster.sql`: the newest `limit` rows concerning `cluster`, older than row `before` when given.
pub async fn audit_for_cluster(
    db: impl PgExecutor<'_>,
    cluster: &str,
    limit: i64,
    before: Option<i64>,
) -> Result<Vec<AuditRow>, Error> {
    sqlx::query_as(include_str!("../sql/audit_for_cluster.sql"))
        .bind(cluster)
        .bind(limit)
        .bind(before)
        .fetch_all(db)
        .await
        .db("audit_for_cluster")
}

/// `setting_seed.sql`: writes the default unless the key has a value.
pub async fn setting_seed(
    db: impl PgExecutor<'_>,
    key: &str,
    value: &serde_json::Value,
    by: &str,
) -> Result<(), Error> {
    sqlx::query(include_str!("../sql/setting_seed.sql"))
        .bind(key)
        .bind(value)
        .bind(by)
        .execute(db)
        .await
        .db("setting_seed")?;
    Ok(())
}

/// `setting_set.sql`.
pub async fn setting_set(
    db: impl PgExecutor<'_>,
    key: &str,
    value: &serde_json::Value,
    by: &str,
) -> Result<SettingRow, Error> {
    let row: SettingRow = sqlx::query_as(include_str!("../sql/setting_set.sql"))
        .bind(key)
        .bind(value)
        .bind(by)
        .fetch_one(db)
        .await
        .db("setting_set")?;
    Ok(row.tagged())
}

/// `setting_list.sql`: (key, value) pairs.
pub async fn setting_list(db: impl PgExecutor<'_>) -> Result<Vec<(String, serde_json::Value)>, Error> {
    sqlx::query_as(include_str!("../sql/setting_list.sql")).fetch_all(db).await.db("setting_list")
}

/// One row of `setting`: a key, its value, who changed it last and when.
#[derive(Debug, Clone, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct SettingRow {
    /// The setting (docs/settings.md), e.g. `batch_size`.
    pub key: String,
    /// Its value: a number, a list of names, or null for none.
    #[schema(schema_with = value_schema)]
    pub value: serde_json::Value,
    /// When it was last changed.
    pub updated_at: DateTime<Utc>,
    /// Who changed it last.
    pub updated_by: String,
    /// This value's tag, as an HTTP entity tag (quoted): a change sent with `If-Match` naming it is made only if
    /// the setting has not changed since.
    #[sqlx(skip)]
    pub etag: String,
}

impl SettingRow {
    /// The row with its [`SettingRow::etag`]: a digest of the key, the value, when and by whom it was set, so any
    /// change — even back to an earlier value — gives another tag.
    pub fn tagged(mut self) -> SettingRow {
        let mut digest = Sha256::new();
        for part in [self.key.as_str(), &self.value.to_string(), &self.updated_at.timestamp_micros().to_string()] {
            digest.update(part.as_bytes());
            digest.update([0]);
        }
        digest.update(self.updated_by.as_bytes());
        let hex: String = digest.finalize()[..12].iter().map(|b| format!("{b:02x}")).collect();
        self.etag = format!("\"{hex}\"");
        self
    }
}

/// `setting_rows.sql`: every setting, by key.
pub async fn setting_rows(db: impl PgExecutor<'_>) -> Result<Vec<SettingRow>, Error> {
    let rows: Vec<SettingRow> =
        sqlx::query_as(include_str!("../sql/setting_rows.sql")).fetch_all(db).await.db("setting_rows")?;
    Ok(rows.into_iter().map(SettingRow::tagged).collect())
}

/// `setting_lock.sql`: every setting, by key, locked until the transaction ends.
pub async fn setting_lock(db: impl PgExecutor<'_>) -> Result<Vec<SettingRow>, Error> {
    let rows: Vec<SettingRow> =
        sqlx::query_as(include_str!("../sql/setting_lock.sql")).fetch_all(db).await.db("setting_lock")?;
    Ok(rows.into_iter().map(SettingRow::tagged).collect())
}

/// The schema of a stored setting's value in the API's document: every setting is a number, a list of names
/// (`dmq_chain`) or null (none, e.g. `dmq_time_to_live_secs`).
pub fn value_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type};
    let one_of = OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::Number))
        .item(ArrayBuilder::new().items(ObjectBuilder::new().schema_type(Type::String)))
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some("A number, a list of names, or null for none."))
        .build();
    Schema::OneOf(one_of)
}
