//! An endpoint's TLS material is referenced in its **Core URL**, in the form operators already write for Artemis'
//! own clients: `tcp://host:61617?sslEnabled=true&trustStorePath=/etc/artemis/ca.pem&keyStorePath=/etc/artemis/
//! client.pem` (PEM paths; `verifyHost=false` only by explicit choice). The files stay where the operator keeps
//! them; the registry stores the paths, never what the files hold, and refuses a URL that carries a password
//! (`store::credentials_in`), so a store password never reaches Postgres. The endpoint's Jolokia over HTTPS uses
//! the same material: one private CA and one client certificate per endpoint (docs/adr/0013). An encrypted
//! client key's passphrase comes by reference with the cluster's credentials (`credentials`), never in the URL.

use artemis_core::{ConnectOptions, KeyPassphrase, TlsOptions};

use super::RegistryError;

/// The Artemis URL parameters that make up TLS material, carried from a seed's Core URL to the members
/// discovery finds. `sniHost` is not among them: it names one host.
const CARRIED: &[&str] =
    &["sslEnabled", "trustStorePath", "trustStoreType", "keyStorePath", "keyStoreType", "verifyHost"];

/// The TLS options `core_url` asks for; `None` for plain TCP.
pub fn of_core_url(core_url: &str) -> Result<Option<TlsOptions>, RegistryError> {
    ConnectOptions::from_url(core_url)
        .map(|o| o.tls)
        .map_err(|e| RegistryError::Discovery(format!("the Core URL {core_url} cannot be used: {e}")))
}

/// The TLS options of an endpoint already registered (its URL was read when it was added), with the passphrase
/// of its client key by reference (the cluster's credentials' `key_passphrase`); `None` for plain TCP.
pub fn of_endpoint(core_url: &str, key_passphrase: Option<&KeyPassphrase>) -> Option<TlsOptions> {
    of_core_url(core_url).ok().flatten().map(|tls| tls.with_key_passphrase(key_passphrase.cloned()))
}

/// The TLS parameters of `core_url`, `&`-joined as written (empty for a plain URL): what a member's Core URL
/// carries when discovery learns it from a TLS seed.
pub fn carried_parameters(core_url: &str) -> String {
    let query = core_url.split_once('?').map_or("", |(_, q)| q);
    query
        .split(['&', ';'])
        .filter(|pair| CARRIED.contains(&pair.split('=').next().unwrap_or("")))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_s_tls_parameters_are_carried_and_nothing_else() {
        let seed = "tcp://b1:61617?sslEnabled=true;trustStorePath=/p/ca.pem&sniHost=b1&reconnectAttempts=3\
                    &keyStorePath=/p/c.pem&verifyHost=true";
        assert_eq!(
            carried_parameters(seed),
            "sslEnabled=true&trustStorePath=/p/ca.pem&keyStorePath=/p/c.pem&verifyHost=true"
        );
        assert_eq!(carried_parameters("tcp://b1:61616"), "");
        assert!(of_core_url(seed).unwrap().is_some());
        assert!(of_core_url("tcp://b1:61616").unwrap().is_none());
        let jks = of_core_url("tcp://b1:1?sslEnabled=true&trustStorePath=/t.jks").unwrap_err().to_string();
        assert!(jks.contains("keytool"), "{jks}");
    }
}
