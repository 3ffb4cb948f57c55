//! Core over TLS (rustls, ring provider): what to trust, which client certificate to present, and how a failed
//! handshake is told in words.
//!
//! The material is PEM, read when a connection is opened: the CA file(s) to trust (none: the Mozilla roots of
//! `webpki-roots`), and for mutual TLS a certificate chain and its private key (one file holding both, as
//! Artemis' own PEM key store, or two); an encrypted PKCS#8 key is decrypted with a passphrase given by reference
//! ([`KeyPassphrase`], never in the URL; see [`key`]). PKCS12 and JKS stores are refused with the command that converts them: no
//! well-kept pure-Rust reader of them keeps the workspace's rust-version. The broker's host name is verified
//! unless [`TlsOptions::verify_host`] is turned off by explicit choice.
//!
//! A handshake is bounded by [`TlsOptions::handshake_timeout`], and every failure becomes a [`TlsError`] naming
//! the broker's address and what failed ([`TlsFailure`]): an unknown CA, an expired certificate, a host name
//! the certificate does not carry, a client certificate the broker wanted and was not given, a port that does not
//! speak TLS.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

mod key;

pub use key::{identity_pem, pkcs8_conversion, KeyPassphrase};

/// How long a TLS handshake may take by default: a TLS acceptor answers a ClientHello at once, so a port that
/// says nothing for this long is not one (or its broker is stuck).
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// How to speak TLS to a broker's acceptor (`sslEnabled=true`). It holds paths, and a key's passphrase only as
/// a [`KeyPassphrase`], whose `Debug` never shows it.
#[derive(Clone, Debug)]
pub struct TlsOptions {
    /// PEM files of the CAs to trust (Artemis' `trustStorePath` with `trustStoreType=PEM`). Empty: the Mozilla
    /// roots, as a public web client would trust.
    pub ca_files: Vec<PathBuf>,
    /// The client certificate for an acceptor with `needClientAuth=true` (mutual TLS).
    pub client: Option<ClientIdentity>,
    /// Whether the broker's certificate must carry the host name connected to (Artemis' `verifyHost`, on by
    /// default in its connectors). Turn it off only by explicit choice: any certificate the CA signed is then
    /// accepted, whatever host it was made for.
    pub verify_host: bool,
    /// The name sent in SNI and verified in the certificate (Artemis' `sniHost`); `None`: the host connected to.
    pub server_name: Option<String>,
    /// Bound on the TCP connect and the TLS handshake.
    pub handshake_timeout: Duration,
}

impl Default for TlsOptions {
    fn default() -> Self {
        TlsOptions {
            ca_files: Vec::new(),
            client: None,
            verify_host: true,
            server_name: None,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
        }
    }
}

/// A client certificate chain and its private key, PEM. Both may be the same file (Artemis' PEM key store).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The certificate chain, the client's own certificate first.
    pub cert_file: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1; or encrypted PKCS#8, PBES2).
    pub key_file: PathBuf,
    /// The passphrase of an encrypted key, by reference; `None`: none is given (an encrypted key is refused).
    pub key_passphrase: Option<KeyPassphrase>,
}

impl TlsOptions {
    /// These options with `passphrase` for the client key, if there is one (a plain TCP or one-way TLS endpoint
    /// has none to decrypt).
    pub fn with_key_passphrase(mut self, passphrase: Option<KeyPassphrase>) -> Self {
        if let Some(client) = self.client.as_mut() {
            client.key_passphrase = passphrase;
        }
        self
    }
}

/// What a key or trust store file is, as Artemis' `keyStoreType`/`trustStoreType` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    /// PEM: read.
    Pem,
    /// PKCS12: refused with the command that converts it.
    Pkcs12,
    /// JKS: refused with the command that converts it.
    Jks,
}

impl StoreType {
    /// The type Artemis' parameter names (case-insensitive), or `None` for a name it does not know.
    pub fn parse(name: &str) -> Option<StoreType> {
        match name.to_ascii_uppercase().as_str() {
            "PEM" | "PEMCFG" => Some(StoreType::Pem),
            "PKCS12" | "P12" | "PFX" => Some(StoreType::Pkcs12),
            "JKS" | "JCEKS" => Some(StoreType::Jks),
            _ => None,
        }
    }

