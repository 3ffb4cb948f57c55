//! The registry's rows in Postgres: add, list, get and remove clusters with their nodes and endpoints.

use sqlx::{PgPool, Row};

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
    let inserted = sqlx::query("INSERT INTO cluster (name, credentials_ref) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(&cluster.name)
        .bind(&cluster.credentials_ref)
        .execute(&mut *tx)
        .await?;
    if inserted.rows_affected() == 0 {
        return Err(RegistryError::Conflict(format!(
            "a cluster named {} is already registered; remove it first to register it again",
            cluster.name
        )));
    }
    for node in &cluster.nodes {
        sqlx::query("INSERT INTO cluster_node (cluster, name, node_id, broker_name) VALUES ($1, $2, $3, $4)")
            .bind(&cluster.name)
            .bind(&node.name)
            .bind(&node.node_id)
            .bind(&node.broker_name)
            .execute(&mut *tx)
            .await?;
        for e in &node.endpoints {
            sqlx::query(
                "INSERT INTO cluster_endpoint (cluster, node, core_url, jolokia_url, role, broker_name) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(&cluster.name)
            .bind(&node.name)
            .bind(&e.core_url)
            .bind(&e.jolokia_url)
            .bind(e.role.as_str())
            .bind(&e.broker_name)
            .execute(&mut *tx)
            .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Every registered cluster, by name.
pub async fn list(pool: &PgPool) -> Result<Vec<Cluster>, RegistryError> {
    let clusters = sqlx::query("SELECT name, credentials_ref FROM cluster ORDER BY name").fetch_all(pool).await?;
    let nodes = sqlx::query("SELECT cluster, name, node_id, broker_name FROM cluster_node ORDER BY cluster, name")
        .fetch_all(pool)
        .await?;
    let endpoints = sqlx::query(
        "SELECT cluster, node, core_url, jolokia_url, role, broker_name FROM cluster_endpoint \
         ORDER BY cluster, node, role DESC, core_url",
    )
    .fetch_all(pool)
    .await?;
    Ok(clusters
        .iter()
        .map(|c| {
            let name: String = c.get("name");
            let nodes = nodes
                .iter()
                .filter(|n| n.get::<String, _>("cluster") == name)
                .map(|n| {
                    let node_name: String = n.get("name");
                    ClusterNode {
                        endpoints: endpoints
                            .iter()
                            .filter(|e| {
                                e.get::<String, _>("cluster") == name && e.get::<String, _>("node") == node_name
                            })
                            .map(|e| NodeEndpoint {
                                core_url: e.get("core_url"),
                                jolokia_url: e.get("jolokia_url"),
                                role: EndpointRole::parse(e.get::<&str, _>("role")),
                                broker_name: e.get("broker_name"),
                            })
                            .collect(),
                        name: node_name,
                        node_id: n.get("node_id"),
                        broker_name: n.get("broker_name"),
                    }
                })
                .collect();
            Cluster { name, credentials_ref: c.get("credentials_ref"), nodes }
        })
        .collect())
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
    let done = sqlx::query("DELETE FROM cluster WHERE name = $1").bind(name).execute(pool).await?;
    Ok(done.rows_affected() > 0)
}
