//! `artemis-transfer orphans list|return`: staging queues no run owns (docs/guarantees.md), listed on every node of every
//! registered cluster, and returned message by message to the queues they came from. The work and the audit are in
//! [`crate::transfer::orphans`]; this module parses and prints.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Subcommand;
use sqlx::PgPool;

use super::{error_chain, CliError};
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
        /// Print JSON (`{"orphans": [...], "unchecked": [...]}`) instead of text.
        #[arg(long)]
        json: bool,
        /// Who lists (default: ARTEMIS_TRANSFER_OPERATOR, else $USER).
        #[arg(long = "as", visible_alias = "operator", env = "ARTEMIS_TRANSFER_OPERATOR")]
        operator: Option<String>,
    },
    /// Return one orphan: each message back to its original queue (`_AMQ_ORIG_QUEUE`), those without one to the
    /// queue given by --to; then remove the empty staging queue and its address settings.
    Return {
        /// The orphan as `cluster/node/studio.transfer.<uuid>`.
        orphan: String,
        /// A queue on the same node for messages that carry no original queue.
        #[arg(long)]
        to: Option<String>,
        /// The staging queue's name, typed to confirm (the command says first what a return does).
        #[arg(long)]
        confirm: Option<String>,
        /// Who does it: needs message:move on the orphan's cluster; audited (default: ARTEMIS_TRANSFER_OPERATOR,
        /// else $USER).
        #[arg(long = "as", visible_alias = "operator", env = "ARTEMIS_TRANSFER_OPERATOR")]
        operator: Option<String>,
    },
}

pub use crate::transfer::orphans::RETURN_WARNING;

/// Runs `orphans …`.
pub async fn run(pool: &PgPool, args: OrphansArgs) -> Result<ExitCode, CliError> {
    let permits: Arc<dyn PermitSource> = Arc::new(PgPermits::new(pool.clone()));
    match args.command {
        OrphansCommand::List { json, operator } => {
            let operator = super::grant::operator(operator)?;
            let found = match orphans::list(pool, Some(permits), &operator).await {
                Ok(found) => found,
                Err(e) => {
                    eprintln!("error: {}", super::terminal::shown(&error_chain(&e)));
                    return Ok(ExitCode::FAILURE);
                }
            };
            let mut out = super::terminal::stdout();
            if json {
                let text = serde_json::to_string_pretty(&found).expect("orphans serialise");
                writeln!(out, "{text}").map_err(CliError::Output)?;
            } else {
                if found.orphans.is_empty() {
                    writeln!(out, "{}", none_found(found.unchecked.len())).map_err(CliError::Output)?;
                }
                for o in &found.orphans {
                    writeln!(out, "{}  {} messages", o.display(), o.messages).map_err(CliError::Output)?;
                }
                for u in &found.unchecked {
                    writeln!(out, "{}/{}: could not be checked: {}", u.cluster, u.node, u.why)
                        .map_err(CliError::Output)?;
                }
            }
            Ok(if found.unchecked.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(3) })
        }
        OrphansCommand::Return { orphan, to, confirm, operator } => {
            let operator = super::grant::operator(operator)?;
            let Some((cluster, node, queue)) = split_orphan(&orphan) else {
                eprintln!(
                    "refused: name the orphan as cluster/node/studio.transfer.<uuid>, not `{}`",
                    super::terminal::shown(&orphan.to_string())
                );
                return Ok(ExitCode::from(2));
            };
            if confirm.as_deref() != Some(queue) {
                eprintln!("{RETURN_WARNING}");
                eprintln!(
                    "to return {}, type the staging queue's name: --confirm {}",
                    super::terminal::shown(&orphan.to_string()),
                    super::terminal::shown(queue)
                );
                return Ok(ExitCode::from(2));
            }
            let request =
                ReturnRequest { cluster: cluster.into(), node: node.into(), queue: queue.into(), to, operator };
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
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) if e.is_refusal() => {
                    eprintln!("refused: {}", super::terminal::shown(&e.to_string()));
                    Ok(ExitCode::from(2))
                }
                Err(e) => {
                    eprintln!("error: {}", super::terminal::shown(&error_chain(&e)));
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}

/// `cluster/node/queue` → its parts (the queue may itself contain `/`).
fn split_orphan(s: &str) -> Option<(&str, &str, &str)> {
    let (cluster, rest) = s.split_once('/')?;
    let (node, queue) = rest.split_once('/')?;
    (!cluster.is_empty() && !node.is_empty() && !queue.is_empty()).then_some((cluster, node, queue))
}

/// The words of a listing that found no orphan, when `unchecked` nodes could not be asked: "none" only when every
/// node answered; otherwise what is unknown stays unknown.
fn none_found(unchecked: usize) -> String {
    match unchecked {
        0 => "no orphans".into(),
        n => format!(
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
        assert_eq!(split_orphan("east/east-1/studio.transfer.x"), Some(("east", "east-1", "studio.transfer.x")));
        assert_eq!(split_orphan("east/east-1"), None);
        assert_eq!(split_orphan("/east-1/q"), None);
        assert_eq!(split_orphan("east/n/a/b"), Some(("east", "n", "a/b")));
    }

    #[test]
    fn an_empty_listing_says_none_only_when_every_node_answered() {
        assert_eq!(super::none_found(0), "no orphans");
        let words = super::none_found(2);
        assert!(words.contains("2 node(s) could not be checked") && words.contains("unknown"), "{words}");
    }
}
