//! Shared helpers: connecting to the test bed, fresh queues, messages, and the
//! canonical description of a message — the same JSON the Java helper prints
//! (`tests/java/Fidelity.java`, `describe`), so the two can be compared field by
//! field.

use std::time::Duration;

use artemis_core::message::{format_uuid, PropertyValue, SimpleString};
use artemis_core::{ConnectOptions, Connection, CoreMessage, Delivery};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use testbed::jolokia::Jolokia;
use testbed::{Node, TestBed};

/// How long a receive waits for a message that should be there.
pub const WAIT: Duration = Duration::from_secs(10);

/// How long a receive waits to show that nothing (more) comes.
pub const QUIET: Duration = Duration::from_millis(500);

/// The node most tests use.
pub async fn node() -> &'static Node {
    // `RUST_LOG=artemis_core=debug` shows the client's own log.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    TestBed::require().await.node("east-1")
}

/// Connection options for a test-bed node.
pub fn options(node: &Node) -> ConnectOptions {
    ConnectOptions::new("127.0.0.1", node.core_port)
        .credentials(node.user.clone(), node.password.clone())
        .call_timeout(Duration::from_secs(20))
}

/// A connection to east-1.
pub async fn connect() -> Connection {
    let node = node().await;
    Connection::connect(&options(node)).await.expect("connect to east-1")
}

/// A fresh durable anycast queue on east-1, created through Jolokia.
pub async fn fresh_queue(label: &str) -> String {
    let node = node().await;
    let name = testbed::unique_name(label);
    Jolokia::new(node).create_queue(&name).await.expect("create queue");
    name
}

/// Destroys a queue made by [`fresh_queue`].
pub async fn drop_queue(name: &str) {
    let node = node().await;
    let _ = Jolokia::new(node).destroy_queue(name).await;
}

/// The queue's depth as Jolokia reports it.
pub async fn depth(name: &str) -> i64 {
    let node = node().await;
    Jolokia::new(node).message_count(name).await.expect("message count")
}

/// A durable TEXT message to `address` with a `payload_id` property.
pub fn text(address: &str, payload_id: &str) -> CoreMessage {
    let mut m = artemis_core::message::durable_message(address);
    m.set_text(Some(&format!("text of {payload_id}")));
    m.headers.properties.insert("payload_id", PropertyValue::String(payload_id.into()));
    m
}

/// The `payload_id` property of a message.
pub fn payload_id(m: &CoreMessage) -> String {
    match m.headers.property("payload_id") {
        Some(PropertyValue::String(s)) => s.to_string_lossy(),
        other => panic!("message without payload_id: {other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn typed(v: &PropertyValue) -> Value {
    let (t, value) = match v {
        PropertyValue::Null => ("null", Value::Null),
        PropertyValue::Boolean(b) => ("boolean", json!(b)),
        PropertyValue::Byte(b) => ("byte", json!(b)),
        PropertyValue::Short(s) => ("short", json!(s)),
        PropertyValue::Int(i) => ("int", json!(i)),
        PropertyValue::Long(l) => ("long", json!(l)),
        PropertyValue::Float(f) => ("float", json!(float_text(f64::from(*f)))),
        PropertyValue::Double(d) => ("double", json!(float_text(*d))),
        PropertyValue::Char(c) => ("char", json!(String::from_utf16_lossy(&[*c]))),
        PropertyValue::String(s) => ("string", json!(s.to_string_lossy())),
        PropertyValue::Bytes(b) => ("bytes", json!(hex(b))),
    };
    json!({"type": t, "value": value})
}

/// Floats compare by value: Java prints `1.0E-300`, Rust `1e-300`.
fn float_text(v: f64) -> String {
    format!("{v:?}")
}

/// The canonical description of a message (the Java helper's JSON shape).
pub fn describe(m: &CoreMessage, delivery_count: i32, large: bool) -> Value {
    let h = &m.headers;
    let mut props = Map::new();
    for (k, v) in h.properties.iter() {
        props.insert(k.to_string_lossy(), typed(v));
    }
    let payload = h.property("payload_id").map(|v| match v {
        PropertyValue::String(s) => s.to_string_lossy(),
        other => format!("{other:?}"),
    });
    json!({
        "message_id": h.message_id,
        "address": h.address.as_ref().map(SimpleString::to_string_lossy),
        "core_type": h.message_type.0,
        "durable": h.durable,
        "priority": h.priority,
        "expiration": h.expiration,
        "timestamp": h.timestamp,
        "user_id": h.user_id.as_ref().map(format_uuid),
        "delivery_count": delivery_count,
        "payload_id": payload,
        "properties": Value::Object(props),
        "large": large,
        "body_sha256": hex(&Sha256::digest(&m.body)),
        "body_size": m.body.len(),
    })
}

/// A delivery's canonical description.
pub fn describe_delivery(d: &Delivery) -> Value {
    describe(d.message(), d.delivery_count(), d.was_large())
}

/// The Java helper's JSON with float and double values re-rendered by Rust, so
/// the two sides print numbers alike; and without the given fields.
pub fn normalize(v: &Value, without: &[&str]) -> Value {
    let mut v = v.clone();
    if let Some(props) = v.get_mut("properties").and_then(Value::as_object_mut) {
        for p in props.values_mut() {
            let text = p["value"].as_str().map(str::to_string);
            match (p["type"].as_str(), text) {
                // Java's Float.toString is the shortest text of the f32: parse it as one.
                (Some("float"), Some(t)) => p["value"] = json!(float_text(f64::from(t.parse::<f32>().expect("float")))),
                (Some("double"), Some(t)) => p["value"] = json!(float_text(t.parse::<f64>().expect("double"))),
                _ => {}
            }
        }
    }
    if let Some(map) = v.as_object_mut() {
        for f in without {
            map.remove(*f);
        }
    }
    v
}
