//! `artemis-transfer cluster add|list|remove`: the cluster registry from the command line.
//!
//! `add` learns a cluster's nodes from one seed node (its topology names every member by NodeID, so a primary
//! and its backup become one node), checks each member's Jolokia answers as that node, and stores them.
//! Credentials are named, never given: the processes read them from their environment.
//!
//! `add` and `remove` change the deployment, so they are admin commands (docs/permissions.md): they need `admin` on the cluster
//! they name or on `*` — or nobody holding `admin` on `*` yet, the bootstrap of a fresh database, as for
//! `grant add`. The grant is checked before any broker is asked. Each attempt is audited (`cluster.add`,
//! `cluster.remove`: who, the cluster, the outcome), a refusal too.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use clap::Subcommand;
use serde_json::json;
use sqlx::PgPool;

use crate::cli::grant::authorise_admin_on;
use crate::cli::{CliError, Exit};
use crate::registry::discover::{conventional_jolokia_url_over, discover, Seed, SEED};
use crate::registry::{store, Cluster, Credentials, EndpointRole, RegistryError};
use crate::transfer::audit::{audit_entry, AuditEntry};

/// How long one management call of discovery may take.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// `cluster` options.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    /// The action.
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// Registry actions.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Register a cluster: discover its nodes from one seed node and store them.
    ///
    /// Every member's Jolokia URL is derived from its Core port by the `artemis create` convention
    /// (HTTP port = Core port − 61616 + 8161) unless given with --member-jolokia, and is always checked by
    /// reading that endpoint's NodeID. The broker user and password are read from the environment variables
    /// ARTEMIS_TRANSFER_CREDENTIALS__<REF>__USER and ARTEMIS_TRANSFER_CREDENTIALS__<REF>__PASSWORD, here and
    /// in every process that later reaches the cluster; they are never stored, and are sent only to hosts named
    /// here (the seed's, --member-jolokia's): a member on another host is refused until it is named.
    ///
    /// TLS: give the Core URL as for Artemis' own client, e.g.
    /// tcp://b1:61617?sslEnabled=true&trustStorePath=/etc/ca.pem&keyStorePath=/etc/client.pem (PEM paths; the
    /// key store is the client key and its chain in one file; verifyHost=false only by explicit choice). Jolokia
    /// is then reached over HTTPS with the same material, every member's Core URL carries the same parameters and
    /// is checked to answer TLS: discovery never falls back to plain.
    Add {
        /// The cluster's name in the registry (used in `--from cluster/node/queue`).
        name: String,
        /// The seed node's Core URL, e.g. tcp://broker-1:61616 (the broker's Core acceptor; its web console's
        /// address is --jolokia-url), or with TLS parameters (see above).
        #[arg(long, value_parser = parse_core_url)]
        core_url: String,
        /// The seed node's Jolokia URL (default: derived from --core-url by the port convention).
        #[arg(long)]
        jolokia_url: Option<String>,
        /// The credentials' reference <REF> (see above).
        #[arg(long = "credentials")]
        credentials_ref: String,
        /// A member's Jolokia URL, for members off the port convention: `HOST:PORT=URL`, where HOST:PORT is
        /// the member's Core address as the cluster topology names it. Repeatable.
        #[arg(long = "member-jolokia", value_name = "HOST:PORT=URL", value_parser = parse_member)]
        member_jolokia: Vec<(String, String)>,
    },
    /// List the registered clusters the operator may see, with their nodes and endpoints; with --from, the
    /// clusters a transfer from that cluster could go to, each enabled or disabled with the reason.
    List {
        /// Print JSON lines instead of text: one cluster a line (with --from, one target a line).
        #[arg(long)]
        json: bool,
        /// List the targets of a transfer from this cluster.
        #[arg(long, value_name = "SOURCE_CLUSTER")]
        from: Option<String>,
    },
    /// Remove a cluster with its nodes (previews and runs that name it keep their records).
    Remove {
        /// The cluster's name.
        name: String,
    },
}

