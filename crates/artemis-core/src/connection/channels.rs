//! The connection task's bookkeeping per channel: blocking calls waiting for an
//! answer (in order, or by correlation id), consumer routes, producer-credit
//! routes; and [`Channels::fail_all`], which hands one error to every waiter so
//! that nothing waits forever (style-examples §5.2).
//!
//! Pure bookkeeping: no socket, no clock of its own (deadlines are passed in), so
//! it is unit-tested directly.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::command::{ConsumerEvent, Matching, ProducerCreditEvent, Reply};
use crate::error::{BrokerError, Error};
use crate::protocol::packet::ExceptionResponse;
use crate::protocol::Packet;

/// A blocking call waiting for its answer.
#[derive(Debug)]
pub(crate) struct Pending {
    pub op: &'static str,
    pub timeout: Duration,
    pub deadline: Instant,
    pub reply: oneshot::Sender<Reply>,
}

#[derive(Debug)]
struct ConsumerRoute {
    sink: mpsc::UnboundedSender<ConsumerEvent>,
    generation: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct ChannelState {
    /// Uncorrelated calls, answered in request order (§4.2: the broker handles a
    /// session's packets one at a time and answers in order).
    in_order: VecDeque<Pending>,
    /// Calls answered by correlation id (sends and commits; may be pipelined).
    correlated: HashMap<i64, Pending>,
    consumers: HashMap<i64, ConsumerRoute>,
    producer_credits: Option<mpsc::UnboundedSender<ProducerCreditEvent>>,
}

/// Outcome of offering a response packet to the waiting calls.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Matched {
    /// It answered a call (whose caller may have gone away meanwhile).
    Answered,
    /// No call was waiting for it.
    Unsolicited,
}

/// Every channel's bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct Channels {
    channels: HashMap<i64, ChannelState>,
}

fn broker_error(e: &ExceptionResponse, op: &'static str) -> Error {
    Error::Broker(BrokerError { kind: e.exception_type(), code: e.code, message: e.message.clone(), op })
}

impl Channels {
    /// Records a blocking call.
    pub fn add_call(&mut self, channel: i64, matching: Matching, pending: Pending) {
        let state = self.channels.entry(channel).or_default();
        match matching {
            Matching::InOrder => state.in_order.push_back(pending),
            Matching::Correlated(id) => {
                state.correlated.insert(id, pending);
            }
        }
    }

    /// Hands a response packet (NULL_RESPONSE, EXCEPTION, a query answer,
    /// CREATESESSION_RESP) to the call it answers: by correlation id when it
    /// carries one that a call is waiting for, otherwise the oldest in-order call.
    pub fn answer(&mut self, channel: i64, packet: Packet) -> Matched {
        let Some(state) = self.channels.get_mut(&channel) else {
            return Matched::Unsolicited;
        };
        let correlated =
            packet.response_correlation_id().filter(|id| *id != -1).and_then(|id| state.correlated.remove(&id));
        let Some(pending) = correlated.or_else(|| state.in_order.pop_front()) else {
            return Matched::Unsolicited;
        };
        let reply = match packet {
            Packet::ExceptionResponse(e) => Err(broker_error(&e, pending.op)),
            other => Ok(other),
        };
        // The caller may have dropped its receiver (a close queued from Drop).
        let _ = pending.reply.send(reply);
        Matched::Answered
    }

    /// Registers a consumer's delivery route.
    pub fn subscribe(
        &mut self,
        channel: i64,
        consumer_id: i64,
        sink: mpsc::UnboundedSender<ConsumerEvent>,
        generation: Arc<AtomicU64>,
    ) {
        self.channels.entry(channel).or_default().consumers.insert(consumer_id, ConsumerRoute { sink, generation });
    }

    /// Removes a consumer's route; its stream ends.
    pub fn unsubscribe(&mut self, channel: i64, consumer_id: i64) {
        if let Some(state) = self.channels.get_mut(&channel) {
            state.consumers.remove(&consumer_id);
        }
    }

    /// Registers where a session's producer credits go.
    pub fn producer_credits(&mut self, channel: i64, sink: mpsc::UnboundedSender<ProducerCreditEvent>) {
        self.channels.entry(channel).or_default().producer_credits = Some(sink);
    }

    /// Sends a producer-credit event to its session, if it listens.
    pub fn route_producer_credits(&mut self, channel: i64, event: ProducerCreditEvent) {
        if let Some(sink) = self.channels.get(&channel).and_then(|s| s.producer_credits.as_ref()) {
            let _ = sink.send(event);
        }
    }

    /// The current rollback generation of a consumer's session, if it is routed.
    pub fn generation(&self, channel: i64, consumer_id: i64) -> Option<u64> {
        self.channels.get(&channel)?.consumers.get(&consumer_id).map(|r| r.generation.load(Ordering::Acquire))
    }

    /// Sends an event to a consumer; `false` if it has no route (closed meanwhile:
    /// the broker may still have had deliveries in flight, which are dropped).
    pub fn route(&mut self, channel: i64, consumer_id: i64, event: ConsumerEvent) -> bool {
        match self.channels.get(&channel).and_then(|s| s.consumers.get(&consumer_id)) {
            Some(route) => route.sink.send(event).is_ok(),
            None => false,
        }
    }

