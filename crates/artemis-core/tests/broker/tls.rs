//! Core over TLS against the test bed's TLS node (`secure-1`: server-authenticated TLS on its Core port, mutual
//! TLS on the next, an expired certificate on the one after; everything signed by the test bed's private CA).
//! The Java client, through its own TLS, judges what arrived. Each failure is a typed error, in words that name
//! the broker and what failed, within seconds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use artemis_core::{
    ClientIdentity, ConnectOptions, Connection, ConsumerOptions, Error, KeyPassphrase, SessionOptions, TlsFailure,
};
use testbed::jolokia::Jolokia;
use testbed::{Node, NodeTls, TestBed};

use crate::support::{payload_id, text, WAIT};

/// "Within seconds": a failed handshake is told well before any call or connect timeout (10 s, 30 s).
const PROMPTLY: Duration = Duration::from_secs(6);

async fn secure() -> (&'static Node, &'static NodeTls) {
    let node = TestBed::require().await.node("secure-1");
    (node, node.tls.as_ref().expect("secure-1 is a TLS node"))
}

fn options(node: &Node, url: &str) -> ConnectOptions {
    ConnectOptions::from_url(url)
        .expect("the test bed's TLS URL")
        .credentials(node.user.clone(), node.password.clone())
        .call_timeout(Duration::from_secs(20))
}

/// Connects with `opts`, which must fail; the error and how long it took.
async fn refused(opts: &ConnectOptions) -> (Error, Duration) {
    let started = Instant::now();
    let err = Connection::connect(opts).await.expect_err("the connection must be refused");
    (err, started.elapsed())
}

fn assert_failure(err: &Error, elapsed: Duration, expected: fn(&TlsFailure) -> bool, words: &[&str]) {
    let failure = err.tls_failure().unwrap_or_else(|| panic!("not a TLS error: {err:?}"));
    assert!(expected(failure), "wrong failure: {failure:?}");
    let text = err.to_string();
    for w in words {
        assert!(text.contains(w), "`{w}` missing from: {text}");
    }
    assert!(elapsed < PROMPTLY, "took {elapsed:?}: {text}");
    assert!(!err.is_retryable(), "a certificate that failed will fail again: {text}");
}

