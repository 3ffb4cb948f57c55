//! Large messages without I/O (`core-protocol.md` §11): [`ContinuationSplitter`]
//! and [`split_body`] turn a body into SESS_SEND_CONTINUATION packets;
//! [`LargeMessageReceiver`] checks the SESS_RECEIVE_CONTINUATIONs that follow a
//! SESS_RECEIVE_LARGE_MSG, and [`LargeMessageAssembler`] reassembles them in memory
//! under a size limit. Files, sockets and credits stay with the caller.

use bytes::{Bytes, BytesMut};

use super::error::LargeMessageError;
use super::message::CoreMessage;
use super::packet::{
    SessionReceiveContinuation, SessionReceiveLargeMessage, SessionReceiveMessage, SessionSendContinuation,
};

/// Java's large-message threshold and chunk size (`minLargeMessageSize`, 100 KiB).
pub const DEFAULT_CHUNK_SIZE: usize = 100 * 1024;

/// `true` when Java would send a body of `body_len` bytes as a large message:
/// `4 + body length > minLargeMessageSize` (`ClientProducerImpl`, §19 item 11).
pub fn is_large(body_len: usize, min_large_message_size: usize) -> bool {
    body_len.saturating_add(4) > min_large_message_size
}

fn middle_chunk(chunk: Bytes, producer_id: i32) -> SessionSendContinuation {
    SessionSendContinuation {
        chunk,
        continues: true,
        message_body_size: -1,
        requires_response: false,
        correlation_id: -1,
        producer_id,
    }
}

/// Cuts a body that arrives in pieces (read from a file, say) into
/// SESS_SEND_CONTINUATION packets of `chunk_size` bytes.
///
/// A chunk is only released once more data shows it is not the last, so
/// [`ContinuationSplitter::finish`] always has a final chunk to mark
/// `continues = false` (it may be empty only when the whole body is).
///
/// ```
/// use artemis_core::protocol::large::ContinuationSplitter;
/// let mut s = ContinuationSplitter::new(4, -1);
/// s.push(b"hello world");
/// let mut sent = Vec::new();
/// while let Some(chunk) = s.next_chunk() {
///     sent.push(chunk);
/// }
/// let last = s.finish(true, 7);
/// assert_eq!(sent.len(), 2);
/// assert_eq!((&last.chunk[..], last.continues, last.message_body_size), (&b"rld"[..], false, 11));
/// ```
#[derive(Debug)]
pub struct ContinuationSplitter {
    chunk_size: usize,
    pending: BytesMut,
    total: u64,
    producer_id: i32,
}

impl ContinuationSplitter {
    /// A splitter producing chunks of `chunk_size` bytes (at least 1) for the given
    /// producer id (−1 = none).
    pub fn new(chunk_size: usize, producer_id: i32) -> Self {
        ContinuationSplitter { chunk_size: chunk_size.max(1), pending: BytesMut::new(), total: 0, producer_id }
    }

    /// Appends body bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        self.total += data.len() as u64;
    }

    /// Body bytes pushed so far.
    pub fn total_len(&self) -> u64 {
        self.total
    }

    /// The next full middle chunk (`continues = true`, no response requested,
    /// correlation id −1), once more than a chunk is pending.
    pub fn next_chunk(&mut self) -> Option<SessionSendContinuation> {
        if self.pending.len() > self.chunk_size {
            let chunk = self.pending.split_to(self.chunk_size).freeze();
            Some(middle_chunk(chunk, self.producer_id))
        } else {
            None
        }
    }

    /// The last chunk: the rest of the body, `continues = false` and
    /// `message_body_size` = every byte pushed. Call [`Self::next_chunk`] until it
    /// returns `None` first; anything still pending beyond one chunk would
    /// otherwise be put into this one. For a pass-through of a compressed body, set
    /// `message_body_size` to the original `_AMQ_LARGE_SIZE` afterwards (§11.3).
    pub fn finish(self, requires_response: bool, correlation_id: i64) -> SessionSendContinuation {
        SessionSendContinuation {
            chunk: self.pending.freeze(),
            continues: false,
            message_body_size: i64::try_from(self.total).unwrap_or(i64::MAX),
            requires_response,
            correlation_id,
            producer_id: self.producer_id,
        }
    }
}

