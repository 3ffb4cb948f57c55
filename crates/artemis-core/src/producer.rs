//! Producers: send a message to an address or an FQQN `address::queue`
//! (core-protocol.md §8, §11.2).
//!
//! - In a session with auto-commit sends, [`Producer::send`] asks for the
//!   broker's answer (`requiresResponse`) with a correlation id and waits: the
//!   message is routed and stored when it returns. [`Producer::send_pipelined`]
//!   returns at once with a [`SendConfirmation`] to await later, so many sends
//!   can be in flight (correlation ids, version ≥ 130, §4.2).
//! - In a transacted session, `send` asks for no answer: a failed send marks the
//!   transaction rollback-only and [`crate::Session::commit`] reports it (§8.4).
//! - A body larger than `minLargeMessageSize` (Java's rule, `4 + len > min`) goes
//!   as a large message: SESS_SEND_LARGE, then SESS_SEND_CONTINUATION chunks; only
//!   the last asks for the answer, where routing errors surface (§11.2).
//!   [`Producer::send_large_from`] streams a body from an `AsyncRead`.
//! - A compressed large message (`_AMQ_LARGE_COMPRESSED`) passes through as is:
//!   its chunks are sent unchanged and the announced body size is the original
//!   `_AMQ_LARGE_SIZE` (§11.3).
//!
//! Beware the silent drops of §8.3: a send to an FQQN whose queue is not on the
//! address, or to a missing address without `_AMQ_ROUTING_TYPE`, is confirmed
//! and dropped. Check the target with a queue query first.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;

use crate::connection::{expect_null, Link, Matching, ProducerCreditEvent, Reply};
use crate::error::{BrokerError, Error};
use crate::protocol::large::{is_large, split_body, ContinuationSplitter};
use crate::protocol::message::{CoreMessage, MessageHeaders};
use crate::protocol::packet::SessionRequestProducerCredits;
use crate::protocol::packet::{SessionSend, SessionSendContinuation, SessionSendLarge};
use crate::protocol::ExceptionType;
use crate::protocol::SimpleString;
use crate::session::SessionShared;

/// The broker's answer to a pipelined send, to await later.
#[derive(Debug)]
#[must_use = "a send is only confirmed once the confirmation is awaited"]
pub struct SendConfirmation {
    link: Link,
    channel: i64,
    rx: oneshot::Receiver<Reply>,
}

impl SendConfirmation {
    /// Waits until the broker routed and stored the message, or refused it.
    pub async fn wait(self) -> Result<(), Error> {
        let answer = self.link.finish_call(self.rx, "send").await?;
        expect_null(self.channel, answer, "send")
    }
}

/// The operation named by the timeout of a send that waited for producer credits ([`Error::is_producer_blocked`]).
pub(crate) const CREDITS_OP: &str = "producer credits";

/// Producer flow control settings (§8.6).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FlowControl {
    /// Credits asked for at a time (Java's `producerWindowSize`, 64 KiB).
    pub window_bytes: i32,
    /// How long a send waits for credits.
    pub timeout: Duration,
}

/// A producer bound to a session, and optionally to an address.
#[derive(Debug, Clone)]
pub struct Producer {
    session: Arc<SessionShared>,
    address: Option<SimpleString>,
    flow: Option<FlowControl>,
}

/// The announced body size of a large message: the original size of a
/// compressed body (§11.3), else the bytes sent.
fn announced_body_size(headers: &MessageHeaders, sent: i64) -> i64 {
    if headers.is_compressed() {
        headers.large_body_size().unwrap_or(sent)
    } else {
        sent
    }
}

impl Producer {
    pub(crate) fn new(session: Arc<SessionShared>, address: Option<&str>, flow: Option<FlowControl>) -> Self {
        Producer { session, address: address.map(SimpleString::new), flow }
    }

