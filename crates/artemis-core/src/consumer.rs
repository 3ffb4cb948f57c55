//! Consumers: receive with a timeout, individual acks, credits, close
//! (core-protocol.md §9, §11.1).
//!
//! **Credits** (§9.2): the consumer grants its window when it opens; the broker
//! charges every delivered frame's full size and stops at ≤ 0. As deliveries are
//! handed to the application (or dropped as stale), their sizes are counted and
//! given back in one SESS_FLOWTOKEN once they reach half the window — Java's
//! algorithm. The buffer between the connection task and the consumer is
//! therefore bounded by our own grant. Large messages give credits back chunk by
//! chunk, so a message bigger than the window never stalls.
//!
//! **Large messages** are received into memory by [`Consumer::recv`] (up to
//! [`ConsumerOptions::max_large_in_memory`]) or streamed chunk by chunk into an
//! `AsyncWrite` by [`Consumer::recv_streaming`], without holding the body.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::admin::QueueInfo;
use crate::connection::{unexpected, Command, ConsumerEvent, Matching};
use crate::error::{Error, ProtocolError, ProtocolErrorKind};
use crate::options::{ConsumerOptions, Window};
use crate::protocol::large::{ChunkProgress, LargeMessageAssembler, LargeMessageReceiver};
use crate::protocol::message::{CoreMessage, MessageHeaders};
use crate::protocol::packet::{
    SessionAcknowledge, SessionConsumerClose, SessionConsumerFlowCredit, SessionCreateConsumer,
    SessionIndividualAcknowledge, SessionReceiveContinuation,
};
use crate::protocol::{LargeMessageError, Packet, SimpleString};
use crate::session::SessionShared;

/// One message delivered to a consumer.
#[derive(Debug, Clone)]
pub struct Delivery {
    message: CoreMessage,
    delivery_count: i32,
    consumer_id: i64,
    generation: u64,
    large: bool,
    body_streamed: bool,
}

impl Delivery {
    /// The message (headers, properties, body).
    pub fn message(&self) -> &CoreMessage {
        &self.message
    }

    /// Takes the message.
    pub fn into_message(self) -> CoreMessage {
        self.message
    }

    /// The broker's message id (its journal id; not an identity across brokers, §8.2).
    pub fn message_id(&self) -> i64 {
        self.message.headers.message_id
    }

    /// 1 on a first delivery, more on a redelivery; a browser sees the stored
    /// count (typically 0).
    pub fn delivery_count(&self) -> i32 {
        self.delivery_count
    }

    /// JMSRedelivered: delivered before.
    pub fn is_redelivered(&self) -> bool {
        self.delivery_count > 1
    }

    /// It arrived as a large message (SESS_RECEIVE_LARGE_MSG + continuations).
    pub fn was_large(&self) -> bool {
        self.large
    }

    /// Its body went to the sink given to [`Consumer::recv_streaming`]; the
    /// message here has an empty body.
    pub fn body_streamed(&self) -> bool {
        self.body_streamed
    }

    /// The consumer that received it.
    pub fn consumer_id(&self) -> i64 {
        self.consumer_id
    }
}

/// Credit accounting (§9.2); all sizes are whole frames.
#[derive(Debug)]
pub(crate) struct Credits {
    /// −1 = unbounded.
    window: i32,
    /// Every credit granted: the initial window plus every FLOWTOKEN.
    granted: i64,
    /// Every frame the broker charged (forced-delivery markers are free).
    charged: i64,
    /// Consumed but not yet given back.
    to_return: i64,
}

impl Credits {
    fn new(window: i32) -> Self {
        Credits { window, granted: i64::from(window.max(0)), charged: 0, to_return: 0 }
    }

    fn charge(&mut self, wire_len: usize) {
        self.charged += wire_len as i64;
    }

