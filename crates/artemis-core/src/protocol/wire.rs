//! Primitive encodings of the Core protocol: big-endian integers, the two boolean
//! byte values, [`SimpleString`] (UTF-16LE), Java's `writeString` `String` in its
//! three forms (with modified UTF-8 / CESU-8), and the nullable variants of both
//! flag styles. All of it is exposed as the extension traits [`GetCore`] (over
//! [`bytes::Buf`]) and [`PutCore`] (over [`bytes::BufMut`]).
//!
//! Readers never panic: every read checks the bytes remaining first and returns
//! [`DecodeError::Truncated`], and no length read from the wire is used to allocate
//! before it has been checked against the bytes that are actually there
//! (`core-protocol.md` §2).

use std::fmt;

use bytes::{Buf, BufMut, Bytes};

use super::error::DecodeError;

/// `String` form boundary: fewer than this many UTF-16 units are written as raw
/// big-endian shorts (`UTF8Util.writeString`, `core-protocol.md` §2 form (a)).
pub const STRING_SHORTS_BELOW_UNITS: usize = 9;

/// `String` form boundary: fewer than this many UTF-16 units (and at least
/// [`STRING_SHORTS_BELOW_UNITS`]) are written as modified UTF-8 with a `u16` byte
/// length; from this count on the string is written as a SimpleString
/// (`core-protocol.md` §2 forms (b) and (c)).
pub const STRING_UTF_BELOW_UNITS: usize = 0xFFF;

/// Byte written for `true` by `ActiveMQBuffer.writeBoolean` (Java writes `-1`).
pub const TRUE_BYTE: u8 = 0xFF;

/// Byte written for `true` by raw Netty `ByteBuf.writeBoolean`, and the "present"
/// flag of nullable SimpleStrings/Strings (`DataConstants.NOT_NULL`).
pub const NOT_NULL_BYTE: u8 = 0x01;

/// A Core `SimpleString`: the UTF-16 code units of a Java string, each written low
/// byte first (`core-protocol.md` §2).
///
/// The raw bytes are kept as they came from the wire, so a string with an unpaired
/// surrogate (legal in Java) survives a decode/encode round trip byte for byte.
/// Equality and hashing are on those bytes, as in Java's `SimpleString.equals`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SimpleString(Bytes);

impl SimpleString {
    /// Encodes a Rust string as UTF-16LE.
    pub fn new(s: &str) -> Self {
        let mut out = Vec::with_capacity(s.len() * 2);
        for unit in s.encode_utf16() {
            out.extend_from_slice(&unit.to_le_bytes());
        }
        SimpleString(Bytes::from(out))
    }

    /// Wraps raw UTF-16LE bytes without checking them.
    pub fn from_utf16le(bytes: Bytes) -> Self {
        SimpleString(bytes)
    }

    /// Builds a string from UTF-16 code units (which may hold unpaired surrogates).
    pub fn from_units(units: &[u16]) -> Self {
        let mut out = Vec::with_capacity(units.len() * 2);
        for unit in units {
            out.extend_from_slice(&unit.to_le_bytes());
        }
        SimpleString(Bytes::from(out))
    }

    /// The raw UTF-16LE bytes, as on the wire (without the length prefix).
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The raw UTF-16LE bytes, consuming the string.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }

    /// Number of bytes (twice the number of UTF-16 units for well-formed data).
    pub fn byte_len(&self) -> usize {
        self.0.len()
    }

    /// `true` for the empty string.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The UTF-16 code units. A trailing odd byte is ignored, as Java's
    /// `SimpleString.toString` does.
    pub fn units(&self) -> impl Iterator<Item = u16> + '_ {
        self.0.chunks_exact(2).map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
    }

    /// Converts to a Rust string, replacing unpaired surrogates with U+FFFD and
    /// ignoring a trailing odd byte.
    pub fn to_string_lossy(&self) -> String {
        char::decode_utf16(self.units()).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect()
    }

    /// Converts to a Rust string, failing on an odd byte count or an unpaired
    /// surrogate.
    pub fn try_to_string(&self) -> Result<String, DecodeError> {
        if self.0.len() % 2 != 0 {
            return Err(DecodeError::BadString { reason: "odd byte length in UTF-16 string" });
        }
        char::decode_utf16(self.units())
            .collect::<Result<String, _>>()
            .map_err(|_| DecodeError::BadString { reason: "unpaired surrogate in UTF-16 string" })
    }

    /// Compares with a Rust string without allocating.
    pub fn eq_str(&self, s: &str) -> bool {
        let mut units = s.encode_utf16();
        let mut bytes = self.0.chunks(2);
        loop {
            match (units.next(), bytes.next()) {
                (None, None) => return true,
                (Some(u), Some(pair)) if pair.len() == 2 && u.to_le_bytes() == [pair[0], pair[1]] => {}
                _ => return false,
            }
        }
    }

    /// `true` if the string starts with `prefix`.
    pub fn starts_with_str(&self, prefix: &str) -> bool {
        let mut bytes = self.0.chunks(2);
        for u in prefix.encode_utf16() {
            match bytes.next() {
                Some(pair) if pair.len() == 2 && u.to_le_bytes() == [pair[0], pair[1]] => {}
                _ => return false,
            }
        }
        true
    }

    /// Size on the wire as a (non-nullable) SimpleString: `i32` length + bytes.
    pub fn encoded_len(&self) -> usize {
        4 + self.0.len()
    }
}

