//! Core packets: one struct per packet type code, each able to encode and decode
//! its body by [`ProtocolVersion`], and the [`Packet`] enum that dispatches on the
//! type code (`core-protocol.md` §5).
//!
//! Structs are grouped by what they are about rather than by direction, because
//! every packet is both encodable and decodable (round-trip tests, test stubs):
//! [`connection`] (ping, disconnect, responses, session creation), [`session`]
//! (lifecycle, transactions, metadata), [`consumer`], [`producer`] (sends and
//! producer credits), [`delivery`] (received messages), [`queue`] (queue and
//! address management).
//!
//! Version rules: where a field exists only from some version on, the encoder
//! leaves it out for older versions and the decoder gives it the documented
//! default. Trailing bytes after the known fields are ignored (§1.3).

use bytes::{BufMut, Bytes, BytesMut};

use super::error::DecodeError;
use super::ProtocolVersion;

pub mod connection;
pub mod consumer;
pub mod delivery;
pub mod producer;
pub mod queue;
pub mod session;

pub use connection::*;
pub use consumer::*;
pub use delivery::*;
pub use producer::*;
pub use queue::*;
pub use session::*;

/// A packet body with its fixed type code.
pub trait PacketBody: Sized {
    /// The packet type code (one of [`super::packet_type`]).
    const PACKET_TYPE: i8;

    /// Writes the body (everything after the 13-byte frame header).
    fn encode_body(&self, version: ProtocolVersion, buf: &mut BytesMut);

    /// Reads the body. `body` holds exactly the frame's body; bytes left after the
    /// known fields are ignored.
    fn decode_body(body: &mut Bytes, version: ProtocolVersion) -> Result<Self, DecodeError>;
}

