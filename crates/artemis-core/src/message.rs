//! The message model applications use: the codec's [`CoreMessage`] (headers,
//! typed properties, raw body) with its body helpers for every type (text, bytes,
//! map, stream, object as opaque bytes, default), plus what the codec cannot do
//! without a random source: a fresh JMSMessageID.

pub use crate::protocol::message::{format_uuid, routing_type, CoreMessage, MessageHeaders, MessageType, StreamValue};
pub use crate::protocol::properties::{names, PropertyValue, TypedProperties};
pub use crate::protocol::SimpleString;

/// A random UUID for [`MessageHeaders::user_id`], the JMSMessageID, with the
/// version nibble 1 and the RFC variant bits. The Java client stamps exactly
/// these bits onto every userID it decodes (`new UUID(TYPE_TIME_BASED, bytes)` in
/// `CoreMessage.decodeHeadersAndProperties`), so any other value would show Java
/// consumers another JMSMessageID than the one sent.
pub fn new_user_id() -> [u8; 16] {
    let mut id = *uuid::Uuid::new_v4().as_bytes();
    id[6] = (id[6] & 0x0F) | 0x10;
    id[8] = (id[8] & 0x3F) | 0x80;
    id
}

/// A durable message for `address` with the JMS defaults (priority 4) and the
/// current time as timestamp.
pub fn durable_message(address: &str) -> CoreMessage {
    let mut m = CoreMessage::default();
    m.headers.address = Some(SimpleString::new(address));
    m.headers.durable = true;
    m.headers.timestamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_fresh_and_carry_the_bits_java_stamps() {
        let a = new_user_id();
        assert_ne!(a, new_user_id());
        assert_eq!((a[6] >> 4, a[8] >> 6), (1, 2), "version 1, RFC variant");
        let m = durable_message("q");
        assert!(m.headers.durable && m.headers.timestamp > 0 && m.headers.priority == 4);
    }
}
