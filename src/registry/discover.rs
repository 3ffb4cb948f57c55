//! A cluster's nodes, learnt from one seed node: the seed's `listNetworkTopology` names every member (its
//! NodeID, live and backup Core addresses). Topology carries no HTTP ports, so each member's Jolokia URL is
//! given explicitly or derived by the `artemis create` convention (HTTP port = Core port − 61616 + 8161, same
//! host) — and is always **verified** by reading that endpoint's NodeID, so a wrong guess is an error in words,
//! never a silently wrong registration.

use std::collections::BTreeMap;
use std::time::Duration;

use super::credentials::Credentials;
use super::store::{ClusterNode, EndpointRole, NodeEndpoint};
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
    let (host, port) = core_host_port.rsplit_once(':')?;
    let port: i64 = port.parse().ok()?;
    let http = port - 61616 + 8161;
    (1..=65535).contains(&http).then(|| format!("http://{host}:{http}/console/jolokia"))
}

fn client(url: &str, node: &str, credentials: &Credentials, timeout: Duration) -> JolokiaClient {
    JolokiaClient::new(
        Endpoint {
            node: node.to_string(),
            url: url.to_string(),
            user: credentials.user.clone(),
            password: credentials.password.clone(),
            origin: None,
        },
        timeout,
    )
}

/// Connects to one endpoint and checks it is the node `expected_node_id`; returns its broker name.
async fn verify(
    url: &str,
    core: &str,
    expected_node_id: &str,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<String, RegistryError> {
    let mgmt = BrokerManagement::discover(client(url, core, credentials, timeout)).await.map_err(|e| {
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

/// Every logical node of the seed's cluster, with its primary and backup endpoints.
pub async fn discover(
    seed: &Seed,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<Vec<ClusterNode>, RegistryError> {
    let seed_mgmt = BrokerManagement::discover(client(&seed.jolokia_url, "seed", credentials, timeout)).await?;
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
                None => conventional_jolokia_url(&addr).ok_or_else(|| {
                    RegistryError::Discovery(format!("cannot derive a Jolokia URL for {addr}; give it explicitly"))
                })?,
            };
            let broker_name = verify(&url, &addr, &member.node_id, credentials, timeout).await?;
            endpoints.push(NodeEndpoint { core_url: format!("tcp://{addr}"), jolokia_url: url, role, broker_name });
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
