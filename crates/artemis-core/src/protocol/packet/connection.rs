//! Connection-level packets: PING, the DISCONNECT family, the generic responses
//! (NULL_RESPONSE, EXCEPTION, PACKETS_CONFIRMED) and session creation
//! (`core-protocol.md` §4, §6, §13).

use std::fmt;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::PacketBody;
use crate::protocol::error::DecodeError;
use crate::protocol::exception_type::ExceptionType;
use crate::protocol::packet_type as t;
use crate::protocol::wire::{GetCore, PutCore, SimpleString};
use crate::protocol::ProtocolVersion;

/// PING (10): `i64 connectionTTL` in ms. The client sends it on channel 0; the
/// broker echoes it. Never answer a PING (§6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// Connection TTL in ms the broker should apply; −1 disables its check.
    pub connection_ttl: i64,
}

impl PacketBody for Ping {
    const PACKET_TYPE: i8 = t::PING;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i64(self.connection_ttl);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(Ping { connection_ttl: b.read_i64()? })
    }
}

/// DISCONNECT (11): the broker closes the connection; sent before the channel
/// version is known (§6.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Disconnect {
    /// The broker's node id.
    pub node_id: Option<SimpleString>,
}

impl PacketBody for Disconnect {
    const PACKET_TYPE: i8 = t::DISCONNECT;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_nullable_simple_string(self.node_id.as_ref());
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(Disconnect { node_id: b.read_nullable_simple_string()? })
    }
}

/// DISCONNECT_V2 (124): DISCONNECT + the scale-down target node (version 125–130).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DisconnectV2 {
    /// The broker's node id.
    pub node_id: Option<SimpleString>,
    /// The node the broker scales down to.
    pub scale_down_node_id: Option<SimpleString>,
}

impl PacketBody for DisconnectV2 {
    const PACKET_TYPE: i8 = t::DISCONNECT_V2;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_nullable_simple_string(self.node_id.as_ref());
        buf.put_nullable_simple_string(self.scale_down_node_id.as_ref());
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(DisconnectV2 {
            node_id: b.read_nullable_simple_string()?,
            scale_down_node_id: b.read_nullable_simple_string()?,
        })
    }
}

/// Why the broker disconnects (`DisconnectReason.java`); unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DisconnectReason(pub i8);

impl DisconnectReason {
    /// No reason given (Java writes −1 for null).
    pub const NONE: DisconnectReason = DisconnectReason(-1);
    /// Redirect to another broker.
    pub const REDIRECT: DisconnectReason = DisconnectReason(0);
    /// Redirect after a critical error.
    pub const REDIRECT_ON_CRITICAL_ERROR: DisconnectReason = DisconnectReason(1);
    /// Scale down.
    pub const SCALE_DOWN: DisconnectReason = DisconnectReason(2);
    /// Scale down after a critical error.
    pub const SCALE_DOWN_ON_CRITICAL_ERROR: DisconnectReason = DisconnectReason(3);
    /// Broker shutdown.
    pub const SHUT_DOWN: DisconnectReason = DisconnectReason(4);
    /// Broker shutdown after a critical error.
    pub const SHUT_DOWN_ON_CRITICAL_ERROR: DisconnectReason = DisconnectReason(5);

    /// `true` for the `*_ON_CRITICAL_ERROR` reasons.
    pub fn is_critical_error(self) -> bool {
        matches!(self.0, 1 | 3 | 5)
    }
}

/// One parameter value of a [`TransportConfiguration`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportParam {
    /// TYPE_BOOLEAN (0).
    Boolean(bool),
    /// TYPE_INT (1).
    Int(i32),
    /// TYPE_LONG (2).
    Long(i64),
    /// TYPE_STRING (3): a Java `String`.
    String(String),
}

/// A connector description (`TransportConfiguration.encode`), as carried by
/// DISCONNECT_V3 for a redirect. Parameter keys and string values are Java
/// `String`s; extra properties appear as keys with their `activemq.extraprops.`
/// prefix.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TransportConfiguration {
    /// Connector name.
    pub name: String,
    /// Java connector factory class.
    pub factory_class_name: String,
    /// Parameters in wire order.
    pub params: Vec<(String, TransportParam)>,
}

