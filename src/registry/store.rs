//! The registry's store: add, list, get and remove clusters with their nodes and endpoints. Its SQL is in
//! `src/registry/sql/`, one statement a file, each read by one function at the end of this module.

use sqlx::{PgExecutor, PgPool};

use super::RegistryError;

/// What an endpoint was registered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndpointRole {
    /// A primary (live unless it failed over).
    Primary,
    /// A backup (passive until its primary fails).
    Backup,
}

impl EndpointRole {
    fn as_str(self) -> &'static str {
        match self {
            EndpointRole::Primary => "primary",
            EndpointRole::Backup => "backup",
        }
    }

    fn parse(s: &str) -> EndpointRole {
        if s == "backup" {
            EndpointRole::Backup
        } else {
            EndpointRole::Primary
        }
    }
}

/// One way to reach a node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct NodeEndpoint {
    /// `tcp://host:port` of its Core acceptor.
    pub core_url: String,
    /// `http://host:port/console/jolokia`.
    pub jolokia_url: String,
    /// Primary or backup, as registered.
    pub role: EndpointRole,
    /// The broker `<name>` behind this endpoint.
    pub broker_name: String,
}

/// A logical node: a primary and its backups, one NodeID.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct ClusterNode {
    /// Its name in the cluster (the primary's broker name, unless given).
    pub name: String,
    /// The broker's NodeID.
    pub node_id: String,
    /// The primary's broker name.
    pub broker_name: String,
    /// How to reach it; primaries first.
    pub endpoints: Vec<NodeEndpoint>,
}

/// A registered cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Cluster {
    /// Its name.
    pub name: String,
    /// Which credentials to read from the environment.
    pub credentials_ref: String,
    /// Its nodes.
    pub nodes: Vec<ClusterNode>,
}

impl Cluster {
    /// The node called `name`.
    pub fn node(&self, name: &str) -> Result<&ClusterNode, RegistryError> {
        self.nodes.iter().find(|n| n.name == name).ok_or_else(|| {
            RegistryError::NotFound(format!(
                "cluster {} has no node {name}; its nodes are {}",
                self.name,
                self.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

/// Registers a cluster with its nodes, in one transaction.
pub async fn add(pool: &PgPool, cluster: &Cluster) -> Result<(), RegistryError> {
    let mut tx = pool.begin().await?;
    if !cluster_insert(&mut *tx, &cluster.name, &cluster.credentials_ref).await? {
        return Err(RegistryError::Conflict(format!(
            "a cluster named {} is already registered; remove it first to register it again",
            cluster.name
        )));
    }
    for node in &cluster.nodes {
        node_insert(&mut *tx, &cluster.name, node).await?;
        for endpoint in &node.endpoints {
            endpoint_insert(&mut *tx, &cluster.name, &node.name, endpoint).await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Every registered cluster, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<Cluster>, RegistryError> {
    let clusters = cluster_list(pool).await?;
    let nodes = node_list(pool).await?;
    let endpoints = endpoint_list(pool).await?;
    Ok(clusters.into_iter().map(|c| assemble(c, &nodes, &endpoints)).collect())
}

/// A cluster with its nodes, each with its endpoints (in the order the lists hold them).
fn assemble(cluster: ClusterRow, nodes: &[NodeRow], endpoints: &[EndpointRow]) -> Cluster {
    let nodes = nodes
        .iter()
        .filter(|n| n.cluster == cluster.name)
        .map(|n| ClusterNode {
            endpoints: endpoints
                .iter()
                .filter(|e| e.cluster == cluster.name && e.node == n.name)
                .map(|e| NodeEndpoint {
                    core_url: e.core_url.clone(),
                    jolokia_url: e.jolokia_url.clone(),
                    role: EndpointRole::parse(&e.role),
                    broker_name: e.broker_name.clone(),
                })
                .collect(),
            name: n.name.clone(),
            node_id: n.node_id.clone(),
            broker_name: n.broker_name.clone(),
        })
        .collect();
    Cluster { name: cluster.name, credentials_ref: cluster.credentials_ref, nodes }
}

/// The cluster called `name`.
pub async fn get(pool: &PgPool, name: &str) -> Result<Cluster, RegistryError> {
    list(pool)
        .await?
        .into_iter()
        .find(|c| c.name == name)
        .ok_or_else(|| RegistryError::NotFound(format!("no cluster named {name} is registered")))
}

/// Removes a cluster with its nodes and endpoints. Returns false when there was none.
pub async fn remove(pool: &PgPool, name: &str) -> Result<bool, RegistryError> {
    Ok(cluster_delete(pool, name).await?)
}

// The statements, one per file of `src/registry/sql/` (the file and the function share a name). They return the
// driver's error; [`RegistryError::Db`] wraps it.

/// A row of `cluster_list.sql`.
#[derive(sqlx::FromRow)]
struct ClusterRow {
    name: String,
    credentials_ref: String,
}

/// A row of `node_list.sql`.
#[derive(sqlx::FromRow)]
struct NodeRow {
    cluster: String,
    name: String,
    node_id: String,
    broker_name: String,
}

/// A row of `endpoint_list.sql`.
#[derive(sqlx::FromRow)]
struct EndpointRow {
    cluster: String,
    node: String,
    core_url: String,
    jolokia_url: String,
    role: String,
    broker_name: String,
}

/// `cluster_insert.sql`: false when a cluster of that name exists.
async fn cluster_insert(db: impl PgExecutor<'_>, name: &str, credentials_ref: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(include_str!("sql/cluster_insert.sql")).bind(name).bind(credentials_ref).execute(db).await?;
    Ok(done.rows_affected() == 1)
}

/// `node_insert.sql`: `node` of `cluster` (not its endpoints).
async fn node_insert(db: impl PgExecutor<'_>, cluster: &str, node: &ClusterNode) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/node_insert.sql"))
        .bind(cluster)
        .bind(&node.name)
        .bind(&node.node_id)
        .bind(&node.broker_name)
        .execute(db)
        .await?;
    Ok(())
}

/// `endpoint_insert.sql`: `endpoint` of node `node` of `cluster`.
async fn endpoint_insert(
    db: impl PgExecutor<'_>,
    cluster: &str,
    node: &str,
    endpoint: &NodeEndpoint,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/endpoint_insert.sql"))
        .bind(cluster)
        .bind(node)
        .bind(&endpoint.core_url)
        .bind(&endpoint.jolokia_url)
        .bind(endpoint.role.as_str())
        .bind(&endpoint.broker_name)
        .execute(db)
        .await?;
    Ok(())
}

/// `cluster_list.sql`.
async fn cluster_list(db: impl PgExecutor<'_>) -> Result<Vec<ClusterRow>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/cluster_list.sql")).fetch_all(db).await
}

/// `node_list.sql`.
async fn node_list(db: impl PgExecutor<'_>) -> Result<Vec<NodeRow>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/node_list.sql")).fetch_all(db).await
}

/// `endpoint_list.sql`.
async fn endpoint_list(db: impl PgExecutor<'_>) -> Result<Vec<EndpointRow>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/endpoint_list.sql")).fetch_all(db).await
}

/// `cluster_delete.sql`: false when there was no such cluster.
async fn cluster_delete(db: impl PgExecutor<'_>, name: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(include_str!("sql/cluster_delete.sql")).bind(name).execute(db).await?;
    Ok(done.rows_affected() > 0)
}
