//! What a preview reads of the other runs, and the previewed run it stores ([`crate::transfer::service`]).

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::transfer::plan::{Plan, QueueRef};
use crate::transfer::preview::Preview;
use crate::transfer::store::mode_name;

/// `run_active_on_queue.sql`: whether a run holding or waiting for a slot has `queue` as its source.
pub async fn run_active_on_queue(db: impl PgExecutor<'_>, queue: &QueueRef) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_active_on_queue.sql"))
        .bind(&queue.cluster)
        .bind(&queue.node)
        .bind(&queue.queue)
        .fetch_one(db)
        .await
}

/// `run_count_into_address.sql`: how many runs holding or waiting for a slot send to `target`'s address.
pub async fn run_count_into_address(db: impl PgExecutor<'_>, target: &QueueRef) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_count_into_address.sql"))
        .bind(&target.cluster)
        .bind(&target.node)
        .bind(target.address())
        .fetch_one(db)
        .await
}

/// A previewed run to store (`run_insert_previewed.sql`).
#[derive(Debug, Clone, Copy)]
pub struct PreviewedRun<'a> {
    /// Its id.
    pub id: Uuid,
    /// The operator who previewed it.
    pub operator: &'a str,
    /// What it would do.
    pub plan: &'a Plan,
    /// The plan's hash, which execute must echo.
    pub plan_hash: &'a str,
    /// What the preview showed.
    pub preview: &'a Preview,
    /// Until when it may be executed.
    pub expires_at: DateTime<Utc>,
}

/// `run_insert_previewed.sql`.
pub async fn run_insert_previewed(db: impl PgExecutor<'_>, run: &PreviewedRun<'_>) -> Result<(), sqlx::Error> {
    let plan = run.plan;
    sqlx::query(include_str!("../sql/run_insert_previewed.sql"))
        .bind(run.id)
        .bind(run.operator)
        .bind(mode_name(plan.mode))
        .bind(&plan.source.cluster)
        .bind(&plan.source.node)
        .bind(&plan.source.queue)
        .bind(&plan.target.cluster)
        .bind(&plan.target.node)
        // The queue's name, or a retry's original queues in words: never the dead-letter queue it names as its node.
        .bind(plan.target_queue_words())
        .bind(serde_json::to_value(plan).expect("a plan serialises"))
        .bind(run.plan_hash)
        .bind(serde_json::to_value(run.preview).expect("a preview serialises"))
        .bind(run.expires_at)
        .execute(db)
        .await?;
    Ok(())
}

/// A run's stored preview as the preview wrote it (`run_stored_preview.sql`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct StoredPreviewRow {
    /// The plan (`Plan` as JSON).
    pub plan: serde_json::Value,
    /// The hash execute must echo.
    pub plan_hash: String,
    /// The preview (`Preview` as JSON).
    pub preview: serde_json::Value,
    /// After this the preview must be made again; `None` when the row does not say.
    pub expires_at: Option<DateTime<Utc>>,
}

/// `run_stored_preview.sql`: `run`'s stored preview, if it has one.
pub async fn run_stored_preview(db: impl PgExecutor<'_>, run: Uuid) -> Result<Option<StoredPreviewRow>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_stored_preview.sql")).bind(run).fetch_optional(db).await
}
