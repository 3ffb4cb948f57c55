//! Golden frames from the official Java Core client's own traffic (`tests/golden/`, captured by
//! `tests/java/GoldenCapture.java` through a recording proxy; `tests/golden/README.md` says how and what each
//! file is). Every frame is decoded with our codec and must re-encode to Java's exact bytes; each packet's fields
//! are checked against what the capture scenario set, and where the scenario fixes every value the packet is
//! built from scratch with our types and encoded, which must give Java's bytes too.
//!
//! The capture is Artemis 2.40.0 (client and broker), protocol version 136. Names (the queue), the session's
//! UUID, broker message ids and correlation ids vary between captures; they are read from `capture.json` or
//! from a related frame, never assumed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::OnceLock;

use artemis_core::protocol::large::{split_body, LargeMessageAssembler};
use artemis_core::protocol::message::{routing_type, CoreMessage, MessageHeaders, MessageType, StreamValue};
use artemis_core::protocol::packet::*;
use artemis_core::protocol::{
    encode_frame, packet_type, ExceptionType, Frame, FrameDecoder, Packet, PropertyValue, ProtocolVersion,
    SimpleString, TypedProperties,
};
use bytes::{Bytes, BytesMut};

/// The text the scenario uses everywhere: non-ASCII, a surrogate pair and a NUL (`GoldenCapture.TEXT`).
const TEXT: &str = "golden ✓ 日本語 𝄞 \u{0} end";
/// `GoldenCapture.TIMESTAMP` and `EXPIRATION`.
const TIMESTAMP: i64 = 1_700_000_000_000;
const EXPIRATION: i64 = 1_900_000_000_000;
/// Body kinds in the order they were sent (and, by their descending priorities, delivered).
const KINDS: [&str; 6] = ["text", "bytes", "map", "stream", "object", "default"];
/// 'ж', the CHAR value of the scenario.
const CHAR: u16 = 0x0436;
/// The large message: a 2500-byte BYTES body cut into chunks of `minLargeMessageSize` = 1024.
const LARGE_LEN: usize = 2500;
const CHUNK: usize = 1024;

/// What `capture.json` says about the run, and the protocol version the client announced.
struct Capture {
    queue: String,
    missing_queue: String,
    user: String,
    server_protocol_version: i32,
    files: BTreeMap<String, String>,
    version: ProtocolVersion,
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let text = std::fs::read_to_string(dir().join("capture.json")).expect("tests/golden/capture.json");
        let json: serde_json::Value = serde_json::from_str(&text).expect("capture.json is JSON");
        let s = |k: &str| json[k].as_str().unwrap_or_else(|| panic!("capture.json: {k}")).to_string();
        let files = json["files"]
            .as_object()
            .expect("capture.json: files")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        // Every packet shape follows the version the client announced in its CREATESESSION (whose own shape
        // does not depend on it).
        let Packet::CreateSessionV2(cs) = decode_with("c2s-createsession", ProtocolVersion::V135) else {
            panic!("c2s-createsession is not a CREATESESSION_V2");
        };
        Capture {
            queue: s("queue"),
            missing_queue: s("missing_queue"),
            user: s("user"),
            server_protocol_version: json["server_protocol_version"].as_i64().expect("server_protocol_version") as i32,
            files,
            version: ProtocolVersion::new(cs.session.version),
        }
    })
}

fn raw(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(format!("{name}.bin"))).unwrap_or_else(|e| panic!("tests/golden/{name}.bin: {e}"))
}

/// The file as a frame: it must hold exactly one, whole.
fn frame(name: &str) -> Frame {
    let bytes = raw(name);
    let mut src = BytesMut::from(&bytes[..]);
    let frame = FrameDecoder::default()
        .decode(&mut src)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .unwrap_or_else(|| panic!("{name}: not a whole frame"));
    assert!(src.is_empty(), "{name}: {} bytes after the frame", src.len());
    assert_eq!(frame.wire_len(), bytes.len(), "{name}");
    frame
}