    /// Holds `needed` bytes of producer credits for `address`, asking the broker
    /// for more when they run out (§8.6). No-op without flow control.
    async fn acquire(&self, address: &SimpleString, needed: usize) -> Result<(), Error> {
        let Some(flow) = self.flow else {
            return Ok(());
        };
        let needed = i64::try_from(needed).unwrap_or(i64::MAX);
        let name = address.to_string_lossy();
        let mut guard = self.session.producer_credits().await?;
        let credits = guard.as_mut().expect("initialised by producer_credits");
        loop {
            let available = credits.available.entry(name.clone()).or_insert(0);
            if *available >= needed {
                *available -= needed;
                return Ok(());
            }
            let ask = i64::from(flow.window_bytes).max(needed - *available);
            let packet = SessionRequestProducerCredits {
                credits: i32::try_from(ask).unwrap_or(i32::MAX),
                address: address.clone(),
            };
            self.session.link.send(self.session.channel, packet).await?;
            // Wait for this address's answer; others' are booked on the way.
            loop {
                let event = match tokio::time::timeout(flow.timeout, credits.events.recv()).await {
                    Ok(Some(event)) => event,
                    Ok(None) => return Err(self.session.ended()),
                    Err(_) => return Err(Error::Timeout { op: CREDITS_OP, after: flow.timeout }),
                };
                match event {
                    ProducerCreditEvent::Granted { address: a, credits: n } => {
                        *credits.available.entry(a.clone()).or_insert(0) += i64::from(n);
                        if a == name {
                            break;
                        }
                    }
                    ProducerCreditEvent::Refused { address: a, .. } if a == name => {
                        return Err(Error::Broker(BrokerError {
                            kind: ExceptionType::AddressFull,
                            code: ExceptionType::AddressFull.code(),
                            message: Some(format!("the broker refused producer credits: address {a} is full")),
                            op: "producer credits",
                        }));
                    }
                    ProducerCreditEvent::Refused { .. } => {}
                    ProducerCreditEvent::Failed(e) => return Err(e),
                }
            }
        }
    }

    /// The producer's address, if bound to one.
    pub fn address(&self) -> Option<String> {
        self.address.as_ref().map(SimpleString::to_string_lossy)
    }

    fn prepare_headers(&self, headers: &MessageHeaders) -> Result<MessageHeaders, Error> {
        let mut headers = headers.clone();
        if let Some(a) = &self.address {
            headers.address = Some(a.clone());
        }
        // §8.3: never leave the address to the session's default.
        if headers.address.is_none() {
            return Err(Error::InvalidArgument(
                "the message has no address and the producer is not bound to one".into(),
            ));
        }
        // §8.2: the broker assigns the id.
        headers.message_id = 0;
        Ok(headers)
    }

    fn matching(&self, correlation_id: i64) -> Matching {
        if self.session.link.version().has_async_responses() {
            Matching::Correlated(correlation_id)
        } else {
            Matching::InOrder
        }
    }

    /// Sends a message: waits for the broker's confirmation in an auto-commit
    /// session; joins the transaction (no answer) in a transacted one.
    pub async fn send(&self, message: &CoreMessage) -> Result<(), Error> {
        if self.session.options.transacted_sends {
            self.send_unconfirmed(message).await
        } else {
            self.send_pipelined(message).await?.wait().await
        }
    }

    /// Sends a message asking for the broker's answer, and returns without
    /// waiting for it.
    pub async fn send_pipelined(&self, message: &CoreMessage) -> Result<SendConfirmation, Error> {
        match self.queue_message(message, true).await? {
            Some(rx) => Ok(SendConfirmation { link: self.session.link.clone(), channel: self.session.channel, rx }),
            None => Err(Error::InvalidArgument("no confirmation was requested".into())),
        }
    }

    /// Sends a message without asking for an answer. Outside a transaction a
    /// failure is only logged by the broker (§4.1).
    pub async fn send_unconfirmed(&self, message: &CoreMessage) -> Result<(), Error> {
        self.queue_message(message, false).await.map(|_| ())
    }