impl TransportConfiguration {
    fn encode(&self, buf: &mut BytesMut) {
        buf.put_string(&self.name);
        buf.put_string(&self.factory_class_name);
        buf.put_i32(self.params.len() as i32);
        for (k, v) in &self.params {
            buf.put_string(k);
            match v {
                TransportParam::Boolean(x) => {
                    buf.put_i8(0);
                    buf.put_bool(*x);
                }
                TransportParam::Int(x) => {
                    buf.put_i8(1);
                    buf.put_i32(*x);
                }
                TransportParam::Long(x) => {
                    buf.put_i8(2);
                    buf.put_i64(*x);
                }
                TransportParam::String(x) => {
                    buf.put_i8(3);
                    buf.put_string(x);
                }
            }
        }
    }

    fn decode(b: &mut Bytes) -> Result<Self, DecodeError> {
        let name = b.read_string()?;
        let factory_class_name = b.read_string()?;
        // Each parameter takes at least a 4-byte key count and a 1-byte tag.
        let n = b.read_len("TransportConfiguration params", 5)?;
        let mut params = Vec::with_capacity(n);
        for _ in 0..n {
            let key = b.read_string()?;
            let value = match b.read_i8()? {
                0 => TransportParam::Boolean(b.read_bool()?),
                1 => TransportParam::Int(b.read_i32()?),
                2 => TransportParam::Long(b.read_i64()?),
                3 => TransportParam::String(b.read_string()?),
                tag => return Err(DecodeError::UnknownTransportParamType { tag }),
            };
            params.push((key, value));
        }
        Ok(TransportConfiguration { name, factory_class_name, params })
    }
}

/// DISCONNECT_V3 (−19): the broker closes the connection, with a reason and an
/// optional redirect target (announced version ≥ 131, §6.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisconnectV3 {
    /// The broker's node id.
    pub node_id: Option<SimpleString>,
    /// Why.
    pub reason: DisconnectReason,
    /// Target node of a redirect or scale-down.
    pub target_node_id: Option<SimpleString>,
    /// Connector of the target.
    pub target_connector: Option<TransportConfiguration>,
}

impl PacketBody for DisconnectV3 {
    const PACKET_TYPE: i8 = t::DISCONNECT_V3;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_nullable_simple_string(self.node_id.as_ref());
        buf.put_i8(self.reason.0);
        buf.put_nullable_simple_string(self.target_node_id.as_ref());
        match &self.target_connector {
            None => buf.put_bool(false),
            Some(c) => {
                buf.put_bool(true);
                c.encode(buf);
            }
        }
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        let node_id = b.read_nullable_simple_string()?;
        let reason = DisconnectReason(b.read_i8()?);
        let target_node_id = b.read_nullable_simple_string()?;
        let target_connector = if b.read_bool()? { Some(TransportConfiguration::decode(b)?) } else { None };
        Ok(DisconnectV3 { node_id, reason, target_node_id, target_connector })
    }
}

/// DISCONNECT_CONSUMER_KILL (13): sent on channel 1 when the broker kills the
/// connection (`RemotingConnectionImpl.killMessage`); close it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DisconnectConsumerWithKill {
    /// The broker's node id.
    pub node_id: Option<SimpleString>,
}

impl PacketBody for DisconnectConsumerWithKill {
    const PACKET_TYPE: i8 = t::DISCONNECT_CONSUMER_KILL;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_nullable_simple_string(self.node_id.as_ref());
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(DisconnectConsumerWithKill { node_id: b.read_nullable_simple_string()? })
    }
}

/// EXCEPTION (20): a failed request (§13). `i32 code`, nullable `String` message,
/// then, for announced version ≥ 130, a correlation id **only if** the failed
/// request carried one (SESS_SEND, SESS_SEND_CONTINUATION, SESS_COMMIT V2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExceptionResponse {
    /// Raw `ActiveMQExceptionType` code, kept even when unknown.
    pub code: i32,
    /// Message, usually `AMQ<id>: …`; unpaired surrogates are replaced.
    pub message: Option<String>,
    /// Correlation id of the failed async request. Decoded only when the version is
    /// ≥ 130 and 8 bytes remain; encoded only for version ≥ 130.
    pub correlation_id: Option<i64>,
}

