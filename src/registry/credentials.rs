//! Broker credentials, by reference: a cluster names them, the process reads them from its environment as
//! `ARTEMIS_TRANSFER_CREDENTIALS__<REF>__USER` and `ARTEMIS_TRANSFER_CREDENTIALS__<REF>__PASSWORD`, and the
//! passphrase of an encrypted client key (mutual TLS) as `ARTEMIS_TRANSFER_CREDENTIALS__<REF>__KEY_PASSPHRASE`.
//! They are never stored in Postgres, never logged, never put in run records or API answers.

use artemis_core::KeyPassphrase;

use super::RegistryError;
use crate::broker::node::Login;
use crate::secret::Secret;

/// A broker user and password, and the passphrase of the cluster's client key.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The user (not secret).
    pub user: String,
    /// The password.
    pub password: Secret<String>,
    /// The passphrase of an encrypted client key, by reference: where it is set and what is set there (its
    /// `Debug` shows only where). `None`: no reference, so an encrypted key is refused.
    pub key_passphrase: Option<KeyPassphrase>,
}

/// The environment variable that holds `what` (`USER`, `PASSWORD`, `KEY_PASSPHRASE`) of the credentials
/// `reference`: the one definition of their names.
pub fn var_name(reference: &str, what: &str) -> String {
    format!("ARTEMIS_TRANSFER_CREDENTIALS__{}__{what}", reference.to_ascii_uppercase())
}

impl Credentials {
    /// How a Core connection logs in with these credentials.
    pub fn login(&self) -> Login<'_> {
        Login { user: &self.user, password: &self.password, key_passphrase: self.key_passphrase.as_ref() }
    }

    /// Reads the credentials named `reference` from the environment.
    pub fn from_env(reference: &str) -> Result<Credentials, RegistryError> {
        Self::from_lookup(reference, |k| std::env::var(k).ok())
    }

    /// Reads the credentials named `reference` through `lookup` (the environment, or a test's map). The key
    /// passphrase is optional: only an encrypted client key needs it, and says so when it is not set.
    pub fn from_lookup(reference: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Credentials, RegistryError> {
        let (user_var, password_var) = (var_name(reference, "USER"), var_name(reference, "PASSWORD"));
        let passphrase_var = var_name(reference, "KEY_PASSPHRASE");
        match (lookup(&user_var), lookup(&password_var)) {
            (Some(user), Some(password)) if !user.is_empty() => Ok(Credentials {
                user,
                password: password.into(),
                key_passphrase: Some(KeyPassphrase::new(&passphrase_var, lookup(&passphrase_var))),
            }),
            _ => Err(RegistryError::MissingCredentials(format!(
                "the credentials `{reference}` are not set: export {user_var} and {password_var} in the environment \
                 of every artemis-transfer process"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_by_reference_and_says_what_is_missing() {
        let env = |k: &str| match k {
            "ARTEMIS_TRANSFER_CREDENTIALS__EAST__USER" => Some("admin".to_string()),
            "ARTEMIS_TRANSFER_CREDENTIALS__EAST__PASSWORD" => Some("s3cret".to_string()),
            "ARTEMIS_TRANSFER_CREDENTIALS__EAST__KEY_PASSPHRASE" => Some("open-sesame".to_string()),
            _ => None,
        };
        let c = Credentials::from_lookup("east", env).unwrap();
        assert_eq!(c.user, "admin");
        let passphrase = c.key_passphrase.as_ref().expect("a reference");
        assert!(passphrase.is_set() && passphrase.set_in() == "ARTEMIS_TRANSFER_CREDENTIALS__EAST__KEY_PASSPHRASE");
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret") && !shown.contains("open-sesame"), "{shown}");
        let err = Credentials::from_lookup("west", env).unwrap_err().to_string();
        assert!(err.contains("ARTEMIS_TRANSFER_CREDENTIALS__WEST__PASSWORD"), "{err}");
    }

    #[test]
    fn the_key_passphrase_is_optional_and_its_absence_is_known() {
        let env = |k: &str| match k {
            "ARTEMIS_TRANSFER_CREDENTIALS__LAB__USER" | "ARTEMIS_TRANSFER_CREDENTIALS__LAB__PASSWORD" => {
                Some("x".to_string())
            }
            _ => None,
        };
        let c = Credentials::from_lookup("lab", env).unwrap();
        assert!(!c.key_passphrase.expect("a reference").is_set());
    }
}