    async fn queue_message(
        &self,
        message: &CoreMessage,
        confirm: bool,
    ) -> Result<Option<oneshot::Receiver<Reply>>, Error> {
        self.session.check_open()?;
        let headers = self.prepare_headers(&message.headers)?;
        let link = &self.session.link;
        let channel = self.session.channel;
        let min_large = link.shared().options.min_large_message_size;
        let correlation_id = if confirm { link.next_correlation_id() } else { -1 };
        if let Some(address) = &headers.address {
            self.acquire(address, message.body.len() + headers.encoded_len()).await?;
        }
        let _guard = self.session.send_lock.lock().await;
        if !is_large(message.body.len(), min_large) {
            let packet = SessionSend {
                message: CoreMessage { headers, body: message.body.clone() },
                requires_response: confirm,
                correlation_id,
                producer_id: -1,
            };
            return if confirm {
                let matching = self.matching(correlation_id);
                Ok(Some(link.start_call(channel, packet, matching, "send").await?))
            } else {
                link.send(channel, packet).await.map(|_| None)
            };
        }
        let size = announced_body_size(&headers, message.body.len() as i64);
        link.send(channel, SessionSendLarge { headers }).await?;
        for mut chunk in split_body(message.body.clone(), min_large, -1, confirm, correlation_id) {
            if chunk.continues {
                link.send(channel, chunk).await?;
            } else {
                chunk.message_body_size = size;
                return self.last_chunk(chunk, confirm, correlation_id).await;
            }
        }
        Ok(None)
    }

    async fn last_chunk(
        &self,
        chunk: SessionSendContinuation,
        confirm: bool,
        correlation_id: i64,
    ) -> Result<Option<oneshot::Receiver<Reply>>, Error> {
        let link = &self.session.link;
        let channel = self.session.channel;
        if confirm {
            let matching = self.matching(correlation_id);
            Ok(Some(link.start_call(channel, chunk, matching, "send large message").await?))
        } else {
            link.send(channel, chunk).await.map(|_| None)
        }
    }

    /// Sends a large message whose body is read from `body` in chunks of
    /// `minLargeMessageSize`, never held in memory (§11.2). Confirmed like
    /// [`Producer::send`]. If reading `body` fails midway, the broker drops the
    /// unfinished message when the session sends its next large message or closes.
    pub async fn send_large_from<R: AsyncRead + Unpin>(
        &self,
        headers: &MessageHeaders,
        mut body: R,
    ) -> Result<(), Error> {
        self.session.check_open()?;
        let confirm = !self.session.options.transacted_sends;
        let headers = self.prepare_headers(headers)?;
        let link = &self.session.link;
        let channel = self.session.channel;
        let chunk_size = link.shared().options.min_large_message_size.max(1);
        let correlation_id = if confirm { link.next_correlation_id() } else { -1 };
        let rx = {
            let _guard = self.session.send_lock.lock().await;
            let compressed_size = headers.is_compressed().then(|| headers.large_body_size()).flatten();
            let address = headers.address.clone();
            link.send(channel, SessionSendLarge { headers }).await?;
            let mut splitter = ContinuationSplitter::new(chunk_size, -1);
            let mut buf = vec![0u8; chunk_size];
            loop {
                let n = body.read(&mut buf).await.map_err(|e| Error::BodyIo(Arc::new(e)))?;
                if n == 0 {
                    break;
                }
                splitter.push(&buf[..n]);
                while let Some(chunk) = splitter.next_chunk() {
                    if let Some(address) = &address {
                        self.acquire(address, chunk.chunk.len()).await?;
                    }
                    link.send(channel, chunk).await?;
                }
            }
            let mut last = splitter.finish(confirm, correlation_id);
            if let Some(size) = compressed_size {
                last.message_body_size = size;
            }
            self.last_chunk(last, confirm, correlation_id).await?
        };
        match rx {
            Some(rx) => {
                let answer = link.finish_call(rx, "send large message").await?;
                expect_null(channel, answer, "send large message")
            }
            None => Ok(()),
        }
    }
}
