//! What the Queues and Messages screens read (issue 30): a node's queues with their depth, read through Jolokia
//! management, and a page of a queue's messages, browsed over Core. Nothing is changed on any broker.
//!
//! The operator's grants decide as everywhere (docs/permissions.md): a cluster they may not see answers as one that
//! is not registered; a queue's list needs only to see the cluster; its messages — their bodies and properties —
//! need a grant to take them (`message:read`, or `message:move`). A filter is read by the parser a run uses
//! (`crates/selector`, ADR 0012) and the broker is given the parser's writing of it, never the text as typed.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;

use super::permissions::{self, MissingGrant, Permission, PermissionError};
use super::plan::{parse_filter, FilterError, STAGING_PREFIX};
use super::service::{visible_cluster, ServiceError};
use crate::broker::browse::{browse_page, BrowseBudget, BrowseFailure, BrowsedPage, Page};
use crate::broker::jolokia::{AgentError, BrokerManagement, QueueState, RoutingType};
use crate::broker::node::connect_core;
use crate::broker::permits::PermitSource;
use crate::limiter::PgPermits;
use crate::registry::live::live_endpoint_limited;
use crate::registry::{Credentials, RegistryError};

/// How long one management or Core call of these reads may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How far a page of messages reads past the messages before it (see `broker::browse`).
pub const BROWSE_BUDGET: BrowseBudget = BrowseBudget { skip: 10_000, time: Duration::from_secs(15) };

/// Why a queue list or a page of messages could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrowseError {
    /// An unknown or invisible cluster or node, missing credentials, a missing grant, the database.
    #[error(transparent)]
    Service(#[from] ServiceError),
    /// The filter cannot be read (by the parser a run uses).
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The node has no such queue.
    #[error("node {node} has no queue {queue}")]
    NoSuchQueue {
        /// `cluster/node`.
        node: String,
        /// The queue asked for.
        queue: String,
    },
    /// The page could not be read within its budget.
    #[error("{0}")]
    Page(BrowseFailure),
    /// The broker could not be asked (its words name hosts: for the log).
    #[error("the broker could not be browsed: {0}")]
    Broker(String),
}

impl From<RegistryError> for BrowseError {
    fn from(e: RegistryError) -> BrowseError {
        BrowseError::Service(e.into())
    }
}

impl From<PermissionError> for BrowseError {
    fn from(e: PermissionError) -> BrowseError {
        BrowseError::Service(e.into())
    }
}

impl From<sqlx::Error> for BrowseError {
    fn from(e: sqlx::Error) -> BrowseError {
        BrowseError::Service(e.into())
    }
}

/// A node of a cluster, as `operator` may reach it.
#[derive(Debug, Clone, Copy)]
pub struct NodeAsked<'a> {
    /// Who asks.
    pub operator: &'a str,
    /// The cluster's registered name.
    pub cluster: &'a str,
    /// The node's name in it.
    pub node: &'a str,
}

/// A node's live endpoint: its management (through the node's shared permits), its Core URL and credentials.
struct Reached {
    mgmt: BrokerManagement,
    core_url: String,
    credentials: Credentials,
}

/// What reading a node needs besides seeing its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// Its queues: seeing the cluster is enough.
    Queues,
    /// Its messages: [`require_to_browse`].
    Messages,
}

/// The node's live endpoint, once the operator may see its cluster and read what they ask; an invisible cluster
/// answers as one not registered. Grants are checked before any broker is asked.
async fn reach(pool: &PgPool, at: NodeAsked<'_>, reading: Reading) -> Result<Reached, BrowseError> {
    let cluster = visible_cluster(pool, at.operator, at.cluster).await?;
    let node = cluster.node(at.node)?;
    if reading == Reading::Messages {
        require_to_browse(pool, at.operator, at.cluster).await?;
    }
    let credentials = Credentials::from_env(&cluster.credentials_ref)?;
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(pool.clone()));
    let (mgmt, endpoint) = live_endpoint_limited(node, &credentials, CALL_TIMEOUT, Some(&permits)).await?;
    Ok(Reached { mgmt, core_url: endpoint.core_url.clone(), credentials })
}

/// Which queues of a node.
#[derive(Debug, Clone, Default)]
pub struct QueuesAsked<'a> {
    /// Only queues whose name holds this text.
    pub name_contains: Option<&'a str>,
    /// Only queues named after this one (the previous page's last), in name order.
    pub after: Option<&'a str>,
    /// At most this many.
    pub limit: usize,
}

/// A queue as the list shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueLine {
    /// Its name.
    pub name: String,
    /// Its address.
    pub address: String,
    /// `anycast` or `multicast`.
    pub routing_type: RoutingType,
    /// What its management said; `None` when it could not be read (each fact unknown, never zero).
    pub state: Option<QueueState>,
    /// Why it is not an application's queue, when it is not: a run's staging, or the broker's own.
    pub internal: Option<&'static str>,
}

/// A page of a node's queues.
#[derive(Debug, Clone, PartialEq)]
pub struct QueuePage {
    /// The queues, by name.
    pub queues: Vec<QueueLine>,
    /// Another queue follows the last one.
    pub more: bool,
}

