//! What the preview knows about the two ends: a record of facts read from the brokers (one batched Jolokia
//! request per node). Every field is an `Option`: `None` means **unknown** — a node or attribute did not
//! answer — and the preview says "could not be checked", never "fine".

use crate::broker::jolokia::{AddressSettings, BrokerState, HeapUsage, QueueState};

/// Facts about one node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    /// HA state, identity, clock, duplicate-id cache and disk, from the broker MBean.
    pub broker: BrokerState,
    /// Whether the node has a Core acceptor the relay can reach (`None`: not known).
    pub core_acceptor: Option<bool>,
    /// The broker JVM's heap: what a filtered move over a paged queue reads back into memory must fit in it.
    pub heap: Option<HeapUsage>,
}

/// Facts about one queue and its address on a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueFacts {
    /// `Some(None)`: the queue does not exist; `None`: whether it exists is unknown.
    pub queue: Option<Option<QueueState>>,
    /// The merged address settings (defaults filled in).
    pub settings: Option<AddressSettings>,
    /// The address's `AddressSize` (bytes in memory, which drives paging and blocking).
    pub address_size: Option<i64>,
    /// The address's `Paging`.
    pub paging: Option<bool>,
}

impl QueueFacts {
    /// The queue's state when it is known to exist.
    pub fn state(&self) -> Option<&QueueState> {
        self.queue.as_ref().and_then(Option::as_ref)
    }
}

/// One end of the transfer. `node: None` means the node did not answer at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndFacts {
    /// The node, when it answered.
    pub node: Option<NodeFacts>,
    /// The queue and its address.
    pub queue: QueueFacts,
}

impl EndFacts {
    /// How many duplicate ids the end's node keeps for the queue's address; see [`duplicate_cache_size`].
    pub fn duplicate_cache_size(&self) -> Option<i64> {
        duplicate_cache_size(&self.node.as_ref()?.broker, self.queue.settings.as_ref())
    }
}

/// How many duplicate ids a broker keeps for an address: the address setting's `id-cache-size` when it has one
/// (per address from 2.31), else the broker-wide `id-cache-size`. `None`: unknown (the settings were not read).
pub fn duplicate_cache_size(broker: &BrokerState, settings: Option<&AddressSettings>) -> Option<i64> {
    match settings {
        Some(s) => s.id_cache_size.or(broker.id_cache_size),
        None => None,
    }
}

/// Everything the preview evaluates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The source end.
    pub source: EndFacts,
    /// The target end.
    pub target: EndFacts,
    /// For a filter selection on a queue no deeper than its `management-browse-page-size`: the broker's
    /// `countMessages(effective filter)`, which is exact there. `None` otherwise.
    pub filtered_count: Option<i64>,
    /// For a filter selection: the frozen selection as a Core browse of the source counted it, at any depth
    /// (`broker::count`): exact, or at least so many where the browse stopped at the preview's limit. `None`: not
    /// browsed (the source could not be reached over Core, or its queue or filter was refused).
    pub browsed: Option<crate::broker::count::Counted>,
    /// The broker's words when it refused the selection's filter (it parses selectors; we never do).
    pub filter_error: Option<String>,
    /// Whether the target queue is the source of another active run (two runs would ping-pong messages).
    pub target_is_source_of_active_run: Option<bool>,
    /// How many other active runs write into the target address on the target node: they share its duplicate-id
    /// cache (ADR 0010).
    pub runs_into_target_address: Option<i64>,
    /// Whether the source queue already has an active run (at most one per source queue on a node).
    pub source_has_active_run: Option<bool>,
    /// Whether source and target nodes belong to the same cluster.
    pub same_cluster: bool,
}
