//! Opening a connection, as straight-line async code before the connection task
//! exists (core-protocol.md §1.2, §3, §6.1, §14 "Connect"): TCP connect; the TLS
//! handshake when the options ask for TLS (`crate::tls`); the `ARTEMIS` preamble, a PING and the first CREATESESSION in one write (the
//! acceptor needs ≥ 8 bytes within its 10 s handshake timeout, §15 item 16); then
//! read until CREATESESSION_RESP. An EXCEPTION 108 means the version was refused:
//! the same socket stays open and the next version is tried (§3, §19 item 6).

use std::io;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::stream::Stream;
use crate::error::{BrokerError, CloseReason, Error, ProtocolError, ProtocolErrorKind};
use crate::options::{ConnectOptions, SessionOptions};
use crate::protocol::packet::{CreateSession, Ping};
use crate::protocol::{
    encode_frame, ExceptionType, FrameDecoder, Packet, ProtocolVersion, PING_CHANNEL, PREAMBLE, SESSION_CREATE_CHANNEL,
};
use crate::tls::{HandshakeProbe, TlsError};

/// A connection whose first session exists.
#[derive(Debug)]
pub(crate) struct Established {
    /// The socket.
    pub stream: Stream,
    /// The version announced and accepted: every packet is shaped by it (§3).
    pub version: ProtocolVersion,
    /// CREATESESSION_RESP's `serverVersion` (informational).
    pub server_version: i32,
    /// Bytes read past the CREATESESSION_RESP frame.
    pub leftover: BytesMut,
}

/// The CREATESESSION packet for a session (§6.1): confirmation window −1 (§4.3).
pub(crate) fn create_session_packet(
    opts: &ConnectOptions,
    session: SessionOptions,
    channel: i64,
    version: ProtocolVersion,
) -> CreateSession {
    let mut p = CreateSession::new(uuid::Uuid::new_v4().to_string(), channel, version);
    p.username = opts.username.clone();
    p.password = opts.password.clone();
    p.min_large_message_size = i32::try_from(opts.min_large_message_size).unwrap_or(i32::MAX);
    p.auto_commit_sends = !session.transacted_sends;
    p.auto_commit_acks = !session.transacted_acks;
    p
}

fn encode(buf: &mut BytesMut, channel: i64, packet: &Packet, version: ProtocolVersion) -> Result<(), Error> {
    encode_frame(channel, packet, version, buf).map_err(|e| {
        Error::Protocol(ProtocolError {
            channel,
            packet_type: packet.packet_type(),
            kind: ProtocolErrorKind::Encode(e),
        })
    })?;
    Ok(())
}

fn io_lost(e: io::Error) -> Error {
    Error::ConnectionLost(CloseReason::Io(Arc::new(e)))
}

/// A socket error while the session is being created: on a TLS connection it may be the broker's refusal of the
/// client certificate, which a TLS 1.3 client learns only at its first read after the handshake.
fn handshake_lost(addr: &str, probe: Option<&HandshakeProbe>, e: io::Error) -> Error {
    match probe.and_then(|p| p.classify(&e)) {
        Some(failure) => Error::Tls(TlsError { addr: addr.to_string(), failure }),
        None => io_lost(e),
    }
}

/// Connects and creates the first session on `channel`, trying each of
/// `opts.versions` in turn. Bounded by `opts.connect_timeout` as a whole.
pub(crate) async fn establish(
    opts: &ConnectOptions,
    session: SessionOptions,
    channel: i64,
) -> Result<Established, Error> {
    let addr = opts.addr();
    let work = async {
        let tcp =
            TcpStream::connect(&addr).await.map_err(|e| Error::Connect { addr: addr.clone(), source: Arc::new(e) })?;
        tcp.set_nodelay(true).map_err(io_lost)?;
        let stream = match &opts.tls {
            None => Stream::Plain(tcp),
            Some(tls) => {
                let done = crate::tls::handshake(tcp, &opts.host, &addr, tls).await.map_err(Error::Tls)?;
                Stream::Tls(Box::new(done.stream), done.probe)
            }
        };
        negotiate(stream, &addr, opts, session, channel).await
    };
    match tokio::time::timeout(opts.connect_timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(Error::Timeout { op: "connect", after: opts.connect_timeout }),
    }
}

