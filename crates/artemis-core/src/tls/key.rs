//! The client's private key: plain PEM (PKCS#8, PKCS#1 or SEC1), or encrypted PKCS#8 (`BEGIN ENCRYPTED PRIVATE
//! KEY`, PBES2) decrypted with a passphrase given **by reference** ([`KeyPassphrase`]: where it is set, and what
//! is set there). OpenSSL's legacy encrypted PEM (`Proc-Type: 4,ENCRYPTED`) is refused with the command that
//! converts it. Errors name the key file and where the passphrase is set, never the passphrase or a line of the
//! file.

use std::fmt;
use std::path::Path;

use pkcs8::der::pem::LineEnding;
use pkcs8::der::zeroize::Zeroizing;
use pkcs8::der::SecretDocument;
use pkcs8::EncryptedPrivateKeyInfo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::{material, read, StoreRole, TlsFailure};

/// The PEM label of an encrypted PKCS#8 key (RFC 5958).
const ENCRYPTED_LABEL: &str = "ENCRYPTED PRIVATE KEY";
/// The header OpenSSL's legacy encryption writes inside a `BEGIN RSA/EC PRIVATE KEY` section.
const LEGACY_HEADER: &str = "Proc-Type: 4,ENCRYPTED";

/// The passphrase of an encrypted private key, by reference: where it is set (an environment variable's name,
/// say), which errors name, and what is set there, which nothing shows. Its `Debug` prints where, never what.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyPassphrase {
    set_in: String,
    value: Option<Zeroizing<String>>,
}

impl KeyPassphrase {
    /// The passphrase set in `set_in` (the words an error names), `None` when nothing is set there.
    pub fn new(set_in: impl Into<String>, value: Option<String>) -> Self {
        KeyPassphrase { set_in: set_in.into(), value: value.map(Zeroizing::new) }
    }

    /// Where the passphrase is set.
    pub fn set_in(&self) -> &str {
        &self.set_in
    }

    /// Whether a passphrase is set there.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

impl fmt::Debug for KeyPassphrase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPassphrase")
            .field("set_in", &self.set_in)
            .field("value", &self.value.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The words that say what to run to turn a key at `path` into encrypted PKCS#8 with AES, which this client reads.
pub fn pkcs8_conversion(path: &Path) -> String {
    format!(
        "`openssl pkcs8 -topk8 -v2 aes-256-cbc -in {} -out key.pem` (it asks for the old passphrase and a new one), \
         then give key.pem's ENCRYPTED PRIVATE KEY section in place of the old key (a key store file keeps its \
         certificates after it)",
        path.display()
    )
}

/// The private key in the PEM file `path`, decrypted with `passphrase` when it is encrypted.
pub(crate) fn private_key(
    path: &Path,
    passphrase: Option<&KeyPassphrase>,
) -> Result<PrivateKeyDer<'static>, TlsFailure> {
    let bytes = read(StoreRole::Key, path)?;
    let text = String::from_utf8_lossy(&bytes);
    if text.contains(LEGACY_HEADER) {
        return Err(TlsFailure::LegacyEncryptedKey { path: path.to_owned() });
    }
    if let Some(section) = pem_section(&text, ENCRYPTED_LABEL) {
        return decrypt(path, section, passphrase);
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => material(
            StoreRole::Key,
            path,
            "holds no private key (no BEGIN PRIVATE KEY, ENCRYPTED PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY \
             section)",
        ),
        _ => material(StoreRole::Key, path, "is not valid PEM"),
    })
}

/// The key and its certificate chain as one PEM text, the key unencrypted: what an HTTP client's identity is
/// built from (reqwest reads no encrypted key). Held in memory only, wiped when dropped.
pub fn identity_pem(identity: &super::ClientIdentity) -> Result<Zeroizing<String>, TlsFailure> {
    let key = private_key(&identity.key_file, identity.key_passphrase.as_ref())?;
    let (label, der) = match &key {
        PrivateKeyDer::Pkcs1(k) => ("RSA PRIVATE KEY", k.secret_pkcs1_der()),
        PrivateKeyDer::Sec1(k) => ("EC PRIVATE KEY", k.secret_sec1_der()),
        PrivateKeyDer::Pkcs8(k) => ("PRIVATE KEY", k.secret_pkcs8_der()),
        _ => return Err(material(StoreRole::Key, &identity.key_file, "holds a private key of an unknown form")),
    };
    let unusable = |_| material(StoreRole::Key, &identity.key_file, "cannot be written as PEM");
    let mut pem = Zeroizing::new(pkcs8::der::pem::encode_string(label, LineEnding::LF, der).map_err(unusable)?);
    for cert in super::certificates(StoreRole::Key, &identity.cert_file)? {
        pem.push_str(&pkcs8::der::pem::encode_string("CERTIFICATE", LineEnding::LF, &cert).map_err(unusable)?);
    }
    Ok(pem)
}

