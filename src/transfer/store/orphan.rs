//! Which run owns a queue that looks like staging ([`crate::transfer::orphans`]).

use sqlx::PgExecutor;
use uuid::Uuid;

/// `run_owning_queues.sql`: the runs (id, staging queue) that name one of `queues` as staging or whose id is one of
/// `ids`.
pub async fn run_owning_queues(
    db: impl PgExecutor<'_>,
    queues: &[String],
    ids: &[Uuid],
) -> Result<Vec<(Uuid, Option<String>)>, sqlx::Error> {
    sqlx::query_as(include_str!("../sql/run_owning_queues.sql")).bind(queues).bind(ids).fetch_all(db).await
}

/// `run_owning_queue.sql`: a run that names `queue` as staging or whose id is `id`.
pub async fn run_owning_queue(
    db: impl PgExecutor<'_>,
    queue: &str,
    id: Option<Uuid>,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar(include_str!("../sql/run_owning_queue.sql")).bind(queue).bind(id).fetch_optional(db).await
}
