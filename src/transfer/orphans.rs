//! Orphans (docs/guarantees.md): a staging queue `studio.transfer.<uuid>` that no run owns — its run row was deleted, or it
//! was made by hand, or by a deployment that shares the broker but not this database. Its messages were taken
//! from a source queue by the broker's move, so they exist nowhere else: they are listed, and returned each to the
//! queue it came from.
//!
//! **Listing.** Every node of every registered cluster is asked for its `studio.transfer.<uuid>` queues
//! ([`staging::list`]: exact staging names only, so `studio.dmq.*` and look-alikes are never listed). A queue is
//! owned when a run names it as its staging queue, or when a run has the queue's uuid as its id (a run that crashed
//! between making staging and recording it). A node that cannot be asked is reported as unchecked, never as
//! "no orphans".
//!
//! **Return.** Each message carries `_AMQ_ORIG_QUEUE`, the queue the broker's move took it from. The messages are
//! grouped by it and each group goes back with the broker's own move, `moveMessages` filtered on
//! `_AMQ_ORIG_QUEUE` and **without a count** (a counted move strands scheduled messages: docs/broker-notes.md).
//! Messages without the property go to the queue the operator names, and without one the return is refused
//! before anything moves. Then the empty staging queue is removed with its address settings. Every return is
//! audited, done or refused. The returned messages get new ids, no expiration, and join the tail of their queue.
//!
//! **Permissions** (docs/permissions.md). Listing shows the clusters on which the operator holds `cluster:read`; returning
//! needs `message:move` on the orphan's cluster, and a cluster the operator may not see at all is not found, as if
//! it were not registered. Each return is audited on that cluster.
//!
//! **Several deployments on one broker.** Ownership is read from this database only, so the staging queue of a run
//! that lives in another database sharing the broker is listed here as an orphan. A return refuses a queue with a
//! consumer attached (that run relaying a batch); between batches it cannot be told apart. Nothing is lost either
//! way — the messages go back to their source queues — but that other run then fails, saying its staging is gone.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::broker::jolokia::{BrokerManagement, JolokiaError, Request};
use crate::broker::node::connect_core;
use crate::broker::permits::PermitSource;
use crate::registry::live::live_endpoint_limited;
use crate::registry::{store, Credentials, RegistryError};
use crate::transfer::audit::{audit_logged, AuditEntry};
use crate::transfer::permissions::{self, Permission, PermissionError};
use crate::transfer::staging::{self, StagingError, StagingSpec, DMQ_PREFIX, STAGING_PREFIX};
use crate::transfer::store::orphan;

/// How long one management call of a listing or a return may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

/// The property the broker's move writes on each copy: the queue it was moved from.
pub const ORIGINAL_QUEUE: &str = "_AMQ_ORIG_QUEUE";

/// How many listing-and-move rounds a return makes: each round sees one browse page of staging and moves every
/// group it finds there (all of each group, not only the page), so more rounds are needed only for a staging
/// queue deeper than its browse page with groups not seen in the first page.
const MAX_ROUNDS: usize = 20;

/// A staging queue no run owns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Orphan {
    /// The registered cluster.
    pub cluster: String,
    /// The node within it.
    pub node: String,
    /// `studio.transfer.<uuid>`.
    pub queue: String,
    /// Its `MessageCount` (in delivery and scheduled included).
    pub messages: u64,
}

impl Orphan {
    /// `cluster/node/queue`, as the CLI spells it.
    pub fn display(&self) -> String {
        format!("{}/{}/{}", self.cluster, self.node, self.queue)
    }
}

/// A node whose staging queues could not be listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Unchecked {
    /// The registered cluster.
    pub cluster: String,
    /// The node.
    pub node: String,
    /// Why, in words.
    pub why: String,
}

/// What a listing found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Orphans {
    /// The orphans, by cluster, node and queue.
    pub orphans: Vec<Orphan>,
    /// Nodes that could not be asked: whether they hold orphans is unknown.
    pub unchecked: Vec<Unchecked>,
    /// How many nodes answered (none: every node listed is unchecked, and "no orphans" would claim what nobody
    /// said). Not in the API's answer, whose `unchecked` already says it.
    #[serde(skip)]
    pub answered: usize,
}

/// What a return does, shown before the operator types the staging queue's name.
pub const RETURN_WARNING: &str = "Each message goes back to the queue it was taken from (its _AMQ_ORIG_QUEUE), with a \
     new message id, without expiration, at the tail of that queue; messages without one go to the queue named for \
     them (`--to`; `to` in the API). The empty staging queue and its address settings are then removed.";

