//! The Core message as it travels inside SESS_SEND and SESS_RECEIVE_MSG
//! (`core-protocol.md` §7.1): `i32 endOfBodyPosition`, the raw body, then the
//! headers and properties; and inside the large-message packets, the headers and
//! properties alone ([`MessageHeaders`]).
//!
//! Also the body layouts of the JMS-style message types (§7.3: TEXT, MAP, STREAM,
//! BYTES) and accessors for the well-known properties (§7.4). Encode and decode are
//! symmetric; the body is kept as raw bytes so a copied message keeps every byte.

use std::fmt::Write as _;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::error::DecodeError;
use super::properties::{names, tag, PropertyValue, TypedProperties};
use super::wire::{nullable_simple_string_len, GetCore, PutCore, SimpleString, NOT_NULL_BYTE};

/// `PacketImpl.PACKET_HEADERS_SIZE` (4 + 1 + 8 = 13), which `endOfBodyPosition`
/// counts on top of the body length (`core-protocol.md` §1.3, §7.1).
pub const BODY_POSITION_OFFSET: i32 = 13;

/// Default JMS priority (4).
pub const DEFAULT_PRIORITY: i8 = 4;

/// Address routing types (`RoutingType.java`): the `_AMQ_ROUTING_TYPE` value and
/// the queue/address routing type in queue packets.
pub mod routing_type {
    /// MULTICAST (topics).
    pub const MULTICAST: i8 = 0;
    /// ANYCAST (queues).
    pub const ANYCAST: i8 = 1;
}

/// The message type byte (`Message.java` `*_TYPE`, `core-protocol.md` §7.3). Values
/// outside the known set are kept as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MessageType(pub i8);

impl MessageType {
    /// DEFAULT (0): arbitrary body.
    pub const DEFAULT: MessageType = MessageType(0);
    /// OBJECT (2): `i32 len` + Java-serialized bytes.
    pub const OBJECT: MessageType = MessageType(2);
    /// TEXT (3): nullable SimpleString body.
    pub const TEXT: MessageType = MessageType(3);
    /// BYTES (4): raw body.
    pub const BYTES: MessageType = MessageType(4);
    /// MAP (5): TypedProperties body.
    pub const MAP: MessageType = MessageType(5);
    /// STREAM (6): a run of tagged values.
    pub const STREAM: MessageType = MessageType(6);
    /// EMBEDDED (7): another protocol's message; internal.
    pub const EMBEDDED: MessageType = MessageType(7);
    /// LARGE_EMBEDDED (8): internal.
    pub const LARGE_EMBEDDED: MessageType = MessageType(8);
}

/// Formats a 16-byte userID as the lowercase 8-4-4-4-12 UUID text
/// (`UUID.toString`, `core-protocol.md` §2).
pub fn format_uuid(bytes: &[u8; 16]) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Everything of a Core message except its body: what SESS_SEND_LARGE and
/// SESS_RECEIVE_LARGE_MSG carry (`CoreMessage.encodeHeadersAndProperties`,
/// `core-protocol.md` §7.1, §11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageHeaders {
    /// Broker-assigned journal id. Send 0; the broker overwrites it (§8.2).
    pub message_id: i64,
    /// Destination address; an FQQN `address::queue` is allowed on send (§8.3).
    pub address: Option<SimpleString>,
    /// 16-byte UUID, the JMSMessageID.
    pub user_id: Option<[u8; 16]>,
    /// Type byte (§7.3).
    pub message_type: MessageType,
    /// Persistent.
    pub durable: bool,
    /// Absolute expiry, epoch ms; 0 = never.
    pub expiration: i64,
    /// Creation time, epoch ms.
    pub timestamp: i64,
    /// 0..=9, default 4.
    pub priority: i8,
    /// Message properties.
    pub properties: TypedProperties,
}

impl Default for MessageHeaders {
    fn default() -> Self {
        MessageHeaders {
            message_id: 0,
            address: None,
            user_id: None,
            message_type: MessageType::DEFAULT,
            durable: false,
            expiration: 0,
            timestamp: 0,
            priority: DEFAULT_PRIORITY,
            properties: TypedProperties::new(),
        }
    }
}

