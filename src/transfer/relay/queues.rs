//! The run's two queues on their live nodes: the source queue's MBean, the target queue created where the run
//! said it would create it, and the target's facts the per-batch guard reads.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::state::TransferRun;
use super::Code;
use super::{RelayError, TransferHandler};
use crate::broker::core_pool::Link;
use crate::broker::jolokia::{ObjectName, QueueConfig, RoutingType};
use crate::broker::node::NodeAccess;
use crate::jobs::handler::JobContext;
use crate::jobs::model::RunId;
use crate::registry::ends;
use crate::transfer::facts::EndFacts;
use crate::transfer::gather::end_facts;
use crate::transfer::QueueRef;

/// The source queue's MBean name.
pub(crate) fn source_queue_mbean(source: &NodeAccess, run: &TransferRun) -> ObjectName {
    source.mgmt.queue_mbean(run.plan.source.address(), RoutingType::Anycast, &run.plan.source.queue)
}

/// Creates the target queue the preview said the run would create (durable, anycast, no filter): never left
/// to auto-create, because a send to a missing queue is dropped silently.
pub(crate) async fn create_target_queue(target: &NodeAccess, run: &TransferRun) -> Result<(), RelayError> {
    let queue = &run.plan.target;
    let mut config = QueueConfig::plain_anycast(&queue.queue);
    config.address = queue.address().to_string();
    match target.mgmt.create_queue(&config).await {
        Ok(_) => Ok(()),
        // A resumed run, or a queue someone made since the preview: the batch guard checks what it is.
        Err(e) if e.to_string().contains("AMQ229019") || e.to_string().to_lowercase().contains("already exists") => {
            Ok(())
        }
        Err(e) => Err(RelayError::transient_in(
            Code::Management,
            &format!("creating the target queue {}", queue.display()),
            e,
        )),
    }
}

/// The target end and the guard's facts about it. The end resolved recently is asked first, and the same
/// batched read that brings the facts says whether it is still the node's live broker (its NodeID and
/// `Active`): the re-resolve of step 1 costs no request of its own unless the node failed over.
pub(crate) async fn target_facts(
    h: &TransferHandler,
    ctx: &JobContext,
    end: &QueueRef,
) -> Result<(NodeAccess, EndFacts), RelayError> {
    target_facts_in(h, &ctx.pool, end).await
}

/// [`target_facts`] with the registry's pool given, for a read that outlives the borrow of its job's context.
pub(crate) async fn target_facts_in(
    h: &TransferHandler,
    pool: &sqlx::PgPool,
    end: &QueueRef,
) -> Result<(NodeAccess, EndFacts), RelayError> {
    if let Some(target) = h.ends.recent(end.node_ref()) {
        if let Ok(facts) = end_facts(&target.mgmt, end).await {
            if facts.node.as_ref().is_some_and(|n| target.is_live_node(&n.broker)) {
                return Ok((target, facts));
            }
        }
        h.ends.forget_end(end.node_ref());
    }
    let target = ends::resolve_cached(pool, end.node_ref(), h.permits(), &h.ends).await?;
    let facts = end_facts(&target.mgmt, end).await?;
    Ok((target, facts))
}

/// The source end and a Core connection to it. The end resolved recently with an idle connection to it that its
/// broker has not dropped needs no management read to say it is still the node's live broker: a failover, a
/// restart or a shutdown closes every connection the broker held. Otherwise the end is resolved (asked whether it
/// is still live, or walked afresh) and connected to.
pub(crate) async fn source_end(
    h: &TransferHandler,
    ctx: &JobContext,
    end: ends::NodeRef<'_>,
    ttl: Duration,
) -> Result<(NodeAccess, Link), RelayError> {
    if let Some(source) = h.ends.recent(end) {
        if let Some(link) = h.links.take_idle(&source, ttl) {
            return Ok((source, link));
        }
    }
    let source = ends::resolve_cached(&ctx.pool, end, h.permits(), &h.ends).await?;
    let link = h.links.take(&source, ttl).await?;
    Ok((source, link))
}

/// How long the target's facts read for a run's next batch may serve it: the next batch of a run at full speed
/// starts within milliseconds of its predecessor's record, and a paced one later than this reads its own.
pub(crate) const AHEAD_FRESH: Duration = Duration::from_millis(500);

/// The target's facts read for a run's next batch while its predecessor records — after that batch's target
/// commit, so "capacity is re-checked before every batch" holds of them (the read that gates a batch follows the
/// previous batch's commit) — and handed to the next batch's job when this worker runs it soon enough.
#[derive(Debug, Default)]
pub(crate) struct FactsAhead {
    read: Mutex<HashMap<(RunId, i64), (Instant, TargetRead)>>,
}

/// The target end and its facts, as the guard reads them.
pub(crate) type TargetRead = (NodeAccess, EndFacts);

impl FactsAhead {
    /// Keeps what was read, from `since` (when the read began), for the run's job of sequence `seq`; what no job
    /// took in time is dropped.
    pub(crate) fn keep(&self, run: RunId, seq: i64, since: Instant, read: TargetRead) {
        let mut kept = self.read.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|_, (at, _)| at.elapsed() < AHEAD_FRESH);
        kept.insert((run, seq), (since, read));
    }

    /// What was read ahead for the run's job of sequence `seq`, if it is still fresh.
    pub(crate) fn take(&self, run: RunId, seq: i64) -> Option<TargetRead> {
        let mut kept = self.read.lock().unwrap_or_else(|e| e.into_inner());
        let (at, read) = kept.remove(&(run, seq))?;
        (at.elapsed() < AHEAD_FRESH).then_some(read)
    }
}
