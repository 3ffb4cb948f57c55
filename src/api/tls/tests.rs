//! The files `serve` is given: each fault has its own error, which names the file and never holds the key. The
//! certificates are made here (rcgen); a last test serves one over TLS through [`TlsListener`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::*;

/// A fresh directory for one test's files, removed with it.
struct Scratch(PathBuf);

impl Scratch {
    fn new(label: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("artemis-transfer-tls-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A self-signed certificate for 127.0.0.1 and localhost: (certificate PEM, private key PEM).
fn self_signed() -> (String, String) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    (made.cert.pem(), made.signing_key.serialize_pem())
}

/// `cert` and `key` written into `dir` as cert.pem and key.pem.
fn files(dir: &Path, cert: &str, key: &str) -> TlsFiles {
    let files = TlsFiles { cert: dir.join("cert.pem"), key: dir.join("key.pem") };
    std::fs::write(&files.cert, cert).unwrap();
    std::fs::write(&files.key, key).unwrap();
    files
}

/// The error of loading `files`, after checking its words name `named` and hold nothing of `key`.
fn refusal(files: &TlsFiles, named: &Path, key: &str) -> TlsError {
    let err = files.server_config().expect_err("the files are refused");
    let words = crate::cli::error_chain(&err);
    assert!(words.contains(&named.display().to_string()), "the file is not named: {words}");
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!words.contains(line), "the key's content is in the words: {words}");
    }
    err
}

#[test]
fn a_certificate_and_its_key_make_a_configuration_that_offers_http_1_1() {
    let (cert, key) = self_signed();
    let config = files(&Scratch::new("good"), &cert, &key).server_config().unwrap();
    assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
    // One file holding both is the same.
    let dir = Scratch::new("combined");
    let both = format!("{cert}{key}");
    let combined = files(&dir, &both, &both);
    combined.server_config().unwrap();
}

#[test]
fn both_files_or_neither() {
    let (cert, key) = (Some(PathBuf::from("c.pem")), Some(PathBuf::from("k.pem")));
    assert!(TlsFiles::pair(None, None).unwrap().is_none());
    assert!(TlsFiles::pair(cert.clone(), key.clone()).unwrap().is_some());
    let err = TlsFiles::pair(cert, None).unwrap_err();
    assert!(matches!(err, TlsError::HalfConfigured { given: Role::Certificate }), "{err:?}");
    assert!(err.to_string().contains("--tls-key"), "{err}");
    let err = TlsFiles::pair(None, key).unwrap_err();
    assert!(matches!(err, TlsError::HalfConfigured { given: Role::PrivateKey }), "{err:?}");
}

#[test]
fn a_missing_file_is_named() {
    let (cert, key) = self_signed();
    let dir = Scratch::new("missing");
    let mut tls = files(&dir, &cert, &key);
    tls.cert = dir.join("no-such-cert.pem");
    let err = refusal(&tls, &tls.cert, &key);
    assert!(matches!(err, TlsError::Missing { role: Role::Certificate, .. }), "{err:?}");
    let mut tls = files(&dir, &cert, &key);
    tls.key = dir.join("no-such-key.pem");
    let err = refusal(&tls, &tls.key, &key);
    assert!(matches!(err, TlsError::Missing { role: Role::PrivateKey, .. }), "{err:?}");
}

#[test]
fn a_directory_is_not_a_file() {
    let (cert, key) = self_signed();
    let dir = Scratch::new("directory");
    let mut tls = files(&dir, &cert, &key);
    tls.key = dir.to_path_buf();
    let err = refusal(&tls, &dir, &key);
    assert!(matches!(err, TlsError::Read { role: Role::PrivateKey, .. }), "{err:?}");
}

#[test]
fn a_certificate_file_without_a_certificate() {
    let (_, key) = self_signed();
    let dir = Scratch::new("no-cert");
    // The key where the certificate should be, and a file of no PEM at all.
    for text in [key.as_str(), "not a certificate\n", ""] {
        let tls = files(&dir, text, &key);
        let err = refusal(&tls, &tls.cert, &key);
        assert!(matches!(err, TlsError::NoCertificate { .. }), "{err:?}");
    }
}

