//! The target side of a batch: outbound headers, the sends in one transaction (or one message per transaction
//! when the broker refuses the whole: duplicates, proven poison), the target queue watched until the commit, and
//! the target's refusals sorted into full (wait), refused (fail) and other (retry).

use std::collections::HashSet;
use std::time::Duration;

use artemis_core::{CoreMessage, MessageHeaders};

use super::fault;
use super::guard::{may_hold_the_batch, recheck_after_commit, recheck_before_commit, QueueView};
use super::poison::{self, Poison};
use super::receive::{Received, Taken};
use super::state::{BatchCount, TransferRun};
use super::Code;
use super::RelayError;
use crate::broker::jolokia::RoutingType;
use crate::transfer::facts::EndFacts;
use crate::transfer::outbound::{outbound_headers, Origin, OutboundTarget};
use crate::transfer::plan::Mode;

/// Where a batch goes, and where it came from, for its outbound headers and for a DMQ.
pub(crate) struct Route {
    pub(crate) target: OutboundTarget,
    pub(crate) origin: Origin,
}

impl Route {
    /// The target queue with its routing type (anycast where the guard could not read it) and the source.
    pub(crate) fn of(run: &TransferRun, facts: &EndFacts) -> Route {
        let routing = facts
            .queue
            .state()
            .and_then(|q| q.routing_type)
            .map(core_routing)
            .unwrap_or(artemis_core::admin::RoutingType::Anycast);
        Route::with_routing(run, routing)
    }

    /// The run's target queue reached with `routing`, and the run's source as the trace.
    pub(crate) fn with_routing(run: &TransferRun, routing: artemis_core::admin::RoutingType) -> Route {
        Route {
            target: OutboundTarget {
                address: run.plan.target.address().to_string(),
                queue: run.plan.target.queue.clone(),
                routing,
            },
            origin: Origin {
                run: run.id,
                cluster: run.plan.source.cluster.clone(),
                node: run.plan.source.node.clone(),
                queue: run.plan.source.queue.clone(),
            },
        }
    }
}

/// What the target holds of a batch after its commit.
pub(crate) struct Landed {
    pub(crate) sent: Sent,
    /// Messages that lacked their original source id.
    pub(crate) missing_original: i64,
}

impl Landed {
    /// The indexes in the batch of its proven poison.
    pub(crate) fn poisoned(&self) -> HashSet<usize> {
        self.sent.poison.iter().map(|p| p.index).collect()
    }

    /// What the batch `taken` adds to the run's counters: what landed, its proven poison left out — poison bytes
    /// by [`Received::body_len`], so a spooled large poison body is not counted as 0 bytes. What a dead message
    /// queue took is counted by the dead-letter step.
    pub(crate) fn count(&self, taken: &Taken) -> BatchCount {
        let poisoned = self.poisoned();
        let poison_bytes: u64 = poisoned.iter().map(|&i| taken.received[i].body_len()).sum();
        BatchCount {
            delivered: (taken.received.len() - poisoned.len()) as i64,
            delivered_bytes: taken.bytes.saturating_sub(poison_bytes) as i64,
            dead_lettered: 0,
            already_on_target: self.sent.already,
            one_by_one: self.sent.one_by_one,
            original_id_missing: self.missing_original,
        }
    }
}

/// The target side of a relayed batch, the same for a move and a copy: `taken` sent to the target in one
/// transaction, each message with its outbound headers (`mode` says which), and committed — poison proven one
/// message per transaction ([`send_batch_proving`]).
pub(crate) async fn send_taken(
    target_session: &artemis_core::Session,
    watch: &TargetWatch<'_>,
    taken: &Taken,
    route: &Route,
    mode: Mode,
    target_attempts: u32,
    accepted_before: bool,
) -> Result<Landed, SendFailure> {
    let (prepared, missing_original) = outbound_batch(&taken.received, &route.target, &route.origin, mode);
    let sent =
        send_batch_proving(target_session, watch, &taken.received, &prepared, target_attempts, accepted_before).await?;
    Ok(Landed { sent, missing_original })
}