    /// Counts a consumed frame; returns credits to send once half a window is due.
    fn consumed(&mut self, wire_len: usize) -> Option<i32> {
        if self.window < 0 {
            return None;
        }
        self.to_return += wire_len as i64;
        if self.to_return >= i64::from((self.window / 2).max(1)) {
            self.take()
        } else {
            None
        }
    }

    /// Everything consumed and not yet given back.
    fn take(&mut self) -> Option<i32> {
        if self.window < 0 || self.to_return <= 0 {
            return None;
        }
        let n = self.to_return.min(i64::from(i32::MAX));
        self.to_return -= n;
        self.granted += n;
        i32::try_from(n).ok()
    }

    /// `true` if, by the broker's count, the consumer still had credit: a browser
    /// that stops then stopped for lack of messages (§10).
    pub(crate) fn server_has_credit(&self) -> bool {
        self.window < 0 || self.granted - self.charged > 0
    }
}

/// A large message being received.
#[derive(Debug)]
enum Large {
    /// Assembled in memory.
    Memory { assembler: LargeMessageAssembler, generation: u64 },
    /// Written to the caller's sink as chunks arrive.
    Stream { receiver: LargeMessageReceiver, headers: MessageHeaders, delivery_count: i32, generation: u64 },
    /// Refused (stale or too big): its chunks are dropped, their credits given back.
    Skip { receiver: LargeMessageReceiver, generation: u64 },
}

impl Large {
    /// Whether the caller has none of it: a new start may replace it once a rollback made it stale (a stream has
    /// already written part of its body to the caller's sink, so it may not).
    fn held_only_here(&self) -> bool {
        matches!(self, Large::Memory { .. } | Large::Skip { .. })
    }

    fn generation(&self) -> u64 {
        match self {
            Large::Memory { generation, .. } | Large::Stream { generation, .. } | Large::Skip { generation, .. } => {
                *generation
            }
        }
    }
}

/// What one event amounted to.
#[derive(Debug)]
pub(crate) enum Step {
    /// A complete delivery.
    Delivery(Delivery),
    /// A chunk of a streamed large message, and the delivery when it was the last.
    Chunk { chunk: Bytes, wire_len: usize, done: Option<Delivery> },
    /// A forced-delivery marker (§10).
    Marker { sequence: i64, server_had_credit: bool },
    /// Nothing for the caller.
    Nothing,
}

/// A consumer on one queue.
#[derive(Debug)]
pub struct Consumer {
    session: Arc<SessionShared>,
    id: i64,
    queue: String,
    info: Option<QueueInfo>,
    pub(crate) events: mpsc::UnboundedReceiver<ConsumerEvent>,
    credits: Credits,
    browse_only: bool,
    closed: bool,
    large: Option<Large>,
    max_large_in_memory: u64,
    /// A delivery the broker counts as given to this consumer was never handed to the caller (a large message too
    /// big to hold): a cumulative acknowledgement would take it too, so [`Consumer::ack_through`] is refused.
    withheld: bool,
}

fn large_error(channel: i64, e: LargeMessageError) -> Error {
    Error::Protocol(ProtocolError {
        channel,
        packet_type: crate::protocol::packet_type::SESS_RECEIVE_CONTINUATION,
        kind: ProtocolErrorKind::LargeMessage(e),
    })
}

