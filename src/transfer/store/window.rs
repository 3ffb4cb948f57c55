//! The duplicate-id windows of target addresses (ADR 0010, [`crate::transfer::relay::window`]).

use sqlx::PgExecutor;
use uuid::Uuid;

/// One batch in doubt of another run in a window (`window_holders.sql`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow)]
pub struct WindowHolder {
    /// The run.
    pub run: Uuid,
    /// Where its batch starts in the window (none recorded: an older cursor).
    pub start: Option<i64>,
    /// How many ids its batch holds.
    pub size: i32,
}

/// `window_touch.sql`: the window of `target`, locked until the transaction ends; how many ids were sent into it.
pub async fn window_touch(db: impl PgExecutor<'_>, target: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/window_touch.sql")).bind(target).fetch_one(db).await
}

/// `window_holders.sql`: the batches in doubt of the runs other than `run` in `target`'s window, one per mark.
pub async fn window_holders(
    db: impl PgExecutor<'_>,
    run: Uuid,
    target: &str,
) -> Result<Vec<WindowHolder>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/window_holders.sql")).bind(run).bind(target).fetch_all(db).await
}

/// `window_advance.sql`: `ids` more were sent into `target`'s window.
pub async fn window_advance(db: impl PgExecutor<'_>, target: &str, ids: i64) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/window_advance.sql")).bind(target).bind(ids).execute(db).await?;
    Ok(())
}
