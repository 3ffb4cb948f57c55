//! `artemis-transfer admin jobs|requeue|cancel|rescue|prune`: parse, call [`crate::jobs::admin`] (which audits
//! each action with who/what/when/outcome), print the result as text or JSON lines.

use std::io::Write;
use std::time::Duration;

use clap::Subcommand;
use sqlx::PgPool;

use crate::cli::{CliError, Exit};
use crate::jobs::admin::{self, Actor, RequeueTarget};
use crate::jobs::model::{JobId, JobRow, JobState, RunId};
use crate::transfer::audit::{audit_entry, AuditEntry};
use crate::transfer::permissions::{self, PermissionError};

/// `admin` options. Who acts (`--as`) needs an admin grant (docs/permissions.md) and is recorded in the audit trail.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    /// Print JSON instead of text (a list as JSON lines, one object a line).
    #[arg(long, global = true)]
    pub json: bool,
    /// The action.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// Admin actions.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// List jobs, newest first.
    Jobs {
        /// Only jobs in this state (pending, running, completed, failed, cancelled).
        #[arg(long, value_parser = parse_state)]
        state: Option<JobState>,
        /// Only jobs of this run.
        #[arg(long)]
        run: Option<RunId>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: i64,
    },
    /// Run a failed, cancelled or pending job again now with a fresh attempt budget (a run id means its
    /// latest job).
    Requeue {
        /// A run id (UUID) or a job id (number).
        target: RequeueTarget,
    },
    /// Cancel a run: its job is cancelled (a running one loses its lease), the run is Stopped.
    Cancel {
        /// The run.
        run: RunId,
    },
    /// Rotate and expire the leases of a dead worker: its late commits fail and its jobs run elsewhere.
    Rescue {
        /// The worker's name (the lease owner shown by `admin jobs`).
        worker: String,
    },
    /// Delete runs that ended longer ago than a duration (e.g. 30d, 12h, 45m, 90s) and hold no staging, with
    /// their jobs and events, and older finished jobs of runs ended with their staging removed. Runs that
    /// still hold staging, live runs and the audit trail are kept. Workers do this on their own every
    /// retention.prune_interval_secs.
    Prune {
        /// How long ago a run must have ended (or a job finished).
        #[arg(long, value_parser = parse_duration)]
        older_than: Duration,
    },
}

/// Runs an admin action and prints its result.
pub async fn run(pool: &PgPool, args: AdminArgs, operator: &str) -> Result<Exit, CliError> {
    let actor = Actor(operator.to_owned());
    authorise_admin(pool, &actor.0, &args.command).await?;
    let mut out = super::terminal::stdout();
    let json = args.json;
    match args.command {
        AdminCommand::Jobs { state, run, limit } => {
            let rows = admin::list_jobs(pool, &actor, state, run, limit).await?;
            print_jobs(&mut out, &rows, json).map_err(CliError::Output)?;
        }
        AdminCommand::Requeue { target } => {
            let job = admin::requeue(pool, &actor, target).await?;
            print_line(
                &mut out,
                json,
                &job,
                &format!("requeued job {} of run {} (due now, fresh attempts)", job.id, job.run_id),
            )?;
        }
        AdminCommand::Cancel { run } => {
            let cancelled = admin::cancel(pool, &actor, run).await?;
            let words = match cancelled.job {
                Some(job) => format!("cancelled run {run} (job {job} cancelled); the run is stopped"),
                None => format!("cancelled run {run} (it had no live job); the run is stopped"),
            };
            print_line(&mut out, json, &cancelled, &words)?;
        }
        AdminCommand::Rescue { worker } => {
            let jobs = admin::rescue(pool, &actor, &worker).await?;
            if json {
                super::terminal::json_lines(&mut out, &jobs).map_err(CliError::Output)?;
            } else {
                writeln!(out, "rotated {} lease(s) of worker {worker}: {jobs:?}", jobs.len())
                    .map_err(CliError::Output)?;
            }
        }
        AdminCommand::Prune { older_than } => {
            let deleted = admin::prune(pool, &actor, older_than).await?;
            print_line(
                &mut out,
                json,
                &deleted,
                &format!(
                    "deleted {deleted} that ended more than {} s ago (runs holding staging and the audit trail are \
                     kept)",
                    older_than.as_secs()
                ),
            )?;
        }
    }
    Ok(Exit::Success)
}