async fn negotiate(
    mut stream: Stream,
    addr: &str,
    opts: &ConnectOptions,
    session: SessionOptions,
    channel: i64,
) -> Result<Established, Error> {
    let mut versions = opts.versions.iter().copied();
    let Some(mut version) = versions.next() else {
        return Err(Error::InvalidArgument("ConnectOptions::versions is empty".into()));
    };
    let ttl_ms = i64::try_from(opts.connection_ttl.as_millis()).unwrap_or(i64::MAX);
    let mut out = BytesMut::new();
    out.extend_from_slice(PREAMBLE);
    encode(&mut out, PING_CHANNEL, &Ping { connection_ttl: ttl_ms }.into(), version)?;
    let create = |v| Packet::from(create_session_packet(opts, session, channel, v));
    encode(&mut out, SESSION_CREATE_CHANNEL, &create(version), version)?;
    let probe = match &stream {
        Stream::Tls(_, probe) => Some(Arc::clone(probe)),
        Stream::Plain(_) => None,
    };
    let lost = |e| handshake_lost(addr, probe.as_deref(), e);
    stream.write_all(&out).await.map_err(lost)?;

    let mut decoder = FrameDecoder::new(opts.max_frame_len);
    let mut buf = BytesMut::with_capacity(4096);
    loop {
        let frame = loop {
            let decoded = decoder.decode(&mut buf).map_err(|e| {
                Error::Protocol(ProtocolError { channel: -1, packet_type: 0, kind: ProtocolErrorKind::Decode(e) })
            })?;
            if let Some(f) = decoded {
                break f;
            }
            if stream.read_buf(&mut buf).await.map_err(lost)? == 0 {
                let words = if probe.is_some() {
                    "the broker closed the connection during the handshake"
                } else {
                    // Seen live (docs/broker-notes.md): a TLS-only acceptor closes a plain connection at once.
                    "the broker closed the connection during the handshake (a TLS-only acceptor does that to a \
                     plain client: add sslEnabled=true if this port speaks TLS)"
                };
                return Err(lost(io::Error::new(io::ErrorKind::UnexpectedEof, words)));
            }
        };
        let (ch, ty) = (frame.header.channel_id, frame.header.packet_type);
        let packet = frame.decode_packet(version).map_err(|e| {
            Error::Protocol(ProtocolError { channel: ch, packet_type: ty, kind: ProtocolErrorKind::Decode(e) })
        })?;
        match packet {
            Packet::CreateSessionResponse(r) if ch == SESSION_CREATE_CHANNEL => {
                return Ok(Established { stream, version, server_version: r.server_version, leftover: buf });
            }
            Packet::ExceptionResponse(e) if ch == SESSION_CREATE_CHANNEL => {
                if e.exception_type() != ExceptionType::IncompatibleClientServerVersions {
                    // The broker keeps the socket open after a failed login (§6.1);
                    // dropping `stream` closes it.
                    return Err(Error::Broker(BrokerError {
                        kind: e.exception_type(),
                        code: e.code,
                        message: e.message,
                        op: "create session",
                    }));
                }
                tracing::debug!(version = version.get(), "protocol version refused, trying the next");
                version = versions.next().ok_or_else(|| Error::VersionRejected { offered: opts.versions.clone() })?;
                let mut out = BytesMut::new();
                encode(&mut out, SESSION_CREATE_CHANNEL, &create(version), version)?;
                stream.write_all(&out).await.map_err(lost)?;
            }
            Packet::Disconnect(_) | Packet::DisconnectV2(_) | Packet::DisconnectV3(_) => {
                return Err(Error::ConnectionLost(CloseReason::Disconnected { node_id: None, reason: None }));
            }
            // The PING echo, and anything else the broker volunteers, is not an answer.
            other => tracing::trace!(channel = ch, packet = other.type_name(), "ignored during handshake"),
        }
    }
}
