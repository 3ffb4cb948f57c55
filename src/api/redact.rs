//! Addresses kept out of what the API answers. A run's `last_error`, its stop reason and its events' details are
//! words the workers wrote for operators, often with an error chain in them — `tcp://10.2.0.7:61616 did not answer
//! (Connection refused)`, `error sending request for url (http://broker-3.internal:8161/console/jolokia/)` — and
//! a console shows them to whoever may see the run. The registry's endpoints are answered on purpose by
//! `GET /clusters` (to those who may see the cluster); nothing else should carry a host, so:
//!
//! - a registered endpoint (`tcp://host:port`, its Jolokia URL, or its bare `host:port`) becomes the node's name,
//!   which is what an operator knows it by;
//! - any other URL, IPv4 address (with or without a port), `host.domain:port`, `localhost:port` or bracketed IPv6
//!   address becomes `(an address)`.
//!
//! The full words stay in the run record and the workers' logs, for those with the database or the logs.

use std::sync::LazyLock;

use regex::Regex;
use sqlx::PgPool;

use crate::jobs::store::record::RunEvent;
use crate::registry::store;
use crate::registry::RegistryError;
use crate::transfer::view::{NodeOutcome, RunRecord, RunView};

/// What stands for an address that is not a registered endpoint.
pub const WITHHELD: &str = "(an address)";