impl ExceptionResponse {
    /// The exception type; unknown codes give `GENERIC_EXCEPTION`, as in Java.
    pub fn exception_type(&self) -> ExceptionType {
        ExceptionType::from_code(self.code)
    }

    /// The `AMQ229017`-style id at the start of the message, if any.
    pub fn amq_id(&self) -> Option<&str> {
        let msg = self.message.as_deref()?;
        let id = msg.split(':').next()?;
        (id.len() > 3 && id.starts_with("AMQ") && id[3..].bytes().all(|c| c.is_ascii_digit())).then_some(id)
    }
}

impl PacketBody for ExceptionResponse {
    const PACKET_TYPE: i8 = t::EXCEPTION;
    fn encode_body(&self, v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i32(self.code);
        buf.put_nullable_string(self.message.as_deref());
        if v.has_async_responses() {
            if let Some(c) = self.correlation_id {
                buf.put_i64(c);
            }
        }
    }
    fn decode_body(b: &mut Bytes, v: ProtocolVersion) -> Result<Self, DecodeError> {
        let code = b.read_i32()?;
        let message = b.read_nullable_string_lossy()?;
        // ActiveMQExceptionMessage_V2.decodeRest: the long only if ≥ 8 bytes remain.
        let correlation_id = if v.has_async_responses() && b.remaining() >= 8 { Some(b.read_i64()?) } else { None };
        Ok(ExceptionResponse { code, message, correlation_id })
    }
}

/// NULL_RESPONSE (21): success without data. For announced version ≥ 130 the body
/// is always an 8-byte correlation id: the request's, or −1 if it had none (§4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NullResponse {
    /// Correlation id; −1 when absent (always absent before version 130).
    pub correlation_id: i64,
}

impl PacketBody for NullResponse {
    const PACKET_TYPE: i8 = t::NULL_RESPONSE;
    fn encode_body(&self, v: ProtocolVersion, buf: &mut BytesMut) {
        if v.has_async_responses() {
            buf.put_i64(self.correlation_id);
        }
    }
    fn decode_body(b: &mut Bytes, v: ProtocolVersion) -> Result<Self, DecodeError> {
        // NullResponseMessage_V2.decodeRest: −1 when fewer than 8 bytes remain.
        let correlation_id = if v.has_async_responses() && b.remaining() >= 8 { b.read_i64()? } else { -1 };
        Ok(NullResponse { correlation_id })
    }
}

/// PACKETS_CONFIRMED (22): confirmation-window acknowledgement. Never sent by the
/// broker when the session's window is −1 (§4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketsConfirmed {
    /// Last confirmed command id.
    pub command_id: i32,
}

impl PacketBody for PacketsConfirmed {
    const PACKET_TYPE: i8 = t::PACKETS_CONFIRMED;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i32(self.command_id);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(PacketsConfirmed { command_id: b.read_i32()? })
    }
}

/// CREATESESSION (30), sent on channel 1 (§6.1). The `Debug` output hides the
/// password.
#[derive(Clone, PartialEq, Eq)]
pub struct CreateSession {
    /// Unique session name (a UUID).
    pub name: String,
    /// The channel the session will use (10, 11, …).
    pub session_channel_id: i64,
    /// Protocol version announced; fixes the connection's version (§3).
    pub version: i32,
    /// User name; `None` = the transport principal.
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Large-message threshold; also the chunk size the broker uses towards this
    /// session's consumers (§11.1). Java default 102400.
    pub min_large_message_size: i32,
    /// XA session.
    pub xa: bool,
    /// Auto-commit sends (false = transacted sends).
    pub auto_commit_sends: bool,
    /// Auto-commit acks (false = transacted acks).
    pub auto_commit_acks: bool,
    /// The **confirmation** window; use −1 (§4.3). Written before `pre_acknowledge`.
    pub window_size: i32,
    /// The broker acks before sending (at-most-once).
    pub pre_acknowledge: bool,
    /// Default address for sends without one.
    pub default_address: Option<String>,
}

