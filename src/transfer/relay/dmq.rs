//! The dead message queue (docs/dead-message-queue.md, modelled on the JMS bridge's DMQ of seed 003).
//!
//! **Why it exists.** A message the target broker refuses on its own — not for room, disk, rights or a lost
//! connection, which wait, stop or retry — would send its batch round the retry loop for ever, and every message
//! behind it with it. Once such a message is **proven** poison (refused `target attempts` times in one-by-one mode
//! while messages around it were committed: see [`super::send::send_batch_proving`]), it is taken out of the run's
//! way here, kept on the source broker with the reasons it was refused, instead of stalling the run or being lost.
//!
//! **How.** In **one source transaction** the message is sent to the first queue of the `dmq chain` that accepts it
//! (up to `dmq send attempts` tries each, `dmq send interval` apart) and, for a move, acknowledged from staging;
//! for a copy nothing is acknowledged (the source is never touched) and the caller records the source id in the
//! copy ledger once the DMQ committed. Every queue is looked at first with a Core queue query (no management
//! permit): a missing, disabled, purge-on-no-consumers, filtered, last-value or non-durable queue would drop or lose
//! what is sent to it **silently**, so it is passed over with its answer recorded, as is one whose transaction the
//! broker refuses (an address full under FAIL, a refused right). The built-in [`BUILT_IN`] is created when missing
//! (durable, anycast, no filter, never auto-deleted); the other queues of the chain must exist. When no queue
//! accepts the message, nothing is committed: a move's message goes back to staging, its headers and properties
//! are logged, and the run stops saying which queues answered what.
//!
//! **The DMQ message** ([`dmq_headers`]): the body verbatim, the priority and durability of the message, the
//! optional `dmq time-to-live` (else no expiry), the bookkeeping removed and the trace added exactly as for the
//! target (docs/guarantees.md, "What the target receives"), and the reason properties of [`props`].
//!
//! **Crash safety of a move.** A `kill -9` between the DMQ commit (staging acknowledged) and the batch's Postgres
//! commit leaves the message's staging id in doubt and gone from staging, which the next claim's reconcile would
//! count as delivered. The staging ids about to be dead-lettered are therefore recorded, fenced by the lease, in
//! the run's cursor ([`super::state::RelayState::dead_letter`]) **before** the source transaction; the reconcile
//! counts an in-doubt id gone from staging that this intent names as dead-lettered, not delivered; an id still in
//! staging means the transaction never committed and the intent is dropped (the message is proven again). Looking
//! in the DMQs instead (for `_studio_dmq_run` and the staging id) was rejected: operators consume and purge DMQs,
//! the chain may change between attempts, and browsing a DMQ that holds other runs' messages costs what the
//! intent's one fenced write does not.
//!
//! **Crash safety of a copy.** No intent is needed: the DMQ message carries the run's duplicate id
//! (`studio:<run>:<source id>`), so a message proven again after a crash between the DMQ commit and the ledger's
//! commit is refused by the DMQ as a duplicate — it is there already — and then recorded.

use std::collections::HashSet;
use std::time::Duration;

use artemis_core::message::{names, MessageHeaders, PropertyValue};
use artemis_core::{Connection, Error, QueueConfig, Session};
use chrono::Utc;

use super::poison::Poison;
pub use super::poison::Reason;
use super::receive::{receive_batch, Limits, Received};
use super::send::send_one;
use super::spool::Spool;
use super::Code;
use super::{RelayConfig, RelayError};
use crate::jobs::settings::Settings;
use crate::transfer::outbound::{outbound_headers, Origin, OutboundTarget};
use crate::transfer::plan::Mode;

/// The built-in dead message queue, created on the source broker when missing.
pub const BUILT_IN: &str = "studio.dmq.transfer";

/// The longest exception text carried in [`props::EXCEPTION`] (the broker's words, never a whole stack).
const EXCEPTION_MAX: usize = 2000;

