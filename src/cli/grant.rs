//! `artemis-transfer grant add|remove|list`: the grants of docs/permissions.md from the command line, so an operator with
//! database access can bootstrap them (the Studio backend writes the same table). Changing a grant needs `admin`
//! on its cluster — except while nobody holds `admin` on `*`, which is how the first admin is made. Every command
//! is audited. The work is in [`crate::transfer::permissions`]; this module parses and prints.
//!
//! Also here: the admin check of `cluster add|remove` and `settings set` ([`authorise_admin_on`]; `admin …` has its
//! own, [`crate::cli::admin::authorise_admin`]). Who acts is named as for every command ([`crate::cli::identity`]).

use std::io::Write;

use clap::Subcommand;
use sqlx::PgPool;

use crate::cli::{CliError, Exit};
use crate::transfer::permissions::{self, Bootstrap, Grant, GrantError, Permission, PermissionError};

/// `grant` options.
#[derive(Debug, clap::Args)]
pub struct GrantArgs {
    /// The action.
    #[command(subcommand)]
    pub command: GrantCommand,
}

/// Grant actions.
#[derive(Debug, Subcommand)]
pub enum GrantCommand {
    /// Give PRINCIPAL the PERMISSION on CLUSTER (`*`: every cluster). Permissions: cluster:read, message:read,
    /// message:move, message:send, admin (admin implies the others).
    Add {
        /// The operator's name, as the CLI (--as) and the Studio backend pass it.
        principal: String,
        /// A registered cluster's name, or `*` for every cluster.
        cluster: String,
        /// cluster:read, message:read, message:move, message:send or admin.
        #[arg(value_parser = parse_permission)]
        permission: Permission,
    },
    /// Take the grant away (a run its holder started stops before its next batch).
    Remove {
        /// The operator's name.
        principal: String,
        /// The cluster's name, or `*`.
        cluster: String,
        /// The permission.
        #[arg(value_parser = parse_permission)]
        permission: Permission,
    },
    /// List grants (your own, or — as an admin on `*` — anybody's).
    List {
        /// Only this principal's grants.
        principal: Option<String>,
        /// Only grants on this cluster (`*` for the grants on every cluster).
        #[arg(long)]
        cluster: Option<String>,
        /// Print JSON lines (one grant a line) instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// Checks that `actor` may run an admin command that changes `cluster` (`*`: the whole deployment, as settings do):
/// `admin` on it or on `*`, or anybody while nobody holds `admin` on `*` (the bootstrap rule of `grant add`, see
/// [`permissions::require_admin_or_bootstrap`]). A refusal is audited under the command's own `action` and
/// `target`, with `detail` and the refusal's words, as the command would have been, and comes back as
/// [`CliError::Refused`]. `Ok(true)`: allowed only because nobody holds `admin` on `*` yet (worth recording in the
/// audit row).
pub async fn authorise_admin_on(
    pool: &PgPool,
    actor: &str,
    cluster: &str,
    action: &str,
    target: String,
    detail: serde_json::Value,
) -> Result<bool, CliError> {
    match permissions::require_admin_audited(pool, actor, cluster, Bootstrap::Allowed, action, target, detail).await {
        Ok(bootstrap) => Ok(bootstrap),
        Err(PermissionError::Missing(missing)) => Err(CliError::Refused(missing.to_string())),
        Err(e) => Err(e.into()),
    }
}

fn parse_permission(s: &str) -> Result<Permission, String> {
    s.parse()
}

/// A grant change or listing that failed: refused when the caller may not, or the grant is no grant; a failure when
/// the database is.
fn refused(e: GrantError) -> CliError {
    match e {
        GrantError::Db(e) | GrantError::Permission(PermissionError::Db(e)) => CliError::Db(e),
        other => CliError::Refused(other.to_string()),
    }
}

/// Runs a grant action and prints its result.
pub async fn run(pool: &PgPool, args: GrantArgs, by: &str) -> Result<Exit, CliError> {
    let mut out = super::terminal::stdout();
    match args.command {
        GrantCommand::Add { principal, cluster, permission } => {
            let grant = Grant { principal, cluster, permission };
            match permissions::grant(pool, by, &grant).await {
                Ok(added) => {
                    let words = if added { "granted" } else { "already held" };
                    writeln!(out, "{words}: {} holds {} on {}", grant.principal, grant.permission, grant.cluster)
                        .map_err(CliError::Output)?;
                }
                Err(e) => return Err(refused(e)),
            }
        }
        GrantCommand::Remove { principal, cluster, permission } => {
            let grant = Grant { principal, cluster, permission };
            match permissions::revoke(pool, by, &grant).await {
                Ok(true) => writeln!(
                    out,
                    "removed: {} no longer holds {} on {} (runs it started stop before their next batch)",
                    grant.principal, grant.permission, grant.cluster
                )
                .map_err(CliError::Output)?,
                Ok(false) => writeln!(out, "{} held no {} on {}", grant.principal, grant.permission, grant.cluster)
                    .map_err(CliError::Output)?,
                Err(e) => return Err(refused(e)),
            }
        }
        GrantCommand::List { principal, cluster, json } => {
            let rows = match permissions::list(pool, by, principal.as_deref(), cluster.as_deref()).await {
                Ok(rows) => rows,
                Err(e) => return Err(refused(e)),
            };
            if json {
                super::terminal::json_lines(&mut out, &rows).map_err(CliError::Output)?;
            } else if rows.is_empty() {
                writeln!(out, "no grants").map_err(CliError::Output)?;
            } else {
                writeln!(out, "{:<24}  {:<16}  {:<13}  {:<16}  GRANTED AT", "PRINCIPAL", "CLUSTER", "PERMISSION", "BY")
                    .map_err(CliError::Output)?;
                for r in rows {
                    writeln!(
                        out,
                        "{:<24}  {:<16}  {:<13}  {:<16}  {}",
                        r.principal,
                        r.cluster,
                        r.permission,
                        r.granted_by,
                        r.granted_at.format("%Y-%m-%d %H:%M:%S UTC")
                    )
                    .map_err(CliError::Output)?;
                }
            }
        }
    }
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_parse_by_name() {
        assert_eq!(parse_permission("message:send"), Ok(Permission::MessageSend));
        assert!(parse_permission("send").is_err());
    }
}