fn decode_with(name: &str, version: ProtocolVersion) -> Packet {
    frame(name).decode_packet(version).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn packet(name: &str) -> Packet {
    decode_with(name, capture().version)
}

/// Encodes `packet` on `channel` as a whole frame.
fn encode(channel: i64, packet: impl Into<Packet>) -> Vec<u8> {
    let mut b = BytesMut::new();
    encode_frame(channel, &packet.into(), capture().version, &mut b).expect("encodes");
    b.to_vec()
}

/// Asserts that `packet`, encoded on the golden frame's channel, gives the golden bytes.
fn assert_encodes_to(name: &str, packet: impl Into<Packet>) {
    let golden = raw(name);
    let ours = encode(frame(name).header.channel_id, packet);
    assert!(ours == golden, "{name}: our encoding differs from Java's\n ours: {}\n java: {}", hex(&ours), hex(&golden));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

macro_rules! expect {
    ($name:expr, $variant:ident) => {
        match packet($name) {
            Packet::$variant(p) => p,
            other => panic!("{}: expected {}, got {other:?}", $name, stringify!($variant)),
        }
    };
}

fn ss(s: &str) -> SimpleString {
    SimpleString::new(s)
}

/// The 16-byte user id the scenario gives message `i`: `00 01 … 0e i`, with the version nibble (byte 6) and
/// the variant bits (byte 8) that Java's `UUID(TYPE_TIME_BASED, bytes)` sets.
fn user_id(i: u8) -> [u8; 16] {
    let mut id: [u8; 16] = std::array::from_fn(|k| k as u8);
    id[6] = 0x16;
    id[8] = 0x88;
    id[15] = i;
    id
}

/// One value of every TypedProperties type, as the scenario sets them (map bodies use the same values).
fn every_type(prefix: &str) -> Vec<(String, PropertyValue)> {
    [
        ("bool", PropertyValue::Boolean(true)),
        ("byte", PropertyValue::Byte(-7)),
        ("short", PropertyValue::Short(-30000)),
        ("int", PropertyValue::Int(i32::MIN)),
        ("long", PropertyValue::Long(i64::MAX)),
        ("float", PropertyValue::Float(1.5)),
        ("double", PropertyValue::Double(-2.25e300)),
        ("char", PropertyValue::Char(CHAR)),
        ("string", PropertyValue::String(ss(TEXT))),
        ("bytes", PropertyValue::Bytes(Bytes::from_static(&[0, 1, 0xff, 0x7f, 0x80]))),
        ("null", PropertyValue::Null),
    ]
    .into_iter()
    .map(|(k, v)| (format!("{prefix}{k}"), v))
    .collect()
}

/// `expected` in the order `wire_order` has them (Java writes TypedProperties in its HashMap's order), so that
/// our encoding can be compared byte for byte. Fails if the key sets differ.
fn in_wire_order(expected: &[(String, PropertyValue)], wire_order: &TypedProperties) -> TypedProperties {
    let keys: BTreeSet<String> = expected.iter().map(|(k, _)| k.clone()).collect();
    let wire: BTreeSet<String> = wire_order.iter().map(|(k, _)| k.to_string_lossy()).collect();
    assert_eq!(wire, keys, "property names");
    wire_order
        .iter()
        .map(|(k, _)| {
            let v = expected.iter().find(|(name, _)| *k == name.as_str()).map(|(_, v)| v.clone()).unwrap();
            (k.clone(), v)
        })
        .collect()
}

fn message_properties(kind: &str) -> Vec<(String, PropertyValue)> {
    let mut p = every_type("p_");
    p.push(("kind".into(), PropertyValue::String(ss(kind))));
    p
}

fn stream_values() -> Vec<StreamValue> {
    vec![
        StreamValue::Boolean(true),
        StreamValue::Byte(-7),
        StreamValue::Short(-30000),
        StreamValue::Char(CHAR),
        StreamValue::Int(i32::MIN),
        StreamValue::Long(i64::MAX),
        StreamValue::Float(1.5),
        StreamValue::Double(-2.25e300),
        StreamValue::String(Some(TEXT.into())),
        StreamValue::String(None),
        StreamValue::Bytes(Bytes::from_static(&[9, 8, 7])),
    ]
}

/// Java's serialization of the `java.lang.String` "golden object": magic, version, TC_STRING, u16 length.
fn serialized_object() -> Vec<u8> {
    let mut v = vec![0xAC, 0xED, 0x00, 0x05, 0x74, 0x00, 13];
    v.extend_from_slice(b"golden object");
    v
}

/// The message of kind number `i` as the scenario built it, properties and map entries in the order `java`
/// (the decoded golden message) has them.
fn expected_message(i: usize, java: &CoreMessage) -> CoreMessage {
    let kind = KINDS[i];
    let mut m = CoreMessage {
        headers: MessageHeaders {
            message_id: 0,
            address: Some(ss(&capture().queue)),
            user_id: Some(user_id(i as u8)),
            message_type: MessageType::DEFAULT,
            durable: kind != "default",
            expiration: if i % 2 == 0 { EXPIRATION } else { 0 },
            timestamp: TIMESTAMP + i as i64,
            priority: 9 - i as i8,
            properties: in_wire_order(&message_properties(kind), &java.headers.properties),
        },
        body: Bytes::new(),
    };
    match kind {
        "text" => m.set_text(Some(TEXT)),
        "bytes" => m.set_bytes(Bytes::from_static(&[0, 1, 2, 3, 0x7f, 0x80, 0xfe, 0xff])),
        "map" => m.set_map(&in_wire_order(&every_type(""), &java.map().expect("a MAP body"))),
        "stream" => m.set_stream(&stream_values()),
        "object" => {
            let data = serialized_object();
            let mut body = (data.len() as i32).to_be_bytes().to_vec();
            body.extend_from_slice(&data);
            m.body = Bytes::from(body);
            m.headers.message_type = MessageType::OBJECT;
        }
        _ => {}
    }
    m
}

fn large_body() -> Vec<u8> {
    (0..LARGE_LEN).map(|k| (k * 7) as u8).collect()
}

fn large_headers() -> MessageHeaders {
    MessageHeaders {
        message_id: 0,
        address: Some(ss(&capture().queue)),
        user_id: Some(user_id(10)),
        message_type: MessageType::BYTES,
        durable: true,
        expiration: EXPIRATION,
        timestamp: TIMESTAMP + 10,
        priority: 2,
        properties: [("kind", PropertyValue::String(ss("large")))].into_iter().collect(),
    }
}

fn golden_names() -> BTreeSet<String> {
    std::fs::read_dir(dir())
        .expect("tests/golden")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".bin"))
        .collect()
}

