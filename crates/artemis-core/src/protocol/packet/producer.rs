//! Producer packets: SESS_SEND with its version-dependent trailer, the large-message
//! send pair (SESS_SEND_LARGE + SESS_SEND_CONTINUATION), producer credits and
//! CREATE/REMOVE_PRODUCER (`core-protocol.md` §8, §11.2).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::PacketBody;
use crate::protocol::error::DecodeError;
use crate::protocol::message::{CoreMessage, MessageHeaders};
use crate::protocol::packet_type as t;
use crate::protocol::wire::{GetCore, PutCore, SimpleString};
use crate::protocol::ProtocolVersion;

/// Splits `body` into the message part and the fixed-length trailer at its end:
/// the broker finds the end of a message this way (§7.1).
pub(crate) fn split_trailer(body: &mut Bytes, trailer_len: usize) -> Result<Bytes, DecodeError> {
    let msg_len =
        body.len().checked_sub(trailer_len).ok_or(DecodeError::Truncated { need: trailer_len, have: body.len() })?;
    Ok(body.split_to(msg_len))
}

/// SESS_SEND (71): a regular message plus a trailer whose shape is fixed by the
/// announced version: `bool requiresResponse` (129), `+ i64 correlationID`
/// (130–133), `+ i32 senderID` (134+) (§8.1). A wrong trailer corrupts the
/// message on the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSend {
    /// The message; send message id 0 (§8.2).
    pub message: CoreMessage,
    /// Ask for NULL_RESPONSE / EXCEPTION after routing and storage.
    pub requires_response: bool,
    /// Echoed by the response (version ≥ 130); −1 when absent.
    pub correlation_id: i64,
    /// CREATE_PRODUCER id for broker metrics (version ≥ 134); −1 = none.
    pub producer_id: i32,
}

impl PacketBody for SessionSend {
    const PACKET_TYPE: i8 = t::SESS_SEND;
    fn encode_body(&self, v: ProtocolVersion, buf: &mut BytesMut) {
        buf.reserve(self.message.encoded_len() + v.send_trailer_len());
        self.message.encode(buf);
        buf.put_bool(self.requires_response);
        if v.has_async_responses() {
            buf.put_i64(self.correlation_id);
        }
        if v.has_producer_ids() {
            buf.put_i32(self.producer_id);
        }
    }
    fn decode_body(b: &mut Bytes, v: ProtocolVersion) -> Result<Self, DecodeError> {
        let mut msg = split_trailer(b, v.send_trailer_len())?;
        let message = CoreMessage::decode(&mut msg)?;
        let requires_response = b.read_bool()?;
        let correlation_id = if v.has_async_responses() { b.read_i64()? } else { -1 };
        let producer_id = if v.has_producer_ids() { b.read_i32()? } else { -1 };
        Ok(SessionSend { message, requires_response, correlation_id, producer_id })
    }
}

/// SESS_SEND_LARGE (72): the headers and properties of a large message, without
/// body, trailer or response; the body follows as SESS_SEND_CONTINUATIONs (§11.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionSendLarge {
    /// Headers and properties.
    pub headers: MessageHeaders,
}

impl PacketBody for SessionSendLarge {
    const PACKET_TYPE: i8 = t::SESS_SEND_LARGE;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        self.headers.encode(buf);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionSendLarge { headers: MessageHeaders::decode(b)? })
    }
}

/// SESS_SEND_CONTINUATION (73): one chunk of a large message body (§11.2):
/// `i32 len, chunk, bool continues, [i64 messageBodySize if !continues], bool
/// requiresResponse, [i64 correlationID (130+)], [i32 senderID (134+)]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSendContinuation {
    /// The chunk; the broker accepts any size.
    pub chunk: Bytes,
    /// `false` on the last chunk.
    pub continues: bool,
    /// Total **uncompressed** body size; on the wire only when `continues` is
    /// false (the broker stores it as `_AMQ_LARGE_SIZE` when ≥ 0). −1 otherwise.
    pub message_body_size: i64,
    /// Ask for a response; set it on the last chunk, where errors surface.
    pub requires_response: bool,
    /// Echoed by the response (version ≥ 130); −1 when absent.
    pub correlation_id: i64,
    /// Producer id (version ≥ 134); −1 = none.
    pub producer_id: i32,
}