/// Sends one message over TLS with our client, and the Java client, over its own TLS, consumes exactly it.
#[tokio::test]
async fn sends_and_receives_over_tls_judged_by_the_java_client() {
    let (node, _) = secure().await;
    let queue = testbed::unique_name("tls-send");
    Jolokia::new(node).create_queue(&queue).await.expect("create queue over HTTPS with a client certificate");
    let conn = Connection::connect(&options(node, &node.core_url())).await.expect("connect over TLS");
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    session.producer(None).send(&text(&queue, "over-tls-1")).await.expect("send");
    session.commit().await.expect("commit");
    // Our own consumer too: frames both ways through the TLS halves.
    let mut consumer = session.create_consumer(&queue, ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let delivery = consumer.recv(WAIT).await.expect("receive").expect("a message");
    assert_eq!(payload_id(delivery.message()), "over-tls-1");
    session.rollback().await.expect("rollback: leave it for the judge");
    conn.close().await.expect("close");

    let seen = testbed::fidelity::consume(node, &queue).await;
    let ids: Vec<_> = seen.iter().filter_map(|o| o.payload_id()).collect();
    assert_eq!(ids, ["over-tls-1"], "the Java client over TLS");
    let _ = Jolokia::new(node).destroy_queue(&queue).await;
}

/// Mutual TLS: with the client certificate the session opens; without it, the broker's refusal is named.
#[tokio::test]
async fn mutual_tls_needs_the_client_certificate_and_says_so_without_it() {
    let (node, tls) = secure().await;
    let with = options(node, &tls.core_url(tls.mtls_port, true));
    let conn = Connection::connect(&with).await.expect("connect with a client certificate");
    assert!(conn.queue_query("DLQ").await.expect("a call over mutual TLS").is_some());
    conn.close().await.expect("close");

    // The same certificate, given as two files (chain, key) rather than Artemis' one PEM key store.
    let mut split = options(node, &tls.core_url(tls.mtls_port, false));
    split.tls.as_mut().unwrap().client =
        Some(ClientIdentity { cert_file: tls.client_cert_pem(), key_file: tls.client_key_pem(), key_passphrase: None });
    Connection::connect(&split).await.expect("connect with chain and key apart").close().await.expect("close");

    let without = options(node, &tls.core_url(tls.mtls_port, false));
    let (err, elapsed) = refused(&without).await;
    assert_failure(
        &err,
        elapsed,
        |f| matches!(f, TlsFailure::ClientCertificateRequired),
        &[&format!("127.0.0.1:{}", tls.mtls_port), "requires a client certificate", "keyStorePath"],
    );
}

/// A client that trusts another CA: unknown issuer, in words that say to give the right CA.
#[tokio::test]
async fn a_wrong_ca_is_an_unknown_issuer() {
    let (node, tls) = secure().await;
    let mut opts = options(node, &node.core_url());
    opts.tls.as_mut().unwrap().ca_files = vec![tls.other_ca_pem()];
    let (err, elapsed) = refused(&opts).await;
    assert_failure(
        &err,
        elapsed,
        |f| matches!(f, TlsFailure::UnknownIssuer),
        &[&format!("127.0.0.1:{}", node.core_port), "not signed by a trusted CA", "trustStorePath"],
    );
}

/// The acceptor whose certificate expired years ago.
#[tokio::test]
async fn an_expired_certificate_is_named() {
    let (node, tls) = secure().await;
    let (err, elapsed) = refused(&options(node, &tls.core_url(tls.expired_port, false))).await;
    assert_failure(
        &err,
        elapsed,
        |f| matches!(f, TlsFailure::Expired { .. }),
        &[&format!("127.0.0.1:{}", tls.expired_port), "has expired"],
    );
}

/// The broker's certificate carries IP 127.0.0.1 only: `localhost` is a host-name mismatch, unless the check is
/// turned off by explicit choice (`verifyHost=false`), which then connects.
#[tokio::test]
async fn a_host_name_the_certificate_does_not_carry_is_refused_unless_verify_host_is_off() {
    let (node, _) = secure().await;
    let url = node.core_url().replace("127.0.0.1", "localhost");
    let (err, elapsed) = refused(&options(node, &url)).await;
    assert_failure(
        &err,
        elapsed,
        |f| matches!(f, TlsFailure::HostNameMismatch { .. }),
        &[&format!("localhost:{}", node.core_port), "host name mismatch", "not valid for localhost", "verifyHost"],
    );
    let unchecked = options(node, &format!("{url}&verifyHost=false"));
    Connection::connect(&unchecked).await.expect("verifyHost=false connects").close().await.expect("close");
}

/// Our plain client on the TLS port: the acceptor closes the connection at once (seen live), and the words say
/// what to change.
#[tokio::test]
async fn a_plain_client_on_the_tls_port_fails_fast_in_words() {
    let (node, _) = secure().await;
    let plain = ConnectOptions::new("127.0.0.1", node.core_port).credentials(node.user.clone(), node.password.clone());
    let started = Instant::now();
    let err = Connection::connect(&plain).await.expect_err("a TLS-only acceptor refuses plain TCP");
    let elapsed = started.elapsed();
    assert!(err.is_connection_lost(), "{err:?}");
    assert!(err.to_string().contains("add sslEnabled=true"), "{err}");
    assert!(elapsed < PROMPTLY, "took {elapsed:?}");
}

/// Our TLS client on a plain-TCP port (east-1): the acceptor waits for a Core preamble and never answers the
/// ClientHello (seen live), so the handshake timeout tells it, in words that suggest the plain port.
#[tokio::test]
async fn a_tls_client_on_a_plain_port_fails_within_the_handshake_timeout() {
    let plain_node = TestBed::require().await.node("east-1");
    let (_, tls) = secure().await;
    let url =
        format!("tcp://127.0.0.1:{}?sslEnabled=true&trustStorePath={}", plain_node.core_port, tls.ca_pem().display());
    let mut opts = options(plain_node, &url);
    opts.tls.as_mut().unwrap().handshake_timeout = Duration::from_secs(2);
    let started = Instant::now();
    let err = Connection::connect(&opts).await.expect_err("a plain acceptor does not speak TLS");
    let elapsed = started.elapsed();
    let failure = err.tls_failure().unwrap_or_else(|| panic!("not a TLS error: {err:?}"));
    assert!(matches!(failure, TlsFailure::NotTls { .. } | TlsFailure::HandshakeTimeout { .. }), "{failure:?}: {err}");
    assert!(err.to_string().contains("plain-TCP acceptor"), "{err}");
    assert!(elapsed < PROMPTLY, "took {elapsed:?}: {err}");
}

/// Material that cannot be used is named before anything is sent: a missing CA file, a PKCS12 key store.
#[tokio::test]
async fn unusable_material_is_named_by_its_file() {
    let (node, _) = secure().await;
    let mut opts = options(node, &node.core_url());
    opts.tls.as_mut().unwrap().ca_files = vec![PathBuf::from("/nonexistent/ca.pem")];
    let (err, _) = refused(&opts).await;
    assert!(matches!(err.tls_failure(), Some(TlsFailure::Material { .. })), "{err:?}");
    assert!(err.to_string().contains("trust store /nonexistent/ca.pem: does not exist"), "{err}");

    let p12 = format!("{}&keyStorePath=/etc/client.p12&keyStoreType=PKCS12", node.core_url());
    let err = ConnectOptions::from_url(&p12).expect_err("PKCS12 is refused");
    assert!(err.to_string().contains("openssl pkcs12 -in /etc/client.p12"), "{err}");
}

/// Mutual TLS with the client key encrypted (PKCS#8 by `openssl pkcs8 -topk8`, in Artemis' one-file PEM key
/// store): the passphrase, given by reference, opens the session; a wrong one is refused before anything is sent,
/// in words naming the key file and where the passphrase is set, never the passphrase.
#[tokio::test]
async fn mutual_tls_with_an_encrypted_key_needs_its_passphrase_by_reference() {
    let (node, tls) = secure().await;
    let dir = std::env::temp_dir().join(testbed::unique_name("encrypted-key"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bundle = tls.encrypted_client_bundle(&dir, "tls2 pass phrase");
    let url = tls.core_url_with_key_store(tls.mtls_port, Some(&bundle));
    let set_in = "ARTEMIS_TRANSFER_CREDENTIALS__SECURE__KEY_PASSPHRASE";
    let with = |value: Option<&str>| {
        options(node, &url).key_passphrase(Some(KeyPassphrase::new(set_in, value.map(str::to_string))))
    };

    let conn = Connection::connect(&with(Some("tls2 pass phrase"))).await.expect("connect with the encrypted key");
    assert!(conn.queue_query("DLQ").await.expect("a call over mutual TLS").is_some());
    conn.close().await.expect("close");

    let (err, elapsed) = refused(&with(Some("not the pass phrase"))).await;
    assert_failure(
        &err,
        elapsed,
        |f| matches!(f, TlsFailure::KeyPassphraseWrong { .. }),
        &[&bundle.display().to_string(), set_in, "does not decrypt"],
    );
    assert!(!format!("{err} {err:?}").contains("pass phrase"), "{err}");

    let (err, elapsed) = refused(&with(None)).await;
    assert_failure(
        &err,
        elapsed,
        |f| matches!(f, TlsFailure::KeyPassphraseMissing { .. }),
        &[&bundle.display().to_string(), &format!("{set_in} is not set")],
    );
    std::fs::remove_dir_all(dir).ok();
}