/// Iterator over the continuations of a body held in memory; see [`split_body`].
#[derive(Debug)]
pub struct BodyChunks {
    body: Bytes,
    chunk_size: usize,
    total: u64,
    producer_id: i32,
    requires_response: bool,
    correlation_id: i64,
    done: bool,
}

impl Iterator for BodyChunks {
    type Item = SessionSendContinuation;

    fn next(&mut self) -> Option<SessionSendContinuation> {
        if self.done {
            return None;
        }
        if self.body.len() > self.chunk_size {
            let chunk = self.body.split_to(self.chunk_size);
            return Some(middle_chunk(chunk, self.producer_id));
        }
        self.done = true;
        Some(SessionSendContinuation {
            chunk: std::mem::take(&mut self.body),
            continues: false,
            message_body_size: i64::try_from(self.total).unwrap_or(i64::MAX),
            requires_response: self.requires_response,
            correlation_id: self.correlation_id,
            producer_id: self.producer_id,
        })
    }
}

/// Splits an in-memory body into continuations of `chunk_size` bytes (zero-copy
/// slices of `body`). Only the last asks for a response and carries the
/// correlation id and the body size (§11.2).
pub fn split_body(
    body: Bytes,
    chunk_size: usize,
    producer_id: i32,
    requires_response: bool,
    correlation_id: i64,
) -> BodyChunks {
    BodyChunks {
        total: body.len() as u64,
        body,
        chunk_size: chunk_size.max(1),
        producer_id,
        requires_response,
        correlation_id,
        done: false,
    }
}

/// Where a large message stands after a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkProgress {
    /// More chunks follow.
    More,
    /// That was the last chunk; the body is complete.
    Complete,
}

/// Follows the continuations of one large message being delivered to a consumer,
/// checking consumer id, order and size; the chunk bytes themselves go wherever
/// the caller wants (a file, say).
#[derive(Debug, Clone)]
pub struct LargeMessageReceiver {
    consumer_id: i64,
    expected: i64,
    received: u64,
    complete: bool,
}

impl LargeMessageReceiver {
    /// Starts following the message announced by `start`.
    pub fn new(start: &SessionReceiveLargeMessage) -> Self {
        LargeMessageReceiver {
            consumer_id: start.consumer_id,
            expected: start.large_message_size,
            received: 0,
            complete: false,
        }
    }

    /// The consumer receiving the message.
    pub fn consumer_id(&self) -> i64 {
        self.consumer_id
    }

    /// The announced body size (as stored: compressed size if compressed).
    pub fn expected_size(&self) -> i64 {
        self.expected
    }

    /// Body bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// `true` once the last chunk was accepted.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Accounts for one continuation. The broker sends exactly the announced
    /// number of bytes, the last chunk with `continues = false` (possibly empty
    /// for an empty body; `ServerConsumerImpl.CoreLargeMessageDeliverer`).
    pub fn accept(&mut self, c: &SessionReceiveContinuation) -> Result<ChunkProgress, LargeMessageError> {
        if c.consumer_id != self.consumer_id {
            return Err(LargeMessageError::WrongConsumer { expected: self.consumer_id, got: c.consumer_id });
        }
        if self.complete {
            return Err(LargeMessageError::AlreadyComplete);
        }
        self.received += c.chunk.len() as u64;
        // A negative announced size is not checked (it never comes from a broker).
        if let Ok(expected) = u64::try_from(self.expected) {
            if self.received > expected {
                return Err(LargeMessageError::TooLong { expected: self.expected, received: self.received });
            }
            if !c.continues && self.received < expected {
                return Err(LargeMessageError::TooShort { expected: self.expected, received: self.received });
            }
        }
        if c.continues {
            Ok(ChunkProgress::More)
        } else {
            self.complete = true;
            Ok(ChunkProgress::Complete)
        }
    }
}

