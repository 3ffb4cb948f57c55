//! Core connections kept open between the batches one worker process runs.
//!
//! A batch used to open a connection to each end and close both at its end: a TCP connect, a login and a
//! session per end per batch, a large share of a small batch's time. Now a batch that committed hands its
//! connections back here, and the next batch on the same endpoint takes one over.
//!
//! What keeps this as safe as a fresh connection per batch:
//! - A connection comes back only from a batch that committed and closed every session it opened (the broker
//!   confirmed each close), so it holds no delivery, no transaction and no consumer of any run. A batch that
//!   fails drops its connections: the socket closes and the broker gives back whatever was in delivery, which
//!   is what the relay's crash reasoning relies on.
//! - Each batch has a connection to itself (checked out, not shared), so one run's failure never closes
//!   another run's connection.
//! - A connection is reused for at most [`MAX_IDLE`] after its last batch and [`MAX_AGE`] after it was opened,
//!   so a changed password or a revoked broker role takes effect within a minute, and is never reused once
//!   the broker has dropped it (a failover closes it; the next batch re-resolves the live endpoint).
//! - Its TTL is the relay's, unchanged: a worker that dies still loses its connections as fast as before.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use artemis_core::Connection;

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
}

/// A connection checked out for one batch; [`CorePool::give_back`] returns it when the batch is done.
#[derive(Debug)]
pub struct Link {
    conn: Connection,
    key: String,
    opened: Instant,
}

impl std::ops::Deref for Link {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl Link {
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
        Ok(Link { conn, key: link_key(end, ttl), opened: Instant::now() })
    }

    /// An idle connection to `end`'s live endpoint with `ttl` that is still fit, without opening one: its broker has
    /// not dropped it, so that broker is still up and serving — a failover, a restart or a shutdown closes every
    /// connection it held.
    pub fn take_idle(&self, end: &NodeAccess, ttl: Duration) -> Option<Link> {
        let key = link_key(end, ttl);
        while let Some(idle) = self.pop(&key) {
            if fit(&idle.conn, idle.opened) && idle.since.elapsed() < MAX_IDLE {
                return Some(Link { conn: idle.conn, key, opened: idle.opened });
            }
            retire(idle.conn);
        }
        None
    }

    /// Keeps `link` for the next batch if it is still fit: open, young enough, and holding no session but its
    /// own. Otherwise closes it.
    pub fn give_back(&self, link: Link) {
        if !fit(&link.conn, link.opened) {
            retire(link.conn);
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Drop what went stale meanwhile, so an endpoint no batch uses any more does not keep sockets open.
        for list in idle.values_mut() {
            list.retain(|i| i.since.elapsed() < MAX_IDLE && !i.conn.is_closed());
        }
        idle.retain(|_, list| !list.is_empty());
        idle.entry(link.key).or_default().push(Idle { conn: link.conn, opened: link.opened, since: now });
    }

    fn pop(&self, key: &str) -> Option<Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).get_mut(key).and_then(Vec::pop)
    }
}

/// Connections are kept by endpoint, user and TTL.
fn link_key(end: &NodeAccess, ttl: Duration) -> String {
    format!("{}\u{0}{}\u{0}{}", end.core_url, end.user(), ttl.as_millis())
}

/// Open, younger than [`MAX_AGE`], and with no session left but the connection's own.
fn fit(conn: &Connection, opened: Instant) -> bool {
    !conn.is_closed() && opened.elapsed() < MAX_AGE && conn.open_session_count() <= 1
}

/// Closes a connection that is not reused, without making anyone wait for the broker's answer.
fn retire(conn: Connection) {
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
