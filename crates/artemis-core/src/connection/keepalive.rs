//! Keep-alive timing (core-protocol.md §6.2): a PING every TTL/2, and the
//! watchdog that declares the connection dead when nothing at all arrived for a
//! TTL. The broker only echoes our pings; we never answer one (§15 item 11).
//!
//! Pure: the task passes the clock in.

use std::time::Duration;

use tokio::time::Instant;

/// What the keep-alive wants done now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Nothing.
    Nothing,
    /// Send a PING.
    Ping,
    /// Nothing arrived within the TTL: the connection is dead.
    Expired,
}

/// Ping and watchdog state.
#[derive(Debug)]
pub(crate) struct Keepalive {
    ttl: Duration,
    last_received: Instant,
    last_ping: Instant,
}

impl Keepalive {
    /// Starts the clocks at `now` (a PING was sent with the preamble).
    pub fn new(ttl: Duration, now: Instant) -> Self {
        Keepalive { ttl, last_received: now, last_ping: now }
    }

    /// The TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Bytes arrived.
    pub fn received(&mut self, now: Instant) {
        self.last_received = now;
    }

    /// What is due at `now`; a `Ping` answer counts as sent.
    pub fn poll(&mut self, now: Instant) -> Due {
        if now.duration_since(self.last_received) > self.ttl {
            return Due::Expired;
        }
        if now.duration_since(self.last_ping) >= self.ttl / 2 {
            self.last_ping = now;
            return Due::Ping;
        }
        Due::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_at_half_ttl_and_expires_after_a_silent_ttl() {
        let t0 = Instant::now();
        let mut k = Keepalive::new(Duration::from_secs(60), t0);
        assert_eq!(k.poll(t0 + Duration::from_secs(29)), Due::Nothing);
        assert_eq!(k.poll(t0 + Duration::from_secs(30)), Due::Ping);
        assert_eq!(k.poll(t0 + Duration::from_secs(31)), Due::Nothing);
        k.received(t0 + Duration::from_secs(50));
        assert_eq!(k.poll(t0 + Duration::from_secs(100)), Due::Ping);
        assert_eq!(k.poll(t0 + Duration::from_secs(111)), Due::Expired);
    }
}
