//! A Core connection: [`Connection`] is the handle; one spawned task
//! ([`task`]) owns the socket, and every other handle (sessions, consumers,
//! producers) talks to it through a bounded command channel ([`Link`]).
//!
//! | module | job |
//! |---|---|
//! | [`handshake`](self) | TCP, preamble, version negotiation, the first CREATESESSION (before the task) |
//! | `task` | the socket's owner: one `select!` loop |
//! | `command` | what handles ask of the task; what consumers get from it |
//! | `channels` | pending calls per channel, consumer routes, `fail_all` |
//! | `keepalive` | PING every TTL/2, the TTL watchdog |
//! | `stream` | the socket, plain TCP or TLS, and its halves |
//!
//! Every blocking call is bounded twice: the task fails the connection when a
//! call's deadline passes (the session's state is then unknown, §4.2), and the
//! handle itself gives up a little later in case the task is gone.

mod channels;
mod command;
mod handshake;
mod keepalive;
mod stream;
mod task;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

pub(crate) use command::{Command, ConsumerEvent, Matching, ProducerCreditEvent, Reply};

use crate::admin::{AddressInfo, QueueConfig, QueueInfo};
use crate::error::{CloseReason, Error, ProtocolError};
use crate::options::{ConnectOptions, SessionOptions};
use crate::protocol::packet::SessionClose;
use crate::protocol::{Packet, ProtocolVersion, FIRST_SESSION_CHANNEL, SESSION_CREATE_CHANNEL};
use crate::session::Session;

/// Commands queued towards the task before handles wait (backpressure). With
/// 100 KiB continuation chunks, at most ~1.6 MiB of a streamed large message
/// waits here (plus the task's 1 MiB write buffer).
const COMMAND_QUEUE: usize = 16;

/// Extra time a handle waits beyond the call timeout before giving up on the
/// task itself (the task normally answers with the timeout first).
const HANDLE_GRACE: Duration = Duration::from_secs(2);

/// State every handle of one connection shares.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The announced version that shapes every packet (§3).
    pub version: ProtocolVersion,
    /// CREATESESSION_RESP's `serverVersion`.
    pub server_version: i32,
    /// The options the connection was opened with (credentials for new sessions).
    pub options: ConnectOptions,
    /// Set once, by the task, when the connection ends.
    pub closed: OnceLock<CloseReason>,
    next_channel: AtomicI64,
    next_correlation: AtomicI64,
    open_sessions: Mutex<BTreeSet<i64>>,
}

/// What a handle holds: the command channel and the shared state.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    tx: mpsc::Sender<Command>,
    shared: Arc<Shared>,
}

impl Link {
    /// The shared state.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The announced protocol version.
    pub fn version(&self) -> ProtocolVersion {
        self.shared.version
    }

    /// The bound on blocking calls.
    pub fn call_timeout(&self) -> Duration {
        self.shared.options.call_timeout
    }

    /// The error for a connection that is gone.
    pub fn lost(&self) -> Error {
        Error::ConnectionLost(self.shared.closed.get().cloned().unwrap_or(CloseReason::LocalClose))
    }