/// The properties a dead-lettered message carries (modelled on the JMS bridge's `JMS_SUN_JMSBRIDGE_*`). Each is
/// absent when its value is unknown; names are documented in `docs/dead-message-queue.md`.
pub mod props {
    /// STRING: why ([`super::Reason`]).
    pub const REASON: &str = "_studio_dmq_reason";
    /// STRING: the target broker's refusal (the last one), as the relay saw it.
    pub const EXCEPTION: &str = "_studio_dmq_exception";
    /// LONG: when the message was sent to the DMQ (epoch milliseconds).
    pub const TIME: &str = "_studio_dmq_time";
    /// STRING: the run.
    pub const RUN: &str = "_studio_dmq_run";
    /// INT: how many one-by-one attempts the target refused.
    pub const TARGET_ATTEMPTS: &str = "_studio_dmq_target_attempts";
    /// STRING: the source queue, `cluster/node/queue`.
    pub const SOURCE_DESTINATION: &str = "_studio_dmq_source_destination";
    /// LONG: the message's id on the source queue (absent for a move when the staging copy lacks it).
    pub const SOURCE_MESSAGE_ID: &str = "_studio_dmq_source_message_id";
    /// STRING: the message's JMSMessageID (`ID:<uuid>`), when it has one.
    pub const SOURCE_JMS_MESSAGE_ID: &str = "_studio_dmq_source_jms_message_id";
    /// STRING or BYTES (as the original): the message's JMSCorrelationID.
    pub const SOURCE_CORRELATION_ID: &str = "_studio_dmq_source_correlation_id";
    /// STRING: the message's JMSType.
    pub const SOURCE_JMS_TYPE: &str = "_studio_dmq_source_jms_type";
    /// LONG: the message's own timestamp (JMSTimestamp, epoch milliseconds).
    pub const SOURCE_TIMESTAMP: &str = "_studio_dmq_source_timestamp";
    /// LONG: a move's staging message id (its duplicate id on the target was `studio:<run>:<this>`).
    pub const STAGING_ID: &str = "_studio_dmq_staging_id";
    /// STRING: the target queue's FQQN `address::queue` the message was meant for.
    pub const TARGET_DESTINATION: &str = "_studio_dmq_target_destination";
    /// STRING: the target cluster.
    pub const TARGET_CLUSTER: &str = "_studio_dmq_target_cluster";
    /// STRING: the target node.
    pub const TARGET_NODE: &str = "_studio_dmq_target_node";

    /// Every one of them: a message dead-lettered again carries only its latest reasons.
    pub const ALL: [&str; 15] = [
        REASON,
        EXCEPTION,
        TIME,
        RUN,
        TARGET_ATTEMPTS,
        SOURCE_DESTINATION,
        SOURCE_MESSAGE_ID,
        SOURCE_JMS_MESSAGE_ID,
        SOURCE_CORRELATION_ID,
        SOURCE_JMS_TYPE,
        SOURCE_TIMESTAMP,
        STAGING_ID,
        TARGET_DESTINATION,
        TARGET_CLUSTER,
        TARGET_NODE,
    ];
}

/// Where a dead-lettered message came from and was going.
pub(crate) struct Context<'a> {
    /// Move or copy.
    pub mode: Mode,
    /// The source (and the run) as the trace names them.
    pub origin: &'a Origin,
    /// The target queue's FQQN.
    pub target_fqqn: String,
    /// The target cluster.
    pub target_cluster: &'a str,
    /// The target node.
    pub target_node: &'a str,
    /// The settings read for this batch (chain, attempts, interval, time-to-live).
    pub settings: &'a Settings,
}

impl<'a> Context<'a> {
    /// The context of a batch of `run` (a move or a copy) sending to `target`.
    pub fn of_run(
        mode: Mode,
        run: &'a super::state::TransferRun,
        origin: &'a Origin,
        target: &OutboundTarget,
        settings: &'a Settings,
    ) -> Context<'a> {
        Context {
            mode,
            origin,
            target_fqqn: target.fqqn(),
            target_cluster: &run.plan.target.cluster,
            target_node: &run.plan.target.node,
            settings,
        }
    }
}

/// A queue of the chain found able to keep what is sent to it.
#[derive(Debug, Clone)]
struct Usable {
    /// `address::queue`.
    fqqn: String,
    /// Its address.
    address: String,
    /// Its name.
    queue: String,
}

/// One queue of the chain and its answer, for the words of a stop.
#[derive(Debug, Clone)]
pub(crate) struct Tried {
    /// The queue.
    pub queue: String,
    /// What it answered.
    pub answer: String,
}