/// URLs of any scheme, IPv4 addresses with an optional port, `host:port` where the host has a dot or is
/// `localhost`, bracketed IPv6 addresses with an optional port.
static ADDRESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?x)
        \b[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>()\[\]{},;`]+
        | \b(?:\d{1,3}\.){3}\d{1,3}(?::\d{1,5})?\b
        | \b(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{1,5}\b
        | \[[0-9A-Fa-f:.]+\](?::\d{1,5})?
        "#,
    )
    .expect("the address pattern compiles")
});

/// The registry's endpoints and the names they become, longest first (a URL before the `host:port` inside it).
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    known: Vec<(String, String)>,
}

impl Redactor {
    /// Every registered endpoint, by the name of its node.
    pub async fn load(pool: &PgPool) -> Result<Redactor, RegistryError> {
        let mut pairs = Vec::new();
        for cluster in store::list(pool).await? {
            for node in &cluster.nodes {
                for endpoint in &node.endpoints {
                    for url in [&endpoint.core_url, &endpoint.jolokia_url] {
                        pairs.push((url.trim_end_matches('/').to_string(), node.name.clone()));
                        if let Some(host_port) = host_port(url) {
                            pairs.push((host_port.to_string(), node.name.clone()));
                        }
                    }
                }
            }
        }
        Ok(Redactor::of(pairs))
    }

    /// From `(address, name)` pairs.
    pub fn of(mut known: Vec<(String, String)>) -> Redactor {
        known.retain(|(address, _)| !address.is_empty());
        known.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        known.dedup_by(|a, b| a.0 == b.0);
        Redactor { known }
    }

    /// `text` with every registered endpoint named by its node and every other address withheld.
    pub fn words(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (address, name) in &self.known {
            if text.contains(address.as_str()) {
                text = text.replace(address.as_str(), name);
            }
        }
        ADDRESS.replace_all(&text, WITHHELD).into_owned()
    }

    /// [`Redactor::words`] of an optional text.
    pub fn maybe(&self, text: Option<String>) -> Option<String> {
        text.map(|t| self.words(&t))
    }

    /// A line of the list of runs as callers may read it.
    pub fn record(&self, record: RunRecord) -> RunRecord {
        RunRecord { stop_reason: self.maybe(record.stop_reason), last_error: self.maybe(record.last_error), ..record }
    }

    /// A run's view as callers may read it: its words, notes, outcomes and events' details.
    pub fn view(&self, view: RunView) -> RunView {
        RunView {
            stop_reason: self.maybe(view.stop_reason),
            last_error: self.maybe(view.last_error),
            notes: view.notes.iter().map(|n| self.words(n)).collect(),
            nodes: view.nodes.into_iter().map(|n| NodeOutcome { outcome: self.words(&n.outcome), ..n }).collect(),
            events: view.events.into_iter().map(|e| RunEvent { detail: self.json(e.detail), ..e }).collect(),
            ..view
        }
    }

    /// Every string of `value` (keys stay as they are) through [`Redactor::words`].
    pub fn json(&self, value: serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(s) => Value::String(self.words(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.json(v)).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, self.json(v))).collect()),
            other => other,
        }
    }
}

/// Every address withheld, none named: for words made where the registry is not at hand (an error's answer).
pub fn addresses(text: &str) -> String {
    Redactor::default().words(text)
}

/// `host:port` of `scheme://host:port/…`.
fn host_port(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..end];
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    authority.contains(':').then_some(authority)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn east() -> Redactor {
        Redactor::of(vec![
            ("tcp://10.2.0.7:61616".into(), "east-1".into()),
            ("10.2.0.7:61616".into(), "east-1".into()),
            ("http://10.2.0.7:8161/console/jolokia".into(), "east-1".into()),
            ("10.2.0.7:8161".into(), "east-1".into()),
        ])
    }

    #[test]
    fn a_registered_endpoint_becomes_its_nodes_name() {
        let r = east();
        assert_eq!(
            r.words("tcp://10.2.0.7:61616 did not answer (Connection refused)"),
            "east-1 did not answer (Connection refused)"
        );
        assert_eq!(
            r.words("error sending request for url (http://10.2.0.7:8161/console/jolokia/)"),
            "error sending request for url (east-1/)"
        );
        assert_eq!(r.words("connecting to 10.2.0.7:61616 timed out"), "connecting to east-1 timed out");
    }

    #[test]
    fn any_other_address_is_withheld() {
        let r = east();
        assert_eq!(r.words("postgres://app:pw@db.internal:5432/transfer refused"), "(an address) refused");
        assert_eq!(r.words("192.168.4.20:5432 refused; 10.0.0.1 too"), "(an address) refused; (an address) too");
        assert_eq!(r.words("[fe80::1]:61616 is down"), "(an address) is down");
        assert_eq!(
            r.words("broker-3.internal:61616 and localhost:5432 refused"),
            "(an address) and (an address) refused"
        );
        assert_eq!(addresses("see https://broker-3.internal:8443/x?y=1, then retry"), "see (an address), then retry");
    }

    #[test]
    fn words_without_addresses_are_left_alone() {
        let r = east();
        for words in [
            "the selector `_AMQ_DUPL_ID IN ('studio:0196b48b-5ce1-4ebc-afc4-9cc1b4f1b29b:2785')` found 20",
            "waited 30 s for room at 07:06; 1.5 MiB of 2.0 MiB used (75.0%)",
            "grant send on west/orders.eu::orders.eu to alice",
        ] {
            assert_eq!(r.words(words), words);
        }
    }

    #[test]
    fn every_string_of_a_detail_is_redacted_and_its_keys_kept() {
        let detail =
            serde_json::json!({ "error": "tcp://10.2.0.7:61616 did not answer", "n": 3, "tcp://k": ["1.2.3.4"] });
        let shown = east().json(detail);
        assert_eq!(shown, serde_json::json!({ "error": "east-1 did not answer", "n": 3, "tcp://k": ["(an address)"] }));
    }

    #[test]
    fn the_host_and_port_of_a_url_are_found_behind_credentials() {
        assert_eq!(host_port("tcp://10.2.0.7:61616"), Some("10.2.0.7:61616"));
        assert_eq!(host_port("http://u:p@h.internal:8161/console/jolokia"), Some("h.internal:8161"));
        assert_eq!(host_port("http://h.internal/console/jolokia"), None);
    }
}