    /// `true` once the connection has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.get().is_some() || self.tx.is_closed()
    }

    /// A fresh correlation id (§4.2: any value but −1 works; the broker echoes it).
    pub fn next_correlation_id(&self) -> i64 {
        self.shared.next_correlation.fetch_add(1, Ordering::Relaxed)
    }

    async fn submit(&self, cmd: Command, op: &'static str) -> Result<(), Error> {
        if let Some(reason) = self.shared.closed.get() {
            return Err(Error::ConnectionLost(reason.clone()));
        }
        // Fast path: a free slot needs no timer. Registering one per packet cost a timer-wheel entry and a clock
        // read for every send and ack (docs/BENCHMARKS.md, "Core client"). The queue is fair: while a handle
        // waits below, its freed slots go to it, so this cannot overtake it.
        let cmd = match self.tx.try_send(cmd) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(self.lost()),
            Err(mpsc::error::TrySendError::Full(cmd)) => cmd,
        };
        match tokio::time::timeout(self.call_timeout(), self.tx.send(cmd)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(self.lost()),
            // The task takes no commands while the socket accepts no bytes.
            Err(_) => Err(Error::Timeout { op, after: self.call_timeout() }),
        }
    }

    /// Queues a packet that gets no response.
    pub async fn send(&self, channel: i64, packet: impl Into<Packet>) -> Result<(), Error> {
        let packet = packet.into();
        self.submit(Command::Send { channel, packet }, "send a packet").await
    }

    /// Queues a command that is not a packet.
    pub async fn control(&self, cmd: Command) -> Result<(), Error> {
        self.submit(cmd, "queue a command").await
    }

    /// Queues a command without waiting (from `Drop`); `false` if it could not be.
    pub fn try_control(&self, cmd: Command) -> bool {
        self.tx.try_send(cmd).is_ok()
    }

    /// Starts a blocking call and returns where its answer will arrive.
    pub async fn start_call(
        &self,
        channel: i64,
        packet: impl Into<Packet>,
        matching: Matching,
        op: &'static str,
    ) -> Result<oneshot::Receiver<Reply>, Error> {
        let (reply, rx) = oneshot::channel();
        let cmd = Command::Call { channel, packet: packet.into(), matching, op, timeout: self.call_timeout(), reply };
        self.submit(cmd, op).await?;
        Ok(rx)
    }

    /// Waits for the answer of a started call.
    pub async fn finish_call(&self, rx: oneshot::Receiver<Reply>, op: &'static str) -> Result<Packet, Error> {
        let after = self.call_timeout();
        match tokio::time::timeout(after + HANDLE_GRACE, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Err(self.lost()),
            Err(_) => Err(Error::Timeout { op, after }),
        }
    }

    /// A blocking call: sends `packet`, waits for its answer (an EXCEPTION comes
    /// back as `Err(Error::Broker)`).
    pub async fn call(
        &self,
        channel: i64,
        packet: impl Into<Packet>,
        matching: Matching,
        op: &'static str,
    ) -> Result<Packet, Error> {
        let rx = self.start_call(channel, packet, matching, op).await?;
        self.finish_call(rx, op).await
    }

    /// A blocking call whose answer must be NULL_RESPONSE.
    pub async fn call_null(
        &self,
        channel: i64,
        packet: impl Into<Packet>,
        matching: Matching,
        op: &'static str,
    ) -> Result<(), Error> {
        let answer = self.call(channel, packet, matching, op).await?;
        expect_null(channel, answer, op)
    }

    /// Queues a blocking call whose answer nobody awaits (a close from `Drop`):
    /// it keeps the channel's answers in order. `false` if it could not be queued.
    pub fn detached_call(&self, channel: i64, packet: impl Into<Packet>, op: &'static str) -> bool {
        let (reply, _) = oneshot::channel();
        self.try_control(Command::Call {
            channel,
            packet: packet.into(),
            matching: Matching::InOrder,
            op,
            timeout: self.call_timeout(),
            reply,
        })
    }

    /// Allocates the channel of a new session.
    pub fn next_channel(&self) -> i64 {
        self.shared.next_channel.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a session as open (closed by [`Connection::close`]).
    pub fn session_opened(&self, channel: i64) {
        self.shared.open_sessions.lock().unwrap_or_else(|e| e.into_inner()).insert(channel);
    }

    /// Records a session as closed.
    pub fn session_closed(&self, channel: i64) {
        self.shared.open_sessions.lock().unwrap_or_else(|e| e.into_inner()).remove(&channel);
    }
}

/// Checks that a blocking call was answered with NULL_RESPONSE.
pub(crate) fn expect_null(channel: i64, answer: Packet, op: &'static str) -> Result<(), Error> {
    match answer {
        Packet::NullResponse(_) => Ok(()),
        other => Err(unexpected(channel, &other, op)),
    }
}

/// The error for an answer of the wrong type.
pub(crate) fn unexpected(channel: i64, answer: &Packet, op: &'static str) -> Error {
    Error::Protocol(ProtocolError::unexpected(
        channel,
        answer.packet_type(),
        format!("{} in answer to {op}", answer.type_name()),
    ))
}

/// An open connection to one broker.
///
/// `connect` authenticates by creating a first session, which the connection
/// keeps for its own queries ([`Connection::queue_query`] and the other admin
/// calls). Dropping every handle closes the socket; [`Connection::close`] closes
/// the sessions first.
#[derive(Debug)]
pub struct Connection {
    link: Link,
    control: Session,
}