macro_rules! packets {
    ($( $(#[$doc:meta])* $variant:ident, )*) => {
        /// Any Core packet, keyed by its type code.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Packet {
            $( $(#[$doc])* $variant($variant), )*
            /// A packet type this codec does not model (topology, replication, XA,
            /// …), kept as raw bytes so the connection can log and skip it
            /// (`core-protocol.md` §1.3). A known type code in `packet_type`
            /// re-decodes as its own variant.
            Unknown {
                /// The type code.
                packet_type: i8,
                /// The raw body.
                body: Bytes,
            },
        }

        impl Packet {
            /// The type code this packet is written with.
            pub fn packet_type(&self) -> i8 {
                match self {
                    $( Packet::$variant(_) => <$variant as PacketBody>::PACKET_TYPE, )*
                    Packet::Unknown { packet_type, .. } => *packet_type,
                }
            }

            /// Writes the body (not the frame header; see
            /// [`super::frame::encode_frame`]) with the shape `version` calls for.
            pub fn encode(&self, version: ProtocolVersion, buf: &mut BytesMut) {
                match self {
                    $( Packet::$variant(p) => p.encode_body(version, buf), )*
                    Packet::Unknown { body, .. } => buf.put_slice(body),
                }
            }

            /// Decodes a body by its type code. Unknown codes give
            /// [`Packet::Unknown`], never an error.
            pub fn decode(packet_type: i8, body: Bytes, version: ProtocolVersion) -> Result<Packet, DecodeError> {
                let mut body = body;
                $(
                    if packet_type == <$variant as PacketBody>::PACKET_TYPE {
                        return Ok(Packet::$variant(<$variant as PacketBody>::decode_body(&mut body, version)?));
                    }
                )*
                Ok(Packet::Unknown { packet_type, body })
            }

            /// Every type code that decodes to a modelled variant.
            pub const KNOWN_TYPES: &'static [i8] = &[$( <$variant as PacketBody>::PACKET_TYPE, )*];
        }

        $(
            impl From<$variant> for Packet {
                fn from(p: $variant) -> Packet {
                    Packet::$variant(p)
                }
            }
        )*
    };
}

packets! {
    /// PING (10).
    Ping,
    /// DISCONNECT (11).
    Disconnect,
    /// DISCONNECT_V2 (124).
    DisconnectV2,
    /// DISCONNECT_V3 (−19).
    DisconnectV3,
    /// DISCONNECT_CONSUMER_KILL (13).
    DisconnectConsumerWithKill,
    /// EXCEPTION (20).
    ExceptionResponse,
    /// NULL_RESPONSE (21).
    NullResponse,
    /// PACKETS_CONFIRMED (22).
    PacketsConfirmed,
    /// CREATESESSION (30).
    CreateSession,
    /// CREATESESSION_V2 (−18).
    CreateSessionV2,
    /// CREATESESSION_RESP (31).
    CreateSessionResponse,
    /// SESS_START (67).
    SessionStart,
    /// SESS_STOP (68).
    SessionStop,
    /// SESS_CLOSE (69).
    SessionClose,
    /// SESS_COMMIT (43).
    SessionCommit,
    /// SESS_ROLLBACK (44).
    SessionRollback,
    /// SESS_ADD_METADATA (104).
    SessionAddMetadata,
    /// SESS_ADD_METADATA2 (105).
    SessionAddMetadataV2,
    /// SESS_UNIQUE_ADD_METADATA (106).
    SessionUniqueAddMetadata,
    /// SESS_CREATECONSUMER (40).
    SessionCreateConsumer,
    /// SESS_ACKNOWLEDGE (41).
    SessionAcknowledge,
    /// SESS_INDIVIDUAL_ACKNOWLEDGE (81).
    SessionIndividualAcknowledge,
    /// SESS_EXPIRED (42).
    SessionExpire,
    /// SESS_FLOWTOKEN (70).
    SessionConsumerFlowCredit,
    /// SESS_CONSUMER_CLOSE (74).
    SessionConsumerClose,
    /// SESS_FORCE_CONSUMER_DELIVERY (78).
    SessionForceConsumerDelivery,
    /// DISCONNECT_CONSUMER (12).
    DisconnectConsumer,
    /// SESS_SEND (71).
    SessionSend,
    /// SESS_SEND_LARGE (72).
    SessionSendLarge,
    /// SESS_SEND_CONTINUATION (73).
    SessionSendContinuation,
    /// SESS_PRODUCER_REQUEST_CREDITS (79).
    SessionRequestProducerCredits,
    /// SESS_PRODUCER_CREDITS (80).
    SessionProducerCredits,
    /// SESS_PRODUCER_FAIL_CREDITS (82).
    SessionProducerCreditsFail,
    /// CREATE_PRODUCER (−20).
    CreateProducer,
    /// REMOVE_PRODUCER (−21).
    RemoveProducer,
    /// SESS_RECEIVE_MSG (75).
    SessionReceiveMessage,
    /// SESS_RECEIVE_LARGE_MSG (76).
    SessionReceiveLargeMessage,
    /// SESS_RECEIVE_CONTINUATION (77).
    SessionReceiveContinuation,
    /// SESS_QUEUEQUERY (45).
    SessionQueueQuery,
    /// SESS_QUEUEQUERY_RESP_V3 (−14).
    SessionQueueQueryResponseV3,
    /// SESS_BINDINGQUERY (49).
    SessionBindingQuery,
    /// SESS_BINDINGQUERY_RESP_V4 (−15).
    SessionBindingQueryResponseV4,
    /// SESS_BINDINGQUERY_RESP_V5 (−22).
    SessionBindingQueryResponseV5,
    /// CREATE_QUEUE_V2 (−12).
    CreateQueueV2,
    /// DELETE_QUEUE (35).
    SessionDeleteQueue,
    /// CREATE_ADDRESS (−11).
    CreateAddress,
}

impl Packet {
    /// The Java name of this packet's type code, for logs (`"UNKNOWN"` if the code
    /// is not one of [`super::packet_type`]).
    pub fn type_name(&self) -> &'static str {
        super::packet_type::name(self.packet_type()).unwrap_or("UNKNOWN")
    }

    /// The correlation id of a response packet (NULL_RESPONSE, or an EXCEPTION that
    /// carried one), used to match it to a pipelined send or commit (§4.2).
    pub fn response_correlation_id(&self) -> Option<i64> {
        match self {
            Packet::NullResponse(p) => Some(p.correlation_id),
            Packet::ExceptionResponse(p) => p.correlation_id,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
