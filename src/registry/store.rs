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

/// Registers a cluster with its nodes, in one transaction. An endpoint whose URL carries credentials is refused:
/// the registry's URLs are stored as given and shown to whoever may see the cluster, and credentials live in the
/// environment alone (`ARTEMIS_TRANSFER_CREDENTIALS__<REF>__USER` / `__PASSWORD`).
pub async fn add(pool: &PgPool, cluster: &Cluster) -> Result<(), RegistryError> {
    refuse_credentials_in_urls(cluster)?;
    let mut tx = pool.begin().await?;
    if !cluster_insert(&mut *tx, &cluster.name, &cluster.credentials_ref).await? {
        return Err(RegistryError::Conflict(format!(
            "a cluster named {} is already registered; remove it first to register it again",
            cluster.name
        )));
    }
    registry_lock(&mut *tx).await?;
    let node_ids: Vec<String> = cluster.nodes.iter().map(|n| n.node_id.clone()).collect();
    if let Some((holder, holding, node_id)) = node_holder(&mut *tx, &node_ids).await? {
        let node = cluster.nodes.iter().find(|n| n.node_id == node_id).map_or("?", |n| n.name.as_str());
        return Err(RegistryError::Conflict(format!(
            "the brokers of node {node} (NodeID {node_id}) are already registered as node {holding} of cluster \
             {holder}: a broker belongs to one cluster. Use {holder}, or remove it first (artemis-transfer cluster \
             remove {holder})"
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

/// [`RegistryError::CredentialsInUrl`] for the first endpoint URL of `cluster` that carries credentials; the words
/// name the node and which URL, never the URL (it holds a secret).
fn refuse_credentials_in_urls(cluster: &Cluster) -> Result<(), RegistryError> {
    for node in &cluster.nodes {
        for endpoint in &node.endpoints {
            for (which, url) in [("Core", &endpoint.core_url), ("Jolokia", &endpoint.jolokia_url)] {
                if let Some(what) = credentials_in(url) {
                    let var = |what| super::credentials::var_name(&cluster.credentials_ref, what);
                    return Err(RegistryError::CredentialsInUrl(format!(
                        "the {which} URL of node {} of cluster {} carries {what}: a registered URL is stored and \
                         shown as given, so credentials go in the environment alone ({} and {}; an encrypted \
                         client key's passphrase in {}); give the URL without them",
                        node.name,
                        cluster.name,
                        var("USER"),
                        var("PASSWORD"),
                        var("KEY_PASSPHRASE"),
                    )));
                }
            }
        }
    }
    Ok(())
}

/// What credentials `url` carries, in words: a user (and password) before the host, or a query parameter that
/// names a user, a password, a secret or a token (Core URLs take `?user=…&password=…`). `None`: none.
pub fn credentials_in(url: &str) -> Option<&'static str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if rest[..authority_end].contains('@') {
        return Some("a user name or password before its host (user:password@)");
    }
    let query = rest.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or(q))?;
    let secret_key = |key: &str| {
        let key = key.to_ascii_lowercase();
        ["password", "passwd", "secret", "token"].iter().any(|s| key.contains(s))
            || ["user", "username", "pass", "pwd"].contains(&key.as_str())
    };
    query
        .split(['&', ';'])
        .filter_map(|pair| pair.split('=').next())
        .any(secret_key)
        .then_some("a user name, password, secret or token among its parameters")
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

/// `registry_lock.sql`: no other registration checks or writes nodes until this transaction ends.
async fn registry_lock(db: impl PgExecutor<'_>) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/registry_lock.sql")).execute(db).await?;
    Ok(())
}

/// `node_holder.sql`: (cluster, node, NodeID) of a registered node that has one of `node_ids`.
async fn node_holder(
    db: impl PgExecutor<'_>,
    node_ids: &[String],
) -> Result<Option<(String, String, String)>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/node_holder.sql")).bind(node_ids).fetch_optional(db).await
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster_with(core_url: &str, jolokia_url: &str) -> Cluster {
        let endpoint = NodeEndpoint {
            core_url: core_url.into(),
            jolokia_url: jolokia_url.into(),
            role: EndpointRole::Primary,
            broker_name: "east-1".into(),
        };
        let node = ClusterNode {
            name: "east-1".into(),
            node_id: "id".into(),
            broker_name: "east-1".into(),
            endpoints: vec![endpoint],
        };
        Cluster { name: "east".into(), credentials_ref: "prod".into(), nodes: vec![node] }
    }

    #[test]
    fn credentials_in_a_url_are_found_wherever_they_are_put() {
        assert!(credentials_in("http://admin:s3cret@h:8161/console/jolokia").is_some());
        assert!(credentials_in("tcp://h:61616?user=admin&password=s3cret").is_some());
        assert!(credentials_in("tcp://h:61616?sslEnabled=true;trustStorePassword=x").is_some());
        assert!(credentials_in("http://h:8161/console/jolokia?token=abc").is_some());
        assert_eq!(credentials_in("tcp://h:61616?sslEnabled=true&reconnectAttempts=3"), None);
        assert_eq!(credentials_in("http://h:8161/console/jolokia"), None);
        assert_eq!(credentials_in("http://h:8161/console/jolokia/read/a@b"), None, "an @ in the path is not a user");
    }

    #[test]
    fn a_cluster_whose_url_carries_credentials_is_refused_in_words_without_them() {
        let refused =
            refuse_credentials_in_urls(&cluster_with("tcp://h:61616", "http://admin:s3cret@h:8161/console/jolokia"));
        let Err(RegistryError::CredentialsInUrl(words)) = refused else { panic!("not refused: {refused:?}") };
        assert!(!words.contains("s3cret") && !words.contains("admin:"), "{words}");
        assert!(
            words.contains("Jolokia URL of node east-1") && words.contains("ARTEMIS_TRANSFER_CREDENTIALS__PROD__USER")
        );
        assert!(refuse_credentials_in_urls(&cluster_with("tcp://h:61616", "http://h:8161/console/jolokia")).is_ok());
    }

    #[test]
    fn a_key_store_password_in_a_core_url_is_refused_with_where_the_passphrase_goes() {
        let core = "tcp://h:61617?sslEnabled=true&keyStorePath=/k.pem&keyStorePassword=hunter2";
        let refused = refuse_credentials_in_urls(&cluster_with(core, "https://h:8161/console/jolokia"));
        let Err(RegistryError::CredentialsInUrl(words)) = refused else { panic!("not refused: {refused:?}") };
        assert!(words.contains("ARTEMIS_TRANSFER_CREDENTIALS__PROD__KEY_PASSPHRASE") && !words.contains("hunter2"));
    }
}
