//! A transfer plan: what to move or copy, from where to where, frozen at `t0`. Pure: no I/O.
//!
//! The selection is frozen at preview time `t0`, read from the source broker's clock (SPEC §2): the effective
//! filter adds `AMQTimestamp <= t0` and excludes messages still scheduled for later, with the user's filter
//! always parenthesised, so a run from a queue with a live producer ends.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::registry::ends::NodeRef;

/// Move (the messages leave the source) or copy (the source is untouched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The messages leave the source queue and arrive on the target.
    Move,
    /// The source is untouched; the target gets a faithful copy.
    Copy,
}

/// Which messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value")]
pub enum Selection {
    /// Explicit broker message ids.
    Ids(Vec<i64>),
    /// An Artemis core selector.
    Filter(String),
    /// The whole queue.
    All,
}

/// A queue on a node of a registered cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub struct QueueRef {
    /// The cluster's registered name.
    pub cluster: String,
    /// The node's name within the cluster.
    pub node: String,
    /// The queue (an anycast queue on the address of the same name unless `address` says otherwise).
    pub queue: String,
    /// The queue's address, when it differs from the queue's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

impl QueueRef {
    /// The node that holds the queue, by name.
    pub fn node_ref(&self) -> NodeRef<'_> {
        NodeRef { cluster: &self.cluster, node: &self.node }
    }

    /// The queue's address.
    pub fn address(&self) -> &str {
        self.address.as_deref().unwrap_or(&self.queue)
    }

    /// `cluster/node/queue`, as the CLI spells it.
    pub fn display(&self) -> String {
        format!("{}/{}/{}", self.cluster, self.node, self.queue)
    }
}

/// Where each selected message goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", tag = "kind", content = "queues")]
pub enum Destination {
    /// The plan's target queue.
    #[default]
    Target,
    /// Back to the queue each message was dead-lettered or expired from (the broker's `_AMQ_ORIG_QUEUE`), on the
    /// source's node: a retry from a dead-letter queue. The queues are frozen at preview, each one that exists
    /// there; the selection holds only messages from them (its filter names them).
    OriginalQueues(Vec<QueueRef>),
}

impl Destination {
    /// The plan's target queue (the default, left out of a plan's JSON so the hash of every plan made before
    /// destinations existed is unchanged).
    pub fn is_target(&self) -> bool {
        matches!(self, Destination::Target)
    }
}

/// The broker's property naming the queue a dead-lettered or expired message came from.
pub const ORIGINAL_QUEUE: &str = "_AMQ_ORIG_QUEUE";

/// `'it''s'`: a selector's string literal.
pub fn selector_literal(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// A transfer plan, bound by its hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Plan {
    /// Move or copy.
    pub mode: Mode,
    /// Where the messages are.
    pub source: QueueRef,
    /// Where they go.
    pub target: QueueRef,
    /// Which messages.
    pub selection: Selection,
    /// The selection's freezing time, in milliseconds of the source broker's clock.
    pub t0_millis: i64,
    /// Where each message goes: the target queue, or each one's original queue.
    #[serde(default, skip_serializing_if = "Destination::is_target")]
    pub destination: Destination,
}

/// Whether a user's filter stays inside the parentheses the effective filter puts around it. The broker's
/// grammar would accept `x = 1) OR (1 = 1` and read the effective filter as `(x = 1) OR ((1 = 1) AND <t0 terms>)`,
/// so the selection would escape its freeze; so every parenthesis outside a string literal (`'…'`, a quote
/// doubled inside) must close in order, and every literal must end. The broker still parses the filter (the
/// preview's `countMessages`); this only keeps the freezing terms in force. `Err` says why, in words.
pub fn check_filter_closed(filter: &str) -> Result<(), String> {
    let mut depth = 0i64;
    let mut in_literal = false;
    let mut chars = filter.chars().peekable();
    while let Some(c) = chars.next() {
        match (in_literal, c) {
            (true, '\'') if chars.peek() == Some(&'\'') => {
                chars.next();
            }
            (_, '\'') => in_literal = !in_literal,
            (false, '(') => depth += 1,
            (false, ')') if depth == 0 => {
                return Err("the filter closes a parenthesis it never opened, which would let the selection escape \
                            its freezing time t0"
                    .into())
            }
            (false, ')') => depth -= 1,
            _ => {}
        }
    }
    if in_literal {
        return Err("the filter has a string literal ('…') that never ends".into());
    }
    if depth > 0 {
        return Err(format!("the filter leaves {depth} parenthesis(es) open"));
    }
    Ok(())
}

/// The prefix of staging queues; such queues are never a source or a target.
pub const STAGING_PREFIX: &str = "studio.transfer.";

/// The part of a frozen filter whose messages carry a timestamp: stamped by a producer's clock at or before `t0`,
/// so in the selection however late they were committed (SPEC §2: producer clocks decide). A whole-queue run
/// takes all of it; the count at `t0` never chooses among them.
pub fn stamped_part(frozen_filter: &str) -> String {
    format!("({frozen_filter}) AND AMQTimestamp > 0")
}

