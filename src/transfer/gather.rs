//! Reads the facts a preview needs: **one batched Jolokia request per node** (the source's and the target's
//! reads share one request when both ends are on the same node), plus a TCP probe of each Core acceptor, which
//! costs the broker no management call.
//!
//! Every read that fails leaves its fact `None` (unknown). A node that does not answer at all leaves its end's
//! `node` `None`.

use std::time::Duration;

use serde_json::{json, Value};

use super::facts::{EndFacts, Facts, NodeFacts, QueueFacts};
use super::plan::{parse_filter, Plan, QueueRef, Selection};
use crate::broker::jolokia::{
    AddressSettings, AgentError, AgentErrorKind, BrokerManagement, BrokerState, HeapUsage, JolokiaError, ObjectName,
    QueueState, Request, RoutingType,
};

/// One end's access: its management client and its Core acceptor's address (`host:port`).
#[derive(Debug, Clone, Copy)]
pub struct EndAccess<'a> {
    /// Jolokia management of the node.
    pub management: &'a BrokerManagement,
    /// `host:port` of the node's Core acceptor, when registered.
    pub core_addr: Option<&'a str>,
}

/// What Postgres knows about other runs on these queues (`None` = could not be read).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunFacts {
    /// Another run is active on the source queue.
    pub source_has_active_run: Option<bool>,
    /// The target queue is the source of another active run.
    pub target_is_source_of_active_run: Option<bool>,
    /// Other active runs writing into the target address.
    pub runs_into_target_address: Option<i64>,
}

/// The requests one end contributes to its node's batch, in this order: queue, the filtered count (source only),
/// the broker's state **right after the count**, address settings, address, and the JVM's heap (source only: a
/// filtered move over a paged queue is paid for in the source broker's heap). Jolokia runs a batch in order, so
/// the broker clock is read at or after every count: whatever was counted was stamped at or before that `t0`.
fn end_requests(mgmt: &BrokerManagement, q: &QueueRef, count_filter: Option<&str>, with_heap: bool) -> Vec<Request> {
    let address = q.address();
    // The count (the queue's MessageCount, or countMessages of a filter) and the broker's clock are read one right
    // after the other, so that few messages arrive between them: one that does is stamped at or before t0 but not
    // counted. A run takes it all the same (it is in the frozen selection) and its end says how many such it took
    // (`Counters::taken_beyond_count`); a transacted producer's messages stamped before the count but committed
    // after it are the same case, and no order of reads closes that (ADR 0009).
    let mut requests = vec![mgmt.queue_state_request(address, RoutingType::Anycast, &q.queue)];
    if let Some(filter) = count_filter {
        // Also how the broker tells us a selector is invalid, in its own words: we never parse selectors.
        requests.push(Request::exec(
            mgmt.queue_mbean(address, RoutingType::Anycast, &q.queue),
            "countMessages(java.lang.String)",
            vec![json!(filter)],
        ));
    }
    requests.push(mgmt.broker_state_request());
    requests.push(mgmt.address_settings_request(address));
    requests.push(Request::read_lenient(ObjectName::address(mgmt.broker_name(), address), &["AddressSize", "Paging"]));
    if with_heap {
        requests.push(mgmt.heap_request());
    }
    requests
}

/// What one end's batch said.
struct EndAnswer {
    end: EndFacts,
    /// `countMessages(filter)` (source only), or the broker's refusal of the filter.
    count: Option<Result<i64, AgentError>>,
}

fn end_answer(results: &[Result<Value, AgentError>], with_count: bool, with_heap: bool) -> EndAnswer {
    let get = |i: usize| results.get(i);
    // Where each answer is: the order of `end_requests`.
    let c = usize::from(with_count);
    let (at_broker, at_settings, at_address, at_heap) = (1 + c, 2 + c, 3 + c, 4 + c);
    let queue = match get(0) {
        Some(Ok(v)) => Some(Some(QueueState::from_read(v))),
        Some(Err(e)) if e.kind == AgentErrorKind::NotFound => Some(None),
        _ => None,
    };
    let settings = match get(at_settings) {
        Some(Ok(Value::String(s))) => serde_json::from_str(s).ok().map(AddressSettings::from_json),
        Some(Ok(v @ Value::Object(_))) => Some(AddressSettings::from_json(v.clone())),
        _ => None,
    };
    let (address_size, paging) = match get(at_address) {
        Some(Ok(v)) => (v["AddressSize"].as_i64(), v["Paging"].as_bool()),
        // An address that does not exist holds nothing and does not page.
        Some(Err(e)) if e.kind == AgentErrorKind::NotFound && queue == Some(None) => (Some(0), Some(false)),
        _ => (None, None),
    };
    let count = if with_count {
        match get(1) {
            Some(Ok(v)) => v.as_i64().map(Ok),
            Some(Err(e)) => Some(Err(e.clone())),
            None => None,
        }
    } else {
        None
    };
    let heap = match with_heap.then(|| get(at_heap)).flatten() {
        Some(Ok(v)) => HeapUsage::from_read(v),
        _ => None,
    };
    let broker = match get(at_broker) {
        Some(Ok(v)) => Some(BrokerState::from_read(v)),
        _ => None,
    };
    EndAnswer {
        end: EndFacts {
            node: broker.map(|broker| NodeFacts { broker, core_acceptor: None, heap }),
            queue: QueueFacts { queue, settings, address_size, paging },
        },
        count,
    }
}