impl From<&str> for SimpleString {
    fn from(s: &str) -> Self {
        SimpleString::new(s)
    }
}

impl From<String> for SimpleString {
    fn from(s: String) -> Self {
        SimpleString::new(&s)
    }
}

impl From<&String> for SimpleString {
    fn from(s: &String) -> Self {
        SimpleString::new(s)
    }
}

impl PartialEq<str> for SimpleString {
    fn eq(&self, other: &str) -> bool {
        self.eq_str(other)
    }
}

impl PartialEq<&str> for SimpleString {
    fn eq(&self, other: &&str) -> bool {
        self.eq_str(other)
    }
}

impl fmt::Display for SimpleString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

impl fmt::Debug for SimpleString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string_lossy())
    }
}

/// Size on the wire of a nullable SimpleString.
pub fn nullable_simple_string_len(s: Option<&SimpleString>) -> usize {
    1 + s.map_or(0, SimpleString::encoded_len)
}

/// Decodes modified UTF-8 (Java `DataInput.readUTF` without its length prefix) into
/// UTF-16 units, exactly as `UTF8Util.readUTF` does: 1-byte `0x00..=0x7F`, 2-byte
/// leads `0xC0..=0xDF`, 3-byte leads `0xE0..=0xEF` (surrogates arrive as two 3-byte
/// sequences, CESU-8); any other lead byte is an error (`core-protocol.md` §2).
pub fn decode_modified_utf8(bytes: &[u8]) -> Result<Vec<u16>, DecodeError> {
    // At most one unit per byte, and `bytes` is already in memory: bounded.
    let mut units = Vec::with_capacity(bytes.len());
    let mut i = 0;
    let truncated = DecodeError::BadString { reason: "truncated modified UTF-8 sequence" };
    while i < bytes.len() {
        let b1 = bytes[i];
        i += 1;
        match b1 >> 4 {
            0x0..=0x7 => units.push(u16::from(b1)),
            0xC | 0xD => {
                let b2 = *bytes.get(i).ok_or_else(|| truncated.clone())?;
                i += 1;
                units.push((u16::from(b1 & 0x1F) << 6) | u16::from(b2 & 0x3F));
            }
            0xE => {
                if i + 2 > bytes.len() {
                    return Err(truncated);
                }
                let (b2, b3) = (bytes[i], bytes[i + 1]);
                i += 2;
                units.push((u16::from(b1 & 0x0F) << 12) | (u16::from(b2 & 0x3F) << 6) | u16::from(b3 & 0x3F));
            }
            _ => return Err(DecodeError::BadString { reason: "invalid modified UTF-8 lead byte" }),
        }
    }
    Ok(units)
}

/// Bytes one UTF-16 unit takes in modified UTF-8 (`UTF8Util.calculateUTFSize`).
fn modified_utf8_unit_len(unit: u16) -> usize {
    match unit {
        0..=0x7F => 1,
        0x80..=0x7FF => 2,
        _ => 3,
    }
}

/// Encodes UTF-16 units as modified UTF-8 (`UTF8Util.saveUTF` without the length
/// prefix). NUL is the single byte `0x00`, as Java writes it; each surrogate is
/// written on its own as three bytes.
pub fn encode_modified_utf8<B: BufMut + ?Sized>(units: &[u16], out: &mut B) {
    for &u in units {
        match u {
            0..=0x7F => out.put_u8(u as u8),
            0x80..=0x7FF => {
                out.put_u8(0xC0 | ((u >> 6) & 0x1F) as u8);
                out.put_u8(0x80 | (u & 0x3F) as u8);
            }
            _ => {
                out.put_u8(0xE0 | ((u >> 12) & 0x0F) as u8);
                out.put_u8(0x80 | ((u >> 6) & 0x3F) as u8);
                out.put_u8(0x80 | (u & 0x3F) as u8);
            }
        }
    }
}

