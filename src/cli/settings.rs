//! `artemis-transfer settings [show]` and `artemis-transfer settings set <key> <value>` (docs/settings.md): the
//! runtime settings as the database holds them, with who changed each one last and when; and an operator's
//! change, read by the key's kind (`500`, `2.5`, `10m`, `64MiB`, `a.dmq,b.dmq`, `none`), validated against the
//! whole set and audited with the old and the new value (a refusal too, with its reason).
//!
//! A change needs no restart: the relay loads the settings before every batch, so a running run's next batch
//! uses a new `batch_size` or `batch_bytes`; every claim reads `concurrent_runs`, and the permit function reads
//! `node_calls_per_second` at every call. A new `batch_size` is safe mid-run (issue 14): a batch in doubt is
//! settled with its own ids whatever the new size, staging is listed whole over Core (no browse page to outgrow),
//! and no batch is ever larger than the target address's duplicate-id cache (ADR 0010). The defaults in `config/default.toml` only seed a database that has
//! no value yet (`migrate`).
//!
//! Settings are deployment-wide, so a change is an admin command (docs/permissions.md): it needs `admin` on `*`, or nobody
//! holding `admin` on `*` yet (the bootstrap of a fresh database, as for `grant add`). A refusal is audited as
//! `settings.set` with outcome `refused` and exits 4 (refused). Who changes is named as for every command (`--as`,
//! else ARTEMIS_TRANSFER_OPERATOR, else `$USER`: [`crate::cli::identity`]). That one name is both checked and
//! audited.

use std::io::Write;

use clap::Subcommand;
use sqlx::PgPool;

use crate::cli::grant::authorise_admin_on;
use crate::cli::identity::Named;
use crate::cli::{CliError, Exit};
use crate::jobs::admin::{self, Actor};
use crate::jobs::settings::{self, Changed, KEYS};
use crate::jobs::store::record::SettingRow;
use crate::transfer::permissions::EVERY_CLUSTER;

/// `settings` options. Who changes a setting (`--as`) needs admin on `*` (open while nobody holds admin on `*`) and
/// is recorded in the audit trail.
#[derive(Debug, clap::Args)]
pub struct SettingsArgs {
    /// Print JSON instead of text (`show`: JSON lines, one setting a line; `set`: one object).
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do (default: show).
    #[command(subcommand)]
    pub command: Option<SettingsCommand>,
}

/// `settings` actions.
#[derive(Debug, Subcommand)]
pub enum SettingsCommand {
    /// Every setting with its value, who changed it last and when.
    Show,
    /// Change a setting (audited). Numbers as numbers, durations of *_secs keys as 600, 10m or 30s,
    /// batch_bytes as 67108864 or 64MiB, dmq_chain comma-separated, dmq_time_to_live_secs also as none.
    /// Running runs use it from their next batch; a batch in doubt is settled first with its own messages, and
    /// no batch exceeds the target address's duplicate-id cache, so changing batch_size mid-run is safe.
    Set {
        /// The setting (`settings show` lists them).
        key: String,
        /// Its new value.
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
}

/// Runs a `settings` action; only a change needs to know who acts (`named`).
pub async fn run(pool: &PgPool, args: SettingsArgs, named: &Named) -> Result<Exit, CliError> {
    let mut out = super::terminal::stdout();
    match args.command.unwrap_or(SettingsCommand::Show) {
        SettingsCommand::Show => {
            let rows = settings::rows(pool).await?;
            print_rows(&mut out, &rows, args.json).map_err(CliError::Output)?;
        }
        SettingsCommand::Set { key, value } => {
            let actor = Actor(named.operator()?);
            // The refusal's row has the shape of a refused value's (`settings.set`, `setting <key>`, `text`).
            let target = format!("setting {key}");
            let asked = serde_json::json!({ "text": value });
            authorise_admin_on(pool, &actor.0, EVERY_CLUSTER, "settings.set", target, asked).await?;
            let changed = admin::set_setting(pool, &actor, &key, &value, None).await?;
            if args.json {
                super::terminal::json_one(&mut out, &changed).map_err(CliError::Output)?;
            } else {
                writeln!(out, "{}", describe(&changed)).map_err(CliError::Output)?;
            }
        }
    }
    Ok(Exit::Success)
}

/// `batch_size: 200 -> 500 (200 was set by … at …)`.
fn describe(changed: &Changed) -> String {
    let old = changed.old.as_ref().map_or_else(|| "not set".to_owned(), shown);
    let was = match (&changed.old_by, changed.old_at) {
        (Some(by), Some(at)) => format!(" ({old} was set by {by} at {})", at.format("%Y-%m-%d %H:%M:%S UTC")),
        _ => String::new(),
    };
    format!("{}: {old} -> {}{was}", changed.key, shown(&changed.new))
}

/// Every known setting in the order of docs/settings.md; one the database lacks says so.
fn print_rows(out: &mut impl Write, rows: &[SettingRow], json: bool) -> std::io::Result<()> {
    if json {
        return super::terminal::json_lines(out, rows);
    }
    writeln!(out, "{:<24}  {:<24}  {:<28}  changed at", "setting", "value", "changed by")?;
    for (key, _) in KEYS {
        match rows.iter().find(|row| row.key == *key) {
            Some(row) => writeln!(
                out,
                "{:<24}  {:<24}  {:<28}  {}",
                key,
                shown(&row.value),
                row.updated_by,
                row.updated_at.format("%Y-%m-%d %H:%M:%S UTC")
            )?,
            None => writeln!(out, "{key:<24}  not set (run `artemis-transfer migrate`)")?,
        }
    }
    Ok(())
}

/// A value as an operator writes it: `none`, `a.dmq,b.dmq`, `200`.
fn shown(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Null => "none".to_owned(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) => items.iter().map(shown).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_shown_as_they_are_written() {
        assert_eq!(shown(&json!(null)), "none");
        assert_eq!(shown(&json!(["a.dmq", "b.dmq"])), "a.dmq,b.dmq");
        assert_eq!(shown(&json!(200)), "200");
        assert_eq!(shown(&json!(2.5)), "2.5");
    }

    #[test]
    fn a_change_reads_as_old_to_new() {
        let changed = Changed {
            key: "batch_size".into(),
            old: None,
            new: json!(500),
            old_by: None,
            old_at: None,
            etag: "\"t\"".into(),
        };
        assert_eq!(describe(&changed), "batch_size: not set -> 500");
    }
}
