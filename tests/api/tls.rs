//! `serve --tls-cert --tls-key` (issue 16): HTTPS with a self-signed certificate made here (rcgen), trusted by the
//! test's client alone; plain HTTP on the same port gets no HTTP answer; SIGTERM still ends the service
//! gracefully. Bad files stop `serve` at start with words that name the file; plain HTTP beyond loopback is
//! refused unless a proxy in front is said to terminate TLS.

use super::*;

use std::io::{Read, Write};

/// The log line of plain HTTP beyond loopback behind a proxy (src/api/mod.rs `serve`).
const BEHIND_PROXY: &str = "a proxy in front terminates TLS";

/// A self-signed certificate for 127.0.0.1 and its key, as PEM files in a directory of their own.
pub struct TestCert {
    dir: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pem: String,
    key_pem: String,
}

impl TestCert {
    fn new(label: &str) -> TestCert {
        let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{label}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (pem, key_pem) = (made.cert.pem(), made.signing_key.serialize_pem());
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, &pem).unwrap();
        std::fs::write(&key, &key_pem).unwrap();
        TestCert { dir, cert, key, pem, key_pem }
    }

    /// `client` trusting this certificate and no other.
    pub fn trusted_by(&self, client: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        let root = reqwest::Certificate::from_pem(self.pem.as_bytes()).unwrap();
        client.tls_built_in_root_certs(false).add_root_certificate(root)
    }

    /// Panics if `text` holds a line of the private key.
    fn assert_not_in(&self, what: &str, text: &str) {
        for line in self.key_pem.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!text.contains(line), "{what} holds the private key: {text}");
        }
    }
}

