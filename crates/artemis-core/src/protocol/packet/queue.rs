//! Queue and address management: SESS_QUEUEQUERY and its V3 answer,
//! SESS_BINDINGQUERY and its V4/V5 answers, CREATE_QUEUE_V2, DELETE_QUEUE and
//! CREATE_ADDRESS (`core-protocol.md` §12).
//!
//! The answers read their later fields in groups, each only "if bytes remain", as
//! the Java decoders do; fields of a missing group decode as `None`. The encoders
//! always write every field.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::PacketBody;
use crate::protocol::error::DecodeError;
use crate::protocol::message::routing_type;
use crate::protocol::packet_type as t;
use crate::protocol::wire::{GetCore, PutCore, SimpleString};
use crate::protocol::ProtocolVersion;

/// SESS_QUEUEQUERY (45): query a queue by name or FQQN; answered with
/// SESS_QUEUEQUERY_RESP_V3. No security check (§12.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionQueueQuery {
    /// Queue name or FQQN.
    pub queue_name: SimpleString,
}

impl PacketBody for SessionQueueQuery {
    const PACKET_TYPE: i8 = t::SESS_QUEUEQUERY;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_simple_string(&self.queue_name);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionQueueQuery { queue_name: b.read_simple_string()? })
    }
}

/// SESS_QUEUEQUERY_RESP_V3 (−14): the queue's description; also the answer to
/// SESS_CREATECONSUMER with `requires_response` (§9.1, §12.1). Field order as in
/// `SessionQueueQueryResponseMessage{,_V2,_V3}.encodeRest`. Booleans, including
/// the present flags of the nullable fields, are `0xFF` for true.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionQueueQueryResponseV3 {
    /// `false` for a missing queue (the rest are then defaults).
    pub exists: bool,
    /// Durable queue.
    pub durable: bool,
    /// Temporary queue.
    pub temporary: bool,
    /// Consumers attached.
    pub consumer_count: i32,
    /// Messages in the queue.
    pub message_count: i64,
    /// Queue filter.
    pub filter_string: Option<SimpleString>,
    /// The queue's real address.
    pub address: Option<SimpleString>,
    /// The queue's name.
    pub name: Option<SimpleString>,
    /// Address setting `auto-create-queues` (V2).
    pub auto_create_queues: bool,
    /// The queue was auto-created.
    pub auto_created: bool,
    /// Purge when the last consumer leaves.
    pub purge_on_no_consumers: bool,
    /// 0 MULTICAST, 1 ANYCAST (see [`routing_type`]).
    pub routing_type: i8,
    /// −1 = unlimited.
    pub max_consumers: i32,
    /// Exclusive queue.
    pub exclusive: Option<bool>,
    /// Last-value queue.
    pub last_value: Option<bool>,
    /// Consumer window the client should use by default (§9.2).
    pub default_consumer_window_size: Option<i32>,
    /// Last-value key.
    pub last_value_key: Option<SimpleString>,
    /// Non-destructive queue.
    pub non_destructive: Option<bool>,
    /// Consumers before dispatch.
    pub consumers_before_dispatch: Option<i32>,
    /// Delay before dispatch, ms.
    pub delay_before_dispatch: Option<i64>,
    /// Group rebalance.
    pub group_rebalance: Option<bool>,
    /// Group buckets.
    pub group_buckets: Option<i32>,
    /// Auto-delete.
    pub auto_delete: Option<bool>,
    /// Auto-delete delay, ms.
    pub auto_delete_delay: Option<i64>,
    /// Auto-delete message count.
    pub auto_delete_message_count: Option<i64>,
    /// Group first key.
    pub group_first_key: Option<SimpleString>,
    /// Ring size.
    pub ring_size: Option<i64>,
    /// Enabled.
    pub enabled: Option<bool>,
    /// Pause dispatch during group rebalance.
    pub group_rebalance_pause_dispatch: Option<bool>,
    /// Configured in broker.xml.
    pub configuration_managed: Option<bool>,
}