/// What a return did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Returned {
    /// The staging queue, removed.
    pub queue: String,
    /// How many messages went back to each original queue.
    pub to_original: BTreeMap<String, u64>,
    /// How many messages without an original queue went to the queue the operator named.
    pub to_named: u64,
}

impl Returned {
    /// Every message returned.
    pub fn total(&self) -> u64 {
        self.to_original.values().sum::<u64>() + self.to_named
    }
}

/// Why orphans could not be listed or an orphan returned; the words say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OrphanError {
    /// The registry (an unknown cluster or node, missing credentials).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// Postgres.
    #[error("the database: {0}")]
    Db(#[from] sqlx::Error),
    /// The operator lacks a grant (or the grants could not be read).
    #[error(transparent)]
    Permission(#[from] PermissionError),
    /// The name is not a staging queue (the DMQ, a look-alike, a user queue).
    #[error("{0} is not a staging queue (studio.transfer.<uuid>): only those can be orphans")]
    NotStaging(String),
    /// A run owns the queue: it is not an orphan.
    #[error("run {run} owns {queue}: it is not an orphan; use `artemis-transfer return {run}` instead")]
    Owned {
        /// The staging queue.
        queue: String,
        /// Its run.
        run: Uuid,
    },
    /// The node has no such queue.
    #[error("node {node} has no queue {queue}")]
    Missing {
        /// `cluster/node`.
        node: String,
        /// The queue.
        queue: String,
    },
    /// Messages without `_AMQ_ORIG_QUEUE` and no queue named for them.
    #[error(
        "{count} messages in {queue} carry no {ORIGINAL_QUEUE}, so where they came from is unknown: name a queue \
         for them with --to <queue>{}",
        moved_note(*.returned_so_far)
    )]
    NoOriginalQueue {
        /// The staging queue.
        queue: String,
        /// How many were seen without it.
        count: u64,
        /// Returned before this was found (0 when it was found before anything moved).
        returned_so_far: u64,
    },
    /// A queue the messages would go to cannot take them.
    #[error("{queue} cannot take the messages of {staging}: {why}{}", moved_note(*.returned_so_far))]
    BadDestination {
        /// The staging queue.
        staging: String,
        /// The original or named queue.
        queue: String,
        /// Why, in words.
        why: String,
        /// Returned before this was found.
        returned_so_far: u64,
    },
    /// A consumer is attached to the queue: a run of another deployment (another database sharing the broker) may be
    /// relaying from it right now.
    #[error(
        "{queue} has {consumers} consumers: a run this database does not know (another deployment sharing the \
         broker?) may be relaying from it; nothing was moved. Return it once no consumer is attached"
    )]
    InUse {
        /// The staging queue.
        queue: String,
        /// `ConsumerCount`.
        consumers: i64,
    },
    /// Messages are left in staging after the return (in delivery to a consumer, or not listed).
    #[error(
        "{messages} messages are still in {queue} after returning {returned} ({in_delivery} in delivery to a \
         consumer): the staging queue is kept; return again once its consumers are gone"
    )]
    Left {
        /// The staging queue.
        queue: String,
        /// Returned by this call.
        returned: u64,
        /// `MessageCount` left.
        messages: u64,
        /// `DeliveringCount` left.
        in_delivery: u64,
    },
    /// Staging could not be read or removed.
    #[error(transparent)]
    Staging(#[from] StagingError),
    /// A management call failed.
    #[error(transparent)]
    Management(#[from] JolokiaError),
    /// The node's Core acceptor (listing the orphan) failed.
    #[error("listing the orphan over Core: {0}")]
    Core(#[from] artemis_core::Error),
}

fn moved_note(returned: u64) -> String {
    if returned == 0 {
        "; nothing was moved".into()
    } else {
        format!("; {returned} messages were already returned to their queues, the rest stay in staging")
    }
}

impl OrphanError {
    /// A refusal (the operator can act on the words), as opposed to a failure of a system.
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            OrphanError::Db(_)
                | OrphanError::Management(_)
                | OrphanError::Core(_)
                | OrphanError::Registry(RegistryError::Db(_))
                | OrphanError::Permission(PermissionError::Db(_))
        )
    }
}

