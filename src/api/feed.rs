//! One poll per watched run, shared by all of its event streams.
//!
//! A stream of a run used to poll Postgres on its own (three statements every `api.events_poll_ms`), so a
//! hundred watchers of one run cost a hundred polls (docs/BENCHMARKS.md). Now the first stream of a run starts a
//! [`Feed`]: one task that looks at the run — its line, the visibility for each operator following it, the events
//! after the feed's own position — and broadcasts what it saw to every stream of that run; the task ends when the
//! last stream leaves (or the service closes). A stream still looks on its own when it starts (to answer at once
//! and from the client's `Last-Event-ID`), and again whenever it is behind the feed (a long log being replayed, or
//! a broadcast it was too slow to take): those are one stream's catching up, not a cost per poll.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use sqlx::PgPool;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::ApiState;
use crate::jobs::store::record::RunEvent;
use crate::transfer::store::view::{latest_event_id, run_events_after, EventCursor};
use crate::transfer::view::{self, RunRecord};

/// How long after it was written an event row is still looked for out of order. Event ids come from one sequence
/// but become visible when their transaction commits, so a row can appear after a higher id was already sent
/// (two writers of one run's log at once: a batch and a stop). A transaction of a batch lasts at most its lease.
pub(super) const LATE_WINDOW_SECS: i64 = 120;

/// The most rows one look returns beyond a position (`run_events_after.sql`'s `LIMIT`).
const PAGE: usize = 500;

/// How many looks a slow stream may be behind before it is told it lagged (and looks on its own).
const BACKLOG: usize = 16;

/// Where a reader of a run's event log stands: the highest id sent, where it began, and the ids sent recently (a
/// row that commits late is sent once, out of order). One definition for a stream and for a feed.
#[derive(Debug, Default)]
pub(super) struct Position {
    pub after: i64,
    /// Where the reader began: it has every row up to here, so none at or below is late.
    pub floor: i64,
    recent: Vec<(i64, Instant)>,
}

impl Position {
    /// A reader that has every row up to `after`.
    pub fn from(after: i64) -> Position {
        Position { after, floor: after, recent: Vec::new() }
    }

    /// The events after this position, late ones included (at most [`PAGE`] new ones), and whether there are more.
    pub async fn read(&mut self, pool: &PgPool, run: Uuid) -> Result<(Vec<RunEvent>, bool), sqlx::Error> {
        self.recent.retain(|(_, at)| at.elapsed().as_secs() < 2 * LATE_WINDOW_SECS as u64);
        let recent: Vec<i64> = self.recent.iter().map(|(id, _)| *id).collect();
        let cursor = EventCursor {
            after: self.after,
            floor: self.floor,
            late_window_secs: LATE_WINDOW_SECS as f64,
            recent: &recent,
        };
        let rows = run_events_after(pool, run, cursor).await?;
        let more = rows.iter().filter(|r| r.id > self.after).count() == PAGE;
        Ok((rows, more))
    }

    /// The rows of `rows` this reader has not sent, in their order, marked as sent.
    pub fn take(&mut self, rows: &[RunEvent]) -> Vec<RunEvent> {
        let fresh: Vec<RunEvent> = rows
            .iter()
            .filter(|r| r.id > self.after || (r.id > self.floor && !self.recent.iter().any(|(id, _)| *id == r.id)))
            .cloned()
            .collect();
        for row in &fresh {
            self.after = self.after.max(row.id);
            self.recent.push((row.id, Instant::now()));
        }
        fresh
    }
}

/// What a feed saw in one look at its run, for every stream of it.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // made once a poll and shared behind an `Arc`: its size costs nothing
pub(super) enum Look {
    /// The database did not answer.
    Failed,
    /// The run as it stood, the rows new to the feed, whether more are waiting, and whether each operator
    /// following it (when the look began) may see it.
    Seen { line: Option<RunRecord>, rows: Vec<RunEvent>, more: bool, visible_to: BTreeMap<String, bool> },
}

/// The feeds of the runs being watched: at most one per run.
#[derive(Default)]
pub struct Feeds {
    runs: Mutex<HashMap<Uuid, Weak<Feed>>>,
}

/// One run's shared poll: its broadcast, and who follows it (to check what each operator may see).
pub(super) struct Feed {
    sender: broadcast::Sender<Arc<Look>>,
    operators: Mutex<BTreeMap<String, usize>>,
    /// Cancelled when the last follower leaves: the poll ends at once.
    left: CancellationToken,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.left.cancel();
    }
}