/// Size on the wire of a Java `String` written with `writeString`.
pub fn string_encoded_len(s: &str) -> usize {
    let count = s.encode_utf16().count();
    if count < STRING_SHORTS_BELOW_UNITS {
        4 + 2 * count
    } else if count < STRING_UTF_BELOW_UNITS {
        4 + 2 + s.encode_utf16().map(modified_utf8_unit_len).sum::<usize>()
    } else {
        4 + 4 + 2 * count
    }
}

fn utf16_to_string(units: &[u16]) -> Result<String, DecodeError> {
    String::from_utf16(units).map_err(|_| DecodeError::BadString { reason: "unpaired surrogate in UTF-16 string" })
}

/// Reading Core primitives from any [`Buf`]. Every method checks the bytes
/// remaining before it reads and fails with [`DecodeError::Truncated`].
pub trait GetCore: Buf {
    /// Fails unless at least `n` bytes remain.
    fn need(&self, n: usize) -> Result<(), DecodeError> {
        let have = self.remaining();
        if have < n {
            Err(DecodeError::truncated(n, have))
        } else {
            Ok(())
        }
    }

    /// One unsigned byte.
    fn read_u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.get_u8())
    }

    /// One signed byte.
    fn read_i8(&mut self) -> Result<i8, DecodeError> {
        self.need(1)?;
        Ok(self.get_i8())
    }

    /// A boolean: any non-zero byte is `true` (`ActiveMQBuffer.readBoolean`).
    fn read_bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.read_u8()? != 0)
    }

    /// Big-endian `i16`.
    fn read_i16(&mut self) -> Result<i16, DecodeError> {
        self.need(2)?;
        Ok(self.get_i16())
    }

    /// Big-endian `u16`.
    fn read_u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2)?;
        Ok(self.get_u16())
    }

    /// Big-endian `i32`.
    fn read_i32(&mut self) -> Result<i32, DecodeError> {
        self.need(4)?;
        Ok(self.get_i32())
    }

    /// Big-endian `i64`.
    fn read_i64(&mut self) -> Result<i64, DecodeError> {
        self.need(8)?;
        Ok(self.get_i64())
    }

    /// `f32` from its IEEE bits as a big-endian `i32` (`Float.intBitsToFloat`).
    fn read_f32(&mut self) -> Result<f32, DecodeError> {
        self.need(4)?;
        Ok(f32::from_bits(self.get_u32()))
    }

    /// `f64` from its IEEE bits as a big-endian `i64`.
    fn read_f64(&mut self) -> Result<f64, DecodeError> {
        self.need(8)?;
        Ok(f64::from_bits(self.get_u64()))
    }

    /// Exactly `len` raw bytes (zero-copy when the buffer is [`Bytes`]).
    fn read_bytes(&mut self, len: usize) -> Result<Bytes, DecodeError> {
        self.need(len)?;
        Ok(self.copy_to_bytes(len))
    }

    /// An `i32` length that must be `>= 0` and no larger than the bytes remaining
    /// (each item taking at least `min_item_len` bytes). Use before allocating for a
    /// count read from the wire.
    fn read_len(&mut self, what: &'static str, min_item_len: usize) -> Result<usize, DecodeError> {
        let len = self.read_i32()?;
        let len_usize = usize::try_from(len).map_err(|_| DecodeError::InvalidLength { what, len: i64::from(len) })?;
        let need = len_usize.saturating_mul(min_item_len);
        self.need(need)?;
        Ok(len_usize)
    }

    /// `i32 len` + `len` bytes (BYTES property values, continuation chunks).
    fn read_len_prefixed_bytes(&mut self, what: &'static str) -> Result<Bytes, DecodeError> {
        let len = self.read_len(what, 1)?;
        Ok(self.copy_to_bytes(len))
    }

    /// A [`SimpleString`]: `i32 byteLen` + UTF-16LE bytes.
    fn read_simple_string(&mut self) -> Result<SimpleString, DecodeError> {
        Ok(SimpleString(self.read_len_prefixed_bytes("SimpleString")?))
    }

    /// A nullable SimpleString: flag byte `0` = null, anything else = present
    /// (`SimpleString.readNullableSimpleString`).
    fn read_nullable_simple_string(&mut self) -> Result<Option<SimpleString>, DecodeError> {
        if self.read_u8()? == 0 {
            Ok(None)
        } else {
            self.read_simple_string().map(Some)
        }
    }

    /// The UTF-16 units of a Java `String` in any of its three forms
    /// (`ChannelBufferWrapper.readString`, `core-protocol.md` §2).
    fn read_string_units(&mut self) -> Result<Vec<u16>, DecodeError> {
        let count = self.read_i32()?;
        let count =
            usize::try_from(count).map_err(|_| DecodeError::InvalidLength { what: "String", len: i64::from(count) })?;
        if count < STRING_SHORTS_BELOW_UNITS {
            // Form (a): count big-endian shorts.
            self.need(count * 2)?;
            Ok((0..count).map(|_| self.get_u16()).collect())
        } else if count < STRING_UTF_BELOW_UNITS {
            // Form (b): u16 byte length + modified UTF-8; Java ignores `count` here.
            let len = usize::from(self.read_u16()?);
            let bytes = self.read_bytes(len)?;
            decode_modified_utf8(&bytes)
        } else {
            // Form (c): a whole SimpleString after the count (two length ints).
            let ss = self.read_simple_string()?;
            if ss.byte_len() % 2 != 0 {
                return Err(DecodeError::BadString { reason: "odd byte length in UTF-16 string" });
            }
            Ok(ss.units().collect())
        }
    }

    /// A Java `String`; fails on malformed data or an unpaired surrogate.
    fn read_string(&mut self) -> Result<String, DecodeError> {
        let units = self.read_string_units()?;
        utf16_to_string(&units)
    }

    /// A Java `String`; unpaired surrogates become U+FFFD (for text that is only
    /// shown, such as an exception message).
    fn read_string_lossy(&mut self) -> Result<String, DecodeError> {
        let units = self.read_string_units()?;
        Ok(String::from_utf16_lossy(&units))
    }

    /// A nullable Java `String`: flag byte `0` = null, anything else = present.
    fn read_nullable_string(&mut self) -> Result<Option<String>, DecodeError> {
        if self.read_u8()? == 0 {
            Ok(None)
        } else {
            self.read_string().map(Some)
        }
    }

    /// A nullable Java `String`, lossy (see [`GetCore::read_string_lossy`]).
    fn read_nullable_string_lossy(&mut self) -> Result<Option<String>, DecodeError> {
        if self.read_u8()? == 0 {
            Ok(None)
        } else {
            self.read_string_lossy().map(Some)
        }
    }

    /// `BufferHelper.readNullableBoolean`: boolean "present" flag, then the value.
    fn read_nullable_bool(&mut self) -> Result<Option<bool>, DecodeError> {
        if self.read_bool()? {
            self.read_bool().map(Some)
        } else {
            Ok(None)
        }
    }

    /// `BufferHelper.readNullableInteger`.
    fn read_nullable_i32(&mut self) -> Result<Option<i32>, DecodeError> {
        if self.read_bool()? {
            self.read_i32().map(Some)
        } else {
            Ok(None)
        }
    }

    /// `BufferHelper.readNullableLong`.
    fn read_nullable_i64(&mut self) -> Result<Option<i64>, DecodeError> {
        if self.read_bool()? {
            self.read_i64().map(Some)
        } else {
            Ok(None)
        }
    }
}