/// The uuids among `queues` that a run owns: the run naming it as staging, or the run of its uuid.
async fn owned(pool: &PgPool, queues: &[String]) -> Result<HashSet<String>, sqlx::Error> {
    let uuids: Vec<Uuid> = queues.iter().filter_map(|q| staging::run_of_staging_queue(q)).collect();
    let rows = orphan::run_owning_queues(pool, queues, &uuids).await?;
    let mut out = HashSet::new();
    for (id, staging) in rows {
        out.insert(staging::staging_queue_name(id));
        if let Some(s) = staging {
            out.insert(s);
        }
    }
    Ok(out)
}

/// The run that owns `queue`, if any.
async fn owner(pool: &PgPool, queue: &str) -> Result<Option<Uuid>, sqlx::Error> {
    let uuid = staging::run_of_staging_queue(queue);
    orphan::run_owning_queue(pool, queue, uuid).await
}

/// Lists every orphan on every node of every registered cluster on which `principal` holds `cluster:read` (the
/// others are not asked). Management calls take `permits`.
pub async fn list(
    pool: &PgPool,
    permits: Option<Arc<dyn PermitSource>>,
    principal: &str,
) -> Result<Orphans, OrphanError> {
    let mut found: Vec<Orphan> = Vec::new();
    let mut unchecked = Vec::new();
    let mut answered = 0;
    for cluster in store::list(pool).await? {
        if !permissions::has_grant(pool, principal, &cluster.name, Permission::ClusterRead).await? {
            continue;
        }
        let credentials = match Credentials::from_env(&cluster.credentials_ref) {
            Ok(c) => c,
            Err(e) => {
                for node in &cluster.nodes {
                    unchecked.push(Unchecked {
                        cluster: cluster.name.clone(),
                        node: node.name.clone(),
                        why: e.to_string(),
                    });
                }
                continue;
            }
        };
        for node in &cluster.nodes {
            let listed = async {
                let (mgmt, _) = live_endpoint_limited(node, &credentials, CALL_TIMEOUT, permits.as_ref()).await?;
                Ok::<_, OrphanError>(staging::list(&mgmt).await?)
            }
            .await;
            match listed {
                Ok(queues) => {
                    answered += 1;
                    found.extend(queues.into_iter().map(|(queue, messages)| Orphan {
                        cluster: cluster.name.clone(),
                        node: node.name.clone(),
                        queue,
                        messages,
                    }))
                }
                Err(OrphanError::Registry(RegistryError::Db(e))) => return Err(e.into()),
                Err(e) => unchecked.push(Unchecked {
                    cluster: cluster.name.clone(),
                    node: node.name.clone(),
                    why: e.to_string(),
                }),
            }
        }
    }
    let names: Vec<String> = found.iter().map(|o| o.queue.clone()).collect();
    let owned = owned(pool, &names).await?;
    found.retain(|o| !owned.contains(&o.queue));
    found.sort_by(|a, b| (&a.cluster, &a.node, &a.queue).cmp(&(&b.cluster, &b.node, &b.queue)));
    Ok(Orphans { orphans: found, unchecked, answered })
}

/// What the operator asks to return.
#[derive(Debug, Clone)]
pub struct ReturnRequest {
    /// The registered cluster.
    pub cluster: String,
    /// The node.
    pub node: String,
    /// The staging queue, `studio.transfer.<uuid>`.
    pub queue: String,
    /// Where messages without `_AMQ_ORIG_QUEUE` go (a queue on the same node).
    pub to: Option<String>,
    /// Who asks (audited).
    pub operator: String,
}

/// Returns one orphan's messages to their original queues (see the module doc), then removes it. Audited.
pub async fn return_orphan(
    pool: &PgPool,
    permits: Option<Arc<dyn PermitSource>>,
    request: &ReturnRequest,
) -> Result<Returned, OrphanError> {
    let run = staging::run_of_staging_queue(&request.queue);
    let result = match run {
        None => Err(OrphanError::NotStaging(request.queue.clone())),
        Some(_) => return_checked(pool, permits, request).await,
    };
    let detail = |extra: Value| {
        json!({
            "cluster": request.cluster,
            "node": request.node,
            "queue": request.queue,
            "to": request.to,
            "result": extra,
        })
    };
    let (outcome, extra) = match &result {
        Ok(done) => ("ok", json!(done)),
        Err(e) if e.is_refusal() => ("refused", json!({ "reason": e.to_string() })),
        Err(e) => ("error", json!({ "error": e.to_string() })),
    };
    let entry = AuditEntry {
        actor: &request.operator,
        action: "orphan_return",
        target: format!("run:{}", run.unwrap_or(Uuid::nil())),
        outcome,
        detail: detail(extra),
        // The messages go back to queues of the orphan's own node.
        source_cluster: Some(&request.cluster),
        target_cluster: Some(&request.cluster),
    };
    audit_logged(pool, &entry).await;
    result
}