/// What became of a poison message.
#[derive(Debug)]
pub(crate) enum Fate {
    /// Committed on `queue` (`already`: the DMQ had it from an earlier attempt whose record was lost).
    DeadLettered { queue: String, already: bool },
    /// No queue of the chain accepted it: nothing was committed.
    NoneAccepted { tried: Vec<Tried> },
}

/// The words of a run stopped because no DMQ accepted a message.
pub(crate) fn none_accepted_words(id_words: &str, tried: &[Tried]) -> String {
    let answers: Vec<String> = tried.iter().map(|t| format!("{}: {}", t.queue, t.answer)).collect();
    format!(
        "{id_words} was refused by the target as poison and no dead message queue accepted it ({}); it was left \
         where it was and the run stopped. Make one of the chain's queues accept it (or change the dmq_chain \
         setting), then resume.",
        answers.join("; ")
    )
}

/// The DMQ message's headers: the message as the target would have had it (bookkeeping removed, trace added,
/// docs/guarantees.md, "What the target receives") sent to `dmq`, with the time-to-live of the settings and the reason properties.
fn dmq_headers(
    original: &MessageHeaders,
    received_id: i64,
    ctx: &Context<'_>,
    poison: &Poison,
    dmq: &Usable,
    now_millis: i64,
) -> MessageHeaders {
    let target = OutboundTarget {
        address: dmq.address.clone(),
        queue: dmq.queue.clone(),
        routing: artemis_core::admin::RoutingType::Anycast,
    };
    let out = outbound_headers(original, received_id, ctx.mode, &target, ctx.origin);
    let mut h = out.headers;
    h.expiration = match ctx.settings.dmq_time_to_live_secs {
        Some(ttl) => now_millis.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX / 2_000).saturating_mul(1000)),
        None => 0,
    };
    h.timestamp = now_millis;
    let p = &mut h.properties;
    for name in props::ALL {
        p.remove(name);
    }
    let text = |s: &str| PropertyValue::String(s.into());
    p.insert(props::REASON, text(poison.reason.as_str()));
    let mut exception = poison.error.to_string();
    if exception.len() > EXCEPTION_MAX {
        let mut cut = EXCEPTION_MAX;
        while !exception.is_char_boundary(cut) {
            cut -= 1;
        }
        exception.truncate(cut);
        exception.push('…');
    }
    p.insert(props::EXCEPTION, text(&exception));
    p.insert(props::TIME, PropertyValue::Long(now_millis));
    p.insert(props::RUN, text(&ctx.origin.run.to_string()));
    p.insert(props::TARGET_ATTEMPTS, PropertyValue::Int(i32::try_from(poison.attempts).unwrap_or(i32::MAX)));
    let source = format!("{}/{}/{}", ctx.origin.cluster, ctx.origin.node, ctx.origin.queue);
    p.insert(props::SOURCE_DESTINATION, text(&source));
    if let Some(id) = out.original_message_id {
        p.insert(props::SOURCE_MESSAGE_ID, PropertyValue::Long(id));
    }
    if let Some(id) = original.jms_message_id() {
        p.insert(props::SOURCE_JMS_MESSAGE_ID, text(&id));
    }
    if let Some(c) = original.correlation_id() {
        p.insert(props::SOURCE_CORRELATION_ID, c.clone());
    }
    if let Some(t) = original.jms_type() {
        p.insert(props::SOURCE_JMS_TYPE, PropertyValue::String(t.clone()));
    }
    if original.timestamp != 0 {
        p.insert(props::SOURCE_TIMESTAMP, PropertyValue::Long(original.timestamp));
    }
    if ctx.mode == Mode::Move {
        p.insert(props::STAGING_ID, PropertyValue::Long(received_id));
    }
    p.insert(props::TARGET_DESTINATION, text(&ctx.target_fqqn));
    p.insert(props::TARGET_CLUSTER, text(ctx.target_cluster));
    p.insert(props::TARGET_NODE, text(ctx.target_node));
    h
}

/// A chain entry naming the run's own source queue or a staging queue would put the message back in the run's way.
fn not_the_runs_own(name: &str, ctx: &Context<'_>) -> Option<String> {
    if name == ctx.origin.queue {
        Some("is the run's source queue: the message would be taken again".into())
    } else if name.starts_with(crate::transfer::staging::STAGING_PREFIX) {
        Some("is a staging queue, which the relay removes".into())
    } else {
        None
    }
}

