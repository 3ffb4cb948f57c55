//! Settings for connections, sessions and consumers. `ConnectOptions`' `Debug`
//! never shows the password.

use std::fmt;
use std::time::Duration;

use crate::error::Error;
use crate::protocol::ProtocolVersion;
use crate::tls::TlsOptions;

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
    /// `Some`: speak TLS to the acceptor (`sslEnabled=true`); `None`: plain TCP.
    pub tls: Option<TlsOptions>,
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
            tls: None,
        }
    }

    /// Options from a `tcp://host:port?…` URL as operators write it for Artemis' own clients. The TLS
    /// parameters are read: `sslEnabled`, `trustStorePath`/`trustStoreType`, `keyStorePath`/`keyStoreType` (PEM:
    /// the key and its certificate chain in one file), `verifyHost`, `sniHost`; the others are ignored. Parameters
    /// are separated by `&` (a client's URL) or `;` (an acceptor's in `broker.xml`).
    pub fn from_url(url: &str) -> Result<Self, Error> {
        let invalid = |what: String| Error::InvalidArgument(format!("`{url}` {what}"));
        let rest = url.strip_prefix("tcp://").ok_or_else(|| invalid("is not a tcp:// URL".into()))?;
        let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
        let authority = authority.split('/').next().unwrap_or(authority);
        let (host, port) = authority.rsplit_once(':').ok_or_else(|| invalid("has no port".into()))?;
        let port = port.parse().map_err(|_| invalid("has an invalid port".into()))?;
        let pairs = || query.split(['&', ';']).filter(|p| !p.is_empty());
        // Before any other check, whose words quote the URL: a store password must not be repeated.
        if let Some(words) = pairs().find_map(|pair| crate::tls::store_password_refusal(pair.split('=').next()?)) {
            return Err(Error::InvalidArgument(format!("a Core URL for {host}:{port}: {words}")));
        }
        let mut options = ConnectOptions::new(host, port);
        let mut ssl_enabled = false;
        let mut tls = crate::tls::UrlTls::default();
        for pair in pairs() {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value);
            if key == "sslEnabled" {
                ssl_enabled = crate::tls::boolean(key, &value).map_err(invalid)?;
            } else {
                crate::tls::url_parameter(&mut tls, key, &value).map_err(invalid)?;
            }
        }
        if ssl_enabled {
            options.tls = Some(tls.options().map_err(Error::InvalidArgument)?);
        }
        Ok(options)
    }

    /// Speaks TLS with `tls`.
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The passphrase of the client key of the TLS material, by reference (nothing to do for plain TCP or a
    /// URL without a key store).
    pub fn key_passphrase(mut self, passphrase: Option<crate::tls::KeyPassphrase>) -> Self {
        self.tls = self.tls.map(|tls| tls.with_key_passphrase(passphrase));
        self
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
            .field("tls", &self.tls)
            .finish()
    }
}

/// `%XX` escapes decoded (a path with a space or a `;` in a URL); anything else kept as written.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
        assert!(o.tls.is_none());
        assert!(ConnectOptions::from_url("http://h:1").is_err());
        assert!(ConnectOptions::from_url("tcp://h").is_err());
    }

    #[test]
    fn parses_the_tls_url_forms_operators_write() {
        let url = "tcp://broker.example:61617?sslEnabled=true&trustStorePath=/etc/a%20b/ca.pem&trustStoreType=PEM\
                   &keyStorePath=/etc/client.pem&keyStoreType=PEM&verifyHost=true";
        let o = ConnectOptions::from_url(url).unwrap();
        let tls = o.tls.expect("sslEnabled=true means TLS");
        assert_eq!(tls.ca_files, vec![std::path::PathBuf::from("/etc/a b/ca.pem")]);
        assert_eq!(tls.client.unwrap().cert_file, std::path::PathBuf::from("/etc/client.pem"));
        assert!(tls.verify_host);
        // broker.xml's separator, and verifyHost turned off by explicit choice.
        let o = ConnectOptions::from_url("tcp://h:1?sslEnabled=true;verifyHost=false").unwrap();
        assert!(!o.tls.unwrap().verify_host);
        // TLS parameters without sslEnabled=true are not TLS, as for Artemis' own client.
        assert!(ConnectOptions::from_url("tcp://h:1?trustStorePath=/x.pem").unwrap().tls.is_none());
        let jks = ConnectOptions::from_url("tcp://h:1?sslEnabled=true&trustStorePath=/t.jks").unwrap_err();
        assert!(jks.to_string().contains("keytool -importkeystore"), "{jks}");
        assert!(ConnectOptions::from_url("tcp://h:1?sslEnabled=maybe").is_err());
    }

    #[test]
    fn a_store_password_in_a_url_is_refused_without_repeating_it() {
        let url = "tcp://h:1?sslEnabled=true&keyStorePath=/k.pem&keyStorePassword=hunter2&verifyHost=maybe";
        let words = ConnectOptions::from_url(url).unwrap_err().to_string();
        assert!(words.contains("keyStorePassword") && words.contains("__KEY_PASSPHRASE"), "{words}");
        assert!(!words.contains("hunter2"), "{words}");
        let words = ConnectOptions::from_url("tcp://h:1?trustStorePassword=hunter2").unwrap_err().to_string();
        assert!(words.contains("trustStorePassword") && !words.contains("hunter2"), "{words}");
    }
}