/// A stream's place in its run's feed: while held, its operator is among those the feed checks.
pub(super) struct Follower {
    feed: Arc<Feed>,
    operator: String,
    pub looks: broadcast::Receiver<Arc<Look>>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        let mut operators = self.feed.operators.lock().expect("feed operators");
        if let Some(n) = operators.get_mut(&self.operator) {
            *n -= 1;
            if *n == 0 {
                operators.remove(&self.operator);
            }
        }
    }
}

/// Follows `run` for `operator`: joins the run's feed, starting it (and its poll) when it is the first.
pub(super) fn follow(state: &ApiState, run: Uuid, operator: &str) -> Follower {
    let feeds = &state.feeds;
    let mut runs = feeds.runs.lock().expect("feeds");
    let feed = match runs.get(&run).and_then(Weak::upgrade) {
        Some(feed) => feed,
        None => {
            let (sender, _) = broadcast::channel(BACKLOG);
            let feed = Arc::new(Feed { sender, operators: Mutex::default(), left: CancellationToken::new() });
            runs.insert(run, Arc::downgrade(&feed));
            tokio::spawn(poll(state.clone(), run, Arc::downgrade(&feed)));
            feed
        }
    };
    drop(runs);
    *feed.operators.lock().expect("feed operators").entry(operator.to_string()).or_default() += 1;
    let looks = feed.sender.subscribe();
    Follower { feed, operator: operator.to_string(), looks }
}

/// A feed's poll: every `events_every`, one look at the run broadcast to its streams, until the last leaves.
async fn poll(state: ApiState, run: Uuid, feed: Weak<Feed>) {
    let Some((sender, left)) = feed.upgrade().map(|f| (f.sender.clone(), f.left.clone())) else { return };
    let mut position = match latest_event_id(&state.pool, run).await {
        Ok(latest) => Some(Position::from(latest)),
        Err(_) => None, // looked for again at the first look
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(state.events_every) => {}
            () = left.cancelled() => break,
            () = state.closing.cancelled() => break,
        }
        let Some(operators) = feed.upgrade().map(|f| f.operators.lock().expect("feed operators").clone()) else {
            break;
        };
        let look = look(&state.pool, run, operators.into_keys(), &mut position).await;
        // No receiver: every stream left between the check above and now; the next turn ends.
        let _ = sender.send(Arc::new(look));
    }
    let mut runs = state.feeds.runs.lock().expect("feeds");
    if runs.get(&run).is_some_and(|w| w.ptr_eq(&feed)) {
        runs.remove(&run);
    }
}

/// One look at `run` for the operators following it: its line, then (so that a run read as ended has all its
/// events among the rows) whether each operator may see it and the rows after `position`.
async fn look(
    pool: &PgPool,
    run: Uuid,
    operators: impl Iterator<Item = String>,
    position: &mut Option<Position>,
) -> Look {
    let Ok(line) = view::line(pool, run).await else { return Look::Failed };
    let mut visible_to = BTreeMap::new();
    for operator in operators {
        let Ok(visible) = view::visible(pool, run, &operator).await else { return Look::Failed };
        visible_to.insert(operator, visible);
    }
    if position.is_none() {
        let Ok(latest) = latest_event_id(pool, run).await else { return Look::Failed };
        *position = Some(Position::from(latest));
    }
    let position = position.as_mut().expect("set above");
    let Ok((rows, more)) = position.read(pool, run).await else { return Look::Failed };
    let rows = position.take(&rows);
    Look::Seen { line, rows, more, visible_to }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn row(id: i64) -> RunEvent {
        RunEvent { id, at: Utc::now(), kind: "batch".into(), detail: serde_json::json!({}) }
    }

    #[test]
    fn a_position_takes_each_row_once_late_ones_too_and_none_the_reader_began_with() {
        let mut p = Position::from(10);
        let taken = |p: &mut Position, ids: &[i64]| {
            p.take(&ids.iter().map(|id| row(*id)).collect::<Vec<_>>()).iter().map(|r| r.id).collect::<Vec<_>>()
        };
        assert_eq!(taken(&mut p, &[9, 10, 11, 13]), vec![11, 13], "none at or below where it began");
        assert_eq!(taken(&mut p, &[11, 12, 13, 14]), vec![12, 14], "12 committed late: sent once, out of order");
        assert_eq!(taken(&mut p, &[12, 14]), Vec::<i64>::new());
        assert_eq!(p.after, 14);
    }
}