/// The outbound headers of a received batch, and how many lacked their original source id.
pub(crate) fn outbound_batch(
    received: &[Received],
    target: &OutboundTarget,
    origin: &Origin,
    mode: Mode,
) -> (Vec<MessageHeaders>, i64) {
    let mut missing_original = 0i64;
    let prepared = received
        .iter()
        .map(|r| {
            let out = outbound_headers(&r.delivery.message().headers, r.delivery.message_id(), mode, target, origin);
            if out.original_message_id.is_none() {
                missing_original += 1;
            }
            out.headers
        })
        .collect();
    (prepared, missing_original)
}

/// The target refused room.
pub(crate) struct Full {
    /// The broker's error.
    pub error: artemis_core::Error,
    /// Whether it came in one-by-one mode (some messages may be committed on the target).
    pub one_by_one: bool,
}

/// Why a batch could not be committed on the target.
pub(crate) enum SendFailure {
    /// The address is full: wait for room.
    Full(Full),
    /// The target queue changed while the batch was being sent (deleted, disabled, …; see
    /// [`recheck_before_commit`]): the transaction was rolled back instead of committed — or the change was found
    /// just after the commit ([`recheck_after_commit`]).
    Refused {
        /// Why, in words.
        words: String,
        /// Whether any of the batch may be on the target, so it stays in doubt: in one-by-one mode the messages
        /// before the refusal are committed, and a change found just after the commit may have come after it
        /// ([`may_hold_the_batch`]).
        maybe_on_target: bool,
    },
    /// Anything else.
    Other(artemis_core::Error),
}

/// The target queue as a batch found it just before sending, checked again before every target commit: the
/// guard's look at the start of the batch is too early for a queue deleted or disabled while the batch is sent
/// (see [`recheck_before_commit`]). A Core queue query each time: no management permit.
pub(crate) struct TargetWatch<'a> {
    conn: &'a artemis_core::Connection,
    queue: String,
    display: String,
    before: QueueView,
}

impl<'a> TargetWatch<'a> {
    /// Looks at the target queue `queue` (`display` for words) before anything is sent.
    pub(crate) async fn start(
        conn: &'a artemis_core::Connection,
        queue: &str,
        display: &str,
    ) -> Result<TargetWatch<'a>, RelayError> {
        match conn.queue_query(queue).await? {
            Some(info) => {
                let before = QueueView::from(&info);
                recheck_before_commit(display, &before, Some(&before))
                    .map_err(|words| RelayError::refused(Code::TargetChanged, words))?;
                Ok(TargetWatch { conn, queue: queue.to_string(), display: display.to_string(), before })
            }
            None => Err(RelayError::refused(
                Code::TargetChanged,
                format!(
                    "the target queue {display} no longer exists: a send would be dropped or re-create it by \
                 auto-create, so nothing was sent"
                ),
            )),
        }
    }

    async fn check(&self, one_by_one: bool) -> Result<(), SendFailure> {
        let after = self.conn.queue_query(&self.queue).await.map_err(SendFailure::Other)?;
        recheck_before_commit(&self.display, &self.before, after.map(|q| QueueView::from(&q)).as_ref())
            .map_err(|words| SendFailure::Refused { words, maybe_on_target: one_by_one })
    }

    /// The look again once the commit is done: a change between the last look and the commit is only seen here,
    /// and the broker commits into a queue deleted or disabled meanwhile without a word ([`recheck_after_commit`]).
    /// A refusal here keeps the batch unacknowledged in staging.
    async fn check_committed(&self, one_by_one: bool) -> Result<(), SendFailure> {
        let after = self.conn.queue_query(&self.queue).await.map_err(SendFailure::Other)?.map(|q| QueueView::from(&q));
        recheck_after_commit(&self.display, &self.before, after.as_ref()).map_err(|words| SendFailure::Refused {
            words,
            maybe_on_target: one_by_one || may_hold_the_batch(after.as_ref()),
        })
    }
}

/// What a batch's sends achieved.
pub(crate) struct Sent {
    /// Messages the target already had (duplicates).
    pub already: i64,
    /// Whether the batch went one message per transaction.
    pub one_by_one: bool,
    /// Messages proven poison (docs/dead-message-queue.md): never committed on the target; the rest of the batch is.
    pub poison: Vec<Poison>,
}