/// Runs a registry action and prints its result.
pub async fn run(pool: &PgPool, args: ClusterArgs, operator: &str) -> Result<Exit, CliError> {
    let mut out = super::terminal::stdout();
    match args.command {
        ClusterCommand::Add { name, core_url, jolokia_url, credentials_ref, member_jolokia } => {
            let target = format!("cluster:{name}");
            let asked = json!({ "core_url": core_url, "credentials_ref": credentials_ref });
            let bootstrap = authorise_admin_on(pool, operator, &name, "cluster.add", target, asked.clone()).await?;
            let added = async {
                let credentials = Credentials::from_env(&credentials_ref)?;
                let derived = jolokia_url.is_none();
                let seed = seed(&core_url, jolokia_url, member_jolokia)?;
                let nodes = discover(&seed, &credentials, DISCOVERY_TIMEOUT)
                    .await
                    .map_err(|e| seed_unanswered(e, &seed.jolokia_url, derived))?;
                let cluster = Cluster { name: name.clone(), credentials_ref: credentials_ref.clone(), nodes };
                store::add(pool, &cluster).await?;
                Ok::<_, RegistryError>((seed, cluster))
            }
            .await;
            let mut detail = asked;
            detail["bootstrap"] = json!(bootstrap);
            if let Ok((seed, cluster)) = &added {
                detail["seed_jolokia_url"] = json!(seed.jolokia_url);
                detail["nodes"] = json!(cluster.nodes.iter().map(|n| &n.name).collect::<Vec<_>>());
            }
            let (seed, cluster) = audited(pool, operator, "cluster.add", &name, detail, added).await?;
            writeln!(
                out,
                "Registered cluster {} with {} node(s), learnt from {} (credentials `{}`, read from the environment):",
                cluster.name,
                cluster.nodes.len(),
                seed.jolokia_url,
                cluster.credentials_ref
            )
            .map_err(CliError::Output)?;
            print_nodes(&mut out, &cluster).map_err(CliError::Output)?;
        }
        ClusterCommand::List { json, from: Some(source) } => {
            let targets = crate::transfer::service::targets_for(pool, operator, &source).await?;
            if json {
                super::terminal::json_lines(&mut out, &targets).map_err(CliError::Output)?;
            } else {
                for t in &targets {
                    match &t.reason {
                        None => writeln!(out, "{}  enabled", t.cluster),
                        Some(why) => writeln!(out, "{}  disabled: {why}", t.cluster),
                    }
                    .map_err(CliError::Output)?;
                }
            }
        }
        ClusterCommand::List { json, from: None } => {
            let mut clusters = store::list(pool).await?;
            let mut visible = Vec::with_capacity(clusters.len());
            for cluster in clusters.drain(..) {
                if crate::transfer::permissions::can_see(pool, operator, &cluster.name).await.map_err(CliError::Db)? {
                    visible.push(cluster);
                }
            }
            let clusters = visible;
            if json {
                super::terminal::json_lines(&mut out, &clusters).map_err(CliError::Output)?;
            } else if clusters.is_empty() {
                writeln!(out, "No cluster is registered. Add one with `artemis-transfer cluster add`.")
                    .map_err(CliError::Output)?;
            } else {
                for cluster in &clusters {
                    writeln!(
                        out,
                        "{}  ({} node(s), credentials `{}`)",
                        cluster.name,
                        cluster.nodes.len(),
                        cluster.credentials_ref
                    )
                    .map_err(CliError::Output)?;
                    print_nodes(&mut out, cluster).map_err(CliError::Output)?;
                }
            }
        }
        ClusterCommand::Remove { name } => {
            let target = format!("cluster:{name}");
            let bootstrap = authorise_admin_on(pool, operator, &name, "cluster.remove", target, json!({})).await?;
            let removed = match store::remove(pool, &name).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(RegistryError::NotFound(format!("no cluster named {name} is registered"))),
                Err(e) => Err(e),
            };
            audited(pool, operator, "cluster.remove", &name, json!({ "bootstrap": bootstrap }), removed).await?;
            writeln!(out, "Removed cluster {name} and its nodes.").map_err(CliError::Output)?;
        }
    }
    Ok(Exit::Success)
}

/// Writes the audit row of a registry change on `cluster` by `actor` and passes its result on. The registry saying
/// no (already registered, not registered) is `refused`; anything else that failed is `error`, with its words.
async fn audited<T>(
    pool: &PgPool,
    actor: &str,
    action: &str,
    cluster: &str,
    mut detail: serde_json::Value,
    result: Result<T, RegistryError>,
) -> Result<T, CliError> {
    let outcome = match &result {
        Ok(_) => "ok",
        Err(RegistryError::Conflict(_) | RegistryError::NotFound(_)) => "refused",
        Err(_) => "error",
    };
    if let Err(e) = &result {
        detail["error"] = json!(crate::cli::error_chain(e));
    }
    let entry = AuditEntry {
        actor,
        action,
        target: format!("cluster:{cluster}"),
        outcome,
        detail,
        source_cluster: Some(cluster),
        target_cluster: None,
    };
    match (result, audit_entry(pool, &entry).await) {
        (Ok(done), Ok(_)) => Ok(done),
        // A change of the registry that cannot be audited must not look fine.
        (Ok(_), Err(e)) => Err(CliError::Db(e)),
        (Err(e), written) => {
            if let Err(audit_error) = written {
                tracing::error!(error = %audit_error, action, cluster, "could not audit a failed registry change");
            }
            Err(e.into())
        }
    }
}