impl PacketBody for SessionQueueQueryResponseV3 {
    const PACKET_TYPE: i8 = t::SESS_QUEUEQUERY_RESP_V3;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_bool(self.exists);
        buf.put_bool(self.durable);
        buf.put_bool(self.temporary);
        buf.put_i32(self.consumer_count);
        buf.put_i64(self.message_count);
        buf.put_nullable_simple_string(self.filter_string.as_ref());
        buf.put_nullable_simple_string(self.address.as_ref());
        buf.put_nullable_simple_string(self.name.as_ref());
        buf.put_bool(self.auto_create_queues);
        buf.put_bool(self.auto_created);
        buf.put_bool(self.purge_on_no_consumers);
        buf.put_i8(self.routing_type);
        buf.put_i32(self.max_consumers);
        buf.put_nullable_bool(self.exclusive);
        buf.put_nullable_bool(self.last_value);
        buf.put_nullable_i32(self.default_consumer_window_size);
        buf.put_nullable_simple_string(self.last_value_key.as_ref());
        buf.put_nullable_bool(self.non_destructive);
        buf.put_nullable_i32(self.consumers_before_dispatch);
        buf.put_nullable_i64(self.delay_before_dispatch);
        buf.put_nullable_bool(self.group_rebalance);
        buf.put_nullable_i32(self.group_buckets);
        buf.put_nullable_bool(self.auto_delete);
        buf.put_nullable_i64(self.auto_delete_delay);
        buf.put_nullable_i64(self.auto_delete_message_count);
        buf.put_nullable_simple_string(self.group_first_key.as_ref());
        buf.put_nullable_i64(self.ring_size);
        buf.put_nullable_bool(self.enabled);
        buf.put_nullable_bool(self.group_rebalance_pause_dispatch);
        buf.put_nullable_bool(self.configuration_managed);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        let mut r = SessionQueueQueryResponseV3 {
            exists: b.read_bool()?,
            durable: b.read_bool()?,
            temporary: b.read_bool()?,
            consumer_count: b.read_i32()?,
            message_count: b.read_i64()?,
            filter_string: b.read_nullable_simple_string()?,
            address: b.read_nullable_simple_string()?,
            name: b.read_nullable_simple_string()?,
            auto_create_queues: b.read_bool()?,
            auto_created: b.read_bool()?,
            purge_on_no_consumers: b.read_bool()?,
            routing_type: b.read_i8()?,
            max_consumers: b.read_i32()?,
            ..Default::default()
        };
        // The groups of SessionQueueQueryResponseMessage_V3.decodeRest.
        if b.has_remaining() {
            r.exclusive = b.read_nullable_bool()?;
            r.last_value = b.read_nullable_bool()?;
        }
        if b.has_remaining() {
            r.default_consumer_window_size = b.read_nullable_i32()?;
        }
        if b.has_remaining() {
            r.last_value_key = b.read_nullable_simple_string()?;
            r.non_destructive = b.read_nullable_bool()?;
            r.consumers_before_dispatch = b.read_nullable_i32()?;
            r.delay_before_dispatch = b.read_nullable_i64()?;
            r.group_rebalance = b.read_nullable_bool()?;
            r.group_buckets = b.read_nullable_i32()?;
            r.auto_delete = b.read_nullable_bool()?;
            r.auto_delete_delay = b.read_nullable_i64()?;
            r.auto_delete_message_count = b.read_nullable_i64()?;
        }
        if b.has_remaining() {
            r.group_first_key = b.read_nullable_simple_string()?;
        }
        if b.has_remaining() {
            r.ring_size = b.read_nullable_i64()?;
        }
        if b.has_remaining() {
            r.enabled = b.read_nullable_bool()?;
        }
        if b.has_remaining() {
            r.group_rebalance_pause_dispatch = b.read_nullable_bool()?;
        }
        if b.has_remaining() {
            r.configuration_managed = b.read_nullable_bool()?;
        }
        Ok(r)
    }
}

/// SESS_BINDINGQUERY (49): query an address; answered with BINDINGQUERY_RESP_V5
/// (version ≥ 135) or V4 (129–134) (§12.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionBindingQuery {
    /// The address.
    pub address: SimpleString,
}

impl PacketBody for SessionBindingQuery {
    const PACKET_TYPE: i8 = t::SESS_BINDINGQUERY;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_simple_string(&self.address);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionBindingQuery { address: b.read_simple_string()? })
    }
}