    /// The type a file's extension suggests when no type is named (PEM otherwise).
    pub fn from_path(path: &Path) -> StoreType {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        match ext.as_str() {
            "p12" | "pfx" | "pkcs12" => StoreType::Pkcs12,
            "jks" | "jceks" | "keystore" | "truststore" => StoreType::Jks,
            _ => StoreType::Pem,
        }
    }
}

/// Which store a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreRole {
    /// What to trust (`trustStorePath`).
    Trust,
    /// The client certificate and key (`keyStorePath`).
    Key,
}

impl fmt::Display for StoreRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreRole::Trust => "trust store",
            StoreRole::Key => "key store",
        })
    }
}

/// The command that converts a PKCS12 or JKS store at `path` to the PEM this client reads.
pub fn conversion_hint(role: StoreRole, store: StoreType, path: &Path) -> String {
    let p = path.display();
    let pkcs12 = match store {
        StoreType::Jks => format!(
            "first `keytool -importkeystore -srckeystore {p} -srcstoretype JKS -destkeystore store.p12 \
             -deststoretype PKCS12`, then "
        ),
        _ => String::new(),
    };
    let source = if store == StoreType::Jks { "store.p12".to_string() } else { p.to_string() };
    match role {
        StoreRole::Trust => format!(
            "convert it to PEM: {pkcs12}`keytool -exportcert -rfc -keystore {source} -storetype PKCS12 -alias <ca \
             alias> -file ca.pem` (or `openssl pkcs12 -in {source} -nokeys -out ca.pem`), and give ca.pem with \
             trustStoreType=PEM"
        ),
        StoreRole::Key => format!(
            "convert it to PEM: {pkcs12}`openssl pkcs12 -in {source} -nodes -out client.pem` (key and certificate in \
             one file), and give client.pem with keyStoreType=PEM"
        ),
    }
}

/// A TLS failure, with the broker's address.
#[derive(Debug, Clone, thiserror::Error)]
#[error("TLS to {addr} failed: {failure}")]
pub struct TlsError {
    /// `host:port`.
    pub addr: String,
    /// What failed.
    pub failure: TlsFailure,
}

