//! Broker credentials, by reference: a cluster names them, the process reads them from its environment as
//! `ARTEMIS_TRANSFER_CREDENTIALS__<REF>__USER` and `ARTEMIS_TRANSFER_CREDENTIALS__<REF>__PASSWORD`. They are
//! never stored in Postgres, never logged, never put in run records or API answers.

use super::RegistryError;
use crate::secret::Secret;

/// A broker user and password.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The user (not secret).
    pub user: String,
    /// The password.
    pub password: Secret<String>,
}

fn var_names(reference: &str) -> (String, String) {
    let r = reference.to_ascii_uppercase();
    (format!("ARTEMIS_TRANSFER_CREDENTIALS__{r}__USER"), format!("ARTEMIS_TRANSFER_CREDENTIALS__{r}__PASSWORD"))
}

impl Credentials {
    /// Reads the credentials named `reference` from the environment.
    pub fn from_env(reference: &str) -> Result<Credentials, RegistryError> {
        Self::from_lookup(reference, |k| std::env::var(k).ok())
    }

    /// Reads the credentials named `reference` through `lookup` (the environment, or a test's map).
    pub fn from_lookup(reference: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Credentials, RegistryError> {
        let (user_var, password_var) = var_names(reference);
        match (lookup(&user_var), lookup(&password_var)) {
            (Some(user), Some(password)) if !user.is_empty() => Ok(Credentials { user, password: password.into() }),
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
            _ => None,
        };
        let c = Credentials::from_lookup("east", env).unwrap();
        assert_eq!(c.user, "admin");
        assert!(!format!("{c:?}").contains("s3cret"));
        let err = Credentials::from_lookup("west", env).unwrap_err().to_string();
        assert!(err.contains("ARTEMIS_TRANSFER_CREDENTIALS__WEST__PASSWORD"), "{err}");
    }
}
