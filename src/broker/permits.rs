//! The per-node rate limiter for management calls, as the management client sees it: before each HTTP
//! request it asks for permits for the node (one per request in a batch). The limiter itself lives elsewhere
//! (a token bucket row per node in Postgres, shared by every replica and by the Studio backend), so this module
//! knows nothing of databases.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;

/// Why permits could not be had.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no management permit for node {node}: {reason}")]
pub struct PermitError {
    /// The node.
    pub node: String,
    /// Why (the limiter's store failed, or the cost can never be granted).
    pub reason: String,
}

/// A source of management-call permits. `acquire` returns when `cost` calls to `node` may be made now.
pub trait PermitSource: Send + Sync + Debug {
    /// Waits until `cost` permits for `node` are granted.
    fn acquire<'a>(
        &'a self,
        node: &'a str,
        cost: u32,
    ) -> Pin<Box<dyn Future<Output = Result<(), PermitError>> + Send + 'a>>;
}