#[test]
fn a_key_file_without_a_private_key() {
    let (cert, key) = self_signed();
    let dir = Scratch::new("no-key");
    let tls = files(&dir, &cert, &cert);
    let err = refusal(&tls, &tls.key, &key);
    assert!(matches!(err, TlsError::NoPrivateKey { .. }), "{err:?}");
}

#[test]
fn a_broken_key_file_is_not_quoted() {
    let (cert, key) = self_signed();
    let dir = Scratch::new("broken-key");
    // Cut short: a section without its END line; the PEM parser's own error would quote the file.
    let cut = &key[..key.len() / 2];
    let tls = files(&dir, &cert, cut);
    let err = refusal(&tls, &tls.key, &key);
    assert!(matches!(err, TlsError::NotPem { role: Role::PrivateKey, .. }), "{err:?}");
    // Base64 broken in the middle.
    let mut lines: Vec<String> = key.lines().map(str::to_string).collect();
    lines[1] = format!("!!{}", &lines[1][2..]);
    let tls = files(&dir, &cert, &lines.join("\n"));
    let err = refusal(&tls, &tls.key, &key);
    assert!(matches!(err, TlsError::NotPem { role: Role::PrivateKey, .. }), "{err:?}");
}

#[test]
fn a_key_that_is_not_the_certificates() {
    let (cert, _) = self_signed();
    let (_, other_key) = self_signed();
    let dir = Scratch::new("mismatch");
    let tls = files(&dir, &cert, &other_key);
    let err = refusal(&tls, &tls.key, &other_key);
    assert!(matches!(err, TlsError::KeyMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains(&tls.cert.display().to_string()), "{err}");
}

#[test]
fn a_certificate_rustls_cannot_read() {
    let (_, key) = self_signed();
    let dir = Scratch::new("unreadable-cert");
    let tls = files(&dir, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", &key);
    let err = refusal(&tls, &tls.cert, &key);
    assert!(matches!(err, TlsError::Unusable { .. }), "{err:?}");
}

/// A TLS client that trusts only `cert_pem` and offers HTTP/2 before HTTP/1.1, as a browser does.
fn client(cert_pem: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// A GET of `/` over `client` to `addr`: the answer's head and body.
async fn get(client: &tokio_rustls::TlsConnector, addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let mut tls = client.connect(name, tcp).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]), "the server speaks HTTP/1.1 only");
    tls.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.unwrap();
    answer
}

/// Served through the listener: a client that never starts its handshake holds up neither the next client nor
/// the graceful shutdown, and its connection is dropped at the handshake's bound; a client that speaks plain
/// HTTP is dropped without an HTTP answer, and the server goes on.
#[tokio::test]
async fn the_listener_serves_over_tls_and_a_stalled_or_plain_client_does_not_stop_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (cert, key) = self_signed();
    let config = files(&Scratch::new("listener"), &cert, &key).server_config().unwrap();
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let listener = TlsListener::with_handshake_timeout(tcp, config, Duration::from_secs(2));
    let app = axum::Router::new().route("/", axum::routing::get(|| async { "over TLS" }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(async move { drop(stopped.await) }).await
    });

    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let client = client(&cert);
    let answer = tokio::time::timeout(Duration::from_secs(5), get(&client, addr)).await.expect("not held up");
    assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("over TLS"), "{answer}");

    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), plain.read_to_end(&mut reply)).await.expect("dropped");
    assert!(!reply.starts_with(b"HTTP/"), "plain HTTP got an HTTP answer: {:?}", String::from_utf8_lossy(&reply));
    assert!(get(&client, addr).await.ends_with("over TLS"), "the server goes on");

    // The silent client's connection is closed at the handshake's bound (2 s here).
    let mut nothing = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut nothing)).await;
    assert!(read.is_ok() && nothing.is_empty(), "the silent connection is dropped: {read:?}");

    stop.send(()).unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), server).await.expect("the server ends on its signal");
    ended.unwrap().unwrap();
}