/// Why a queue is not an application's: a run's staging queue, the broker's own (`$.artemis.internal…`,
/// `activemq.…`), or one its management calls internal (2.34+). `None`: an application's queue as far as known.
pub fn internal_because(name: &str, internal_attribute: Option<bool>) -> Option<&'static str> {
    if name.starts_with(STAGING_PREFIX) {
        Some("a run's staging queue")
    } else if name.starts_with("$.") || name.starts_with("activemq.") || internal_attribute == Some(true) {
        Some("the broker's own")
    } else {
        None
    }
}

/// A page of a node's queues with their depth, consumers and state: one management search for the names, one
/// batched read for the page's queues.
pub async fn list_queues(pool: &PgPool, at: NodeAsked<'_>, asked: &QueuesAsked<'_>) -> Result<QueuePage, BrowseError> {
    let reached = reach(pool, at, Reading::Queues).await?;
    let mgmt = &reached.mgmt;
    let mut all = mgmt.queues().await.map_err(|e| BrowseError::Broker(e.to_string()))?;
    all.sort_by(|a, b| a.2.cmp(&b.2));
    all.dedup_by(|a, b| a.2 == b.2);
    let wanted = all
        .into_iter()
        .filter(|(_, _, q)| asked.name_contains.is_none_or(|part| q.contains(part)))
        .filter(|(_, _, q)| asked.after.is_none_or(|after| q.as_str() > after));
    let mut page: Vec<_> = wanted.take(asked.limit + 1).collect();
    let more = page.len() > asked.limit;
    page.truncate(asked.limit);
    let requests: Vec<_> = page.iter().map(|(a, r, q)| mgmt.queue_state_request(a, *r, q)).collect();
    let answers = if requests.is_empty() { Vec::new() } else { mgmt.batch(&requests).await.unwrap_or_default() };
    let queues = page
        .into_iter()
        .enumerate()
        .map(|(i, (address, routing_type, name))| {
            let state = match answers.get(i) {
                Some(Ok(v)) => Some(QueueState::from_read(v)),
                Some(Err(AgentError { .. })) | None => None,
            };
            let internal = internal_because(&name, state.as_ref().and_then(|s| s.internal));
            QueueLine { name, address, routing_type, state, internal }
        })
        .collect();
    Ok(QueuePage { queues, more })
}

/// Which messages of a queue.
#[derive(Debug, Clone)]
pub struct MessagesAsked<'a> {
    /// The queue.
    pub queue: &'a str,
    /// A selector as the operator typed it; `None` or blank: every message.
    pub filter: Option<&'a str>,
    /// The id of the previous page's last message.
    pub after: Option<i64>,
    /// At most this many (1 to 200).
    pub limit: usize,
}

/// `Ok` when `principal` may read the messages on `cluster` — their bodies and properties: they hold
/// `message:read` (what a copy takes) or `message:move` (what a move takes; either could carry the messages
/// anywhere they may send to); else the missing grant, named as `message:read`.
pub async fn require_to_browse(pool: &PgPool, principal: &str, cluster: &str) -> Result<(), PermissionError> {
    for permission in [Permission::MessageRead, Permission::MessageMove] {
        if permissions::has_grant(pool, principal, cluster, permission).await? {
            return Ok(());
        }
    }
    Err(PermissionError::Missing(MissingGrant {
        principal: principal.to_string(),
        permission: Permission::MessageRead,
        cluster: cluster.to_string(),
    }))
}

/// A page of a queue's messages, browsed over Core (never consumed). The filter is refused here, in the parser's
/// words, before any broker is asked.
pub async fn browse_messages(
    pool: &PgPool,
    at: NodeAsked<'_>,
    asked: &MessagesAsked<'_>,
) -> Result<BrowsedPage, BrowseError> {
    let filter = asked.filter.filter(|f| !f.trim().is_empty()).map(parse_filter).transpose()?.map(|s| s.to_string());
    let reached = reach(pool, at, Reading::Messages).await?;
    let conn = connect_core(&reached.core_url, reached.credentials.login(), CALL_TIMEOUT, None)
        .await
        .map_err(|e| BrowseError::Broker(e.to_string()))?;
    let page = Page { filter: filter.as_deref(), after: asked.after, limit: asked.limit };
    let read = browse_page(&conn, asked.queue, &page, BROWSE_BUDGET).await;
    let _ = conn.close().await;
    read.map_err(|e| match e {
        e if e.is_no_such_queue() => {
            BrowseError::NoSuchQueue { node: format!("{}/{}", at.cluster, at.node), queue: asked.queue.to_string() }
        }
        BrowseFailure::Core(e) => BrowseError::Broker(e.to_string()),
        other => BrowseError::Page(other),
    })
}

#[cfg(test)]
mod tests {
    use super::internal_because;

    #[test]
    fn staging_and_the_brokers_own_queues_are_marked() {
        assert_eq!(internal_because("studio.transfer.0c1d", None), Some("a run's staging queue"));
        assert_eq!(internal_because("$.artemis.internal.sf.east.x", None), Some("the broker's own"));
        assert_eq!(internal_because("activemq.notifications", Some(false)), Some("the broker's own"));
        assert_eq!(internal_because("orders", Some(true)), Some("the broker's own"));
        assert_eq!(internal_because("orders", None), None);
    }
}
