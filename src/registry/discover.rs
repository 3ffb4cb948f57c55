//! A cluster's nodes, learnt from one seed node: the seed's `listNetworkTopology` names every member (its
//! NodeID, live and backup Core addresses). Topology carries no HTTP ports, so each member's Jolokia URL is
//! given explicitly or derived by the `artemis create` convention (HTTP port = Core port − 61616 + 8161, same
//! host) — and is always **verified** by reading that endpoint's NodeID, so a wrong guess is an error in words,
//! never a silently wrong registration.
//!
//! Two rules keep discovery from weakening what the operator asked for (docs/adr/0013):
//! - **A TLS seed is never downgraded.** When the seed's Core URL says `sslEnabled=true`, every member's Core URL
//!   carries the seed's TLS parameters, every Jolokia URL must be (and is derived as) `https://`, and each
//!   member's Core acceptor is checked to answer TLS with that material. The topology names only `host:port`,
//!   so a member whose acceptor is plain TCP is found by that check and refused in words, never registered
//!   plain.
//! - **Credentials go only to hosts the operator named**: the seed's, and those of the Jolokia URLs given for
//!   members. A member on another host is refused before anything is sent to it, with the flag that names it.

use std::collections::BTreeMap;
use std::time::Duration;

use std::collections::BTreeSet;

use artemis_core::{KeyPassphrase, TlsOptions};

use super::credentials::Credentials;
use super::store::{ClusterNode, EndpointRole, NodeEndpoint};
use super::tls::{carried_parameters, of_core_url};
use super::RegistryError;
use crate::broker::jolokia::{BrokerManagement, Endpoint, JolokiaClient};

/// How to reach the seed, and Jolokia URLs for members that do not follow the port convention.
#[derive(Debug, Clone)]
pub struct Seed {
    /// The seed's Jolokia URL.
    pub jolokia_url: String,
    /// The seed's Core URL, needed only when it is not clustered (its topology is empty).
    pub core_url: Option<String>,
    /// Jolokia URLs by Core `host:port`, for members whose HTTP port is not the convention's.
    pub jolokia_by_core: BTreeMap<String, String>,
}

/// A Core URL's socket address, as the registry keys members by it: `tcp://host:port?…` → `host:port`.
pub fn core_host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['?', '/']).next().unwrap_or(rest).to_string()
}

/// The `artemis create` convention: the HTTP port is offset from 8161 by what the Core port is from 61616.
pub fn conventional_jolokia_url(core_host_port: &str) -> Option<String> {
    conventional_jolokia_url_over(core_host_port, false)
}

/// [`conventional_jolokia_url`], over HTTPS when `https` (a TLS cluster's web server).
pub fn conventional_jolokia_url_over(core_host_port: &str, https: bool) -> Option<String> {
    let (host, port) = core_host_port.rsplit_once(':')?;
    let port: i64 = port.parse().ok()?;
    let http = port - 61616 + 8161;
    let scheme = if https { "https" } else { "http" };
    (1..=65535).contains(&http).then(|| format!("{scheme}://{host}:{http}/console/jolokia"))
}