// ----------------------------------------------------------------------------------------- every frame

#[test]
fn every_golden_file_is_one_frame_listed_in_the_capture() {
    let listed: BTreeSet<String> = capture().files.keys().cloned().collect();
    assert_eq!(golden_names(), listed, "tests/golden/*.bin and capture.json disagree");
    assert!(listed.len() >= 50, "only {} golden frames", listed.len());
    for name in &listed {
        let name = name.trim_end_matches(".bin");
        let f = frame(name);
        let p = packet(name);
        assert_eq!(p.packet_type(), f.header.packet_type, "{name}");
        let known = Packet::KNOWN_TYPES.contains(&f.header.packet_type);
        assert_eq!(!known, matches!(p, Packet::Unknown { .. }), "{name}: {p:?}");
    }
}

#[test]
fn every_golden_frame_reencodes_to_javas_bytes() {
    // Decoding keeps everything Java wrote (property order, raw UTF-16, which flag bytes mean true), so our
    // encoder must give back every frame byte for byte, whichever side wrote it.
    for name in golden_names() {
        let name = name.trim_end_matches(".bin");
        let f = frame(name);
        assert_encodes_to(name, f.decode_packet(capture().version).unwrap());
    }
}

#[test]
fn versions() {
    assert_eq!(capture().version.get(), 136, "Artemis 2.40.0's client announces 136");
    let resp = expect!("s2c-createsession-resp", CreateSessionResponse);
    assert_eq!(resp.server_version, capture().server_protocol_version);
    assert_eq!(resp.server_version, 136);
}

// ------------------------------------------------------------------------------------- session, admin

