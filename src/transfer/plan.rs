//! A transfer plan: what to move or copy, from where to where, frozen at `t0`. Pure: no I/O.
//!
//! The selection is frozen at preview time `t0`, read from the source broker's clock (SPEC §2): the effective
//! filter adds `AMQTimestamp <= t0` and excludes messages still scheduled for later, so a run from a queue with a
//! live producer ends. It is built from the syntax tree of the user's filter (`artemis_selector`, ADR 0012):
//! `And(user's tree, freezing terms)`, serialised fully parenthesised — never by wrapping the user's text, which a
//! comment or a stray parenthesis could lift out from under the `AND` (SPEC I9).

use artemis_selector::{CompareOp, Expr};
pub use artemis_selector::{ErrorKind as FilterErrorKind, ParseError as FilterError, Selector};
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

/// The user's filter, read as the broker reads it (the Artemis selector grammar), or where and why it cannot be.
pub fn parse_filter(filter: &str) -> Result<Selector, FilterError> {
    Selector::parse(filter)
}

/// The terms that freeze a selection at `t0`: stamped at or before it, and not scheduled for after it.
pub fn freezing_terms(t0_millis: i64) -> Expr {
    let timestamp = Expr::compare(Expr::property(TIMESTAMP), CompareOp::Le, Expr::integer(t0_millis));
    let not_scheduled_later = Expr::or(
        Expr::is_null(Expr::property(SCHEDULED_DELIVERY)),
        Expr::compare(Expr::property(SCHEDULED_DELIVERY), CompareOp::Le, Expr::integer(t0_millis)),
    );
    Expr::and(timestamp, not_scheduled_later)
}

/// The broker's header of a message's timestamp, as a selector names it.
const TIMESTAMP: &str = "AMQTimestamp";
/// The broker's property of a message's scheduled delivery time.
const SCHEDULED_DELIVERY: &str = "_AMQ_SCHED_DELIVERY";

/// `_AMQ_ORIG_QUEUE = 'queue'`: messages dead-lettered or expired from `queue` (its name a string literal, escaped
/// by the serialiser).
pub fn original_queue_is(queue: &str) -> Expr {
    Expr::compare(Expr::property(ORIGINAL_QUEUE), CompareOp::Eq, Expr::string(queue))
}