impl<B: Buf + ?Sized> GetCore for B {}

/// Writing Core primitives to any [`BufMut`].
///
/// Lengths are written as `i32`. A value longer than `i32::MAX` bytes cannot fit
/// in a frame at all; [`super::frame::encode_frame`] rejects such frames, so these
/// writers do not check each length themselves.
pub trait PutCore: BufMut {
    /// `ActiveMQBuffer.writeBoolean`: `0xFF` for true, `0x00` for false.
    fn put_bool(&mut self, v: bool) {
        self.put_u8(if v { TRUE_BYTE } else { 0 });
    }

    /// Raw Netty `ByteBuf.writeBoolean`: `0x01` for true. Used inside the message
    /// header (`durable`) and for TypedProperties BOOLEAN values (`core-protocol.md`
    /// §2, §7.1).
    fn put_raw_bool(&mut self, v: bool) {
        self.put_u8(u8::from(v));
    }

    /// `f32` as its IEEE bits.
    fn put_f32_bits(&mut self, v: f32) {
        self.put_u32(v.to_bits());
    }

    /// `f64` as its IEEE bits.
    fn put_f64_bits(&mut self, v: f64) {
        self.put_u64(v.to_bits());
    }

    /// `i32 len` + bytes.
    fn put_len_prefixed_bytes(&mut self, b: &[u8]) {
        self.put_i32(b.len() as i32);
        self.put_slice(b);
    }