impl PacketBody for SessionSendContinuation {
    const PACKET_TYPE: i8 = t::SESS_SEND_CONTINUATION;
    fn encode_body(&self, v: ProtocolVersion, buf: &mut BytesMut) {
        buf.reserve(4 + self.chunk.len() + 22);
        buf.put_len_prefixed_bytes(&self.chunk);
        buf.put_bool(self.continues);
        if !self.continues {
            buf.put_i64(self.message_body_size);
        }
        buf.put_bool(self.requires_response);
        if v.has_async_responses() {
            buf.put_i64(self.correlation_id);
        }
        if v.has_producer_ids() {
            buf.put_i32(self.producer_id);
        }
    }
    fn decode_body(b: &mut Bytes, v: ProtocolVersion) -> Result<Self, DecodeError> {
        let chunk = b.read_len_prefixed_bytes("continuation chunk")?;
        let continues = b.read_bool()?;
        let message_body_size = if continues { -1 } else { b.read_i64()? };
        let requires_response = b.read_bool()?;
        // SessionSendContinuationMessage_V2.decodeRest: −1 when fewer than 8 bytes remain.
        let correlation_id = if v.has_async_responses() && b.remaining() >= 8 { b.read_i64()? } else { -1 };
        let producer_id = if v.has_producer_ids() { b.read_i32()? } else { -1 };
        Ok(SessionSendContinuation {
            chunk,
            continues,
            message_body_size,
            requires_response,
            correlation_id,
            producer_id,
        })
    }
}

macro_rules! credits_packet {
    ($(#[$doc:meta])* $name:ident = $code:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            /// Credits in bytes.
            pub credits: i32,
            /// The address they apply to.
            pub address: SimpleString,
        }

        impl PacketBody for $name {
            const PACKET_TYPE: i8 = $code;
            fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
                buf.put_i32(self.credits);
                buf.put_simple_string(&self.address);
            }
            fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
                Ok($name {
                    credits: b.read_i32()?,
                    address: b.read_simple_string()?,
                })
            }
        }
    };
}

credits_packet!(
    /// SESS_PRODUCER_REQUEST_CREDITS (79): ask for producer credits; no direct
    /// response, the credits arrive later (§8.6).
    SessionRequestProducerCredits = t::SESS_PRODUCER_REQUEST_CREDITS
);
credits_packet!(
    /// SESS_PRODUCER_CREDITS (80): producer credits granted (§8.6).
    SessionProducerCredits = t::SESS_PRODUCER_CREDITS
);
credits_packet!(
    /// SESS_PRODUCER_FAIL_CREDITS (82): credits refused, the address is full under
    /// the FAIL policy (§8.6).
    SessionProducerCreditsFail = t::SESS_PRODUCER_FAIL_CREDITS
);

/// CREATE_PRODUCER (−20): register a producer id for broker metrics; optional, no
/// response (version ≥ 134).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateProducer {
    /// Id later sent as the send trailer's `senderID`.
    pub producer_id: i32,
    /// The producer's address, if fixed.
    pub address: Option<SimpleString>,
}

impl PacketBody for CreateProducer {
    const PACKET_TYPE: i8 = t::CREATE_PRODUCER;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i32(self.producer_id);
        buf.put_nullable_simple_string(self.address.as_ref());
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(CreateProducer { producer_id: b.read_i32()?, address: b.read_nullable_simple_string()? })
    }
}

/// REMOVE_PRODUCER (−21): unregister a producer id; no response (version ≥ 134).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoveProducer {
    /// The id given to CREATE_PRODUCER.
    pub producer_id: i32,
}

impl PacketBody for RemoveProducer {
    const PACKET_TYPE: i8 = t::REMOVE_PRODUCER;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i32(self.producer_id);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(RemoveProducer { producer_id: b.read_i32()? })
    }
}