/// The first `label` section of a PEM text, from its BEGIN line to its END line.
fn pem_section<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = start + text[start..].find(&end)? + end.len();
    Some(&text[start..stop])
}

fn decrypt(
    path: &Path,
    section: &str,
    passphrase: Option<&KeyPassphrase>,
) -> Result<PrivateKeyDer<'static>, TlsFailure> {
    let missing =
        || TlsFailure::KeyPassphraseMissing { path: path.to_owned(), set_in: passphrase.map(|p| p.set_in.clone()) };
    let (passphrase, value) = match passphrase {
        Some(p) => (p, p.value.as_ref().ok_or_else(missing)?),
        None => return Err(missing()),
    };
    let not_pkcs8 = || {
        let fault = format!(
            "holds an ENCRYPTED PRIVATE KEY section this client cannot read (not PKCS#8, or a scheme other than \
             PBES2 with AES or 3DES): {}",
            pkcs8_conversion(path)
        );
        material(StoreRole::Key, path, fault)
    };
    let (_, document) = SecretDocument::from_pem(section).map_err(|_| not_pkcs8())?;
    let info = EncryptedPrivateKeyInfo::try_from(document.as_bytes()).map_err(|_| not_pkcs8())?;
    match info.decrypt(value.as_bytes()) {
        Ok(plain) => Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(plain.as_bytes().to_vec()))),
        Err(e) => Err(decrypt_failure(path, passphrase, &info, e)),
    }
}

/// What a failed decryption means: a scheme this client does not decrypt, or (the padding or the decrypted
/// structure did not check out) a passphrase that is not the key's.
fn decrypt_failure(
    path: &Path,
    passphrase: &KeyPassphrase,
    info: &EncryptedPrivateKeyInfo<'_>,
    e: pkcs8::Error,
) -> TlsFailure {
    use pkcs8::pkcs5::Error as Pkcs5;
    let unsupported = || TlsFailure::UnsupportedKeyEncryption {
        path: path.to_owned(),
        scheme: scheme_name(&info.encryption_algorithm),
    };
    match e {
        // pkcs5 0.7 says `EncryptFailed` when the padding of a decryption does not check out; a padding that does
        // by chance leaves bytes that are not DER (`Asn1`).
        pkcs8::Error::EncryptedPrivateKey(Pkcs5::DecryptFailed | Pkcs5::EncryptFailed) | pkcs8::Error::Asn1(_) => {
            TlsFailure::KeyPassphraseWrong { path: path.to_owned(), set_in: passphrase.set_in.clone() }
        }
        pkcs8::Error::EncryptedPrivateKey(Pkcs5::UnsupportedAlgorithm { .. } | Pkcs5::NoPbes1CryptSupport) => {
            unsupported()
        }
        _ => material(StoreRole::Key, path, "holds an encrypted private key whose encryption parameters are invalid"),
    }
}

