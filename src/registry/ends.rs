//! The two ends of a run as a job reaches them: each registered logical node resolved to its **live** endpoint,
//! re-resolved by the broker's NodeID at every job (SPEC §4.2 step 1: after a failover the run carries on on the
//! backup), with its management client (through the shared per-node permits). What a resolved end can do is
//! [`NodeAccess`]'s (in `crate::broker`); which endpoint is live, and with which credentials, is the registry's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::broker::jolokia::BrokerManagement;
use crate::broker::node::{LiveEndpoint, NodeAccess};
use crate::broker::permits::PermitSource;
use crate::registry::live::live_endpoint;
use crate::registry::{store, Credentials, RegistryError};

/// How long one management call may take.
const MANAGEMENT_TIMEOUT: Duration = Duration::from_secs(15);

/// A registered node by name: a run's source or target end.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    /// The cluster's registered name.
    pub cluster: &'a str,
    /// The node's name within the cluster.
    pub node: &'a str,
}

impl NodeRef<'_> {
    fn key(&self) -> String {
        format!("{}\u{0}{}", self.cluster, self.node)
    }
}

/// How long a resolved end is reused (each time after checking it is still the live one): long enough to
/// spare most batches the registry read and the endpoint walk, short enough for a registry change (a node's
/// endpoints, credentials) to reach running runs within a minute.
pub const RESOLVED_FOR: Duration = Duration::from_secs(60);

/// Ends this process resolved recently, by cluster and node.
#[derive(Debug, Default)]
pub struct EndCache {
    known: Mutex<HashMap<String, (NodeAccess, Instant)>>,
}

impl EndCache {
    /// `end` as this process resolved it in the last [`RESOLVED_FOR`], **not checked again**: for a caller
    /// whose next management read includes the broker's state, which it checks with
    /// [`NodeAccess::is_live_node`] (and calls [`EndCache::forget_end`] when it is not).
    pub fn recent(&self, end: NodeRef<'_>) -> Option<NodeAccess> {
        self.get(&end.key())
    }

    /// Forgets `end`, so that the next resolve walks the node's endpoints again.
    pub fn forget_end(&self, end: NodeRef<'_>) {
        self.forget(&end.key());
    }

    fn get(&self, key: &str) -> Option<NodeAccess> {
        let known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known.get(key).filter(|(_, at)| at.elapsed() < RESOLVED_FOR).map(|(access, _)| access.clone())
    }

    fn put(&self, key: String, access: NodeAccess) {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).insert(key, (access, Instant::now()));
    }

    fn forget(&self, key: &str) {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }
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

/// Resolves `end`'s node to its live endpoint; management calls take `permits` first.
pub async fn resolve(
    pool: &PgPool,
    end: NodeRef<'_>,
    permits: Option<Arc<dyn PermitSource>>,
) -> Result<NodeAccess, EndError> {
    let cluster = store::get(pool, end.cluster).await.map_err(gone)?;
    let node = cluster.node(end.node).map_err(gone)?;
    let credentials = Credentials::from_env(&cluster.credentials_ref).map_err(gone)?;
    let (unlimited, endpoint) = live_endpoint(node, &credentials, MANAGEMENT_TIMEOUT).await.map_err(|e| match e {
        RegistryError::Db(e) => EndError::Db(e),
        other => EndError::NotLive(other.to_string()),
    })?;
    let mgmt = match permits {
        Some(p) => {
            BrokerManagement::new(unlimited.client().clone().with_permits(p), unlimited.broker_name().to_string())
        }
        None => unlimited.clone(),
    };
    Ok(NodeAccess::new(LiveEndpoint {
        label: format!("{}/{}", end.cluster, end.node),
        mgmt,
        unlimited,
        core_url: endpoint.core_url.clone(),
        user: credentials.user,
        password: credentials.password,
        key_passphrase: credentials.key_passphrase,
        node_id: node.node_id.clone(),
    }))
}

/// Like [`resolve`], through `cache`: an end resolved in the last [`RESOLVED_FOR`] is asked again whether it is
/// still live with the node's NodeID — one management read on a kept-alive HTTP connection instead of a registry
/// read and a walk over the node's endpoints — and resolved afresh when it is not (a failover) or does not answer.
pub async fn resolve_cached(
    pool: &PgPool,
    end: NodeRef<'_>,
    permits: Option<Arc<dyn PermitSource>>,
    cache: &EndCache,
) -> Result<NodeAccess, EndError> {
    let key = end.key();
    if let Some(known) = cache.get(&key) {
        match known.still_live().await {
            Some(true) => return Ok(known),
            _ => cache.forget(&key),
        }
    }
    let access = resolve(pool, end, permits).await?;
    cache.put(key, access.clone());
    Ok(access)
}

fn gone(e: RegistryError) -> EndError {
    match e {
        RegistryError::Db(e) => EndError::Db(e),
        other => EndError::Gone(other.to_string()),
    }
}
