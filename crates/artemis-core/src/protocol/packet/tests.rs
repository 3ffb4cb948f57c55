//! Tests of every packet: golden bytes from `core-protocol.md` (each vector there
//! is stated to be byte-identical to the 2.40.0 Java encoders), encode → decode
//! round trips for every type at every version, and decoding arbitrary or damaged
//! bytes without panicking.

use std::collections::BTreeSet;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, Union};
use proptest::test_runner::{Config, TestRunner};

use super::*;
use crate::protocol::frame::{encode_frame, FrameDecoder};
use crate::protocol::message::tests::{arb_headers, arb_message};
use crate::protocol::message::{CoreMessage, MessageHeaders, MessageType};
use crate::protocol::properties::{names, PropertyValue};
use crate::protocol::wire::tests::{arb_simple_string, arb_string, hex};
use crate::protocol::wire::SimpleString;
use crate::protocol::{packet_type, ExceptionType, ProtocolVersion};

const VERSIONS: [ProtocolVersion; 8] = [
    ProtocolVersion::V129,
    ProtocolVersion::V130,
    ProtocolVersion::V131,
    ProtocolVersion::V132,
    ProtocolVersion::V133,
    ProtocolVersion::V134,
    ProtocolVersion::V135,
    ProtocolVersion::V136,
];

fn frame(channel: i64, p: impl Into<Packet>, v: ProtocolVersion) -> Vec<u8> {
    let mut b = BytesMut::new();
    encode_frame(channel, &p.into(), v, &mut b).unwrap();
    b.to_vec()
}

/// Decodes one complete frame and checks nothing is left over.
fn unframe(bytes: &[u8], v: ProtocolVersion) -> (i64, Packet) {
    let mut src = BytesMut::from(bytes);
    let f = FrameDecoder::default().decode(&mut src).unwrap().unwrap();
    assert!(src.is_empty());
    (f.header.channel_id, f.decode_packet(v).unwrap())
}

fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

// ---------------------------------------------------------------- golden bytes

