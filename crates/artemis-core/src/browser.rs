//! Browsers: browse-only consumers that see a queue's messages without
//! consuming them or raising their delivery counts (core-protocol.md §10).
//!
//! **How the end of the queue is detected.** The broker says nothing when its
//! browse iterator runs out. When the browser's buffer is empty, it sends
//! SESS_FORCE_CONSUMER_DELIVERY with a fresh sequence number. The broker first
//! re-runs the browser's deliverer, then queues a marker message
//! (`_hornetq.forced.delivery.seq = sequence`) on the queue's executor behind it
//! (`ServerConsumerImpl.forceDelivery`: `promptDelivery()`, then the marker task),
//! so every message the deliverer can send arrives before the marker. The
//! marker means "end" only if
//!
//! 1. no message arrived between the probe and its marker — a deliverer that
//!    still had messages and credit would have sent at least one; and
//! 2. by the broker's own count the browser still had credit: credits granted
//!    (initial window plus every SESS_FLOWTOKEN, all sent before the probe)
//!    minus the frame sizes charged for every delivery before the marker
//!    (markers themselves are free) is positive.
//!
//! Otherwise the consumed credits are given back and a new probe goes out.
//! Condition 1 is needed because on 2.40.0 a browser that ran out of credits is
//! not reliably resumed by SESS_FLOWTOKEN alone (the Java `QueueBrowser` with a
//! 4 KiB window sees 25 of 120 messages); each probe resumes it. Markers of
//! earlier probes are ignored.

use std::sync::Arc;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::error::TryRecvError;

use crate::consumer::{Consumer, Delivery, Step};
use crate::error::Error;
use crate::protocol::packet::SessionForceConsumerDelivery;

/// A browser on one queue; see the module doc.
#[derive(Debug)]
pub struct Browser {
    consumer: Consumer,
    sequence: i64,
    probe: Option<i64>,
    /// A delivery arrived since the current probe was sent.
    delivered_since_probe: bool,
    finished: bool,
}

impl Browser {
    pub(crate) fn new(consumer: Consumer) -> Self {
        Browser { consumer, sequence: 0, probe: None, delivered_since_probe: false, finished: false }
    }

    /// The next message in the queue's order, or `Ok(None)` at the end of the
    /// queue. Waits at most one call timeout for the broker's marker. A large
    /// message is assembled in memory (refused above the consumer's
    /// `max_large_in_memory`).
    pub async fn next(&mut self) -> Result<Option<Delivery>, Error> {
        self.next_inner(None::<&mut tokio::io::Sink>).await
    }

    /// Like [`Browser::next`], but the body of a large message is written to
    /// `sink` as its chunks arrive, never held in memory (as
    /// [`Consumer::recv_streaming`]); the delivery then has an empty body and
    /// [`Delivery::body_streamed`]. Regular messages come back as usual and
    /// nothing is written to `sink`. Pass `tokio::io::sink()` to see every
    /// message's headers without keeping any large body.
    pub async fn next_streaming<W: AsyncWrite + Unpin>(&mut self, sink: &mut W) -> Result<Option<Delivery>, Error> {
        self.next_inner(Some(sink)).await
    }

    async fn next_inner<W: AsyncWrite + Unpin>(&mut self, mut sink: Option<&mut W>) -> Result<Option<Delivery>, Error> {
        if self.finished {
            return Ok(None);
        }
        loop {
            let event = match self.consumer.events.try_recv() {
                Ok(event) => Some(event),
                Err(TryRecvError::Disconnected) => None,
                Err(TryRecvError::Empty) => {
                    if self.probe.is_none() && !self.consumer.large_in_progress() {
                        self.sequence += 1;
                        let packet =
                            SessionForceConsumerDelivery { consumer_id: self.consumer.id(), sequence: self.sequence };
                        self.consumer.session().link.send(self.consumer.channel(), packet).await?;
                        self.probe = Some(self.sequence);
                        self.delivered_since_probe = false;
                    }
                    let after = self.consumer.session().link.call_timeout();
                    match tokio::time::timeout(after, self.consumer.events.recv()).await {
                        Ok(event) => event,
                        Err(_) => return Err(Error::Timeout { op: "browse", after }),
                    }
                }
            };
            match self.consumer.step(event, sink.is_some()).await? {
                Step::Delivery(d) => {
                    self.delivered_since_probe = true;
                    return Ok(Some(d));
                }
                Step::Chunk { chunk, wire_len, done } => {
                    let sink = sink.as_mut().expect("chunks come only when streaming");
                    sink.write_all(&chunk).await.map_err(|e| Error::BodyIo(Arc::new(e)))?;
                    self.consumer.consumed(wire_len).await?;
                    if let Some(d) = done {
                        sink.flush().await.map_err(|e| Error::BodyIo(Arc::new(e)))?;
                        self.delivered_since_probe = true;
                        return Ok(Some(d));
                    }
                }
                Step::Marker { sequence, server_had_credit } if Some(sequence) == self.probe => {
                    self.probe = None;
                    if server_had_credit && !self.delivered_since_probe {
                        self.finished = true;
                        return Ok(None);
                    }
                    // More may remain: give the credits back and probe again.
                    self.consumer.flush_credits().await?;
                }
                Step::Marker { .. } | Step::Nothing => {}
            }
        }
    }

    /// Every remaining message, up to the end of the queue.
    pub async fn collect_all(&mut self) -> Result<Vec<Delivery>, Error> {
        let mut out = Vec::new();
        while let Some(d) = self.next().await? {
            out.push(d);
        }
        Ok(out)
    }

    /// `true` once the end of the queue was seen.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Closes the browser.
    pub async fn close(mut self) -> Result<(), Error> {
        self.consumer.close_inner().await
    }
}