/// [`return_orphan`] once the queue is known to be a staging queue: checks, returns, removes.
async fn return_checked(
    pool: &PgPool,
    permits: Option<Arc<dyn PermitSource>>,
    request: &ReturnRequest,
) -> Result<Returned, OrphanError> {
    let queue = &request.queue;
    authorise(pool, request).await?;
    let cluster = store::get(pool, &request.cluster).await?;
    let node = cluster.node(&request.node)?;
    let credentials = Credentials::from_env(&cluster.credentials_ref)?;
    let (mgmt, endpoint) = live_endpoint_limited(node, &credentials, CALL_TIMEOUT, permits.as_ref()).await?;
    let label = format!("{}/{}", request.cluster, request.node);
    check_unused(&mgmt, queue, &label).await?;
    let destinations = Destinations {
        orphan: queue,
        label: &label,
        on_node: mgmt.queues().await?.into_iter().map(|(_, _, q)| q).collect(),
    };
    if let Some(to) = &request.to {
        destinations.check(to, 0)?;
    }
    // The orphan is listed over Core, which carries every legal message (see `staging::list_over_core`).
    let conn = connect_core(&endpoint.core_url, credentials.login(), CALL_TIMEOUT, None).await?;
    let done = return_in_rounds(&conn, &mgmt, request, &destinations).await?;
    let left = staging::depth(&mgmt, queue).await?;
    if left.messages > 0 {
        return Err(OrphanError::Left {
            queue: queue.clone(),
            returned: done.total(),
            messages: left.messages,
            in_delivery: left.in_delivery,
        });
    }
    // The batch size only shapes the browse page of a staging being made; removal does not use it.
    staging::remove(&mgmt, &StagingSpec { name: queue.clone(), batch_size: 1 }, false).await?;
    Ok(done)
}

/// The operator may see the cluster and move messages on it, and no run owns the queue.
async fn authorise(pool: &PgPool, request: &ReturnRequest) -> Result<(), OrphanError> {
    if !permissions::can_see(pool, &request.operator, &request.cluster).await? {
        // Exactly what an unregistered cluster answers.
        return Err(RegistryError::NotFound(format!("no cluster named {} is registered", request.cluster)).into());
    }
    permissions::require(pool, &request.operator, &request.cluster, Permission::MessageMove).await?;
    if let Some(run) = owner(pool, &request.queue).await? {
        return Err(OrphanError::Owned { queue: request.queue.clone(), run });
    }
    Ok(())
}

/// The orphan exists on the node and nothing consumes from it.
async fn check_unused(mgmt: &BrokerManagement, queue: &str, label: &str) -> Result<(), OrphanError> {
    match staging::depth(mgmt, queue).await {
        Ok(_) => {}
        Err(StagingError::Missing { .. }) => {
            return Err(OrphanError::Missing { node: label.to_string(), queue: queue.to_string() })
        }
        Err(e) => return Err(e.into()),
    }
    let mbean = staging::staging_mbean(mgmt, queue);
    let consumers = mgmt.client().request(&Request::read(mbean, &["ConsumerCount"])).await?;
    match consumers.as_i64().or_else(|| consumers["ConsumerCount"].as_i64()) {
        Some(0) => Ok(()),
        Some(n) => Err(OrphanError::InUse { queue: queue.to_string(), consumers: n }),
        None => Err(JolokiaError::BadAnswer {
            node: label.to_string(),
            reason: format!("ConsumerCount of {queue} is {consumers}, not a count"),
        }
        .into()),
    }
}

/// Where an orphan's messages may go: an existing queue of its node that is neither the orphan nor a staging or
/// dead message queue.
struct Destinations<'a> {
    orphan: &'a str,
    label: &'a str,
    on_node: HashSet<String>,
}