/// SESS_BINDINGQUERY_RESP_V4 (−15): the address's queues and defaults
/// (`SessionBindingQueryResponseMessage{,_V2,_V3,_V4}`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionBindingQueryResponseV4 {
    /// The address exists.
    pub exists: bool,
    /// Names of its queues.
    pub queue_names: Vec<SimpleString>,
    /// Address setting `auto-create-queues`.
    pub auto_create_queues: bool,
    /// Address setting `auto-create-addresses`.
    pub auto_create_addresses: bool,
    /// Default purge-on-no-consumers.
    pub default_purge_on_no_consumers: bool,
    /// Default max consumers.
    pub default_max_consumers: i32,
    /// Default exclusive.
    pub default_exclusive: Option<bool>,
    /// Default last value.
    pub default_last_value: Option<bool>,
    /// Default last-value key.
    pub default_last_value_key: Option<SimpleString>,
    /// Default non-destructive.
    pub default_non_destructive: Option<bool>,
    /// Default consumers before dispatch.
    pub default_consumers_before_dispatch: Option<i32>,
    /// Default delay before dispatch, ms.
    pub default_delay_before_dispatch: Option<i64>,
}

impl SessionBindingQueryResponseV4 {
    fn encode(&self, buf: &mut BytesMut) {
        buf.put_bool(self.exists);
        buf.put_i32(self.queue_names.len() as i32);
        for q in &self.queue_names {
            buf.put_simple_string(q);
        }
        buf.put_bool(self.auto_create_queues);
        buf.put_bool(self.auto_create_addresses);
        buf.put_bool(self.default_purge_on_no_consumers);
        buf.put_i32(self.default_max_consumers);
        buf.put_nullable_bool(self.default_exclusive);
        buf.put_nullable_bool(self.default_last_value);
        buf.put_nullable_simple_string(self.default_last_value_key.as_ref());
        buf.put_nullable_bool(self.default_non_destructive);
        buf.put_nullable_i32(self.default_consumers_before_dispatch);
        buf.put_nullable_i64(self.default_delay_before_dispatch);
    }

    fn decode(b: &mut Bytes) -> Result<Self, DecodeError> {
        let exists = b.read_bool()?;
        // Each queue name takes at least its 4-byte length.
        let n = b.read_len("binding query queue count", 4)?;
        let mut queue_names = Vec::with_capacity(n);
        for _ in 0..n {
            queue_names.push(b.read_simple_string()?);
        }
        let mut r = SessionBindingQueryResponseV4 {
            exists,
            queue_names,
            auto_create_queues: b.read_bool()?,
            auto_create_addresses: b.read_bool()?,
            default_purge_on_no_consumers: b.read_bool()?,
            default_max_consumers: b.read_i32()?,
            ..Default::default()
        };
        // The groups of SessionBindingQueryResponseMessage_V4.decodeRest.
        if b.has_remaining() {
            r.default_exclusive = b.read_nullable_bool()?;
            r.default_last_value = b.read_nullable_bool()?;
        }
        if b.has_remaining() {
            r.default_last_value_key = b.read_nullable_simple_string()?;
            r.default_non_destructive = b.read_nullable_bool()?;
            r.default_consumers_before_dispatch = b.read_nullable_i32()?;
            r.default_delay_before_dispatch = b.read_nullable_i64()?;
        }
        Ok(r)
    }
}

impl PacketBody for SessionBindingQueryResponseV4 {
    const PACKET_TYPE: i8 = t::SESS_BINDINGQUERY_RESP_V4;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        self.encode(buf);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        SessionBindingQueryResponseV4::decode(b)
    }
}

/// SESS_BINDINGQUERY_RESP_V5 (−22): V4 + which routing types the address supports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionBindingQueryResponseV5 {
    /// The V4 fields.
    pub result: SessionBindingQueryResponseV4,
    /// The address supports MULTICAST (false when the bytes are absent).
    pub supports_multicast: bool,
    /// The address supports ANYCAST (false when the bytes are absent).
    pub supports_anycast: bool,
}

impl PacketBody for SessionBindingQueryResponseV5 {
    const PACKET_TYPE: i8 = t::SESS_BINDINGQUERY_RESP_V5;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        self.result.encode(buf);
        buf.put_bool(self.supports_multicast);
        buf.put_bool(self.supports_anycast);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        let result = SessionBindingQueryResponseV4::decode(b)?;
        let (supports_multicast, supports_anycast) =
            if b.has_remaining() { (b.read_bool()?, b.read_bool()?) } else { (false, false) };
        Ok(SessionBindingQueryResponseV5 { result, supports_multicast, supports_anycast })
    }
}

