//! Settings for connections, sessions and consumers. `ConnectOptions`' `Debug`
//! never shows the password.

use std::fmt;
use std::time::Duration;

use crate::error::Error;
use crate::protocol::ProtocolVersion;

/// How to reach and log in to a broker, and the connection's timing.
#[derive(Clone)]
pub struct ConnectOptions {
    /// Host name or IP address.
    pub host: String,
    /// Core acceptor port.
    pub port: u16,
    /// User name; `None` = no credentials (the transport principal).
    pub username: Option<String>,
    /// Password.
    pub password: Option<String>,
    /// Bound on the TCP connect and the whole handshake.
    pub connect_timeout: Duration,
    /// Bound on every blocking call (Java's `callTimeout`, 30 s). When it expires
    /// the connection is failed (core-protocol.md §4.2).
    pub call_timeout: Duration,
    /// Connection TTL announced in PING; pings go out every TTL/2 and the
    /// connection is failed when nothing arrives for a TTL (§6.2). Java: 60 s.
    pub connection_ttl: Duration,
    /// Versions announced in the first CREATESESSION, tried in order while the
    /// broker answers code 108 (§3).
    pub versions: Vec<ProtocolVersion>,
    /// `minLargeMessageSize` (Java: 100 KiB): bodies above it are sent as large
    /// messages in chunks of this size, and the broker sends large messages to
    /// this connection's consumers in chunks of this size (§11).
    pub min_large_message_size: usize,
    /// Largest frame accepted from the broker.
    pub max_frame_len: usize,
    /// `true` (the default): ping every TTL/2 and fail the connection when nothing arrives for a TTL. `false` is
    /// a test seam: the first PING still announces `connection_ttl`, then the client neither pings nor watches,
    /// so a test can see the broker enforce the TTL it was told (`tests/broker/ttl.rs`). Never `false` in real
    /// use: the broker drops a connection that sends nothing for a TTL, and a dead broker would go unnoticed.
    pub keepalive: bool,
}

impl ConnectOptions {
    /// Options for `host:port` with the defaults of the Java client.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        ConnectOptions {
            host: host.into(),
            port,
            username: None,
            password: None,
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(30),
            connection_ttl: Duration::from_secs(60),
            versions: ProtocolVersion::FALLBACK_ORDER.to_vec(),
            min_large_message_size: crate::protocol::large::DEFAULT_CHUNK_SIZE,
            max_frame_len: crate::protocol::DEFAULT_MAX_FRAME_LEN,
            keepalive: true,
        }
    }

    /// Options from a `tcp://host:port` URL (query parameters are ignored).
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let rest =
            url.strip_prefix("tcp://").ok_or_else(|| Error::InvalidArgument(format!("`{url}` is not a tcp:// URL")))?;
        let rest = rest.split(['?', '/']).next().unwrap_or(rest);
        let (host, port) =
            rest.rsplit_once(':').ok_or_else(|| Error::InvalidArgument(format!("`{url}` has no port")))?;
        let port = port.parse().map_err(|_| Error::InvalidArgument(format!("`{url}` has an invalid port")))?;
        Ok(ConnectOptions::new(host, port))
    }

    /// Sets the credentials.
    pub fn credentials(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        self.username = Some(username.into());
        self.password = Some(password.into());
        self
    }

    /// Sets the bound on blocking calls.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sets the connection TTL.
    pub fn connection_ttl(mut self, ttl: Duration) -> Self {
        self.connection_ttl = ttl;
        self
    }

    /// Sets the bound on the TCP connect and handshake.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// `host:port`.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("call_timeout", &self.call_timeout)
            .field("connection_ttl", &self.connection_ttl)
            .field("versions", &self.versions)
            .field("min_large_message_size", &self.min_large_message_size)
            .field("max_frame_len", &self.max_frame_len)
            .field("keepalive", &self.keepalive)
            .finish()
    }
}

/// How a session commits its work (CREATESESSION `autoCommitSends` /
/// `autoCommitAcks`, §6.1, §8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOptions {
    /// Sends join the session transaction until [`crate::Session::commit`].
    pub transacted_sends: bool,
    /// Acknowledgements join the session transaction until commit.
    pub transacted_acks: bool,
}

impl SessionOptions {
    /// Every send and every ack is applied at once; sends wait for the broker's
    /// confirmation.
    pub fn auto_commit() -> Self {
        SessionOptions { transacted_sends: false, transacted_acks: false }
    }

    /// Sends and acks wait for [`crate::Session::commit`]; a move from one queue
    /// to another on the same broker is atomic in such a session.
    pub fn transacted() -> Self {
        SessionOptions { transacted_sends: true, transacted_acks: true }
    }
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions::auto_commit()
    }
}

/// Consumer window: how many bytes of deliveries the broker may send ahead (§9.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The queue's `defaultConsumerWindowSize` if the broker gives one, else 1 MiB.
    Default,
    /// This many bytes of encoded frames (at least 1).
    Bytes(u32),
    /// No flow control (credits −1, one-way; core-protocol.md §9.2): the broker
    /// sends everything. Memory is then bounded by nothing.
    Unbounded,
}

/// Options for a consumer or browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// Selector, e.g. `"color = 'red'"` or `"AMQPriority > 4"`.
    pub filter: Option<String>,
    /// Flow-control window.
    pub window: Window,
    /// Large messages received into memory are refused above this size.
    pub max_large_in_memory: u64,
}

impl ConsumerOptions {
    /// Java's default window (1 MiB) used when the queue names none.
    pub const DEFAULT_WINDOW_BYTES: u32 = 1024 * 1024;

    /// Sets the selector.
    pub fn filter(mut self, filter: impl Into<String>) -> Self {
        self.filter = Some(filter.into());
        self
    }

    /// Sets the window.
    pub fn window(mut self, window: Window) -> Self {
        self.window = window;
        self
    }
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions { filter: None, window: Window::Default, max_large_in_memory: 64 * 1024 * 1024 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_redacts_the_password() {
        let o = ConnectOptions::new("h", 1).credentials("user", "s3cret-pw");
        let text = format!("{o:?}");
        assert!(!text.contains("s3cret-pw") && text.contains("<redacted>") && text.contains("user"), "{text}");
    }

    #[test]
    fn parses_tcp_urls() {
        let o = ConnectOptions::from_url("tcp://127.0.0.1:62616?x=1").unwrap();
        assert_eq!((o.host.as_str(), o.port), ("127.0.0.1", 62616));
        assert!(ConnectOptions::from_url("http://h:1").is_err());
        assert!(ConnectOptions::from_url("tcp://h").is_err());
    }
}
