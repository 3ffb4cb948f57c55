//! What the target receives (docs/guarantees.md, "What the target receives"): the headers of a relayed message, rebuilt from the message received from
//! staging (a move) or browsed from the source (a copy).
//!
//! **Kept as received:** the type byte, durability, priority, expiration (a move's staged message already had it
//! cleared by the broker's move, so what the received message has is what the target gets), timestamp, the
//! userID (JMSMessageID), and every property that is not broker bookkeeping, with its type: group id and
//! sequence, correlation id, reply-to, JMS type, last-value key, content type, AMQP-origin properties and every
//! application property. Delivery counts are not in a Core message (they are the receive packet's trailer), so
//! nothing carries them over.
//!
//! **Removed:** the broker bookkeeping of [`BOOKKEEPING`], each with its reason, among them
//! `_AMQ_VALIDATED_USER`, which is never forwarded.
//!
//! **Replaced or added:** the address becomes the target FQQN `address::queue` (the cluster cannot route it to
//! another queue of the address); the message id is 0 (the target broker assigns its own); `_AMQ_ROUTING_TYPE`
//! is the target queue's routing type (the broker's move removes it from a staged copy); `_AMQ_DUPL_ID` is
//! [`duplicate_id`]; and the five trace properties of [`trace`] say where the message came from. The target
//! broker stores the FQQN as the message's address, so its consumers see `address::queue` (a Java consumer's
//! JMSDestination `queue://address::queue`), as they would for the Java client's own FQQN sends.
//!
//! **Large and compressed bodies.** The body is never touched here. The relay sends a regular message as
//! `CoreMessage { headers, body }` and a large one spooled to disk with `Producer::send_large_from(&headers,
//! file)`; the same headers are right for both:
//! - The artemis-core consumer hands over a compressed body exactly as stored: the zlib bytes, with
//!   `_AMQ_LARGE_COMPRESSED = true` and `_AMQ_LARGE_SIZE` = the uncompressed size. Those two properties are
//!   therefore **kept** on a compressed message: they describe the body that travels, not the source broker's
//!   storage. Without `_AMQ_LARGE_COMPRESSED` the target would hand consumers zlib bytes as the body; and the
//!   producer announces `_AMQ_LARGE_SIZE` as the last chunk's `messageBodySize`, which the target stores as the
//!   message's `_AMQ_LARGE_SIZE` (without it, the compressed size would be announced). A regular-sized
//!   compressed message (Java sends one when the zlib stream fits under its threshold) needs both too: the Java
//!   consumer inflates it because of them.
//! - On an uncompressed message every `_AMQ_LARGE_*` is removed: the target broker stores `_AMQ_LARGE_SIZE`
//!   itself, from the bytes sent, whenever the message arrives as a large one.
//! - `Producer::prepare_headers` sets the message id to 0 (already 0 here) and, **if the producer is bound to
//!   an address, replaces the address with it**: send with an unbound producer (`session.producer(None)`) or
//!   one bound to the same FQQN, never one bound to the plain address.

use artemis_core::admin::RoutingType;
use artemis_core::message::{names, MessageHeaders, PropertyValue, SimpleString};
use uuid::Uuid;

use crate::transfer::Mode;

/// The trace properties added to every relayed message (docs/guarantees.md, "What the target receives").
///
/// Names are STRING properties so selectors on the target can match them (`_studio_orig_queue = 'orders'`); the
/// id is a LONG, the type of the broker's own `_AMQ_ORIG_MESSAGE_ID`, so numeric selectors work on it.
pub mod trace {
    /// STRING: the run id, lowercase hyphenated (`Uuid`'s `Display`).
    pub const TRANSFER_RUN: &str = "_studio_transfer_run";
    /// LONG: the message's id on the source broker. Absent when unknown (see [`super::outbound_headers`]).
    pub const ORIG_MESSAGE_ID: &str = "_studio_orig_message_id";
    /// STRING: the source cluster.
    pub const ORIG_CLUSTER: &str = "_studio_orig_cluster";
    /// STRING: the source node.
    pub const ORIG_NODE: &str = "_studio_orig_node";
    /// STRING: the source queue's name.
    pub const ORIG_QUEUE: &str = "_studio_orig_queue";

