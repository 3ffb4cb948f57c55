//! A failed login (CREATESESSION with a wrong password, core-protocol.md §6.1), on a
//! private scratch broker so that failed logins for its one user touch nobody else.
//! First at the wire, then as the client reports it.

use std::time::Duration;

use artemis_core::protocol::packet::{CreateSession, ExceptionResponse, Ping};
use artemis_core::protocol::{encode_frame, FrameDecoder, Packet, PING_CHANNEL, PREAMBLE, SESSION_CREATE_CHANNEL};
use artemis_core::{ConnectOptions, Connection, ExceptionType, ProtocolVersion, SessionOptions};
use bytes::BytesMut;
use testbed::scratch::ScratchBroker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One raw Core socket: frames out, `(channel, packet)` in.
struct Raw {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: BytesMut,
    version: ProtocolVersion,
}

/// What the next read gave.
#[derive(Debug)]
enum Read {
    Packet(i64, Box<Packet>),
    /// The broker closed the socket.
    Closed,
    /// Nothing within the wait.
    Quiet,
}

impl Raw {
    async fn open(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.expect("TCP connect to the scratch broker");
        let mut raw = Raw {
            stream,
            decoder: FrameDecoder::new(1 << 20),
            buf: BytesMut::new(),
            version: ProtocolVersion::ANNOUNCED,
        };
        raw.stream.write_all(PREAMBLE).await.expect("preamble");
        raw
    }

    async fn send(&mut self, channel: i64, packet: Packet) {
        let mut out = BytesMut::new();
        encode_frame(channel, &packet, self.version, &mut out).expect("encode");
        self.stream.write_all(&out).await.expect("write");
    }

    async fn login(&mut self, user: &str, password: &str) {
        let mut create = CreateSession::new(uuid_like(), 10, self.version);
        create.username = Some(user.into());
        create.password = Some(password.into());
        self.send(SESSION_CREATE_CHANNEL, create.into()).await;
    }

    async fn next(&mut self, wait: Duration) -> Read {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(frame) = self.decoder.decode(&mut self.buf).expect("a frame") {
                let packet = frame.decode_packet(self.version).expect("a packet");
                return Read::Packet(frame.header.channel_id, Box::new(packet));
            }
            match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf)).await {
                Err(_) => return Read::Quiet,
                Ok(Ok(0)) => return Read::Closed,
                Ok(Ok(_)) => {}
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => return Read::Closed,
                Ok(Err(e)) => panic!("read: {e}"),
            }
        }
    }

    /// The answer on the session-create channel, skipping ping echoes.
    async fn create_answer(&mut self) -> Packet {
        loop {
            match self.next(Duration::from_secs(10)).await {
                Read::Packet(SESSION_CREATE_CHANNEL, p) => return *p,
                Read::Packet(PING_CHANNEL, p) if matches!(*p, Packet::Ping(_)) => {}
                other => panic!("expected an answer to CREATESESSION, got {other:?}"),
            }
        }
    }
}

/// A unique session name, as the client makes them.
fn uuid_like() -> String {
    testbed::unique_name("login")
}

fn security_exception(p: Packet) -> ExceptionResponse {
    match p {
        Packet::ExceptionResponse(e) => e,
        other => panic!("expected EXCEPTION, got {other:?}"),
    }
}

/// At the wire: a wrong password is answered on channel 1 with EXCEPTION code 105
/// (SECURITY_EXCEPTION), `AMQ229031`, without a correlation id; the broker keeps
/// the socket open (PINGs are still echoed, nothing closes it), does not lock
/// the user out after three failures, and a fourth CREATESESSION with the right
/// password on the same socket succeeds.
#[tokio::test]
async fn wrong_password_is_answered_and_the_socket_stays_open() {
    testbed::TestBed::require().await;
    let broker = ScratchBroker::start("login").await;
    let mut raw = Raw::open(broker.core_port).await;
    raw.send(PING_CHANNEL, Ping { connection_ttl: 60_000 }.into()).await;
    for attempt in 1..=3 {
        raw.login(&broker.user, "wrong-password").await;
        let e = security_exception(raw.create_answer().await);
        assert_eq!(e.exception_type(), ExceptionType::SecurityException, "attempt {attempt}: {e:?}");
        assert_eq!(e.code, 105, "attempt {attempt}");
        assert_eq!(e.amq_id(), Some("AMQ229031"), "attempt {attempt}: {e:?}");
        assert_eq!(e.correlation_id, None, "attempt {attempt}: CREATESESSION carries no correlation id");
        eprintln!("attempt {attempt}: {e:?}");
    }
    // The socket is still open: no EOF for 3 s, and a PING is echoed.
    match raw.next(Duration::from_secs(3)).await {
        Read::Quiet | Read::Packet(PING_CHANNEL, _) => {}
        other => panic!("after the failed logins: {other:?}"),
    }
    raw.send(PING_CHANNEL, Ping { connection_ttl: 60_000 }.into()).await;
    let echo = raw.next(Duration::from_secs(5)).await;
    assert!(
        matches!(&echo, Read::Packet(PING_CHANNEL, p) if matches!(**p, Packet::Ping(Ping { connection_ttl: 60_000 }))),
        "expected the PING echo, got {echo:?}"
    );
    // Three failures lock nothing out: the right password works, on the same socket.
    raw.login(&broker.user, &broker.password).await;
    match raw.create_answer().await {
        Packet::CreateSessionResponse(r) => assert_eq!(r.server_version, 136),
        other => panic!("expected CREATESESSION_RESP, got {other:?}"),
    }
}

/// As the client reports it: `Connection::connect` fails with `Error::Broker`
/// (kind SecurityException, code 105, `AMQ229031`, op "create session"): not a lost
/// connection, not retryable. The client closes the socket itself. Right after,
/// the right password connects (no lock-out).
#[tokio::test]
async fn wrong_password_is_a_typed_error_not_a_lost_connection() {
    testbed::TestBed::require().await;
    let broker = ScratchBroker::start("login-typed").await;
    let good =
        ConnectOptions::new("127.0.0.1", broker.core_port).credentials(broker.user.clone(), broker.password.clone());
    let bad = good.clone().credentials(broker.user.clone(), "wrong-password");
    for _ in 0..3 {
        let err = Connection::connect(&bad).await.expect_err("the login must fail");
        let artemis_core::Error::Broker(b) = &err else { panic!("expected Error::Broker, got {err:?}") };
        assert_eq!((b.kind, b.code, b.op), (ExceptionType::SecurityException, 105, "create session"), "{b:?}");
        assert_eq!(b.amq_id(), Some("AMQ229031"), "{b:?}");
        assert!(err.is_not_authorized() && !err.is_connection_lost() && !err.is_retryable(), "{err:?}");
        assert!(!err.to_string().contains("wrong-password"), "the password must not show: {err}");
    }
    let conn = Connection::connect(&good).await.expect("the right password after three failures");
    conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    conn.close().await.expect("close");
}
