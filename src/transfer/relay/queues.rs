//! The run's two queues on their live nodes: the source queue's MBean, the target queue created where the run
//! said it would create it, and the target's facts the per-batch guard reads.

use super::state::TransferRun;
use super::Code;
use super::{RelayError, TransferHandler};
use crate::broker::jolokia::{ObjectName, QueueConfig, RoutingType};
use crate::broker::node::NodeAccess;
use crate::jobs::handler::JobContext;
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
    if let Some(target) = h.ends.recent(end.node_ref()) {
        if let Ok(facts) = end_facts(&target.mgmt, end).await {
            if facts.node.as_ref().is_some_and(|n| target.is_live_node(&n.broker)) {
                return Ok((target, facts));
            }
        }
        h.ends.forget_end(end.node_ref());
    }
    let target = ends::resolve_cached(&ctx.pool, end.node_ref(), h.permits(), &h.ends).await?;
    let facts = end_facts(&target.mgmt, end).await?;
    Ok((target, facts))
}