impl Consumer {
    pub(crate) async fn open(
        session: Arc<SessionShared>,
        id: i64,
        queue: &str,
        options: ConsumerOptions,
        browse_only: bool,
    ) -> Result<Consumer, Error> {
        let link = &session.link;
        let channel = session.channel;
        let (sink, events) = mpsc::unbounded_channel();
        // Routed before the request: deliveries may follow its answer at once.
        link.control(Command::Subscribe { channel, consumer_id: id, sink, generation: session.generation.clone() })
            .await?;
        let mut packet = SessionCreateConsumer::new(id, queue);
        packet.filter = options.filter.as_deref().map(SimpleString::new);
        packet.browse_only = browse_only;
        let op = if browse_only { "create browser" } else { "create consumer" };
        let answer = link.call(channel, packet, Matching::InOrder, op).await;
        let info = match answer {
            Ok(Packet::SessionQueueQueryResponseV3(r)) => r,
            Ok(other) => return Err(unexpected(channel, &other, op)),
            Err(e) => {
                let _ = link.control(Command::Unsubscribe { channel, consumer_id: id }).await;
                return Err(e);
            }
        };
        let window = match options.window {
            Window::Default => match info.default_consumer_window_size {
                Some(w) if w < 0 => -1,
                Some(w) => w.max(1),
                None => ConsumerOptions::DEFAULT_WINDOW_BYTES as i32,
            },
            Window::Bytes(n) => i32::try_from(n.max(1)).unwrap_or(i32::MAX),
            Window::Unbounded => -1,
        };
        // A new consumer has 0 credits: nothing arrives until this (§9.2, §15 item 8).
        link.send(channel, SessionConsumerFlowCredit { consumer_id: id, credits: window }).await?;
        Ok(Consumer {
            info: QueueInfo::from_response(&info, queue),
            queue: queue.to_string(),
            session,
            id,
            events,
            credits: Credits::new(window),
            browse_only,
            closed: false,
            large: None,
            max_large_in_memory: options.max_large_in_memory,
            withheld: false,
        })
    }

    /// The consumer's id within its session.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The queue name (or FQQN) it was opened on.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The queue as the broker described it when the consumer opened.
    pub fn queue_info(&self) -> Option<&QueueInfo> {
        self.info.as_ref()
    }

    fn check_usable(&self) -> Result<(), Error> {
        if self.closed {
            return Err(Error::Closed { what: "consumer" });
        }
        self.session.check_open()
    }

    pub(crate) fn channel(&self) -> i64 {
        self.session.channel
    }

    pub(crate) fn session(&self) -> &SessionShared {
        &self.session
    }

    pub(crate) fn large_in_progress(&self) -> bool {
        self.large.is_some()
    }