/// What failed in a TLS connection, each in words that say what to do.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The broker's certificate is not signed by a CA this client trusts.
    #[error(
        "the broker's certificate is not signed by a trusted CA (unknown issuer): give the CA that signed it \
         (trustStorePath)"
    )]
    UnknownIssuer,
    /// The broker's certificate has expired.
    #[error("the broker's certificate has expired{}: the broker needs a new certificate", in_parens(.detail))]
    Expired {
        /// When, if rustls said.
        detail: Option<String>,
    },
    /// The broker's certificate is not valid yet.
    #[error("the broker's certificate is not valid yet{}: check the clocks", in_parens(.detail))]
    NotYetValid {
        /// When it becomes valid, if rustls said.
        detail: Option<String>,
    },
    /// The certificate does not carry the name connected to.
    #[error(
        "host name mismatch: the broker's certificate is not valid for {name}{}: connect by a name the \
         certificate carries (verifyHost=false turns the check off, by explicit choice only)",
        in_parens(.presented)
    )]
    HostNameMismatch {
        /// The name connected to (or `sniHost`).
        name: String,
        /// The names the certificate carries, if rustls said.
        presented: Option<String>,
    },
    /// Another fault of the broker's certificate.
    #[error("the broker's certificate was refused: {0}")]
    BadCertificate(String),
    /// The broker asked for a client certificate, none is configured, and it refused to go on.
    #[error(
        "the broker requires a client certificate (mutual TLS) and none is configured: give one \
         (keyStorePath, keyStoreType=PEM)"
    )]
    ClientCertificateRequired,
    /// The broker refused the client certificate given.
    #[error("the broker refused the client certificate: {alert}; is it signed by a CA the broker trusts?")]
    ClientCertificateRefused {
        /// The broker's TLS alert.
        alert: String,
    },
    /// The port answered with something that is not TLS.
    #[error("the port did not answer as TLS ({reason}): is it a plain-TCP acceptor? (then drop sslEnabled=true)")]
    NotTls {
        /// What rustls saw.
        reason: String,
    },
    /// Nothing came back within the handshake timeout.
    #[error(
        "no TLS handshake within {after:?}: the port does not answer TLS (a plain-TCP acceptor waiting for \
         its preamble?) or the broker is stuck"
    )]
    HandshakeTimeout {
        /// The timeout.
        after: Duration,
    },
    /// The broker ended the handshake with an alert.
    #[error(
        "the broker ended the handshake with the TLS alert {0} (a broker that requires a client certificate does \
         so when none, or one it does not trust, is given: keyStorePath)"
    )]
    Alert(String),
    /// A file of TLS material is missing, unreadable or not what it should be.
    #[error("the {role} {}: {fault}", path.display())]
    Material {
        /// Which store.
        role: StoreRole,
        /// The file.
        path: PathBuf,
        /// What is wrong, in fixed words (never a line of the file: it may be a key).
        fault: String,
    },
    /// A PKCS12 or JKS store, which this client does not read.
    #[error("the {role} {} is {store:?}, which this client does not read: {}", path.display(), conversion_hint(*role, *store, path))]
    UnsupportedStore {
        /// Which store.
        role: StoreRole,
        /// Its type.
        store: StoreType,
        /// The file.
        path: PathBuf,
    },
    /// The client's private key is encrypted and no passphrase is set for it.
    #[error(
        "the key store {}: its private key is encrypted and {}", path.display(),
        match set_in {
            Some(name) => format!("{name} is not set: set it to the key's passphrase"),
            None => "no passphrase is given for it: give it by reference (artemis-transfer reads it from \
                     ARTEMIS_TRANSFER_CREDENTIALS__<REF>__KEY_PASSPHRASE), never in the URL".to_string(),
        }
    )]
    KeyPassphraseMissing {
        /// The key file.
        path: PathBuf,
        /// Where the passphrase is looked for, if that is known.
        set_in: Option<String>,
    },
    /// The passphrase given does not decrypt the client's private key.
    #[error(
        "the key store {}: the passphrase in {set_in} does not decrypt its private key: set {set_in} to the \
         passphrase the key was encrypted with", path.display()
    )]
    KeyPassphraseWrong {
        /// The key file.
        path: PathBuf,
        /// Where the passphrase was read from (never the passphrase).
        set_in: String,
    },
    /// A private key in OpenSSL's legacy encrypted PEM (`Proc-Type: 4,ENCRYPTED`).
    #[error(
        "the key store {}: its private key is in OpenSSL's legacy encrypted PEM (Proc-Type: 4,ENCRYPTED), which \
         this client does not read: convert it to encrypted PKCS#8 with {}", path.display(), pkcs8_conversion(path)
    )]
    LegacyEncryptedKey {
        /// The key file.
        path: PathBuf,
    },
    /// An encrypted PKCS#8 key whose scheme this client does not decrypt.
    #[error(
        "the key store {}: its private key is encrypted with {scheme}, which this client does not decrypt: \
         encrypt it again with PBES2 and AES, {}", path.display(), pkcs8_conversion(path)
    )]
    UnsupportedKeyEncryption {
        /// The key file.
        path: PathBuf,
        /// The scheme, in words.
        scheme: String,
    },
    /// Something else in rustls.
    #[error("{0}")]
    Other(String),
}

fn in_parens(d: &Option<String>) -> String {
    d.as_ref().map(|d| format!(" ({d})")).unwrap_or_default()
}

/// What the handshake learnt that the words of a later failure need: whether the broker asked for a client
/// certificate.
#[derive(Debug, Default)]
pub(crate) struct HandshakeProbe {
    asked_for_client_certificate: AtomicBool,
    have_client_certificate: bool,
}

impl HandshakeProbe {
    fn asked_without_certificate(&self) -> bool {
        self.asked_for_client_certificate.load(Ordering::Relaxed) && !self.have_client_certificate
    }