fn print_line(out: &mut impl Write, json: bool, value: &impl serde::Serialize, words: &str) -> Result<(), CliError> {
    if json {
        super::terminal::json_one(out, value).map_err(CliError::Output)
    } else {
        writeln!(out, "{words}").map_err(CliError::Output)
    }
}

fn print_jobs(out: &mut impl Write, rows: &[JobRow], json: bool) -> std::io::Result<()> {
    if json {
        return super::terminal::json_lines(out, rows);
    }
    writeln!(
        out,
        "{:>8}  {:<36}  {:>5}  {:<9}  {:>7}  {:<20}  {:<24}  last error",
        "job", "run", "seq", "state", "attempt", "run at", "lease owner"
    )?;
    for j in rows {
        writeln!(
            out,
            "{:>8}  {:<36}  {:>5}  {:<9}  {:>7}  {:<20}  {:<24}  {}",
            j.id,
            j.run_id,
            j.seq,
            j.state,
            format!("{}/{}", j.attempt, j.max_attempts),
            j.run_at.format("%Y-%m-%d %H:%M:%S"),
            j.lease_owner.as_deref().unwrap_or("-"),
            j.last_error.as_deref().unwrap_or("")
        )?;
    }
    Ok(())
}

fn parse_state(s: &str) -> Result<JobState, String> {
    s.parse::<JobState>().map_err(|e| e.to_string())
}

/// `90s`, `45m`, `12h`, `30d` (a bare number is seconds); shared with `settings set`.
pub use crate::jobs::settings::parse_duration;

/// Checks that `actor` may run the admin command (docs/permissions.md: an admin grant): admin on the clusters of the run it
/// concerns, or on `*` for commands over the whole job queue. A refusal is audited under the command's own action
/// name, as the command would have been, and comes back as [`CliError::Refused`].
pub async fn authorise_admin(pool: &PgPool, actor: &str, command: &AdminCommand) -> Result<(), CliError> {
    let job_run = |job: JobId| async move {
        Ok::<_, CliError>(crate::jobs::store::job::job_get(pool, job).await?.map(|row| row.run_id.0))
    };
    let (action, target, run) = match command {
        AdminCommand::Jobs { run, .. } => ("jobs.list", "jobs".to_string(), run.map(|r| r.0)),
        AdminCommand::Requeue { target } => {
            let run = match target {
                RequeueTarget::Run(run) => Some(run.0),
                RequeueTarget::Job(job) => job_run(*job).await?,
            };
            ("jobs.requeue", target.to_string(), run)
        }
        AdminCommand::Cancel { run } => ("runs.cancel", format!("run {run}"), Some(run.0)),
        AdminCommand::Rescue { worker } => ("jobs.rescue", format!("worker {worker}"), None),
        AdminCommand::Prune { .. } => (crate::jobs::prune::AUDIT_ACTION, "retention".to_string(), None),
    };
    match permissions::require_admin_of(pool, actor, run).await {
        Ok(()) => Ok(()),
        Err(PermissionError::Missing(missing)) => {
            let entry = AuditEntry {
                actor,
                action,
                target,
                outcome: "refused",
                detail: serde_json::json!({ "error": missing.to_string(), "run_id": run }),
                // Filled from the run named in the detail, or '*' (trigger audit_fill_clusters).
                source_cluster: None,
                target_cluster: None,
            };
            audit_entry(pool, &entry).await.map_err(CliError::Db)?;
            Err(CliError::Refused(missing.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("45m"), Ok(Duration::from_secs(2700)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("30d"), Ok(Duration::from_secs(2_592_000)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert!(parse_duration("3w").is_err());
        assert!(parse_duration("d").is_err());
    }
}