    /// All five. A message relayed a second time (moved on from a queue an earlier run filled) carries the
    /// trace of its latest relay only: the old values are removed first, so an unknown id never shows a stale
    /// one.
    pub const ALL: [&str; 5] = [TRANSFER_RUN, ORIG_MESSAGE_ID, ORIG_CLUSTER, ORIG_NODE, ORIG_QUEUE];
}

/// Where a relayed message came from: the values of the trace properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The run.
    pub run: Uuid,
    /// The source cluster's name.
    pub cluster: String,
    /// The source node's name.
    pub node: String,
    /// The source queue's name as the broker names it (not an FQQN): for a move, it is compared with the
    /// staging copy's `_AMQ_ORIG_QUEUE`.
    pub queue: String,
}

/// The target queue: sent to the FQQN so the cluster cannot route it elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundTarget {
    /// The target address.
    pub address: String,
    /// The target queue on that address.
    pub queue: String,
    /// The target queue's routing type.
    pub routing: RoutingType,
}

impl OutboundTarget {
    /// `address::queue`.
    pub fn fqqn(&self) -> String {
        format!("{}::{}", self.address, self.queue)
    }
}

/// The headers to send and what the run view needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outbound {
    /// The target's headers (the body is sent unchanged beside them).
    pub headers: MessageHeaders,
    /// The message's id on the source broker, also in `_studio_orig_message_id`; `None` when unknown (a move's
    /// staging copy without a trustworthy `_AMQ_ORIG_MESSAGE_ID`), which the run view shows.
    pub original_message_id: Option<i64>,
}

/// How a bookkeeping property is recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// This exact name.
    Exact,
    /// Every name starting with this.
    Prefix,
}

/// One rule of [`BOOKKEEPING`]: a property the target must not receive from the source, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bookkeeping {
    /// The name or prefix.
    pub name: &'static str,
    /// Exact name or prefix.
    pub matching: Match,
    /// Why it does not travel.
    pub why: &'static str,
}

impl Bookkeeping {
    /// `true` if this rule covers property `name`.
    pub fn covers(&self, name: &SimpleString) -> bool {
        match self.matching {
            Match::Exact => name.eq_str(self.name),
            Match::Prefix => name.starts_with_str(self.name),
        }
    }
}

const fn exact(name: &'static str, why: &'static str) -> Bookkeeping {
    Bookkeeping { name, matching: Match::Exact, why }
}

const fn prefix(name: &'static str, why: &'static str) -> Bookkeeping {
    Bookkeeping { name, matching: Match::Prefix, why }
}

/// `_AMQ_LARGE_` — `_AMQ_LARGE_COMPRESSED` and `_AMQ_LARGE_SIZE`; kept on a compressed message (module doc).
const LARGE_PREFIX: &str = "_AMQ_LARGE_";