#[test]
fn createsession_matches_ours() {
    let java = expect!("c2s-createsession", CreateSessionV2);
    let name = &java.session.name;
    assert_eq!(name.len(), 36, "a UUID: {name}");
    assert_eq!(name.matches('-').count(), 4, "a UUID: {name}");
    assert!(java.session.password.as_deref().is_some_and(|p| !p.is_empty()));
    let mut ours = CreateSession::new(name.clone(), 10, capture().version);
    ours.username = Some(capture().user.clone());
    ours.password = java.session.password.clone();
    ours.min_large_message_size = CHUNK as i32;
    ours.auto_commit_sends = false;
    ours.auto_commit_acks = false;
    let ours = CreateSessionV2 { session: ours, client_id: None };
    assert_eq!(java, ours);
    assert_encodes_to("c2s-createsession", ours);
}

#[test]
fn queue_admin_packets_match_ours() {
    let queue = ss(&capture().queue);
    assert_encodes_to("c2s-queuequery", SessionQueueQuery { queue_name: queue.clone() });
    assert_encodes_to("c2s-create-queue", CreateQueueV2::anycast(queue.clone(), queue.clone()));
    assert_encodes_to("c2s-bindingquery", SessionBindingQuery { address: queue.clone() });
    assert_encodes_to("c2s-delete-queue", SessionDeleteQueue { queue_name: queue.clone() });
    // CREATE_QUEUE_V2 asked for a response: NULL_RESPONSE without a correlation id.
    assert_eq!(expect!("s2c-null-response", NullResponse).correlation_id, -1);
}

#[test]
fn queue_query_answers() {
    let queue = ss(&capture().queue);
    let missing = expect!("s2c-queuequery-resp-missing", SessionQueueQueryResponseV3);
    assert!(!missing.exists);
    assert_eq!(missing.enabled, None, "a missing queue's answer leaves `enabled` out");
    let exists = expect!("s2c-queuequery-resp", SessionQueueQueryResponseV3);
    assert!(exists.exists && exists.durable && !exists.temporary && !exists.auto_created);
    assert_eq!((exists.consumer_count, exists.message_count), (0, 0));
    assert_eq!((exists.address.as_ref(), exists.name.as_ref()), (Some(&queue), Some(&queue)));
    assert_eq!(exists.routing_type, routing_type::ANYCAST);
    assert_eq!(exists.max_consumers, -1);
    assert_eq!(exists.filter_string, None);
    assert_eq!(exists.default_consumer_window_size, Some(1024 * 1024));
    assert_eq!(exists.enabled, Some(true));
    // Every group of optional fields was present (a 2.40 broker writes them all).
    assert_eq!(exists.configuration_managed, Some(false));

    let binding = expect!("s2c-bindingquery-resp", SessionBindingQueryResponseV5);
    assert!(binding.result.exists);
    assert_eq!(binding.result.queue_names, vec![queue]);
    assert!(binding.supports_anycast && !binding.supports_multicast);
    assert_eq!(binding.result.default_max_consumers, -1);
}

#[test]
fn lifecycle_packets_match_ours() {
    assert_encodes_to("c2s-start", SessionStart);
    assert_encodes_to("c2s-stop", SessionStop);
    assert_encodes_to("c2s-rollback", SessionRollback { consider_last_message_as_delivered: false });
    assert_encodes_to("c2s-session-close", SessionClose);
    assert_encodes_to("c2s-consumer-close", SessionConsumerClose { consumer_id: 0 });
    // The client was told connectionTTL = 60000 and pings with it; the broker echoes the same packet.
    assert_encodes_to("c2s-ping", Ping { connection_ttl: 60_000 });
    assert_encodes_to("s2c-ping", Ping { connection_ttl: 60_000 });
}

#[test]
fn commit_and_its_correlated_answer() {
    let commit = expect!("c2s-commit", SessionCommit);
    // Java's correlation ids for commits are negative; only their echo matters.
    assert_ne!(commit.correlation_id, -1);
    assert_encodes_to("c2s-commit", SessionCommit { correlation_id: commit.correlation_id });
    let answer = expect!("s2c-null-response-commit", NullResponse);
    assert_eq!(answer.correlation_id, commit.correlation_id);
    assert_eq!(Packet::NullResponse(answer).response_correlation_id(), Some(commit.correlation_id));
}