/// CREATE_QUEUE_V2 (−12): create a queue (§12.3). Note the field order differs from
/// the queue-query answer. Answered (with `requires_response`) by NULL_RESPONSE or
/// EXCEPTION (101 `QUEUE_EXISTS`, 105, 106).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateQueueV2 {
    /// Address (created when allowed).
    pub address: SimpleString,
    /// Queue name.
    pub queue_name: SimpleString,
    /// Queue filter.
    pub filter_string: Option<SimpleString>,
    /// Durable.
    pub durable: bool,
    /// Temporary.
    pub temporary: bool,
    /// Ask for a response.
    pub requires_response: bool,
    /// Mark as auto-created.
    pub auto_created: bool,
    /// 0 MULTICAST, 1 ANYCAST, −1 = the address-settings default.
    pub routing_type: i8,
    /// −1 = unlimited.
    pub max_consumers: i32,
    /// Purge when the last consumer leaves.
    pub purge_on_no_consumers: bool,
    /// Exclusive.
    pub exclusive: Option<bool>,
    /// Last value.
    pub last_value: Option<bool>,
    /// Last-value key.
    pub last_value_key: Option<SimpleString>,
    /// Non-destructive.
    pub non_destructive: Option<bool>,
    /// Consumers before dispatch.
    pub consumers_before_dispatch: Option<i32>,
    /// Delay before dispatch, ms.
    pub delay_before_dispatch: Option<i64>,
    /// Group rebalance.
    pub group_rebalance: Option<bool>,
    /// Group buckets.
    pub group_buckets: Option<i32>,
    /// Auto-delete.
    pub auto_delete: Option<bool>,
    /// Auto-delete delay, ms.
    pub auto_delete_delay: Option<i64>,
    /// Auto-delete message count.
    pub auto_delete_message_count: Option<i64>,
    /// Group first key.
    pub group_first_key: Option<SimpleString>,
    /// Ring size.
    pub ring_size: Option<i64>,
    /// Enabled.
    pub enabled: Option<bool>,
    /// Pause dispatch during group rebalance.
    pub group_rebalance_pause_dispatch: Option<bool>,
}

impl CreateQueueV2 {
    /// A durable, non-temporary ANYCAST queue with the suggested values of §12.3
    /// (`requires_response`, unlimited consumers, every optional setting null).
    pub fn anycast(address: impl Into<SimpleString>, queue_name: impl Into<SimpleString>) -> Self {
        CreateQueueV2 {
            address: address.into(),
            queue_name: queue_name.into(),
            filter_string: None,
            durable: true,
            temporary: false,
            requires_response: true,
            auto_created: false,
            routing_type: routing_type::ANYCAST,
            max_consumers: -1,
            purge_on_no_consumers: false,
            exclusive: None,
            last_value: None,
            last_value_key: None,
            non_destructive: None,
            consumers_before_dispatch: None,
            delay_before_dispatch: None,
            group_rebalance: None,
            group_buckets: None,
            auto_delete: None,
            auto_delete_delay: None,
            auto_delete_message_count: None,
            group_first_key: None,
            ring_size: None,
            enabled: None,
            group_rebalance_pause_dispatch: None,
        }
    }
}