/// The broker bookkeeping the target never receives from the source, checked against Artemis' `Message.java`
/// (`HDR_*`, `INTERNAL_PROPERTY_NAMES_PREDICATE`, `AMQP_PROPERTY_PREDICATE`), `MessageUtil.java` and the
/// federation's `HDR_HOPS`. The properties this module sets itself (`_AMQ_DUPL_ID`, `_AMQ_ROUTING_TYPE`, the
/// trace) are removed before they are set, so the source's values never survive.
///
/// Deliberately **kept**: `_AMQ_GROUP_ID`/`_AMQ_GROUP_SEQUENCE` (JMSXGroupID/Seq), `_AMQ_LVQ_NAME` (the
/// last-value key), `_AMQ_CONTENT_TYPE`, `JMSCorrelationID`, `JMSReplyTo`, `JMSType`, the `JMS_AMQP_*`
/// properties of an AMQP-origin message (a later Core→AMQP conversion needs them), and the management
/// properties (`_AMQ_ResourceName`, `_AMQ_NotifType`, …) of a management or notification message, which are its
/// content.
pub const BOOKKEEPING: &[Bookkeeping] = &[
    prefix(
        "_AMQ_ORIG_",
        "where the broker's own move, DLQ or expiry took the message from (address, queue, id, routing type): \
         on the target they would name another broker's queue; the trace properties say it instead",
    ),
    prefix(
        names::ROUTE_TO_IDS,
        "internal queue ids of the source broker to route to directly (and the cluster's `_AMQ_ROUTE_TO<name>` \
         variants): the target would route to whatever queue has that id there, or nowhere",
    ),
    prefix(names::ROUTE_TO_ACK_IDS, "the source cluster's internal ack-routing ids (same danger as `_AMQ_ROUTE_TO`)"),
    prefix(names::SCALEDOWN_TO_IDS, "the source cluster's scale-down target ids"),
    prefix(names::BRIDGE_DUPLICATE_ID, "a core bridge's duplicate id on the source side"),
    exact(names::ACTUAL_EXPIRY, "when the source broker expired the message"),
    prefix(
        LARGE_PREFIX,
        "how the source broker stored the body; kept only on a compressed body, which travels compressed",
    ),
    exact(
        names::SCHEDULED_DELIVERY_TIME,
        "a schedule on the source (scheduled messages are not taken; one that was is delivered now)",
    ),
    exact(
        names::INGRESS_TIMESTAMP,
        "when the message reached the source broker; a target that records ingress stamps its own",
    ),
    exact(names::CONNECTION_ID, "the producing JMS connection's id, for noLocal: no connection of the target has it"),
    exact(
        names::VALIDATED_USER,
        "never forwarded: it would let the relay speak for another user (the target stamps the relay's own user \
         when it populates validated users)",
    ),
    exact(
        names::PREFIX,
        "the acceptor prefix (e.g. STOMP's) the source address was written with: the target address is the FQQN",
    ),
    exact("_AMQ_Hops", "the source federation's hop count: on the target the message starts a new journey"),
    prefix(
        "x-opt-amq",
        "AMQP annotations the broker's mirror uses internally; brokers strip them on every route that is not a \
         mirror's",
    ),
    exact(names::DUPLICATE_ID, "the source's duplicate id: replaced by the run's (`duplicate_id`)"),
    exact(names::ROUTING_TYPE, "the source's routing type: replaced by the target queue's"),
];

/// `studio:<run id>:<message id>`: the target's duplicate id. For a move, `message_id` is the staging message's
/// id (the broker's move gives each staged message a new id, and a redelivery from staging keeps it); for a copy,
/// the source message's id. The target's duplicate cache then drops a resend of the same batch.
pub fn duplicate_id(run: Uuid, message_id: i64) -> String {
    format!("studio:{run}:{message_id}")
}

