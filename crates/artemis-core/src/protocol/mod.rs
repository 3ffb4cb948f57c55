//! The Core wire format. Pure: no tokio, no clock, no sockets, no logging; it
//! depends on `bytes`, `thiserror` and `std` only.
//!
//! Layers, bottom up (section numbers refer to `core-protocol.md`):
//!
//! | module | job |
//! |---|---|
//! | [`wire`] | primitives: big-endian numbers, booleans, [`SimpleString`], Java `String` (3 forms, CESU-8), nullables (§2) |
//! | [`properties`] | [`TypedProperties`] and the well-known property names (§7.2, §7.4) |
//! | [`message`] | the Core message layout and body layouts (§7.1, §7.3) |
//! | [`frame`] | frame header, sans-I/O [`FrameDecoder`], [`encode_frame`] (§1.3) |
//! | [`packet_type`] | one constant per packet type code, Java names (§5) |
//! | [`packet`] | one struct per packet, the [`Packet`] enum, encode and decode by [`ProtocolVersion`] |
//! | [`large`] | large-message chunking and reassembly as state machines (§11) |
//! | [`exception_type`] | EXCEPTION codes ↔ names (§13) |
//! | [`error`] | [`DecodeError`], [`EncodeError`], [`LargeMessageError`] |
//!
//! Every packet can be encoded and decoded (both directions), so the codec can be
//! tested by round trips and reused by a test broker stub. Decoders never panic and
//! never allocate from a length they have not checked against the bytes present.

pub mod error;
pub mod exception_type;
pub mod frame;
pub mod large;
pub mod message;
pub mod packet;
pub mod packet_type;
pub mod properties;
pub mod wire;

pub use error::{DecodeError, EncodeError, LargeMessageError};
pub use exception_type::ExceptionType;
pub use frame::{encode_frame, Frame, FrameDecoder};
pub use message::{CoreMessage, MessageHeaders, MessageType, StreamValue};
pub use packet::{Packet, PacketBody};
pub use properties::{PropertyValue, TypedProperties};
pub use wire::{GetCore, PutCore, SimpleString};

/// The 7 bytes a client sends first, before any frame (`core-protocol.md` §1.2).
pub const PREAMBLE: &[u8; 7] = b"ARTEMIS";

/// Default cap for an incoming frame's length field: 64 MiB, well above the
/// broker's default `journal-file-size` of 10 MiB (`core-protocol.md` §1.3).
pub const DEFAULT_MAX_FRAME_LEN: usize = 64 * 1024 * 1024;

/// Channel 0: PING both ways, DISCONNECT* from the server (§1.4).
pub const PING_CHANNEL: i64 = 0;

/// Channel 1: CREATESESSION and its answer (§1.4).
pub const SESSION_CREATE_CHANNEL: i64 = 1;

/// First channel id the client gives a session; Java counts up from 10 (§1.4).
pub const FIRST_SESSION_CHANNEL: i64 = 10;

/// The Core protocol version a connection announced in its first CREATESESSION.
///
/// Packet shapes are chosen by this version in both directions, never by the
/// `serverVersion` of CREATESESSION_RESP (`core-protocol.md` §3). Versions below
/// 129 use the 1.x message layouts, which this codec does not implement: they are
/// encoded and decoded with the 129 shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion(i32);

