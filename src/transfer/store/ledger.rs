//! A copy's ledger: the source messages it copied, so a resumed or re-claimed copy sends nothing twice
//! ([`crate::transfer::relay::copy`]).

use sqlx::PgExecutor;
use uuid::Uuid;

/// `ledger_clear.sql`: at the copy's end.
pub async fn ledger_clear(db: impl PgExecutor<'_>, run: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/ledger_clear.sql")).bind(run).execute(db).await?;
    Ok(())
}

/// `ledger_holding.sql`: of `ids`, those the ledger holds.
pub async fn ledger_holding(db: impl PgExecutor<'_>, run: Uuid, ids: &[i64]) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/ledger_holding.sql")).bind(run).bind(ids).fetch_all(db).await
}

/// `ledger_add.sql`: `ids` were copied.
pub async fn ledger_add(db: impl PgExecutor<'_>, run: Uuid, ids: &[i64]) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/ledger_add.sql")).bind(run).bind(ids).execute(db).await?;
    Ok(())
}

/// `ledger_size.sql`.
pub async fn ledger_size(db: impl PgExecutor<'_>, run: Uuid) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/ledger_size.sql")).bind(run).fetch_one(db).await
}
