//! Which endpoint of a logical node is live now. Asked on every use, never assumed: after a failover the
//! backup is the live one, and a run carries on there (SPEC §4.2 step 1: endpoints re-resolved by NodeID).

use std::sync::Arc;
use std::time::Duration;

use super::credentials::Credentials;
use super::store::{ClusterNode, NodeEndpoint};
use super::RegistryError;
use crate::broker::jolokia::{BrokerManagement, Endpoint, JolokiaClient, JolokiaError};
use crate::broker::permits::PermitSource;

/// The live endpoint of `node` and a management client for it: the first endpoint whose broker says
/// `Active=true` with the node's NodeID.
pub async fn live_endpoint<'a>(
    node: &'a ClusterNode,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<(BrokerManagement, &'a NodeEndpoint), RegistryError> {
    live_endpoint_limited(node, credentials, timeout, None).await
}

/// Like [`live_endpoint`], with every management call — the state reads that find the live endpoint, and
/// those of the client returned — taking `permits` first, so they count against the node's shared rate.
pub async fn live_endpoint_limited<'a>(
    node: &'a ClusterNode,
    credentials: &Credentials,
    timeout: Duration,
    permits: Option<&Arc<dyn PermitSource>>,
) -> Result<(BrokerManagement, &'a NodeEndpoint), RegistryError> {
    let mut seen = Vec::new();
    for endpoint in &node.endpoints {
        let mgmt = limited(management(node, endpoint, credentials, timeout), permits);
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
            tls: super::tls::of_endpoint(&endpoint.core_url, credentials.key_passphrase.as_ref()),
        },
        timeout,
    );
    BrokerManagement::new(client, endpoint.broker_name.clone())
}

/// `mgmt` with its calls taking `permits` first (unchanged when `None`).
pub fn limited(mgmt: BrokerManagement, permits: Option<&Arc<dyn PermitSource>>) -> BrokerManagement {
    match permits {
        Some(p) => BrokerManagement::new(mgmt.client().clone().with_permits(Arc::clone(p)), mgmt.broker_name()),
        None => mgmt,
    }
}

fn short(e: &JolokiaError) -> String {
    e.to_string()
}
