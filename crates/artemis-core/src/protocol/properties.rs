//! `TypedProperties`: the typed key/value map used for message properties and MAP
//! bodies (`core-protocol.md` §7.2), plus the names of the well-known properties
//! (§7.4) in [`names`].
//!
//! Entries keep their insertion (or wire) order, so a decoded map re-encodes to the
//! same bytes; equality ignores order, because the broker keeps them in a HashMap.

use bytes::{Buf, BufMut, Bytes};

use super::error::DecodeError;
use super::wire::{GetCore, PutCore, SimpleString, NOT_NULL_BYTE};

/// Value type tags of TypedProperties and of STREAM bodies
/// (`DataConstants`, `core-protocol.md` §7.2).
pub mod tag {
    /// NULL value (no bytes follow).
    pub const NULL: i8 = 0;
    /// "Not null" flag; never a value type.
    pub const NOT_NULL: i8 = 1;
    /// BOOLEAN: one byte.
    pub const BOOLEAN: i8 = 2;
    /// BYTE: `i8`.
    pub const BYTE: i8 = 3;
    /// BYTES: `i32 len` + bytes.
    pub const BYTES: i8 = 4;
    /// SHORT: `i16`.
    pub const SHORT: i8 = 5;
    /// INT: `i32`.
    pub const INT: i8 = 6;
    /// LONG: `i64`.
    pub const LONG: i8 = 7;
    /// FLOAT: IEEE bits as `i32`.
    pub const FLOAT: i8 = 8;
    /// DOUBLE: IEEE bits as `i64`.
    pub const DOUBLE: i8 = 9;
    /// STRING: a SimpleString in TypedProperties, a nullable `String` in STREAM bodies.
    pub const STRING: i8 = 10;
    /// CHAR: one UTF-16 unit as `i16`.
    pub const CHAR: i8 = 11;
}