/// Sends a batch to the target in one transaction and commits it, once `watch` finds the target queue still acceptable
/// after the sends, proving poison (docs/dead-message-queue.md). Artemis rejects a whole transaction that holds one duplicate, so a
/// whole transaction refused for a duplicate or for a refusal that may be one message's ([`poison::may_be_poison`])
/// goes again one message per transaction; there a message the target refuses on its own is tried `target_attempts`
/// times in all. Only when at least one other message of the batch was committed meanwhile are the refused ones proven
/// poison (returned in [`Sent::poison`]): a batch where nothing commits says more about the target than about its
/// messages, and stays a transient failure. A batch of **one** has no other message: there the messages this run
/// already committed to the target (`accepted_before`) are the ones around it, so a lone message at the end of a
/// selection is not left to stall the run.
pub(crate) async fn send_batch_proving(
    target_session: &artemis_core::Session,
    watch: &TargetWatch<'_>,
    received: &[Received],
    prepared: &[MessageHeaders],
    target_attempts: u32,
    accepted_before: bool,
) -> Result<Sent, SendFailure> {
    let producer = target_producer(target_session, prepared);
    let target = Target { session: target_session, producer: &producer, watch };
    if target.send_whole(received, prepared).await? {
        return Ok(Sent { already: 0, one_by_one: false, poison: Vec::new() });
    }
    let mut already = 0i64;
    let mut committed = 0usize;
    let mut poison: Vec<Poison> = Vec::new();
    for (index, (r, headers)) in received.iter().zip(prepared).enumerate() {
        match target.send_alone(index, r, headers, target_attempts).await? {
            Alone::Committed => committed += 1,
            Alone::Already => already += 1,
            Alone::Refused(p) => poison.push(p),
        }
    }
    let lone_after_others = received.len() == 1 && accepted_before;
    if committed == 0 && !poison.is_empty() && !lone_after_others {
        // Nothing around the refused messages was committed: no proof.
        return Err(SendFailure::Other(poison.swap_remove(0).error));
    }
    Ok(Sent { already, one_by_one: true, poison })
}

/// A producer for the batch's target. Flow-controlled like any Core producer (§8.6): an address that blocks its
/// producers when full (BLOCK) is honoured — without credits the broker would take the sends past its
/// max-size-bytes — and one that stays blocked for TARGET_CREDIT_WAIT counts as full (rolled back, and the run
/// waits for room).
fn target_producer(session: &artemis_core::Session, prepared: &[MessageHeaders]) -> artemis_core::Producer {
    match prepared.first().and_then(|h| h.address.as_ref()) {
        Some(fqqn) => {
            session.producer_with_flow_control(&fqqn.to_string_lossy(), TARGET_CREDIT_WINDOW, TARGET_CREDIT_WAIT)
        }
        None => session.producer(None),
    }
}

/// How one message sent in a transaction of its own ended.
enum Alone {
    /// Committed on the target.
    Committed,
    /// The target had it already (its duplicate cache refused it).
    Already,
    /// Refused on its own every attempt: poison, if others around it commit.
    Refused(Poison),
}

/// The target side of one batch: its transacted session, producer, and the watch on the target queue.
struct Target<'a> {
    session: &'a artemis_core::Session,
    producer: &'a artemis_core::Producer,
    watch: &'a TargetWatch<'a>,
}

