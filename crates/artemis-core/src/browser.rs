//! Browsers: browse-only consumers that see a queue's messages without
//! consuming them or raising their delivery counts (core-protocol.md §10).
//!
//! **How the end of the queue is detected.** The broker says nothing when its
//! browse iterator runs out. When the browser's buffer is empty (and no large
//! message is half received), it sends SESS_FORCE_CONSUMER_DELIVERY with a fresh
//! sequence number. The broker first prompts the browser's delivery, then queues
//! a marker message (`_hornetq.forced.delivery.seq = sequence`) on the queue's
//! executor behind it (`ServerConsumerImpl.forceDelivery`: `promptDelivery()`,
//! then the marker task). A marker is *quiet* if
//!
//! 1. no frame at all arrived between the probe and its marker — no message, no
//!    start or chunk of a large message; and
//! 2. by the broker's own count the browser still had credit: credits granted
//!    (initial window plus every SESS_FLOWTOKEN, all sent before the probe)
//!    minus the frame sizes charged for every delivery before the marker
//!    (markers themselves are free) is positive.
//!
//! The browse ends at the **second quiet marker in a row**. After any other
//! marker the consumed credits are given back and a new probe goes out. Markers
//! of earlier probes are ignored.
//!
//! Why one quiet marker is not enough: while a large message is being sent,
//! `promptDelivery()` resumes the large-message deliverer instead of queueing the
//! browse deliverer, and the browse deliverer is queued again only by the task
//! that writes the last chunk, *after* it has written it and closed the body
//! (`resumeLargeMessageRunnable`: `deliver()` → `finish()`, then
//! `forceDelivery()`). A probe sent as soon as the last chunk arrives can reach
//! the broker inside that window: its marker is then queued *ahead of* the browse
//! deliverer and arrives with nothing before it although the queue goes on (on
//! a freshly started broker, e.g. after a restart, 2,328 of 6,000 seen, and 151
//! more frames followed that marker). The quiet marker itself was written by a
//! task queued behind that last-chunk task on the same serial executor, so by
//! the time the second probe is sent the browse deliverer is already queued,
//! ahead of the second marker: whatever is left comes first. A large message it
//! starts counts under rule 1 (its marker may overtake the chunks, which the
//! broker queues task by task).
//!
//! A new probe goes out after every marker that is not the end (rather than
//! waiting for the broker after SESS_FLOWTOKEN) because on 2.40.0 a browser that
//! ran out of credits is not reliably resumed by SESS_FLOWTOKEN alone (the Java
//! `QueueBrowser` with a 4 KiB window sees 25 of 120 messages); each probe
//! resumes it.

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
    /// A frame (message, large-message start or chunk) arrived since the current probe was sent.
    frame_since_probe: bool,
    /// Quiet markers in a row (module doc); the browse ends at the second.
    quiet_markers: u8,
    finished: bool,
}

impl Browser {
    pub(crate) fn new(consumer: Consumer) -> Self {
        Browser { consumer, sequence: 0, probe: None, frame_since_probe: false, quiet_markers: 0, finished: false }
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
                        self.frame_since_probe = false;
                    }
                    let after = self.consumer.session().link.call_timeout();
                    match tokio::time::timeout(after, self.consumer.events.recv()).await {
                        Ok(event) => event,
                        Err(_) => return Err(Error::Timeout { op: "browse", after }),
                    }
                }
            };
            let step = self.consumer.step(event, sink.is_some()).await?;
            if !matches!(step, Step::Marker { .. }) {
                // Every other step is a frame of the queue: a message, or the start or a chunk of a large one.
                if self.quiet_markers > 0 {
                    tracing::debug!(consumer_id = self.consumer.id(), "the browse goes on after a quiet marker");
                }
                self.frame_since_probe = true;
                self.quiet_markers = 0;
            }
            match step {
                Step::Delivery(d) => return Ok(Some(d)),
                Step::Chunk { chunk, wire_len, done } => {
                    let sink = sink.as_mut().expect("chunks come only when streaming");
                    sink.write_all(&chunk).await.map_err(|e| Error::BodyIo(Arc::new(e)))?;
                    self.consumer.consumed(wire_len).await?;
                    if let Some(d) = done {
                        sink.flush().await.map_err(|e| Error::BodyIo(Arc::new(e)))?;
                        return Ok(Some(d));
                    }
                }
                Step::Marker { sequence, server_had_credit } if Some(sequence) == self.probe => {
                    self.probe = None;
                    if server_had_credit && !self.frame_since_probe {
                        self.quiet_markers += 1;
                        if self.quiet_markers >= 2 {
                            self.finished = true;
                            return Ok(None);
                        }
                    } else {
                        self.quiet_markers = 0;
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
