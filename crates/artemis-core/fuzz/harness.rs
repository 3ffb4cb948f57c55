//! The fuzz harness of the Core decoder, shared by the `cargo fuzz` target (`fuzz_targets/decode.rs`, nightly)
//! and the replay test that runs every corpus file on stable (`tests/codec/corpus.rs`), so CI checks exactly
//! what the fuzzer checked.
//!
//! Input: bytes as they would arrive from a broker's socket (after the preamble). They go through the
//! [`FrameDecoder`]; every frame is decoded as a packet under each protocol version whose shapes differ, and
//! every packet that decodes must keep these invariants (a broken one panics, which the fuzzer reports):
//!
//! - the packet keeps its frame's type code;
//! - our own encoding of it decodes again, and re-encoding that gives the same bytes (decode∘encode is a
//!   fixpoint after one round: nothing we accept turns into bytes we cannot read back);
//! - message bodies and headers can be read through every accessor without panicking;
//! - large-message continuations can be followed and reassembled (under a small memory limit) without panicking.
//!
//! Decoding errors are fine: the decoder must refuse garbage, not crash on it. Allocation bounds are enforced
//! by the fuzzer's `-malloc_limit_mb` (see `fuzz/README.md`): nothing may allocate from an unchecked length.

use artemis_core::protocol::large::{LargeMessageAssembler, LargeMessageReceiver};
use artemis_core::protocol::{encode_frame, CoreMessage, Frame, FrameDecoder, Packet, ProtocolVersion};
use bytes::BytesMut;

/// The versions whose packet shapes differ (§3 of `core-protocol.md`): no async responses, async responses,
/// client ids, commit correlation, producer ids, binding query V5, the current 2.40 client's.
pub const VERSIONS: [ProtocolVersion; 7] = [
    ProtocolVersion::V129,
    ProtocolVersion::V130,
    ProtocolVersion::V131,
    ProtocolVersion::V132,
    ProtocolVersion::V134,
    ProtocolVersion::V135,
    ProtocolVersion::V136,
];

/// The largest frame the harness accepts: far above any fuzz input, so the length checks are exercised
/// against the bytes actually present rather than against this cap.
pub const MAX_FRAME_LEN: usize = 1 << 20;

/// Memory the large-message assembler may use per message here.
const MAX_LARGE_IN_MEMORY: u64 = 64 * 1024;

/// Runs `data` through the decoder and checks every invariant; panics on a violation.
pub fn check(data: &[u8]) {
    let mut decoder = FrameDecoder::new(MAX_FRAME_LEN);
    let mut src = BytesMut::from(data);
    // One large message in progress per version, as a consumer would follow it.
    let mut large: [Option<Large>; VERSIONS.len()] = Default::default();
    loop {
        match decoder.decode(&mut src) {
            Ok(Some(frame)) => {
                assert!(frame.body.len() + 9 <= MAX_FRAME_LEN, "a frame above the maximum was accepted");
                for (version, large) in VERSIONS.iter().zip(large.iter_mut()) {
                    check_frame(&frame, *version, large);
                }
            }
            Ok(None) => break,
            // The stream is out of sync after an error; a connection would close here.
            Err(_) => break,
        }
    }
}

/// A large message being followed: its checker and its in-memory reassembly.
struct Large {
    receiver: LargeMessageReceiver,
    assembler: Option<LargeMessageAssembler>,
}

fn check_frame(frame: &Frame, version: ProtocolVersion, large: &mut Option<Large>) {
    let Ok(packet) = frame.decode_packet(version) else {
        return;
    };
    assert_eq!(packet.packet_type(), frame.header.packet_type, "the packet changed its type code");
    round_trip(&packet, frame.header.channel_id, version);
    read_everything(&packet);
    follow_large(packet, large);
}

/// Encodes, decodes and encodes again: the two encodings must be equal.
fn round_trip(packet: &Packet, channel: i64, version: ProtocolVersion) {
    let mut first = BytesMut::new();
    encode_frame(channel, packet, version, &mut first).expect("a decoded packet encodes");
    let mut src = first.clone();
    let frame =
        FrameDecoder::new(usize::MAX).decode(&mut src).expect("our own frame decodes").expect("our own frame is whole");
    assert!(src.is_empty(), "our own frame left bytes behind");
    let again = frame
        .decode_packet(version)
        .unwrap_or_else(|e| panic!("our encoding of {packet:?} does not decode under {version}: {e}"));
    let mut second = BytesMut::new();
    encode_frame(channel, &again, version, &mut second).expect("a decoded packet encodes");
    assert_eq!(first, second, "encode(decode(encode(p))) != encode(p) for {packet:?} under {version}");
}

/// Every accessor a consumer or a log line would use.
fn read_everything(packet: &Packet) {
    let _ = format!("{packet:?} {}", packet.type_name());
    let _ = packet.response_correlation_id();
    match packet {
        Packet::SessionSend(p) => read_message(&p.message),
        Packet::SessionReceiveMessage(p) => read_message(&p.message),
        Packet::ExceptionResponse(e) => {
            let _ = (e.exception_type(), e.amq_id());
        }
        _ => {}
    }
}

fn read_message(m: &CoreMessage) {
    let _ = (m.text(), m.map(), m.stream());
    let h = &m.headers;
    let _ = (h.jms_message_id(), h.correlation_id(), h.reply_to(), h.jms_type(), h.group_id(), h.group_sequence());
    let _ = (h.duplicate_id(), h.scheduled_delivery_time(), h.routing_type(), h.large_body_size());
    let _ = (h.is_compressed(), h.forced_delivery_sequence(), m.encoded_len());
    for (k, v) in h.properties.iter() {
        let _ = (k.to_string_lossy(), k.try_to_string(), v.as_i64(), v.as_bool(), v.as_simple_string());
    }
}

/// Feeds large-message starts and continuations to the receiver and the assembler, as a consumer does.
fn follow_large(packet: Packet, large: &mut Option<Large>) {
    match packet {
        Packet::SessionReceiveLargeMessage(start) => {
            let receiver = LargeMessageReceiver::new(&start);
            let assembler = LargeMessageAssembler::new(start, MAX_LARGE_IN_MEMORY).ok();
            *large = Some(Large { receiver, assembler });
        }
        Packet::SessionReceiveContinuation(chunk) => {
            let Some(l) = large.as_mut() else {
                return;
            };
            let progress = l.receiver.accept(&chunk);
            match l.assembler.as_mut().map(|a| a.accept(chunk)) {
                // A whole message came out: it is the size the receiver counted.
                Some(Ok(Some(done))) => {
                    assert_eq!(done.message.body.len() as u64, l.receiver.received(), "reassembled size")
                }
                // A consumer gives up on a message it cannot assemble (and then skips its chunks).
                Some(Err(_)) => l.assembler = None,
                _ => {}
            }
            if progress.is_err() || l.receiver.is_complete() {
                *large = None;
            }
        }
        _ => {}
    }
}
