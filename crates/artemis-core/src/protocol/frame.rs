//! Framing (`core-protocol.md` §1.3): `i32 length` (bytes that follow), `i8
//! packetType`, `i64 channelID`, body. [`FrameDecoder`] cuts a byte stream into
//! [`Frame`]s without doing I/O (it returns `Ok(None)` until a frame is complete)
//! and refuses frames above a maximum; [`encode_frame`] writes one packet as a
//! frame.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::error::{DecodeError, EncodeError};
use super::packet::Packet;
use super::{ProtocolVersion, DEFAULT_MAX_FRAME_LEN};

/// Size of the frame length field.
pub const LENGTH_FIELD_LEN: usize = 4;

/// Bytes counted by the length field before the body: type (1) + channel id (8).
pub const HEADER_AFTER_LENGTH_LEN: usize = 9;

/// `PacketImpl.PACKET_HEADERS_SIZE`: length + type + channel = 13 bytes.
pub const PACKET_HEADERS_SIZE: usize = LENGTH_FIELD_LEN + HEADER_AFTER_LENGTH_LEN;

/// The fixed part of a frame after its length field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Packet type code (see [`super::packet_type`]).
    pub packet_type: i8,
    /// Channel the packet travels on (§1.4).
    pub channel_id: i64,
}

/// One complete frame whose body has not been interpreted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Type and channel.
    pub header: FrameHeader,
    /// The packet body (everything after the 13 header bytes).
    pub body: Bytes,
}

impl Frame {
    /// Bytes the frame took on the wire, length field included. Consumer credits
    /// are charged in this unit (`core-protocol.md` §9.2).
    pub fn wire_len(&self) -> usize {
        PACKET_HEADERS_SIZE + self.body.len()
    }

    /// Decodes the body as the packet its type names.
    pub fn decode_packet(&self, version: ProtocolVersion) -> Result<Packet, DecodeError> {
        Packet::decode(self.header.packet_type, self.body.clone(), version)
    }
}

/// Sans-I/O frame splitter: feed it the bytes read from the socket.
///
/// After an error the stream is out of sync and must be closed; the decoder does
/// not try to resynchronise.
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_frame_len: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder::new(DEFAULT_MAX_FRAME_LEN)
    }
}

impl FrameDecoder {
    /// A decoder that refuses frames whose length field exceeds `max_frame_len`.
    pub fn new(max_frame_len: usize) -> Self {
        FrameDecoder { max_frame_len }
    }

    /// The configured maximum.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Takes one complete frame off the front of `src`, or returns `Ok(None)` when
    /// more bytes are needed (reserving room for the rest of the frame, which is
    /// bounded by the maximum).
    pub fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
        if src.len() < LENGTH_FIELD_LEN {
            return Ok(None);
        }
        let len = i32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        let len = match usize::try_from(len) {
            Ok(n) if n >= HEADER_AFTER_LENGTH_LEN => n,
            _ => return Err(DecodeError::InvalidLength { what: "frame", len: i64::from(len) }),
        };
        if len > self.max_frame_len {
            return Err(DecodeError::FrameTooLarge { len, max: self.max_frame_len });
        }
        let total = LENGTH_FIELD_LEN + len;
        if src.len() < total {
            src.reserve(total - src.len());
            return Ok(None);
        }
        let mut frame = src.split_to(total).freeze();
        frame.advance(LENGTH_FIELD_LEN);
        let packet_type = frame.get_i8();
        let channel_id = frame.get_i64();
        Ok(Some(Frame { header: FrameHeader { packet_type, channel_id }, body: frame }))
    }
}

/// Writes `packet` as one frame on `channel_id` at the end of `dst`, with the shape
/// `version` calls for. Returns the frame's size on the wire. If the frame would
/// exceed what the `i32` length field can hold, nothing is left in `dst`.
pub fn encode_frame(
    channel_id: i64,
    packet: &Packet,
    version: ProtocolVersion,
    dst: &mut BytesMut,
) -> Result<usize, EncodeError> {
    encode_frame_with(channel_id, packet.packet_type(), dst, |buf| packet.encode(version, buf))
}