impl fmt::Debug for CreateSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreateSession")
            .field("name", &self.name)
            .field("session_channel_id", &self.session_channel_id)
            .field("version", &self.version)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("min_large_message_size", &self.min_large_message_size)
            .field("xa", &self.xa)
            .field("auto_commit_sends", &self.auto_commit_sends)
            .field("auto_commit_acks", &self.auto_commit_acks)
            .field("window_size", &self.window_size)
            .field("pre_acknowledge", &self.pre_acknowledge)
            .field("default_address", &self.default_address)
            .finish()
    }
}

impl CreateSession {
    /// Java's default `minLargeMessageSize` (100 KiB).
    pub const DEFAULT_MIN_LARGE_MESSAGE_SIZE: i32 = 100 * 1024;

    /// A session request with the recommended values of §6.1: auto-commit both,
    /// window −1, no XA, no pre-ack, 100 KiB large-message threshold.
    pub fn new(name: impl Into<String>, session_channel_id: i64, version: ProtocolVersion) -> Self {
        CreateSession {
            name: name.into(),
            session_channel_id,
            version: version.get(),
            username: None,
            password: None,
            min_large_message_size: Self::DEFAULT_MIN_LARGE_MESSAGE_SIZE,
            xa: false,
            auto_commit_sends: true,
            auto_commit_acks: true,
            window_size: -1,
            pre_acknowledge: false,
            default_address: None,
        }
    }

    fn encode(&self, buf: &mut BytesMut) {
        buf.put_string(&self.name);
        buf.put_i64(self.session_channel_id);
        buf.put_i32(self.version);
        buf.put_nullable_string(self.username.as_deref());
        buf.put_nullable_string(self.password.as_deref());
        buf.put_i32(self.min_large_message_size);
        buf.put_bool(self.xa);
        buf.put_bool(self.auto_commit_sends);
        buf.put_bool(self.auto_commit_acks);
        buf.put_i32(self.window_size);
        buf.put_bool(self.pre_acknowledge);
        buf.put_nullable_string(self.default_address.as_deref());
    }

    fn decode(b: &mut Bytes) -> Result<Self, DecodeError> {
        Ok(CreateSession {
            name: b.read_string()?,
            session_channel_id: b.read_i64()?,
            version: b.read_i32()?,
            username: b.read_nullable_string()?,
            password: b.read_nullable_string()?,
            min_large_message_size: b.read_i32()?,
            xa: b.read_bool()?,
            auto_commit_sends: b.read_bool()?,
            auto_commit_acks: b.read_bool()?,
            window_size: b.read_i32()?,
            pre_acknowledge: b.read_bool()?,
            default_address: b.read_nullable_string()?,
        })
    }
}

impl PacketBody for CreateSession {
    const PACKET_TYPE: i8 = t::CREATESESSION;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        self.encode(buf);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        CreateSession::decode(b)
    }
}

/// CREATESESSION_V2 (−18): CREATESESSION + a nullable `String` client id; known to
/// brokers ≥ 2.18 (§6.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateSessionV2 {
    /// The CREATESESSION fields.
    pub session: CreateSession,
    /// JMS client id.
    pub client_id: Option<String>,
}

impl PacketBody for CreateSessionV2 {
    const PACKET_TYPE: i8 = t::CREATESESSION_V2;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        self.session.encode(buf);
        buf.put_nullable_string(self.client_id.as_deref());
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(CreateSessionV2 { session: CreateSession::decode(b)?, client_id: b.read_nullable_string()? })
    }
}

/// CREATESESSION_RESP (31): the session exists (and is stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateSessionResponse {
    /// The broker's own version (135 on 2.30–2.36, 136 on 2.37+); informational.
    pub server_version: i32,
}

impl PacketBody for CreateSessionResponse {
    const PACKET_TYPE: i8 = t::CREATESESSION_RESP;
    fn encode_body(&self, _v: ProtocolVersion, buf: &mut BytesMut) {
        buf.put_i32(self.server_version);
    }
    fn decode_body(b: &mut Bytes, _v: ProtocolVersion) -> Result<Self, DecodeError> {
        Ok(CreateSessionResponse { server_version: b.read_i32()? })
    }
}