    /// What an I/O error on a TLS connection (the handshake, or the first reads after it, when a TLS 1.3 broker
    /// refuses a client certificate) means, if it is a TLS failure.
    pub(crate) fn classify(&self, e: &io::Error) -> Option<TlsFailure> {
        let rustls_error = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
        match rustls_error {
            Some(err) => Some(self.failure(err)),
            None if e.kind() == io::ErrorKind::UnexpectedEof && self.asked_without_certificate() => {
                Some(TlsFailure::ClientCertificateRequired)
            }
            None => None,
        }
    }

    fn failure(&self, e: &rustls::Error) -> TlsFailure {
        match e {
            rustls::Error::AlertReceived(_) if self.asked_without_certificate() => {
                TlsFailure::ClientCertificateRequired
            }
            rustls::Error::AlertReceived(alert)
                if self.asked_for_client_certificate.load(Ordering::Relaxed) && client_certificate_alert(*alert) =>
            {
                TlsFailure::ClientCertificateRefused { alert: format!("{alert:?}") }
            }
            other => TlsFailure::from_rustls(other),
        }
    }
}

impl TlsFailure {
    /// What a rustls error means, for a client that did not watch the handshake (an HTTP client's): the same
    /// words as a Core connection's, except that a refusal of the client certificate is told by the broker's
    /// alert alone.
    pub fn from_rustls(e: &rustls::Error) -> TlsFailure {
        match e {
            rustls::Error::InvalidCertificate(c) => certificate_failure(c),
            rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
                TlsFailure::ClientCertificateRequired
            }
            rustls::Error::AlertReceived(alert) => TlsFailure::Alert(format!("{alert:?}")),
            rustls::Error::InvalidMessage(m) => TlsFailure::NotTls { reason: format!("{m:?}") },
            other => TlsFailure::Other(other.to_string()),
        }
    }

    /// The TLS failure an error of any kind carries somewhere in its chain of sources (a rustls error inside an
    /// I/O error inside an HTTP client's error), if any.
    pub fn find_in(e: &(dyn std::error::Error + 'static)) -> Option<TlsFailure> {
        let mut next = Some(e);
        while let Some(err) = next {
            if let Some(r) = err.downcast_ref::<rustls::Error>() {
                return Some(TlsFailure::from_rustls(r));
            }
            // An I/O error's `source` skips the error it wraps (it answers that error's source): descend into it.
            next = match err.downcast_ref::<io::Error>().and_then(io::Error::get_ref) {
                Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
                None => err.source(),
            };
        }
        None
    }
}

fn client_certificate_alert(alert: AlertDescription) -> bool {
    matches!(
        alert,
        AlertDescription::BadCertificate
            | AlertDescription::CertificateRequired
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::CertificateExpired
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::AccessDenied
            | AlertDescription::HandshakeFailure
    )
}

fn certificate_failure(c: &CertificateError) -> TlsFailure {
    match c {
        CertificateError::UnknownIssuer => TlsFailure::UnknownIssuer,
        CertificateError::Expired => TlsFailure::Expired { detail: None },
        CertificateError::ExpiredContext { time, not_after } => TlsFailure::Expired {
            detail: Some(format!("{} ago", days(time.as_secs().saturating_sub(not_after.as_secs())))),
        },
        CertificateError::NotValidYet => TlsFailure::NotYetValid { detail: None },
        CertificateError::NotValidYetContext { time, not_before } => TlsFailure::NotYetValid {
            detail: Some(format!("for another {}", days(not_before.as_secs().saturating_sub(time.as_secs())))),
        },
        CertificateError::NotValidForName => TlsFailure::HostNameMismatch { name: String::new(), presented: None },
        CertificateError::NotValidForNameContext { expected, presented } => TlsFailure::HostNameMismatch {
            name: server_name_text(expected),
            presented: Some(format!("it carries {}", presented.join(", "))),
        },
        other => TlsFailure::BadCertificate(format!("{other:?}")),
    }
}

/// A span of seconds in words: whole days, or "less than a day".
fn days(secs: u64) -> String {
    match secs / 86_400 {
        0 => "less than a day".to_string(),
        1 => "1 day".to_string(),
        n => format!("{n} days"),
    }
}

