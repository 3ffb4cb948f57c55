//! The connection task: the one owner of the socket (style-examples §5.2).
//!
//! One `select!` over four things: bytes from the broker, writing queued frames,
//! commands from handles, and a housekeeping tick (PING every TTL/2, the TTL
//! watchdog, blocking-call deadlines). Writes never block the loop: frames are
//! queued in a buffer and written as the socket accepts them; while that buffer
//! is above [`HIGH_WATER`] no new commands are taken, so the bounded command
//! channel pushes back on producers (large messages stream with bounded memory).
//!
//! When the loop ends, for whatever reason, the reason is stored for every handle
//! to see and [`Channels::fail_all`] hands the same error to every pending call
//! and every consumer: nothing is left waiting.
//!
//! | packet | handled here |
//! |---|---|
//! | PING (10) | the echo only feeds the watchdog; never answered (§15 item 11) |
//! | DISCONNECT (11/124/−19), DISCONNECT_CONSUMER_KILL (13) | the connection ends with [`CloseReason::Disconnected`] |
//! | NULL_RESPONSE, EXCEPTION, CREATESESSION_RESP, query answers | matched to the waiting call (§4.2) |
//! | SESS_RECEIVE_MSG / _LARGE_MSG / _CONTINUATION, DISCONNECT_CONSUMER | routed to the consumer |
//! | SESS_PRODUCER_CREDITS / _FAIL_CREDITS | routed to the session's producers |
//! | anything else | logged and skipped (§1.3) |

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::channels::{Channels, Matched, Pending};
use super::command::{Command, ConsumerEvent, ProducerCreditEvent};
use super::keepalive::{Due, Keepalive};
use super::stream::{Reader, Stream, Writer};
use super::Shared;
use crate::error::{CloseReason, Error, ProtocolError, ProtocolErrorKind};
use crate::protocol::packet::Ping;
use crate::protocol::{encode_frame, Frame, FrameDecoder, Packet, ProtocolVersion, PING_CHANNEL};

/// Above this many queued outgoing bytes, no new commands are taken.
pub(crate) const HIGH_WATER: usize = 1024 * 1024;

/// At most this many further commands are taken after the one that woke the task (see `Task::more_commands`).
const BURST: usize = 64;

/// How often deadlines, the watchdog and the ping timer are checked.
const TICK: Duration = Duration::from_millis(100);

/// The task's state.
pub(crate) struct Task {
    reader: Reader,
    writer: Writer,
    rbuf: BytesMut,
    wbuf: BytesMut,
    decoder: FrameDecoder,
    version: ProtocolVersion,
    commands: mpsc::Receiver<Command>,
    channels: Channels,
    keepalive: Keepalive,
    shared: Arc<Shared>,
    closing: Option<oneshot::Sender<()>>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").field("version", &self.version).finish_non_exhaustive()
    }
}

fn lost_io(kind: io::ErrorKind, what: &str) -> CloseReason {
    CloseReason::Io(Arc::new(io::Error::new(kind, what.to_string())))
}

impl Task {
    /// A task over an established socket.
    pub fn new(stream: Stream, leftover: BytesMut, commands: mpsc::Receiver<Command>, shared: Arc<Shared>) -> Self {
        let (reader, writer) = stream.into_split();
        let opts = &shared.options;
        Task {
            reader,
            writer,
            rbuf: leftover,
            wbuf: BytesMut::with_capacity(64 * 1024),
            decoder: FrameDecoder::new(opts.max_frame_len),
            version: shared.version,
            commands,
            channels: Channels::default(),
            keepalive: Keepalive::new(opts.connection_ttl, Instant::now()),
            shared,
            closing: None,
        }
    }