/// The part of a frozen filter whose messages carry no timestamp (0, as a JMS producer with
/// `setDisableMessageTimestamp(true)` sends): nothing tells when such a message came, so a whole-queue run takes
/// no more of it than the count at `t0` leaves once everything stamped is taken (`relay::refill`).
pub fn unstamped_part(frozen_filter: &str) -> String {
    format!("({frozen_filter}) AND AMQTimestamp <= 0")
}

/// The rule [`stamped_part`] and [`unstamped_part`] draw, as a whole-queue run obeys it (a move's refills, a copy's
/// room for unstamped messages), in words for the preview.
pub const WHOLE_QUEUE_RULE: &str = "A run of the whole queue takes every message stamped at or before t0, however \
     late its producer committed it; of messages without a timestamp (0: a producer with timestamps disabled) it \
     takes no more than the count at t0 leaves, since nothing tells an earlier one from a later one, and says how \
     many matching ones it left.";

/// Whether a message stamped `timestamp` belongs to [`unstamped_part`].
pub fn is_unstamped(timestamp: i64) -> bool {
    timestamp <= 0
}

impl Plan {
    /// The filter the broker applies: the user's filter (parenthesised), and only messages stamped at or
    /// before `t0` that are not scheduled for later. `None` for an id selection (ids are moved one by one).
    pub fn effective_filter(&self) -> Option<String> {
        let frozen = format!(
            "AMQTimestamp <= {t0} AND (_AMQ_SCHED_DELIVERY IS NULL OR _AMQ_SCHED_DELIVERY <= {t0})",
            t0 = self.t0_millis
        );
        match &self.selection {
            Selection::Ids(_) => None,
            Selection::All => Some(frozen),
            Selection::Filter(f) => Some(format!("({f}) AND {frozen}")),
        }
    }

    /// A retry from the dead-letter queue `source` back to `originals` on its node: every message of `selection`
    /// whose `_AMQ_ORIG_QUEUE` names one of them, each to its own. The selection says so itself (a filter with
    /// the original queues in it), so what is selected, counted and proven at the end is exactly what can go
    /// somewhere; the plan's target is the source's node (its queue is the source's, never written to).
    pub fn retry(source: QueueRef, selection: &Selection, originals: Vec<QueueRef>, t0_millis: i64) -> Plan {
        let names: Vec<String> = originals.iter().map(|q| selector_literal(&q.queue)).collect();
        let from_originals = if names.is_empty() {
            // Nothing can go anywhere (the preview refuses it); still a filter the broker parses.
            format!("{ORIGINAL_QUEUE} IS NULL AND {ORIGINAL_QUEUE} IS NOT NULL")
        } else {
            format!("{ORIGINAL_QUEUE} IN ({})", names.join(", "))
        };
        let selection = match selection {
            Selection::Filter(f) => Selection::Filter(format!("({f}) AND {from_originals}")),
            Selection::All | Selection::Ids(_) => Selection::Filter(from_originals),
        };
        Plan {
            mode: Mode::Move,
            target: source.clone(),
            source,
            selection,
            t0_millis,
            destination: Destination::OriginalQueues(originals),
        }
    }

    /// The queues messages go to: the target, or each original queue of a retry.
    pub fn destinations(&self) -> Vec<&QueueRef> {
        match &self.destination {
            Destination::Target => vec![&self.target],
            Destination::OriginalQueues(queues) => queues.iter().collect(),
        }
    }

    /// Where the messages go, in words: `cluster/node/queue`, or for a retry `cluster/node` and the original
    /// queues.
    pub fn to_words(&self) -> String {
        format!("{}/{}/{}", self.target.cluster, self.target.node, self.target_queue_words())
    }

    /// What a run's target queue is, as its row records it (`transfer_run.target_queue`, which lists and views
    /// show): the target queue's name, or for a retry the original queues in words — never the dead-letter
    /// queue, which a retry's target names only for its node.
    pub fn target_queue_words(&self) -> String {
        match &self.destination {
            Destination::Target => self.target.queue.clone(),
            Destination::OriginalQueues(queues) => {
                let names: Vec<&str> = queues.iter().map(|q| q.queue.as_str()).collect();
                format!("(each message's original queue: {})", names.join(", "))
            }
        }
    }

    /// The broker's filter for the messages of the selection that go to `queue`: the effective filter, and for a
    /// retry only those that came from `queue`. `None` for an id selection.
    pub fn filter_into(&self, queue: &QueueRef) -> Option<String> {
        let effective = self.effective_filter()?;
        Some(match &self.destination {
            Destination::Target => effective,
            Destination::OriginalQueues(_) => {
                format!("({effective}) AND {ORIGINAL_QUEUE} = {}", selector_literal(&queue.queue))
            }
        })
    }

    /// A hash of everything the operator confirms: execute must echo it, so a run never starts on a plan
    /// other than the one previewed.
    pub fn hash(&self) -> String {
        let canonical = serde_json::to_vec(self).expect("a plan serialises");
        let digest = Sha256::digest(&canonical);
        digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }

    /// Same node and same queue: a transfer onto itself. (A retry's target names the source only as its node.)
    pub fn target_is_source(&self) -> bool {
        self.destination.is_target()
            && self.source.cluster == self.target.cluster
            && self.source.node == self.target.node
            && self.source.queue == self.target.queue
    }

    /// Source and target on the same node (the broker's own move, no relay).
    pub fn same_node(&self) -> bool {
        self.source.cluster == self.target.cluster && self.source.node == self.target.node
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_filter_cannot_escape_its_parentheses() {
        assert!(check_filter_closed("region = 'eu' AND (a > 1 OR b < 2)").is_ok());
        assert!(check_filter_closed("name = 'it''s (odd'").is_ok());
        assert!(check_filter_closed("x = ')' OR y = '('").is_ok());
        assert!(check_filter_closed("x = 1) OR (1=1").unwrap_err().contains("escape"));
        assert!(check_filter_closed("(x = 1").unwrap_err().contains("open"));
        assert!(check_filter_closed("x = 'eu").unwrap_err().contains("never ends"));
        assert!(check_filter_closed("x = 'a'') OR (''b'").is_ok(), "the parentheses are inside one literal");
    }

    use super::*;

    fn plan(selection: Selection) -> Plan {
        Plan {
            mode: Mode::Move,
            source: QueueRef { cluster: "east".into(), node: "east-1".into(), queue: "orders".into(), address: None },
            target: QueueRef { cluster: "west".into(), node: "west-1".into(), queue: "orders".into(), address: None },
            selection,
            t0_millis: 1_700_000_000_000,
            destination: Destination::Target,
        }
    }

    #[test]
    fn the_users_filter_is_parenthesised_and_frozen() {
        let f = plan(Selection::Filter("a = 1 OR b = 2".into())).effective_filter().unwrap();
        assert_eq!(
            f,
            "(a = 1 OR b = 2) AND AMQTimestamp <= 1700000000000 AND (_AMQ_SCHED_DELIVERY IS NULL OR \
             _AMQ_SCHED_DELIVERY <= 1700000000000)"
        );
        assert!(plan(Selection::All).effective_filter().unwrap().starts_with("AMQTimestamp <= "));
        assert_eq!(plan(Selection::Ids(vec![1])).effective_filter(), None);
    }

    #[test]
    fn the_hash_binds_every_field() {
        let a = plan(Selection::All);
        let mut b = a.clone();
        assert_eq!(a.hash(), b.hash());
        b.t0_millis += 1;
        assert_ne!(a.hash(), b.hash());
        let mut c = a.clone();
        c.mode = Mode::Copy;
        assert_ne!(a.hash(), c.hash());
        assert_eq!(a.hash().len(), 32);
    }

    #[test]
    fn a_plan_without_a_destination_hashes_as_before_destinations_existed() {
        let a = plan(Selection::All);
        let json = serde_json::to_value(&a).unwrap();
        assert!(json.get("destination").is_none(), "{json}");
        let back: Plan = serde_json::from_value(json).unwrap();
        assert_eq!(back.destination, Destination::Target);
        // The hash of this very plan before the field existed (its JSON as serde wrote it then, hashed by hand).
        assert_eq!(a.hash(), "3498e22bedbda2ea37f048e25cec6224");
    }

    fn on_east(queue: &str) -> QueueRef {
        QueueRef { cluster: "east".into(), node: "east-1".into(), queue: queue.into(), address: None }
    }

    #[test]
    fn a_retry_selects_only_messages_from_its_original_queues_and_sends_each_to_its_own() {
        let originals = vec![on_east("orders"), on_east("it's")];
        let retry = Plan::retry(on_east("DLQ"), &Selection::Filter("x = 1".into()), originals.clone(), 5);
        assert_eq!(retry.mode, Mode::Move);
        assert_eq!(retry.selection, Selection::Filter("(x = 1) AND _AMQ_ORIG_QUEUE IN ('orders', 'it''s')".into()));
        assert!(check_filter_closed(match &retry.selection {
            Selection::Filter(f) => f,
            _ => unreachable!(),
        })
        .is_ok());
        assert!(!retry.target_is_source(), "a retry's target is its node, not a queue it writes to");
        assert!(retry.same_node());
        assert_eq!(retry.to_words(), "east/east-1/(each message's original queue: orders, it's)");
        assert_eq!(plan(Selection::All).to_words(), "west/west-1/orders");
        assert_eq!(retry.destinations(), originals.iter().collect::<Vec<_>>());
        let into = retry.filter_into(&originals[1]).unwrap();
        assert!(into.starts_with("(((x = 1) AND _AMQ_ORIG_QUEUE IN"), "{into}");
        assert!(into.ends_with(") AND _AMQ_ORIG_QUEUE = 'it''s'"), "{into}");
        let all = Plan::retry(on_east("DLQ"), &Selection::All, vec![on_east("orders")], 5);
        assert_eq!(all.selection, Selection::Filter("_AMQ_ORIG_QUEUE IN ('orders')".into()));
        let plain = plan(Selection::All);
        assert_eq!(plain.filter_into(&plain.target), plain.effective_filter());
    }
}