/// `Some(true)` when the Core acceptor accepts a TCP connection, `Some(false)` when it refuses one, `None`
/// when it does not answer in time or no address is registered.
async fn probe_core(addr: Option<&str>) -> Option<bool> {
    let addr = addr?;
    match tokio::time::timeout(Duration::from_secs(3), tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Some(true),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some(false),
        _ => None,
    }
}

/// Reads every fact of `plan` from the two nodes. `plan.t0_millis` is not used: the source broker's clock,
/// read right after the count in its batch, is in `facts.source.node.broker.current_time_millis` for the caller to
/// freeze the plan at. A filter is counted as its syntax tree reads (serialised: what the run applies, without the
/// freezing terms): counting happens before that clock read, and the broker's count never includes scheduled
/// messages, so the count is that of the frozen filter. A filter that cannot be read is not counted (the preview
/// refuses it, `preview::filter_refusal`).
pub async fn gather(plan: &Plan, source: EndAccess<'_>, target: EndAccess<'_>, runs: RunFacts) -> Facts {
    let filter = match &plan.selection {
        Selection::Filter(f) => parse_filter(f).ok().map(|s| s.to_string()),
        _ => None,
    };
    let source_requests = end_requests(source.management, &plan.source, filter.as_deref(), true);
    let target_requests = end_requests(target.management, &plan.target, None, false);
    let n_source = source_requests.len();

    let (source_results, target_results) = if plan.same_node() {
        let all: Vec<Request> = source_requests.into_iter().chain(target_requests).collect();
        match source.management.batch(&all).await {
            Ok(mut results) => {
                let target = results.split_off(n_source);
                (Some(results), Some(target))
            }
            Err(_) => (None, None),
        }
    } else {
        let (s, t) = tokio::join!(source.management.batch(&source_requests), target.management.batch(&target_requests));
        (s.ok(), t.ok())
    };
    let (source_core, target_core) = tokio::join!(probe_core(source.core_addr), probe_core(target.core_addr));

    let mut facts = Facts { same_cluster: plan.source.cluster == plan.target.cluster, ..Facts::default() };
    facts.source_has_active_run = runs.source_has_active_run;
    facts.target_is_source_of_active_run = runs.target_is_source_of_active_run;
    facts.runs_into_target_address = runs.runs_into_target_address;
    if let Some(results) = source_results {
        let answer = end_answer(&results, filter.is_some(), true);
        facts.source = answer.end;
        match answer.count {
            Some(Ok(n)) => facts.filtered_count = Some(n),
            Some(Err(e))
                if e.message.contains("AMQ229020")
                    || e.error_type.as_deref().is_some_and(|t| t.contains("InvalidFilter")) =>
            {
                facts.filter_error = Some(e.message)
            }
            _ => {}
        }
    }
    if let Some(results) = target_results {
        facts.target = end_answer(&results, false, false).end;
    }
    if let Some(node) = facts.source.node.as_mut() {
        node.core_acceptor = source_core;
    }
    if let Some(node) = facts.target.node.as_mut() {
        node.core_acceptor = target_core;
    }
    facts
}

/// The facts of one end alone, in one batched request: what a relay batch re-checks about its target before
/// sending (SPEC §4.2 step 1). `Err` when the node did not answer the batch at all.
pub async fn end_facts(management: &BrokerManagement, queue: &QueueRef) -> Result<EndFacts, JolokiaError> {
    let results = management.batch(&end_requests(management, queue, None, false)).await?;
    Ok(end_answer(&results, false, false).end)
}
