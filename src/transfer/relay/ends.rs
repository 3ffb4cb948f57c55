//! The two ends of a run as a job reaches them: each logical node's **live** endpoint, re-resolved by the
//! broker's NodeID at every job (SPEC §4.2 step 1: after a failover the run carries on on the backup), with
//! its management client (through the shared per-node permits) and its Core connection.

use std::sync::Arc;
use std::time::Duration;

use artemis_core::{ConnectOptions, Connection};
use sqlx::PgPool;

use crate::broker::jolokia::BrokerManagement;
use crate::broker::permits::PermitSource;
use crate::registry::live::live_endpoint;
use crate::registry::{store, Credentials, RegistryError};
use crate::transfer::plan::QueueRef;

/// How long one management call may take.
const MANAGEMENT_TIMEOUT: Duration = Duration::from_secs(15);

/// One end, resolved to its live endpoint.
#[derive(Debug, Clone)]
pub struct NodeAccess {
    /// `cluster/node`, for words and events.
    pub label: String,
    /// Management of the live endpoint.
    pub mgmt: BrokerManagement,
    /// The live endpoint's Core URL.
    pub core_url: String,
    credentials: Credentials,
}

/// Why an end could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum EndError {
    /// The cluster, node or credentials are no longer registered: no retry cures it.
    #[error("{0}")]
    Gone(String),
    /// No endpoint of the node is live now (it may be failing over): worth retrying.
    #[error("{0}")]
    NotLive(String),
    /// Postgres.
    #[error("reading the registry: {0}")]
    Db(#[from] sqlx::Error),
}

impl NodeAccess {
    /// Resolves `end`'s node to its live endpoint; management calls take `permits` first.
    pub async fn resolve(
        pool: &PgPool,
        end: &QueueRef,
        permits: Option<Arc<dyn PermitSource>>,
    ) -> Result<NodeAccess, EndError> {
        let cluster = store::get(pool, &end.cluster).await.map_err(gone)?;
        let node = cluster.node(&end.node).map_err(gone)?;
        let credentials = Credentials::from_env(&cluster.credentials_ref).map_err(gone)?;
        let (mgmt, endpoint) = live_endpoint(node, &credentials, MANAGEMENT_TIMEOUT).await.map_err(|e| match e {
            RegistryError::Db(e) => EndError::Db(e),
            other => EndError::NotLive(other.to_string()),
        })?;
        let mgmt = match permits {
            Some(p) => BrokerManagement::new(mgmt.client().clone().with_permits(p), mgmt.broker_name().to_string()),
            None => mgmt,
        };
        Ok(NodeAccess {
            label: format!("{}/{}", end.cluster, end.node),
            mgmt,
            core_url: endpoint.core_url.clone(),
            credentials,
        })
    }

    /// Opens a Core connection to the live endpoint. Its TTL is short, so that if this worker dies or
    /// stalls the broker gives the messages it was delivering to it back to the queue soon, and another
    /// worker can take them over once the lease expires.
    pub async fn connect(&self, ttl: Duration) -> Result<Connection, artemis_core::Error> {
        let options = ConnectOptions::from_url(&self.core_url)?
            .credentials(self.credentials.user.clone(), self.credentials.password.expose().clone())
            .connection_ttl(ttl)
            .call_timeout(Duration::from_secs(30));
        Connection::connect(&options).await
    }
}

fn gone(e: RegistryError) -> EndError {
    match e {
        RegistryError::Db(e) => EndError::Db(e),
        other => EndError::Gone(other.to_string()),
    }
}
