//! Which endpoint of a logical node is live now. Asked on every use, never assumed: after a failover the
//! backup is the live one, and a run carries on there (SPEC §4.2 step 1: endpoints re-resolved by NodeID).

use std::time::Duration;

use super::credentials::Credentials;
use super::store::{ClusterNode, NodeEndpoint};
use super::RegistryError;
use crate::broker::jolokia::{BrokerManagement, Endpoint, JolokiaClient, JolokiaError};

/// The live endpoint of `node` and a management client for it: the first endpoint whose broker says
/// `Active=true` with the node's NodeID.
pub async fn live_endpoint<'a>(
    node: &'a ClusterNode,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<(BrokerManagement, &'a NodeEndpoint), RegistryError> {
    let mut seen = Vec::new();
    for endpoint in &node.endpoints {
        let mgmt = management(node, endpoint, credentials, timeout);
        match mgmt.broker_state().await {
            Ok(state) if state.active == Some(true) && state.node_id.as_deref() == Some(node.node_id.as_str()) => {
                return Ok((mgmt, endpoint));
            }
            Ok(state) => seen.push(format!(
                "{} is {}",
                endpoint.core_url,
                match (state.active, state.backup) {
                    (Some(false), Some(true)) => "a passive backup",
                    (Some(false), _) => "not active",
                    _ => "of another node or unknown state",
                }
            )),
            Err(e) => seen.push(format!("{} did not answer ({})", endpoint.core_url, short(&e))),
        }
    }
    Err(RegistryError::Discovery(format!("node {} has no live endpoint: {}", node.name, seen.join("; "))))
}

/// A management client for one endpoint of a node.
pub fn management(
    node: &ClusterNode,
    endpoint: &NodeEndpoint,
    credentials: &Credentials,
    timeout: Duration,
) -> BrokerManagement {
    let client = JolokiaClient::new(
        Endpoint {
            node: node.name.clone(),
            url: endpoint.jolokia_url.clone(),
            user: credentials.user.clone(),
            password: credentials.password.clone(),
            origin: None,
        },
        timeout,
    );
    BrokerManagement::new(client, endpoint.broker_name.clone())
}

fn short(e: &JolokiaError) -> String {
    e.to_string()
}