#[test]
fn producer_packets() {
    let queue = ss(&capture().queue);
    let create = expect!("c2s-create-producer", CreateProducer);
    assert_eq!(create, CreateProducer { producer_id: 1, address: Some(queue.clone()) });
    assert_encodes_to("c2s-remove-producer", RemoveProducer { producer_id: 1 });
    // Java asks for half its 64 KiB producer window at a time, even on a PAGE address.
    let ask = SessionRequestProducerCredits { credits: 32 * 1024, address: queue.clone() };
    assert_encodes_to("c2s-producer-request-credits", ask);
    assert_encodes_to("s2c-producer-credits", SessionProducerCredits { credits: 32 * 1024, address: queue });
}

// ------------------------------------------------------------------------------------------ messages

#[test]
fn sends_of_every_body_type_with_every_property_type() {
    for (i, kind) in KINDS.iter().enumerate() {
        let name = format!("c2s-send-{kind}");
        let send = expect!(&name, SessionSend);
        let java = &send.message;
        // Transacted sends ask for no answer; Java then writes correlation id 0, and its producer id.
        assert!(!send.requires_response, "{name}");
        assert_eq!((send.correlation_id, send.producer_id), (0, 1), "{name}");
        let ours = expected_message(i, java);
        assert_eq!(java, &ours, "{name}");
        assert_eq!(java.headers.jms_message_id().unwrap(), format!("ID:00010203-0405-1607-8809-0a0b0c0d0e{i:02x}"));
        // Each body through its accessor.
        match *kind {
            "text" => assert_eq!(java.text().unwrap().unwrap(), TEXT),
            "map" => assert_eq!(java.map().unwrap(), every_type("").into_iter().collect()),
            "stream" => assert_eq!(java.stream().unwrap(), stream_values()),
            "object" => assert_eq!(&java.body[4..], &serialized_object()[..]),
            "default" => assert!(java.body.is_empty()),
            _ => {}
        }
        for (k, v) in message_properties(kind) {
            assert_eq!(java.headers.property(&k), Some(&v), "{name}: property {k}");
        }
        // Built from scratch, the same send encodes to Java's bytes.
        let packet = SessionSend { message: ours, requires_response: false, correlation_id: 0, producer_id: 1 };
        assert_encodes_to(&name, packet);
    }
}

#[test]
fn deliveries_are_the_sent_messages_with_a_broker_id() {
    let mut last_id = 0;
    for (i, kind) in KINDS.iter().enumerate() {
        let receive = expect!(&format!("s2c-receive-{kind}"), SessionReceiveMessage);
        let send = expect!(&format!("c2s-send-{kind}"), SessionSend);
        assert_eq!((receive.consumer_id, receive.delivery_count), (0, 1), "{kind}");
        // The broker assigns increasing journal ids and changes nothing else: no property added, none lost.
        let mut message = receive.message.clone();
        assert!(message.headers.message_id > last_id, "{kind}: ids increase in send order");
        last_id = message.headers.message_id;
        message.headers.message_id = 0;
        assert_eq!(message, send.message, "{kind}");
        assert_eq!(message, expected_message(i, &send.message), "{kind}");
    }
    // The first delivery is the first one acknowledged, individually, inside the transaction.
    let ack = expect!("c2s-individual-ack", SessionIndividualAcknowledge);
    let text = expect!("s2c-receive-text", SessionReceiveMessage);
    let ours = SessionIndividualAcknowledge {
        consumer_id: 0,
        message_id: text.message.headers.message_id,
        requires_response: false,
    };
    assert_eq!(ack, ours);
    assert_encodes_to("c2s-individual-ack", ours);
}

