//! The take of a batch from a staging consumer: messages received up to the batch's limits, each large body
//! streamed to the worker's spool as it arrives, so a batch never holds a large body in memory.

use std::collections::HashSet;

use artemis_core::{ConsumerOptions, Delivery, Window};

use super::spool::{Spool, SpoolFile};
use super::Code;
use super::{RelayConfig, RelayError};

/// The options of a batch's consumer on staging: a small window. Staging holds up to two batches, and whatever the
/// broker delivers beyond the batch it takes is given back when the consumer closes, then delivered again to the
/// next batch's consumer: with the broker's default window (1 MiB) that was up to a batch of 1 KiB messages
/// delivered, decoded and cancelled twice. The broker sends while it has credit, so what is delivered beyond the
/// take is at most about one window; at 64 KiB, credits come back every 32 KiB, which a local round trip refills
/// long before the worker has read them.
pub(crate) fn staging_consumer() -> ConsumerOptions {
    ConsumerOptions::default().window(Window::Bytes(STAGING_WINDOW_BYTES))
}

/// The window of a batch's consumer on staging ([`staging_consumer`]).
const STAGING_WINDOW_BYTES: u32 = 64 * 1024;

/// A received staging message and, for a large one, its spooled body.
pub(crate) struct Received {
    pub(crate) delivery: Delivery,
    spooled: Option<(SpoolFile, u64)>,
}

impl Received {
    /// A message received whole into memory (a browsed one).
    pub(crate) fn in_memory(delivery: Delivery) -> Received {
        Received { delivery, spooled: None }
    }

    /// A message whose large body was streamed to `file` (`len` bytes).
    pub(crate) fn spooled(delivery: Delivery, file: SpoolFile, len: u64) -> Received {
        Received { delivery, spooled: Some((file, len)) }
    }

    /// The spool file of a large body; `None`: the body is in memory.
    pub(crate) fn spool_file(&self) -> Option<&SpoolFile> {
        self.spooled.as_ref().map(|(file, _)| file)
    }

    pub(crate) fn body_len(&self) -> u64 {
        match &self.spooled {
            Some((_, len)) => *len,
            None => self.delivery.message().body.len() as u64,
        }
    }
}

/// A batch taken from the source — received from staging (a move) or browsed (a copy): its messages, their body
/// bytes, and their ids on the source side in order. It is the batch's own record: the source is acknowledged (or
/// the ledger written) from it alone, whatever else is in flight.
pub(crate) struct Taken {
    pub(crate) received: Vec<Received>,
    /// Their body bytes.
    pub(crate) bytes: u64,
    /// Their ids on the source side (staging ids, or the source queue's for a copy), in order.
    pub(crate) ids: Vec<i64>,
    /// The batch is every message its consumer was given up to its last one, in the broker's order (a consumer
    /// opened for this batch that left nothing out): one cumulative acknowledgement of the last acknowledges
    /// exactly the batch.
    every_delivery: bool,
}

impl Taken {
    /// The batch of `received` messages holding `bytes` body bytes (acknowledged one by one).
    pub(crate) fn new(received: Vec<Received>, bytes: u64) -> Taken {
        let ids = received.iter().map(|r| r.delivery.message_id()).collect();
        Taken { received, bytes, ids, every_delivery: false }
    }

    /// The batch `receipt` received from a consumer opened for it.
    pub(crate) fn from_new_consumer(receipt: Receipt) -> Taken {
        let every_delivery = receipt.left_out == 0;
        Taken { every_delivery, ..Taken::new(receipt.received, receipt.bytes) }
    }

    /// Acknowledges the batch from `consumer` but the messages at `poisoned` (they stay delivered to it, for the
    /// dead-letter step or to go back to staging as it closes), and commits `session`. With none held back from a
    /// batch that is every delivery its consumer had, one cumulative acknowledgement does it: the source broker
    /// handles one packet, not one a message.
    pub(crate) async fn acknowledge_all_but(
        &self,
        consumer: &mut artemis_core::Consumer,
        session: &artemis_core::Session,
        poisoned: &HashSet<usize>,
    ) -> Result<(), RelayError> {
        match self.received.last() {
            Some(last) if self.every_delivery && poisoned.is_empty() => consumer.ack_through(&last.delivery).await?,
            _ => {
                for (i, r) in self.received.iter().enumerate() {
                    if !poisoned.contains(&i) {
                        consumer.ack(&r.delivery).await?;
                    }
                }
            }
        }
        session.commit().await?;
        Ok(())
    }
}

/// What one receive got: the messages kept, their body bytes, and how many it received but left out.
pub(crate) struct Receipt {
    pub(crate) received: Vec<Received>,
    pub(crate) bytes: u64,
    left_out: usize,
}

/// How much one batch may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Messages.
    pub messages: usize,
    /// Body bytes (the batch ends after the message that reaches it).
    pub bytes: u64,
}

/// Receives up to `limits` from `consumer`, spooling each large body to disk as it arrives. With `only`, the
/// messages whose staging id is not in it are received but left out (they go back to staging when the
/// session ends without acknowledging them), and receiving stops once all of `only` arrived.
pub(crate) async fn receive_batch(
    consumer: &mut artemis_core::Consumer,
    spool: &Spool,
    config: &RelayConfig,
    limits: Limits,
    only: Option<&HashSet<i64>>,
) -> Result<Receipt, RelayError> {
    let mut received: Vec<Received> = Vec::new();
    let mut bytes = 0u64;
    let mut left_out = 0usize;
    let mut file = spool.file().await?;
    while received.len() < limits.messages && bytes < limits.bytes {
        if only.is_some_and(|ids| received.len() == ids.len()) {
            break;
        }
        let wait = if received.is_empty() { config.first_receive } else { config.next_receive };
        let Some(delivery) = consumer.recv_streaming(wait, file.writer()).await? else { break };
        let spooled = if delivery.body_streamed() {
            let len =
                file.finish().await.map_err(|e| RelayError::transient_in(Code::Spool, "spooling a large body", e))?;
            let full = std::mem::replace(&mut file, spool.file().await?);
            Some((full, len))
        } else {
            None
        };
        if only.is_some_and(|ids| !ids.contains(&delivery.message_id())) {
            left_out += 1;
            continue;
        }
        let item = Received { delivery, spooled };
        bytes += item.body_len();
        received.push(item);
    }
    Ok(Receipt { received, bytes, left_out })
}
