//! The errors of the pure codec: what can go wrong while decoding bytes from the
//! broker ([`DecodeError`]), while framing bytes for it ([`EncodeError`]), and while
//! following a large message's chunks ([`LargeMessageError`]).
//!
//! None of them carries I/O state; the connection layer wraps them with the channel
//! and packet type it was handling.

use thiserror::Error;

/// Bytes that do not form a valid Core frame, packet, message or value.
///
/// Every decoder in [`crate::protocol`] returns this instead of panicking. After a
/// `DecodeError` on a frame, the byte stream can no longer be trusted: close the
/// connection (`core-protocol.md` §1.3).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended before a field was complete.
    #[error("truncated input: needed {need} more bytes, only {have} left")]
    Truncated {
        /// Bytes the field needs.
        need: usize,
        /// Bytes that were left.
        have: usize,
    },
    /// A string's bytes are not valid in the encoding its form requires
    /// (modified UTF-8 of `String` form (b), or UTF-16 that is not well-formed when a
    /// Rust `String` is asked for).
    #[error("invalid string: {reason}")]
    BadString {
        /// What was wrong.
        reason: &'static str,
    },
    /// A frame's length field exceeds the configured maximum.
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge {
        /// The length announced by the frame.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// A length or count read from the wire is negative or impossible.
    #[error("invalid {what} length {len}")]
    InvalidLength {
        /// Which field carried the length.
        what: &'static str,
        /// The value read.
        len: i64,
    },
    /// A TypedProperties or stream-body value tag that is not one of the known
    /// types (`core-protocol.md` §7.2).
    #[error("unknown property value type {tag}")]
    UnknownPropertyType {
        /// The tag byte.
        tag: i8,
    },
    /// A `TransportConfiguration` parameter tag that is not one of the known types.
    #[error("unknown transport parameter type {tag}")]
    UnknownTransportParamType {
        /// The tag byte.
        tag: i8,
    },
}

impl DecodeError {
    /// Shorthand for [`DecodeError::Truncated`].
    pub(crate) fn truncated(need: usize, have: usize) -> Self {
        DecodeError::Truncated { need, have }
    }
}

/// A packet that cannot be put on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The encoded frame would be longer than the maximum (or than the `i32` length
    /// field can express).
    #[error("encoded frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge {
        /// The length the frame would have (bytes after the length field).
        len: usize,
        /// The maximum.
        max: usize,
    },
}

/// A large-message chunk that does not fit the message being received
/// (`core-protocol.md` §11.1).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum LargeMessageError {
    /// A continuation arrived for another consumer than the one receiving the
    /// large message.
    #[error("continuation for consumer {got} while consumer {expected} receives a large message")]
    WrongConsumer {
        /// The consumer that received SESS_RECEIVE_LARGE_MSG.
        expected: i64,
        /// The consumer named by the continuation.
        got: i64,
    },
    /// A chunk arrived after the last chunk (`continues = false`).
    #[error("chunk received after the last chunk of the large message")]
    AlreadyComplete,
    /// The chunks add up to more bytes than the announced size.
    #[error("large message chunks exceed the announced size: {received} > {expected}")]
    TooLong {
        /// The announced `largeMessageSize`.
        expected: i64,
        /// The bytes received so far.
        received: u64,
    },
    /// The last chunk arrived before the announced size was reached.
    #[error("large message ended after {received} of {expected} announced bytes")]
    TooShort {
        /// The announced `largeMessageSize`.
        expected: i64,
        /// The bytes received.
        received: u64,
    },
    /// Reassembling in memory would exceed the caller's limit.
    #[error("large message of at least {len} bytes exceeds the in-memory limit of {max} bytes")]
    OverLimit {
        /// The size reached or announced.
        len: u64,
        /// The caller's limit.
        max: u64,
    },
}
