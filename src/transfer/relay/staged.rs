//! Staging as a batch sees it over Core: what it holds (a browse, which carries every legal message), how deep it
//! is, and whether anything but this run's batch consumes from it.

use std::collections::HashSet;
use std::time::Duration;

use chrono::Utc;
use serde_json::json;

use super::row;
use super::state::TransferRun;
use super::Code;
use super::{RelayConfig, RelayError};
use crate::jobs::handler::{JobContext, Outcome};
use crate::transfer::staging;

/// How long a batch waits before looking again when staging's messages are still held by a consumer that
/// has gone (the broker gives them back when that connection's TTL runs out).
pub(crate) const HELD_ELSEWHERE_RETRY: Duration = Duration::from_secs(2);

/// Staging has a consumer although no batch of this run is receiving (each batch closes its consumer): the
/// consumer of a worker that died, which the broker drops within the connection TTL — then wait — or another
/// client's, which takes messages the run can no longer account for — then, once it outlasts every worker's TTL
/// (`FOREIGN_CONSUMER_GRACE` × the TTL), stop the run saying so. `None`: no consumer, go on.
pub(crate) async fn check_staging_consumers(
    ctx: &JobContext,
    run: &mut TransferRun,
    conn: &artemis_core::Connection,
    staging_queue: &str,
    config: &RelayConfig,
) -> Result<Option<Outcome>, RelayError> {
    let consumers = conn.queue_query(staging_queue).await?.map_or(0, |q| q.consumer_count);
    if consumers == 0 {
        if run.relay.foreign_consumer_since.take().is_some() {
            let mut tx = ctx.lease.begin().await?;
            row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
            tx.commit_progress().await?;
        }
        return Ok(None);
    }
    let now = Utc::now();
    let since = *run.relay.foreign_consumer_since.get_or_insert(now);
    let grace = chrono::Duration::from_std(config.connection_ttl * FOREIGN_CONSUMER_GRACE).unwrap_or_default();
    let mut tx = ctx.lease.begin().await?;
    row::save(tx.conn(), run.id, &run.relay, &run.counters).await?;
    if now - since >= grace {
        let reason = format!(
            "staging {staging_queue} has had {consumers} consumer(s) that are not this run's for {} s: messages \
            they take are on neither the source nor the target, and the run cannot tell them from delivered ones. \
            Find and stop that client (the broker's consumer list of {staging_queue} names its connection), then \
            resume or return; grant consume on studio.transfer.# to the product's broker user alone",
            (now - since).num_seconds()
        );
        row::event(tx.conn(), run.id, "foreign_consumer", json!({ "queue": staging_queue, "consumers": consumers }))
            .await?;
        tx.commit_progress().await?;
        return Ok(Some(Outcome::Stop { reason }));
    }
    tx.commit_progress().await?;
    Ok(Some(Outcome::Snooze {
        until: now + chrono::Duration::from_std(HELD_ELSEWHERE_RETRY).unwrap_or_default(),
        reason: format!(
            "staging {staging_queue} has {consumers} consumer(s) that are not this batch's: a previous worker's, \
            which the broker drops when its connection times out, or another client's"
        ),
    }))
}

/// How many connection TTLs a consumer on staging that is not a batch's own may last before the run stops: a dead
/// worker's is gone after one.
const FOREIGN_CONSUMER_GRACE: u32 = 3;

/// What staging holds as a Core browse sees it (see [`list_staging`]).
#[derive(Debug, Default)]
pub(crate) struct StagingListing {
    /// Each message's staging id.
    pub(crate) ids: HashSet<i64>,
    /// The source id the broker's move recorded on each (`_AMQ_ORIG_MESSAGE_ID`), where it did.
    pub(crate) original_ids: HashSet<i64>,
}

/// What staging holds but its messages in delivery ([`staging::list_over_core`]): the relay's own consumer may not
/// browse it, which the broker's words say with the snippet.
pub(crate) async fn list_staging(
    conn: &artemis_core::Connection,
    staging_queue: &str,
) -> Result<StagingListing, RelayError> {
    let listed = match staging::list_over_core(conn, staging_queue).await {
        Ok(listed) => listed,
        Err(e) if e.is_not_authorized() => {
            return Err(staging::StagingError::refused_over_core(staging_queue, &e.to_string()).into())
        }
        Err(e) => return Err(e.into()),
    };
    Ok(StagingListing {
        ids: listed.iter().map(|m| m.id).collect(),
        original_ids: listed.iter().filter_map(|m| m.original_id).collect(),
    })
}

/// Messages staging holds, those in delivery included (a Core queue query: no management permit).
pub(crate) async fn staging_depth(conn: &artemis_core::Connection, staging_queue: &str) -> Result<i64, RelayError> {
    match conn.queue_query(staging_queue).await? {
        Some(info) => Ok(info.message_count),
        None => Err(RelayError::refused(
            Code::StagingGone,
            format!(
                "the staging queue {staging_queue} is gone from the source broker: whatever it held is no longer \
             traceable by this run (was it deleted by hand?)"
            ),
        )),
    }
}
