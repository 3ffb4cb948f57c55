//! TLS for `serve` (issue 16): when a certificate and its private key are configured (`--tls-cert`/`--tls-key`, or
//! `api.tls_cert`/`api.tls_key`), the API is served over TLS with rustls and its ring provider.
//!
//! The files are read once, at start, so a bad file stops `serve` before it listens: each error names the file
//! and says what is wrong with it in plain words, never what the key holds. [`listener`] accepts the
//! connections.

pub mod listener;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use listener::TlsListener;

/// The application protocols offered in the handshake: HTTP/1.1 only, as `axum::serve` is built without HTTP/2
/// (axum's `http2` feature is off).
const ALPN: &[&[u8]] = &[b"http/1.1"];

/// Which of the two files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The certificate chain.
    Certificate,
    /// The certificate's private key.
    PrivateKey,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Certificate => "certificate",
            Role::PrivateKey => "private key",
        })
    }
}

/// Why the API cannot be served over TLS. The words name the file and the fault; none carries the key's content
/// (the PEM parser's own errors, which may quote a line of the file, are replaced by fixed words).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// One file is configured without the other.
    #[error(
        "TLS needs both a certificate and its private key (--tls-cert and --tls-key, or api.tls_cert and \
         api.tls_key): only the {given} is set"
    )]
    HalfConfigured {
        /// The one that is set.
        given: Role,
    },
    /// The file does not exist.
    #[error("the TLS {role} file {} does not exist", path.display())]
    Missing {
        /// Which file.
        role: Role,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The file exists but cannot be read.
    #[error("cannot read the TLS {role} file {}", path.display())]
    Read {
        /// Which file.
        role: Role,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not PEM.
    #[error("the TLS {role} file {} is not valid PEM: {fault}", path.display())]
    NotPem {
        /// Which file.
        role: Role,
        /// The file.
        path: PathBuf,
        /// What is wrong, in fixed words.
        fault: &'static str,
    },
    /// The certificate file holds no certificate.
    #[error("the TLS certificate file {} holds no certificate (no BEGIN CERTIFICATE section)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key file holds no private key.
    #[error(
        "the TLS private key file {} holds no private key (no BEGIN PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY \
         section)",
        path.display()
    )]
    NoPrivateKey {
        /// The file.
        path: PathBuf,
    },
    /// The private key is not the certificate's.
    #[error("the private key in {} does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// rustls refuses the pair for another reason (a key type it does not support, a certificate it cannot parse).
    #[error("the TLS certificate {} and private key {} cannot be used: {reason}", cert.display(), key.display())]
    Unusable {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's words (they never hold the key).
        reason: String,
    },
}

/// The certificate and key files `serve` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, PEM, the server's own certificate first.
    pub cert: PathBuf,
    /// Its private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// Both files, or neither (`None`: plain HTTP). One without the other is an error rather than plain HTTP: an
    /// operator who set one meant TLS.
    pub fn pair(cert: Option<PathBuf>, key: Option<PathBuf>) -> Result<Option<TlsFiles>, TlsError> {
        match (cert, key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
            (None, None) => Ok(None),
            (Some(_), None) => Err(TlsError::HalfConfigured { given: Role::Certificate }),
            (None, Some(_)) => Err(TlsError::HalfConfigured { given: Role::PrivateKey }),
        }
    }

    /// The server's rustls configuration: the files read and checked, the key matched to the certificate.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let chain = certificates(&self.cert)?;
        let key = private_key(&self.key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| self.refused(e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| self.refused(e))?;
        config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }

    /// rustls's refusal of the pair, as an error that names the files.
    fn refused(&self, e: rustls::Error) -> TlsError {
        let (cert, key) = (self.cert.clone(), self.key.clone());
        match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                TlsError::KeyMismatch { cert, key }
            }
            // rustls words this as a peer's certificate; here it is the server's own.
            rustls::Error::InvalidCertificate(fault) => {
                TlsError::Unusable { cert, key, reason: format!("the certificate is not valid ({fault:?})") }
            }
            other => TlsError::Unusable { cert, key, reason: other.to_string() },
        }
    }
}

/// The certificates in the PEM file at `path`, in order; sections of other kinds (a key kept in the same file)
/// are skipped.
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read(Role::Certificate, path)?;
    let chain = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| not_pem(Role::Certificate, path, &e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate { path: path.to_owned() });
    }
    Ok(chain)
}

/// The first private key in the PEM file at `path`.
fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text = read(Role::PrivateKey, path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| match e {
        pem::Error::NoItemsFound => TlsError::NoPrivateKey { path: path.to_owned() },
        other => not_pem(Role::PrivateKey, path, &other),
    })
}

/// The file's bytes; a missing file is told apart from one that cannot be read.
fn read(role: Role, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => TlsError::Missing { role, path: path.to_owned() },
        _ => TlsError::Read { role, path: path.to_owned(), source },
    })
}

/// A PEM parse error in fixed words: the parser's own quote lines of the file, which may be a key's.
fn not_pem(role: Role, path: &Path, e: &pem::Error) -> TlsError {
    let fault = match e {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line",
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed",
        pem::Error::Base64Decode(_) => "a section is not valid base64",
        pem::Error::SectionTooLarge => "a section is too large",
        _ => "it cannot be parsed",
    };
    TlsError::NotPem { role, path: path.to_owned(), fault }
}

#[cfg(test)]
mod tests;
