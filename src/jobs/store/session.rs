//! Statements on the session itself, not on a table.

use std::time::Duration;

use sqlx::PgExecutor;

use crate::jobs::error::{DbContext, Error};

/// `tx_idle_timeout.sql`: Postgres ends the session if the current transaction sits idle longer than `idle`
/// (at least a millisecond: zero would mean "never").
pub async fn tx_idle_timeout(db: impl PgExecutor<'_>, idle: Duration) -> Result<(), Error> {
    let idle_ms = idle.as_millis().max(1).to_string();
    sqlx::query(include_str!("../sql/tx_idle_timeout.sql")).bind(idle_ms).execute(db).await.db("tx_idle_timeout")?;
    Ok(())
}