#[test]
fn large_message_send_matches_our_chunking() {
    let start = expect!("c2s-send-large", SessionSendLarge);
    assert_eq!(start.headers, large_headers());
    assert_encodes_to("c2s-send-large", SessionSendLarge { headers: large_headers() });

    let names = ["c2s-send-continuation-first", "c2s-send-continuation-middle", "c2s-send-continuation-last"];
    let java: Vec<SessionSendContinuation> = names.iter().map(|n| expect!(n, SessionSendContinuation)).collect();
    let body: Vec<u8> = java.iter().flat_map(|c| c.chunk.to_vec()).collect();
    assert_eq!(body, large_body());
    assert_eq!(java.iter().map(|c| c.chunk.len()).collect::<Vec<_>>(), vec![CHUNK, CHUNK, LARGE_LEN - 2 * CHUNK]);
    assert_eq!(java.iter().map(|c| c.continues).collect::<Vec<_>>(), vec![true, true, false]);
    assert_eq!(java[2].message_body_size, LARGE_LEN as i64);
    // Our splitter, given what Java's transacted producer used (no response, correlation id 0, producer 1),
    // cuts the same chunks and encodes each to Java's bytes. One difference, harmless: where no answer is
    // asked Java writes correlation id 0 and we write -1; the broker reads it only to answer.
    let mut ours: Vec<SessionSendContinuation> = split_body(Bytes::from(large_body()), CHUNK, 1, false, 0).collect();
    for middle in &mut ours[..2] {
        assert_eq!(middle.correlation_id, -1);
        middle.correlation_id = 0;
    }
    assert_eq!(ours, java);
    for (name, c) in names.iter().zip(ours) {
        assert_encodes_to(name, c);
    }
}

#[test]
fn large_message_delivery_reassembles() {
    let start = expect!("s2c-receive-large", SessionReceiveLargeMessage);
    assert_eq!((start.consumer_id, start.delivery_count, start.large_message_size), (0, 1, LARGE_LEN as i64));
    // The broker adds `_AMQ_LARGE_SIZE` and its id; the rest is what was sent.
    assert_eq!(start.headers.large_body_size(), Some(LARGE_LEN as i64));
    let mut headers = start.headers.clone();
    assert!(headers.message_id > 0);
    headers.message_id = 0;
    headers.properties.remove("_AMQ_LARGE_SIZE");
    assert_eq!(headers, large_headers());

    let mut assembler = LargeMessageAssembler::new(start, LARGE_LEN as u64).unwrap();
    let names = ["s2c-receive-continuation-first", "s2c-receive-continuation-middle", "s2c-receive-continuation-last"];
    let mut done = None;
    for (i, name) in names.iter().enumerate() {
        let c = expect!(name, SessionReceiveContinuation);
        assert_eq!((c.consumer_id, c.continues), (0, i < 2), "{name}");
        // The broker cuts deliveries by this session's minLargeMessageSize too.
        assert!(c.chunk.len() <= CHUNK, "{name}");
        done = assembler.accept(c).unwrap();
        assert_eq!(done.is_some(), i == 2, "{name}");
    }
    let message = done.unwrap().message;
    assert_eq!(&message.body[..], &large_body()[..]);
}

// ------------------------------------------------------------------------------------ consumer, credits

#[test]
fn consumer_creation_and_credits() {
    let queue = ss(&capture().queue);
    let create = expect!("c2s-createconsumer", SessionCreateConsumer);
    assert_eq!(create, SessionCreateConsumer::new(0, queue.clone()));
    assert_encodes_to("c2s-createconsumer", SessionCreateConsumer::new(0, queue.clone()));
    let answer = expect!("s2c-createconsumer-resp", SessionQueueQueryResponseV3);
    assert!(answer.exists);
    assert_eq!((answer.consumer_count, answer.message_count), (1, 7));

    assert_encodes_to("c2s-flowtoken", SessionConsumerFlowCredit { consumer_id: 0, credits: 8192 });
    // Credits are whole frames (length field included), given back once half the 8192-byte window is
    // consumed: Java returned exactly the frames it had consumed, in delivery order, up to that point.
    let returned = expect!("c2s-flowtoken-return", SessionConsumerFlowCredit);
    let delivered = KINDS
        .iter()
        .map(|k| format!("s2c-receive-{k}"))
        .chain(["s2c-receive-large", "s2c-receive-continuation-first"].map(String::from));
    let mut consumed = 0;
    for name in delivered {
        consumed += frame(&name).wire_len() as i32;
        if consumed >= 8192 / 2 {
            break;
        }
    }
    assert_eq!(returned, SessionConsumerFlowCredit { consumer_id: 0, credits: consumed });
}