/// Reassembles a large message in memory, refusing bodies above `max_len` bytes.
/// Memory grows with the chunks received, never from the announced size.
#[derive(Debug)]
pub struct LargeMessageAssembler {
    receiver: LargeMessageReceiver,
    start: SessionReceiveLargeMessage,
    body: BytesMut,
    max_len: u64,
}

impl LargeMessageAssembler {
    /// Starts reassembling; fails at once if the announced size exceeds `max_len`.
    pub fn new(start: SessionReceiveLargeMessage, max_len: u64) -> Result<Self, LargeMessageError> {
        if let Ok(size) = u64::try_from(start.large_message_size) {
            if size > max_len {
                return Err(LargeMessageError::OverLimit { len: size, max: max_len });
            }
        }
        Ok(LargeMessageAssembler { receiver: LargeMessageReceiver::new(&start), start, body: BytesMut::new(), max_len })
    }

    /// The size and consumer bookkeeping.
    pub fn receiver(&self) -> &LargeMessageReceiver {
        &self.receiver
    }

    /// Adds one continuation. On the last one, returns the complete message in the
    /// same shape as a regular delivery.
    pub fn accept(
        &mut self,
        c: SessionReceiveContinuation,
    ) -> Result<Option<SessionReceiveMessage>, LargeMessageError> {
        let new_len = self.body.len() as u64 + c.chunk.len() as u64;
        if new_len > self.max_len {
            return Err(LargeMessageError::OverLimit { len: new_len, max: self.max_len });
        }
        let progress = self.receiver.accept(&c)?;
        self.body.extend_from_slice(&c.chunk);
        match progress {
            ChunkProgress::More => Ok(None),
            ChunkProgress::Complete => Ok(Some(SessionReceiveMessage {
                message: CoreMessage {
                    headers: self.start.headers.clone(),
                    body: std::mem::take(&mut self.body).freeze(),
                },
                consumer_id: self.start.consumer_id,
                delivery_count: self.start.delivery_count,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::message::MessageHeaders;
    use proptest::prelude::*;

    fn start(consumer_id: i64, size: i64) -> SessionReceiveLargeMessage {
        SessionReceiveLargeMessage {
            consumer_id,
            delivery_count: 1,
            large_message_size: size,
            headers: MessageHeaders::default(),
        }
    }

    fn cont(chunk: &'static [u8], continues: bool, consumer_id: i64) -> SessionReceiveContinuation {
        SessionReceiveContinuation { chunk: Bytes::from_static(chunk), continues, consumer_id }
    }

    #[test]
    fn threshold_matches_java() {
        assert!(!is_large(102_396, DEFAULT_CHUNK_SIZE));
        assert!(is_large(102_397, DEFAULT_CHUNK_SIZE));
    }

    #[test]
    fn splitter_exact_multiple_keeps_a_full_last_chunk() {
        let mut s = ContinuationSplitter::new(3, 9);
        s.push(b"abcdef");
        let first = s.next_chunk().unwrap();
        assert_eq!((&first.chunk[..], first.continues, first.producer_id), (&b"abc"[..], true, 9));
        assert!(s.next_chunk().is_none());
        let last = s.finish(true, 2);
        assert_eq!(&last.chunk[..], b"def");
        assert!(!last.continues && last.requires_response);
        assert_eq!((last.message_body_size, last.correlation_id), (6, 2));
    }

    #[test]
    fn empty_body_gives_one_empty_last_chunk() {
        let s = ContinuationSplitter::new(10, -1);
        let last = s.finish(true, 1);
        assert!(last.chunk.is_empty() && !last.continues && last.message_body_size == 0);
        let all: Vec<_> = split_body(Bytes::new(), 10, -1, true, 1).collect();
        assert_eq!(all, vec![last]);
    }

    #[test]
    fn receiver_checks_consumer_order_and_size() {
        let mut r = LargeMessageReceiver::new(&start(5, 4));
        assert_eq!(r.accept(&cont(b"ab", true, 6)), Err(LargeMessageError::WrongConsumer { expected: 5, got: 6 }));
        assert_eq!(r.accept(&cont(b"ab", true, 5)), Ok(ChunkProgress::More));
        assert_eq!(r.accept(&cont(b"c", false, 5)), Err(LargeMessageError::TooShort { expected: 4, received: 3 }));
        let mut r = LargeMessageReceiver::new(&start(5, 2));
        assert_eq!(r.accept(&cont(b"abc", true, 5)), Err(LargeMessageError::TooLong { expected: 2, received: 3 }));
        let mut r = LargeMessageReceiver::new(&start(5, 2));
        assert_eq!(r.accept(&cont(b"ab", false, 5)), Ok(ChunkProgress::Complete));
        assert!(r.is_complete());
        assert_eq!(r.accept(&cont(b"", false, 5)), Err(LargeMessageError::AlreadyComplete));
        // Empty large message: one empty last chunk.
        let mut r = LargeMessageReceiver::new(&start(1, 0));
        assert_eq!(r.accept(&cont(b"", false, 1)), Ok(ChunkProgress::Complete));
    }

    #[test]
    fn assembler_enforces_limit() {
        assert!(matches!(
            LargeMessageAssembler::new(start(1, 11), 10),
            Err(LargeMessageError::OverLimit { len: 11, max: 10 })
        ));
        let mut a = LargeMessageAssembler::new(start(1, -1), 3).unwrap();
        assert_eq!(a.accept(cont(b"ab", true, 1)), Ok(None));
        assert!(matches!(a.accept(cont(b"cd", true, 1)), Err(LargeMessageError::OverLimit { .. })));
    }

    proptest! {
        #[test]
        fn prop_split_then_reassemble(body in prop::collection::vec(any::<u8>(), 0..600),
                                      chunk in 1usize..100, pieces in prop::collection::vec(1usize..50, 1..20)) {
            // Streaming splitter with arbitrary push sizes.
            let mut s = ContinuationSplitter::new(chunk, 3);
            let mut packets = Vec::new();
            let mut rest = &body[..];
            for p in pieces.iter().cycle() {
                if rest.is_empty() { break; }
                let n = (*p).min(rest.len());
                s.push(&rest[..n]);
                rest = &rest[n..];
                while let Some(c) = s.next_chunk() { packets.push(c); }
            }
            packets.push(s.finish(true, 42));
            let in_memory: Vec<_> = split_body(Bytes::from(body.clone()), chunk, 3, true, 42).collect();
            prop_assert_eq!(&packets, &in_memory);
            prop_assert_eq!(packets.iter().filter(|c| !c.continues).count(), 1);
            prop_assert!(!packets.last().unwrap().continues);
            prop_assert!(packets.iter().all(|c| c.chunk.len() <= chunk));
            prop_assert!(!packets.last().unwrap().chunk.is_empty() || body.is_empty());

            // Deliver the same chunks back as receive continuations.
            let mut a = LargeMessageAssembler::new(start(8, body.len() as i64), 1 << 20).unwrap();
            let mut done = None;
            for c in &packets {
                let r = a.accept(SessionReceiveContinuation { chunk: c.chunk.clone(), continues: c.continues, consumer_id: 8 }).unwrap();
                if r.is_some() { done = r; }
            }
            let m = done.unwrap();
            prop_assert_eq!(&m.message.body[..], &body[..]);
            prop_assert_eq!(m.consumer_id, 8);
            prop_assert_eq!(packets.last().unwrap().message_body_size, body.len() as i64);
        }
    }
}