/// The encryption scheme in words, for an error: the ones this client does not decrypt (PBES1; PBES2 with DES).
fn scheme_name(scheme: &pkcs8::pkcs5::EncryptionScheme<'_>) -> String {
    match scheme {
        pkcs8::pkcs5::EncryptionScheme::Pbes1(_) => "PBES1 (PKCS#5 v1.5: DES or RC2 with MD5 or SHA-1)".to_string(),
        other => format!("the scheme {}", other.oid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkcs8::pkcs5::pbes2;
    use pkcs8::PrivateKeyInfo;

    /// A fresh key as PKCS#8 DER (an EC key by rcgen: the key's kind does not matter to PBES2).
    fn plain_key_der() -> Vec<u8> {
        rcgen::KeyPair::generate().expect("a key").serialize_der()
    }

    fn encrypted_pem(der: &[u8], params: pbes2::Parameters<'_>, passphrase: &str) -> String {
        let info = PrivateKeyInfo::try_from(der).expect("PKCS#8");
        let doc = info.encrypt_with_params(params, passphrase).expect("encrypted");
        doc.to_pem(ENCRYPTED_LABEL, LineEnding::LF).expect("PEM").to_string()
    }

    fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("written");
        path
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("artemis-core-key-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    const SET_IN: &str = "ARTEMIS_TRANSFER_CREDENTIALS__SECURE__KEY_PASSPHRASE";

    #[test]
    fn an_encrypted_pkcs8_key_is_read_with_its_passphrase_and_refused_without_it() {
        let dir = temp_dir("pbkdf2");
        let der = plain_key_der();
        let (salt, iv) = ([7u8; 16], [9u8; 16]);
        let params = pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, &salt, &iv).expect("params");
        let path = write(&dir, "key.pem", &encrypted_pem(&der, params, "correct horse"));

        let right = KeyPassphrase::new(SET_IN, Some("correct horse".into()));
        match private_key(&path, Some(&right)).expect("decrypted") {
            PrivateKeyDer::Pkcs8(k) => assert_eq!(k.secret_pkcs8_der(), der.as_slice()),
            other => panic!("not PKCS#8: {other:?}"),
        }

        let wrong = KeyPassphrase::new(SET_IN, Some("battery staple".into()));
        let err = private_key(&path, Some(&wrong)).unwrap_err();
        assert!(matches!(&err, TlsFailure::KeyPassphraseWrong { set_in, .. } if set_in == SET_IN), "{err:?}");
        let words = err.to_string();
        assert!(words.contains(&path.display().to_string()) && words.contains(SET_IN), "{words}");
        assert!(!words.contains("battery") && !format!("{err:?}").contains("battery"), "{words}");

        let unset = KeyPassphrase::new(SET_IN, None);
        let err = private_key(&path, Some(&unset)).unwrap_err();
        assert!(matches!(&err, TlsFailure::KeyPassphraseMissing { set_in: Some(s), .. } if s == SET_IN), "{err:?}");
        assert!(err.to_string().contains(&format!("{SET_IN} is not set")), "{err}");
        let err = private_key(&path, None).unwrap_err();
        assert!(matches!(err, TlsFailure::KeyPassphraseMissing { set_in: None, .. }), "{err:?}");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn scrypt_keys_are_read_and_the_passphrase_never_shows_in_debug() {
        let dir = temp_dir("scrypt");
        let der = plain_key_der();
        let (salt, iv) = ([1u8; 16], [2u8; 16]);
        // Small parameters: the test runs unoptimised.
        let scrypt = pkcs8::pkcs5::scrypt::Params::new(8, 8, 1, 32).expect("scrypt params");
        let params = pbes2::Parameters::scrypt_aes256cbc(scrypt, &salt, &iv).expect("params");
        let path = write(&dir, "key.pem", &encrypted_pem(&der, params, "s3cr3t-phrase"));
        let p = KeyPassphrase::new(SET_IN, Some("s3cr3t-phrase".into()));
        assert!(private_key(&path, Some(&p)).is_ok());
        assert!(!format!("{p:?}").contains("s3cr3t"), "{p:?}");
        std::fs::remove_dir_all(dir).ok();
    }

    /// Runs `openssl` in `dir`; the test needs it (CI installs it): a key an operator has was made by it.
    fn openssl(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl is needed by this test (apt-get install openssl; .ci/run installs it)");
        assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn keys_encrypted_by_openssl_are_read_and_its_other_forms_refused_in_words() {
        let dir = temp_dir("openssl");
        openssl(&dir, &["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "plain.pem"]);
        let topk8 = ["pkcs8", "-topk8", "-in", "plain.pem", "-passout", "pass:open sesame"];
        // OpenSSL 3's default (PBES2, PBKDF2 with HMAC-SHA256, AES-256-CBC) and OpenSSL 1.0's for `-v2 des3`.
        openssl(&dir, &[&topk8[..], &["-out", "default.pem"]].concat());
        openssl(&dir, &[&topk8[..], &["-v2", "des3", "-v2prf", "hmacWithSHA1", "-out", "des3.pem"]].concat());
        openssl(&dir, &[&topk8[..], &["-v1", "PBE-SHA1-3DES", "-out", "pkcs12-pbe.pem"]].concat());
        openssl(&dir, &["ec", "-in", "plain.pem", "-aes256", "-passout", "pass:open sesame", "-out", "legacy.pem"]);
        let p = KeyPassphrase::new(SET_IN, Some("open sesame".into()));
        for name in ["default.pem", "des3.pem"] {
            let key = private_key(&dir.join(name), Some(&p));
            assert!(matches!(key, Ok(PrivateKeyDer::Pkcs8(_))), "{name}: {key:?}");
        }
        let wrong = KeyPassphrase::new(SET_IN, Some("open barley".into()));
        let err = private_key(&dir.join("default.pem"), Some(&wrong)).unwrap_err();
        assert!(matches!(err, TlsFailure::KeyPassphraseWrong { .. }), "{err:?}");
        let err = private_key(&dir.join("pkcs12-pbe.pem"), Some(&p)).unwrap_err().to_string();
        assert!(err.contains("cannot read") && err.contains("openssl pkcs8 -topk8 -v2 aes-256-cbc"), "{err}");
        let err = private_key(&dir.join("legacy.pem"), Some(&p)).unwrap_err();
        assert!(matches!(err, TlsFailure::LegacyEncryptedKey { .. }), "{err:?}");
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn an_unencrypted_key_needs_no_passphrase_and_a_missing_key_is_named() {
        let dir = temp_dir("plain");
        let der = plain_key_der();
        let pem = pkcs8::der::pem::encode_string("PRIVATE KEY", LineEnding::LF, &der).unwrap();
        let path = write(&dir, "key.pem", &pem);
        assert!(private_key(&path, None).is_ok());
        let none = write(&dir, "none.pem", "nothing here\n");
        let err = private_key(&none, None).unwrap_err().to_string();
        assert!(err.contains("holds no private key"), "{err}");
        std::fs::remove_dir_all(dir).ok();
    }
}