#[test]
fn browser_ends_with_a_forced_delivery_marker() {
    let queue = ss(&capture().queue);
    let browser = expect!("c2s-createconsumer-browser", SessionCreateConsumer);
    let ours = SessionCreateConsumer { browse_only: true, ..SessionCreateConsumer::new(2, queue) };
    assert_eq!(browser, ours);
    assert_encodes_to("c2s-createconsumer-browser", ours);
    assert_encodes_to("c2s-force-delivery", SessionForceConsumerDelivery { consumer_id: 2, sequence: 0 });

    // A browsed message keeps the stored delivery count (0) and is a real message.
    let browsed = expect!("s2c-receive-browsed", SessionReceiveMessage);
    assert_eq!((browsed.consumer_id, browsed.delivery_count), (2, 0));
    assert_eq!(browsed.message.headers.forced_delivery_sequence(), None);
    let dup = format!("{}.dup", capture().queue);
    assert_eq!(browsed.message.headers.duplicate_id(), Some(&PropertyValue::String(ss(&dup))));

    // The marker: body of four zero bytes (endOfBodyPosition 17), priority 0, the sequence asked for.
    let marker = expect!("s2c-receive-forced-marker", SessionReceiveMessage);
    assert_eq!((marker.consumer_id, marker.delivery_count), (2, 0));
    assert_eq!(marker.message.headers.forced_delivery_sequence(), Some(0));
    assert_eq!(&marker.message.body[..], &[0, 0, 0, 0]);
    assert_eq!(marker.message.headers.priority, 0);
    assert_eq!(marker.message.headers.user_id, None);
}

// ------------------------------------------------------------------------------------------ exceptions

#[test]
fn exception_without_correlation_id() {
    let e = expect!("s2c-exception-no-queue", ExceptionResponse);
    assert_eq!(e.exception_type(), ExceptionType::QueueDoesNotExist);
    assert_eq!(e.code, 100);
    assert_eq!(e.amq_id(), Some("AMQ229017"));
    assert_eq!(
        e.message.as_deref(),
        Some(format!("AMQ229017: Queue {} does not exist", capture().missing_queue).as_str())
    );
    // SESS_CREATECONSUMER carries no correlation id, so the answer has none.
    assert_eq!(e.correlation_id, None);
    assert_encodes_to("s2c-exception-no-queue", e);
}

#[test]
fn exception_with_the_commits_correlation_id() {
    let commit = expect!("c2s-commit-duplicate", SessionCommit);
    let e = expect!("s2c-exception-duplicate", ExceptionResponse);
    assert_eq!(e.exception_type(), ExceptionType::DuplicateIdRejected);
    assert_eq!(e.code, 113);
    let message = e.message.as_deref().unwrap();
    assert!(message.starts_with("Duplicate message detected"), "{message}");
    assert!(message.contains(&format!("{}.dup", capture().queue)), "{message}");
    assert_eq!(e.correlation_id, Some(commit.correlation_id));
    assert_eq!(Packet::ExceptionResponse(e).response_correlation_id(), Some(commit.correlation_id));
}

// ------------------------------------------------------------------------------------------ the rest

#[test]
fn topology_packets_pass_as_unknown() {
    // Types the codec does not model come back raw, so the connection can log and skip them.
    for (name, code) in [
        ("c2s-subscribe-topology", packet_type::SUBSCRIBE_TOPOLOGY_V2),
        ("s2c-cluster-topology", packet_type::CLUSTER_TOPOLOGY_V4),
    ] {
        let f = frame(name);
        match packet(name) {
            Packet::Unknown { packet_type, body } => {
                assert_eq!(packet_type, code, "{name}");
                assert_eq!(body, f.body, "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        assert_eq!(f.header.channel_id, 0, "{name}: topology travels on channel 0");
    }
}