/// Looks at the chain's queue `name` over Core: `Ok(Err(words))` when it cannot keep what is sent to it. The
/// built-in queue is created when missing.
async fn usable(conn: &Connection, session: &Session, name: &str) -> Result<Result<Usable, String>, RelayError> {
    let info = match conn.queue_query(name).await {
        Ok(Some(info)) => info,
        Ok(None) if name == BUILT_IN => {
            match session.create_queue(&QueueConfig::anycast(name, name)).await {
                Ok(()) => tracing::info!(queue = name, "created the built-in dead message queue"),
                Err(e) if e.is_queue_exists() => {}
                Err(e) if e.is_connection_lost() || e.is_timeout() => return Err(e.into()),
                Err(e) => return Ok(Err(format!("is missing and could not be created: {e}"))),
            }
            match conn.queue_query(name).await? {
                Some(info) => info,
                None => return Ok(Err("is missing although it was just created".into())),
            }
        }
        Ok(None) => {
            return Ok(Err(format!(
                "does not exist (only the built-in {BUILT_IN} is created by the relay; the other queues of the chain \
                 must be made by an administrator)"
            )))
        }
        Err(e) if e.is_connection_lost() || e.is_timeout() => return Err(e.into()),
        Err(e) => return Ok(Err(format!("could not be looked at: {e}"))),
    };
    let refusal = if info.enabled == Some(false) {
        Some("is disabled: the broker would drop whatever is sent to it".to_string())
    } else if info.purge_on_no_consumers {
        Some("purges its messages when it has no consumers".into())
    } else if let Some(f) = info.filter.as_deref().filter(|f| !f.trim().is_empty()) {
        Some(format!("has the filter `{f}`: a message it does not match would be dropped"))
    } else if info.last_value == Some(true) {
        Some("is a last-value queue: it keeps one message per key".into())
    } else if !info.durable || info.temporary {
        Some("is not durable: its messages would not survive a broker restart".into())
    } else {
        None
    };
    Ok(match refusal {
        Some(words) => Err(words),
        None => {
            Ok(Usable { fqqn: format!("{}::{}", info.address, info.name), address: info.address, queue: info.name })
        }
    })
}

/// One source transaction that can put a poison message on a DMQ.
pub(crate) trait DeadLetterTx {
    /// The message as received.
    fn message(&self) -> &MessageHeaders;
    /// Its id on the broker it was received from.
    fn received_id(&self) -> i64;
    /// Sends `headers` (with the message's body) and, for a move, acknowledges it from staging.
    async fn send(&mut self, headers: &MessageHeaders) -> Result<(), Error>;
    /// Commits what [`DeadLetterTx::send`] did.
    async fn commit(&mut self) -> Result<(), Error>;
    /// After a refused commit (rolled back by the broker): rolls back here as well and makes the message
    /// acknowledgeable again.
    async fn recover(&mut self) -> Result<(), RelayError>;
    /// The DMQ already holds the message (its duplicate id was refused): a move acknowledges it alone.
    async fn settle_already_there(&mut self) -> Result<(), Error>;
}

