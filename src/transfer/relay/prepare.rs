//! A move's first job (SPEC §4.1): the target queue created when the preview said the run would create it,
//! staging made fully explicit and verified over Core with the relay's own credentials, then the first batch.

use serde_json::json;

use super::queues::create_target_queue;
use super::row;
use super::run::{load, load_settings, stop_outcome};
use super::Code;
use super::{Phase, RelayError, TransferHandler};
use crate::jobs::handler::{JobContext, Outcome};
use crate::registry::ends;
use crate::transfer::plan::{Mode, Selection};
use crate::transfer::staging::{self, StagingSpec};

/// The run's first job: creates the target queue when the preview said the run would, makes staging fully
/// explicit and verifies it (§4.1), then hands over to the first relay batch.
pub async fn prepare(h: &TransferHandler, ctx: &JobContext) -> Result<Outcome, RelayError> {
    if let Some(revoked) = crate::transfer::permissions::stop_if_revoked(ctx).await? {
        return Ok(revoked);
    }
    let run = load(ctx).await?;
    if ctx.stop_requested {
        return Ok(stop_outcome(&run));
    }
    let settings = load_settings(ctx).await?;
    if run.plan.mode != Mode::Move {
        return Err(RelayError::refused(
            Code::NotThisRun,
            format!("run {} is a copy; a move job cannot run it", run.id),
        ));
    }
    let source = ends::resolve(&ctx.pool, run.plan.source.node_ref(), h.permits()).await?;
    if run.create_target {
        let target = ends::resolve(&ctx.pool, run.plan.target.node_ref(), h.permits()).await?;
        create_target_queue(&target, &run).await?;
    }
    let spec = StagingSpec { name: staging::staging_queue_name(run.id), batch_size: settings.batch_size };
    staging::prepare(&source.mgmt, &spec).await?;
    // What management cannot show (non-destructive) is checked over Core, with the relay's own credentials:
    // the broker's security settings apply to Core, not to management calls.
    let conn = source.connect(std::time::Duration::from_secs(30)).await?;
    match conn.queue_query(&spec.name).await {
        Ok(Some(info)) => staging::check_core_view(&info, &spec)?,
        Ok(None) => {
            return Err(RelayError::transient(
                Code::Core,
                format!("the staging queue {} is not visible over Core yet", spec.name),
            ))
        }
        Err(e) if e.is_not_authorized() => {
            return Err(staging::StagingError::refused_over_core(&spec.name, &e.to_string()).into())
        }
        Err(e) => return Err(e.into()),
    }
    let _ = conn.close().await;

    let mut tx = ctx.lease.begin().await?;
    row::set_staging(tx.conn(), run.id, &spec.name).await?;
    let mut relay = run.relay.clone();
    relay.prepared = true;
    let mut counters = run.counters.clone();
    if counters.selected.is_none() {
        counters.selected = match &run.plan.selection {
            Selection::Ids(ids) => Some(ids.len() as i64),
            Selection::All => run.selection_size,
            Selection::Filter(_) => run.selection_size,
        };
    }
    row::save(tx.conn(), run.id, &relay, &counters).await?;
    row::event(tx.conn(), run.id, "staging_prepared", json!({ "queue": spec.name, "node": source.label })).await?;
    tx.complete_and_enqueue(&Phase::Relay.job()).await?;
    Ok(Outcome::Committed(tx.commit().await?))
}