impl Connection {
    /// Connects, negotiates the protocol version (announcing the first of
    /// `opts.versions`, then the next while the broker answers code 108) and logs
    /// in. Wrong credentials give `Error::Broker` with `is_not_authorized()`.
    pub async fn connect(opts: &ConnectOptions) -> Result<Connection, Error> {
        let channel = FIRST_SESSION_CHANNEL;
        let control_opts = SessionOptions::auto_commit();
        let est = handshake::establish(opts, control_opts, channel).await?;
        tracing::debug!(
            addr = %opts.addr(),
            version = est.version.get(),
            server_version = est.server_version,
            "connected"
        );
        let shared = Arc::new(Shared {
            version: est.version,
            server_version: est.server_version,
            options: opts.clone(),
            closed: OnceLock::new(),
            next_channel: AtomicI64::new(channel + 1),
            next_correlation: AtomicI64::new(1),
            open_sessions: Mutex::new(BTreeSet::new()),
        });
        let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
        let task = task::Task::new(est.stream, est.leftover, rx, shared.clone());
        tokio::spawn(task.run());
        let link = Link { tx, shared };
        link.session_opened(channel);
        let control = Session::new(link.clone(), channel, control_opts);
        Ok(Connection { link, control })
    }

    /// The protocol version this connection announced and uses.
    pub fn protocol_version(&self) -> ProtocolVersion {
        self.link.version()
    }

    /// The broker's `serverVersion` from CREATESESSION_RESP (e.g. 136 for 2.40).
    pub fn server_version(&self) -> i32 {
        self.link.shared().server_version
    }

    /// Creates a session (CREATESESSION on channel 1, §6.1). Sessions start
    /// stopped: call [`Session::start`] before consuming (§15 item 7).
    pub async fn create_session(&self, opts: SessionOptions) -> Result<Session, Error> {
        let channel = self.link.next_channel();
        let packet = handshake::create_session_packet(&self.link.shared().options, opts, channel, self.link.version());
        let op = "create session";
        let answer = self.link.call(SESSION_CREATE_CHANNEL, packet, Matching::InOrder, op).await?;
        match answer {
            Packet::CreateSessionResponse(_) => {
                self.link.session_opened(channel);
                Ok(Session::new(self.link.clone(), channel, opts))
            }
            other => Err(unexpected(SESSION_CREATE_CHANNEL, &other, op)),
        }
    }

    /// Queue query on the connection's own session; see [`Session::queue_query`].
    pub async fn queue_query(&self, queue: &str) -> Result<Option<QueueInfo>, Error> {
        self.control.queue_query(queue).await
    }

    /// Address query; see [`Session::binding_query`].
    pub async fn binding_query(&self, address: &str) -> Result<AddressInfo, Error> {
        self.control.binding_query(address).await
    }

    /// Creates a queue; see [`Session::create_queue`].
    pub async fn create_queue(&self, config: &QueueConfig) -> Result<(), Error> {
        self.control.create_queue(config).await
    }

    /// Deletes a queue; see [`Session::delete_queue`].
    pub async fn delete_queue(&self, queue: &str) -> Result<(), Error> {
        self.control.delete_queue(queue).await
    }

    /// `true` once the connection has ended (for any reason).
    pub fn is_closed(&self) -> bool {
        self.link.is_closed()
    }

    /// How many sessions are open on this connection, its own (for queries) included: a caller that keeps a
    /// connection for reuse can see that every session it created was closed.
    pub fn open_session_count(&self) -> usize {
        self.link.shared.open_sessions.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.link.shared().closed.get().cloned()
    }

    /// Closes every open session (SESS_CLOSE; the broker rolls back what was not
    /// committed), then the socket. Pending calls fail with
    /// [`CloseReason::LocalClose`].
    pub async fn close(self) -> Result<(), Error> {
        let channels: Vec<i64> = {
            let open = self.link.shared.open_sessions.lock().unwrap_or_else(|e| e.into_inner());
            open.iter().copied().collect()
        };
        let mut first_error = None;
        if !self.link.is_closed() {
            for channel in channels {
                let r = self.link.call_null(channel, SessionClose, Matching::InOrder, "close session").await;
                if let Err(e) = r {
                    first_error.get_or_insert(e);
                }
                self.link.session_closed(channel);
            }
        }
        self.control.mark_closed();
        let (reply, done) = oneshot::channel();
        if self.link.control(Command::Close { reply }).await.is_ok() {
            let _ = tokio::time::timeout(self.link.call_timeout(), done).await;
        }
        match first_error {
            Some(e) if !e.is_connection_lost() => Err(e),
            _ => Ok(()),
        }
    }
}