impl ProtocolVersion {
    /// 2.0.0: the address model; QUEUEQUERY_RESP_V3, BINDINGQUERY_RESP_V4.
    pub const V129: ProtocolVersion = ProtocolVersion(129);
    /// 2.7.0: async responses (correlation ids), consumer priority.
    pub const V130: ProtocolVersion = ProtocolVersion(130);
    /// 2.18.0: CREATESESSION_V2 (client id), DISCONNECT_V3.
    pub const V131: ProtocolVersion = ProtocolVersion(131);
    /// 2.21.0: SESS_COMMIT with a correlation id.
    pub const V132: ProtocolVersion = ProtocolVersion(132);
    /// 2.24.0: replication only.
    pub const V133: ProtocolVersion = ProtocolVersion(133);
    /// 2.28.0: producer ids on SESS_SEND / SESS_SEND_CONTINUATION; CREATE/REMOVE_PRODUCER.
    pub const V134: ProtocolVersion = ProtocolVersion(134);
    /// 2.29.0: BINDINGQUERY_RESP_V5.
    pub const V135: ProtocolVersion = ProtocolVersion(135);
    /// 2.37.0: quorum voting only.
    pub const V136: ProtocolVersion = ProtocolVersion(136);
    /// The version this client announces: accepted by every broker from 2.29 to at
    /// least 2.44 (`core-protocol.md` §3).
    pub const ANNOUNCED: ProtocolVersion = ProtocolVersion::V135;
    /// Versions to try, in order, when the broker answers EXCEPTION 108
    /// (`INCOMPATIBLE_CLIENT_SERVER_VERSIONS`) (`core-protocol.md` §3).
    pub const FALLBACK_ORDER: [ProtocolVersion; 6] = [
        ProtocolVersion::V135,
        ProtocolVersion::V134,
        ProtocolVersion::V133,
        ProtocolVersion::V132,
        ProtocolVersion::V131,
        ProtocolVersion::V130,
    ];

    /// Wraps a version number.
    pub const fn new(version: i32) -> Self {
        ProtocolVersion(version)
    }

    /// The version number.
    pub const fn get(self) -> i32 {
        self.0
    }

    /// ≥ 130: NULL_RESPONSE and EXCEPTION carry correlation ids; SESS_SEND and
    /// SESS_SEND_CONTINUATION carry a correlation id (`ASYNC_RESPONSE_CHANGE_VERSION`).
    pub const fn has_async_responses(self) -> bool {
        self.0 >= 130
    }

    /// ≥ 130: SESS_CREATECONSUMER carries a priority (`CONSUMER_PRIORITY_CHANGE_VERSION`).
    pub const fn has_consumer_priority(self) -> bool {
        self.0 >= 130
    }

    /// ≥ 131: CREATESESSION_V2 and DISCONNECT_V3 exist (`ARTEMIS_2_18_0_VERSION`).
    pub const fn has_client_id(self) -> bool {
        self.0 >= 131
    }

    /// ≥ 132: SESS_COMMIT carries a correlation id (`isVersionSupportCommitV2`).
    pub const fn has_commit_correlation(self) -> bool {
        self.0 >= 132
    }

    /// ≥ 134: sends and continuations carry a producer id; CREATE_PRODUCER and
    /// REMOVE_PRODUCER exist (`isBeforeProducerMetricsChanged` is false).
    pub const fn has_producer_ids(self) -> bool {
        self.0 >= 134
    }

    /// ≥ 135: the broker answers SESS_BINDINGQUERY with BINDINGQUERY_RESP_V5.
    pub const fn has_binding_query_v5(self) -> bool {
        self.0 >= 135
    }

    /// Length of the SESS_SEND trailer after the message: 1, 9 or 13 bytes
    /// (`core-protocol.md` §8.1).
    pub const fn send_trailer_len(self) -> usize {
        if self.has_producer_ids() {
            13
        } else if self.has_async_responses() {
            9
        } else {
            1
        }
    }
}

impl Default for ProtocolVersion {
    fn default() -> Self {
        ProtocolVersion::ANNOUNCED
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_gates() {
        let v = ProtocolVersion::V129;
        assert!(!v.has_async_responses() && !v.has_consumer_priority() && v.send_trailer_len() == 1);
        let v = ProtocolVersion::V130;
        assert!(v.has_async_responses() && !v.has_client_id() && v.send_trailer_len() == 9);
        assert!(ProtocolVersion::V131.has_client_id());
        assert!(!ProtocolVersion::V131.has_commit_correlation());
        assert!(ProtocolVersion::V132.has_commit_correlation());
        assert!(!ProtocolVersion::V133.has_producer_ids());
        assert_eq!(ProtocolVersion::V134.send_trailer_len(), 13);
        assert!(!ProtocolVersion::V134.has_binding_query_v5());
        assert!(ProtocolVersion::V135.has_binding_query_v5());
        assert_eq!(ProtocolVersion::default().get(), 135);
        assert_eq!(PREAMBLE, &[0x41, 0x52, 0x54, 0x45, 0x4D, 0x49, 0x53]);
    }
}
