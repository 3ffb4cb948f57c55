//! One node of a cluster as a job reaches it: its **live** endpoint's management client and Core URL, with the
//! broker user to connect as. Resolving a registered node to this is the registry's job
//! (`crate::registry::ends`); using it is this module's.

use std::time::Duration;

use artemis_core::{ConnectOptions, Connection, KeyPassphrase};

use super::jolokia::{BrokerManagement, BrokerState};
use crate::secret::Secret;

/// One end, resolved to its live endpoint.
#[derive(Debug, Clone)]
pub struct NodeAccess {
    /// `cluster/node`, for words and events.
    pub label: String,
    /// Management of the live endpoint (through the node's shared permits, when it has them).
    pub mgmt: BrokerManagement,
    /// The live endpoint's Core URL.
    pub core_url: String,
    user: String,
    password: Secret<String>,
    key_passphrase: Option<KeyPassphrase>,
    /// The NodeID the endpoint answered with.
    node_id: String,
    /// Management of the endpoint without permits, for the liveness check of a cached end.
    unlimited: BrokerManagement,
}

/// What a resolved end is made of.
#[derive(Debug)]
pub struct LiveEndpoint {
    /// `cluster/node`.
    pub label: String,
    /// Management through the node's permits.
    pub mgmt: BrokerManagement,
    /// Management without permits.
    pub unlimited: BrokerManagement,
    /// The live endpoint's Core URL.
    pub core_url: String,
    /// The broker user.
    pub user: String,
    /// Its password.
    pub password: Secret<String>,
    /// The passphrase of the endpoint's client key, by reference (the cluster's credentials).
    pub key_passphrase: Option<KeyPassphrase>,
    /// The node's NodeID, which the endpoint answered with.
    pub node_id: String,
}

impl NodeAccess {
    /// The end `live` describes.
    pub fn new(live: LiveEndpoint) -> NodeAccess {
        NodeAccess {
            label: live.label,
            mgmt: live.mgmt,
            core_url: live.core_url,
            user: live.user,
            password: live.password,
            key_passphrase: live.key_passphrase,
            node_id: live.node_id,
            unlimited: live.unlimited,
        }
    }

    /// Whether `state`, read from this end, says it is still the live broker of its node.
    pub fn is_live_node(&self, state: &BrokerState) -> bool {
        state.active == Some(true) && state.node_id.as_deref() == Some(self.node_id.as_str())
    }

    /// Whether this end is still the live broker of its node, asked without taking a permit (one management
    /// read). `None`: it did not answer.
    pub async fn still_live(&self) -> Option<bool> {
        self.unlimited.broker_state().await.ok().map(|state| self.is_live_node(&state))
    }

    /// The broker user this end connects as (never the password).
    pub fn user(&self) -> &str {
        &self.user
    }

    /// Opens a Core connection to the live endpoint. Its TTL is short, so that if this worker dies or
    /// stalls the broker gives the messages it was delivering to it back to the queue soon, and another
    /// worker can take them over once the lease expires.
    pub async fn connect(&self, ttl: Duration) -> Result<Connection, artemis_core::Error> {
        let login = Login { user: &self.user, password: &self.password, key_passphrase: self.key_passphrase.as_ref() };
        connect_core(&self.core_url, login, Duration::from_secs(30), Some(ttl)).await
    }
}

/// Who a Core connection logs in as, and the passphrase of its client key (mutual TLS), by reference.
#[derive(Debug, Clone, Copy)]
pub struct Login<'a> {
    /// The broker user.
    pub user: &'a str,
    /// Its password.
    pub password: &'a Secret<String>,
    /// The passphrase of an encrypted client key; `None`: none is given.
    pub key_passphrase: Option<&'a KeyPassphrase>,
}

/// Opens a Core connection to `core_url` as `login`, each answered call waiting at most `call_timeout`, with the
/// connection TTL `ttl` (`None`: the client's default). The one place the app builds Core connect options: an end
/// a job resolved connects through [`NodeAccess::connect`], an operator's call on a node it reached itself (an
/// orphan's return) here.
pub async fn connect_core(
    core_url: &str,
    login: Login<'_>,
    call_timeout: Duration,
    ttl: Option<Duration>,
) -> Result<Connection, artemis_core::Error> {
    let mut options = ConnectOptions::from_url(core_url)?
        .key_passphrase(login.key_passphrase.cloned())
        .credentials(login.user.to_string(), login.password.expose().clone())
        .call_timeout(call_timeout);
    if let Some(ttl) = ttl {
        options = options.connection_ttl(ttl);
    }
    Connection::connect(&options).await
}