/// Builds the target's headers from a message received from staging ([`Mode::Move`]) or browsed from the source
/// ([`Mode::Copy`]); `received_id` is that message's id on the broker it was received from.
///
/// The original id: for a copy, `received_id`. For a move, the staging copy's `_AMQ_ORIG_MESSAGE_ID`, trusted
/// only when its `_AMQ_ORIG_QUEUE` names `origin.queue`. The broker's move sets both together (seen live: the
/// source queue's name and the source id); docs/guarantees.md, "What the target receives" says it drops them for paged large messages, and a pair
/// still there from an earlier DLQ or move of the same message would name another queue and another id.
/// Otherwise the id is unknown: `original_message_id` is `None` and `_studio_orig_message_id` is absent (never
/// a stale value).
///
/// Works for regular and large sends alike; see the module doc for compressed bodies and for the producer to
/// send with.
pub fn outbound_headers(
    received: &MessageHeaders,
    received_id: i64,
    mode: Mode,
    target: &OutboundTarget,
    origin: &Origin,
) -> Outbound {
    let original_message_id = match mode {
        Mode::Copy => Some(received_id),
        Mode::Move => staged_original_id(received, &origin.queue),
    };
    let compressed = received.is_compressed();
    let mut properties = received.properties.clone();
    properties.retain(|name, _| {
        if compressed && (name.eq_str(names::LARGE_COMPRESSED) || name.eq_str(names::LARGE_BODY_SIZE)) {
            return true;
        }
        !BOOKKEEPING.iter().any(|rule| rule.covers(name)) && !trace::ALL.iter().any(|t| name.eq_str(t))
    });
    let dup = duplicate_id(origin.run, received_id);
    properties.insert(names::DUPLICATE_ID, PropertyValue::String(dup.as_str().into()));
    properties.insert(names::ROUTING_TYPE, PropertyValue::Byte(target.routing.code()));
    properties.insert(trace::TRANSFER_RUN, PropertyValue::String(origin.run.to_string().into()));
    if let Some(id) = original_message_id {
        properties.insert(trace::ORIG_MESSAGE_ID, PropertyValue::Long(id));
    }
    properties.insert(trace::ORIG_CLUSTER, PropertyValue::String(origin.cluster.as_str().into()));
    properties.insert(trace::ORIG_NODE, PropertyValue::String(origin.node.as_str().into()));
    properties.insert(trace::ORIG_QUEUE, PropertyValue::String(origin.queue.as_str().into()));
    let headers = MessageHeaders {
        message_id: 0,
        address: Some(SimpleString::new(&target.fqqn())),
        user_id: received.user_id,
        message_type: received.message_type,
        durable: received.durable,
        expiration: received.expiration,
        timestamp: received.timestamp,
        priority: received.priority,
        properties,
    };
    Outbound { headers, original_message_id }
}