/// Well-known property names (`Message.java` `HDR_*`, `MessageUtil.java`;
/// `core-protocol.md` §7.4).
pub mod names {
    /// Duplicate-detection id (STRING or BYTES) (`HDR_DUPLICATE_DETECTION_ID`).
    pub const DUPLICATE_ID: &str = "_AMQ_DUPL_ID";
    /// Internal queue ids to route to directly; strip before re-sending (`HDR_ROUTE_TO_IDS`).
    pub const ROUTE_TO_IDS: &str = "_AMQ_ROUTE_TO";
    /// Internal scale-down target ids; strip before re-sending (`HDR_SCALEDOWN_TO_IDS`).
    pub const SCALEDOWN_TO_IDS: &str = "_AMQ_SCALEDOWN_TO";
    /// Internal ack-routing ids; strip before re-sending (`HDR_ROUTE_TO_ACK_IDS`).
    pub const ROUTE_TO_ACK_IDS: &str = "_AMQ_ACK_ROUTE_TO";
    /// Bridge duplicate id; strip before re-sending (`HDR_BRIDGE_DUPLICATE_ID`).
    pub const BRIDGE_DUPLICATE_ID: &str = "_AMQ_BRIDGE_DUP";
    /// Time the message actually expired (`HDR_ACTUAL_EXPIRY_TIME`).
    pub const ACTUAL_EXPIRY: &str = "_AMQ_ACTUAL_EXPIRY";
    /// Address before a DLQ / expiry / move (`HDR_ORIGINAL_ADDRESS`).
    pub const ORIGINAL_ADDRESS: &str = "_AMQ_ORIG_ADDRESS";
    /// Queue before a DLQ / expiry / move (`HDR_ORIGINAL_QUEUE`).
    pub const ORIGINAL_QUEUE: &str = "_AMQ_ORIG_QUEUE";
    /// Message id before a DLQ / expiry / move (`HDR_ORIG_MESSAGE_ID`).
    pub const ORIGINAL_MESSAGE_ID: &str = "_AMQ_ORIG_MESSAGE_ID";
    /// Routing type before a DLQ / expiry / move (`HDR_ORIG_ROUTING_TYPE`).
    pub const ORIGINAL_ROUTING_TYPE: &str = "_AMQ_ORIG_ROUTING_TYPE";
    /// Message group (JMSXGroupID) (`HDR_GROUP_ID`).
    pub const GROUP_ID: &str = "_AMQ_GROUP_ID";
    /// Message group sequence (JMSXGroupSeq), INT (`HDR_GROUP_SEQUENCE`).
    pub const GROUP_SEQUENCE: &str = "_AMQ_GROUP_SEQUENCE";
    /// BOOLEAN: the body is zlib-compressed (`HDR_LARGE_COMPRESSED`, §11.3).
    pub const LARGE_COMPRESSED: &str = "_AMQ_LARGE_COMPRESSED";
    /// LONG: uncompressed body size of a large message (`HDR_LARGE_BODY_SIZE`).
    pub const LARGE_BODY_SIZE: &str = "_AMQ_LARGE_SIZE";
    /// LONG: scheduled delivery time, epoch ms (`HDR_SCHEDULED_DELIVERY_TIME`).
    pub const SCHEDULED_DELIVERY_TIME: &str = "_AMQ_SCHED_DELIVERY";
    /// Last-value key (`HDR_LAST_VALUE_NAME`).
    pub const LAST_VALUE_NAME: &str = "_AMQ_LVQ_NAME";
    /// Content type (`HDR_CONTENT_TYPE`).
    pub const CONTENT_TYPE: &str = "_AMQ_CONTENT_TYPE";
    /// Validated user (JMSXUserID) (`HDR_VALIDATED_USER`).
    pub const VALIDATED_USER: &str = "_AMQ_VALIDATED_USER";
    /// BYTE: routing type, 0 MULTICAST, 1 ANYCAST; drives auto-creation (`HDR_ROUTING_TYPE`, §8.3).
    pub const ROUTING_TYPE: &str = "_AMQ_ROUTING_TYPE";
    /// Broker ingress timestamp (`HDR_INGRESS_TIMESTAMP`).
    pub const INGRESS_TIMESTAMP: &str = "_AMQ_INGRESS_TIMESTAMP";
    /// Prefix of the broker's own properties (`HDR_PREFIX`).
    pub const PREFIX: &str = "_AMQ_PREFIX";
    /// JMSCorrelationID: STRING or BYTES (`MessageUtil.CORRELATIONID_HEADER_NAME`).
    pub const JMS_CORRELATION_ID: &str = "JMSCorrelationID";
    /// JMSReplyTo: STRING such as `queue://name` (`MessageUtil.REPLYTO_HEADER_NAME`).
    pub const JMS_REPLY_TO: &str = "JMSReplyTo";
    /// JMSType: STRING (`MessageUtil.TYPE_HEADER_NAME`).
    pub const JMS_TYPE: &str = "JMSType";
    /// JMS connection id, used for noLocal (`MessageUtil.CONNECTION_ID_PROPERTY_NAME`).
    pub const CONNECTION_ID: &str = "__AMQ_CID";
    /// LONG: marks the forced-delivery marker message of a browser; never ack it
    /// (`ClientConsumerImpl.FORCED_DELIVERY_MESSAGE`, §10).
    pub const FORCED_DELIVERY_SEQ: &str = "_hornetq.forced.delivery.seq";

    /// Prefixes of broker-internal properties that must be stripped before a
    /// consumed message is sent again (`core-protocol.md` §15 item 13).
    pub const BROKER_INTERNAL_PREFIXES: [&str; 4] =
        [ROUTE_TO_IDS, ROUTE_TO_ACK_IDS, SCALEDOWN_TO_IDS, BRIDGE_DUPLICATE_ID];
}

/// One typed property value (`core-protocol.md` §7.2).
///
/// Equality compares floats by their bits, so NaN payloads round-trip and compare
/// equal to themselves.
#[derive(Debug, Clone)]
pub enum PropertyValue {
    /// NULL (tag 0).
    Null,
    /// BOOLEAN (tag 2).
    Boolean(bool),
    /// BYTE (tag 3).
    Byte(i8),
    /// SHORT (tag 5).
    Short(i16),
    /// INT (tag 6).
    Int(i32),
    /// LONG (tag 7).
    Long(i64),
    /// FLOAT (tag 8).
    Float(f32),
    /// DOUBLE (tag 9).
    Double(f64),
    /// CHAR (tag 11): one UTF-16 unit.
    Char(u16),
    /// STRING (tag 10): a SimpleString.
    String(SimpleString),
    /// BYTES (tag 4).
    Bytes(Bytes),
}

