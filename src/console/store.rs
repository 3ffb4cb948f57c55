//! The console's own statements (`src/console/sql`): its sessions (migration 0015, ADR 0014).

use sqlx::PgExecutor;

/// A session in force, as [`console_session_touch`] finds it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SessionRow {
    /// The service whose token signed in.
    pub service: String,
    /// The operator it acts for.
    pub operator: String,
    /// sha256 of that token.
    pub token_digest: Vec<u8>,
    /// The form token every POST must echo.
    pub form_token: String,
}

/// What a new session holds.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    /// sha256 of the session id.
    pub id_hash: &'a [u8],
    /// See [`SessionRow`].
    pub service: &'a str,
    /// See [`SessionRow`].
    pub operator: &'a str,
    /// See [`SessionRow`].
    pub token_digest: &'a [u8],
    /// See [`SessionRow`].
    pub form_token: &'a str,
    /// Seconds without a request before it ends.
    pub idle_secs: f64,
    /// Seconds after sign-in it ends, whatever happens.
    pub absolute_secs: f64,
}

/// `console_session_insert.sql`.
pub async fn console_session_insert(db: impl PgExecutor<'_>, s: &NewSession<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/console_session_insert.sql"))
        .bind(s.id_hash)
        .bind(s.service)
        .bind(s.operator)
        .bind(s.token_digest)
        .bind(s.form_token)
        .bind(s.idle_secs)
        .bind(s.absolute_secs)
        .execute(db)
        .await
        .map(|_| ())
}

/// `console_session_touch.sql`: the session if it is in force, its idle expiry moved on.
pub async fn console_session_touch(
    db: impl PgExecutor<'_>,
    id_hash: &[u8],
    idle_secs: f64,
) -> Result<Option<SessionRow>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/console_session_touch.sql")).bind(id_hash).bind(idle_secs).fetch_optional(db).await
}

/// `console_session_delete.sql`.
pub async fn console_session_delete(db: impl PgExecutor<'_>, id_hash: &[u8]) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/console_session_delete.sql")).bind(id_hash).execute(db).await.map(|_| ())
}

/// `console_session_expire.sql`: how many expired sessions were removed.
pub async fn console_session_expire(db: impl PgExecutor<'_>) -> Result<u64, sqlx::Error> {
    sqlx::query(include_str!("sql/console_session_expire.sql")).execute(db).await.map(|r| r.rows_affected())
}

/// A run as the console's preview page shows it (`console_preview_load.sql`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredPreviewRow {
    /// Its state's name.
    pub state: String,
    /// `move` or `copy`.
    pub mode: String,
    /// The source's cluster.
    pub source_cluster: String,
    /// The source's node.
    pub source_node: String,
    /// The source queue.
    pub source_queue: String,
    /// The target's cluster.
    pub target_cluster: String,
    /// The target's node.
    pub target_node: String,
    /// The target queue.
    pub target_queue: String,
    /// The plan, as stored.
    pub plan: serde_json::Value,
    /// The plan's hash, which execute echoes.
    pub plan_hash: String,
    /// The preview, as stored.
    pub preview: serde_json::Value,
    /// Until when it may be executed.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// `console_preview_load.sql`.
pub async fn console_preview_load(
    db: impl PgExecutor<'_>,
    run: uuid::Uuid,
) -> Result<Option<StoredPreviewRow>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/console_preview_load.sql")).bind(run).fetch_optional(db).await
}