/// Sends a proven poison message through the chain (see the module doc); connection losses and timeouts are
/// errors (the batch is retried), any other refusal moves on to the next queue.
pub(crate) async fn dead_letter<T: DeadLetterTx>(
    conn: &Connection,
    session: &Session,
    tx: &mut T,
    ctx: &Context<'_>,
    poison: &Poison,
) -> Result<Fate, RelayError> {
    let settings = ctx.settings;
    let attempts = settings.dmq_send_attempts.max(1);
    let interval = Duration::from_secs(settings.dmq_send_interval_secs);
    let mut tried = Vec::new();
    for name in &settings.dmq_chain {
        let queue = match not_the_runs_own(name, ctx) {
            Some(words) => Err(words),
            None => usable(conn, session, name).await?,
        };
        let queue = match queue {
            Ok(q) => q,
            Err(answer) => {
                tracing::info!(run = %ctx.origin.run, dmq = %name, %answer, "passed over a dead message queue");
                tried.push(Tried { queue: name.clone(), answer });
                continue;
            }
        };
        let mut last = String::new();
        for attempt in 1..=attempts {
            let headers =
                dmq_headers(tx.message(), tx.received_id(), ctx, poison, &queue, Utc::now().timestamp_millis());
            let committed = match tx.send(&headers).await {
                Err(e) => Err(e),
                // Routing happens at the send: the queue is looked at again before the commit, so one disabled (or
                // deleted, filtered …) since the first look, which would have dropped the message, is not committed.
                Ok(()) => match usable(conn, session, name).await? {
                    Ok(_) => tx.commit().await,
                    Err(changed) => {
                        tx.recover().await?;
                        last = format!("changed while the message was sent: it {changed}");
                        break;
                    }
                },
            };
            match committed {
                Ok(()) => {
                    super::fault::reach("dmq-commit");
                    return Ok(Fate::DeadLettered { queue: name.clone(), already: false });
                }
                Err(e) if e.is_duplicate_id() => {
                    tx.recover().await?;
                    tx.settle_already_there().await?;
                    return Ok(Fate::DeadLettered { queue: name.clone(), already: true });
                }
                Err(e) if e.is_connection_lost() || e.is_timeout() => {
                    return Err(RelayError::transient_in(Code::Core, &format!("dead-lettering on {}", queue.fqqn), e))
                }
                Err(e) => {
                    last = e.to_string();
                    tx.recover().await?;
                    if attempt < attempts {
                        tokio::time::sleep(interval).await;
                    }
                }
            }
        }
        let answer = format!("refused the message ({attempts} attempts at most), the last answer: {last}");
        tracing::info!(run = %ctx.origin.run, dmq = %name, %answer, "a dead message queue refused a poison message");
        tried.push(Tried { queue: name.clone(), answer });
    }
    Ok(Fate::NoneAccepted { tried })
}

/// The headers of a message no DMQ accepted, for the log: every property but bookkeeping (the outbound rules
/// already removed `_AMQ_VALIDATED_USER` and its kind), byte values as their length, long strings cut.
pub(crate) fn loggable(original: &MessageHeaders, received_id: i64, ctx: &Context<'_>) -> String {
    let target = OutboundTarget {
        address: ctx.target_fqqn.clone(),
        queue: ctx.target_fqqn.clone(),
        routing: artemis_core::admin::RoutingType::Anycast,
    };
    let out = outbound_headers(original, received_id, ctx.mode, &target, ctx.origin).headers;
    let mut parts = vec![
        format!("id={received_id}"),
        format!("durable={}", out.durable),
        format!("priority={}", out.priority),
        format!("timestamp={}", out.timestamp),
        format!("expiration={}", out.expiration),
    ];
    if let Some(id) = original.jms_message_id() {
        parts.push(format!("JMSMessageID={id}"));
    }
    let mut properties: Vec<String> = out
        .properties
        .iter()
        .filter(|(name, _)| !name.eq_str(names::DUPLICATE_ID) && !name.eq_str(names::ROUTING_TYPE))
        .map(|(name, value)| format!("{}={}", name.to_string_lossy(), show(value)))
        .collect();
    properties.sort();
    parts.extend(properties);
    parts.join(", ")
}

fn show(value: &PropertyValue) -> String {
    match value {
        PropertyValue::String(s) => {
            let s = s.to_string_lossy();
            if s.chars().count() > 200 {
                format!("{:?}… ({} chars)", s.chars().take(200).collect::<String>(), s.chars().count())
            } else {
                format!("{s:?}")
            }
        }
        PropertyValue::Bytes(b) => format!("<{} bytes>", b.len()),
        other => format!("{other:?}"),
    }
}

/// A move's poison: a staged message received on `consumer` of the transacted `session`, still unacknowledged.
pub(crate) struct StagedTx<'a> {
    pub session: &'a Session,
    pub consumer: &'a mut artemis_core::Consumer,
    pub item: Received,
    pub spool: &'a Spool,
    pub config: &'a RelayConfig,
    /// A rollback happened: every unacknowledged message of the session went back to staging.
    pub rolled_back: bool,
}

