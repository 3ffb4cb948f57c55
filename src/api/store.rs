//! The HTTP API's own statements (`src/api/sql`): the answers kept for `Idempotency-Key`.

use sqlx::PgExecutor;

/// What a key holds.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct KeptAnswer {
    /// The first request's fingerprint.
    pub fingerprint: Vec<u8>,
    /// Its answer's status; `None` while it is being answered.
    pub status: Option<i16>,
    /// Its answer's content type.
    pub content_type: Option<String>,
    /// Its answer's `Location`.
    pub location: Option<String>,
    /// Its answer's body.
    pub body: Option<Vec<u8>>,
}

/// `idempotency_claim.sql`: true when this request is the first with the key.
pub async fn idempotency_claim(
    db: impl PgExecutor<'_>,
    service: &str,
    key: &str,
    fingerprint: &[u8],
) -> Result<bool, sqlx::Error> {
    let claimed: Option<bool> = sqlx::query_scalar(include_str!("sql/idempotency_claim.sql"))
        .bind(service)
        .bind(key)
        .bind(fingerprint)
        .fetch_optional(db)
        .await?;
    Ok(claimed.unwrap_or(false))
}

/// `idempotency_get.sql`.
pub async fn idempotency_get(
    db: impl PgExecutor<'_>,
    service: &str,
    key: &str,
) -> Result<Option<KeptAnswer>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/idempotency_get.sql")).bind(service).bind(key).fetch_optional(db).await
}

/// `idempotency_answer.sql`.
pub async fn idempotency_answer(
    db: impl PgExecutor<'_>,
    service: &str,
    key: &str,
    answer: &KeptAnswer,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/idempotency_answer.sql"))
        .bind(service)
        .bind(key)
        .bind(answer.status)
        .bind(answer.content_type.as_deref())
        .bind(answer.location.as_deref())
        .bind(answer.body.as_deref())
        .execute(db)
        .await?;
    Ok(())
}

/// `idempotency_release.sql`.
pub async fn idempotency_release(db: impl PgExecutor<'_>, service: &str, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/idempotency_release.sql")).bind(service).bind(key).execute(db).await?;
    Ok(())
}

/// `idempotency_expire.sql`: how many keys were removed.
pub async fn idempotency_expire(db: impl PgExecutor<'_>) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(include_str!("sql/idempotency_expire.sql")).execute(db).await?.rows_affected())
}
