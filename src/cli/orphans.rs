//! `artemis-transfer orphans list|return`: staging queues no run owns (docs/guarantees.md), listed on every node of every
//! registered cluster, and returned message by message to the queues they came from. The work and the audit are in
//! [`crate::transfer::orphans`]; this module parses and prints.

use std::io::Write;
use std::sync::Arc;

use clap::Subcommand;
use sqlx::PgPool;

use super::{CliError, Exit};
use crate::broker::permits::PermitSource;
use crate::limiter::PgPermits;
use crate::transfer::orphans::{self, ReturnRequest};

/// `orphans` options.
#[derive(Debug, clap::Args)]
pub struct OrphansArgs {
    /// The action.
    #[command(subcommand)]
    pub command: OrphansCommand,
}

/// Orphan actions.
#[derive(Debug, Subcommand)]
pub enum OrphansCommand {
    /// List every `studio.transfer.<uuid>` queue that no run owns, with its message count, on every node of every
    /// registered cluster the operator may read (cluster:read; the dead message queues are never listed).
    List {
        /// Print JSON lines instead of text: one object per orphan, and one `{"unchecked": {…}}` per node that
        /// could not be checked.
        #[arg(long)]
        json: bool,
    },
    /// Return one orphan: each message back to its original queue (`_AMQ_ORIG_QUEUE`), those without one to the
    /// queue given by --to; then remove the empty staging queue and its address settings.
    Return {
        /// The orphan as `cluster/node/studio.transfer.<uuid>`.
        #[arg(value_name = "CLUSTER/NODE/QUEUE", value_parser = parse_orphan)]
        orphan: OrphanName,
        /// A queue on the same node for messages that carry no original queue.
        #[arg(long)]
        to: Option<String>,
        /// The staging queue's name, typed to confirm (the command says first what a return does).
        #[arg(long)]
        confirm: Option<String>,
    },
}

pub use crate::transfer::orphans::RETURN_WARNING;

/// Runs `orphans …`.
pub async fn run(pool: &PgPool, args: OrphansArgs, operator: &str) -> Result<Exit, CliError> {
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(pool.clone()));
    match args.command {
        OrphansCommand::List { json } => {
            let found = orphans::list(pool, Some(permits), operator).await?;
            let mut out = super::terminal::stdout();
            if json {
                let unchecked = found.unchecked.iter().map(|u| serde_json::json!({ "unchecked": u }));
                let lines = found.orphans.iter().map(|o| serde_json::json!(o)).chain(unchecked);
                super::terminal::json_lines(&mut out, lines).map_err(CliError::Output)?;
            } else {
                if found.orphans.is_empty() {
                    writeln!(out, "{}", none_found(found.answered, &found.unchecked)).map_err(CliError::Output)?;
                }
                for o in &found.orphans {
                    writeln!(out, "{}  {} messages", o.display(), o.messages).map_err(CliError::Output)?;
                }
                for u in &found.unchecked {
                    writeln!(out, "{}/{}: could not be checked: {}", u.cluster, u.node, u.why)
                        .map_err(CliError::Output)?;
                }
            }
            Ok(if found.unchecked.is_empty() { Exit::Success } else { Exit::NotAsHoped })
        }
        OrphansCommand::Return { orphan, to, confirm } => {
            let OrphanName { cluster, node, queue } = orphan;
            let orphan = format!("{cluster}/{node}/{queue}");
            if confirm.as_deref() != Some(queue.as_str()) {
                eprintln!("{RETURN_WARNING}");
                return Err(CliError::Refused(format!(
                    "to return {orphan}, type the staging queue's name: --confirm {queue}"
                )));
            }
            let request = ReturnRequest { cluster, node, queue, to, operator: operator.to_owned() };
            match orphans::return_orphan(pool, Some(permits), &request).await {
                Ok(done) => {
                    let mut out = super::terminal::stdout();
                    writeln!(out, "returned {} messages from {orphan}; the staging queue is removed", done.total())
                        .map_err(CliError::Output)?;
                    for (q, n) in &done.to_original {
                        writeln!(out, "  {n} to {q}").map_err(CliError::Output)?;
                    }
                    if done.to_named > 0 {
                        let named = request.to.as_deref().unwrap_or("?");
                        writeln!(out, "  {} without an original queue to {named}", done.to_named)
                            .map_err(CliError::Output)?;
                    }
                    Ok(Exit::Success)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

/// An orphan as `orphans return` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanName {
    /// The registered cluster.
    pub cluster: String,
    /// Its node.
    pub node: String,
    /// The staging queue (it may itself contain `/`).
    pub queue: String,
}

/// `cluster/node/queue` → its parts, else what the shape is (a malformed command line).
fn parse_orphan(s: &str) -> Result<OrphanName, String> {
    let parts = s.split_once('/').and_then(|(cluster, rest)| Some((cluster, rest.split_once('/')?)));
    match parts {
        Some((cluster, (node, queue))) if !cluster.is_empty() && !node.is_empty() && !queue.is_empty() => {
            Ok(OrphanName { cluster: cluster.into(), node: node.into(), queue: queue.into() })
        }
        _ => Err(format!("name the orphan as cluster/node/studio.transfer.<uuid>, not {s:?}")),
    }
}

/// The words of a listing that found no orphan, when `answered` nodes answered and `unchecked` could not be asked:
/// "none" only when every node answered; when none did, that nobody answered, naming them; otherwise what is unknown
/// stays unknown.
fn none_found(answered: usize, unchecked: &[orphans::Unchecked]) -> String {
    match (answered, unchecked.len()) {
        (_, 0) => "no orphans".into(),
        (0, n) => {
            let named: Vec<String> = unchecked.iter().map(|u| format!("{}/{}", u.cluster, u.node)).collect();
            format!(
                "no node answered ({n}: {}), so whether any holds orphans is unknown; why each did not is below",
                named.join(", ")
            )
        }
        (_, n) => format!(
            "no orphans on the nodes that answered; {n} node(s) could not be checked (below), so whether they hold \
             orphans is unknown"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orphans_are_named_cluster_node_queue() {
        let name = |c: &str, n: &str, q: &str| OrphanName { cluster: c.into(), node: n.into(), queue: q.into() };
        assert_eq!(parse_orphan("east/east-1/studio.transfer.x"), Ok(name("east", "east-1", "studio.transfer.x")));
        assert!(parse_orphan("east/east-1").unwrap_err().contains("cluster/node/studio.transfer.<uuid>"));
        assert!(parse_orphan("/east-1/q").is_err());
        assert_eq!(parse_orphan("east/n/a/b"), Ok(name("east", "n", "a/b")));
    }

    #[test]
    fn an_empty_listing_says_none_only_when_every_node_answered() {
        let down = |node: &str| orphans::Unchecked { cluster: "east".into(), node: node.into(), why: "down".into() };
        assert_eq!(none_found(3, &[]), "no orphans");
        let words = none_found(1, &[down("east-1"), down("east-2")]);
        assert!(words.contains("2 node(s) could not be checked") && words.contains("unknown"), "{words}");
        let words = none_found(0, &[down("east-1"), down("east-2")]);
        assert!(words.starts_with("no node answered (2: east/east-1, east/east-2)"), "{words}");
        assert!(!words.contains("nodes that answered"), "{words}");
    }
}
