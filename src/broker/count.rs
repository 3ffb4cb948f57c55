//! Counting what a filter matches on a queue by reading the queue through a Core browser: exact at any depth.
//!
//! The broker's own filtered count (`countMessages(filter)`) scans at most one `management-browse-page-size` of the
//! queue (200 by default) and says nothing of the rest (docs/broker-notes.md), so on a real backlog it is only a
//! lower bound. A browser with the filter is the broker's full iteration of the queue, the filter applied on the
//! broker: it sees every message the broker's filtered count would see (neither those in delivery to a consumer
//! nor those waiting for a delivery time; paged ones too), with no page limit. Reading costs a transfer of every
//! matching message (large bodies are read past, never kept), so a count stops at a limit of messages or of time
//! and then says "at least" (ADR 0015).

use std::time::Duration;

use artemis_core::{Connection, ConsumerOptions, SessionOptions};
use tokio::time::Instant;

/// What a browse counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// The browse reached the end of the queue: exactly this many matched.
    Exact(u64),
    /// The browse stopped at its limit of messages or of time with this many matched: there are at least as many.
    AtLeast(u64),
}

impl Counted {
    /// The exact count, when the browse reached the end.
    pub fn exact(self) -> Option<u64> {
        match self {
            Counted::Exact(n) => Some(n),
            Counted::AtLeast(_) => None,
        }
    }

    /// Whether the browse found no matching message at all (read to the end of the queue).
    pub fn is_none_left(self) -> bool {
        self == Counted::Exact(0)
    }
}

/// Where a count stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountLimit {
    /// At this many matching messages.
    pub messages: u64,
    /// After this long.
    pub time: Duration,
}

/// Counts the messages of `queue` that `filter` matches (every message without one), by a Core browse on `conn`,
/// stopping at `limit`.
pub async fn count_matching(
    conn: &Connection,
    queue: &str,
    filter: Option<&str>,
    limit: CountLimit,
) -> Result<Counted, artemis_core::Error> {
    let session = conn.create_session(SessionOptions::auto_commit()).await?;
    let mut options = ConsumerOptions::default();
    if let Some(filter) = filter {
        options = options.filter(filter);
    }
    let counted = match session.create_browser(queue, options).await {
        Ok(mut browser) => {
            let counted = read_to_limit(&mut browser, limit).await;
            let _ = browser.close().await;
            counted
        }
        Err(e) => Err(e),
    };
    let _ = session.close().await;
    counted
}

/// Reads `browser` to the end of its queue, or until `limit`, counting.
async fn read_to_limit(browser: &mut artemis_core::Browser, limit: CountLimit) -> Result<Counted, artemis_core::Error> {
    let deadline = Instant::now() + limit.time;
    let mut discard = tokio::io::sink();
    let mut seen = 0u64;
    loop {
        if seen >= limit.messages {
            return Ok(Counted::AtLeast(seen));
        }
        match tokio::time::timeout_at(deadline, browser.next_streaming(&mut discard)).await {
            Err(_) => return Ok(Counted::AtLeast(seen)),
            Ok(Ok(Some(_))) => seen += 1,
            Ok(Ok(None)) => return Ok(Counted::Exact(seen)),
            Ok(Err(e)) => return Err(e),
        }
    }
}