    /// Forgets a channel: waiting calls fail as closed, consumers' streams end.
    pub fn forget(&mut self, channel: i64) {
        if let Some(state) = self.channels.remove(&channel) {
            fail_state(state, &Error::Closed { what: "session" });
        }
    }

    /// The first call whose deadline has passed, if any.
    pub fn expired(&self, now: Instant) -> Option<(&'static str, Duration)> {
        self.channels
            .values()
            .flat_map(|s| s.in_order.iter().chain(s.correlated.values()))
            .find(|p| p.deadline <= now)
            .map(|p| (p.op, p.timeout))
    }

    /// How many calls wait for an answer.
    #[cfg(test)]
    pub fn pending_calls(&self) -> usize {
        self.channels.values().map(|s| s.in_order.len() + s.correlated.len()).sum()
    }

    /// Fails every waiting call and every consumer with `error`, and forgets
    /// everything. A call whose own deadline expired gets the `Timeout` itself.
    pub fn fail_all(&mut self, error: &Error, now: Instant) {
        for (_, state) in self.channels.drain() {
            for p in state.in_order.into_iter().chain(state.correlated.into_values()) {
                let e = if p.deadline <= now { Error::Timeout { op: p.op, after: p.timeout } } else { error.clone() };
                let _ = p.reply.send(Err(e));
            }
            for route in state.consumers.into_values() {
                let _ = route.sink.send(ConsumerEvent::Failed(error.clone()));
            }
            if let Some(sink) = state.producer_credits {
                let _ = sink.send(ProducerCreditEvent::Failed(error.clone()));
            }
        }
    }
}

fn fail_state(state: ChannelState, error: &Error) {
    for p in state.in_order.into_iter().chain(state.correlated.into_values()) {
        let _ = p.reply.send(Err(error.clone()));
    }
    // Dropping the routes ends the consumers' streams.
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CloseReason;
    use crate::protocol::packet::{NullResponse, SessionQueueQueryResponseV3};

    fn pending(op: &'static str, deadline: Instant) -> (Pending, oneshot::Receiver<Reply>) {
        let (tx, rx) = oneshot::channel();
        (Pending { op, timeout: Duration::from_secs(1), deadline, reply: tx }, rx)
    }

    #[tokio::test]
    async fn correlated_answers_skip_the_in_order_queue() {
        let now = Instant::now();
        let later = now + Duration::from_secs(60);
        let mut ch = Channels::default();
        let (q, mut q_rx) = pending("queue query", later);
        let (s, mut s_rx) = pending("send", later);
        ch.add_call(10, Matching::InOrder, q);
        ch.add_call(10, Matching::Correlated(7), s);
        assert_eq!(ch.answer(10, NullResponse { correlation_id: 7 }.into()), Matched::Answered);
        assert!(matches!(s_rx.try_recv(), Ok(Ok(Packet::NullResponse(_)))));
        assert!(q_rx.try_recv().is_err(), "the in-order call is still waiting");
        let answer = SessionQueueQueryResponseV3::default();
        assert_eq!(ch.answer(10, answer.into()), Matched::Answered);
        assert!(matches!(q_rx.try_recv(), Ok(Ok(Packet::SessionQueueQueryResponseV3(_)))));
        assert_eq!(ch.answer(10, NullResponse { correlation_id: -1 }.into()), Matched::Unsolicited);
    }

    #[tokio::test]
    async fn exceptions_become_broker_errors_naming_the_operation() {
        let now = Instant::now();
        let mut ch = Channels::default();
        let (p, mut rx) = pending("create consumer", now + Duration::from_secs(60));
        ch.add_call(10, Matching::InOrder, p);
        let e = ExceptionResponse {
            code: 100,
            message: Some("AMQ229017: Queue q does not exist".into()),
            correlation_id: None,
        };
        ch.answer(10, e.into());
        let err = rx.try_recv().unwrap().unwrap_err();
        assert!(err.is_no_such_queue());
        assert_eq!(err.broker_error().map(|b| b.op), Some("create consumer"));
    }

    #[tokio::test]
    async fn fail_all_reaches_every_call_and_consumer() {
        let now = Instant::now();
        let mut ch = Channels::default();
        let (a, mut a_rx) = pending("commit", now + Duration::from_secs(60));
        let (b, mut b_rx) = pending("stop", now - Duration::from_millis(1));
        ch.add_call(10, Matching::Correlated(1), a);
        ch.add_call(11, Matching::InOrder, b);
        let (tx, mut c_rx) = mpsc::unbounded_channel();
        ch.subscribe(10, 0, tx, Arc::new(AtomicU64::new(0)));
        assert_eq!(ch.expired(now).map(|e| e.0), Some("stop"));
        let err = Error::ConnectionLost(CloseReason::LocalClose);
        ch.fail_all(&err, now);
        assert!(matches!(a_rx.try_recv(), Ok(Err(Error::ConnectionLost(_)))));
        assert!(matches!(b_rx.try_recv(), Ok(Err(Error::Timeout { op: "stop", .. }))));
        assert!(matches!(c_rx.try_recv(), Ok(ConsumerEvent::Failed(_))));
        assert_eq!(ch.pending_calls(), 0);
    }
}
