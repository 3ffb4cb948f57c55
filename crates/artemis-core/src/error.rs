//! The client's one error type, [`Error`], and what it carries: the broker's own
//! answer ([`BrokerError`], from an EXCEPTION packet), why a connection ended
//! ([`CloseReason`]) and what was wrong with the bytes ([`ProtocolError`]).
//!
//! `Error` is `Clone` so that one connection failure can be handed to every
//! pending call and every consumer (`fail_all`, style-examples §5.3). Callers
//! branch on predicates ([`Error::is_connection_lost`], [`Error::is_duplicate_id`],
//! …) or on [`Error::broker_code`], never on message text.

use std::fmt;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::{DecodeError, EncodeError, ExceptionType, LargeMessageError, ProtocolVersion};

/// Everything that can go wrong in this crate.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The TCP connection could not be opened.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The socket error.
        source: Arc<io::Error>,
    },
    /// TLS failed: the broker's certificate did not verify, the broker wanted a client certificate, the port does
    /// not speak TLS, a file of TLS material is unusable. The words name the broker and what failed.
    #[error(transparent)]
    Tls(crate::tls::TlsError),
    /// The connection is gone; every call on it, pending or later, fails with this.
    #[error("connection lost: {0}")]
    ConnectionLost(CloseReason),
    /// The broker refused the request with an EXCEPTION packet. The session stays
    /// usable (core-protocol.md §13), except that a failed commit has rolled back.
    #[error(transparent)]
    Broker(BrokerError),
    /// The bytes from the broker made no sense; the connection has been failed.
    #[error(transparent)]
    Protocol(ProtocolError),
    /// Something got no answer in time. For a blocking call the connection is
    /// failed with it, because the session's state is unknown afterwards
    /// (core-protocol.md §4.2); waiting for producer credits or a browse marker
    /// leaves the connection as it is.
    #[error("{op} got no answer within {after:?}")]
    Timeout {
        /// The operation, e.g. `"commit"`.
        op: &'static str,
        /// The timeout that expired.
        after: Duration,
    },
    /// The broker accepted none of the protocol versions offered (code 108 to each).
    #[error("the broker accepted none of the protocol versions {offered:?}")]
    VersionRejected {
        /// The versions tried, in order.
        offered: Vec<ProtocolVersion>,
    },
    /// An acknowledgement for a delivery that its consumer can no longer ack: the
    /// consumer closed, or a rollback returned the message to the queue. Refused
    /// before anything is sent, because such an ack would poison the session's
    /// transaction on the broker (core-protocol.md §15 item 19).
    #[error("delivery of message {message_id} from consumer {consumer_id} is stale (consumer closed or session rolled back)")]
    StaleDelivery {
        /// The consumer that received it.
        consumer_id: i64,
        /// The broker's message id.
        message_id: i64,
    },
    /// The session, consumer, browser or producer was closed (by this client, or
    /// for a consumer by the broker's DISCONNECT_CONSUMER).
    #[error("{what} is closed")]
    Closed {
        /// What was closed: `"session"`, `"consumer"`, …
        what: &'static str,
    },
    /// The caller asked for something the protocol cannot express.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A large message is bigger than the consumer may hold in memory
    /// ([`crate::ConsumerOptions::max_large_in_memory`]); receive it with
    /// [`crate::Consumer::recv_streaming`]. It stays unacknowledged.
    #[error("large message of {len} bytes exceeds the in-memory limit of {max} bytes")]
    TooLarge {
        /// The announced body size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Reading or writing a large message body from or to the caller's stream failed.
    #[error("large message body I/O failed: {0}")]
    BodyIo(Arc<io::Error>),
}

