//! Core connections kept open between the batches one worker process runs.
//!
//! A batch used to open a connection to each end and close both at its end: a TCP connect, a login and a
//! session per end per batch, a large share of a small batch's time. Now a batch that committed hands its
//! connections back here, each with the transacted session it worked in, and the next batch on the same endpoint
//! takes both over ([`Link::transacted_session`]): the broker creates, authenticates, announces (a management
//! notification) and later closes one session per connection, not one per batch.
//!
//! What keeps this as safe as a fresh connection per batch:
//! - A connection comes back only from a batch that committed and closed every consumer it opened and every
//!   session but the one it kept (the broker confirmed each close), so it holds no delivery, no transaction and
//!   no consumer of any run: the kept session's work is committed, and a consumer's close gives back what was
//!   delivered to it and not acknowledged. A batch that fails drops its connections: the socket closes and the
//!   broker gives back whatever was in delivery, which is what the relay's crash reasoning relies on.
//! - Each batch has a connection to itself (checked out, not shared), so one run's failure never closes
//!   another run's connection.
//! - A connection is reused for at most [`MAX_IDLE`] after its last batch and [`MAX_AGE`] after it was opened,
//!   so a changed password or a revoked broker role takes effect within a minute, and is never reused once
//!   the broker has dropped it (a failover closes it; the next batch re-resolves the live endpoint).
//! - Its TTL is the relay's, unchanged: a worker that dies still loses its connections as fast as before.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use artemis_core::{Connection, Session, SessionOptions};

use super::node::NodeAccess;

/// How long an idle connection is kept for the next batch.
pub const MAX_IDLE: Duration = Duration::from_secs(15);

/// How long a connection is reused at most after it was opened.
pub const MAX_AGE: Duration = Duration::from_secs(60);

/// Connections of this process, idle between batches, by endpoint, user and TTL.
#[derive(Debug, Default)]
pub struct CorePool {
    idle: Mutex<HashMap<String, Vec<Idle>>>,
}

#[derive(Debug)]
struct Idle {
    conn: Connection,
    opened: Instant,
    since: Instant,
    kept: Option<Session>,
}

/// A connection checked out for one batch; [`CorePool::give_back`] returns it when the batch is done.
#[derive(Debug)]
pub struct Link {
    conn: Connection,
    key: String,
    opened: Instant,
    /// The transacted session a batch before left on this connection, its work committed.
    kept: Option<Session>,
}

impl std::ops::Deref for Link {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl Link {
    /// A transacted session on this connection: the one the batch before kept, while it is still open, or a new one.
    pub async fn transacted_session(&mut self) -> Result<Session, artemis_core::Error> {
        match self.kept.take() {
            Some(session) if session.is_open() => Ok(session),
            _ => self.conn.create_session(SessionOptions::transacted()).await,
        }
    }

    /// Keeps `session`, a transacted session of this connection whose work is committed and whose consumers are
    /// closed (the broker confirmed it), for the next batch that takes the connection.
    pub fn keep(&mut self, session: Session) {
        if session.options() == SessionOptions::transacted() {
            self.kept = Some(session);
        }
    }

    /// Closes the connection (sessions first), for a caller that will not give it back.
    pub async fn close(self) -> Result<(), artemis_core::Error> {
        self.conn.close().await
    }
}

impl CorePool {
    /// A connection to `end`'s live endpoint with `ttl`: an idle one that is still fit, or a new one.
    pub async fn take(&self, end: &NodeAccess, ttl: Duration) -> Result<Link, artemis_core::Error> {
        if let Some(link) = self.take_idle(end, ttl) {
            return Ok(link);
        }
        let conn = end.connect(ttl).await?;
        Ok(Link { conn, key: link_key(end, ttl), opened: Instant::now(), kept: None })
    }

    /// An idle connection to `end`'s live endpoint with `ttl` that is still fit, without opening one: its broker has
    /// not dropped it, so that broker is still up and serving — a failover, a restart or a shutdown closes every
    /// connection it held.
    pub fn take_idle(&self, end: &NodeAccess, ttl: Duration) -> Option<Link> {
        let key = link_key(end, ttl);
        while let Some(idle) = self.pop(&key) {
            if fit(&idle.conn, idle.opened, idle.kept.as_ref()) && idle.since.elapsed() < MAX_IDLE {
                return Some(Link { conn: idle.conn, key, opened: idle.opened, kept: idle.kept });
            }
            retire(idle.conn, idle.kept);
        }
        None
    }

    /// Keeps `link` for the next batch if it is still fit: open, young enough, and holding no session but its
    /// own and the one it keeps ([`Link::keep`]). Otherwise closes it.
    pub fn give_back(&self, link: Link) {
        if !fit(&link.conn, link.opened, link.kept.as_ref()) {
            retire(link.conn, link.kept);
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Drop what went stale meanwhile, so an endpoint no batch uses any more does not keep sockets open.
        for list in idle.values_mut() {
            list.retain(|i| i.since.elapsed() < MAX_IDLE && !i.conn.is_closed());
        }
        idle.retain(|_, list| !list.is_empty());
        let Link { conn, key, opened, kept } = link;
        idle.entry(key).or_default().push(Idle { conn, opened, since: now, kept });
    }

    fn pop(&self, key: &str) -> Option<Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).get_mut(key).and_then(Vec::pop)
    }
}

/// Connections are kept by endpoint, user and TTL.
fn link_key(end: &NodeAccess, ttl: Duration) -> String {
    format!("{}\u{0}{}\u{0}{}", end.core_url, end.user(), ttl.as_millis())
}

/// Open, younger than [`MAX_AGE`], and with no session left but the connection's own and the one it keeps (still
/// open).
fn fit(conn: &Connection, opened: Instant, kept: Option<&Session>) -> bool {
    let kept = match kept {
        Some(session) if !session.is_open() => return false,
        Some(_) => 1,
        None => 0,
    };
    !conn.is_closed() && opened.elapsed() < MAX_AGE && conn.open_session_count() <= 1 + kept
}

/// Closes a connection that is not reused, and the session it kept, without making anyone wait for the broker's
/// answer.
fn retire(conn: Connection, kept: Option<Session>) {
    drop(kept);
    if conn.is_closed() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), conn.close()).await;
            });
        }
        Err(_) => drop(conn),
    }
}