    /// Receives the next message, waiting at most `timeout`; `Ok(None)` when none
    /// arrived. Large messages are assembled in memory. Once a large message has
    /// started it is received to its end, each chunk bounded by the call timeout.
    pub async fn recv(&mut self, timeout: Duration) -> Result<Option<Delivery>, Error> {
        self.check_usable()?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.next_step(deadline, false).await? {
                None => return Ok(None),
                Some(Step::Delivery(d)) => return Ok(Some(d)),
                Some(Step::Chunk { .. }) => {
                    return Err(Error::InvalidArgument(
                        "a large message is being streamed: finish it with recv_streaming".into(),
                    ))
                }
                Some(Step::Marker { .. } | Step::Nothing) => {}
            }
        }
    }

    /// Like [`Consumer::recv`], but the body of a large message is written to
    /// `sink` as its chunks arrive (credits are given back after each write), so
    /// it is never held in memory; the delivery then has an empty body and
    /// [`Delivery::body_streamed`]. Regular messages come back as usual and
    /// nothing is written to `sink`.
    pub async fn recv_streaming<W: AsyncWrite + Unpin>(
        &mut self,
        timeout: Duration,
        sink: &mut W,
    ) -> Result<Option<Delivery>, Error> {
        self.check_usable()?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.next_step(deadline, true).await? {
                None => return Ok(None),
                Some(Step::Delivery(d)) => return Ok(Some(d)),
                Some(Step::Chunk { chunk, wire_len, done }) => {
                    sink.write_all(&chunk).await.map_err(|e| Error::BodyIo(Arc::new(e)))?;
                    self.consumed(wire_len).await?;
                    if let Some(d) = done {
                        sink.flush().await.map_err(|e| Error::BodyIo(Arc::new(e)))?;
                        return Ok(Some(d));
                    }
                }
                Some(Step::Marker { .. } | Step::Nothing) => {}
            }
        }
    }

    /// Waits for the next event (until `deadline`, or one call timeout per chunk
    /// while a large message is in progress) and interprets it.
    async fn next_step(&mut self, deadline: Instant, stream_large: bool) -> Result<Option<Step>, Error> {
        let event = if self.large.is_some() {
            let after = self.session.link.call_timeout();
            match tokio::time::timeout(after, self.events.recv()).await {
                Ok(e) => e,
                Err(_) => return Err(Error::Timeout { op: "receive large message", after }),
            }
        } else {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(e) => e,
                Err(_) => return Ok(None),
            }
        };
        self.step(event, stream_large).await.map(Some)
    }

    /// Gives back the credits of a consumed frame when half a window is due.
    pub(crate) async fn consumed(&mut self, wire_len: usize) -> Result<(), Error> {
        if let Some(credits) = self.credits.consumed(wire_len) {
            let packet = SessionConsumerFlowCredit { consumer_id: self.id, credits };
            self.session.link.send(self.session.channel, packet).await?;
        }
        Ok(())
    }

    /// Gives back every consumed frame's credits now.
    pub(crate) async fn flush_credits(&mut self) -> Result<(), Error> {
        if let Some(credits) = self.credits.take() {
            let packet = SessionConsumerFlowCredit { consumer_id: self.id, credits };
            self.session.link.send(self.session.channel, packet).await?;
        }
        Ok(())
    }

    fn is_stale(&self, generation: u64) -> bool {
        // A rollback returns what consumers hold, never what browsers saw.
        !self.browse_only && generation != self.session.current_generation()
    }

    fn delivery(&self, message: CoreMessage, delivery_count: i32, generation: u64, large: bool) -> Delivery {
        Delivery { message, delivery_count, consumer_id: self.id, generation, large, body_streamed: false }
    }

    /// Interprets one event from the connection task.
    pub(crate) async fn step(&mut self, event: Option<ConsumerEvent>, stream_large: bool) -> Result<Step, Error> {
        let channel = self.session.channel;
        match event {
            None => {
                self.closed = true;
                Err(self.session.ended())
            }
            Some(ConsumerEvent::Failed(e)) => {
                self.closed = true;
                Err(e)
            }
            Some(ConsumerEvent::Disconnected) => {
                self.closed = true;
                Err(Error::Closed { what: "consumer" })
            }
            Some(ConsumerEvent::Message { packet, wire_len, generation }) => {
                if let Some(sequence) = packet.message.headers.forced_delivery_sequence() {
                    tracing::debug!(
                        consumer_id = self.id,
                        sequence,
                        granted = self.credits.granted,
                        charged = self.credits.charged,
                        "forced-delivery marker"
                    );
                    // §10: the marker costs no credits and is never acknowledged.
                    return Ok(Step::Marker { sequence, server_had_credit: self.credits.server_has_credit() });
                }
                self.credits.charge(wire_len);
                self.consumed(wire_len).await?;
                if self.is_stale(generation) {
                    return Ok(Step::Nothing);
                }
                Ok(Step::Delivery(self.delivery(packet.message, packet.delivery_count, generation, false)))
            }
            Some(ConsumerEvent::LargeStart { packet, wire_len, generation }) => {
                self.credits.charge(wire_len);
                self.consumed(wire_len).await?;
                // A rollback makes the broker abandon a large delivery part-way and start it again (the Java client
                // clears its large-message state at a rollback): what is held of the abandoned one is dropped.
                if self.large.as_ref().is_some_and(|l| l.held_only_here() && self.is_stale(l.generation())) {
                    self.large = None;
                }
                if self.large.is_some() {
                    return Err(Error::Protocol(ProtocolError::unexpected(
                        channel,
                        crate::protocol::packet_type::SESS_RECEIVE_LARGE_MSG,
                        "a large message started before the previous one ended",
                    )));
                }
                let receiver = LargeMessageReceiver::new(&packet);
                if self.is_stale(generation) {
                    self.large = Some(Large::Skip { receiver, generation });
                    return Ok(Step::Nothing);
                }
                if stream_large {
                    self.large = Some(Large::Stream {
                        receiver,
                        headers: packet.headers,
                        delivery_count: packet.delivery_count,
                        generation,
                    });
                    return Ok(Step::Nothing);
                }
                let size = packet.large_message_size;
                match LargeMessageAssembler::new(packet, self.max_large_in_memory) {
                    Ok(assembler) => {
                        self.large = Some(Large::Memory { assembler, generation });
                        Ok(Step::Nothing)
                    }
                    Err(_) => {
                        self.large = Some(Large::Skip { receiver, generation });
                        self.withheld = true;
                        Err(Error::TooLarge { len: u64::try_from(size).unwrap_or(0), max: self.max_large_in_memory })
                    }
                }
            }
            Some(ConsumerEvent::LargeChunk { packet, wire_len }) => {
                self.credits.charge(wire_len);
                self.large_chunk(packet, wire_len).await
            }
        }
    }

    async fn large_chunk(&mut self, packet: SessionReceiveContinuation, wire_len: usize) -> Result<Step, Error> {
        let channel = self.session.channel;
        let Some(large) = self.large.take() else {
            return Err(Error::Protocol(ProtocolError::unexpected(
                channel,
                crate::protocol::packet_type::SESS_RECEIVE_CONTINUATION,
                "a continuation with no large message in progress",
            )));
        };
        match large {
            Large::Memory { mut assembler, generation } => {
                let done = assembler.accept(packet).map_err(|e| large_error(channel, e))?;
                self.consumed(wire_len).await?;
                match done {
                    Some(m) => Ok(Step::Delivery(self.delivery(m.message, m.delivery_count, generation, true))),
                    None => {
                        self.large = Some(Large::Memory { assembler, generation });
                        Ok(Step::Nothing)
                    }
                }
            }
            Large::Stream { mut receiver, headers, delivery_count, generation } => {
                let progress = receiver.accept(&packet).map_err(|e| large_error(channel, e))?;
                let done = if progress == ChunkProgress::Complete {
                    let message = CoreMessage { headers, body: Bytes::new() };
                    let mut d = self.delivery(message, delivery_count, generation, true);
                    d.body_streamed = true;
                    Some(d)
                } else {
                    self.large = Some(Large::Stream { receiver, headers, delivery_count, generation });
                    None
                };
                // Credits for this chunk are given back once the caller wrote it.
                Ok(Step::Chunk { chunk: packet.chunk, wire_len, done })
            }
            Large::Skip { mut receiver, generation } => {
                let progress = receiver.accept(&packet).map_err(|e| large_error(channel, e))?;
                self.consumed(wire_len).await?;
                if progress == ChunkProgress::More {
                    self.large = Some(Large::Skip { receiver, generation });
                }
                Ok(Step::Nothing)
            }
        }
    }

    /// Acknowledges exactly this delivery (SESS_INDIVIDUAL_ACKNOWLEDGE, §9.4). In
    /// a session with auto-commit acks it waits for the broker's answer; in a
    /// transacted one it joins the transaction (errors then surface at commit).
    /// A delivery of a closed consumer, or one returned by a rollback, is refused
    /// as [`Error::StaleDelivery`] without sending anything.
    pub async fn ack(&self, delivery: &Delivery) -> Result<(), Error> {
        self.check_ackable(delivery)?;
        let requires_response = self.ack_requires_response();
        let packet =
            SessionIndividualAcknowledge { consumer_id: self.id, message_id: delivery.message_id(), requires_response };
        self.send_ack(packet, requires_response).await
    }

    /// Acknowledges this delivery **and every delivery this consumer received before it** that is not acknowledged
    /// yet, in one packet (SESS_ACKNOWLEDGE, cumulative, §9.4): the broker acknowledges, in the order it delivered
    /// them, every message it gave this consumer up to and including this one. Deliveries come to the caller in
    /// that order, so this is for a caller that means every earlier one — a delivery received and left
    /// unacknowledged before this one is acknowledged with it. What arrived after it is not touched.
    /// Refused like [`Consumer::ack`], and as [`Error::InvalidArgument`] once the consumer withheld a delivery
    /// from its caller (a large message too big to hold), which the broker would count among the earlier ones.
    pub async fn ack_through(&self, delivery: &Delivery) -> Result<(), Error> {
        self.check_ackable(delivery)?;
        if self.withheld {
            return Err(Error::InvalidArgument(
                "a cumulative acknowledgement would also take a message this consumer could not hand out".into(),
            ));
        }
        let requires_response = self.ack_requires_response();
        let packet = SessionAcknowledge { consumer_id: self.id, message_id: delivery.message_id(), requires_response };
        self.send_ack(packet, requires_response).await
    }

    /// Refuses an acknowledgement the broker could not apply to this delivery of this consumer.
    fn check_ackable(&self, delivery: &Delivery) -> Result<(), Error> {
        if self.browse_only {
            return Err(Error::InvalidArgument("a browser does not acknowledge".into()));
        }
        if delivery.consumer_id != self.id || self.closed || delivery.generation != self.session.current_generation() {
            return Err(Error::StaleDelivery { consumer_id: delivery.consumer_id, message_id: delivery.message_id() });
        }
        self.session.check_open()
    }

    /// Acks applied at once are answered; acks that join a transaction surface their errors at commit.
    fn ack_requires_response(&self) -> bool {
        !self.session.options.transacted_acks
    }

    async fn send_ack(&self, packet: impl Into<Packet>, requires_response: bool) -> Result<(), Error> {
        let link = &self.session.link;
        if requires_response {
            link.call_null(self.session.channel, packet, Matching::InOrder, "acknowledge").await
        } else {
            link.send(self.session.channel, packet).await
        }
    }

    /// Closes the consumer (SESS_CONSUMER_CLOSE). Its delivered but unacked
    /// messages go back to the queue (§6.4).
    pub async fn close(mut self) -> Result<(), Error> {
        self.close_inner().await
    }

    pub(crate) async fn close_inner(&mut self) -> Result<(), Error> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let link = &self.session.link;
        let channel = self.session.channel;
        let packet = SessionConsumerClose { consumer_id: self.id };
        let result = link.call_null(channel, packet, Matching::InOrder, "close consumer").await;
        let _ = link.control(Command::Unsubscribe { channel, consumer_id: self.id }).await;
        match result {
            Err(e) if e.is_connection_lost() || matches!(e, Error::Closed { .. }) => Ok(()),
            other => other,
        }
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if self.closed || self.session.check_open().is_err() {
            return;
        }
        let link = &self.session.link;
        let channel = self.session.channel;
        // Never await in Drop: queue the close; its answer keeps the channel in order.
        if link.detached_call(channel, SessionConsumerClose { consumer_id: self.id }, "close consumer") {
            link.try_control(Command::Unsubscribe { channel, consumer_id: self.id });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Credits;

    #[test]
    fn credits_come_back_at_half_a_window() {
        let mut c = Credits::new(1000);
        c.charge(300);
        assert_eq!(c.consumed(300), None);
        c.charge(300);
        assert_eq!(c.consumed(300), Some(600));
        assert!(c.server_has_credit());
        // An overshooting frame: the broker's count drops to ≤ 0.
        c.charge(2000);
        assert!(!c.server_has_credit());
        assert_eq!(c.consumed(2000), Some(2000));
        assert!(c.server_has_credit());
        assert_eq!(c.take(), None);
    }

    #[test]
    fn unbounded_consumers_never_return_credits() {
        let mut c = Credits::new(-1);
        c.charge(10);
        assert_eq!(c.consumed(10), None);
        assert!(c.server_has_credit());
    }
}