impl DeadLetterTx for StagedTx<'_> {
    fn message(&self) -> &MessageHeaders {
        &self.item.delivery.message().headers
    }

    fn received_id(&self) -> i64 {
        self.item.delivery.message_id()
    }

    async fn send(&mut self, headers: &MessageHeaders) -> Result<(), Error> {
        let producer = self.session.producer(None);
        send_one(&producer, &self.item, headers).await?;
        self.consumer.ack(&self.item.delivery).await
    }

    async fn commit(&mut self) -> Result<(), Error> {
        self.session.commit().await
    }

    async fn recover(&mut self) -> Result<(), RelayError> {
        self.session.rollback().await?;
        self.rolled_back = true;
        let id = self.received_id();
        self.item = receive_again(self.consumer, self.spool, self.config, id).await?;
        Ok(())
    }

    async fn settle_already_there(&mut self) -> Result<(), Error> {
        self.consumer.ack(&self.item.delivery).await?;
        self.session.commit().await
    }
}

/// Receives the staged message `id` again after a rollback gave it back to staging (others received meanwhile are
/// left unacknowledged: they go back with the session's next rollback or close).
pub(crate) async fn receive_again(
    consumer: &mut artemis_core::Consumer,
    spool: &Spool,
    config: &RelayConfig,
    id: i64,
) -> Result<Received, RelayError> {
    let only: HashSet<i64> = [id].into_iter().collect();
    let limits = Limits { messages: 1, bytes: u64::MAX };
    let mut again = receive_batch(consumer, spool, config, limits, Some(&only)).await?;
    again.received.pop().ok_or_else(|| {
        RelayError::transient(
            Code::Core,
            format!(
            "staging message {id} did not come back after its dead-letter transaction was rolled back; the batch is \
             retried"
        ),
        )
    })
}

/// A copy's poison: a browsed message; the transaction only sends (the source is never touched).
pub(crate) struct BrowsedTx<'a> {
    pub session: &'a Session,
    pub item: &'a Received,
}

impl DeadLetterTx for BrowsedTx<'_> {
    fn message(&self) -> &MessageHeaders {
        &self.item.delivery.message().headers
    }

    fn received_id(&self) -> i64 {
        self.item.delivery.message_id()
    }

    async fn send(&mut self, headers: &MessageHeaders) -> Result<(), Error> {
        let producer = self.session.producer(None);
        send_one(&producer, self.item, headers).await
    }

    async fn commit(&mut self) -> Result<(), Error> {
        self.session.commit().await
    }

    async fn recover(&mut self) -> Result<(), RelayError> {
        self.session.rollback().await?;
        Ok(())
    }

    async fn settle_already_there(&mut self) -> Result<(), Error> {
        Ok(())
    }
}

/// A poison message that went to a DMQ, for the counters and the run's event.
#[derive(Debug, Clone)]
pub(crate) struct Settled {
    /// Its id where it was received (staging for a move, the source for a copy).
    pub received_id: i64,
    /// Why.
    pub reason: Reason,
    /// The target's last refusal.
    pub error: String,
    /// The DMQ that took it.
    pub queue: String,
    /// The DMQ had it already (an earlier attempt's record was lost).
    pub already: bool,
}

impl Settled {
    /// The run event's detail.
    pub fn event(&self, mode: Mode) -> serde_json::Value {
        let id_key = if mode == Mode::Move { "staging_id" } else { "source_message_id" };
        serde_json::json!({
            id_key: self.received_id,
            "reason": self.reason.as_str(),
            "error": self.error,
            "dmq": self.queue,
            "already_in_dmq": self.already,
        })
    }
}

/// What dead-lettering a batch's poison came to.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// Those sent to a DMQ, in order.
    pub dead: Vec<Settled>,
    /// When a message found no DMQ: the run must stop, with these words (it and any poison after it were left where
    /// they were).
    pub stop: Option<String>,
}