fn server_name_text(name: &ServerName<'_>) -> String {
    match name {
        ServerName::DnsName(d) => d.as_ref().to_string(),
        ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        other => format!("{other:?}"),
    }
}

/// Verifies the broker's chain as the WebPKI verifier does, without the host name (`verifyHost=false`).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The name is checked last, after the chain and the dates: its failure alone means the rest held.
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Presents the client certificate (if any) and records that the broker asked for one.
#[derive(Debug)]
struct RecordingResolver {
    key: Option<Arc<CertifiedKey>>,
    probe: Arc<HandshakeProbe>,
}

impl ResolvesClientCert for RecordingResolver {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.probe.asked_for_client_certificate.store(true, Ordering::Relaxed);
        self.key.clone()
    }

    fn has_certs(&self) -> bool {
        self.key.is_some()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn material(role: StoreRole, path: &Path, fault: impl Into<String>) -> TlsFailure {
    TlsFailure::Material { role, path: path.to_owned(), fault: fault.into() }
}

fn read(role: StoreRole, path: &Path) -> Result<Vec<u8>, TlsFailure> {
    match StoreType::from_path(path) {
        StoreType::Pem => {}
        store => return Err(TlsFailure::UnsupportedStore { role, store, path: path.to_owned() }),
    }
    std::fs::read(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => material(role, path, "does not exist"),
        _ => material(role, path, format!("cannot be read ({e})")),
    })
}

fn certificates(role: StoreRole, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsFailure> {
    let text = read(role, path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| material(role, path, "is not valid PEM"))?;
    if certs.is_empty() {
        return Err(material(role, path, "holds no certificate (no BEGIN CERTIFICATE section)"));
    }
    Ok(certs)
}

fn roots(opts: &TlsOptions) -> Result<RootCertStore, TlsFailure> {
    let mut roots = RootCertStore::empty();
    if opts.ca_files.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    }
    for path in &opts.ca_files {
        for cert in certificates(StoreRole::Trust, path)? {
            roots.add(cert).map_err(|e| material(StoreRole::Trust, path, format!("holds an unusable CA ({e})")))?;
        }
    }
    Ok(roots)
}

fn client_key(identity: &ClientIdentity, provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, TlsFailure> {
    let chain = certificates(StoreRole::Key, &identity.cert_file)?;
    let key = key::private_key(&identity.key_file, identity.key_passphrase.as_ref())?;
    CertifiedKey::from_der(chain, key, provider).map(Arc::new).map_err(|e| {
        let fault = match e {
            rustls::Error::InconsistentKeys(_) => "holds a private key that is not the certificate's".to_string(),
            other => format!("cannot be used ({other})"),
        };
        material(StoreRole::Key, &identity.key_file, fault)
    })
}

/// The rustls configuration of one connection, and the probe its failures are read with.
fn client_config(opts: &TlsOptions) -> Result<(ClientConfig, Arc<HandshakeProbe>), TlsFailure> {
    let provider = provider();
    let roots = Arc::new(roots(opts)?);
    let key = opts.client.as_ref().map(|id| client_key(id, &provider)).transpose()?;
    let probe = Arc::new(HandshakeProbe { have_client_certificate: key.is_some(), ..HandshakeProbe::default() });
    let resolver = Arc::new(RecordingResolver { key, probe: Arc::clone(&probe) });
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsFailure::Other(e.to_string()))?;
    let config = if opts.verify_host {
        builder.with_root_certificates(roots).with_client_cert_resolver(resolver)
    } else {
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| TlsFailure::Other(e.to_string()))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
            .with_client_cert_resolver(resolver)
    };
    Ok((config, probe))
}

/// A TLS connection whose handshake is done, and what the handshake learnt.
pub(crate) struct Handshaken {
    pub stream: TlsStream<TcpStream>,
    pub probe: Arc<HandshakeProbe>,
}