/// The host of a URL (`scheme://host:port/…` or `host:port`), as compared against the hosts the operator named.
fn host_of(url: &str) -> String {
    let host_port = core_host_port(url);
    let host = host_port.rsplit_once(':').map_or(host_port.as_str(), |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// How discovery reaches a cluster: its TLS material (from the seed's Core URL) and the hosts the operator named.
struct Reach {
    tls: Option<TlsOptions>,
    /// The seed's TLS parameters, `&`-joined, for the members' Core URLs (empty: plain TCP).
    carried: String,
    named_hosts: BTreeSet<String>,
}

impl Reach {
    fn of(seed: &Seed, key_passphrase: Option<&KeyPassphrase>) -> Result<Reach, RegistryError> {
        let tls = match &seed.core_url {
            Some(core) => of_core_url(core)?.map(|tls| tls.with_key_passphrase(key_passphrase.cloned())),
            None => None,
        };
        let carried = seed.core_url.as_deref().map(carried_parameters).unwrap_or_default();
        if tls.is_none() && seed.jolokia_url.starts_with("https://") && seed.core_url.is_none() {
            return Err(RegistryError::Discovery(format!(
                "the seed {} is reached over HTTPS: give its Core URL too, with its TLS parameters (sslEnabled=true, \
                 trustStorePath=…), so that the cluster's Core connections use TLS as well",
                seed.jolokia_url
            )));
        }
        let mut named_hosts: BTreeSet<String> = BTreeSet::new();
        named_hosts.insert(host_of(&seed.jolokia_url));
        named_hosts.extend(seed.core_url.iter().map(|u| host_of(u)));
        named_hosts.extend(seed.jolokia_by_core.iter().flat_map(|(core, url)| [host_of(core), host_of(url)]));
        let reach = Reach { tls, carried, named_hosts };
        reach.refuse_plain_management(&seed.jolokia_url)?;
        for url in seed.jolokia_by_core.values() {
            reach.refuse_plain_management(url)?;
        }
        Ok(reach)
    }

    /// A TLS cluster's management over plain HTTP would send its credentials in clear: refused.
    fn refuse_plain_management(&self, url: &str) -> Result<(), RegistryError> {
        if self.tls.is_some() && !url.starts_with("https://") {
            return Err(RegistryError::Discovery(format!(
                "the cluster is registered over TLS (its Core URL says sslEnabled=true) but the Jolokia URL {url} is \
                 not https: the broker credentials would cross in clear; give the https:// URL"
            )));
        }
        Ok(())
    }

    /// Credentials go only to hosts the operator named.
    fn check_named(&self, member_core: &str, url: &str) -> Result<(), RegistryError> {
        let host = host_of(url);
        if self.named_hosts.contains(&host) {
            return Ok(());
        }
        Err(RegistryError::Discovery(format!(
            "the seed's topology names a member at {member_core}, on host {host}, which is not among the hosts given \
             ({}); its credentials are not sent to a host nobody named: name the member with --member-jolokia \
             {member_core}=<its Jolokia URL> to register it",
            self.named_hosts.iter().cloned().collect::<Vec<_>>().join(", ")
        )))
    }

    /// A member's Core URL: its address with the seed's TLS parameters.
    fn core_url(&self, addr: &str) -> String {
        if self.carried.is_empty() {
            format!("tcp://{addr}")
        } else {
            format!("tcp://{addr}?{}", self.carried)
        }
    }

    fn client(&self, url: &str, node: &str, credentials: &Credentials, timeout: Duration) -> JolokiaClient {
        JolokiaClient::new(
            Endpoint {
                node: node.to_string(),
                url: url.to_string(),
                user: credentials.user.clone(),
                password: credentials.password.clone(),
                origin: None,
                tls: self.tls.clone(),
            },
            timeout,
        )
    }

    /// On a TLS cluster, a member's (or the lone seed's) Core acceptor must answer TLS with the seed's material:
    /// the topology says only `host:port`, and a plain acceptor there is refused rather than registered plain; a
    /// certificate that does not verify is refused in the Core client's words.
    async fn check_core_tls(
        &self,
        core_url: &str,
        credentials: &Credentials,
        timeout: Duration,
    ) -> Result<(), RegistryError> {
        if self.tls.is_none() {
            return Ok(());
        }
        let conn =
            crate::broker::node::connect_core(core_url, credentials.login(), timeout, None).await.map_err(|e| {
                RegistryError::Discovery(format!(
                    "the member at {} does not answer Core over TLS ({e}); the cluster is registered over TLS and \
                     discovery never falls back to plain TCP: give that member a TLS acceptor",
                    core_host_port(core_url)
                ))
            })?;
        let _ = conn.close().await;
        Ok(())
    }
}

/// Connects to one endpoint and checks it is the node `expected_node_id`; returns its broker name.
async fn verify(
    reach: &Reach,
    url: &str,
    core: &str,
    expected_node_id: &str,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<String, RegistryError> {
    reach.check_named(core, url)?;
    let mgmt = BrokerManagement::discover(reach.client(url, core, credentials, timeout)).await.map_err(|e| {
        RegistryError::Discovery(format!(
            "the member at {core} could not be managed through {url} ({e}); give its Jolokia URL explicitly"
        ))
    })?;
    let state = mgmt.broker_state().await?;
    match state.node_id.as_deref() {
        Some(id) if id == expected_node_id => Ok(mgmt.broker_name().to_string()),
        other => Err(RegistryError::Discovery(format!(
            "{url} answers as node {} but the topology says {core} is node {expected_node_id}; give the member's \
             Jolokia URL explicitly",
            other.unwrap_or("(unknown)")
        ))),
    }
}

/// The name discovery gives the seed node in its errors, before it knows the broker's own.
pub const SEED: &str = "seed";

/// Every logical node of the seed's cluster, with its primary and backup endpoints.
pub async fn discover(
    seed: &Seed,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<Vec<ClusterNode>, RegistryError> {
    let reach = Reach::of(seed, credentials.key_passphrase.as_ref())?;
    let seed_mgmt = BrokerManagement::discover(reach.client(&seed.jolokia_url, SEED, credentials, timeout)).await?;
    let seed_state = seed_mgmt.broker_state().await?;
    let seed_node_id = seed_state
        .node_id
        .clone()
        .ok_or_else(|| RegistryError::Discovery(format!("{} did not say its NodeID", seed.jolokia_url)))?;
    let mut members = seed_mgmt.network_topology().await?;
    if members.is_empty() {
        // A broker that is not clustered has no topology: it is its own one node.
        let core = seed.core_url.as_deref().ok_or_else(|| {
            RegistryError::Discovery(format!(
                "{} is not clustered (its topology is empty): give its Core URL too",
                seed.jolokia_url
            ))
        })?;
        reach.check_core_tls(core, credentials, timeout).await?;
        return Ok(vec![ClusterNode {
            name: seed_mgmt.broker_name().to_string(),
            node_id: seed_node_id,
            broker_name: seed_mgmt.broker_name().to_string(),
            endpoints: vec![NodeEndpoint {
                core_url: core.to_string(),
                jolokia_url: seed.jolokia_url.clone(),
                role: EndpointRole::Primary,
                broker_name: seed_mgmt.broker_name().to_string(),
            }],
        }]);
    }
    members.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    let mut nodes = Vec::new();
    for member in members {
        let live = member.primary.clone().or(member.live.clone());
        let mut endpoints = Vec::new();
        for (addr, role) in [(live, EndpointRole::Primary), (member.backup.clone(), EndpointRole::Backup)] {
            let Some(addr) = addr else { continue };
            let url = match seed.jolokia_by_core.get(&addr) {
                Some(url) => url.clone(),
                None => conventional_jolokia_url_over(&addr, reach.tls.is_some()).ok_or_else(|| {
                    RegistryError::Discovery(format!("cannot derive a Jolokia URL for {addr}; give it explicitly"))
                })?,
            };
            let broker_name = verify(&reach, &url, &addr, &member.node_id, credentials, timeout).await?;
            let core_url = reach.core_url(&addr);
            // A passive backup accepts no Core connection: only a live member's acceptor can be checked.
            if role == EndpointRole::Primary {
                reach.check_core_tls(&core_url, credentials, timeout).await?;
            }
            endpoints.push(NodeEndpoint { core_url, jolokia_url: url, role, broker_name });
        }
        let Some(primary) = endpoints.first() else { continue };
        nodes.push(ClusterNode {
            name: primary.broker_name.clone(),
            node_id: member.node_id.clone(),
            broker_name: primary.broker_name.clone(),
            endpoints,
        });
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn core_urls_become_socket_addresses() {
        assert_eq!(super::core_host_port("tcp://127.0.0.1:61616"), "127.0.0.1:61616");
        assert_eq!(super::core_host_port("tcp://h:1?sslEnabled=false"), "h:1");
        assert_eq!(super::core_host_port("h:2"), "h:2");
    }

    use super::conventional_jolokia_url;

    #[test]
    fn the_create_port_convention() {
        assert_eq!(
            conventional_jolokia_url("127.0.0.1:61616").as_deref(),
            Some("http://127.0.0.1:8161/console/jolokia")
        );
        assert_eq!(conventional_jolokia_url("h:62716").as_deref(), Some("http://h:9261/console/jolokia"));
        assert_eq!(conventional_jolokia_url("h:80"), None);
        assert_eq!(conventional_jolokia_url("nonsense"), None);
    }
}

#[cfg(test)]
mod reach_tests {
    use std::collections::BTreeMap;

    use super::{Reach, Seed};

    fn seed(core: &str, jolokia: &str) -> Seed {
        Seed { jolokia_url: jolokia.into(), core_url: Some(core.into()), jolokia_by_core: BTreeMap::new() }
    }

    #[test]
    fn credentials_go_only_to_named_hosts() {
        let mut s = seed("tcp://b1.prod:61616", "http://b1.prod:8161/console/jolokia");
        s.jolokia_by_core.insert("b3.prod:61616".into(), "http://b3.prod:8161/console/jolokia".into());
        let reach = Reach::of(&s, None).unwrap();
        assert!(reach.check_named("b1.prod:61617", "http://b1.prod:8261/console/jolokia").is_ok());
        assert!(reach.check_named("b3.prod:61616", "http://b3.prod:8161/console/jolokia").is_ok());
        let err = reach.check_named("b2.prod:61616", "http://b2.prod:8161/console/jolokia").unwrap_err().to_string();
        assert!(err.contains("host b2.prod") && err.contains("--member-jolokia b2.prod:61616="), "{err}");
    }

    #[test]
    fn a_tls_seed_s_members_carry_its_tls_parameters() {
        let s = seed(
            "tcp://b1:61617?sslEnabled=true&trustStorePath=/p/ca.pem&sniHost=b1",
            "https://b1:8161/console/jolokia",
        );
        let reach = Reach::of(&s, None).unwrap();
        assert_eq!(reach.core_url("b2:61617"), "tcp://b2:61617?sslEnabled=true&trustStorePath=/p/ca.pem");
        assert!(reach.refuse_plain_management("http://b2:8161/console/jolokia").is_err());
        let plain = Reach::of(&seed("tcp://b1:61616", "http://b1:8161/console/jolokia"), None).unwrap();
        assert_eq!(plain.core_url("b2:61616"), "tcp://b2:61616");
    }
}