impl MessageHeaders {
    /// Bytes the headers and properties take on the wire.
    pub fn encoded_len(&self) -> usize {
        8 + nullable_simple_string_len(self.address.as_ref())
            + 1
            + if self.user_id.is_some() { 16 } else { 0 }
            + 1
            + 1
            + 8
            + 8
            + 1
            + self.properties.encoded_len()
    }

    /// Writes the headers and properties as Java does: the address, userID and
    /// properties flags and `durable` are `0x01` bytes (raw Netty writes, §7.1).
    pub fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i64(self.message_id);
        buf.put_nullable_simple_string(self.address.as_ref());
        match &self.user_id {
            None => buf.put_u8(0),
            Some(id) => {
                buf.put_u8(NOT_NULL_BYTE);
                buf.put_slice(id);
            }
        }
        buf.put_i8(self.message_type.0);
        buf.put_raw_bool(self.durable);
        buf.put_i64(self.expiration);
        buf.put_i64(self.timestamp);
        buf.put_i8(self.priority);
        self.properties.encode(buf);
    }

    /// Reads the headers and properties (`CoreMessage.decodeHeadersAndProperties`).
    ///
    /// The userID flag is compared with exactly `0x01`, as the broker does: any
    /// other value means "no userID" and no UUID bytes are read (§7.1, §19 item 3).
    pub fn decode(buf: &mut impl Buf) -> Result<Self, DecodeError> {
        let message_id = buf.read_i64()?;
        let address = buf.read_nullable_simple_string()?;
        let user_id = if buf.read_u8()? == NOT_NULL_BYTE {
            let mut id = [0u8; 16];
            buf.need(16)?;
            buf.copy_to_slice(&mut id);
            Some(id)
        } else {
            None
        };
        Ok(MessageHeaders {
            message_id,
            address,
            user_id,
            message_type: MessageType(buf.read_i8()?),
            durable: buf.read_bool()?,
            expiration: buf.read_i64()?,
            timestamp: buf.read_i64()?,
            priority: buf.read_i8()?,
            properties: TypedProperties::decode(buf)?,
        })
    }

    /// The property named `name`.
    pub fn property(&self, name: &str) -> Option<&PropertyValue> {
        self.properties.get(name)
    }

    fn string_property(&self, name: &str) -> Option<&SimpleString> {
        self.properties.get(name).and_then(PropertyValue::as_simple_string)
    }

    /// JMSMessageID: `"ID:"` + the userID as UUID text.
    pub fn jms_message_id(&self) -> Option<String> {
        self.user_id.as_ref().map(|id| format!("ID:{}", format_uuid(id)))
    }

    /// JMSCorrelationID: a STRING or BYTES property.
    pub fn correlation_id(&self) -> Option<&PropertyValue> {
        self.properties
            .get(names::JMS_CORRELATION_ID)
            .filter(|v| matches!(v, PropertyValue::String(_) | PropertyValue::Bytes(_)))
    }

    /// Sets JMSCorrelationID as a STRING.
    pub fn set_correlation_id(&mut self, id: &str) {
        self.properties.insert(names::JMS_CORRELATION_ID, PropertyValue::String(id.into()));
    }

    /// JMSReplyTo, e.g. `queue://name`.
    pub fn reply_to(&self) -> Option<&SimpleString> {
        self.string_property(names::JMS_REPLY_TO)
    }

    /// Sets JMSReplyTo (give the prefixed form, e.g. `queue://name`).
    pub fn set_reply_to(&mut self, destination: &str) {
        self.properties.insert(names::JMS_REPLY_TO, PropertyValue::String(destination.into()));
    }

    /// JMSType.
    pub fn jms_type(&self) -> Option<&SimpleString> {
        self.string_property(names::JMS_TYPE)
    }

    /// Sets JMSType.
    pub fn set_jms_type(&mut self, jms_type: &str) {
        self.properties.insert(names::JMS_TYPE, PropertyValue::String(jms_type.into()));
    }

    /// JMSXGroupID (`_AMQ_GROUP_ID`).
    pub fn group_id(&self) -> Option<&SimpleString> {
        self.string_property(names::GROUP_ID)
    }

    /// Sets JMSXGroupID.
    pub fn set_group_id(&mut self, group: &str) {
        self.properties.insert(names::GROUP_ID, PropertyValue::String(group.into()));
    }

    /// JMSXGroupSeq (`_AMQ_GROUP_SEQUENCE`, INT).
    pub fn group_sequence(&self) -> Option<i32> {
        match self.properties.get(names::GROUP_SEQUENCE)? {
            PropertyValue::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The duplicate-detection id `_AMQ_DUPL_ID` (STRING or BYTES, §8.5).
    pub fn duplicate_id(&self) -> Option<&PropertyValue> {
        self.properties
            .get(names::DUPLICATE_ID)
            .filter(|v| matches!(v, PropertyValue::String(_) | PropertyValue::Bytes(_)))
    }

    /// Sets `_AMQ_DUPL_ID` as a STRING (the cache key is its UTF-16LE bytes).
    pub fn set_duplicate_id(&mut self, id: &str) {
        self.properties.insert(names::DUPLICATE_ID, PropertyValue::String(id.into()));
    }

    /// Sets `_AMQ_DUPL_ID` as BYTES.
    pub fn set_duplicate_id_bytes(&mut self, id: Bytes) {
        self.properties.insert(names::DUPLICATE_ID, PropertyValue::Bytes(id));
    }

    /// Scheduled delivery time `_AMQ_SCHED_DELIVERY`, epoch ms.
    pub fn scheduled_delivery_time(&self) -> Option<i64> {
        self.properties.get(names::SCHEDULED_DELIVERY_TIME).and_then(PropertyValue::as_i64)
    }

    /// `_AMQ_ROUTING_TYPE` (see [`routing_type`]).
    pub fn routing_type(&self) -> Option<i8> {
        match self.properties.get(names::ROUTING_TYPE)? {
            PropertyValue::Byte(v) => Some(*v),
            _ => None,
        }
    }

    /// Sets `_AMQ_ROUTING_TYPE` (BYTE), as the JMS producer does (§8.3).
    pub fn set_routing_type(&mut self, routing: i8) {
        self.properties.insert(names::ROUTING_TYPE, PropertyValue::Byte(routing));
    }

    /// `_AMQ_LARGE_SIZE`: the uncompressed body size of a large or compressed message.
    pub fn large_body_size(&self) -> Option<i64> {
        self.properties.get(names::LARGE_BODY_SIZE).and_then(PropertyValue::as_i64)
    }

    /// `true` if `_AMQ_LARGE_COMPRESSED` is set: the body is a zlib stream (§11.3).
    pub fn is_compressed(&self) -> bool {
        self.properties.get(names::LARGE_COMPRESSED).and_then(PropertyValue::as_bool).unwrap_or(false)
    }

    /// The sequence of a browser's forced-delivery marker (`_hornetq.forced.delivery.seq`);
    /// `Some` means "not a real message, never acknowledge" (§10).
    pub fn forced_delivery_sequence(&self) -> Option<i64> {
        self.properties.get(names::FORCED_DELIVERY_SEQ).and_then(PropertyValue::as_i64)
    }
}

/// A complete regular Core message: headers plus the raw body bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CoreMessage {
    /// Headers and properties.
    pub headers: MessageHeaders,
    /// The body buffer, raw (no length prefix: `endOfBodyPosition` carries it).
    pub body: Bytes,
}