/// Writes a frame whose body is produced by `body`; see [`encode_frame`].
pub fn encode_frame_with(
    channel_id: i64,
    packet_type: i8,
    dst: &mut BytesMut,
    body: impl FnOnce(&mut BytesMut),
) -> Result<usize, EncodeError> {
    let start = dst.len();
    dst.put_i32(0);
    dst.put_i8(packet_type);
    dst.put_i64(channel_id);
    body(dst);
    let len = dst.len() - start - LENGTH_FIELD_LEN;
    let Ok(len_i32) = i32::try_from(len) else {
        dst.truncate(start);
        return Err(EncodeError::FrameTooLarge { len, max: i32::MAX as usize });
    };
    dst[start..start + LENGTH_FIELD_LEN].copy_from_slice(&len_i32.to_be_bytes());
    Ok(len + LENGTH_FIELD_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::packet::connection::Ping;
    use crate::protocol::packet_type;
    use crate::protocol::wire::tests::hex;
    use proptest::prelude::*;

    #[test]
    fn ping_golden() {
        // core-protocol.md §6.2: PING(60000) on channel 0.
        let golden = hex("00 00 00 11 0A 00 00 00 00 00 00 00 00 00 00 00 00 00 00 EA 60");
        let mut b = BytesMut::new();
        let n = encode_frame(0, &Packet::Ping(Ping { connection_ttl: 60_000 }), ProtocolVersion::V135, &mut b).unwrap();
        assert_eq!(n, golden.len());
        assert_eq!(b.to_vec(), golden);
        let mut src = BytesMut::from(&golden[..]);
        let frame = FrameDecoder::default().decode(&mut src).unwrap().unwrap();
        assert!(src.is_empty());
        assert_eq!(frame.header, FrameHeader { packet_type: packet_type::PING, channel_id: 0 });
        assert_eq!(frame.wire_len(), 21);
        assert_eq!(frame.decode_packet(ProtocolVersion::V135).unwrap(), Packet::Ping(Ping { connection_ttl: 60_000 }));
    }

    #[test]
    fn needs_more_bytes_until_complete() {
        let golden = hex("00 00 00 11 0A 00 00 00 00 00 00 00 00 00 00 00 00 00 00 EA 60");
        let mut dec = FrameDecoder::default();
        let mut src = BytesMut::new();
        for (i, b) in golden.iter().enumerate() {
            assert_eq!(dec.decode(&mut src).unwrap(), None, "after {i} bytes");
            src.put_u8(*b);
        }
        assert!(dec.decode(&mut src).unwrap().is_some());
        assert_eq!(dec.decode(&mut src).unwrap(), None);
    }

    #[test]
    fn two_frames_in_one_buffer() {
        let mut src = BytesMut::new();
        for ttl in [1, 2] {
            encode_frame(0, &Packet::Ping(Ping { connection_ttl: ttl }), ProtocolVersion::V135, &mut src).unwrap();
        }
        src.put_u8(0); // start of a third
        let mut dec = FrameDecoder::default();
        let a = dec.decode(&mut src).unwrap().unwrap();
        let b = dec.decode(&mut src).unwrap().unwrap();
        assert_eq!(a.decode_packet(ProtocolVersion::V135).unwrap(), Packet::Ping(Ping { connection_ttl: 1 }));
        assert_eq!(b.decode_packet(ProtocolVersion::V135).unwrap(), Packet::Ping(Ping { connection_ttl: 2 }));
        assert_eq!(dec.decode(&mut src).unwrap(), None);
        assert_eq!(src.len(), 1);
    }

    #[test]
    fn rejects_short_negative_and_oversized_lengths() {
        let mut dec = FrameDecoder::new(100);
        for bad in ["00 00 00 08", "FF FF FF FF", "80 00 00 00", "00 00 00 00"] {
            let mut src = BytesMut::from(&hex(bad)[..]);
            assert!(matches!(dec.decode(&mut src), Err(DecodeError::InvalidLength { what: "frame", .. })), "{bad}");
        }
        let mut src = BytesMut::from(&hex("00 00 00 65")[..]);
        assert_eq!(dec.decode(&mut src), Err(DecodeError::FrameTooLarge { len: 101, max: 100 }));
        // Exactly the maximum is fine (and only reserves up to it).
        let mut src = BytesMut::from(&hex("00 00 00 64")[..]);
        assert_eq!(dec.decode(&mut src), Ok(None));
        // A huge length is refused before anything is reserved.
        let mut src = BytesMut::from(&hex("7F FF FF FF")[..]);
        assert!(matches!(FrameDecoder::default().decode(&mut src), Err(DecodeError::FrameTooLarge { .. })));
    }

    #[test]
    fn minimal_frame_has_empty_body() {
        let mut src = BytesMut::from(&hex("00 00 00 09 43 00 00 00 00 00 00 00 0A")[..]);
        let f = FrameDecoder::default().decode(&mut src).unwrap().unwrap();
        assert_eq!(f.header.packet_type, packet_type::SESS_START);
        assert_eq!(f.header.channel_id, 10);
        assert!(f.body.is_empty());
    }

    proptest! {
        #[test]
        fn prop_decoder_never_panics(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..8),
                                     max in 0usize..200) {
            let mut dec = FrameDecoder::new(max);
            let mut src = BytesMut::new();
            for c in chunks {
                src.extend_from_slice(&c);
                loop {
                    match dec.decode(&mut src) {
                        Ok(Some(frame)) => {
                            prop_assert!(frame.body.len() + HEADER_AFTER_LENGTH_LEN <= max);
                            for v in [ProtocolVersion::V129, ProtocolVersion::V130, ProtocolVersion::V132, ProtocolVersion::V134, ProtocolVersion::V135] {
                                let _ = frame.decode_packet(v);
                            }
                        }
                        Ok(None) => break,
                        Err(_) => { src.clear(); break; }
                    }
                }
            }
        }

        #[test]
        fn prop_frame_round_trip(channel in any::<i64>(), t in any::<i8>(), body in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut dst = BytesMut::new();
            let n = encode_frame_with(channel, t, &mut dst, |b| b.put_slice(&body)).unwrap();
            prop_assert_eq!(n, dst.len());
            let f = FrameDecoder::default().decode(&mut dst).unwrap().unwrap();
            prop_assert_eq!(f.header, FrameHeader { packet_type: t, channel_id: channel });
            prop_assert_eq!(&f.body[..], &body[..]);
            prop_assert!(dst.is_empty());
        }
    }
}