/// `selector AND _AMQ_ORIG_QUEUE = 'queue'`: the messages of `selector` dead-lettered or expired from `queue`.
pub fn from_original_queue(selector: Selector, queue: &str) -> Selector {
    selector.and(original_queue_is(queue))
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

/// The prefix of staging queues; such queues are never a source or a target.
pub const STAGING_PREFIX: &str = "studio.transfer.";

/// The part of a frozen selection whose messages carry a timestamp: stamped by a producer's clock at or before
/// `t0`, so in the selection however late they were committed (SPEC §2: producer clocks decide). A whole-queue run
/// takes all of it; the count at `t0` never chooses among them.
pub fn stamped_part(frozen: &Selector) -> String {
    timestamp_part(frozen, CompareOp::Gt)
}

/// The part of a frozen selection whose messages carry no timestamp (0, as a JMS producer with
/// `setDisableMessageTimestamp(true)` sends): nothing tells when such a message came, so a whole-queue run takes
/// such messages only while what it has taken is below the count at `t0` (`relay::refill::frozen_part`).
pub fn unstamped_part(frozen: &Selector) -> String {
    timestamp_part(frozen, CompareOp::Le)
}

/// `frozen AND AMQTimestamp <op> 0`, serialised.
fn timestamp_part(frozen: &Selector, op: CompareOp) -> String {
    frozen.clone().and(Expr::compare(Expr::property(TIMESTAMP), op, Expr::integer(0))).to_string()
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
    /// The tree of the filter the broker applies: the user's filter and the freezing terms under one `AND` (only
    /// messages stamped at or before `t0` that are not scheduled for later). `None` for an id selection (ids are
    /// moved one by one); an error for a filter that cannot be read.
    pub fn frozen_selector(&self) -> Result<Option<Selector>, FilterError> {
        let frozen = freezing_terms(self.t0_millis);
        match &self.selection {
            Selection::Ids(_) => Ok(None),
            Selection::All => Ok(Some(Selector::new(frozen))),
            Selection::Filter(f) => Ok(Some(parse_filter(f)?.and(frozen))),
        }
    }

    /// The filter the broker applies ([`Plan::frozen_selector`]), serialised.
    pub fn effective_filter(&self) -> Result<Option<String>, FilterError> {
        Ok(self.frozen_selector()?.map(|s| s.to_string()))
    }

    /// A retry from the dead-letter queue `source` back to `originals` on its node: every message of `selection`
    /// whose `_AMQ_ORIG_QUEUE` names one of them, each to its own. The selection says so itself (a filter with
    /// the original queues in it), so what is selected, counted and proven at the end is exactly what can go
    /// somewhere; the plan's target is the source's node (its queue is the source's, never written to). The
    /// filter is the tree of the user's and the original queues' term, serialised; an error for a user's filter
    /// that cannot be read.
    pub fn retry(
        source: QueueRef,
        selection: &Selection,
        originals: Vec<QueueRef>,
        t0_millis: i64,
    ) -> Result<Plan, FilterError> {
        let names: Vec<String> = originals.iter().map(|q| q.queue.clone()).collect();
        let original = || Expr::property(ORIGINAL_QUEUE);
        let from_originals = if names.is_empty() {
            // Nothing can go anywhere (the preview refuses it); still a filter the broker parses.
            Expr::and(Expr::is_null(original()), Expr::IsNull { operand: Box::new(original()), negated: true })
        } else {
            Expr::is_in(original(), names)
        };
        let selector = match selection {
            Selection::Filter(f) => parse_filter(f)?.and(from_originals),
            Selection::All | Selection::Ids(_) => Selector::new(from_originals),
        };
        Ok(Plan {
            mode: Mode::Move,
            target: source.clone(),
            source,
            selection: Selection::Filter(selector.to_string()),
            t0_millis,
            destination: Destination::OriginalQueues(originals),
        })
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

    /// The tree of the broker's filter for the messages of the selection that go to `queue`: the frozen selector,
    /// and for a retry only those that came from `queue`. `None` for an id selection.
    pub fn filter_into(&self, queue: &QueueRef) -> Result<Option<Selector>, FilterError> {
        let Some(frozen) = self.frozen_selector()? else {
            return Ok(None);
        };
        Ok(Some(match &self.destination {
            Destination::Target => frozen,
            Destination::OriginalQueues(_) => from_original_queue(frozen, &queue.queue),
        }))
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

    /// A redistribution to a node (SPEC §1): a move into the queue of the same name on another node of the same
    /// cluster — an ordinary cross-node move (staging, relay to the target's FQQN), so nothing but its words
    /// differs.
    pub fn is_redistribution(&self) -> bool {
        self.mode == Mode::Move && self.destination.is_target() && redistributes(&self.source, &self.target)
    }
}

/// Whether a move from `source` to `target` redistributes the queue to a node: the same queue (and address) on
/// another node of the same cluster (SPEC §1, "Redistribute to a node").
pub fn redistributes(source: &QueueRef, target: &QueueRef) -> bool {
    source.cluster == target.cluster
        && source.node != target.node
        && source.queue == target.queue
        && source.address() == target.address()
}

#[cfg(test)]
mod tests {

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
    fn a_redistribution_is_a_move_to_the_same_queue_on_another_node_of_the_same_cluster() {
        let mut p = plan(Selection::All);
        assert!(!p.is_redistribution(), "east to west is a move between clusters");
        p.target = QueueRef { node: "east-2".into(), ..p.source.clone() };
        assert!(p.is_redistribution());
        p.mode = Mode::Copy;
        assert!(!p.is_redistribution(), "a copy leaves the source as it is: nothing is redistributed");
        p.mode = Mode::Move;
        p.target.queue = "elsewhere".into();
        assert!(!p.is_redistribution(), "another queue's name");
        p.target = QueueRef { node: "east-1".into(), ..p.source.clone() };
        assert!(!p.is_redistribution(), "the source node itself");
    }

    #[test]
    fn the_effective_filter_is_the_users_tree_and_the_freezing_terms() {
        let f = plan(Selection::Filter("a = 1 OR b = 2".into())).effective_filter().unwrap().unwrap();
        assert_eq!(
            f,
            "(((a = 1) OR (b = 2)) AND ((AMQTimestamp <= 1700000000000) AND ((_AMQ_SCHED_DELIVERY IS NULL) OR \
             (_AMQ_SCHED_DELIVERY <= 1700000000000))))"
        );
        assert_eq!(
            plan(Selection::All).effective_filter().unwrap().unwrap(),
            Selector::new(freezing_terms(1_700_000_000_000)).to_string()
        );
        assert_eq!(plan(Selection::Ids(vec![1])).effective_filter(), Ok(None));
    }

    /// Issue 27: parentheses balanced outside string literals, but inside comments, which the broker skips. Text
    /// wrapping gave `(x=1 /* ( */) OR (1=1 /* ) */) AND <t0 terms>`, which the broker reads as
    /// `(x=1) OR ((1=1) AND <t0 terms>)`: every `x = 1` message after t0 selected. The parser reads what the broker
    /// reads, `x=1) OR (1=1`, and refuses it where the stray parenthesis is.
    #[test]
    fn a_filter_cannot_escape_its_freeze_through_comments_or_parentheses() {
        for (escape, at) in [
            ("x=1 /* ( */) OR (1=1 /* ) */", 12),
            ("x=1 -- (\n) OR (1=1 -- )\n", 1),
            ("x = 1) OR (1=1", 6),
            ("x = 1 -- ) OR (1=1", 7),
        ] {
            let e = plan(Selection::Filter(escape.into())).effective_filter().unwrap_err();
            assert_eq!(e.column, at, "{escape}: {e}");
            assert!(matches!(e.kind, FilterErrorKind::Expected { .. } | FilterErrorKind::LineCommentWithoutLineBreak));
        }
        // A comment with a parenthesis in it, closed properly, is only a comment.
        let ok = plan(Selection::Filter("x = 1 /* ) OR (1=1 */ AND y = 2 -- (\n".into()));
        let frozen = ok.frozen_selector().unwrap().unwrap();
        assert_eq!(frozen.expr, Expr::and(parse_filter("x = 1 AND y = 2").unwrap().expr, freezing_terms(ok.t0_millis)));
    }

    #[test]
    fn the_stamped_and_unstamped_parts_are_the_frozen_selection_under_one_more_term() {
        let frozen = plan(Selection::Filter("x = 1 /* ) */".into())).frozen_selector().unwrap().unwrap();
        let stamp = |op| Expr::compare(Expr::property("AMQTimestamp"), op, Expr::integer(0));
        assert_eq!(parse_filter(&stamped_part(&frozen)), Ok(frozen.clone().and(stamp(CompareOp::Gt))));
        assert_eq!(parse_filter(&unstamped_part(&frozen)), Ok(frozen.and(stamp(CompareOp::Le))));
    }

    #[test]
    fn the_effective_filter_reads_back_as_the_users_tree_under_the_freezing_terms() {
        for filter in [
            "a = 1 OR b = 2",
            "x = 'it''s (odd' OR y = ')'",
            "NOT a = 1",
            "hyphenated_props:a-b = 1 OR c LIKE 'x%' ESCAPE '!'",
            "region IN ('eu', 'us') AND price BETWEEN -1 AND 0x1F /* ( */",
        ] {
            let p = plan(Selection::Filter(filter.into()));
            let effective = parse_filter(&p.effective_filter().unwrap().unwrap()).unwrap();
            let user = parse_filter(filter).unwrap();
            assert_eq!(effective, user.and(freezing_terms(p.t0_millis)), "{filter}");
        }
    }

    proptest::proptest! {
        /// SPEC I9: whatever the user types, a plan's effective filter is either refused or reads back as the
        /// user's tree under the freezing terms at the top — so every message it matches is frozen at `t0`.
        #[test]
        fn every_effective_filter_implies_the_freezing_terms(
            filter in "([a-z0-9 ()'=<>*/%+,.\n-]|AND|OR|NOT|IN|/\\*|\\*/|--){0,40}",
            t0 in proptest::prelude::any::<i64>(),
        ) {
            let mut p = plan(Selection::Filter(filter.clone()));
            p.t0_millis = t0;
            match (p.effective_filter(), parse_filter(&filter)) {
                (Ok(Some(effective)), Ok(user)) => {
                    proptest::prop_assert_eq!(parse_filter(&effective), Ok(user.and(freezing_terms(t0))));
                }
                (Err(e), Err(same)) => proptest::prop_assert_eq!(e, same),
                (effective, user) => proptest::prop_assert!(false, "{:?} / {:?}", effective, user),
            }
        }
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
        let retry = Plan::retry(on_east("DLQ"), &Selection::Filter("x = 1".into()), originals.clone(), 5).unwrap();
        assert_eq!(retry.mode, Mode::Move);
        assert_eq!(retry.selection, Selection::Filter("((x = 1) AND (_AMQ_ORIG_QUEUE IN ('orders', 'it''s')))".into()));
        assert!(!retry.target_is_source(), "a retry's target is its node, not a queue it writes to");
        assert!(retry.same_node());
        assert_eq!(retry.to_words(), "east/east-1/(each message's original queue: orders, it's)");
        assert_eq!(plan(Selection::All).to_words(), "west/west-1/orders");
        assert_eq!(retry.destinations(), originals.iter().collect::<Vec<_>>());
        let into = retry.filter_into(&originals[1]).unwrap().unwrap();
        assert_eq!(into, from_original_queue(retry.frozen_selector().unwrap().unwrap(), "it's"));
        assert!(into.to_string().ends_with(" AND (_AMQ_ORIG_QUEUE = 'it''s'))"), "{into}");
        let all = Plan::retry(on_east("DLQ"), &Selection::All, vec![on_east("orders")], 5).unwrap();
        assert_eq!(all.selection, Selection::Filter("(_AMQ_ORIG_QUEUE IN ('orders'))".into()));
        let plain = plan(Selection::All);
        assert_eq!(plain.filter_into(&plain.target).unwrap().map(|s| s.to_string()), plain.effective_filter().unwrap());
        let unreadable = Plan::retry(on_east("DLQ"), &Selection::Filter("x = 1) OR (1=1".into()), originals, 5);
        assert!(matches!(unreadable.unwrap_err().kind, FilterErrorKind::Expected { .. }));
    }
}