/// Handles one poison message's fate: a settled one is pushed to `outcome`; one no DMQ accepted is logged with
/// its properties and sets the stop's words. Returns whether to go on with the next.
fn record(
    outcome: &mut Outcome,
    fate: Fate,
    poison: &Poison,
    headers: &MessageHeaders,
    id: i64,
    ctx: &Context<'_>,
) -> bool {
    match fate {
        Fate::DeadLettered { queue, already } => {
            tracing::warn!(run = %ctx.origin.run, id, dmq = %queue, already, reason = poison.reason.as_str(),
                error = %poison.error, "dead-lettered a poison message the target refused");
            outcome.dead.push(Settled {
                received_id: id,
                reason: poison.reason,
                error: poison.error.to_string(),
                queue,
                already,
            });
            true
        }
        Fate::NoneAccepted { tried } => {
            let answers: Vec<String> = tried.iter().map(|t| format!("{}: {}", t.queue, t.answer)).collect();
            tracing::warn!(run = %ctx.origin.run, id, reason = poison.reason.as_str(), error = %poison.error,
                tried = %answers.join("; "), properties = %loggable(headers, id, ctx),
                "no dead message queue accepted a poison message: it is left where it was and the run stops");
            let what = match ctx.mode {
                Mode::Move => match headers.property(names::ORIGINAL_MESSAGE_ID).and_then(PropertyValue::as_i64) {
                    Some(source) => format!("staging message {id} (source message {source})"),
                    None => format!("staging message {id}"),
                },
                Mode::Copy => format!("source message {id}"),
            };
            let refusal = format!("{what} (refused {} times: {})", poison.attempts, poison.error);
            outcome.stop = Some(none_accepted_words(&refusal, &tried));
            false
        }
    }
}

/// A move's poison, after the rest of its batch was acknowledged from staging: each message in its own source
/// transaction, in batch order, until one finds no DMQ (it is rolled back into staging, as is every poison after
/// it). `items` are the unacknowledged poison deliveries of `session`'s `consumer`. The caller recorded their
/// staging ids as the dead-letter intent (fenced) before the batch's source commit.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn dead_letter_staged(
    conn: &Connection,
    session: &Session,
    consumer: &mut artemis_core::Consumer,
    spool: &Spool,
    config: &RelayConfig,
    items: Vec<(Poison, Received)>,
    ctx: &Context<'_>,
) -> Result<Outcome, RelayError> {
    let mut outcome = Outcome::default();
    let mut rolled_back = false;
    for (poison, item) in items {
        let id = item.delivery.message_id();
        // A rollback gave every unacknowledged message back to staging: this one must be received again.
        let item = if rolled_back { receive_again(consumer, spool, config, id).await? } else { item };
        let mut tx = StagedTx { session, consumer: &mut *consumer, item, spool, config, rolled_back: false };
        let fate = dead_letter(conn, session, &mut tx, ctx, &poison).await?;
        rolled_back |= tx.rolled_back;
        let headers = tx.item.delivery.message().headers.clone();
        if !record(&mut outcome, fate, &poison, &headers, id, ctx) {
            // Nothing of it is committed: back to staging, now.
            session.rollback().await?;
            break;
        }
    }
    Ok(outcome)
}