impl PartialEq for PropertyValue {
    fn eq(&self, other: &Self) -> bool {
        use PropertyValue::*;
        match (self, other) {
            (Null, Null) => true,
            (Boolean(a), Boolean(b)) => a == b,
            (Byte(a), Byte(b)) => a == b,
            (Short(a), Short(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (Long(a), Long(b)) => a == b,
            (Float(a), Float(b)) => a.to_bits() == b.to_bits(),
            (Double(a), Double(b)) => a.to_bits() == b.to_bits(),
            (Char(a), Char(b)) => a == b,
            (String(a), String(b)) => a == b,
            (Bytes(a), Bytes(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for PropertyValue {}

impl PropertyValue {
    /// The type tag written before the value.
    pub fn tag(&self) -> i8 {
        match self {
            PropertyValue::Null => tag::NULL,
            PropertyValue::Boolean(_) => tag::BOOLEAN,
            PropertyValue::Byte(_) => tag::BYTE,
            PropertyValue::Short(_) => tag::SHORT,
            PropertyValue::Int(_) => tag::INT,
            PropertyValue::Long(_) => tag::LONG,
            PropertyValue::Float(_) => tag::FLOAT,
            PropertyValue::Double(_) => tag::DOUBLE,
            PropertyValue::Char(_) => tag::CHAR,
            PropertyValue::String(_) => tag::STRING,
            PropertyValue::Bytes(_) => tag::BYTES,
        }
    }

    /// Writes tag + value as TypedProperties does (BOOLEAN as `0x01`/`0x00`).
    pub fn encode(&self, buf: &mut impl BufMut) {
        buf.put_i8(self.tag());
        match self {
            PropertyValue::Null => {}
            PropertyValue::Boolean(v) => buf.put_raw_bool(*v),
            PropertyValue::Byte(v) => buf.put_i8(*v),
            PropertyValue::Short(v) => buf.put_i16(*v),
            PropertyValue::Int(v) => buf.put_i32(*v),
            PropertyValue::Long(v) => buf.put_i64(*v),
            PropertyValue::Float(v) => buf.put_f32_bits(*v),
            PropertyValue::Double(v) => buf.put_f64_bits(*v),
            PropertyValue::Char(v) => buf.put_u16(*v),
            PropertyValue::String(v) => buf.put_simple_string(v),
            PropertyValue::Bytes(v) => buf.put_len_prefixed_bytes(v),
        }
    }

    /// Reads tag + value.
    pub fn decode(buf: &mut impl Buf) -> Result<Self, DecodeError> {
        let t = buf.read_i8()?;
        Ok(match t {
            tag::NULL => PropertyValue::Null,
            tag::BOOLEAN => PropertyValue::Boolean(buf.read_bool()?),
            tag::BYTE => PropertyValue::Byte(buf.read_i8()?),
            tag::SHORT => PropertyValue::Short(buf.read_i16()?),
            tag::INT => PropertyValue::Int(buf.read_i32()?),
            tag::LONG => PropertyValue::Long(buf.read_i64()?),
            tag::FLOAT => PropertyValue::Float(buf.read_f32()?),
            tag::DOUBLE => PropertyValue::Double(buf.read_f64()?),
            tag::CHAR => PropertyValue::Char(buf.read_u16()?),
            tag::STRING => PropertyValue::String(buf.read_simple_string()?),
            tag::BYTES => PropertyValue::Bytes(buf.read_len_prefixed_bytes("BYTES property")?),
            other => return Err(DecodeError::UnknownPropertyType { tag: other }),
        })
    }

    /// Bytes the value takes on the wire, tag included.
    pub fn encoded_len(&self) -> usize {
        1 + match self {
            PropertyValue::Null => 0,
            PropertyValue::Boolean(_) | PropertyValue::Byte(_) => 1,
            PropertyValue::Short(_) | PropertyValue::Char(_) => 2,
            PropertyValue::Int(_) | PropertyValue::Float(_) => 4,
            PropertyValue::Long(_) | PropertyValue::Double(_) => 8,
            PropertyValue::String(s) => s.encoded_len(),
            PropertyValue::Bytes(b) => 4 + b.len(),
        }
    }

    /// The value as a SimpleString, if it is a STRING.
    pub fn as_simple_string(&self) -> Option<&SimpleString> {
        match self {
            PropertyValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value widened to `i64`, if it is a BYTE, SHORT, INT or LONG (as Java's
    /// `getLongProperty` and `getScheduledDeliveryTime` accept any integer).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            PropertyValue::Byte(v) => Some(i64::from(v)),
            PropertyValue::Short(v) => Some(i64::from(v)),
            PropertyValue::Int(v) => Some(i64::from(v)),
            PropertyValue::Long(v) => Some(v),
            _ => None,
        }
    }

    /// The value as a boolean, if it is a BOOLEAN.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            PropertyValue::Boolean(v) => Some(v),
            _ => None,
        }
    }
}

/// Core TypedProperties: unique SimpleString keys → [`PropertyValue`], in insertion
/// order (`core-protocol.md` §7.2).
///
/// On the wire: flag byte (`0` = none, also for an empty map; `1` = present), then
/// `i32 count` and `count × {SimpleString key, tag, value}`.
#[derive(Debug, Clone, Default)]
pub struct TypedProperties {
    entries: Vec<(SimpleString, PropertyValue)>,
}

impl PartialEq for TypedProperties {
    /// Same keys with equal values, in any order (the broker keeps a HashMap).
    fn eq(&self, other: &Self) -> bool {
        self.entries.len() == other.entries.len()
            && self.entries.iter().all(|(k, v)| other.get_ss(k).is_some_and(|o| o == v))
    }
}

impl Eq for TypedProperties {}

impl TypedProperties {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `true` when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&PropertyValue> {
        self.entries.iter().find(|(k, _)| k.eq_str(key)).map(|(_, v)| v)
    }

    /// The value stored under a SimpleString key.
    pub fn get_ss(&self, key: &SimpleString) -> Option<&PropertyValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `true` if `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key`; an existing entry keeps its position. Returns the old value.
    pub fn insert(&mut self, key: impl Into<SimpleString>, value: PropertyValue) -> Option<PropertyValue> {
        let key = key.into();
        if let Some((_, slot)) = self.entries.iter_mut().find(|(k, _)| *k == key) {
            return Some(std::mem::replace(slot, value));
        }
        self.entries.push((key, value));
        None
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<PropertyValue> {
        let pos = self.entries.iter().position(|(k, _)| k.eq_str(key))?;
        Some(self.entries.remove(pos).1)
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(&SimpleString, &PropertyValue) -> bool) {
        self.entries.retain(|(k, v)| keep(k, v));
    }

    /// Removes the broker-internal routing properties (`_AMQ_ROUTE_TO*`,
    /// `_AMQ_ACK_ROUTE_TO*`, `_AMQ_SCALEDOWN_TO*`, `_AMQ_BRIDGE_DUP*`) that must not
    /// travel with a re-sent copy (`core-protocol.md` §7.4, §15 item 13). Returns
    /// how many were removed.
    pub fn remove_broker_internal(&mut self) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| !names::BROKER_INTERNAL_PREFIXES.iter().any(|p| k.starts_with_str(p)));
        before - self.entries.len()
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&SimpleString, &PropertyValue)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Bytes the map takes on the wire.
    pub fn encoded_len(&self) -> usize {
        if self.entries.is_empty() {
            1
        } else {
            1 + 4 + self.entries.iter().map(|(k, v)| k.encoded_len() + v.encoded_len()).sum::<usize>()
        }
    }

    /// Writes the map (`TypedProperties.encode`): an empty map is the single byte `00`.
    pub fn encode(&self, buf: &mut impl BufMut) {
        if self.entries.is_empty() {
            buf.put_u8(0);
            return;
        }
        buf.put_u8(NOT_NULL_BYTE);
        buf.put_i32(self.entries.len() as i32);
        for (k, v) in &self.entries {
            buf.put_simple_string(k);
            v.encode(buf);
        }
    }

    /// Reads a map (`TypedProperties.decode`). A repeated key keeps the last value,
    /// as Java's HashMap does.
    pub fn decode(buf: &mut impl Buf) -> Result<Self, DecodeError> {
        if buf.read_u8()? == 0 {
            return Ok(Self::new());
        }
        // Each entry takes at least 4 (key length) + 1 (tag) bytes: bounds the
        // allocation by the bytes actually present.
        let count = buf.read_len("TypedProperties count", 5)?;
        let mut props = TypedProperties { entries: Vec::with_capacity(count) };
        for _ in 0..count {
            let key = buf.read_simple_string()?;
            let value = PropertyValue::decode(buf)?;
            props.insert(key, value);
        }
        Ok(props)
    }
}

impl<K: Into<SimpleString>> FromIterator<(K, PropertyValue)> for TypedProperties {
    fn from_iter<I: IntoIterator<Item = (K, PropertyValue)>>(iter: I) -> Self {
        let mut props = TypedProperties::new();
        for (k, v) in iter {
            props.insert(k, v);
        }
        props
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::wire::tests::{arb_simple_string, hex};
    use bytes::BytesMut;
    use proptest::prelude::*;

    pub(crate) fn arb_value() -> impl Strategy<Value = PropertyValue> {
        prop_oneof![
            Just(PropertyValue::Null),
            any::<bool>().prop_map(PropertyValue::Boolean),
            any::<i8>().prop_map(PropertyValue::Byte),
            any::<i16>().prop_map(PropertyValue::Short),
            any::<i32>().prop_map(PropertyValue::Int),
            any::<i64>().prop_map(PropertyValue::Long),
            any::<u32>().prop_map(|b| PropertyValue::Float(f32::from_bits(b))),
            any::<u64>().prop_map(|b| PropertyValue::Double(f64::from_bits(b))),
            any::<u16>().prop_map(PropertyValue::Char),
            arb_simple_string().prop_map(PropertyValue::String),
            prop::collection::vec(any::<u8>(), 0..40).prop_map(|v| PropertyValue::Bytes(Bytes::from(v))),
        ]
    }

    pub(crate) fn arb_properties() -> impl Strategy<Value = TypedProperties> {
        prop::collection::vec((arb_simple_string(), arb_value()), 0..8)
            .prop_map(|v| v.into_iter().collect::<TypedProperties>())
    }

    #[test]
    fn empty_map_is_single_null_byte() {
        let mut b = BytesMut::new();
        TypedProperties::new().encode(&mut b);
        assert_eq!(&b[..], [0]);
        assert_eq!(TypedProperties::new().encoded_len(), 1);
        assert!(TypedProperties::decode(&mut Bytes::from_static(&[0])).unwrap().is_empty());
    }

    #[test]
    fn routing_type_property_golden() {
        // core-protocol.md §8.1: 1 property "_AMQ_ROUTING_TYPE" BYTE 1.
        let props: TypedProperties = [(names::ROUTING_TYPE, PropertyValue::Byte(1))].into_iter().collect();
        let mut b = BytesMut::new();
        props.encode(&mut b);
        let mut expected = hex("01 00 00 00 01 00 00 00 22");
        for u in "_AMQ_ROUTING_TYPE".encode_utf16() {
            expected.extend_from_slice(&u.to_le_bytes());
        }
        expected.extend_from_slice(&[0x03, 0x01]);
        assert_eq!(b.to_vec(), expected);
        assert_eq!(props.encoded_len(), expected.len());
    }

    #[test]
    fn boolean_is_written_as_one() {
        let props: TypedProperties = [("b", PropertyValue::Boolean(true))].into_iter().collect();
        let mut b = BytesMut::new();
        props.encode(&mut b);
        assert_eq!(*b.last().unwrap(), 0x01);
    }

    #[test]
    fn every_value_type_boundary_round_trips() {
        let values = [
            PropertyValue::Null,
            PropertyValue::Boolean(false),
            PropertyValue::Boolean(true),
            PropertyValue::Byte(i8::MIN),
            PropertyValue::Byte(i8::MAX),
            PropertyValue::Short(i16::MIN),
            PropertyValue::Short(i16::MAX),
            PropertyValue::Int(i32::MIN),
            PropertyValue::Int(-1),
            PropertyValue::Long(i64::MIN),
            PropertyValue::Long(i64::MAX),
            PropertyValue::Float(f32::NAN),
            PropertyValue::Float(-0.0),
            PropertyValue::Double(f64::INFINITY),
            PropertyValue::Double(f64::MIN_POSITIVE),
            PropertyValue::Char(0xD800),
            PropertyValue::Char(0),
            PropertyValue::String(SimpleString::new("")),
            PropertyValue::String(SimpleString::new("日本")),
            PropertyValue::Bytes(Bytes::new()),
            PropertyValue::Bytes(Bytes::from_static(&[0, 255])),
        ];
        let props: TypedProperties = values.iter().enumerate().map(|(i, v)| (format!("k{i}"), v.clone())).collect();
        let mut b = BytesMut::new();
        props.encode(&mut b);
        assert_eq!(b.len(), props.encoded_len());
        let mut bytes = b.freeze();
        let back = TypedProperties::decode(&mut bytes).unwrap();
        assert!(!bytes.has_remaining());
        assert_eq!(back, props);
        let order: Vec<String> = back.iter().map(|(k, _)| k.to_string()).collect();
        assert_eq!(order, (0..values.len()).map(|i| format!("k{i}")).collect::<Vec<_>>());
    }

    #[test]
    fn unknown_tag_is_an_error() {
        let mut b = BytesMut::new();
        b.put_u8(1);
        b.put_i32(1);
        b.put_simple_string(&"k".into());
        b.put_i8(12);
        assert_eq!(TypedProperties::decode(&mut b.freeze()), Err(DecodeError::UnknownPropertyType { tag: 12 }));
        assert_eq!(
            PropertyValue::decode(&mut Bytes::from_static(&[1])),
            Err(DecodeError::UnknownPropertyType { tag: 1 })
        );
    }

    #[test]
    fn huge_count_is_refused_before_allocating() {
        let mut b = Bytes::from(hex("01 7F FF FF FF 00"));
        assert!(matches!(TypedProperties::decode(&mut b), Err(DecodeError::Truncated { .. })));
        let mut b = Bytes::from(hex("01 FF FF FF FF"));
        assert!(matches!(TypedProperties::decode(&mut b), Err(DecodeError::InvalidLength { .. })));
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let mut b = BytesMut::new();
        b.put_u8(1);
        b.put_i32(2);
        for v in [1, 2] {
            b.put_simple_string(&"k".into());
            PropertyValue::Int(v).encode(&mut b);
        }
        let props = TypedProperties::decode(&mut b.freeze()).unwrap();
        assert_eq!(props.len(), 1);
        assert_eq!(props.get("k"), Some(&PropertyValue::Int(2)));
    }

    #[test]
    fn insert_replaces_in_place_and_equality_ignores_order() {
        let mut a = TypedProperties::new();
        a.insert("x", PropertyValue::Int(1));
        a.insert("y", PropertyValue::Int(2));
        assert_eq!(a.insert("x", PropertyValue::Int(3)), Some(PropertyValue::Int(1)));
        assert_eq!(a.iter().next().unwrap().0, "x");
        let b: TypedProperties = [("y", PropertyValue::Int(2)), ("x", PropertyValue::Int(3))].into_iter().collect();
        assert_eq!(a, b);
        assert_eq!(a.remove("x"), Some(PropertyValue::Int(3)));
        assert_ne!(a, b);
    }

    #[test]
    fn strips_broker_internal_properties() {
        let mut p: TypedProperties = [
            ("_AMQ_ROUTE_TO", PropertyValue::Bytes(Bytes::new())),
            ("_AMQ_ROUTE_TOfoo", PropertyValue::Null),
            ("_AMQ_ACK_ROUTE_TO", PropertyValue::Null),
            ("_AMQ_SCALEDOWN_TO", PropertyValue::Null),
            ("_AMQ_BRIDGE_DUP", PropertyValue::Null),
            ("_AMQ_DUPL_ID", PropertyValue::Null),
            ("JMSType", PropertyValue::Null),
        ]
        .into_iter()
        .collect();
        assert_eq!(p.remove_broker_internal(), 5);
        assert_eq!(p.len(), 2);
        assert!(p.contains(names::DUPLICATE_ID));
    }

    proptest! {
        #[test]
        fn prop_value_round_trips(v in arb_value()) {
            let mut b = BytesMut::new();
            v.encode(&mut b);
            prop_assert_eq!(b.len(), v.encoded_len());
            let mut bytes = b.freeze();
            prop_assert_eq!(PropertyValue::decode(&mut bytes).unwrap(), v);
            prop_assert!(!bytes.has_remaining());
        }

        #[test]
        fn prop_properties_round_trip(p in arb_properties()) {
            let mut b = BytesMut::new();
            p.encode(&mut b);
            prop_assert_eq!(b.len(), p.encoded_len());
            let mut bytes = b.freeze();
            let back = TypedProperties::decode(&mut bytes).unwrap();
            prop_assert!(!bytes.has_remaining());
            // Same entries in the same order.
            prop_assert!(back.iter().eq(p.iter()));
            prop_assert_eq!(back, p);
        }

        #[test]
        fn prop_properties_decode_never_panics(v in prop::collection::vec(any::<u8>(), 0..128)) {
            let _ = TypedProperties::decode(&mut Bytes::from(v));
        }
    }
}