impl Error {
    /// `true` when the connection is gone (socket error, broker DISCONNECT, TTL
    /// expiry, protocol error, another call's timeout): open a new connection to go on.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, Error::ConnectionLost(_) | Error::Protocol(_) | Error::Connect { .. })
    }

    /// What failed in TLS, if TLS failed.
    pub fn tls_failure(&self) -> Option<&crate::tls::TlsFailure> {
        match self {
            Error::Tls(t) => Some(&t.failure),
            _ => None,
        }
    }

    /// `true` for a call that timed out (the connection was failed with it).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. } | Error::ConnectionLost(CloseReason::CallTimeout { .. }))
    }

    /// The broker's exception type, if the broker refused the request.
    pub fn broker_code(&self) -> Option<ExceptionType> {
        match self {
            Error::Broker(b) => Some(b.kind),
            _ => None,
        }
    }

    /// The broker's error, if it refused the request.
    pub fn broker_error(&self) -> Option<&BrokerError> {
        match self {
            Error::Broker(b) => Some(b),
            _ => None,
        }
    }

    /// `true` for bad credentials or a missing permission (code 105).
    pub fn is_not_authorized(&self) -> bool {
        self.broker_code() == Some(ExceptionType::SecurityException)
    }

    /// `true` when the named queue does not exist (code 100).
    pub fn is_no_such_queue(&self) -> bool {
        self.broker_code() == Some(ExceptionType::QueueDoesNotExist)
    }

    /// `true` when the address does not exist and may not be auto-created (code 106).
    pub fn is_no_such_address(&self) -> bool {
        self.broker_code() == Some(ExceptionType::AddressDoesNotExist)
    }

    /// `true` when a transaction was rejected whole because one of its messages
    /// carried an `_AMQ_DUPL_ID` the address had already seen (code 113, §8.5).
    pub fn is_duplicate_id(&self) -> bool {
        self.broker_code() == Some(ExceptionType::DuplicateIdRejected)
    }

    /// `true` when the address is full under the FAIL policy (code 210, §8.6).
    pub fn is_address_full(&self) -> bool {
        self.broker_code() == Some(ExceptionType::AddressFull)
    }

    /// `true` when a flow-controlled send waited its whole timeout for producer credits: the address is full and
    /// blocks its producers (the BLOCK policy withholds credits until it has room, §8.6).
    pub fn is_producer_blocked(&self) -> bool {
        matches!(self, Error::Timeout { op, .. } if *op == crate::producer::CREDITS_OP)
    }

    /// `true` when the queue already exists (code 101).
    pub fn is_queue_exists(&self) -> bool {
        self.broker_code() == Some(ExceptionType::QueueExists)
    }

    /// `true` when retrying the same work on a new connection may succeed: the
    /// connection was lost, or the broker was not ready (code 112).
    pub fn is_retryable(&self) -> bool {
        self.is_connection_lost()
            || self.is_timeout()
            // A broker that did not answer the handshake in time may answer the next; a certificate that does not
            // verify will not verify on a retry.
            || matches!(self.tls_failure(), Some(crate::tls::TlsFailure::HandshakeTimeout { .. }))
            || self.broker_code() == Some(ExceptionType::SessionCreationRejected)
            || self.is_address_full()
    }
}

/// An EXCEPTION packet's content (core-protocol.md §13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerError {
    /// The exception type (unknown codes map to `GenericException`).
    pub kind: ExceptionType,
    /// The raw code, kept even when unknown.
    pub code: i32,
    /// The broker's message, usually `AMQ<id>: …`.
    pub message: Option<String>,
    /// The operation that was refused, e.g. `"create consumer"`.
    pub op: &'static str,
}

impl BrokerError {
    /// The `AMQ229017`-style id at the start of the message, if any.
    pub fn amq_id(&self) -> Option<&str> {
        let msg = self.message.as_deref()?;
        let id = msg.split(':').next()?;
        (id.len() > 3 && id.starts_with("AMQ") && id[3..].bytes().all(|c| c.is_ascii_digit())).then_some(id)
    }
}