/// A copy's poison: each browsed message sent to a DMQ in its own transaction on `session` (transacted, on the
/// source connection), in batch order, until one finds no DMQ. The caller records the settled ones in the ledger.
pub(crate) async fn dead_letter_browsed(
    conn: &Connection,
    session: &Session,
    items: Vec<(Poison, &Received)>,
    ctx: &Context<'_>,
) -> Result<Outcome, RelayError> {
    let mut outcome = Outcome::default();
    for (poison, item) in items {
        let id = item.delivery.message_id();
        let mut tx = BrowsedTx { session, item };
        let fate = dead_letter(conn, session, &mut tx, ctx, &poison).await?;
        if !record(&mut outcome, fate, &poison, &item.delivery.message().headers, id, ctx) {
            break;
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;
    use artemis_core::{BrokerError, ExceptionType};
    use uuid::Uuid;

    fn broker(kind: ExceptionType, op: &'static str) -> Error {
        Error::Broker(BrokerError { kind, code: kind.code(), message: Some("AMQ000000: words".into()), op })
    }

    fn settings(ttl: Option<u64>) -> Settings {
        let mut s = crate::config::Config::from_sources(None, Vec::new()).unwrap().settings;
        s.dmq_time_to_live_secs = ttl;
        s
    }

    fn original() -> MessageHeaders {
        let mut h = MessageHeaders {
            message_id: 77,
            durable: true,
            priority: 7,
            timestamp: 1_700_000_000_123,
            expiration: 1_700_000_999_000,
            user_id: Some([1; 16]),
            ..MessageHeaders::default()
        };
        h.properties.insert("app", PropertyValue::Int(5));
        h.properties.insert(props::REASON, PropertyValue::String("STALE".into()));
        h.properties.insert(names::VALIDATED_USER, PropertyValue::String("someone".into()));
        h.set_correlation_id("corr-1");
        h.set_jms_type("kind-a");
        h
    }

    #[test]
    fn the_dmq_message_keeps_the_message_and_carries_every_reason() {
        let origin = Origin { run: Uuid::nil(), cluster: "east".into(), node: "east-1".into(), queue: "orders".into() };
        let settings = settings(None);
        let ctx = Context {
            mode: Mode::Copy,
            origin: &origin,
            target_fqqn: "o::o".into(),
            target_cluster: "west",
            target_node: "west-1",
            settings: &settings,
        };
        let poison = Poison {
            index: 0,
            error: broker(ExceptionType::IoError, "commit"),
            reason: Reason::CommitFailure,
            attempts: 3,
        };
        let dmq = Usable { fqqn: "d::d".into(), address: "d".into(), queue: "d".into() };
        let h = dmq_headers(&original(), 77, &ctx, &poison, &dmq, 1_800_000_000_000);
        assert_eq!(h.address.as_ref().map(|a| a.to_string_lossy()), Some("d::d".to_string()));
        assert_eq!((h.durable, h.priority, h.user_id), (true, 7, Some([1; 16])));
        assert_eq!(h.expiration, 0, "no time-to-live: no expiry, whatever the original had");
        assert_eq!(h.timestamp, 1_800_000_000_000);
        let p = |name: &str| h.property(name).cloned();
        assert_eq!(p("app"), Some(PropertyValue::Int(5)));
        assert_eq!(p(names::VALIDATED_USER), None, "never forwarded");
        assert_eq!(p(props::REASON), Some(PropertyValue::String("COMMIT_FAILURE".into())));
        assert!(
            matches!(p(props::EXCEPTION), Some(PropertyValue::String(s)) if s.to_string_lossy().contains("IO_ERROR"))
        );
        assert_eq!(p(props::TIME), Some(PropertyValue::Long(1_800_000_000_000)));
        assert_eq!(p(props::RUN), Some(PropertyValue::String(Uuid::nil().to_string().as_str().into())));
        assert_eq!(p(props::TARGET_ATTEMPTS), Some(PropertyValue::Int(3)));
        assert_eq!(p(props::SOURCE_DESTINATION), Some(PropertyValue::String("east/east-1/orders".into())));
        assert_eq!(p(props::SOURCE_MESSAGE_ID), Some(PropertyValue::Long(77)));
        assert!(p(props::SOURCE_JMS_MESSAGE_ID).is_some());
        assert_eq!(p(props::SOURCE_CORRELATION_ID), Some(PropertyValue::String("corr-1".into())));
        assert_eq!(p(props::SOURCE_JMS_TYPE), Some(PropertyValue::String("kind-a".into())));
        assert_eq!(p(props::SOURCE_TIMESTAMP), Some(PropertyValue::Long(1_700_000_000_123)));
        assert_eq!(p(props::STAGING_ID), None, "a copy has no staging");
        assert_eq!(p(props::TARGET_DESTINATION), Some(PropertyValue::String("o::o".into())));
        assert_eq!(p(props::TARGET_CLUSTER), Some(PropertyValue::String("west".into())));
        assert_eq!(p(props::TARGET_NODE), Some(PropertyValue::String("west-1".into())));
        assert_eq!(
            p(names::DUPLICATE_ID),
            Some(PropertyValue::String(crate::transfer::outbound::duplicate_id(Uuid::nil(), 77).as_str().into()))
        );

        let settings = self::settings(Some(60));
        let ctx = Context { mode: Mode::Move, settings: &settings, ..ctx };
        let h = dmq_headers(&original(), 12, &ctx, &poison, &dmq, 1_800_000_000_000);
        assert_eq!(h.expiration, 1_800_000_060_000, "the dmq time-to-live");
        assert_eq!(h.property(props::STAGING_ID).cloned(), Some(PropertyValue::Long(12)));
    }
}
