//! Consumer packets: creation, credits, acknowledgements, close, forced delivery
//! for browsers, and the broker's DISCONNECT_CONSUMER (`core-protocol.md` §9, §10).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::PacketBody;
use crate::protocol::error::DecodeError;
use crate::protocol::packet_type as t;
use crate::protocol::wire::{GetCore, PutCore, SimpleString};
use crate::protocol::ProtocolVersion;

/// SESS_CREATECONSUMER (40) (§9.1). With `requires_response` the broker answers
/// with SESS_QUEUEQUERY_RESP_V3 describing the queue, or EXCEPTION.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCreateConsumer {
    /// Client-chosen id, unique within the session.
    pub consumer_id: i64,
    /// Queue name or FQQN `address::queue`; never auto-created.
    pub queue_name: SimpleString,
    /// Selector.
    pub filter: Option<SimpleString>,
    /// Browser (§10).
    pub browse_only: bool,
    /// Ask for the QUEUEQUERY_RESP_V3 answer; use true.
    pub requires_response: bool,
    /// Consumer priority; on the wire only for announced version ≥ 130, decoded
    /// when bytes remain (as the broker does), 0 otherwise.
    pub priority: i32,
}

impl SessionCreateConsumer {
    /// A consumer request with `requires_response = true`, no filter, priority 0.
    pub fn new(consumer_id: i64, queue_name: impl Into<SimpleString>) -> Self {
        SessionCreateConsumer {
            consumer_id,
            queue_name: queue_name.into(),
            filter: None,
            browse_only: false,
            requires_response: true,
            priority: 0,
        }
    }
}

impl PacketBody for SessionCreateConsumer {
    const PACKET_TYPE: i8 = t::SESS_CREATECONSUMER;
    fn encode_body(&self, v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i64(self.consumer_id);
        buf.put_simple_string(&self.queue_name);
        buf.put_nullable_simple_string(self.filter.as_ref());
        buf.put_bool(self.browse_only);
        buf.put_bool(self.requires_response);
        if v.has_consumer_priority() {
            buf.put_i32(self.priority);
        }
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionCreateConsumer {
            consumer_id: b.read_i64()?,
            queue_name: b.read_simple_string()?,
            filter: b.read_nullable_simple_string()?,
            browse_only: b.read_bool()?,
            requires_response: b.read_bool()?,
            // SessionCreateConsumerMessage.decodeRest: "if (buffer.readableBytes() > 0)".
            priority: if b.has_remaining() { b.read_i32()? } else { 0 },
        })
    }
}

macro_rules! ack_packet {
    ($(#[$doc:meta])* $name:ident = $code:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            /// The consumer that received the message.
            pub consumer_id: i64,
            /// The broker's message id.
            pub message_id: i64,
            /// Ask for NULL_RESPONSE / EXCEPTION; without it failures are silent.
            pub requires_response: bool,
        }

        impl PacketBody for $name {
            const PACKET_TYPE: i8 = $code;
            fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
                buf.put_i64(self.consumer_id);
                buf.put_i64(self.message_id);
                buf.put_bool(self.requires_response);
            }
            fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
                Ok($name {
                    consumer_id: b.read_i64()?,
                    message_id: b.read_i64()?,
                    requires_response: b.read_bool()?,
                })
            }
        }
    };
}

ack_packet!(
    /// SESS_ACKNOWLEDGE (41): **cumulative** ack of every message delivered to the
    /// consumer up to and including `message_id`, in the broker's order (§9.4).
    SessionAcknowledge = t::SESS_ACKNOWLEDGE
);
ack_packet!(
    /// SESS_INDIVIDUAL_ACKNOWLEDGE (81): ack of exactly one message (§9.4).
    SessionIndividualAcknowledge = t::SESS_INDIVIDUAL_ACKNOWLEDGE
);

/// SESS_EXPIRED (42): ask the broker to expire a delivered message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionExpire {
    /// The consumer.
    pub consumer_id: i64,
    /// The message.
    pub message_id: i64,
}

impl PacketBody for SessionExpire {
    const PACKET_TYPE: i8 = t::SESS_EXPIRED;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i64(self.consumer_id);
        buf.put_i64(self.message_id);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionExpire { consumer_id: b.read_i64()?, message_id: b.read_i64()? })
    }
}

/// SESS_FLOWTOKEN (70): consumer credits in bytes of encoded frames; positive
/// values add, 0 resets, −1 turns flow control off for good (§9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionConsumerFlowCredit {
    /// The consumer.
    pub consumer_id: i64,
    /// Credits in bytes.
    pub credits: i32,
}

impl PacketBody for SessionConsumerFlowCredit {
    const PACKET_TYPE: i8 = t::SESS_FLOWTOKEN;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i64(self.consumer_id);
        buf.put_i32(self.credits);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionConsumerFlowCredit { consumer_id: b.read_i64()?, credits: b.read_i32()? })
    }
}

macro_rules! consumer_id_packet {
    ($(#[$doc:meta])* $name:ident = $code:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name {
            /// The consumer.
            pub consumer_id: i64,
        }

        impl PacketBody for $name {
            const PACKET_TYPE: i8 = $code;
            fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
                buf.put_i64(self.consumer_id);
            }
            fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
                Ok($name { consumer_id: b.read_i64()? })
            }
        }
    };
}

consumer_id_packet!(
    /// SESS_CONSUMER_CLOSE (74): close a consumer; answered with NULL_RESPONSE.
    /// Its unacknowledged messages go back to the queue (§6.4).
    SessionConsumerClose = t::SESS_CONSUMER_CLOSE
);
consumer_id_packet!(
    /// DISCONNECT_CONSUMER (12): the broker closed this consumer; drop its buffer.
    DisconnectConsumer = t::DISCONNECT_CONSUMER
);

/// SESS_FORCE_CONSUMER_DELIVERY (78): ask for a forced-delivery marker message
/// carrying `sequence`, queued behind pending deliveries (§10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionForceConsumerDelivery {
    /// The consumer.
    pub consumer_id: i64,
    /// Echoed in the marker's `_hornetq.forced.delivery.seq`.
    pub sequence: i64,
}

impl PacketBody for SessionForceConsumerDelivery {
    const PACKET_TYPE: i8 = t::SESS_FORCE_CONSUMER_DELIVERY;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i64(self.consumer_id);
        buf.put_i64(self.sequence);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionForceConsumerDelivery { consumer_id: b.read_i64()?, sequence: b.read_i64()? })
    }
}
