//! Session-level packets: start/stop/close, commit/rollback and session metadata
//! (`core-protocol.md` §6.4, §8.4).

use bytes::{BufMut, Bytes, BytesMut};

use super::PacketBody;
use crate::protocol::error::DecodeError;
use crate::protocol::packet_type as t;
use crate::protocol::wire::{GetCore, PutCore};
use crate::protocol::ProtocolVersion;

macro_rules! empty_packet {
    ($(#[$doc:meta])* $name:ident = $code:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name;

        impl PacketBody for $name {
            const PACKET_TYPE: i8 = $code;
            fn encode_body(&self, _v: ProtocolVersion, _buf: &mut BytesMut) {}
            fn decode_body(_b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
                Ok($name)
            }
        }
    };
}

empty_packet!(
    /// SESS_START (67): start delivery to the session's consumers; no response.
    SessionStart = t::SESS_START
);
empty_packet!(
    /// SESS_STOP (68): stop delivery; answered with NULL_RESPONSE.
    SessionStop = t::SESS_STOP
);
empty_packet!(
    /// SESS_CLOSE (69): close the session (an open transaction is rolled back);
    /// answered with NULL_RESPONSE.
    SessionClose = t::SESS_CLOSE
);

/// SESS_COMMIT (43): commit the session transaction. From announced version 132
/// the body is an `i64` correlation id echoed by the NULL_RESPONSE / EXCEPTION
/// (§8.4); before that the body is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCommit {
    /// Correlation id (version ≥ 132); −1 when absent.
    pub correlation_id: i64,
}

impl PacketBody for SessionCommit {
    const PACKET_TYPE: i8 = t::SESS_COMMIT;
    fn encode_body(&self, v: ProtocolVersion, buf: &mut BytesMut) {
        if v.has_commit_correlation() {
            buf.put_i64(self.correlation_id);
        }
    }
    fn decode_body(b: &mut Bytes, v: ProtocolVersion) -> Result<Self, DecodeError> {
        // SessionCommitMessage_V2.decodeRest: −1 when fewer than 8 bytes remain.
        let correlation_id = if v.has_commit_correlation() && b.len() >= 8 { b.read_i64()? } else { -1 };
        Ok(SessionCommit { correlation_id })
    }
}

/// SESS_ROLLBACK (44): roll back the session transaction. Every delivered but
/// unacknowledged message of the session goes back to its queue (§8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionRollback {
    /// Count the last delivered message as delivered (Java sends false).
    pub consider_last_message_as_delivered: bool,
}

impl PacketBody for SessionRollback {
    const PACKET_TYPE: i8 = t::SESS_ROLLBACK;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_bool(self.consider_last_message_as_delivered);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionRollback { consider_last_message_as_delivered: b.read_bool()? })
    }
}

/// SESS_ADD_METADATA (104): one key/value of session metadata (Java `String`s).
/// The broker always answers with NULL_RESPONSE
/// (`ServerSessionPacketHandler`, case `SESS_ADD_METADATA`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionAddMetadata {
    /// Key.
    pub key: String,
    /// Value.
    pub data: String,
}

impl PacketBody for SessionAddMetadata {
    const PACKET_TYPE: i8 = t::SESS_ADD_METADATA;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_string(&self.key);
        buf.put_string(&self.data);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionAddMetadata { key: b.read_string()?, data: b.read_string()? })
    }
}

fn encode_metadata_v2(key: &str, data: &str, requires_confirmation: bool, buf: &mut BytesMut) {
    buf.put_string(key);
    buf.put_string(data);
    buf.put_bool(requires_confirmation);
}

/// SESS_ADD_METADATA2 (105): metadata with a flag; the broker answers with
/// NULL_RESPONSE only when `requires_confirmation` is true.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionAddMetadataV2 {
    /// Key.
    pub key: String,
    /// Value.
    pub data: String,
    /// Ask for a NULL_RESPONSE.
    pub requires_confirmation: bool,
}

impl PacketBody for SessionAddMetadataV2 {
    const PACKET_TYPE: i8 = t::SESS_ADD_METADATA2;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        encode_metadata_v2(&self.key, &self.data, self.requires_confirmation, buf);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionAddMetadataV2 {
            key: b.read_string()?,
            data: b.read_string()?,
            requires_confirmation: b.read_bool()?,
        })
    }
}

/// SESS_UNIQUE_ADD_METADATA (106): metadata that must be unique on the broker (the
/// JMS client id). Always answered: NULL_RESPONSE, or EXCEPTION 114
/// `DUPLICATE_METADATA`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SessionUniqueAddMetadata {
    /// Key.
    pub key: String,
    /// Value.
    pub data: String,
    /// Same layout as SESS_ADD_METADATA2; the broker answers regardless.
    pub requires_confirmation: bool,
}

impl PacketBody for SessionUniqueAddMetadata {
    const PACKET_TYPE: i8 = t::SESS_UNIQUE_ADD_METADATA;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        encode_metadata_v2(&self.key, &self.data, self.requires_confirmation, buf);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(SessionUniqueAddMetadata {
            key: b.read_string()?,
            data: b.read_string()?,
            requires_confirmation: b.read_bool()?,
        })
    }
}
