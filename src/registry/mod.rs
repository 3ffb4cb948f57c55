//! The cluster registry: which clusters exist, their logical nodes (keyed by the broker's NodeID, so a
//! primary and its backup are one node), how to reach each node, and which credentials to use.
//!
//! - [`store`]: the Postgres tables of `migrations/0002_cluster_registry.sql`.
//! - [`discover`]: a cluster's nodes learnt from one seed node's topology.
//! - [`credentials`]: credentials come from the environment by reference; they are never stored.
//! - [`tls`]: an endpoint's TLS material, referenced by PEM paths in its Core URL; Jolokia uses the same.
//! - [`live`]: which endpoint of a node is live now (asked, never assumed), as a management client.
//! - [`ends`]: a run's end resolved to its live endpoint for a job, and kept for a minute.

pub mod credentials;
pub mod discover;
pub mod ends;
pub mod live;
pub mod store;
pub mod tls;

pub use credentials::Credentials;
pub use store::{Cluster, ClusterNode, EndpointRole, NodeEndpoint};

/// What can go wrong with the registry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Postgres failed.
    #[error("the registry's database: {0}")]
    Db(#[from] sqlx::Error),
    /// A cluster, node or endpoint that is not registered.
    #[error("{0}")]
    NotFound(String),
    /// A registration that conflicts with what is there.
    #[error("{0}")]
    Conflict(String),
    /// Credentials that are not in the environment.
    #[error("{0}")]
    MissingCredentials(String),
    /// An endpoint's URL carries credentials, which would be stored and shown with it.
    #[error("{0}")]
    CredentialsInUrl(String),
    /// A node could not be discovered or reached.
    #[error("{0}")]
    Discovery(String),
    /// A management call failed.
    #[error(transparent)]
    Jolokia(#[from] crate::broker::jolokia::JolokiaError),
}