/// Runs the TLS handshake on `tcp` to `host`, bounded by the options' handshake timeout.
pub(crate) async fn handshake(
    tcp: TcpStream,
    host: &str,
    addr: &str,
    opts: &TlsOptions,
) -> Result<Handshaken, TlsError> {
    let fail = |failure| TlsError { addr: addr.to_string(), failure };
    let (config, probe) = client_config(opts).map_err(fail)?;
    let name_text = opts.server_name.as_deref().unwrap_or(host);
    // An IPv6 literal comes bracketed in a URL; the name is the address itself.
    let name = ServerName::try_from(name_text.trim_start_matches('[').trim_end_matches(']').to_string())
        .map_err(|_| fail(TlsFailure::Other(format!("`{name_text}` is not a host name or IP address"))))?;
    let connector = TlsConnector::from(Arc::new(config));
    match tokio::time::timeout(opts.handshake_timeout, connector.connect(name, tcp)).await {
        Ok(Ok(stream)) => Ok(Handshaken { stream, probe }),
        Ok(Err(e)) => {
            let failure = probe.classify(&e).unwrap_or_else(|| TlsFailure::NotTls { reason: e.to_string() });
            Err(fail(with_name(failure, name_text)))
        }
        Err(_) => Err(fail(TlsFailure::HandshakeTimeout { after: opts.handshake_timeout })),
    }
}

/// A host-name failure without the name rustls gave fills in the one connected to.
fn with_name(failure: TlsFailure, name: &str) -> TlsFailure {
    match failure {
        TlsFailure::HostNameMismatch { name: n, presented } if n.is_empty() => {
            TlsFailure::HostNameMismatch { name: name.to_string(), presented }
        }
        other => other,
    }
}

/// Reads one key=value parameter of an Artemis URL into `tls`; `false` when it is not a TLS parameter.
///
/// `sslEnabled` is read by the caller (it decides whether there is TLS at all); store passwords are refused
/// because this client reads only PEM, which has none.
pub(crate) fn url_parameter(tls: &mut UrlTls, key: &str, value: &str) -> Result<bool, String> {
    match key {
        "trustStorePath" => tls.trust_path = Some(value.to_string()),
        "trustStoreType" => tls.trust_type = Some(store_type(key, value)?),
        "keyStorePath" => tls.key_path = Some(value.to_string()),
        "keyStoreType" => tls.key_type = Some(store_type(key, value)?),
        "verifyHost" => tls.verify_host = Some(boolean(key, value)?),
        "sniHost" => tls.sni_host = Some(value.to_string()),
        // Java's `trustAll` accepts any certificate at all; this client will not.
        "trustAll" if boolean(key, value)? => {
            return Err("trustAll=true is not supported: give the CA that signed the broker's certificate \
                        (trustStorePath)"
                .into())
        }
        _ => return Ok(false),
    }
    Ok(true)
}

fn store_type(key: &str, value: &str) -> Result<StoreType, String> {
    StoreType::parse(value).ok_or_else(|| format!("{key}={value} is not a store type (PEM, PKCS12 or JKS)"))
}

pub(crate) fn boolean(key: &str, value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{key}={value} is neither true nor false")),
    }
}

/// The words refusing a store password among an Artemis URL's parameters (`keyStorePassword`,
/// `trustStorePassword`), or `None` when `key` is not one. A URL is stored and shown as written, so a secret
/// never travels in it; the words name the parameter, never its value.
pub(crate) fn store_password_refusal(key: &str) -> Option<&'static str> {
    match key {
        "keyStorePassword" => Some(
            "keyStorePassword is not taken from a URL, which is stored and shown as written: give the key as \
             encrypted PKCS#8 PEM and its passphrase by reference (artemis-transfer reads it from \
             ARTEMIS_TRANSFER_CREDENTIALS__<REF>__KEY_PASSPHRASE, <REF> the cluster's credentials), or the key \
             unencrypted",
        ),
        "trustStorePassword" => Some(
            "trustStorePassword is not taken from a URL, which is stored and shown as written; a PEM trust store \
             needs none: drop it",
        ),
        _ => None,
    }
}

/// The TLS parameters of an Artemis URL, as written.
#[derive(Debug, Default)]
pub(crate) struct UrlTls {
    trust_path: Option<String>,
    trust_type: Option<StoreType>,
    key_path: Option<String>,
    key_type: Option<StoreType>,
    verify_host: Option<bool>,
    sni_host: Option<String>,
}

