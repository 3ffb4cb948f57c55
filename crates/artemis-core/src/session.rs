//! A Core session: one channel of a connection (core-protocol.md §1.4, §6).
//!
//! Transacted or not, separately for sends and acks ([`SessionOptions`]).
//! Start/stop delivery, commit, rollback, close; and the factories for
//! producers, consumers and browsers, and the admin queries.
//!
//! **Rollback and buffered deliveries** (§8.4, §15 item 12): a rollback returns
//! every delivered-but-unacked message of the session to its queue, including
//! those still sitting in a consumer's buffer. As Java does, the session stops
//! delivery first (after SESS_STOP's answer nothing more arrives), bumps its
//! *rollback generation*, rolls back and restarts. The connection task stamps
//! every delivery with the generation current when it arrived; consumers drop
//! (and give back the credits of) deliveries from an older generation, and an ack
//! of such a delivery is refused as [`Error::StaleDelivery`] before it can poison
//! the next transaction (§15 item 19).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Mutex, MutexGuard};

use crate::admin::{self, AddressInfo, QueueConfig, QueueInfo};
use crate::browser::Browser;
use crate::connection::{Command, Link, Matching, ProducerCreditEvent};
use crate::consumer::Consumer;
use crate::error::Error;
use crate::options::{ConsumerOptions, SessionOptions};
use crate::producer::Producer;
use crate::protocol::packet::{SessionClose, SessionCommit, SessionRollback, SessionStart, SessionStop};

/// What a session's handles (session, consumers, producers) share.
#[derive(Debug)]
pub(crate) struct SessionShared {
    pub link: Link,
    pub channel: i64,
    pub options: SessionOptions,
    /// Bumped by each rollback; see the module doc.
    pub generation: Arc<AtomicU64>,
    started: AtomicBool,
    closed: AtomicBool,
    next_consumer_id: AtomicI64,
    /// Held while the packets of one message are queued, so that a large message's
    /// continuations are never interleaved with another send (§11.2).
    pub send_lock: Mutex<()>,
    /// Producer credits of this session's flow-controlled producers (§8.6),
    /// routed here once the first one asks.
    credits: Mutex<Option<ProducerCredits>>,
}

/// Producer credits granted to a session, per address (§8.6).
#[derive(Debug)]
pub(crate) struct ProducerCredits {
    /// SESS_PRODUCER_CREDITS / _FAIL_CREDITS from the connection task.
    pub events: mpsc::UnboundedReceiver<ProducerCreditEvent>,
    /// Bytes granted and not yet used, per address as the broker named it.
    pub available: HashMap<String, i64>,
}

impl SessionShared {
    /// Fails with `Closed` or `ConnectionLost` if the session cannot be used.
    pub fn check_open(&self) -> Result<(), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed { what: "session" });
        }
        if let Some(reason) = self.link.shared().closed.get() {
            return Err(Error::ConnectionLost(reason.clone()));
        }
        Ok(())
    }

    /// The error for a stream that ended: the connection's, or the session's close.
    pub fn ended(&self) -> Error {
        if self.link.shared().closed.get().is_some() {
            self.link.lost()
        } else {
            Error::Closed { what: "session" }
        }
    }

    /// The current rollback generation.
    pub fn current_generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The session's producer credits, routed from the connection task on first use.
    pub async fn producer_credits(&self) -> Result<MutexGuard<'_, Option<ProducerCredits>>, Error> {
        let mut guard = self.credits.lock().await;
        if guard.is_none() {
            let (sink, events) = mpsc::unbounded_channel();
            let channel = self.channel;
            self.link.control(Command::ProducerCredits { channel, sink }).await?;
            *guard = Some(ProducerCredits { events, available: HashMap::new() });
        }
        Ok(guard)
    }
}

/// A session. Cheap handles (consumers, producers) keep it alive on the broker;
/// dropping the `Session` queues its close.
#[derive(Debug)]
pub struct Session {
    inner: Arc<SessionShared>,
}

impl Session {
    pub(crate) fn new(link: Link, channel: i64, options: SessionOptions) -> Session {
        Session {
            inner: Arc::new(SessionShared {
                link,
                channel,
                options,
                generation: Arc::new(AtomicU64::new(0)),
                started: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                next_consumer_id: AtomicI64::new(0),
                send_lock: Mutex::new(()),
                credits: Mutex::new(None),
            }),
        }
    }

    pub(crate) fn mark_closed(&self) {
        self.inner.closed.store(true, Ordering::Release);
    }

    /// Whether the session can still be used: neither it nor its connection has been closed. A caller that keeps
    /// a session between units of work asks before using it again.
    pub fn is_open(&self) -> bool {
        self.inner.check_open().is_ok()
    }

    /// The session's options.
    pub fn options(&self) -> SessionOptions {
        self.inner.options
    }

    /// The session's channel id.
    pub fn channel(&self) -> i64 {
        self.inner.channel
    }

    /// Starts delivery to this session's consumers (SESS_START, no answer).
    pub async fn start(&self) -> Result<(), Error> {
        self.inner.check_open()?;
        self.inner.link.send(self.inner.channel, SessionStart).await?;
        self.inner.started.store(true, Ordering::Release);
        Ok(())
    }

    /// Stops delivery (SESS_STOP, answered once the broker has stopped).
    pub async fn stop(&self) -> Result<(), Error> {
        self.inner.check_open()?;
        self.inner.started.store(false, Ordering::Release);
        let channel = self.inner.channel;
        self.inner.link.call_null(channel, SessionStop, Matching::InOrder, "stop").await
    }

