//! Deliveries from the broker to a consumer: SESS_RECEIVE_MSG, and the large-message
//! pair SESS_RECEIVE_LARGE_MSG + SESS_RECEIVE_CONTINUATION (`core-protocol.md` §9.3,
//! §11.1).

use bytes::{BufMut, Bytes, BytesMut};

use super::producer::split_trailer;
use super::PacketBody;
use crate::protocol::error::DecodeError;
use crate::protocol::message::{CoreMessage, MessageHeaders};
use crate::protocol::packet_type as t;
use crate::protocol::wire::{GetCore, PutCore};
use crate::protocol::ProtocolVersion;

/// SESS_RECEIVE_MSG trailer: `i64 consumerID, i32 deliveryCount`.
const RECEIVE_TRAILER_LEN: usize = 12;

/// SESS_RECEIVE_MSG (75): a regular message delivered to a consumer, followed by
/// the 12-byte trailer (§9.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReceiveMessage {
    /// The message.
    pub message: CoreMessage,
    /// The consumer it was delivered to.
    pub consumer_id: i64,
    /// 1 on a first delivery, > 1 on redelivery; 0 for browsers' markers (§10).
    pub delivery_count: i32,
}

impl PacketBody for SessionReceiveMessage {
    const PACKET_TYPE: i8 = t::SESS_RECEIVE_MSG;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.reserve(self.message.encoded_len() + RECEIVE_TRAILER_LEN);
        self.message.encode(buf);
        buf.put_i64(self.consumer_id);
        buf.put_i32(self.delivery_count);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        let mut msg = split_trailer(b, RECEIVE_TRAILER_LEN)?;
        let message = CoreMessage::decode(&mut msg)?;
        Ok(SessionReceiveMessage { message, consumer_id: b.read_i64()?, delivery_count: b.read_i32()? })
    }
}

/// SESS_RECEIVE_LARGE_MSG (76): the start of a large message: `i64 consumerID, i32
/// deliveryCount, i64 largeMessageSize`, then headers and properties without any
/// body (§11.1). The body follows in SESS_RECEIVE_CONTINUATIONs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReceiveLargeMessage {
    /// The consumer.
    pub consumer_id: i64,
    /// Delivery count.
    pub delivery_count: i32,
    /// Body bytes as stored (the compressed size if compressed); always present,
    /// unlike `_AMQ_LARGE_SIZE`.
    pub large_message_size: i64,
    /// Headers and properties.
    pub headers: MessageHeaders,
}

impl PacketBody for SessionReceiveLargeMessage {
    const PACKET_TYPE: i8 = t::SESS_RECEIVE_LARGE_MSG;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i64(self.consumer_id);
        buf.put_i32(self.delivery_count);
        buf.put_i64(self.large_message_size);
        self.headers.encode(buf);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionReceiveLargeMessage {
            consumer_id: b.read_i64()?,
            delivery_count: b.read_i32()?,
            large_message_size: b.read_i64()?,
            headers: MessageHeaders::decode(b)?,
        })
    }
}

/// SESS_RECEIVE_CONTINUATION (77): one chunk of a large message being delivered:
/// `i32 len, chunk, bool continues, i64 consumerID` (§11.1). Chunks are at most the
/// session's `minLargeMessageSize`; the last has `continues = false`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionReceiveContinuation {
    /// The chunk.
    pub chunk: Bytes,
    /// `false` on the last chunk.
    pub continues: bool,
    /// The consumer.
    pub consumer_id: i64,
}

impl PacketBody for SessionReceiveContinuation {
    const PACKET_TYPE: i8 = t::SESS_RECEIVE_CONTINUATION;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.reserve(4 + self.chunk.len() + 9);
        buf.put_len_prefixed_bytes(&self.chunk);
        buf.put_bool(self.continues);
        buf.put_i64(self.consumer_id);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionReceiveContinuation {
            chunk: b.read_len_prefixed_bytes("continuation chunk")?,
            continues: b.read_bool()?,
            consumer_id: b.read_i64()?,
        })
    }
}
