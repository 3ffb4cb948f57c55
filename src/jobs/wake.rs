//! Wake-ups of a worker's claim loop: LISTEN/NOTIFY from other processes, and pokes from this process.
//!
//! The claim loop sleeps until the earliest due `run_at` (asked of the database after every empty claim) or
//! the poll fallback, whichever is sooner; a wake-up cuts that sleep short. Notifications carry no
//! authority — a woken loop just claims again — so a missed one costs latency, never correctness.
//!
//! Who wakes whom (see [`crate::jobs::lease::FencedTx`]): a handler that hands off to its run's next job
//! pokes its own process, which has just freed a task and will claim it; it sends a NOTIFY only when this
//! process is shutting down and will not. Starting a run, a requeue and a freed slot always NOTIFY.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::jobs::store::job::NOTIFY_CHANNEL;

/// The wake-up signal of one worker process's claim loop. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Wake {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    notify: Notify,
    accepting: AtomicBool,
}

impl Default for Wake {
    fn default() -> Self {
        Wake::new()
    }
}

impl Wake {
    /// A signal for a loop that accepts work.
    pub fn new() -> Wake {
        Wake { inner: Arc::new(Inner { notify: Notify::new(), accepting: AtomicBool::new(true) }) }
    }

    /// Something may be claimable: the loop claims again. A poke while the loop is busy is kept (one permit),
    /// so none is lost between its empty claim and its sleep.
    pub fn poke(&self) {
        self.inner.notify.notify_one();
    }

    /// Resolves at the next poke.
    pub async fn poked(&self) {
        self.inner.notify.notified().await;
    }

    /// This process will claim nothing more (shutting down): hand-offs must NOTIFY other processes.
    pub fn stop_accepting(&self) {
        self.inner.accepting.store(false, Ordering::SeqCst);
    }

    /// Whether this process still claims work.
    pub fn is_accepting(&self) -> bool {
        self.inner.accepting.load(Ordering::SeqCst)
    }
}

/// LISTENs on the job channel and pokes `wake` at every notification until `stop` is cancelled.
///
/// Reconnects by itself; after a lost connection it pokes once, since notifications sent meanwhile are gone.
pub async fn listen(pool: PgPool, wake: Wake, stop: CancellationToken) {
    const RETRY: Duration = Duration::from_secs(1);
    while !stop.is_cancelled() {
        let mut listener = match connect(&pool).await {
            Ok(listener) => listener,
            Err(e) => {
                tracing::warn!(error = %e, "cannot LISTEN for job notifications; retrying");
                tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(RETRY) => continue }
            }
        };
        // Anything sent before LISTEN took effect was missed.
        wake.poke();
        loop {
            let received = tokio::select! {
                _ = stop.cancelled() => return,
                received = listener.try_recv() => received,
            };
            match received {
                Ok(Some(_)) => wake.poke(),
                // The connection dropped; try_recv reconnects on its next call. Notifications meanwhile are lost.
                Ok(None) => wake.poke(),
                Err(e) => {
                    tracing::warn!(error = %e, "job notification listener failed; reconnecting");
                    wake.poke();
                    break;
                }
            }
        }
        tokio::select! { _ = stop.cancelled() => return, _ = tokio::time::sleep(RETRY) => {} }
    }
}

async fn connect(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(NOTIFY_CHANNEL).await?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_poke_before_waiting_is_not_lost() {
        let wake = Wake::new();
        wake.poke();
        tokio::time::timeout(Duration::from_secs(1), wake.poked()).await.expect("the stored poke wakes the waiter");
    }

    #[test]
    fn stops_accepting_once() {
        let wake = Wake::new();
        assert!(wake.is_accepting());
        wake.clone().stop_accepting();
        assert!(!wake.is_accepting());
    }
}