/// The source id a staging copy records, if it was recorded by the move out of `source_queue`.
fn staged_original_id(staged: &MessageHeaders, source_queue: &str) -> Option<i64> {
    let from_source = staged
        .property(names::ORIGINAL_QUEUE)
        .and_then(PropertyValue::as_simple_string)
        .is_some_and(|q| q.eq_str(source_queue));
    if !from_source {
        return None;
    }
    staged.property(names::ORIGINAL_MESSAGE_ID).and_then(PropertyValue::as_i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use artemis_core::message::{MessageType, TypedProperties};

    const RUN: &str = "0b7c1f3e-5d2a-4c8e-9f10-2a3b4c5d6e7f";

    fn run() -> Uuid {
        Uuid::parse_str(RUN).unwrap()
    }

    fn origin() -> Origin {
        Origin { run: run(), cluster: "east".into(), node: "east-1".into(), queue: "orders".into() }
    }

    fn target() -> OutboundTarget {
        OutboundTarget { address: "orders.west".into(), queue: "orders.west.q".into(), routing: RoutingType::Anycast }
    }

    /// Application properties of every type, and the JMS and broker properties that must travel.
    fn kept_properties() -> Vec<(&'static str, PropertyValue)> {
        vec![
            ("p_null", PropertyValue::Null),
            ("p_bool", PropertyValue::Boolean(true)),
            ("p_byte", PropertyValue::Byte(-7)),
            ("p_short", PropertyValue::Short(-30000)),
            ("p_int", PropertyValue::Int(i32::MIN)),
            ("p_long", PropertyValue::Long(i64::MAX)),
            ("p_float", PropertyValue::Float(f32::NAN)),
            ("p_double", PropertyValue::Double(-2.25e300)),
            ("p_char", PropertyValue::Char(0xD834)),
            ("p_string", PropertyValue::String("héllo 𝄞".into())),
            ("p_empty", PropertyValue::String("".into())),
            ("p_bytes", PropertyValue::Bytes(vec![0, 1, 255].into())),
            (names::GROUP_ID, PropertyValue::String("group-1".into())),
            (names::GROUP_SEQUENCE, PropertyValue::Int(3)),
            (names::JMS_CORRELATION_ID, PropertyValue::Bytes(b"corr".to_vec().into())),
            (names::JMS_REPLY_TO, PropertyValue::String("queue://replies".into())),
            (names::JMS_TYPE, PropertyValue::String("type-2".into())),
            (names::LAST_VALUE_NAME, PropertyValue::String("key".into())),
            (names::CONTENT_TYPE, PropertyValue::String("text/plain".into())),
            ("JMS_AMQP_ORIGINAL_ENCODING", PropertyValue::Short(5)),
            ("_AMQ_ResourceName", PropertyValue::String("queue.orders".into())),
            // Near misses of the bookkeeping names: an application may use them.
            ("_AMQ_ORIG", PropertyValue::Int(1)),
            ("AMQ_ROUTE_TO", PropertyValue::Int(2)),
            ("_amq_validated_user", PropertyValue::String("lowercase is another name".into())),
            ("_studio_note", PropertyValue::String("not a trace property".into())),
        ]
    }

    /// Every bookkeeping name the target must not receive, one or more per rule of [`BOOKKEEPING`].
    fn bookkeeping_properties() -> Vec<(&'static str, PropertyValue)> {
        vec![
            (names::ORIGINAL_ADDRESS, PropertyValue::String("orders".into())),
            (names::ORIGINAL_QUEUE, PropertyValue::String("orders".into())),
            (names::ORIGINAL_MESSAGE_ID, PropertyValue::Long(41)),
            (names::ORIGINAL_ROUTING_TYPE, PropertyValue::Byte(1)),
            (names::ROUTE_TO_IDS, PropertyValue::Bytes(vec![0, 0, 0, 0, 0, 0, 0, 9].into())),
            ("_AMQ_ROUTE_TOmy-cluster", PropertyValue::Bytes(vec![1].into())),
            (names::ROUTE_TO_ACK_IDS, PropertyValue::Bytes(vec![2].into())),
            ("_AMQ_ACK_ROUTE_TOmy-cluster", PropertyValue::Bytes(vec![3].into())),
            (names::SCALEDOWN_TO_IDS, PropertyValue::Bytes(vec![4].into())),
            (names::BRIDGE_DUPLICATE_ID, PropertyValue::Bytes(vec![5].into())),
            (names::ACTUAL_EXPIRY, PropertyValue::Long(1_700_000_000_000)),
            (names::LARGE_BODY_SIZE, PropertyValue::Long(2_000_000)),
            (names::LARGE_COMPRESSED, PropertyValue::Boolean(false)),
            (names::SCHEDULED_DELIVERY_TIME, PropertyValue::Long(1_800_000_000_000)),
            (names::INGRESS_TIMESTAMP, PropertyValue::Long(1_700_000_000_001)),
            (names::CONNECTION_ID, PropertyValue::String("ID:conn-1".into())),
            (names::VALIDATED_USER, PropertyValue::String("alice".into())),
            (names::PREFIX, PropertyValue::String("/queue/".into())),
            ("_AMQ_Hops", PropertyValue::Int(2)),
            ("x-opt-amq-mr-id", PropertyValue::String("mirror-1".into())),
            (names::DUPLICATE_ID, PropertyValue::String("the source's own".into())),
            (names::ROUTING_TYPE, PropertyValue::Byte(0)),
        ]
    }

    fn received(props: &[(&'static str, PropertyValue)]) -> MessageHeaders {
        MessageHeaders {
            message_id: 7001,
            address: Some("studio.transfer.run".into()),
            user_id: Some([
                0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x1d, 0xef, 0x81, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
            ]),
            message_type: MessageType::MAP,
            durable: true,
            expiration: 1_900_000_000_000,
            timestamp: 1_600_000_000_000,
            priority: 9,
            properties: props.iter().cloned().collect::<TypedProperties>(),
        }
    }

    fn everything() -> MessageHeaders {
        received(&[kept_properties(), bookkeeping_properties()].concat())
    }

    #[test]
    fn every_header_and_application_property_is_kept_with_its_type() {
        let input = everything();
        let out = outbound_headers(&input, 7001, Mode::Move, &target(), &origin()).headers;
        assert_eq!(out.user_id, input.user_id);
        assert_eq!(out.message_type, MessageType::MAP);
        assert!(out.durable);
        assert_eq!(out.expiration, 1_900_000_000_000, "what the received message has");
        assert_eq!(out.timestamp, 1_600_000_000_000);
        assert_eq!(out.priority, 9);
        for (name, value) in kept_properties() {
            assert_eq!(out.property(name), Some(&value), "{name}");
        }
        // Nothing else survives: kept + dup id + routing type + five trace properties.
        assert_eq!(out.properties.len(), kept_properties().len() + 2 + 5);
        let non_durable = MessageHeaders { durable: false, expiration: 0, priority: 0, ..everything() };
        let out = outbound_headers(&non_durable, 1, Mode::Copy, &target(), &origin()).headers;
        assert_eq!((out.durable, out.expiration, out.priority), (false, 0, 0));
    }

    #[test]
    fn every_bookkeeping_property_is_removed() {
        let out = outbound_headers(&everything(), 7001, Mode::Move, &target(), &origin()).headers;
        for (name, value) in bookkeeping_properties() {
            match name {
                names::DUPLICATE_ID | names::ROUTING_TYPE => assert_ne!(out.property(name), Some(&value), "{name}"),
                _ => assert_eq!(out.property(name), None, "{name} must not travel"),
            }
        }
        // Every rule of the table is exercised by at least one name above.
        for rule in BOOKKEEPING {
            assert!(
                bookkeeping_properties().iter().any(|(n, _)| rule.covers(&SimpleString::new(n))),
                "no test property for rule {}",
                rule.name
            );
            assert!(!rule.why.is_empty());
        }
        // And no kept property is covered by a rule.
        for (name, _) in kept_properties() {
            assert!(!BOOKKEEPING.iter().any(|r| r.covers(&SimpleString::new(name))), "{name}");
        }
    }

    #[test]
    fn validated_user_is_never_forwarded() {
        for mode in [Mode::Move, Mode::Copy] {
            let input = received(&[(names::VALIDATED_USER, PropertyValue::String("admin".into()))]);
            let out = outbound_headers(&input, 5, mode, &target(), &origin()).headers;
            assert!(!out.properties.contains(names::VALIDATED_USER));
            assert!(!out.properties.iter().any(|(_, v)| *v == PropertyValue::String("admin".into())));
        }
    }

    #[test]
    fn address_id_routing_type_and_duplicate_id_are_the_targets() {
        let out = outbound_headers(&everything(), 7001, Mode::Move, &target(), &origin()).headers;
        assert_eq!(out.message_id, 0);
        assert_eq!(
            out.address.as_ref().map(SimpleString::to_string_lossy).as_deref(),
            Some("orders.west::orders.west.q")
        );
        assert_eq!(out.routing_type(), Some(1));
        assert_eq!(
            out.duplicate_id(),
            Some(&PropertyValue::String(format!("studio:{RUN}:7001").as_str().into())),
            "the staging message's id"
        );
        let multicast = OutboundTarget { routing: RoutingType::Multicast, ..target() };
        let out = outbound_headers(&everything(), 7001, Mode::Move, &multicast, &origin()).headers;
        assert_eq!(out.property(names::ROUTING_TYPE), Some(&PropertyValue::Byte(0)));
        assert_eq!(duplicate_id(run(), -3), format!("studio:{RUN}:-3"));
    }

    #[test]
    fn the_trace_properties_say_where_it_came_from() {
        let out = outbound_headers(&everything(), 7001, Mode::Move, &target(), &origin()).headers;
        assert_eq!(out.property(trace::TRANSFER_RUN), Some(&PropertyValue::String(RUN.into())));
        assert_eq!(out.property(trace::ORIG_CLUSTER), Some(&PropertyValue::String("east".into())));
        assert_eq!(out.property(trace::ORIG_NODE), Some(&PropertyValue::String("east-1".into())));
        assert_eq!(out.property(trace::ORIG_QUEUE), Some(&PropertyValue::String("orders".into())));
        assert_eq!(out.property(trace::ORIG_MESSAGE_ID), Some(&PropertyValue::Long(41)));
    }

    #[test]
    fn a_move_takes_the_original_id_from_the_staging_copy() {
        let staged = everything();
        let out = outbound_headers(&staged, 7001, Mode::Move, &target(), &origin());
        assert_eq!(out.original_message_id, Some(41), "_AMQ_ORIG_MESSAGE_ID, not the staging id");
        assert_eq!(out.headers.property(trace::ORIG_MESSAGE_ID), Some(&PropertyValue::Long(41)));
    }

    #[test]
    fn a_move_without_a_trustworthy_original_id_says_unknown() {
        // Dropped by the broker (paged large messages): absent, never the staging id.
        let mut staged = everything();
        staged.properties.remove(names::ORIGINAL_MESSAGE_ID);
        let out = outbound_headers(&staged, 7001, Mode::Move, &target(), &origin());
        assert_eq!(out.original_message_id, None);
        assert!(!out.headers.properties.contains(trace::ORIG_MESSAGE_ID));
        // A pair left over from an earlier DLQ of the message names another queue: not this move's.
        let mut stale = everything();
        stale.properties.insert(names::ORIGINAL_QUEUE, PropertyValue::String("orders.dlq-source".into()));
        assert_eq!(outbound_headers(&stale, 7001, Mode::Move, &target(), &origin()).original_message_id, None);
        stale.properties.remove(names::ORIGINAL_QUEUE);
        assert_eq!(outbound_headers(&stale, 7001, Mode::Move, &target(), &origin()).original_message_id, None);
        // An id that is not an integer is not an id.
        let mut odd = everything();
        odd.properties.insert(names::ORIGINAL_MESSAGE_ID, PropertyValue::String("41".into()));
        assert_eq!(outbound_headers(&odd, 7001, Mode::Move, &target(), &origin()).original_message_id, None);
        // A trace of an earlier relay is not kept when this one's id is unknown.
        let mut relayed_before = staged.clone();
        relayed_before.properties.insert(trace::ORIG_MESSAGE_ID, PropertyValue::Long(12));
        relayed_before.properties.insert(trace::ORIG_CLUSTER, PropertyValue::String("north".into()));
        let out = outbound_headers(&relayed_before, 7001, Mode::Move, &target(), &origin()).headers;
        assert_eq!(out.property(trace::ORIG_MESSAGE_ID), None);
        assert_eq!(out.property(trace::ORIG_CLUSTER), Some(&PropertyValue::String("east".into())));
    }

    #[test]
    fn a_copy_takes_the_browsed_id_both_for_the_trace_and_the_duplicate_id() {
        // A browsed source message may carry `_AMQ_ORIG_*` from an earlier DLQ: a copy ignores them.
        let out = outbound_headers(&everything(), 555, Mode::Copy, &target(), &origin());
        assert_eq!(out.original_message_id, Some(555));
        assert_eq!(out.headers.property(trace::ORIG_MESSAGE_ID), Some(&PropertyValue::Long(555)));
        assert_eq!(
            out.headers.duplicate_id(),
            Some(&PropertyValue::String(format!("studio:{RUN}:555").as_str().into()))
        );
        assert_eq!(out.headers.expiration, 1_900_000_000_000, "a copy keeps expiration");
    }

    #[test]
    fn a_compressed_body_keeps_its_compression_marker_and_size() {
        let input = received(&[
            (names::LARGE_COMPRESSED, PropertyValue::Boolean(true)),
            (names::LARGE_BODY_SIZE, PropertyValue::Long(2 * 1024 * 1024)),
            ("p", PropertyValue::Int(1)),
        ]);
        let out = outbound_headers(&input, 9, Mode::Move, &target(), &origin()).headers;
        assert!(out.is_compressed());
        assert_eq!(out.large_body_size(), Some(2 * 1024 * 1024));
        // Uncompressed: the target broker sets its own size.
        let plain = received(&[(names::LARGE_BODY_SIZE, PropertyValue::Long(5))]);
        let out = outbound_headers(&plain, 9, Mode::Move, &target(), &origin()).headers;
        assert_eq!(out.large_body_size(), None);
    }
}
