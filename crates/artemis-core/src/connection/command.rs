//! What handles ask of the connection task ([`Command`]) and what the task hands
//! to consumers ([`ConsumerEvent`]). Handles never touch the socket; they send a
//! command and, for a blocking call, wait on its `oneshot`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::error::Error;
use crate::protocol::packet::{SessionReceiveContinuation, SessionReceiveLargeMessage, SessionReceiveMessage};
use crate::protocol::Packet;

/// The answer to a blocking call: the response packet (never an EXCEPTION; those
/// become `Err(Error::Broker)`), or the error that ended the call.
pub(crate) type Reply = Result<Packet, Error>;

/// How the task matches a blocking call's response (core-protocol.md §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Matching {
    /// By order: the next uncorrelated response on the channel (NULL_RESPONSE with
    /// correlation −1, an EXCEPTION without one, a query answer, CREATESESSION_RESP).
    InOrder,
    /// By the correlation id the request carries (SESS_SEND, the last
    /// SESS_SEND_CONTINUATION, SESS_COMMIT V2), so these may be pipelined.
    Correlated(i64),
}

/// One request from a handle to the connection task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Write a packet that gets no response.
    Send {
        /// The channel.
        channel: i64,
        /// The packet.
        packet: Packet,
    },
    /// Write a packet and route its response to `reply`. The reply may be
    /// dropped by the caller (a close queued from `Drop`): the call stays in the
    /// channel's order so that later responses still match.
    Call {
        /// The channel.
        channel: i64,
        /// The packet.
        packet: Packet,
        /// How its response is recognised.
        matching: Matching,
        /// For error messages and timeouts.
        op: &'static str,
        /// The call fails the connection after this long without an answer.
        timeout: Duration,
        /// Where the answer goes.
        reply: oneshot::Sender<Reply>,
    },
    /// Route deliveries for `consumer_id` on `channel` to `sink`, stamping each
    /// with the session's current rollback generation. Sent before the
    /// SESS_CREATECONSUMER that makes deliveries start.
    Subscribe {
        /// The session channel.
        channel: i64,
        /// The consumer.
        consumer_id: i64,
        /// Where its deliveries go. Unbounded: the consumer's credits bound it.
        sink: mpsc::UnboundedSender<ConsumerEvent>,
        /// The session's rollback generation (see [`crate::session`]).
        generation: Arc<AtomicU64>,
    },
    /// Stop routing deliveries for a consumer (after its close).
    Unsubscribe {
        /// The session channel.
        channel: i64,
        /// The consumer.
        consumer_id: i64,
    },
    /// Route SESS_PRODUCER_CREDITS / _FAIL_CREDITS of a session to `sink`.
    ProducerCredits {
        /// The session channel.
        channel: i64,
        /// Where they go.
        sink: mpsc::UnboundedSender<ProducerCreditEvent>,
    },
    /// Forget a closed session's channel: its consumers see their stream end.
    ForgetChannel {
        /// The channel.
        channel: i64,
    },
    /// Flush what is queued, close the socket, fail everything still pending
    /// with [`crate::CloseReason::LocalClose`], then answer.
    Close {
        /// Answered once the task is done.
        reply: oneshot::Sender<()>,
    },
}

/// What a consumer receives from the task.
#[derive(Debug)]
pub(crate) enum ConsumerEvent {
    /// SESS_RECEIVE_MSG.
    Message {
        /// The packet.
        packet: SessionReceiveMessage,
        /// Its frame size, the unit of credits (§9.2).
        wire_len: usize,
        /// The session's rollback generation when it arrived.
        generation: u64,
    },
    /// SESS_RECEIVE_LARGE_MSG.
    LargeStart {
        /// The packet.
        packet: SessionReceiveLargeMessage,
        /// Its frame size.
        wire_len: usize,
        /// The rollback generation.
        generation: u64,
    },
    /// SESS_RECEIVE_CONTINUATION.
    LargeChunk {
        /// The packet.
        packet: SessionReceiveContinuation,
        /// Its frame size.
        wire_len: usize,
    },
    /// DISCONNECT_CONSUMER: the broker closed this consumer.
    Disconnected,
    /// The connection failed.
    Failed(Error),
}

/// Producer credits granted or refused by the broker for an address (§8.6).
#[derive(Debug, Clone)]
pub(crate) enum ProducerCreditEvent {
    /// SESS_PRODUCER_CREDITS.
    Granted {
        /// The address, as the broker named it.
        address: String,
        /// Bytes granted.
        credits: i32,
    },
    /// SESS_PRODUCER_FAIL_CREDITS: the address is full under the FAIL policy.
    Refused {
        /// The address.
        address: String,
    },
    /// The connection failed.
    Failed(Error),
}