    /// Runs until the connection ends, then fails everything still waiting.
    pub async fn run(mut self) {
        // Frames read together with CREATESESSION_RESP.
        let reason = match self.drain_frames() {
            Ok(()) => self.run_loop().await,
            Err(reason) => reason,
        };
        match &reason {
            CloseReason::LocalClose => tracing::debug!("connection closed"),
            other => tracing::warn!(reason = %other, "connection lost"),
        }
        let error = Error::ConnectionLost(reason.clone());
        // Store the reason before anything is failed, so that a handle seeing a
        // closed channel always finds it.
        let _ = self.shared.closed.set(reason);
        self.channels.fail_all(&error, Instant::now());
        self.commands.close();
        while let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                Command::Call { reply, .. } => {
                    let _ = reply.send(Err(error.clone()));
                }
                Command::Subscribe { sink, .. } => {
                    let _ = sink.send(ConsumerEvent::Failed(error.clone()));
                }
                Command::ProducerCredits { sink, .. } => {
                    let _ = sink.send(ProducerCreditEvent::Failed(error.clone()));
                }
                Command::Close { reply } => {
                    let _ = reply.send(());
                }
                Command::Send { .. } | Command::Unsubscribe { .. } | Command::ForgetChannel { .. } => {}
            }
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.writer.shutdown()).await;
        if let Some(reply) = self.closing.take() {
            let _ = reply.send(());
        }
    }

    async fn run_loop(&mut self) -> CloseReason {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if self.closing.is_some() && self.wbuf.is_empty() {
                let _ = self.writer.flush().await;
                return CloseReason::LocalClose;
            }
            let accept_commands = self.closing.is_none() && self.wbuf.len() < HIGH_WATER;
            tokio::select! {
                read = self.reader.read_buf(&mut self.rbuf) => match read {
                    Ok(0) => return lost_io(io::ErrorKind::UnexpectedEof, "the broker closed the connection"),
                    Ok(_) => {
                        self.keepalive.received(Instant::now());
                        if let Err(reason) = self.drain_frames() {
                            return reason;
                        }
                    }
                    Err(e) => return CloseReason::Io(Arc::new(e)),
                },
                written = self.writer.write_buf(&mut self.wbuf), if !self.wbuf.is_empty() => {
                    if let Err(e) = written {
                        return CloseReason::Io(Arc::new(e));
                    }
                }
                cmd = self.commands.recv(), if accept_commands => match cmd {
                    Some(cmd) => {
                        self.command(cmd);
                        self.more_commands();
                    }
                    // Every handle is gone: close as if asked to.
                    None => self.closing = Some(oneshot::channel().0),
                },
                _ = tick.tick() => {
                    if let Some(reason) = self.housekeeping() {
                        return reason;
                    }
                }
            }
        }
    }

    /// Takes the commands already queued (at most [`BURST`], and not past the write buffer's high-water mark), so
    /// that a burst of sends or acks goes out in one write and frees the queue's slots at once: one wake-up of
    /// the waiting handle per burst rather than one per packet (docs/BENCHMARKS.md, "Core client"). Nothing
    /// waits here: what is not queued yet goes with a later write; the bound keeps a fast producer, refilling
    /// the queue from another thread, from holding back the write and the reads.
    fn more_commands(&mut self) {
        for _ in 0..BURST {
            if self.closing.is_some() || self.wbuf.len() >= HIGH_WATER {
                return;
            }
            match self.commands.try_recv() {
                Ok(cmd) => self.command(cmd),
                // Empty, or every handle gone (the next `recv` sees that and closes).
                Err(_) => return,
            }
        }
    }

    fn housekeeping(&mut self) -> Option<CloseReason> {
        let now = Instant::now();
        // `keepalive: false` is the test seam of `ConnectOptions::keepalive`: no pings, no watchdog.
        let due = if self.shared.options.keepalive { self.keepalive.poll(now) } else { Due::Nothing };
        match due {
            Due::Nothing => {}
            Due::Ping => {
                let ttl = i64::try_from(self.keepalive.ttl().as_millis()).unwrap_or(i64::MAX);
                self.encode(PING_CHANNEL, &Ping { connection_ttl: ttl }.into());
            }
            Due::Expired => return Some(CloseReason::TtlExpired { ttl: self.keepalive.ttl() }),
        }
        self.channels.expired(now).map(|(op, after)| CloseReason::CallTimeout { op, after })
    }

    fn encode(&mut self, channel: i64, packet: &Packet) -> bool {
        match encode_frame(channel, packet, self.version, &mut self.wbuf) {
            Ok(_) => true,
            Err(e) => {
                tracing::error!(channel, packet = packet.type_name(), error = %e, "cannot encode packet");
                false
            }
        }
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Send { channel, packet } => {
                self.encode(channel, &packet);
            }
            Command::Call { channel, packet, matching, op, timeout, reply } => {
                if !self.encode(channel, &packet) {
                    let _ = reply.send(Err(Error::InvalidArgument(format!("{op}: the packet cannot be encoded"))));
                    return;
                }
                let pending = Pending { op, timeout, deadline: Instant::now() + timeout, reply };
                self.channels.add_call(channel, matching, pending);
            }
            Command::Subscribe { channel, consumer_id, sink, generation } => {
                self.channels.subscribe(channel, consumer_id, sink, generation)
            }
            Command::Unsubscribe { channel, consumer_id } => self.channels.unsubscribe(channel, consumer_id),
            Command::ProducerCredits { channel, sink } => self.channels.producer_credits(channel, sink),
            Command::ForgetChannel { channel } => self.channels.forget(channel),
            Command::Close { reply } => self.closing = Some(reply),
        }
    }

    fn drain_frames(&mut self) -> Result<(), CloseReason> {
        loop {
            let frame = self.decoder.decode(&mut self.rbuf).map_err(|e| {
                CloseReason::Protocol(ProtocolError { channel: -1, packet_type: 0, kind: ProtocolErrorKind::Decode(e) })
            })?;
            match frame {
                Some(frame) => self.frame(frame)?,
                None => return Ok(()),
            }
        }
    }

    fn frame(&mut self, frame: Frame) -> Result<(), CloseReason> {
        let channel = frame.header.channel_id;
        let packet_type = frame.header.packet_type;
        let wire_len = frame.wire_len();
        let packet = frame.decode_packet(self.version).map_err(|e| {
            CloseReason::Protocol(ProtocolError { channel, packet_type, kind: ProtocolErrorKind::Decode(e) })
        })?;
        let node = |n: Option<crate::protocol::SimpleString>| n.map(|s| s.to_string_lossy());
        match packet {
            Packet::Ping(_) => {}
            Packet::Disconnect(d) => return Err(CloseReason::Disconnected { node_id: node(d.node_id), reason: None }),
            Packet::DisconnectV2(d) => {
                return Err(CloseReason::Disconnected { node_id: node(d.node_id), reason: None })
            }
            Packet::DisconnectV3(d) => {
                return Err(CloseReason::Disconnected { node_id: node(d.node_id), reason: Some(d.reason.0) })
            }
            Packet::DisconnectConsumerWithKill(d) => {
                return Err(CloseReason::Disconnected { node_id: node(d.node_id), reason: None })
            }
            p @ (Packet::NullResponse(_)
            | Packet::ExceptionResponse(_)
            | Packet::CreateSessionResponse(_)
            | Packet::SessionQueueQueryResponseV3(_)
            | Packet::SessionBindingQueryResponseV4(_)
            | Packet::SessionBindingQueryResponseV5(_)) => {
                let name = p.type_name();
                let detail = match &p {
                    Packet::ExceptionResponse(e) => format!("{} {:?}", e.code, e.message),
                    _ => String::new(),
                };
                if self.channels.answer(channel, p) == Matched::Unsolicited {
                    // §4.2: an EXCEPTION may come with nothing pending; Java logs it.
                    tracing::warn!(channel, packet = name, detail, "response with no call waiting for it");
                }
            }
            Packet::SessionReceiveMessage(packet) => {
                let consumer_id = packet.consumer_id;
                let generation = self.channels.generation(channel, consumer_id).unwrap_or(0);
                let event = ConsumerEvent::Message { packet, wire_len, generation };
                self.route(channel, consumer_id, event);
            }
            Packet::SessionReceiveLargeMessage(packet) => {
                let consumer_id = packet.consumer_id;
                let generation = self.channels.generation(channel, consumer_id).unwrap_or(0);
                let event = ConsumerEvent::LargeStart { packet, wire_len, generation };
                self.route(channel, consumer_id, event);
            }
            Packet::SessionReceiveContinuation(packet) => {
                let consumer_id = packet.consumer_id;
                self.route(channel, consumer_id, ConsumerEvent::LargeChunk { packet, wire_len });
            }
            Packet::DisconnectConsumer(d) => self.route(channel, d.consumer_id, ConsumerEvent::Disconnected),
            Packet::SessionProducerCredits(c) => self.channels.route_producer_credits(
                channel,
                ProducerCreditEvent::Granted { address: c.address.to_string_lossy(), credits: c.credits },
            ),
            Packet::SessionProducerCreditsFail(c) => self
                .channels
                .route_producer_credits(channel, ProducerCreditEvent::Refused { address: c.address.to_string_lossy() }),
            other => tracing::debug!(channel, packet = other.type_name(), "skipped packet"),
        }
        Ok(())
    }

    fn route(&mut self, channel: i64, consumer_id: i64, event: ConsumerEvent) {
        if !self.channels.route(channel, consumer_id, event) {
            tracing::debug!(channel, consumer_id, "delivery for a consumer that is gone; dropped");
        }
    }
}