    /// A [`SimpleString`].
    fn put_simple_string(&mut self, s: &SimpleString) {
        self.put_len_prefixed_bytes(s.as_bytes());
    }

    /// A nullable SimpleString with the `0x00` / `0x01` flag.
    fn put_nullable_simple_string(&mut self, s: Option<&SimpleString>) {
        match s {
            None => self.put_u8(0),
            Some(s) => {
                self.put_u8(NOT_NULL_BYTE);
                self.put_simple_string(s);
            }
        }
    }

    /// A Java `String` in the form its length calls for (`UTF8Util.writeString`).
    fn put_string(&mut self, s: &str) {
        let units: Vec<u16> = s.encode_utf16().collect();
        self.put_string_units(&units);
    }

    /// A Java `String` given as UTF-16 units.
    fn put_string_units(&mut self, units: &[u16]) {
        let count = units.len();
        self.put_i32(count as i32);
        if count < STRING_SHORTS_BELOW_UNITS {
            for &u in units {
                self.put_u16(u);
            }
        } else if count < STRING_UTF_BELOW_UNITS {
            // At most 4094 * 3 = 12282 bytes: always fits the u16 length.
            let len: usize = units.iter().map(|&u| modified_utf8_unit_len(u)).sum();
            self.put_u16(len as u16);
            encode_modified_utf8(units, self);
        } else {
            self.put_i32((count * 2) as i32);
            for &u in units {
                self.put_u16_le(u);
            }
        }
    }

    /// A nullable Java `String` with the `0x00` / `0x01` flag.
    fn put_nullable_string(&mut self, s: Option<&str>) {
        match s {
            None => self.put_u8(0),
            Some(s) => {
                self.put_u8(NOT_NULL_BYTE);
                self.put_string(s);
            }
        }
    }

    /// `BufferHelper.writeNullableBoolean`: `0xFF` present flag, then `0xFF`/`0x00`.
    fn put_nullable_bool(&mut self, v: Option<bool>) {
        self.put_bool(v.is_some());
        if let Some(v) = v {
            self.put_bool(v);
        }
    }

    /// `BufferHelper.writeNullableInteger`.
    fn put_nullable_i32(&mut self, v: Option<i32>) {
        self.put_bool(v.is_some());
        if let Some(v) = v {
            self.put_i32(v);
        }
    }

    /// `BufferHelper.writeNullableLong`.
    fn put_nullable_i64(&mut self, v: Option<i64>) {
        self.put_bool(v.is_some());
        if let Some(v) = v {
            self.put_i64(v);
        }
    }
}

