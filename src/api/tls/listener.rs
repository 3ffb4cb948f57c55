//! An `axum::serve::Listener` that speaks TLS, so `axum::serve` — and its graceful shutdown — serves HTTPS as it
//! serves plain HTTP.
//!
//! A handshake takes round trips, and a client may never finish one: each runs in its own task, bounded by
//! [`HANDSHAKE_TIMEOUT`], and hands its stream back over a channel, so one slow or silent client never holds up
//! the next `accept`. A handshake that fails or times out is logged at debug and its connection dropped; the
//! server goes on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How long a client has to finish its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Finished handshakes waiting for `axum::serve` to take them; more wait in their tasks.
const READY_BACKLOG: usize = 64;

/// A connection whose handshake is done, and its peer.
type Ready = (TlsStream<TcpStream>, SocketAddr);

/// A TCP listener whose connections are handed over once their TLS handshake is done.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshake_timeout: Duration,
    /// Cloned into every handshake's task. Held here too, so `ready.recv()` never sees the channel closed.
    done: mpsc::Sender<Ready>,
    ready: mpsc::Receiver<Ready>,
}

impl TlsListener {
    /// TLS over `tcp` with `config`; handshakes bounded by [`HANDSHAKE_TIMEOUT`].
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> TlsListener {
        TlsListener::with_handshake_timeout(tcp, config, HANDSHAKE_TIMEOUT)
    }

    /// [`TlsListener::new`] with another bound on a handshake (the tests' short one).
    pub fn with_handshake_timeout(
        tcp: TcpListener,
        config: Arc<rustls::ServerConfig>,
        handshake_timeout: Duration,
    ) -> TlsListener {
        let (done, ready) = mpsc::channel(READY_BACKLOG);
        TlsListener { tcp, acceptor: TlsAcceptor::from(config), handshake_timeout, done, ready }
    }

    /// Starts `tcp`'s handshake in its own task.
    fn start_handshake(&self, tcp: TcpStream, peer: SocketAddr) {
        let (acceptor, limit, done) = (self.acceptor.clone(), self.handshake_timeout, self.done.clone());
        tokio::spawn(handshake(acceptor, tcp, peer, limit, done));
    }
}

/// `tcp`'s handshake within `limit`; the stream goes to `done`, or the connection is dropped.
async fn handshake(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
    limit: Duration,
    done: mpsc::Sender<Ready>,
) {
    match tokio::time::timeout(limit, acceptor.accept(tcp)).await {
        // The listener is gone when the send fails (the server is closing): the connection is dropped with it.
        Ok(Ok(stream)) => drop(done.send((stream, peer)).await),
        Ok(Err(error)) => tracing::debug!(%peer, %error, "a TLS handshake failed; the connection is dropped"),
        Err(_) => tracing::debug!(%peer, ?limit, "a TLS handshake did not finish in time; the connection is dropped"),
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    /// The next connection whose handshake is done. Both branches are cancel-safe, as `axum::serve` needs (it
    /// drops this future when the shutdown signal comes).
    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                Some(ready) = self.ready.recv() => return ready,
                // axum's own accept for TCP: it retries, and waits after an error such as too many open files.
                (tcp, peer) = axum::serve::Listener::accept(&mut self.tcp) => self.start_handshake(tcp, peer),
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