#[test]
fn create_session_golden() {
    // core-protocol.md §6.1.
    let golden = hex("00 00 00 50 1E 00 00 00 00 00 00 00 01
         00 00 00 06 00 73 00 65 00 73 00 73 00 2D 00 31
         00 00 00 00 00 00 00 0A  00 00 00 87
         01 00 00 00 05 00 61 00 64 00 6D 00 69 00 6E
         01 00 00 00 05 00 61 00 64 00 6D 00 69 00 6E
         00 01 90 00  00  FF  FF  FF FF FF FF  00  00");
    let mut cs = CreateSession::new("sess-1", 10, ProtocolVersion::V135);
    cs.username = Some("admin".into());
    cs.password = Some("admin".into());
    assert_eq!(frame(1, cs.clone(), ProtocolVersion::V135), golden);
    assert_eq!(unframe(&golden, ProtocolVersion::V135), (1, Packet::CreateSession(cs.clone())));
    // The −18 form appends one 00 (null clientID): length 81, type EE.
    let mut v2 = golden.clone();
    v2[3] = 0x51;
    v2[4] = 0xEE;
    v2.push(0x00);
    let p = CreateSessionV2 { session: cs.clone(), client_id: None };
    assert_eq!(frame(1, p.clone(), ProtocolVersion::V135), v2);
    assert_eq!(unframe(&v2, ProtocolVersion::V135).1, Packet::CreateSessionV2(p));
    // Debug never shows the password.
    let mut secret = cs.clone();
    secret.password = Some("s3cret".into());
    assert!(!format!("{secret:?}").contains("s3cret"));
    assert!(format!("{secret:?}").contains("<redacted>"));
}

fn section_8_1_send() -> SessionSend {
    let mut message = CoreMessage {
        headers: MessageHeaders {
            address: Some("orders::orders".into()),
            durable: true,
            timestamp: 1_700_000_000_000,
            ..MessageHeaders::default()
        },
        body: Bytes::new(),
    };
    message.set_text(Some("hi"));
    message.headers.set_routing_type(1);
    SessionSend { message, requires_response: true, correlation_id: 1, producer_id: -1 }
}

fn section_8_1_bytes() -> Vec<u8> {
    let mut g = hex("00 00 00 8D 47 00 00 00 00 00 00 00 0A
         00 00 00 16
         01 00 00 00 04 68 00 69 00
         00 00 00 00 00 00 00 00
         01 00 00 00 1C");
    g.extend(utf16le("orders::orders"));
    g.extend(hex("00
         03 01 00 00 00 00 00 00 00 00 00 00 01 8B CF E5 68 00 04
         01 00 00 00 01 00 00 00 22"));
    g.extend(utf16le("_AMQ_ROUTING_TYPE"));
    g.extend(hex("03 01  FF 00 00 00 00 00 00 00 01 FF FF FF FF"));
    g
}

#[test]
fn session_send_v3_golden() {
    // core-protocol.md §8.1 (durable byte 01 as corrected in §19 item 5).
    let golden = section_8_1_bytes();
    assert_eq!(golden.len(), 4 + 141);
    let send = section_8_1_send();
    assert_eq!(frame(10, send.clone(), ProtocolVersion::V135), golden);
    let (ch, p) = unframe(&golden, ProtocolVersion::V135);
    assert_eq!((ch, p), (10, Packet::SessionSend(send)));
    // The expected reply.
    let reply = hex("00 00 00 11 15 00 00 00 00 00 00 00 0A 00 00 00 00 00 00 00 01");
    assert_eq!(frame(10, NullResponse { correlation_id: 1 }, ProtocolVersion::V135), reply);
    let (_, p) = unframe(&reply, ProtocolVersion::V135);
    assert_eq!(p.response_correlation_id(), Some(1));
}

#[test]
fn session_send_with_wrong_trailer_version_is_garbage_not_a_crash() {
    // §8.1: decoded with a 9-byte trailer, the V3 frame gives requiresResponse=false
    // and a garbage correlation id.
    let (_, p) = unframe(&section_8_1_bytes(), ProtocolVersion::V132);
    let Packet::SessionSend(s) = p else { panic!("not a send") };
    assert!(!s.requires_response);
    assert_eq!(s.correlation_id, 0x0000_0001_FFFF_FFFF);
}

#[test]
fn session_send_trailer_lengths_by_version() {
    let send = section_8_1_send();
    let base = send.message.encoded_len();
    for (v, trailer) in [
        (ProtocolVersion::V129, 1),
        (ProtocolVersion::V130, 9),
        (ProtocolVersion::V133, 9),
        (ProtocolVersion::V134, 13),
    ] {
        let mut b = BytesMut::new();
        Packet::from(send.clone()).encode(v, &mut b);
        assert_eq!(b.len(), base + trailer, "version {v}");
    }
}

#[test]
fn create_consumer_golden() {
    // core-protocol.md §9.1.
    let golden = hex(
        "00 00 00 20 28 00 00 00 00 00 00 00 0A  00 00 00 00 00 00 00 00  00 00 00 04 71 00 31 00  00  00  FF  00 00 00 00",
    );
    let p = SessionCreateConsumer::new(0, "q1");
    assert_eq!(frame(10, p.clone(), ProtocolVersion::V135), golden);
    assert_eq!(unframe(&golden, ProtocolVersion::V135).1, Packet::SessionCreateConsumer(p.clone()));
    // Version 129 has no priority; the decoder defaults it to 0 when absent.
    let old = frame(10, p.clone(), ProtocolVersion::V129);
    assert_eq!(old.len(), golden.len() - 4);
    assert_eq!(unframe(&old, ProtocolVersion::V135).1, Packet::SessionCreateConsumer(p));
}

#[test]
fn ack_flow_commit_golden() {
    // core-protocol.md §9.4.
    let ack = hex("00 00 00 1A 51 00 00 00 00 00 00 00 0A  00 00 00 00 00 00 00 05  00 00 00 00 00 00 00 63  FF");
    let p = SessionIndividualAcknowledge { consumer_id: 5, message_id: 99, requires_response: true };
    assert_eq!(frame(10, p, ProtocolVersion::V135), ack);
    assert_eq!(unframe(&ack, ProtocolVersion::V135).1, Packet::SessionIndividualAcknowledge(p));

    let flow = hex("00 00 00 15 46 00 00 00 00 00 00 00 0A  00 00 00 00 00 00 00 05  00 10 00 00");
    let p = SessionConsumerFlowCredit { consumer_id: 5, credits: 1 << 20 };
    assert_eq!(frame(10, p, ProtocolVersion::V135), flow);
    assert_eq!(unframe(&flow, ProtocolVersion::V135).1, Packet::SessionConsumerFlowCredit(p));

    let commit = hex("00 00 00 11 2B 00 00 00 00 00 00 00 0A  00 00 00 00 00 00 00 03");
    let p = SessionCommit { correlation_id: 3 };
    assert_eq!(frame(10, p, ProtocolVersion::V135), commit);
    assert_eq!(unframe(&commit, ProtocolVersion::V135).1, Packet::SessionCommit(p));
    // Before 132 the commit body is empty.
    assert_eq!(frame(10, p, ProtocolVersion::V131).len(), 13);
}

#[test]
fn receive_large_and_continuation_golden() {
    // core-protocol.md §11.1: the start of SESS_RECEIVE_LARGE_MSG (after the length).
    let start = SessionReceiveLargeMessage {
        consumer_id: 5,
        delivery_count: 1,
        large_message_size: 1000,
        headers: MessageHeaders::default(),
    };
    let bytes = frame(10, start.clone(), ProtocolVersion::V135);
    assert_eq!(
        bytes[4..33].to_vec(),
        hex("4C 00 00 00 00 00 00 00 0A  00 00 00 00 00 00 00 05  00 00 00 01  00 00 00 00 00 00 03 E8")
    );
    // ... and continues directly with the messageID.
    assert_eq!(bytes[33..41].to_vec(), hex("00 00 00 00 00 00 00 00"));
    assert_eq!(unframe(&bytes, ProtocolVersion::V135).1, Packet::SessionReceiveLargeMessage(start));

    let last = hex("00 00 00 18 4D 00 00 00 00 00 00 00 0A  00 00 00 02 09 09  00  00 00 00 00 00 00 00 05");
    let p = SessionReceiveContinuation { chunk: Bytes::from_static(&[9, 9]), continues: false, consumer_id: 5 };
    assert_eq!(frame(10, p.clone(), ProtocolVersion::V135), last);
    assert_eq!(unframe(&last, ProtocolVersion::V135).1, Packet::SessionReceiveContinuation(p));
}

#[test]
fn send_continuation_v3_golden() {
    // core-protocol.md §11.2.
    let last = hex(
        "00 00 00 26 49 00 00 00 00 00 00 00 0A  00 00 00 03 01 02 03  00  00 00 00 00 00 00 00 03  FF  00 00 00 00 00 00 00 02  00 00 00 09",
    );
    let p = SessionSendContinuation {
        chunk: Bytes::from_static(&[1, 2, 3]),
        continues: false,
        message_body_size: 3,
        requires_response: true,
        correlation_id: 2,
        producer_id: 9,
    };
    assert_eq!(frame(10, p.clone(), ProtocolVersion::V135), last);
    assert_eq!(unframe(&last, ProtocolVersion::V135).1, Packet::SessionSendContinuation(p));

    let middle = hex(
        "00 00 00 1E 49 00 00 00 00 00 00 00 0A  00 00 00 03 01 02 03  FF  00  00 00 00 00 00 00 00 02  00 00 00 09",
    );
    let p = SessionSendContinuation {
        chunk: Bytes::from_static(&[1, 2, 3]),
        continues: true,
        message_body_size: -1,
        requires_response: false,
        correlation_id: 2,
        producer_id: 9,
    };
    assert_eq!(frame(10, p.clone(), ProtocolVersion::V135), middle);
    assert_eq!(unframe(&middle, ProtocolVersion::V135).1, Packet::SessionSendContinuation(p));
}

#[test]
fn exception_golden() {
    // core-protocol.md §13, V1 (no correlation id), read at version 135.
    let text = "AMQ229017: Queue x does not exist";
    let mut v1 = hex("00 00 00 35 14 00 00 00 00 00 00 00 0A  00 00 00 64  01 00 00 00 21 00 21");
    v1.extend_from_slice(text.as_bytes());
    let p = ExceptionResponse { code: 100, message: Some(text.into()), correlation_id: None };
    assert_eq!(frame(10, p.clone(), ProtocolVersion::V135), v1);
    let (_, back) = unframe(&v1, ProtocolVersion::V135);
    assert_eq!(back, Packet::ExceptionResponse(p.clone()));
    assert_eq!(p.exception_type(), ExceptionType::QueueDoesNotExist);
    assert_eq!(p.amq_id(), Some("AMQ229017"));
    assert_eq!(back.response_correlation_id(), None);

    let v2 =
        hex("00 00 00 1E 14 00 00 00 00 00 00 00 0A  00 00 00 69  01 00 00 00 02 00 6E 00 6F  00 00 00 00 00 00 00 05");
    let p = ExceptionResponse { code: 105, message: Some("no".into()), correlation_id: Some(5) };
    assert_eq!(frame(10, p.clone(), ProtocolVersion::V135), v2);
    assert_eq!(unframe(&v2, ProtocolVersion::V135).1, Packet::ExceptionResponse(p.clone()));
    assert_eq!(p.exception_type(), ExceptionType::SecurityException);
    assert_eq!(p.amq_id(), None);
    // Before 130 the correlation id is neither written nor read.
    let (_, old) = unframe(&v2, ProtocolVersion::V129);
    assert_eq!(old.response_correlation_id(), None);
}

#[test]
fn null_response_shapes() {
    // ≥ 130: always 8 bytes; an empty body still decodes, as −1 (NullResponseMessage_V2).
    assert_eq!(
        Packet::decode(packet_type::NULL_RESPONSE, Bytes::new(), ProtocolVersion::V135).unwrap(),
        Packet::NullResponse(NullResponse { correlation_id: -1 })
    );
    assert_eq!(frame(10, NullResponse { correlation_id: 7 }, ProtocolVersion::V129).len(), 13);
}

#[test]
fn queue_query_response_groups_are_optional() {
    // A V3 answer cut after maxConsumers (an older broker) decodes with None groups.
    let full = SessionQueueQueryResponseV3 {
        exists: true,
        durable: true,
        consumer_count: 2,
        message_count: 9,
        address: Some("a".into()),
        name: Some("q".into()),
        routing_type: 1,
        max_consumers: -1,
        exclusive: Some(true),
        default_consumer_window_size: Some(1024),
        configuration_managed: Some(false),
        ..Default::default()
    };
    let mut b = BytesMut::new();
    full.encode_body(ProtocolVersion::V135, &mut b);
    // Fixed part: 3 bools + i32 + i64 + null filter + "a" + "q" + 3 bools + i8 + i32.
    let fixed = 3 + 4 + 8 + 1 + 7 + 7 + 3 + 1 + 4;
    let cut = b.freeze().slice(..fixed);
    let Packet::SessionQueueQueryResponseV3(r) =
        Packet::decode(packet_type::SESS_QUEUEQUERY_RESP_V3, cut, ProtocolVersion::V135).unwrap()
    else {
        panic!()
    };
    assert_eq!(r.exclusive, None);
    assert_eq!(r.default_consumer_window_size, None);
    assert_eq!(r.max_consumers, -1);
    // Nullable present flags are 0xFF (BufferHelper).
    let mut b = BytesMut::new();
    full.encode_body(ProtocolVersion::V135, &mut b);
    assert_eq!(&b[fixed..fixed + 2], [0xFF, 0xFF]);
}

#[test]
fn create_queue_v2_suggested_values() {
    let p = CreateQueueV2::anycast("staging", "staging");
    let bytes = frame(10, p.clone(), ProtocolVersion::V135);
    // address, queue, null filter, durable, !temporary, requiresResponse, !autoCreated,
    // ANYCAST, -1, !purge, then 15 null flags.
    let mut expected = hex("00 00 00 00 2D 00 00 00 00 00 00 00 0A");
    for _ in 0..2 {
        expected.extend(hex("00 00 00 0E"));
        expected.extend(utf16le("staging"));
    }
    expected.extend(hex("00 FF 00 FF 00 01 FF FF FF FF 00"));
    expected.extend(std::iter::repeat_n(0u8, 15));
    let len = (expected.len() - 4) as u32;
    expected[..4].copy_from_slice(&len.to_be_bytes());
    expected[4] = packet_type::CREATE_QUEUE_V2 as u8;
    assert_eq!(bytes, expected);
    assert_eq!(unframe(&bytes, ProtocolVersion::V135).1, Packet::CreateQueueV2(p));
}

#[test]
fn unknown_types_decode_as_unknown() {
    let body = Bytes::from_static(&[1, 2, 3]);
    for t in [packet_type::CLUSTER_TOPOLOGY_V4, packet_type::SESS_XA_START, 102, 127] {
        let p = Packet::decode(t, body.clone(), ProtocolVersion::V135).unwrap();
        assert_eq!(p, Packet::Unknown { packet_type: t, body: body.clone() });
        assert_eq!(p.packet_type(), t);
    }
}

#[test]
fn trailing_bytes_after_known_fields_are_ignored() {
    // core-protocol.md §1.3: tolerate fields a newer broker may append.
    let extra = [0xAB_u8; 5];
    let cases: Vec<Packet> = vec![
        Ping { connection_ttl: 5 }.into(),
        CreateSessionResponse { server_version: 136 }.into(),
        NullResponse { correlation_id: 4 }.into(),
        SessionConsumerFlowCredit { consumer_id: 1, credits: 2 }.into(),
        SessionReceiveContinuation { chunk: Bytes::from_static(b"x"), continues: true, consumer_id: 3 }.into(),
        SessionQueueQueryResponseV3::default().into(),
        SessionBindingQueryResponseV5::default().into(),
        CreateQueueV2::anycast("a", "q").into(),
    ];
    for p in cases {
        let mut b = BytesMut::new();
        p.encode(ProtocolVersion::V135, &mut b);
        b.extend_from_slice(&extra);
        assert_eq!(Packet::decode(p.packet_type(), b.freeze(), ProtocolVersion::V135).unwrap(), p, "{}", p.type_name());
    }
}

#[test]
fn type_names_for_logs() {
    assert_eq!(Packet::from(SessionStart).type_name(), "SESS_START");
    assert_eq!(Packet::from(SessionBindingQueryResponseV5::default()).type_name(), "SESS_BINDINGQUERY_RESP_V5");
    assert_eq!(Packet::Unknown { packet_type: 102, body: Bytes::new() }.type_name(), "UNKNOWN");
}

#[test]
fn truncated_bodies_are_errors_not_panics() {
    assert_eq!(
        Packet::decode(packet_type::PING, Bytes::from_static(&[0; 7]), ProtocolVersion::V135),
        Err(crate::protocol::DecodeError::Truncated { need: 8, have: 7 })
    );
    assert!(Packet::decode(packet_type::SESS_SEND, Bytes::from_static(&[0; 12]), ProtocolVersion::V135).is_err());
    assert!(Packet::decode(packet_type::SESS_RECEIVE_MSG, Bytes::new(), ProtocolVersion::V135).is_err());
}

#[test]
fn forced_delivery_marker_in_a_receive() {
    // §9.3: endOfBodyPosition 17, 4 zero bytes, deliveryCount 0 in the trailer.
    let mut headers = MessageHeaders { message_id: 12, address: Some("q".into()), priority: 0, ..Default::default() };
    headers.properties.insert(names::FORCED_DELIVERY_SEQ, PropertyValue::Long(1));
    let mut body = BytesMut::from(&hex("00 00 00 11 00 00 00 00")[..]);
    headers.encode(&mut body);
    body.extend_from_slice(&hex("00 00 00 00 00 00 00 05  00 00 00 00"));
    let Packet::SessionReceiveMessage(r) =
        Packet::decode(packet_type::SESS_RECEIVE_MSG, body.freeze(), ProtocolVersion::V135).unwrap()
    else {
        panic!()
    };
    assert_eq!((r.consumer_id, r.delivery_count), (5, 0));
    assert_eq!(r.message.body.len(), 4);
    assert_eq!(r.message.headers.forced_delivery_sequence(), Some(1));
    assert_eq!(r.message.headers.message_type, MessageType::DEFAULT);
}

#[test]
fn disconnect_v3_with_connector_round_trips() {
    let p = DisconnectV3 {
        node_id: Some("node".into()),
        reason: DisconnectReason::REDIRECT,
        target_node_id: None,
        target_connector: Some(TransportConfiguration {
            name: "netty".into(),
            factory_class_name: "org.apache.activemq.artemis.core.remoting.impl.netty.NettyConnectorFactory".into(),
            params: vec![
                ("host".into(), TransportParam::String("b2".into())),
                ("port".into(), TransportParam::Int(61616)),
                ("sslEnabled".into(), TransportParam::Boolean(false)),
                ("ttl".into(), TransportParam::Long(-1)),
            ],
        }),
    };
    assert_eq!(unframe(&frame(0, p.clone(), ProtocolVersion::V135), ProtocolVersion::V135).1, Packet::DisconnectV3(p));
    assert!(DisconnectReason::SHUT_DOWN_ON_CRITICAL_ERROR.is_critical_error());
    assert!(!DisconnectReason::SHUT_DOWN.is_critical_error());
    // An unknown parameter tag is an error: null node, reason 4, null target,
    // connector present, name "", factory "", 1 parameter, key "", tag 9.
    let b = Bytes::from(hex("00 04 00 FF 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 09"));
    assert_eq!(
        Packet::decode(packet_type::DISCONNECT_V3, b, ProtocolVersion::V135),
        Err(crate::protocol::DecodeError::UnknownTransportParamType { tag: 9 })
    );
}

// ------------------------------------------------------------- round trips

fn opt_ss() -> impl Strategy<Value = Option<SimpleString>> {
    proptest::option::of(arb_simple_string())
}

fn bytes_vec(max: usize) -> impl Strategy<Value = Bytes> {
    prop::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

/// `value` when the version carries the field, `default` otherwise.
fn gated<T: Clone + std::fmt::Debug + 'static>(
    on: bool,
    value: impl Strategy<Value = T> + 'static,
    default: T,
) -> BoxedStrategy<T> {
    if on {
        value.boxed()
    } else {
        Just(default).boxed()
    }
}

fn arb_create_session() -> impl Strategy<Value = CreateSession> {
    (
        (
            arb_string(),
            any::<i64>(),
            any::<i32>(),
            proptest::option::of(arb_string()),
            proptest::option::of(arb_string()),
        ),
        (
            any::<i32>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<i32>(),
            any::<bool>(),
            proptest::option::of(arb_string()),
        ),
    )
        .prop_map(
            |((name, ch, version, username, password), (mlm, xa, acs, aca, window, pre, default_address))| {
                CreateSession {
                    name,
                    session_channel_id: ch,
                    version,
                    username,
                    password,
                    min_large_message_size: mlm,
                    xa,
                    auto_commit_sends: acs,
                    auto_commit_acks: aca,
                    window_size: window,
                    pre_acknowledge: pre,
                    default_address,
                }
            },
        )
}

fn arb_transport() -> impl Strategy<Value = TransportConfiguration> {
    let param = prop_oneof![
        any::<bool>().prop_map(TransportParam::Boolean),
        any::<i32>().prop_map(TransportParam::Int),
        any::<i64>().prop_map(TransportParam::Long),
        arb_string().prop_map(TransportParam::String),
    ];
    (".{0,20}", ".{0,20}", prop::collection::vec((".{0,12}", param), 0..4))
        .prop_map(|(name, factory_class_name, params)| TransportConfiguration { name, factory_class_name, params })
}

fn arb_queue_query_response() -> impl Strategy<Value = SessionQueueQueryResponseV3> {
    (
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<i32>(), any::<i64>(), opt_ss(), opt_ss(), opt_ss()),
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<i8>(),
            any::<i32>(),
            any::<Option<bool>>(),
            any::<Option<bool>>(),
            any::<Option<i32>>(),
        ),
        (
            opt_ss(),
            any::<Option<bool>>(),
            any::<Option<i32>>(),
            any::<Option<i64>>(),
            any::<Option<bool>>(),
            any::<Option<i32>>(),
            any::<Option<bool>>(),
            any::<Option<i64>>(),
        ),
        (
            any::<Option<i64>>(),
            opt_ss(),
            any::<Option<i64>>(),
            any::<Option<bool>>(),
            any::<Option<bool>>(),
            any::<Option<bool>>(),
        ),
    )
        .prop_map(|(a, b, c, d)| SessionQueueQueryResponseV3 {
            exists: a.0,
            durable: a.1,
            temporary: a.2,
            consumer_count: a.3,
            message_count: a.4,
            filter_string: a.5,
            address: a.6,
            name: a.7,
            auto_create_queues: b.0,
            auto_created: b.1,
            purge_on_no_consumers: b.2,
            routing_type: b.3,
            max_consumers: b.4,
            exclusive: b.5,
            last_value: b.6,
            default_consumer_window_size: b.7,
            last_value_key: c.0,
            non_destructive: c.1,
            consumers_before_dispatch: c.2,
            delay_before_dispatch: c.3,
            group_rebalance: c.4,
            group_buckets: c.5,
            auto_delete: c.6,
            auto_delete_delay: c.7,
            auto_delete_message_count: d.0,
            group_first_key: d.1,
            ring_size: d.2,
            enabled: d.3,
            group_rebalance_pause_dispatch: d.4,
            configuration_managed: d.5,
        })
}

fn arb_binding_v4() -> impl Strategy<Value = SessionBindingQueryResponseV4> {
    (
        (
            any::<bool>(),
            prop::collection::vec(arb_simple_string(), 0..5),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<i32>(),
        ),
        (
            any::<Option<bool>>(),
            any::<Option<bool>>(),
            opt_ss(),
            any::<Option<bool>>(),
            any::<Option<i32>>(),
            any::<Option<i64>>(),
        ),
    )
        .prop_map(|(a, b)| SessionBindingQueryResponseV4 {
            exists: a.0,
            queue_names: a.1,
            auto_create_queues: a.2,
            auto_create_addresses: a.3,
            default_purge_on_no_consumers: a.4,
            default_max_consumers: a.5,
            default_exclusive: b.0,
            default_last_value: b.1,
            default_last_value_key: b.2,
            default_non_destructive: b.3,
            default_consumers_before_dispatch: b.4,
            default_delay_before_dispatch: b.5,
        })
}

fn arb_create_queue() -> impl Strategy<Value = CreateQueueV2> {
    (
        (
            arb_simple_string(),
            arb_simple_string(),
            opt_ss(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<i8>(),
        ),
        (
            any::<i32>(),
            any::<bool>(),
            any::<Option<bool>>(),
            any::<Option<bool>>(),
            opt_ss(),
            any::<Option<bool>>(),
            any::<Option<i32>>(),
            any::<Option<i64>>(),
        ),
        (
            any::<Option<bool>>(),
            any::<Option<i32>>(),
            any::<Option<bool>>(),
            any::<Option<i64>>(),
            any::<Option<i64>>(),
            opt_ss(),
            any::<Option<i64>>(),
            any::<Option<bool>>(),
        ),
        any::<Option<bool>>(),
    )
        .prop_map(|(a, b, c, d)| CreateQueueV2 {
            address: a.0,
            queue_name: a.1,
            filter_string: a.2,
            durable: a.3,
            temporary: a.4,
            requires_response: a.5,
            auto_created: a.6,
            routing_type: a.7,
            max_consumers: b.0,
            purge_on_no_consumers: b.1,
            exclusive: b.2,
            last_value: b.3,
            last_value_key: b.4,
            non_destructive: b.5,
            consumers_before_dispatch: b.6,
            delay_before_dispatch: b.7,
            group_rebalance: c.0,
            group_buckets: c.1,
            auto_delete: c.2,
            auto_delete_delay: c.3,
            auto_delete_message_count: c.4,
            group_first_key: c.5,
            ring_size: c.6,
            enabled: c.7,
            group_rebalance_pause_dispatch: d,
        })
}

/// One strategy per packet type code, generating only values the version can
/// carry (fields absent at that version hold their decode default).
fn strategies(v: ProtocolVersion) -> Vec<(i8, BoxedStrategy<Packet>)> {
    let asy = v.has_async_responses();
    let prod = v.has_producer_ids();
    let mut s: Vec<(i8, BoxedStrategy<Packet>)> = Vec::new();
    macro_rules! add {
        ($ty:ty, $strat:expr) => {
            s.push((<$ty as PacketBody>::PACKET_TYPE, ($strat).prop_map(Packet::from).boxed()))
        };
    }
    add!(Ping, any::<i64>().prop_map(|connection_ttl| Ping { connection_ttl }));
    add!(Disconnect, opt_ss().prop_map(|node_id| Disconnect { node_id }));
    add!(
        DisconnectV2,
        (opt_ss(), opt_ss()).prop_map(|(node_id, scale_down_node_id)| DisconnectV2 { node_id, scale_down_node_id })
    );
    add!(
        DisconnectV3,
        (opt_ss(), any::<i8>(), opt_ss(), proptest::option::of(arb_transport())).prop_map(
            |(node_id, r, target_node_id, target_connector)| {
                DisconnectV3 { node_id, reason: DisconnectReason(r), target_node_id, target_connector }
            }
        )
    );
    add!(DisconnectConsumerWithKill, opt_ss().prop_map(|node_id| DisconnectConsumerWithKill { node_id }));
    add!(
        ExceptionResponse,
        (any::<i32>(), proptest::option::of(arb_string()), gated(asy, any::<Option<i64>>(), None))
            .prop_map(|(code, message, correlation_id)| ExceptionResponse { code, message, correlation_id })
    );
    add!(NullResponse, gated(asy, any::<i64>(), -1).prop_map(|correlation_id| NullResponse { correlation_id }));
    add!(PacketsConfirmed, any::<i32>().prop_map(|command_id| PacketsConfirmed { command_id }));
    add!(CreateSession, arb_create_session());
    add!(
        CreateSessionV2,
        (arb_create_session(), proptest::option::of(arb_string()))
            .prop_map(|(session, client_id)| CreateSessionV2 { session, client_id })
    );
    add!(CreateSessionResponse, any::<i32>().prop_map(|server_version| CreateSessionResponse { server_version }));
    add!(SessionStart, Just(SessionStart));
    add!(SessionStop, Just(SessionStop));
    add!(SessionClose, Just(SessionClose));
    add!(
        SessionCommit,
        gated(v.has_commit_correlation(), any::<i64>(), -1).prop_map(|correlation_id| SessionCommit { correlation_id })
    );
    add!(SessionRollback, any::<bool>().prop_map(|b| SessionRollback { consider_last_message_as_delivered: b }));
    add!(SessionAddMetadata, (arb_string(), arb_string()).prop_map(|(key, data)| SessionAddMetadata { key, data }));
    add!(
        SessionAddMetadataV2,
        (arb_string(), arb_string(), any::<bool>())
            .prop_map(|(key, data, requires_confirmation)| SessionAddMetadataV2 { key, data, requires_confirmation })
    );
    add!(
        SessionUniqueAddMetadata,
        (arb_string(), arb_string(), any::<bool>()).prop_map(|(key, data, requires_confirmation)| {
            SessionUniqueAddMetadata { key, data, requires_confirmation }
        })
    );
    add!(
        SessionCreateConsumer,
        (
            any::<i64>(),
            arb_simple_string(),
            opt_ss(),
            any::<bool>(),
            any::<bool>(),
            gated(v.has_consumer_priority(), any::<i32>(), 0)
        )
            .prop_map(|(consumer_id, queue_name, filter, browse_only, requires_response, priority)| {
                SessionCreateConsumer { consumer_id, queue_name, filter, browse_only, requires_response, priority }
            })
    );
    add!(
        SessionAcknowledge,
        (any::<i64>(), any::<i64>(), any::<bool>()).prop_map(|(consumer_id, message_id, requires_response)| {
            SessionAcknowledge { consumer_id, message_id, requires_response }
        })
    );
    add!(
        SessionIndividualAcknowledge,
        (any::<i64>(), any::<i64>(), any::<bool>()).prop_map(|(consumer_id, message_id, requires_response)| {
            SessionIndividualAcknowledge { consumer_id, message_id, requires_response }
        })
    );
    add!(
        SessionExpire,
        (any::<i64>(), any::<i64>()).prop_map(|(consumer_id, message_id)| SessionExpire { consumer_id, message_id })
    );
    add!(
        SessionConsumerFlowCredit,
        (any::<i64>(), any::<i32>())
            .prop_map(|(consumer_id, credits)| SessionConsumerFlowCredit { consumer_id, credits })
    );
    add!(SessionConsumerClose, any::<i64>().prop_map(|consumer_id| SessionConsumerClose { consumer_id }));
    add!(
        SessionForceConsumerDelivery,
        (any::<i64>(), any::<i64>())
            .prop_map(|(consumer_id, sequence)| { SessionForceConsumerDelivery { consumer_id, sequence } })
    );
    add!(DisconnectConsumer, any::<i64>().prop_map(|consumer_id| DisconnectConsumer { consumer_id }));
    add!(
        SessionSend,
        (arb_message(), any::<bool>(), gated(asy, any::<i64>(), -1), gated(prod, any::<i32>(), -1)).prop_map(
            |(message, requires_response, correlation_id, producer_id)| SessionSend {
                message,
                requires_response,
                correlation_id,
                producer_id
            }
        )
    );
    add!(SessionSendLarge, arb_headers().prop_map(|headers| SessionSendLarge { headers }));
    add!(
        SessionSendContinuation,
        (
            bytes_vec(300),
            any::<bool>(),
            any::<i64>(),
            any::<bool>(),
            gated(asy, any::<i64>(), -1),
            gated(prod, any::<i32>(), -1)
        )
            .prop_map(|(chunk, continues, size, requires_response, correlation_id, producer_id)| {
                SessionSendContinuation {
                    chunk,
                    continues,
                    message_body_size: if continues { -1 } else { size },
                    requires_response,
                    correlation_id,
                    producer_id,
                }
            })
    );
    add!(
        SessionRequestProducerCredits,
        (any::<i32>(), arb_simple_string())
            .prop_map(|(credits, address)| SessionRequestProducerCredits { credits, address })
    );
    add!(
        SessionProducerCredits,
        (any::<i32>(), arb_simple_string()).prop_map(|(credits, address)| SessionProducerCredits { credits, address })
    );
    add!(
        SessionProducerCreditsFail,
        (any::<i32>(), arb_simple_string())
            .prop_map(|(credits, address)| SessionProducerCreditsFail { credits, address })
    );
    add!(
        CreateProducer,
        (any::<i32>(), opt_ss()).prop_map(|(producer_id, address)| CreateProducer { producer_id, address })
    );
    add!(RemoveProducer, any::<i32>().prop_map(|producer_id| RemoveProducer { producer_id }));
    add!(
        SessionReceiveMessage,
        (arb_message(), any::<i64>(), any::<i32>()).prop_map(|(message, consumer_id, delivery_count)| {
            SessionReceiveMessage { message, consumer_id, delivery_count }
        })
    );
    add!(
        SessionReceiveLargeMessage,
        (any::<i64>(), any::<i32>(), any::<i64>(), arb_headers()).prop_map(
            |(consumer_id, delivery_count, large_message_size, headers)| {
                SessionReceiveLargeMessage { consumer_id, delivery_count, large_message_size, headers }
            }
        )
    );
    add!(
        SessionReceiveContinuation,
        (bytes_vec(300), any::<bool>(), any::<i64>())
            .prop_map(|(chunk, continues, consumer_id)| SessionReceiveContinuation { chunk, continues, consumer_id })
    );
    add!(SessionQueueQuery, arb_simple_string().prop_map(|queue_name| SessionQueueQuery { queue_name }));
    add!(SessionQueueQueryResponseV3, arb_queue_query_response());
    add!(SessionBindingQuery, arb_simple_string().prop_map(|address| SessionBindingQuery { address }));
    add!(SessionBindingQueryResponseV4, arb_binding_v4());
    add!(
        SessionBindingQueryResponseV5,
        (arb_binding_v4(), any::<bool>(), any::<bool>()).prop_map(|(result, supports_multicast, supports_anycast)| {
            SessionBindingQueryResponseV5 { result, supports_multicast, supports_anycast }
        })
    );
    add!(CreateQueueV2, arb_create_queue());
    add!(SessionDeleteQueue, arb_simple_string().prop_map(|queue_name| SessionDeleteQueue { queue_name }));
    add!(
        CreateAddress,
        (arb_simple_string(), prop::collection::vec(any::<i8>(), 0..4), any::<bool>(), any::<bool>()).prop_map(
            |(address, routing_types, requires_response, auto_created)| CreateAddress {
                address,
                routing_types,
                requires_response,
                auto_created
            }
        )
    );
    s
}

fn arb_unknown() -> impl Strategy<Value = Packet> {
    (any::<i8>().prop_filter("unknown type", |t| !Packet::KNOWN_TYPES.contains(t)), bytes_vec(64))
        .prop_map(|(packet_type, body)| Packet::Unknown { packet_type, body })
}

fn assert_round_trip(p: &Packet, v: ProtocolVersion, channel: i64) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::new();
    let n = encode_frame(channel, p, v, &mut buf).unwrap();
    prop_assert_eq!(n, buf.len());
    let f = FrameDecoder::default().decode(&mut buf).unwrap().unwrap();
    prop_assert!(buf.is_empty());
    prop_assert_eq!(f.header.packet_type, p.packet_type());
    prop_assert_eq!(f.header.channel_id, channel);
    let back = f.decode_packet(v).map_err(|e| TestCaseError::fail(format!("{e} for {p:?}")))?;
    prop_assert_eq!(&back, p);
    Ok(())
}

#[test]
fn strategies_cover_every_known_type() {
    for v in VERSIONS {
        let covered: BTreeSet<i8> = strategies(v).iter().map(|(t, _)| *t).collect();
        let known: BTreeSet<i8> = Packet::KNOWN_TYPES.iter().copied().collect();
        assert_eq!(covered, known);
        assert_eq!(known.len(), Packet::KNOWN_TYPES.len(), "duplicate type code in Packet");
    }
}

#[test]
fn every_packet_type_round_trips_at_every_version() {
    for v in VERSIONS {
        for (t, strategy) in strategies(v) {
            let mut runner = TestRunner::new(Config::with_cases(24));
            runner
                .run(&(strategy, any::<i64>()), |(p, channel)| {
                    prop_assert_eq!(p.packet_type(), t);
                    assert_round_trip(&p, v, channel)
                })
                .unwrap_or_else(|e| panic!("type {t} ({:?}) at version {v}: {e}", packet_type::name(t)));
        }
    }
}

fn arb_version() -> impl Strategy<Value = ProtocolVersion> {
    prop::sample::select(VERSIONS.to_vec())
}

fn arb_any_packet() -> impl Strategy<Value = (ProtocolVersion, Packet)> {
    arb_version().prop_flat_map(|v| {
        let mut arms: Vec<BoxedStrategy<Packet>> = strategies(v).into_iter().map(|(_, s)| s).collect();
        arms.push(arb_unknown().boxed());
        (Just(v), Union::new(arms))
    })
}

proptest! {
    #[test]
    fn prop_unknown_round_trips(p in arb_unknown(), v in arb_version()) {
        assert_round_trip(&p, v, 0)?;
    }

    #[test]
    fn prop_any_packet_round_trips((v, p) in arb_any_packet(), channel in any::<i64>()) {
        assert_round_trip(&p, v, channel)?;
    }

    /// Arbitrary bytes into every packet decoder at every version never panic.
    #[test]
    fn prop_decode_arbitrary_bytes_never_panics(body in prop::collection::vec(any::<u8>(), 0..160), v in arb_version()) {
        let body = Bytes::from(body);
        for &t in Packet::KNOWN_TYPES {
            let _ = Packet::decode(t, body.clone(), v);
        }
        let _ = Packet::decode(i8::MIN, body, v);
    }

    /// Valid encodings, truncated or with one byte changed, never panic either.
    #[test]
    fn prop_decode_damaged_packets_never_panics((v, p) in arb_any_packet(), cut in any::<prop::sample::Index>(),
                                                flip in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut b = BytesMut::new();
        p.encode(v, &mut b);
        let full = b.freeze();
        if !full.is_empty() {
            let truncated = full.slice(..cut.index(full.len()));
            let _ = Packet::decode(p.packet_type(), truncated, v);
            let mut changed = full.to_vec();
            let i = flip.index(changed.len());
            changed[i] = byte;
            let _ = Packet::decode(p.packet_type(), Bytes::from(changed), v);
        }
        for other in VERSIONS {
            let _ = Packet::decode(p.packet_type(), full.clone(), other);
        }
    }
}
