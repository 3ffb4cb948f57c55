//! `artemis-transfer grant add|remove|list`: the grants of docs/permissions.md from the command line, so an operator with
//! database access can bootstrap them (the Studio backend writes the same table). Changing a grant needs `admin`
//! on its cluster — except while nobody holds `admin` on `*`, which is how the first admin is made. Every command
//! is audited. The work is in [`crate::transfer::permissions`]; this module parses and prints.
//!
//! Also here: [`operator`], how every command names the operator it acts for (`--as`, `ARTEMIS_TRANSFER_OPERATOR`,
//! or `$USER`); and the admin checks of the other admin commands ([`authorise_admin`] for `admin …`,
//! [`authorise_admin_on`] for `cluster add|remove` and `settings set`).

use std::io::Write;

use clap::Subcommand;
use sqlx::PgPool;

use crate::cli::{CliError, Exit};
use crate::transfer::permissions::{self, Bootstrap, Grant, GrantError, Permission, PermissionError};

/// The operator a command acts for: the one named (`--as` or `ARTEMIS_TRANSFER_OPERATOR`), else `$USER`. Never a
/// made-up name: with neither, the command is refused, since every action is checked against the operator's
/// grants and audited under their name.
pub fn operator(named: Option<String>) -> Result<String, CliError> {
    named
        .filter(|o| !o.trim().is_empty())
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.trim().is_empty()))
        .ok_or_else(|| {
            CliError::NoOperator(
                "name the operator you act for with --as <operator> or ARTEMIS_TRANSFER_OPERATOR ($USER is not set)"
                    .into(),
            )
        })
}

/// `grant` options.
#[derive(Debug, clap::Args)]
pub struct GrantArgs {
    /// Who acts (default: ARTEMIS_TRANSFER_OPERATOR, else $USER).
    #[arg(long = "as", visible_alias = "operator", env = "ARTEMIS_TRANSFER_OPERATOR", global = true)]
    pub operator: Option<String>,
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
        /// Print JSON instead of a table.
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
pub async fn run(pool: &PgPool, args: GrantArgs) -> Result<Exit, CliError> {
    let by = operator(args.operator)?;
    let mut out = super::terminal::stdout();
    match args.command {
        GrantCommand::Add { principal, cluster, permission } => {
            let grant = Grant { principal, cluster, permission };
            match permissions::grant(pool, &by, &grant).await {
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
            match permissions::revoke(pool, &by, &grant).await {
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
            let rows = match permissions::list(pool, &by, principal.as_deref(), cluster.as_deref()).await {
                Ok(rows) => rows,
                Err(e) => return Err(refused(e)),
            };
            if json {
                let text = serde_json::to_string_pretty(&rows).unwrap_or_default();
                writeln!(out, "{text}").map_err(CliError::Output)?;
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
    fn the_operator_is_named_or_the_user() {
        assert_eq!(operator(Some("alice".into())).unwrap(), "alice");
        if let Ok(user) = std::env::var("USER") {
            if !user.trim().is_empty() {
                assert_eq!(operator(None).unwrap(), user);
                assert_eq!(operator(Some("  ".into())).unwrap(), user, "a blank name is no name");
            }
        }
    }

    #[test]
    fn permissions_parse_by_name() {
        assert_eq!(parse_permission("message:send"), Ok(Permission::MessageSend));
        assert!(parse_permission("send").is_err());
    }
}