impl Target<'_> {
    /// The whole batch in one transaction: `true` when committed, `false` when rolled back for a duplicate or a
    /// refusal that may be one message's (to be sent one by one).
    async fn send_whole(&self, received: &[Received], prepared: &[MessageHeaders]) -> Result<bool, SendFailure> {
        let all = async {
            for (r, headers) in received.iter().zip(prepared) {
                send_target(self.producer, r, headers).await.map_err(SendFailure::Other)?;
            }
            self.watch.check(false).await?;
            self.session.commit().await.map_err(SendFailure::Other)?;
            fault::pause("target-committed").await;
            self.watch.check_committed(false).await
        };
        match all.await {
            Ok(()) => Ok(true),
            Err(SendFailure::Other(e)) if e.is_duplicate_id() || poison::may_be_poison(&e) => {
                let _ = self.session.rollback().await;
                Ok(false)
            }
            Err(SendFailure::Other(e)) if target_full(&e) => {
                let _ = self.session.rollback().await;
                Err(SendFailure::Full(Full { error: e, one_by_one: false }))
            }
            Err(refused @ SendFailure::Refused { .. }) => {
                let _ = self.session.rollback().await;
                Err(refused)
            }
            Err(e) => Err(e),
        }
    }

    /// Message `index` in a transaction of its own, tried up to `attempts` times while the target refuses it on
    /// its own.
    async fn send_alone(
        &self,
        index: usize,
        r: &Received,
        headers: &MessageHeaders,
        attempts: u32,
    ) -> Result<Alone, SendFailure> {
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            // (failure, whether it came at the commit)
            let single = async {
                send_target(self.producer, r, headers).await.map_err(|e| (SendFailure::Other(e), false))?;
                self.watch.check(true).await.map_err(|f| (f, false))?;
                self.session.commit().await.map_err(|e| (SendFailure::Other(e), true))?;
                self.watch.check_committed(true).await.map_err(|f| (f, false))
            };
            let failure = match single.await {
                Ok(()) => return Ok(Alone::Committed),
                Err(failure) => failure,
            };
            match failure {
                (SendFailure::Other(e), _) if e.is_duplicate_id() => {
                    let _ = self.session.rollback().await;
                    return Ok(Alone::Already);
                }
                (SendFailure::Other(e), _) if target_full(&e) => {
                    let _ = self.session.rollback().await;
                    return Err(SendFailure::Full(Full { error: e, one_by_one: true }));
                }
                (refused @ SendFailure::Refused { .. }, _) => {
                    let _ = self.session.rollback().await;
                    return Err(refused);
                }
                (SendFailure::Other(e), committing) if poison::may_be_poison(&e) => {
                    let _ = self.session.rollback().await;
                    if attempt >= attempts.max(1) {
                        let reason = poison::reason_of(&e, committing);
                        tracing::info!(message = index, attempts = attempt, error = %e, "the target refused a message");
                        return Ok(Alone::Refused(Poison { index, error: e, reason, attempts: attempt }));
                    }
                }
                (e, _) => return Err(e),
            }
        }
    }
}

/// Sends one message to the target, unless the test seam ([`fault::refusal`]) refuses it as the target would.
async fn send_target(
    producer: &artemis_core::Producer,
    r: &Received,
    headers: &MessageHeaders,
) -> Result<(), artemis_core::Error> {
    if let Some(refused) = fault::refusal(headers) {
        return Err(refused);
    }
    send_one(producer, r, headers).await
}

/// Producer credits the relay asks the target for at a time (the Java client's default producer window).
const TARGET_CREDIT_WINDOW: u32 = 64 * 1024;

/// How long a send waits for producer credits before its target address counts as full.
const TARGET_CREDIT_WAIT: Duration = Duration::from_secs(10);

/// The target has no room: full under FAIL (refused), or under BLOCK (no credits in [`TARGET_CREDIT_WAIT`]).
fn target_full(e: &artemis_core::Error) -> bool {
    e.is_address_full() || e.is_producer_blocked()
}

/// Why the run waits after the target refused room, in words.
pub(crate) fn full_words(e: &Full) -> String {
    if e.error.is_producer_blocked() {
        format!(
            "the target address is full and blocks its producers (address-full-policy BLOCK): no producer credits \
             within {} s",
            TARGET_CREDIT_WAIT.as_secs()
        )
    } else {
        format!("the target refused a send: {}", e.error)
    }
}

/// Sends one received message: from memory, or streamed from its spool file.
pub(crate) async fn send_one(
    producer: &artemis_core::Producer,
    r: &Received,
    headers: &MessageHeaders,
) -> Result<(), artemis_core::Error> {
    match r.spool_file() {
        Some(file) => {
            let reader = file.reader().await.map_err(|e| artemis_core::Error::BodyIo(std::sync::Arc::new(e)))?;
            producer.send_large_from(headers, reader).await
        }
        None => {
            let message = CoreMessage { headers: headers.clone(), body: r.delivery.message().body.clone() };
            producer.send(&message).await
        }
    }
}

pub(crate) fn core_routing(r: RoutingType) -> artemis_core::admin::RoutingType {
    match r {
        RoutingType::Anycast => artemis_core::admin::RoutingType::Anycast,
        RoutingType::Multicast => artemis_core::admin::RoutingType::Multicast,
    }
}