impl CoreMessage {
    /// Bytes the message takes on the wire (without any packet trailer).
    pub fn encoded_len(&self) -> usize {
        4 + self.body.len() + self.headers.encoded_len()
    }

    /// Writes `i32 (13 + body length)`, the body, then the headers (§7.1). An empty
    /// body gives `00 00 00 0D`, as the Java client sends.
    pub fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i32(BODY_POSITION_OFFSET.wrapping_add(self.body.len() as i32));
        buf.put_slice(&self.body);
        self.headers.encode(buf);
    }

    /// Reads a message from the start of `buf` (`CoreMessage.decode`). The body
    /// length is `endOfBodyPosition − 13`: never assume 13 for "no body", a
    /// broker-built message has 17 and four zero bytes (§7.1, §19 item 4). Bytes
    /// after the properties are left in `buf`.
    pub fn decode(buf: &mut impl Buf) -> Result<Self, DecodeError> {
        let end = buf.read_i32()?;
        let body_len = end
            .checked_sub(BODY_POSITION_OFFSET)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or(DecodeError::InvalidLength { what: "endOfBodyPosition", len: i64::from(end) })?;
        let body = buf.read_bytes(body_len)?;
        let headers = MessageHeaders::decode(buf)?;
        Ok(CoreMessage { headers, body })
    }

    /// The body read as a TEXT body: a nullable SimpleString (`TextMessageUtil`).
    /// Reads the layout whatever the type byte says.
    pub fn text(&self) -> Result<Option<SimpleString>, DecodeError> {
        self.body.clone().read_nullable_simple_string()
    }

    /// Makes this a TEXT message with the given text (`None` = null text, body `00`).
    pub fn set_text(&mut self, text: Option<&str>) {
        let ss = text.map(SimpleString::new);
        let mut b = BytesMut::with_capacity(nullable_simple_string_len(ss.as_ref()));
        b.put_nullable_simple_string(ss.as_ref());
        self.body = b.freeze();
        self.headers.message_type = MessageType::TEXT;
    }

    /// The body read as a MAP body: TypedProperties (`MapMessageUtil`). An empty
    /// body reads as an empty map.
    pub fn map(&self) -> Result<TypedProperties, DecodeError> {
        if self.body.is_empty() {
            return Ok(TypedProperties::new());
        }
        TypedProperties::decode(&mut self.body.clone())
    }

    /// Makes this a MAP message with the given entries.
    pub fn set_map(&mut self, map: &TypedProperties) {
        let mut b = BytesMut::with_capacity(map.encoded_len());
        map.encode(&mut b);
        self.body = b.freeze();
        self.headers.message_type = MessageType::MAP;
    }

    /// The body read as a STREAM body (`StreamMessageUtil.streamReadObject`).
    pub fn stream(&self) -> Result<Vec<StreamValue>, DecodeError> {
        let mut body = self.body.clone();
        let mut out = Vec::new();
        while body.has_remaining() {
            out.push(StreamValue::decode(&mut body)?);
        }
        Ok(out)
    }

    /// Makes this a STREAM message with the given elements.
    pub fn set_stream(&mut self, values: &[StreamValue]) {
        let mut b = BytesMut::new();
        for v in values {
            v.encode(&mut b);
        }
        self.body = b.freeze();
        self.headers.message_type = MessageType::STREAM;
    }

    /// Makes this a BYTES message with the given raw body.
    pub fn set_bytes(&mut self, body: Bytes) {
        self.body = body;
        self.headers.message_type = MessageType::BYTES;
    }
}

