//! The SQL action functions (`sql/functions/action_entry_points.sql`): execute, stop, resume, return. Each checks,
//! acts and audits in one transaction of its own and answers a `transfer_action_result` instead of raising, so the
//! caller reads a refusal as data ([`crate::transfer::actions`]).

use sqlx::PgExecutor;
use uuid::Uuid;

/// What the operator confirms at execute.
#[derive(Debug, Clone, Default)]
pub struct Confirmation {
    /// The plan hash the preview showed.
    pub plan_hash: String,
    /// The needs-acknowledgement codes acknowledged.
    pub acknowledged: Vec<String>,
    /// The source queue's name, typed (a move, over the safety cap, or of unknown size).
    pub typed_queue: Option<String>,
    /// The safety cap explicitly overridden.
    pub override_cap: bool,
}

/// What the SQL action functions return (`transfer_action_result`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ActionResult {
    /// `00000` when the action was done, else the refusal's SQLSTATE (`AT0xx`).
    pub sqlstate: Option<String>,
    /// The refusal's words.
    pub message: Option<String>,
    /// The action's answer, or the refusal's fields.
    pub detail: Option<serde_json::Value>,
}

/// `transfer_execute.sql`.
pub async fn transfer_execute(
    db: impl PgExecutor<'_>,
    run: Uuid,
    confirm: &Confirmation,
    operator: &str,
    default_max_attempts: i32,
) -> Result<ActionResult, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/transfer_execute.sql"))
        .bind(run)
        .bind(&confirm.plan_hash)
        .bind(&confirm.acknowledged)
        .bind(&confirm.typed_queue)
        .bind(confirm.override_cap)
        .bind(operator)
        .bind(default_max_attempts)
        .fetch_one(db)
        .await
}

/// `transfer_stop.sql`.
pub async fn transfer_stop(
    db: impl PgExecutor<'_>,
    run: Uuid,
    reason: &str,
    operator: &str,
) -> Result<ActionResult, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/transfer_stop.sql")).bind(run).bind(reason).bind(operator).fetch_one(db).await
}

/// `transfer_resume.sql`.
pub async fn transfer_resume(
    db: impl PgExecutor<'_>,
    run: Uuid,
    operator: &str,
    default_max_attempts: i32,
) -> Result<ActionResult, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/transfer_resume.sql"))
        .bind(run)
        .bind(operator)
        .bind(default_max_attempts)
        .fetch_one(db)
        .await
}

/// `transfer_return.sql`.
pub async fn transfer_return(
    db: impl PgExecutor<'_>,
    run: Uuid,
    operator: &str,
    default_max_attempts: i32,
) -> Result<ActionResult, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/transfer_return.sql"))
        .bind(run)
        .bind(operator)
        .bind(default_max_attempts)
        .fetch_one(db)
        .await
}