impl UrlTls {
    /// The options these parameters say. A store of a type this client does not read is refused here, with the
    /// conversion command, rather than at the first connection.
    pub(crate) fn options(self) -> Result<TlsOptions, String> {
        let mut opts = TlsOptions::default();
        if let Some(path) = self.trust_path {
            let path = PathBuf::from(path);
            let store = self.trust_type.unwrap_or_else(|| StoreType::from_path(&path));
            if store != StoreType::Pem {
                return Err(TlsFailure::UnsupportedStore { role: StoreRole::Trust, store, path }.to_string());
            }
            opts.ca_files = vec![path];
        }
        if let Some(path) = self.key_path {
            let path = PathBuf::from(path);
            let store = self.key_type.unwrap_or_else(|| StoreType::from_path(&path));
            if store != StoreType::Pem {
                return Err(TlsFailure::UnsupportedStore { role: StoreRole::Key, store, path }.to_string());
            }
            // Artemis' PEM key store: the key and its certificate chain in one file.
            opts.client = Some(ClientIdentity { cert_file: path.clone(), key_file: path, key_passphrase: None });
        }
        if let Some(v) = self.verify_host {
            opts.verify_host = v;
        }
        opts.server_name = self.sni_host;
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_types_by_name_and_extension() {
        assert_eq!(StoreType::parse("pem"), Some(StoreType::Pem));
        assert_eq!(StoreType::parse("PKCS12"), Some(StoreType::Pkcs12));
        assert_eq!(StoreType::parse("JKS"), Some(StoreType::Jks));
        assert_eq!(StoreType::parse("BKS"), None);
        assert_eq!(StoreType::from_path(Path::new("/x/client.p12")), StoreType::Pkcs12);
        assert_eq!(StoreType::from_path(Path::new("/x/trust.jks")), StoreType::Jks);
        assert_eq!(StoreType::from_path(Path::new("/x/ca.pem")), StoreType::Pem);
        assert_eq!(StoreType::from_path(Path::new("/x/ca.crt")), StoreType::Pem);
    }

    #[test]
    fn unsupported_stores_say_how_to_convert() {
        let jks =
            TlsFailure::UnsupportedStore { role: StoreRole::Trust, store: StoreType::Jks, path: "/etc/t.jks".into() }
                .to_string();
        assert!(jks.contains("keytool -importkeystore -srckeystore /etc/t.jks") && jks.contains("ca.pem"), "{jks}");
        let p12 =
            TlsFailure::UnsupportedStore { role: StoreRole::Key, store: StoreType::Pkcs12, path: "/etc/k.p12".into() }
                .to_string();
        assert!(p12.contains("openssl pkcs12 -in /etc/k.p12 -nodes -out client.pem"), "{p12}");
    }

    #[test]
    fn missing_material_is_named() {
        let opts = TlsOptions { ca_files: vec!["/nonexistent/ca.pem".into()], ..TlsOptions::default() };
        let err = client_config(&opts).err().unwrap().to_string();
        assert!(err.contains("trust store /nonexistent/ca.pem: does not exist"), "{err}");
    }

    #[test]
    fn url_parameters_make_options() {
        let mut tls = UrlTls::default();
        for (k, v) in [("trustStorePath", "/p/ca.pem"), ("keyStorePath", "/p/c.pem"), ("verifyHost", "false")] {
            assert!(url_parameter(&mut tls, k, v).unwrap());
        }
        assert!(!url_parameter(&mut tls, "reconnectAttempts", "3").unwrap());
        let opts = tls.options().unwrap();
        assert_eq!(opts.ca_files, vec![PathBuf::from("/p/ca.pem")]);
        assert_eq!(opts.client.unwrap().key_file, PathBuf::from("/p/c.pem"));
        assert!(!opts.verify_host);
        assert!(url_parameter(&mut UrlTls::default(), "trustAll", "true").is_err());
        let mut p12 = UrlTls::default();
        url_parameter(&mut p12, "keyStorePath", "/p/c.p12").unwrap();
        assert!(p12.options().unwrap_err().contains("openssl pkcs12"));
    }
}