impl Drop for TestCert {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a plain-HTTP request to `addr` gets back before the server closes the connection (5 s at most).
fn plain_http_reply(addr: &str) -> Vec<u8> {
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = Vec::new();
    let _ = tcp.read_to_end(&mut reply);
    reply
}

#[tokio::test]
async fn serve_over_tls_answers_https_and_no_plain_http_and_stops_on_sigterm() {
    let world = World::new("api_tls", &[]).await;
    let cert = TestCert::new("api_tls");
    // Started means /health answered over HTTPS, the certificate checked by the client.
    let mut api = Api::launch(&world, Launch { tls: Some(&cert), ..Launch::default() }).await;
    assert!(api.base.starts_with("https://"), "{}", api.base);

    let document: Value =
        api.client.get(format!("{}/openapi.json", api.base)).send().await.unwrap().json().await.unwrap();
    assert!(document["openapi"].is_string(), "{document}");
    let (status, me) = api.get("/api/v1/me", OPERATOR).await;
    assert_eq!(status, StatusCode::OK, "{me}");

    // Plain HTTP on the TLS port: no HTTP answer, and the service goes on.
    let addr = api.base.trim_start_matches("https://").to_string();
    let reply = plain_http_reply(&addr);
    assert!(!reply.starts_with(b"HTTP/"), "plain HTTP was answered: {:?}", String::from_utf8_lossy(&reply));
    let plain = reqwest::Client::new().get(format!("http://{addr}/health")).send().await;
    assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");
    // A client that does not trust the certificate is refused by its own side.
    let untrusting = reqwest::Client::builder().build().unwrap().get(format!("{}/health", api.base)).send().await;
    assert!(untrusting.is_err(), "a certificate no one vouches for was accepted: {untrusting:?}");
    let (status, _) = api.get("/api/v1/me", OPERATOR).await;
    assert_eq!(status, StatusCode::OK, "after the failed handshakes");

    // SIGTERM with a connection whose handshake never starts: the service exits within its grace all the same.
    let _silent = std::net::TcpStream::connect(&addr).unwrap();
    let told = api.terminate();
    let exited = api.exit_after(told).await;
    assert!(exited.success(), "serve exited {exited}");
    eprintln!("serve over TLS exited {:?} after SIGTERM", told.elapsed());

    let log = std::fs::read_to_string(&api.log).unwrap();
    assert!(!log.contains(BEHIND_PROXY), "said it serves plain HTTP while serving TLS: {log}");
    let dropped = log.lines().filter(|l| l.contains("DEBUG") && l.contains("a TLS handshake failed")).count();
    assert!(dropped >= 3, "the failed handshakes (plain twice, untrusting once) are logged at debug: {log}");
    cert.assert_not_in("the log", &log);
    api.assert_no_secret();
}

/// `serve` with `args` (after `serve --listen 127.0.0.1:1`) and no database: it must stop before connecting.
/// Its exit status and stderr.
fn serve_refused(args: &[&std::ffi::OsStr]) -> (std::process::ExitStatus, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_artemis-transfer"))
        .args(["serve", "--listen", "127.0.0.1:1"])
        .args(args)
        .env("ARTEMIS_TRANSFER_API_TOKENS", format!("studio={TOKEN}"))
        .env_remove("DATABASE_URL")
        .env_remove("ARTEMIS_TRANSFER__API__TLS_CERT")
        .env_remove("ARTEMIS_TRANSFER__API__TLS_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out.status, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn serve_stops_at_start_on_half_or_bad_tls_files() {
    let cert = TestCert::new("api_tls_bad");
    let other = TestCert::new("api_tls_other");
    let missing = cert.dir.join("no-such.pem");
    let cases: [(&[&std::ffi::OsStr], &str); 4] = [
        (&["--tls-cert".as_ref(), cert.cert.as_os_str()], "only the certificate is set"),
        (&["--tls-cert".as_ref(), missing.as_os_str(), "--tls-key".as_ref(), cert.key.as_os_str()], "does not exist"),
        (
            &["--tls-cert".as_ref(), cert.key.as_os_str(), "--tls-key".as_ref(), cert.key.as_os_str()],
            "holds no certificate",
        ),
        (
            &["--tls-cert".as_ref(), cert.cert.as_os_str(), "--tls-key".as_ref(), other.key.as_os_str()],
            "does not match",
        ),
    ];
    for (args, words) in cases {
        let (status, stderr) = serve_refused(args);
        assert!(!status.success(), "serve started with {args:?}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
        assert!(!stderr.contains("DATABASE_URL"), "the files are checked before the database: {stderr}");
        cert.assert_not_in("stderr", &stderr);
        other.assert_not_in("stderr", &stderr);
    }
    let (_, stderr) =
        serve_refused(&["--tls-cert".as_ref(), missing.as_os_str(), "--tls-key".as_ref(), cert.key.as_os_str()]);
    assert!(stderr.contains(&missing.display().to_string()), "the file is named: {stderr}");
}

/// Plain HTTP beyond loopback would carry bearer tokens in clear: `serve` refuses to start so, in words (before the
/// database is asked), unless told a proxy in front terminates TLS — `--behind-tls-proxy` or
/// `api.plain_http_behind_proxy`; on loopback it serves plain HTTP as ever.
#[tokio::test]
async fn plain_http_beyond_loopback_is_refused_unless_a_proxy_terminates_tls() {
    let refused = Command::new(env!("CARGO_BIN_EXE_artemis-transfer"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env("ARTEMIS_TRANSFER_API_TOKENS", format!("studio={TOKEN}"))
        .env_remove("DATABASE_URL")
        .env_remove("ARTEMIS_TRANSFER__API__PLAIN_HTTP_BEHIND_PROXY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    for words in ["plain HTTP on 0.0.0.0:0", "in clear", "--tls-cert", "--behind-tls-proxy"] {
        assert!(stderr.contains(words), "{words:?}: {stderr}");
    }
    assert!(!stderr.contains("DATABASE_URL") && !stderr.contains(TOKEN), "{stderr}");

    let world = World::new("api_in_clear", &[]).await;
    // Listening on every address; the test still calls it on 127.0.0.1 only.
    let by_flag = Api::launch(&world, Launch { host: "0.0.0.0", args: &["--behind-tls-proxy"], ..Launch::default() });
    let configured = [("ARTEMIS_TRANSFER__API__PLAIN_HTTP_BEHIND_PROXY", "true")];
    let by_config = Api::launch(&world, Launch { host: "0.0.0.0", env: &configured, ..Launch::default() });
    let (by_flag, by_config) = tokio::join!(by_flag, by_config);
    for api in [&by_flag, &by_config] {
        let log = std::fs::read_to_string(&api.log).unwrap();
        assert!(log.lines().any(|l| l.contains(BEHIND_PROXY)), "{log}");
    }
    let loopback = Api::start(&world).await;
    let quiet = std::fs::read_to_string(&loopback.log).unwrap();
    assert!(!quiet.contains(BEHIND_PROXY), "{quiet}");
}