impl fmt::Display for BrokerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "broker refused {}: {}", self.op, self.kind)?;
        if ExceptionType::try_from_code(self.code).is_none() {
            write!(f, " (unknown code {})", self.code)?;
        }
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

impl std::error::Error for BrokerError {}

/// Why a connection ended.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum CloseReason {
    /// This client closed it.
    LocalClose,
    /// The broker sent DISCONNECT (shutdown, scale-down, redirect) or
    /// DISCONNECT_CONSUMER_KILL (core-protocol.md §6.3).
    Disconnected {
        /// The broker's node id, if it said.
        node_id: Option<String>,
        /// The DISCONNECT_V3 reason code (4 = shut down), if any.
        reason: Option<i8>,
    },
    /// Nothing at all arrived from the broker within the connection TTL (§6.2).
    TtlExpired {
        /// The TTL.
        ttl: Duration,
    },
    /// The socket closed or failed.
    Io(Arc<io::Error>),
    /// The broker's bytes could not be decoded.
    Protocol(ProtocolError),
    /// A blocking call timed out, so the connection's state became unknown.
    CallTimeout {
        /// The operation.
        op: &'static str,
        /// The timeout.
        after: Duration,
    },
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::LocalClose => f.write_str("closed by this client"),
            CloseReason::Disconnected { node_id, reason } => {
                write!(f, "the broker disconnected")?;
                if let Some(r) = reason {
                    write!(f, " (reason {r})")?;
                }
                if let Some(n) = node_id {
                    write!(f, " (node {n})")?;
                }
                Ok(())
            }
            CloseReason::TtlExpired { ttl } => write!(f, "nothing received from the broker within the {ttl:?} TTL"),
            CloseReason::Io(e) => write!(f, "socket error: {e}"),
            CloseReason::Protocol(p) => write!(f, "{p}"),
            CloseReason::CallTimeout { op, after } => write!(f, "{op} got no answer within {after:?}"),
        }
    }
}

/// Bytes from the broker that do not fit the protocol. The connection is failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("protocol error on channel {channel}, packet type {packet_type}: {kind}")]
pub struct ProtocolError {
    /// The channel the packet arrived on.
    pub channel: i64,
    /// Its type code.
    pub packet_type: i8,
    /// What was wrong.
    pub kind: ProtocolErrorKind,
}

/// What was wrong with a packet.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolErrorKind {
    /// The frame or packet did not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A packet could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A large message's chunks did not fit together.
    #[error(transparent)]
    LargeMessage(#[from] LargeMessageError),
    /// A well-formed packet that makes no sense here.
    #[error("unexpected packet: {0}")]
    Unexpected(String),
}

impl ProtocolError {
    pub(crate) fn unexpected(channel: i64, packet_type: i8, what: impl Into<String>) -> Self {
        ProtocolError { channel, packet_type, kind: ProtocolErrorKind::Unexpected(what.into()) }
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(code: i32) -> Error {
        Error::Broker(BrokerError {
            kind: ExceptionType::from_code(code),
            code,
            message: Some("AMQ229017: Queue x does not exist".into()),
            op: "create consumer",
        })
    }

    #[test]
    fn predicates_follow_broker_codes() {
        assert!(broker(100).is_no_such_queue());
        assert!(broker(105).is_not_authorized());
        assert!(broker(113).is_duplicate_id());
        assert!(broker(210).is_address_full());
        assert!(!broker(100).is_connection_lost());
        assert_eq!(broker(100).broker_error().and_then(BrokerError::amq_id), Some("AMQ229017"));
        let lost = Error::ConnectionLost(CloseReason::TtlExpired { ttl: Duration::from_secs(1) });
        assert!(lost.is_connection_lost() && lost.is_retryable() && lost.broker_code().is_none());
    }

    #[test]
    fn messages_name_the_operation_and_keep_the_broker_text() {
        let text = broker(100).to_string();
        assert!(text.contains("create consumer") && text.contains("AMQ229017"), "{text}");
    }
}