/// The seed: its Jolokia URL (given, or by the convention), its Core URL, and the members' URLs. A Jolokia URL
/// given for the seed also applies to the member whose Core address is the seed's.
/// A Core URL as `cluster add` takes it: anything but an HTTP one, which is the web console's (Jolokia), not the
/// broker's Core acceptor — registering it would fail later, at the first relay, with words about the protocol.
pub fn parse_core_url(url: &str) -> Result<String, String> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme.to_ascii_lowercase());
    if matches!(scheme.as_deref(), Some("http" | "https")) {
        return Err(format!(
            "{url} is a web address (the web console's, or Jolokia's): the Core URL is the broker's Core acceptor, \
             e.g. tcp://broker-1:61616; give the Jolokia URL with --jolokia-url"
        ));
    }
    Ok(url.to_owned())
}

fn seed(core_url: &str, jolokia_url: Option<String>, members: Vec<(String, String)>) -> Result<Seed, RegistryError> {
    let core = crate::registry::discover::core_host_port(core_url);
    let mut jolokia_by_core: BTreeMap<String, String> = members.into_iter().collect();
    let jolokia_url = match jolokia_url {
        Some(url) => {
            jolokia_by_core.entry(core.clone()).or_insert_with(|| url.clone());
            url
        }
        // A TLS seed's web server is reached over HTTPS: never derive http:// for it.
        None => conventional_jolokia_url_over(&core, crate::registry::tls::of_core_url(core_url)?.is_some())
            .ok_or_else(|| {
                RegistryError::Discovery(format!(
                    "cannot derive a Jolokia URL from the Core URL {core_url}: give it with --jolokia-url"
                ))
            })?,
    };
    Ok(Seed { jolokia_url, core_url: Some(core_url.to_string()), jolokia_by_core })
}

/// Discovery's failure when the seed's management endpoint did not answer, in words that name the URL tried and,
/// when that URL was derived from the Core URL, the flag that gives the right one; any other failure as it was.
fn seed_unanswered(e: RegistryError, url: &str, derived: bool) -> RegistryError {
    use crate::broker::jolokia::JolokiaError;
    let why = match &e {
        RegistryError::Jolokia(JolokiaError::Unreachable { node, reason }) if node == SEED => reason.clone(),
        RegistryError::Jolokia(JolokiaError::Timeout { node, after }) if node == SEED => {
            format!("no answer within {after:?}")
        }
        _ => return e,
    };
    let next = if derived {
        "That URL was derived from --core-url by the port convention (HTTP port = Core port − 61616 + 8161): if the \
         broker's web console listens elsewhere, give its Jolokia URL with --jolokia-url"
    } else {
        "Check that the broker runs and that its web console serves Jolokia at that URL (--jolokia-url)"
    };
    RegistryError::Discovery(format!("the seed's management endpoint {url} did not answer ({why}). {next}"))
}

fn parse_member(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((core, url)) if core.contains(':') && !url.is_empty() => Ok((core.to_string(), url.to_string())),
        _ => Err(format!("{s:?} is not HOST:PORT=URL (a member's Core address, `=`, its Jolokia URL)")),
    }
}

fn print_nodes(out: &mut impl Write, cluster: &Cluster) -> std::io::Result<()> {
    for node in &cluster.nodes {
        writeln!(out, "  node {}  (NodeID {})", node.name, node.node_id)?;
        for e in &node.endpoints {
            let role = match e.role {
                EndpointRole::Primary => "primary",
                EndpointRole::Backup => "backup ",
            };
            writeln!(out, "    {role}  broker {:<16}  {}  {}", e.broker_name, e.core_url, e.jolokia_url)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_url_applies_to_the_seed_member() {
        let s = seed("tcp://h:62616", Some("http://proxy:1/console/jolokia".into()), vec![]).unwrap();
        assert_eq!(s.jolokia_url, "http://proxy:1/console/jolokia");
        assert_eq!(s.jolokia_by_core.get("h:62616").map(String::as_str), Some("http://proxy:1/console/jolokia"));
        assert_eq!(s.core_url.as_deref(), Some("tcp://h:62616"));

        let s = seed("tcp://h:62616?ssl=false", None, vec![("h:62716".into(), "http://x/j".into())]).unwrap();
        assert_eq!(s.jolokia_url, "http://h:9161/console/jolokia");
        assert_eq!(s.jolokia_by_core.len(), 1, "a derived seed URL needs no entry: the convention gives it again");
        assert!(seed("tcp://h:80", None, vec![]).is_err());
    }

    #[test]
    fn member_urls_parse() {
        assert_eq!(parse_member("h:1=http://h:2/j"), Ok(("h:1".into(), "http://h:2/j".into())));
        assert!(parse_member("h=http://x").is_err());
        assert!(parse_member("h:1=").is_err());
    }
}