/// One element of a STREAM body (`core-protocol.md` §7.3): the TypedProperties tags,
/// but STRING is a nullable Java `String`, a null element is STRING + `00`, and
/// BOOLEAN is `0xFF`/`0x00` (written through `ActiveMQBuffer`).
#[derive(Debug, Clone)]
pub enum StreamValue {
    /// BOOLEAN.
    Boolean(bool),
    /// BYTE.
    Byte(i8),
    /// SHORT.
    Short(i16),
    /// CHAR: one UTF-16 unit.
    Char(u16),
    /// INT.
    Int(i32),
    /// LONG.
    Long(i64),
    /// FLOAT.
    Float(f32),
    /// DOUBLE.
    Double(f64),
    /// STRING (`None` = a null element).
    String(Option<String>),
    /// BYTES.
    Bytes(Bytes),
}

impl PartialEq for StreamValue {
    fn eq(&self, other: &Self) -> bool {
        use StreamValue::*;
        match (self, other) {
            (Boolean(a), Boolean(b)) => a == b,
            (Byte(a), Byte(b)) => a == b,
            (Short(a), Short(b)) => a == b,
            (Char(a), Char(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (Long(a), Long(b)) => a == b,
            (Float(a), Float(b)) => a.to_bits() == b.to_bits(),
            (Double(a), Double(b)) => a.to_bits() == b.to_bits(),
            (String(a), String(b)) => a == b,
            (Bytes(a), Bytes(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for StreamValue {}

impl StreamValue {
    /// Writes tag + value as `ActiveMQStreamMessage` does.
    pub fn encode(&self, buf: &mut impl BufMut) {
        match self {
            StreamValue::Boolean(v) => {
                buf.put_i8(tag::BOOLEAN);
                buf.put_bool(*v);
            }
            StreamValue::Byte(v) => {
                buf.put_i8(tag::BYTE);
                buf.put_i8(*v);
            }
            StreamValue::Short(v) => {
                buf.put_i8(tag::SHORT);
                buf.put_i16(*v);
            }
            StreamValue::Char(v) => {
                buf.put_i8(tag::CHAR);
                buf.put_u16(*v);
            }
            StreamValue::Int(v) => {
                buf.put_i8(tag::INT);
                buf.put_i32(*v);
            }
            StreamValue::Long(v) => {
                buf.put_i8(tag::LONG);
                buf.put_i64(*v);
            }
            StreamValue::Float(v) => {
                buf.put_i8(tag::FLOAT);
                buf.put_f32_bits(*v);
            }
            StreamValue::Double(v) => {
                buf.put_i8(tag::DOUBLE);
                buf.put_f64_bits(*v);
            }
            StreamValue::String(v) => {
                buf.put_i8(tag::STRING);
                buf.put_nullable_string(v.as_deref());
            }
            StreamValue::Bytes(v) => {
                buf.put_i8(tag::BYTES);
                buf.put_len_prefixed_bytes(v);
            }
        }
    }

    /// Reads tag + value (`StreamMessageUtil.streamReadObject`). There is no NULL
    /// tag in a stream; it is refused like any unknown tag.
    pub fn decode(buf: &mut impl Buf) -> Result<Self, DecodeError> {
        let t = buf.read_i8()?;
        Ok(match t {
            tag::BOOLEAN => StreamValue::Boolean(buf.read_bool()?),
            tag::BYTE => StreamValue::Byte(buf.read_i8()?),
            tag::SHORT => StreamValue::Short(buf.read_i16()?),
            tag::CHAR => StreamValue::Char(buf.read_u16()?),
            tag::INT => StreamValue::Int(buf.read_i32()?),
            tag::LONG => StreamValue::Long(buf.read_i64()?),
            tag::FLOAT => StreamValue::Float(buf.read_f32()?),
            tag::DOUBLE => StreamValue::Double(buf.read_f64()?),
            tag::STRING => StreamValue::String(buf.read_nullable_string()?),
            tag::BYTES => StreamValue::Bytes(buf.read_len_prefixed_bytes("STREAM bytes")?),
            other => return Err(DecodeError::UnknownPropertyType { tag: other }),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::properties::tests::arb_properties;
    use crate::protocol::wire::tests::{arb_simple_string, arb_string, hex};
    use proptest::prelude::*;

    pub(crate) fn arb_headers() -> impl Strategy<Value = MessageHeaders> {
        (
            any::<i64>(),
            proptest::option::of(arb_simple_string()),
            proptest::option::of(any::<[u8; 16]>()),
            any::<i8>(),
            any::<bool>(),
            any::<i64>(),
            any::<i64>(),
            any::<i8>(),
            arb_properties(),
        )
            .prop_map(
                |(message_id, address, user_id, t, durable, expiration, timestamp, priority, properties)| {
                    MessageHeaders {
                        message_id,
                        address,
                        user_id,
                        message_type: MessageType(t),
                        durable,
                        expiration,
                        timestamp,
                        priority,
                        properties,
                    }
                },
            )
    }

    pub(crate) fn arb_message() -> impl Strategy<Value = CoreMessage> {
        (arb_headers(), prop::collection::vec(any::<u8>(), 0..200))
            .prop_map(|(headers, body)| CoreMessage { headers, body: Bytes::from(body) })
    }

    fn arb_stream_value() -> impl Strategy<Value = StreamValue> {
        prop_oneof![
            any::<bool>().prop_map(StreamValue::Boolean),
            any::<i8>().prop_map(StreamValue::Byte),
            any::<i16>().prop_map(StreamValue::Short),
            any::<u16>().prop_map(StreamValue::Char),
            any::<i32>().prop_map(StreamValue::Int),
            any::<i64>().prop_map(StreamValue::Long),
            any::<u32>().prop_map(|b| StreamValue::Float(f32::from_bits(b))),
            any::<u64>().prop_map(|b| StreamValue::Double(f64::from_bits(b))),
            proptest::option::of(arb_string()).prop_map(StreamValue::String),
            prop::collection::vec(any::<u8>(), 0..20).prop_map(|v| StreamValue::Bytes(Bytes::from(v))),
        ]
    }

    fn round_trip(m: &CoreMessage) -> CoreMessage {
        let mut b = BytesMut::new();
        m.encode(&mut b);
        assert_eq!(b.len(), m.encoded_len());
        let mut bytes = b.freeze();
        let back = CoreMessage::decode(&mut bytes).unwrap();
        assert!(!bytes.has_remaining());
        back
    }

    #[test]
    fn empty_body_is_end_position_13() {
        let m = CoreMessage::default();
        let mut b = BytesMut::new();
        m.encode(&mut b);
        assert_eq!(&b[..4], hex("00 00 00 0D"));
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn end_position_below_13_is_invalid() {
        for v in [0i32, 12, -1, i32::MIN] {
            let mut b = BytesMut::new();
            b.put_i32(v);
            assert!(matches!(
                CoreMessage::decode(&mut b.freeze()),
                Err(DecodeError::InvalidLength { what: "endOfBodyPosition", .. })
            ));
        }
        let mut b = BytesMut::new();
        b.put_i32(i32::MAX);
        assert!(matches!(CoreMessage::decode(&mut b.freeze()), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn forced_delivery_marker_has_four_zero_body_bytes() {
        // core-protocol.md §7.1/§9.3: endOfBodyPosition 17, 4 zero bytes, type 0, priority 0.
        let mut headers =
            MessageHeaders { message_id: 77, address: Some("q1".into()), priority: 0, ..MessageHeaders::default() };
        headers.properties.insert(names::FORCED_DELIVERY_SEQ, PropertyValue::Long(3));
        let mut b = BytesMut::new();
        b.put_slice(&hex("00 00 00 11 00 00 00 00"));
        headers.encode(&mut b);
        let m = CoreMessage::decode(&mut b.freeze()).unwrap();
        assert_eq!(&m.body[..], [0, 0, 0, 0]);
        assert_eq!(m.headers.forced_delivery_sequence(), Some(3));
        assert_eq!(m.headers.message_id, 77);
    }

    #[test]
    fn user_id_flag_must_be_exactly_one() {
        let mut with_id = MessageHeaders { user_id: Some([7; 16]), ..MessageHeaders::default() };
        with_id.durable = true;
        let mut b = BytesMut::new();
        with_id.encode(&mut b);
        // Offset of the userID flag: messageID 8 + null address 1. Java writes 0x01.
        assert_eq!(b[9], 0x01);
        // durable is written as 0x01, not 0xFF.
        assert_eq!(b[9 + 1 + 16 + 1], 0x01);
        assert_eq!(MessageHeaders::decode(&mut b.clone().freeze()).unwrap(), with_id);
        // Any other non-zero flag means "no userID", exactly as the broker reads it:
        // the UUID bytes are then parsed as type, durable, expiration...
        b[9] = 0xFF;
        let misparsed = MessageHeaders::decode(&mut b.freeze()).unwrap();
        assert_eq!(misparsed.user_id, None);
        assert_eq!(misparsed.message_type, MessageType(7));
    }

    #[test]
    fn text_body_golden() {
        // core-protocol.md §8.1: TEXT "hi" body = 01 00 00 00 04 68 00 69 00.
        let mut m = CoreMessage::default();
        m.set_text(Some("hi"));
        assert_eq!(&m.body[..], hex("01 00 00 00 04 68 00 69 00"));
        assert_eq!(m.headers.message_type, MessageType::TEXT);
        assert_eq!(m.text().unwrap().unwrap(), "hi");
        m.set_text(None);
        assert_eq!(&m.body[..], [0]);
        assert_eq!(m.text().unwrap(), None);
    }

    #[test]
    fn map_body_empty_is_single_zero() {
        let mut m = CoreMessage::default();
        m.set_map(&TypedProperties::new());
        assert_eq!(&m.body[..], [0]);
        assert!(m.map().unwrap().is_empty());
        assert!(CoreMessage::default().map().unwrap().is_empty());
    }

    #[test]
    fn stream_body_encodings() {
        let mut m = CoreMessage::default();
        m.set_stream(&[StreamValue::Boolean(true), StreamValue::String(None), StreamValue::String(Some("ab".into()))]);
        assert_eq!(&m.body[..], hex("02 FF 0A 00 0A 01 00 00 00 02 00 61 00 62"));
        assert_eq!(m.stream().unwrap().len(), 3);
        // A NULL tag is not a stream element.
        let bad = CoreMessage { body: Bytes::from_static(&[0]), ..CoreMessage::default() };
        assert_eq!(bad.stream(), Err(DecodeError::UnknownPropertyType { tag: 0 }));
    }

    #[test]
    fn uuid_text_and_jms_message_id() {
        let id = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
        assert_eq!(format_uuid(&id), "12345678-9abc-def0-0123-456789abcdef");
        let h = MessageHeaders { user_id: Some(id), ..MessageHeaders::default() };
        assert_eq!(h.jms_message_id().unwrap(), "ID:12345678-9abc-def0-0123-456789abcdef");
    }

    #[test]
    fn jms_accessors() {
        let mut h = MessageHeaders::default();
        h.set_correlation_id("c1");
        h.set_reply_to("queue://replies");
        h.set_jms_type("t");
        h.set_group_id("g");
        h.set_duplicate_id("d");
        h.set_routing_type(routing_type::ANYCAST);
        h.properties.insert(names::GROUP_SEQUENCE, PropertyValue::Int(2));
        h.properties.insert(names::SCHEDULED_DELIVERY_TIME, PropertyValue::Long(99));
        h.properties.insert(names::LARGE_BODY_SIZE, PropertyValue::Long(5));
        h.properties.insert(names::LARGE_COMPRESSED, PropertyValue::Boolean(true));
        assert_eq!(h.correlation_id(), Some(&PropertyValue::String("c1".into())));
        assert_eq!(h.reply_to().unwrap(), "queue://replies");
        assert_eq!(h.jms_type().unwrap(), "t");
        assert_eq!(h.group_id().unwrap(), "g");
        assert_eq!(h.group_sequence(), Some(2));
        assert_eq!(h.duplicate_id(), Some(&PropertyValue::String("d".into())));
        assert_eq!(h.routing_type(), Some(1));
        assert_eq!(h.scheduled_delivery_time(), Some(99));
        assert_eq!(h.large_body_size(), Some(5));
        assert!(h.is_compressed());
        assert_eq!(h.forced_delivery_sequence(), None);
        h.set_duplicate_id_bytes(Bytes::from_static(b"x"));
        assert_eq!(h.duplicate_id(), Some(&PropertyValue::Bytes(Bytes::from_static(b"x"))));
    }

    proptest! {
        #[test]
        fn prop_message_round_trips(m in arb_message()) {
            prop_assert_eq!(round_trip(&m), m);
        }

        #[test]
        fn prop_headers_round_trip(h in arb_headers()) {
            let mut b = BytesMut::new();
            h.encode(&mut b);
            prop_assert_eq!(b.len(), h.encoded_len());
            let mut bytes = b.freeze();
            prop_assert_eq!(MessageHeaders::decode(&mut bytes).unwrap(), h);
            prop_assert!(!bytes.has_remaining());
        }

        #[test]
        fn prop_text_body_round_trips(t in proptest::option::of(any::<String>())) {
            let mut m = CoreMessage::default();
            m.set_text(t.as_deref());
            let back = round_trip(&m);
            prop_assert_eq!(back.text().unwrap().map(|s| s.try_to_string().unwrap()), t);
        }

        #[test]
        fn prop_map_body_round_trips(p in arb_properties()) {
            let mut m = CoreMessage::default();
            m.set_map(&p);
            prop_assert_eq!(round_trip(&m).map().unwrap(), p);
        }

        #[test]
        fn prop_stream_body_round_trips(v in prop::collection::vec(arb_stream_value(), 0..10)) {
            let mut m = CoreMessage::default();
            m.set_stream(&v);
            prop_assert_eq!(round_trip(&m).stream().unwrap(), v);
        }

        #[test]
        fn prop_bytes_body_round_trips(v in prop::collection::vec(any::<u8>(), 0..100)) {
            let mut m = CoreMessage::default();
            m.set_bytes(Bytes::from(v.clone()));
            prop_assert_eq!(&round_trip(&m).body[..], &v[..]);
        }

        #[test]
        fn prop_message_decode_never_panics(v in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = CoreMessage::decode(&mut Bytes::from(v.clone()));
            let _ = MessageHeaders::decode(&mut Bytes::from(v.clone()));
            let m = CoreMessage { body: Bytes::from(v), ..CoreMessage::default() };
            let _ = m.text();
            let _ = m.map();
            let _ = m.stream();
        }
    }
}