impl Destinations<'_> {
    fn check(&self, q: &str, returned_so_far: u64) -> Result<(), OrphanError> {
        let why = if q == self.orphan {
            "it is the orphan itself".to_string()
        } else if q.starts_with(STAGING_PREFIX) || q.starts_with(DMQ_PREFIX) {
            "staging and dead message queues are never a destination".to_string()
        } else if !self.on_node.contains(q) {
            format!("node {} has no such queue (create it, then return again)", self.label)
        } else {
            return Ok(());
        };
        Err(OrphanError::BadDestination {
            staging: self.orphan.to_string(),
            queue: q.to_string(),
            why,
            returned_so_far,
        })
    }
}

/// Moves the orphan's messages to their original queues (those without one to `request.to`), in rounds until a
/// listing is empty or a round moves nothing; every destination of a round is checked before it moves anything.
async fn return_in_rounds(
    conn: &artemis_core::Connection,
    mgmt: &BrokerManagement,
    request: &ReturnRequest,
    destinations: &Destinations<'_>,
) -> Result<Returned, OrphanError> {
    let queue = &request.queue;
    let mbean = staging::staging_mbean(mgmt, queue);
    let mut done = Returned { queue: queue.clone(), ..Returned::default() };
    for _ in 0..MAX_ROUNDS {
        let listed = staging::list_over_core(conn, queue).await?;
        if listed.is_empty() {
            break;
        }
        let (groups, without) = group_by_original(&listed);
        if without > 0 && request.to.is_none() {
            return Err(OrphanError::NoOriginalQueue {
                queue: queue.clone(),
                count: without,
                returned_so_far: done.total(),
            });
        }
        for original in &groups {
            destinations.check(original, done.total())?;
        }
        let before = done.total();
        for original in &groups {
            let filter = format!("{ORIGINAL_QUEUE} = {}", quote_literal(original));
            let moved = move_all(mgmt, &mbean, &filter, original).await?;
            *done.to_original.entry(original.clone()).or_default() += moved;
        }
        if let (true, Some(to)) = (without > 0, &request.to) {
            done.to_named += move_all(mgmt, &mbean, &format!("{ORIGINAL_QUEUE} IS NULL"), to).await?;
        }
        if done.total() == before {
            // Listed but not moved (taken by a consumer meanwhile): the depth check after says what is left.
            break;
        }
    }
    Ok(done)
}

/// The original queues named by `listed` messages, and how many name none.
fn group_by_original(listed: &[staging::Listed]) -> (BTreeSet<String>, u64) {
    let mut groups = BTreeSet::new();
    let mut without = 0u64;
    for m in listed {
        match &m.original_queue {
            Some(q) => {
                groups.insert(q.clone());
            }
            None => without += 1,
        }
    }
    (groups, without)
}

/// A selector string literal: single quotes, an embedded quote doubled.
fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The broker's move of every message of staging matching `filter` to `queue`, without a count.
async fn move_all(
    mgmt: &BrokerManagement,
    staging: &crate::broker::jolokia::ObjectName,
    filter: &str,
    queue: &str,
) -> Result<u64, OrphanError> {
    Ok(mgmt.move_messages(staging, 500, Some(filter), queue, false, -1).await?.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_group_by_their_original_queue() {
        let m = |id: i64, queue: Option<&str>| staging::Listed {
            id,
            original_id: None,
            original_queue: queue.map(str::to_string),
        };
        let listed = vec![m(1, Some("a")), m(2, Some("b")), m(3, Some("a")), m(4, None), m(5, None)];
        let (groups, without) = group_by_original(&listed);
        assert_eq!(groups.into_iter().collect::<Vec<_>>(), vec!["a".to_string(), "b".to_string()]);
        assert_eq!(without, 2);
    }

    #[test]
    fn literals_double_their_quotes() {
        assert_eq!(quote_literal("orders"), "'orders'");
        assert_eq!(quote_literal("o'brien"), "'o''brien'");
    }

    #[test]
    fn refusals_and_failures_are_told_apart() {
        assert!(OrphanError::NotStaging("x".into()).is_refusal());
        assert!(OrphanError::NoOriginalQueue { queue: "q".into(), count: 1, returned_so_far: 0 }.is_refusal());
        assert!(!OrphanError::Management(JolokiaError::Timeout { node: "n".into(), after: Duration::from_secs(1) })
            .is_refusal());
        let words = OrphanError::NoOriginalQueue { queue: "q".into(), count: 3, returned_so_far: 0 }.to_string();
        assert!(words.contains("--to") && words.contains("nothing was moved"), "{words}");
    }
}