impl PacketBody for CreateQueueV2 {
    const PACKET_TYPE: i8 = t::CREATE_QUEUE_V2;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_simple_string(&self.address);
        buf.put_simple_string(&self.queue_name);
        buf.put_nullable_simple_string(self.filter_string.as_ref());
        buf.put_bool(self.durable);
        buf.put_bool(self.temporary);
        buf.put_bool(self.requires_response);
        buf.put_bool(self.auto_created);
        buf.put_i8(self.routing_type);
        buf.put_i32(self.max_consumers);
        buf.put_bool(self.purge_on_no_consumers);
        buf.put_nullable_bool(self.exclusive);
        buf.put_nullable_bool(self.last_value);
        buf.put_nullable_simple_string(self.last_value_key.as_ref());
        buf.put_nullable_bool(self.non_destructive);
        buf.put_nullable_i32(self.consumers_before_dispatch);
        buf.put_nullable_i64(self.delay_before_dispatch);
        buf.put_nullable_bool(self.group_rebalance);
        buf.put_nullable_i32(self.group_buckets);
        buf.put_nullable_bool(self.auto_delete);
        buf.put_nullable_i64(self.auto_delete_delay);
        buf.put_nullable_i64(self.auto_delete_message_count);
        buf.put_nullable_simple_string(self.group_first_key.as_ref());
        buf.put_nullable_i64(self.ring_size);
        buf.put_nullable_bool(self.enabled);
        buf.put_nullable_bool(self.group_rebalance_pause_dispatch);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        let mut r = CreateQueueV2 {
            address: b.read_simple_string()?,
            queue_name: b.read_simple_string()?,
            filter_string: b.read_nullable_simple_string()?,
            durable: b.read_bool()?,
            temporary: b.read_bool()?,
            requires_response: b.read_bool()?,
            auto_created: b.read_bool()?,
            routing_type: b.read_i8()?,
            max_consumers: b.read_i32()?,
            purge_on_no_consumers: b.read_bool()?,
            exclusive: None,
            last_value: None,
            last_value_key: None,
            non_destructive: None,
            consumers_before_dispatch: None,
            delay_before_dispatch: None,
            group_rebalance: None,
            group_buckets: None,
            auto_delete: None,
            auto_delete_delay: None,
            auto_delete_message_count: None,
            group_first_key: None,
            ring_size: None,
            enabled: None,
            group_rebalance_pause_dispatch: None,
        };
        // The groups of CreateQueueMessage_V2.decodeRest.
        if b.has_remaining() {
            r.exclusive = b.read_nullable_bool()?;
            r.last_value = b.read_nullable_bool()?;
        }
        if b.has_remaining() {
            r.last_value_key = b.read_nullable_simple_string()?;
            r.non_destructive = b.read_nullable_bool()?;
            r.consumers_before_dispatch = b.read_nullable_i32()?;
            r.delay_before_dispatch = b.read_nullable_i64()?;
            r.group_rebalance = b.read_nullable_bool()?;
            r.group_buckets = b.read_nullable_i32()?;
            r.auto_delete = b.read_nullable_bool()?;
            r.auto_delete_delay = b.read_nullable_i64()?;
            r.auto_delete_message_count = b.read_nullable_i64()?;
        }
        if b.has_remaining() {
            r.group_first_key = b.read_nullable_simple_string()?;
        }
        if b.has_remaining() {
            r.ring_size = b.read_nullable_i64()?;
        }
        if b.has_remaining() {
            r.enabled = b.read_nullable_bool()?;
        }
        if b.has_remaining() {
            r.group_rebalance_pause_dispatch = b.read_nullable_bool()?;
        }
        Ok(r)
    }
}

/// DELETE_QUEUE (35): delete a queue and its messages; answered with NULL_RESPONSE
/// or EXCEPTION (100 missing, 104 has consumers) (§12.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionDeleteQueue {
    /// The queue.
    pub queue_name: SimpleString,
}

impl PacketBody for SessionDeleteQueue {
    const PACKET_TYPE: i8 = t::DELETE_QUEUE;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_simple_string(&self.queue_name);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionDeleteQueue { queue_name: b.read_simple_string()? })
    }
}

/// CREATE_ADDRESS (−11): `SS address, i32 n, n × i8 routingType, bool
/// requiresResponse, bool autoCreated` (§12.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateAddress {
    /// The address.
    pub address: SimpleString,
    /// Routing types it supports (see [`routing_type`]). Java keeps them in an
    /// `EnumSet`, so the broker ignores duplicates and order.
    pub routing_types: Vec<i8>,
    /// Ask for a response.
    pub requires_response: bool,
    /// Mark as auto-created.
    pub auto_created: bool,
}

impl PacketBody for CreateAddress {
    const PACKET_TYPE: i8 = t::CREATE_ADDRESS;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_simple_string(&self.address);
        buf.put_i32(self.routing_types.len() as i32);
        for r in &self.routing_types {
            buf.put_i8(*r);
        }
        buf.put_bool(self.requires_response);
        buf.put_bool(self.auto_created);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        let address = b.read_simple_string()?;
        let n = b.read_len("routing type count", 1)?;
        let routing_types = (0..n).map(|_| b.get_i8()).collect();
        Ok(CreateAddress { address, routing_types, requires_response: b.read_bool()?, auto_created: b.read_bool()? })
    }
}