    /// Commits the session's transaction (SESS_COMMIT, with a correlation id from
    /// version 132 on). A transaction the broker marked rollback-only (a failed
    /// send or ack, a duplicate id) fails here with the original error, after the
    /// broker rolled everything back (§8.4, §8.5).
    pub async fn commit(&self) -> Result<(), Error> {
        self.inner.check_open()?;
        let link = &self.inner.link;
        let (correlation_id, matching) = if link.version().has_commit_correlation() {
            let id = link.next_correlation_id();
            (id, Matching::Correlated(id))
        } else {
            (-1, Matching::InOrder)
        };
        link.call_null(self.inner.channel, SessionCommit { correlation_id }, matching, "commit").await
    }

    /// Rolls back the session's transaction. Every delivered but unacknowledged
    /// message of the session goes back to its queue, buffered ones included; see
    /// the module doc for how the buffers are cleared.
    pub async fn rollback(&self) -> Result<(), Error> {
        self.inner.check_open()?;
        let was_started = self.inner.started.load(Ordering::Acquire);
        if was_started {
            self.stop().await?;
        }
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
        let channel = self.inner.channel;
        let packet = SessionRollback { consider_last_message_as_delivered: false };
        self.inner.link.call_null(channel, packet, Matching::InOrder, "rollback").await?;
        if was_started {
            self.start().await?;
        }
        Ok(())
    }

    /// Closes the session (SESS_CLOSE; an open transaction is rolled back). Its
    /// consumers end.
    pub async fn close(self) -> Result<(), Error> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let link = &self.inner.link;
        let channel = self.inner.channel;
        let result = link.call_null(channel, SessionClose, Matching::InOrder, "close session").await;
        link.session_closed(channel);
        let _ = link.control(Command::ForgetChannel { channel }).await;
        match result {
            Err(e) if e.is_connection_lost() => Ok(()),
            other => other,
        }
    }

    /// A producer. With `address`, every message goes there (an FQQN
    /// `address::queue` is allowed); without, each message's own address is used.
    pub fn producer(&self, address: Option<&str>) -> Producer {
        Producer::new(self.inner.clone(), address, None)
    }

    /// A producer that honours the broker's producer flow control (§8.6): before
    /// each send it holds credits for the message's size, asking the broker for
    /// `window_bytes` (or more for a bigger message) when they run out. Against an
    /// address that is full, a send fails with `is_address_full()` under the FAIL
    /// policy and with a timeout after `timeout` under BLOCK, never hanging.
    pub fn producer_with_flow_control(&self, address: &str, window_bytes: u32, timeout: Duration) -> Producer {
        let flow = crate::producer::FlowControl {
            window_bytes: i32::try_from(window_bytes.max(1)).unwrap_or(i32::MAX),
            timeout,
        };
        Producer::new(self.inner.clone(), Some(address), Some(flow))
    }

    /// A consumer on `queue` (a queue name or an FQQN); never auto-creates it
    /// (code 100 when missing, §9.1). Delivery starts once the session is started.
    pub async fn create_consumer(&self, queue: &str, options: ConsumerOptions) -> Result<Consumer, Error> {
        self.inner.check_open()?;
        let id = self.inner.next_consumer_id.fetch_add(1, Ordering::Relaxed);
        Consumer::open(self.inner.clone(), id, queue, options, false).await
    }

    /// A browser on `queue`: sees the messages without consuming them or raising
    /// their delivery counts (§10). Browsers deliver whether or not the session
    /// is started.
    pub async fn create_browser(&self, queue: &str, options: ConsumerOptions) -> Result<Browser, Error> {
        self.inner.check_open()?;
        let id = self.inner.next_consumer_id.fetch_add(1, Ordering::Relaxed);
        let consumer = Consumer::open(self.inner.clone(), id, queue, options, true).await?;
        Ok(Browser::new(consumer))
    }

    /// Describes a queue (SESS_QUEUEQUERY, §12.1); `None` if it does not exist.
    /// Needs no permission.
    pub async fn queue_query(&self, queue: &str) -> Result<Option<QueueInfo>, Error> {
        self.inner.check_open()?;
        admin::queue_query(&self.inner.link, self.inner.channel, queue).await
    }

    /// Describes an address and lists its queues (SESS_BINDINGQUERY, §12.2).
    pub async fn binding_query(&self, address: &str) -> Result<AddressInfo, Error> {
        self.inner.check_open()?;
        admin::binding_query(&self.inner.link, self.inner.channel, address).await
    }

    /// Creates a queue (CREATE_QUEUE_V2, §12.3). An existing queue gives an error
    /// with `is_queue_exists()`.
    pub async fn create_queue(&self, config: &QueueConfig) -> Result<(), Error> {
        self.inner.check_open()?;
        admin::create_queue(&self.inner.link, self.inner.channel, config).await
    }

    /// Deletes a queue and its messages (DELETE_QUEUE, §12.4). Fails with code
    /// 100 when it does not exist and 104 while it has consumers.
    pub async fn delete_queue(&self, queue: &str) -> Result<(), Error> {
        self.inner.check_open()?;
        admin::delete_queue(&self.inner.link, self.inner.channel, queue).await
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.inner.closed.swap(true, Ordering::AcqRel) || self.inner.link.is_closed() {
            return;
        }
        let link = &self.inner.link;
        let channel = self.inner.channel;
        link.session_closed(channel);
        // Never await in Drop: queue the close; its answer keeps the channel in order.
        if !link.detached_call(channel, SessionClose, "close session") {
            tracing::debug!(channel, "could not queue the close of a dropped session");
        }
    }
}
