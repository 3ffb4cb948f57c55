//! Statements about the schema itself: the lock that serialises applying `sql/functions/`, the digest of the
//! functions applied, and the migration level; `/ready` compares both with the build's.
//!
//! Unlike the rest of the store these return the driver's error: applying the functions happens inside
//! [`crate::jobs::functions::apply`], whose [`crate::jobs::functions::ApplyError`] is itself part of
//! [`crate::jobs::Error`], and readiness reports any failure as "the database does not answer".

use sqlx::PgExecutor;

/// `functions_lock.sql`: waits for the advisory lock `key`, held until the transaction ends.
pub async fn functions_lock(db: impl PgExecutor<'_>, key: i64) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/functions_lock.sql")).bind(key).execute(db).await?;
    Ok(())
}

/// `schema_version.sql`: the newest migration applied, `None` on a database never migrated.
pub async fn schema_version(db: impl PgExecutor<'_>) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/schema_version.sql")).fetch_one(db).await
}

/// `migrations_table_exists.sql`: whether the database was ever migrated (it has sqlx's table of migrations).
pub async fn migrations_table_exists(db: impl PgExecutor<'_>) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/migrations_table_exists.sql")).fetch_one(db).await
}

/// The newest migration applied, `None` on a database never migrated — also one without the table of migrations,
/// where [`schema_version`] alone fails.
pub async fn schema_level(db: &sqlx::PgPool) -> Result<Option<i64>, sqlx::Error> {
    if !migrations_table_exists(db).await? {
        return Ok(None);
    }
    schema_version(db).await
}

/// `functions_digest_record.sql`: records `digest` as the SQL functions just applied, in the caller's transaction.
pub async fn functions_digest_record(db: impl PgExecutor<'_>, digest: &str) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("../sql/functions_digest_record.sql")).bind(digest).execute(db).await?;
    Ok(())
}

/// `functions_digest.sql`: the digest of the SQL functions last applied, `None` when none was ever recorded.
pub async fn functions_digest(db: impl PgExecutor<'_>) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/functions_digest.sql")).fetch_optional(db).await
}