impl<B: BufMut + ?Sized> PutCore for B {}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bytes::BytesMut;
    use proptest::prelude::*;

    /// Parses "00 0A ff" style hex.
    pub(crate) fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace().map(|b| u8::from_str_radix(b, 16).expect("hex byte")).collect()
    }

    fn encode(f: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
        let mut b = BytesMut::new();
        f(&mut b);
        b.to_vec()
    }

    // core-protocol.md §2 test vectors.
    #[test]
    fn string_ab_is_two_shorts() {
        assert_eq!(encode(|b| b.put_string("ab")), hex("00 00 00 02 00 61 00 62"));
    }

    #[test]
    fn string_hello_world_is_modified_utf8() {
        assert_eq!(encode(|b| b.put_string("hello world")), hex("00 00 00 0B 00 0B 68 65 6C 6C 6F 20 77 6F 72 6C 64"));
    }

    #[test]
    fn string_with_nul_and_emoji_is_cesu8() {
        let s = "ab\u{0000}cé日x😀";
        let golden = hex("00 00 00 09 00 10 61 62 00 63 C3 A9 E6 97 A5 78 ED A0 BD ED B8 80");
        assert_eq!(encode(|b| b.put_string(s)), golden);
        let mut buf = Bytes::from(golden);
        assert_eq!(buf.read_string().unwrap(), s);
        assert!(!buf.has_remaining());
    }

    #[test]
    fn simple_string_is_utf16le() {
        let golden = hex("00 00 00 10 61 00 62 00 63 00 64 00 65 00 66 00 67 00 68 00");
        assert_eq!(encode(|b| b.put_simple_string(&"abcdefgh".into())), golden);
        let mut buf = Bytes::from(golden);
        assert_eq!(buf.read_simple_string().unwrap(), "abcdefgh");
    }

    #[test]
    fn string_form_boundaries() {
        // 8 units: shorts; 9: UTF; 4094: UTF; 4095: SimpleString.
        for (n, expect_form) in [(0, 'a'), (8, 'a'), (9, 'b'), (4094, 'b'), (4095, 'c'), (5000, 'c')] {
            let s = "x".repeat(n);
            let bytes = encode(|b| b.put_string(&s));
            let expected_len = match expect_form {
                'a' => 4 + 2 * n,
                'b' => 4 + 2 + n,
                _ => 4 + 4 + 2 * n,
            };
            assert_eq!(bytes.len(), expected_len, "len {n}");
            assert_eq!(string_encoded_len(&s), expected_len);
            let mut buf = Bytes::from(bytes);
            assert_eq!(buf.read_string().unwrap(), s);
            assert!(!buf.has_remaining());
        }
    }

    #[test]
    fn modified_utf8_accepts_two_byte_nul() {
        // Java's own DataOutput writes NUL as C0 80; UTF8Util reads it back as NUL.
        assert_eq!(decode_modified_utf8(&[0xC0, 0x80]).unwrap(), vec![0u16]);
    }

    #[test]
    fn modified_utf8_rejects_four_byte_lead_and_truncation() {
        assert!(matches!(decode_modified_utf8(&[0xF0, 0x9F, 0x98, 0x80]), Err(DecodeError::BadString { .. })));
        assert!(matches!(decode_modified_utf8(&[0xE6, 0x97]), Err(DecodeError::BadString { .. })));
        assert!(matches!(decode_modified_utf8(&[0xC3]), Err(DecodeError::BadString { .. })));
        assert!(matches!(decode_modified_utf8(&[0x80]), Err(DecodeError::BadString { .. })));
    }

    #[test]
    fn negative_string_count_is_invalid() {
        let mut buf = Bytes::from(hex("FF FF FF FF"));
        assert!(matches!(buf.read_string(), Err(DecodeError::InvalidLength { .. })));
    }

    #[test]
    fn huge_simple_string_length_is_truncated_not_allocated() {
        let mut buf = Bytes::from(hex("7F FF FF FF 00 01"));
        assert_eq!(buf.read_simple_string(), Err(DecodeError::Truncated { need: i32::MAX as usize, have: 2 }));
        let mut buf = Bytes::from(hex("80 00 00 00"));
        assert!(matches!(buf.read_simple_string(), Err(DecodeError::InvalidLength { .. })));
    }

    #[test]
    fn form_c_string_with_lying_length_is_truncated() {
        let mut buf = Bytes::from(hex("00 00 10 00 7F FF FF FF"));
        assert!(matches!(buf.read_string(), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn unpaired_surrogate_is_bad_for_string_but_kept_in_simple_string() {
        let ss = SimpleString::from_units(&[0x61, 0xD800]);
        assert!(ss.try_to_string().is_err());
        assert_eq!(ss.to_string_lossy(), "a\u{FFFD}");
        let bytes = encode(|b| b.put_simple_string(&ss));
        assert_eq!(Bytes::from(bytes).read_simple_string().unwrap(), ss);
        // As a Java String (form a) the strict reader refuses it, the lossy one replaces.
        let bytes = encode(|b| b.put_string_units(&[0x61, 0xD800]));
        assert!(Bytes::from(bytes.clone()).read_string().is_err());
        assert_eq!(Bytes::from(bytes).read_string_lossy().unwrap(), "a\u{FFFD}");
    }

    #[test]
    fn booleans_and_flags() {
        assert_eq!(encode(|b| b.put_bool(true)), [0xFF]);
        assert_eq!(encode(|b| b.put_bool(false)), [0x00]);
        assert_eq!(encode(|b| b.put_raw_bool(true)), [0x01]);
        assert_eq!(encode(|b| b.put_nullable_bool(Some(true))), [0xFF, 0xFF]);
        assert_eq!(encode(|b| b.put_nullable_bool(None)), [0x00]);
        assert_eq!(encode(|b| b.put_nullable_i32(Some(-1))), hex("FF FF FF FF FF"));
        assert_eq!(encode(|b| b.put_nullable_simple_string(None)), [0x00]);
        assert_eq!(encode(|b| b.put_nullable_string(Some(""))), hex("01 00 00 00 00"));
        for byte in [0x01u8, 0x02, 0x80, 0xFF] {
            assert!(Bytes::from(vec![byte]).read_bool().unwrap());
        }
        assert!(!Bytes::from(vec![0u8]).read_bool().unwrap());
        // Nullable SimpleString: any non-zero flag means present.
        let mut buf = Bytes::from(hex("FF 00 00 00 02 61 00"));
        assert_eq!(buf.read_nullable_simple_string().unwrap().unwrap(), "a");
    }

    #[test]
    fn integer_boundaries_are_big_endian() {
        for v in [0i32, 1, -1, i32::MIN, i32::MAX] {
            let bytes = encode(|b| b.put_i32(v));
            assert_eq!(bytes, v.to_be_bytes());
            assert_eq!(Bytes::from(bytes).read_i32().unwrap(), v);
        }
        for v in [0i64, 1, -1, i64::MIN, i64::MAX] {
            let bytes = encode(|b| b.put_i64(v));
            assert_eq!(bytes, v.to_be_bytes());
            assert_eq!(Bytes::from(bytes).read_i64().unwrap(), v);
        }
        for v in [0i16, -1, i16::MIN, i16::MAX] {
            assert_eq!(Bytes::from(encode(|b| b.put_i16(v))).read_i16().unwrap(), v);
        }
        for v in [i8::MIN, -1, 0, i8::MAX] {
            assert_eq!(Bytes::from(encode(|b| b.put_i8(v))).read_i8().unwrap(), v);
        }
    }

    #[test]
    fn float_bits_survive_including_nan_payloads() {
        for bits in [0u32, 0x8000_0000, 0x7FC0_0001, 0xFF80_0000, 0x7F7F_FFFF] {
            let v = f32::from_bits(bits);
            let got = Bytes::from(encode(|b| b.put_f32_bits(v))).read_f32().unwrap();
            assert_eq!(got.to_bits(), bits);
        }
        for bits in [0u64, 0x7FF8_0000_0000_0001, 0x8000_0000_0000_0000] {
            let v = f64::from_bits(bits);
            let got = Bytes::from(encode(|b| b.put_f64_bits(v))).read_f64().unwrap();
            assert_eq!(got.to_bits(), bits);
        }
    }

    #[test]
    fn truncated_reads_report_need_and_have() {
        assert_eq!(Bytes::new().read_u8(), Err(DecodeError::Truncated { need: 1, have: 0 }));
        assert_eq!(Bytes::from(vec![0u8; 3]).read_i32(), Err(DecodeError::Truncated { need: 4, have: 3 }));
        assert_eq!(Bytes::from(vec![0u8; 7]).read_i64(), Err(DecodeError::Truncated { need: 8, have: 7 }));
        assert_eq!(Bytes::from(vec![0u8; 1]).read_i16(), Err(DecodeError::Truncated { need: 2, have: 1 }));
    }

    #[test]
    fn simple_string_comparisons() {
        let s = SimpleString::new("_AMQ_ROUTE_TO_x");
        assert!(s.eq_str("_AMQ_ROUTE_TO_x"));
        assert!(!s.eq_str("_AMQ_ROUTE_TO"));
        assert!(s.starts_with_str("_AMQ_ROUTE_TO"));
        assert!(!s.starts_with_str("_AMQ_ROUTE_TO_xy"));
        assert!(SimpleString::new("").eq_str(""));
        assert_eq!(format!("{s}"), "_AMQ_ROUTE_TO_x");
        assert_eq!(format!("{s:?}"), "\"_AMQ_ROUTE_TO_x\"");
    }

    /// Any sequence of UTF-16 units, including unpaired surrogates.
    pub(crate) fn arb_units() -> impl Strategy<Value = Vec<u16>> {
        prop_oneof![prop::collection::vec(any::<u16>(), 0..12), prop::collection::vec(any::<u16>(), 0..5000),]
    }

    /// Strings that hit every `String` form.
    pub(crate) fn arb_string() -> impl Strategy<Value = String> {
        prop_oneof![".{0,8}", ".{9,40}", "[a-z]{4090,4100}", any::<String>(),]
    }

    pub(crate) fn arb_simple_string() -> impl Strategy<Value = SimpleString> {
        prop_oneof![
            any::<String>().prop_map(|s| SimpleString::new(&s)),
            prop::collection::vec(any::<u16>(), 0..16).prop_map(|u| SimpleString::from_units(&u)),
        ]
    }

    proptest! {
        #[test]
        fn prop_string_round_trips(s in arb_string()) {
            let bytes = encode(|b| b.put_string(&s));
            prop_assert_eq!(bytes.len(), string_encoded_len(&s));
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(buf.read_string().unwrap(), s);
            prop_assert!(!buf.has_remaining());
        }

        #[test]
        fn prop_string_units_round_trip(units in arb_units()) {
            let bytes = encode(|b| b.put_string_units(&units));
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(buf.read_string_units().unwrap(), units);
            prop_assert!(!buf.has_remaining());
        }

        #[test]
        fn prop_nullable_string_round_trips(s in proptest::option::of(arb_string())) {
            let bytes = encode(|b| b.put_nullable_string(s.as_deref()));
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(buf.read_nullable_string().unwrap(), s);
            prop_assert!(!buf.has_remaining());
        }

        #[test]
        fn prop_simple_string_round_trips(s in arb_simple_string()) {
            let bytes = encode(|b| b.put_simple_string(&s));
            prop_assert_eq!(bytes.len(), s.encoded_len());
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(buf.read_simple_string().unwrap(), s);
            prop_assert!(!buf.has_remaining());
        }

        #[test]
        fn prop_simple_string_text_round_trips(s in any::<String>()) {
            let ss = SimpleString::new(&s);
            prop_assert!(ss.eq_str(&s));
            prop_assert_eq!(ss.try_to_string().unwrap(), s);
        }

        #[test]
        fn prop_nullable_simple_string_round_trips(s in proptest::option::of(arb_simple_string())) {
            let bytes = encode(|b| b.put_nullable_simple_string(s.as_ref()));
            prop_assert_eq!(bytes.len(), nullable_simple_string_len(s.as_ref()));
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(buf.read_nullable_simple_string().unwrap(), s);
        }

        #[test]
        fn prop_numbers_round_trip(a in any::<i8>(), b in any::<i16>(), c in any::<i32>(), d in any::<i64>(),
                                   e in any::<u32>(), f in any::<u64>(), g in any::<bool>(), h in any::<u16>()) {
            let bytes = encode(|buf| {
                buf.put_i8(a); buf.put_i16(b); buf.put_i32(c); buf.put_i64(d);
                buf.put_f32_bits(f32::from_bits(e)); buf.put_f64_bits(f64::from_bits(f));
                buf.put_bool(g); buf.put_raw_bool(g); buf.put_u16(h);
            });
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(buf.read_i8().unwrap(), a);
            prop_assert_eq!(buf.read_i16().unwrap(), b);
            prop_assert_eq!(buf.read_i32().unwrap(), c);
            prop_assert_eq!(buf.read_i64().unwrap(), d);
            prop_assert_eq!(buf.read_f32().unwrap().to_bits(), e);
            prop_assert_eq!(buf.read_f64().unwrap().to_bits(), f);
            prop_assert_eq!(buf.read_bool().unwrap(), g);
            prop_assert_eq!(buf.read_bool().unwrap(), g);
            prop_assert_eq!(buf.read_u16().unwrap(), h);
            prop_assert!(!buf.has_remaining());
        }

        #[test]
        fn prop_nullables_round_trip(a in any::<Option<bool>>(), b in any::<Option<i32>>(), c in any::<Option<i64>>()) {
            let bytes = encode(|buf| { buf.put_nullable_bool(a); buf.put_nullable_i32(b); buf.put_nullable_i64(c); });
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(buf.read_nullable_bool().unwrap(), a);
            prop_assert_eq!(buf.read_nullable_i32().unwrap(), b);
            prop_assert_eq!(buf.read_nullable_i64().unwrap(), c);
            prop_assert!(!buf.has_remaining());
        }

        #[test]
        fn prop_len_prefixed_bytes_round_trip(v in prop::collection::vec(any::<u8>(), 0..300)) {
            let bytes = encode(|b| b.put_len_prefixed_bytes(&v));
            let mut buf = Bytes::from(bytes);
            prop_assert_eq!(&buf.read_len_prefixed_bytes("test").unwrap()[..], &v[..]);
        }

        #[test]
        fn prop_string_readers_never_panic(v in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = Bytes::from(v.clone()).read_string();
            let _ = Bytes::from(v.clone()).read_string_lossy();
            let _ = Bytes::from(v.clone()).read_nullable_string();
            let _ = Bytes::from(v.clone()).read_simple_string();
            let _ = Bytes::from(v.clone()).read_nullable_simple_string();
            let _ = decode_modified_utf8(&v);
        }
    }
}
