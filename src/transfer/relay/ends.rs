//! The two ends of a run as a job reaches them: each logical node's **live** endpoint, re-resolved by the
//! broker's NodeID at every job (SPEC §4.2 step 1: after a failover the run carries on on the backup), with
//! its management client (through the shared per-node permits) and its Core connection.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// The NodeID the endpoint answered with.
    node_id: String,
    /// Management of the endpoint without permits, for the liveness check of a cached end (as
    /// [`live_endpoint`] reads it).
    unlimited: BrokerManagement,
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
    fn key(end: &QueueRef) -> String {
        format!("{}\u{0}{}", end.cluster, end.node)
    }

    /// `end` as this process resolved it in the last [`RESOLVED_FOR`], **not checked again**: for a caller
    /// whose next management read includes the broker's state, which it checks with
    /// [`NodeAccess::is_live_node`] (and calls [`EndCache::forget_end`] when it is not).
    pub fn recent(&self, end: &QueueRef) -> Option<NodeAccess> {
        self.get(&EndCache::key(end))
    }

    /// Forgets `end`, so that the next resolve walks the node's endpoints again.
    pub fn forget_end(&self, end: &QueueRef) {
        self.forget(&EndCache::key(end));
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
        let (unlimited, endpoint) =
            live_endpoint(node, &credentials, MANAGEMENT_TIMEOUT).await.map_err(|e| match e {
                RegistryError::Db(e) => EndError::Db(e),
                other => EndError::NotLive(other.to_string()),
            })?;
        let mgmt = match permits {
            Some(p) => {
                BrokerManagement::new(unlimited.client().clone().with_permits(p), unlimited.broker_name().to_string())
            }
            None => unlimited.clone(),
        };
        Ok(NodeAccess {
            label: format!("{}/{}", end.cluster, end.node),
            mgmt,
            core_url: endpoint.core_url.clone(),
            credentials,
            node_id: node.node_id.clone(),
            unlimited,
        })
    }

    /// Like [`NodeAccess::resolve`], through `cache`: an end resolved in the last [`RESOLVED_FOR`] is asked
    /// again whether it is still live with the node's NodeID — one management read on a kept-alive HTTP
    /// connection instead of a registry read and a walk over the node's endpoints — and resolved afresh when it
    /// is not (a failover) or does not answer.
    pub async fn resolve_cached(
        pool: &PgPool,
        end: &QueueRef,
        permits: Option<Arc<dyn PermitSource>>,
        cache: &EndCache,
    ) -> Result<NodeAccess, EndError> {
        let key = EndCache::key(end);
        if let Some(known) = cache.get(&key) {
            match known.unlimited.broker_state().await {
                Ok(state) if known.is_live_node(&state) => return Ok(known),
                _ => cache.forget(&key),
            }
        }
        let access = NodeAccess::resolve(pool, end, permits).await?;
        cache.put(key, access.clone());
        Ok(access)
    }

    /// Whether `state`, read from this end, says it is still the live broker of its node.
    pub fn is_live_node(&self, state: &crate::broker::jolokia::BrokerState) -> bool {
        state.active == Some(true) && state.node_id.as_deref() == Some(self.node_id.as_str())
    }

    /// The broker user this end connects as (never the password).
    pub fn user(&self) -> &str {
        &self.credentials.user
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
