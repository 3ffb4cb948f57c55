//! What an operator does to a run, with the checks docs/guarantees.md and docs/permissions.md ask for: **execute** a Previewed run,
//! **stop**, **resume**, **return to source**. Each action is audited (who, what, when, outcome, on the run's source
//! and target cluster) whether it is done or refused.
//!
//! The checks, the start of the run's first job and the audit are **one implementation in SQL**
//! (`transfer_execute`, `transfer_stop`, `transfer_resume`, `transfer_return`, `sql/functions/`), which the Studio
//! backend calls directly; this module calls the same functions and maps their SQLSTATEs (class `AT`, listed in
//! `sql/functions/action_entry_points.sql` and in docs/studio-integration.md) back to [`ActionError`], with the
//! fields of their detail. The words of an [`ActionError`] are the SQL path's and name no edge's flags or fields;
//! an edge that tells the operator how to give what is missing (`--ack <code>` on the command line, `acknowledged`
//! in the API) says it in its own terms with [`ActionError::words_with`].

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::jobs::runs::{Started, StopRequest};
use crate::jobs::{self, JobId, RunState};
use crate::transfer::audit::audit;
use crate::transfer::permissions::{self, MissingGrant, Permission, PermissionError};
use crate::transfer::plan::Mode;
pub use crate::transfer::store::action::Confirmation;
use crate::transfer::store::action::{self as store, ActionResult};
use crate::transfer::view::RunRecord;

/// An action an operator may take on a run: what `offered` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunAction {
    /// Execute a Previewed run its preview did not refuse.
    Execute,
    /// Stop a run that has started and not ended.
    Stop,
    /// Resume a stopped, interrupted or failed run.
    Resume,
    /// Return to the source what a stopped, interrupted or failed cross-node move holds in staging.
    Return,
}

/// The actions `operator` may take on `record`'s run now: those its state allows, of which they hold the grants the
/// SQL action functions check again when it is taken — the run's (`transfer_missing_grant`) for execute, stop and
/// resume, `message:move` on the source for a return. A read of the grants that fails is an error, never "none".
pub async fn offered(pool: &PgPool, operator: &str, record: &RunRecord) -> Result<Vec<RunAction>, sqlx::Error> {
    let source = record.source_cluster.clone().unwrap_or_default();
    let target = record.target_cluster.clone().unwrap_or_default();
    let mode = if record.mode.as_deref() == Some("copy") { Mode::Copy } else { Mode::Move };
    let may_run = match permissions::require_for_run(pool, operator, mode, &source, &target).await {
        Ok(()) => true,
        Err(PermissionError::Missing(_)) => false,
        Err(PermissionError::Db(e)) => return Err(e),
    };
    let may_return = permissions::has_grant(pool, operator, &source, Permission::MessageMove).await?;
    let s = record.state;
    let previewed = s == RunState::Previewed;
    let one_node = record.source_cluster == record.target_cluster && record.source_node == record.target_node;
    let mut actions = Vec::new();
    if may_run && previewed && !record.refused {
        actions.push(RunAction::Execute);
    }
    if may_run && !s.is_ended() && !previewed {
        actions.push(RunAction::Stop);
    }
    if may_run && s.is_startable() && !previewed {
        actions.push(RunAction::Resume);
    }
    if may_return && mode == Mode::Move && !one_node && s.is_startable() && !previewed {
        actions.push(RunAction::Return);
    }
    Ok(actions)
}

/// Why an action was refused. The variants carry what a program needs (codes, the expected confirmation, the
/// cap); the words say what to do without naming how a caller gives it ([`ActionError::words_with`] does).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ActionError {
    /// No such run.
    #[error("there is no run {0}")]
    NotFound(Uuid),
    /// The run is not in a state the action applies to.
    #[error("run {run} is {state}: {action} applies only to {applies_to}")]
    State {
        /// The run.
        run: Uuid,
        /// Its state.
        state: RunState,
        /// What was asked.
        action: &'static str,
        /// The states it applies to.
        applies_to: &'static str,
    },
    /// The preview is too old.
    #[error("the preview of run {run} expired at {}: preview again", at.format("%Y-%m-%d %H:%M:%S UTC"))]
    Expired {
        /// The run.
        run: Uuid,
        /// When it expired.
        at: DateTime<Utc>,
    },
    /// The plan hash does not match. The previewed hash is not here, nor in any answer: echoing it is what shows
    /// the operator saw the preview.
    #[error("the plan hash {given} is not the one run {run} was previewed with: preview again")]
    PlanHash {
        /// The run.
        run: Uuid,
        /// The hash given.
        given: String,
    },
    /// The preview refused the run.
    #[error("the preview refused this run: {0}")]
    Refused(String),
    /// Codes that need acknowledgement were not acknowledged.
    #[error("{}", acknowledge_words(codes, None))]
    NotAcknowledged {
        /// The codes not acknowledged, in the preview's order.
        codes: Vec<String>,
    },
    /// An acknowledgement of a code the preview did not raise (a typo, or another preview's code).
    #[error("the preview did not raise {0}; acknowledge only its own codes")]
    UnknownAcknowledgement(String),
    /// The typed confirmation is missing or wrong.
    #[error("{}", confirm_words(typed.as_deref(), expected))]
    Confirmation {
        /// The source queue's name.
        expected: String,
        /// What was typed (`None`: nothing).
        typed: Option<String>,
    },
    /// The safety cap needs an explicit override.
    #[error("{}", cap_words(*cap, "override the cap"))]
    Cap {
        /// The cap.
        cap: i64,
    },
    /// Another run is active on the source queue.
    #[error("another run is active on the source queue {0}: wait for it, or stop it")]
    SourceBusy(String),
    /// Not built yet for this kind of run, or not possible for it.
    #[error("{0}")]
    Unsupported(String),
    /// The operator lacks a grant the action needs (docs/permissions.md).
    #[error("{0}")]
    Permission(MissingGrant),
    /// The call was malformed (no operator named).
    #[error("{0}")]
    Invalid(String),
    /// The database refused the action for a reason of its own (audited as an error).
    #[error("the database refused {action}: {message} (SQLSTATE {sqlstate})")]
    Database {
        /// The action.
        action: &'static str,
        /// Postgres's SQLSTATE.
        sqlstate: String,
        /// Postgres's words.
        message: String,
    },
    /// The engine.
    #[error(transparent)]
    Jobs(#[from] jobs::Error),
    /// Postgres.
    #[error("the database: {0}")]
    Db(#[from] sqlx::Error),
}

/// What a refused operator must add to the confirmation: an edge names it in its own terms (a flag, a field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Remedy<'a> {
    /// Acknowledge the codes listed.
    Acknowledge,
    /// Type the source queue's name, `expected`.
    Confirm {
        /// The source queue's name.
        expected: &'a str,
    },
    /// Override the safety cap explicitly.
    OverrideCap,
}

impl ActionError {
    /// The words of this refusal, with `hint` saying in the caller's terms how to give what is missing (the
    /// command line: `--ack <code>`; the API: `acknowledged`). A refusal that needs no remedy has its own words.
    pub fn words_with(&self, hint: impl Fn(Remedy<'_>) -> String) -> String {
        match self {
            ActionError::NotAcknowledged { codes } => acknowledge_words(codes, Some(&hint(Remedy::Acknowledge))),
            ActionError::Confirmation { expected, typed } => {
                confirm_words(typed.as_deref(), &hint(Remedy::Confirm { expected }))
            }
            ActionError::Cap { cap } => cap_words(*cap, &hint(Remedy::OverrideCap)),
            other => other.to_string(),
        }
    }
}

/// "acknowledge these findings to run it (`hint`): a, b" (no parentheses without a hint).
fn acknowledge_words(codes: &[String], hint: Option<&str>) -> String {
    let hint = hint.map(|h| format!(" ({h})")).unwrap_or_default();
    format!("acknowledge these findings to run it{hint}: {}", codes.join(", "))
}

/// "type the source queue's name to arm this run (`hint`)", and what is wrong with what was typed (a refusal's
/// `typed` is never the expected name).
fn confirm_words(typed: Option<&str>, hint: &str) -> String {
    let wrong = typed.map(|typed| format!(": `{typed}` is not the source queue's name")).unwrap_or_default();
    format!("type the source queue's name to arm this run ({hint}){wrong}")
}

/// "this run is over the safety cap of `cap` messages or of unknown size: `hint` to run it".
fn cap_words(cap: i64, hint: &str) -> String {
    format!("this run is over the safety cap of {cap} messages or of unknown size: {hint} to run it")
}

/// The states an action applies to, in the words of the SQL functions.
const PREVIEWED: &str = "a previewed run";
const RESUMABLE: &str = "a stopped, interrupted or failed run (stop it first)";

impl ActionResult {
    /// `Ok(detail)` for '00000', else the [`ActionError`] its SQLSTATE stands for.
    fn into_result(self, run: Uuid, action: &'static str) -> Result<serde_json::Value, ActionError> {
        let detail = self.detail.unwrap_or_default();
        let message = self.message.unwrap_or_default();
        let text = |key: &str| detail[key].as_str().unwrap_or_default().to_string();
        let texts = |key: &str| -> Vec<String> {
            let items = detail[key].as_array().map(Vec::as_slice).unwrap_or_default();
            items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
        };
        let sqlstate = self.sqlstate.unwrap_or_default();
        Err(match sqlstate.as_str() {
            "00000" => return Ok(detail),
            "AT000" => ActionError::Invalid(message),
            "AT001" => ActionError::NotFound(run),
            "AT002" => ActionError::State {
                run,
                state: text("state").parse().unwrap_or(RunState::Failed),
                action: if action == "return" { "return to source" } else { action },
                applies_to: if action == "execute" { PREVIEWED } else { RESUMABLE },
            },
            "AT003" => match serde_json::from_value::<DateTime<Utc>>(detail["at"].clone()) {
                Ok(at) => ActionError::Expired { run, at },
                Err(_) => ActionError::Invalid(message),
            },
            "AT004" => ActionError::PlanHash { run, given: text("given") },
            "AT005" => ActionError::Refused(text("words")),
            "AT006" => ActionError::NotAcknowledged { codes: texts("codes") },
            "AT007" => ActionError::UnknownAcknowledgement(text("code")),
            "AT008" => ActionError::Confirmation {
                expected: text("expected"),
                typed: detail["typed"].as_str().map(str::to_string),
            },
            "AT009" => ActionError::Cap { cap: detail["cap"].as_i64().unwrap_or_default() },
            "AT010" => ActionError::SourceBusy(text("queue")),
            "AT011" => ActionError::Unsupported(message),
            "AT012" => ActionError::Permission(MissingGrant {
                principal: text("principal"),
                permission: text("permission").parse().unwrap_or(Permission::Admin),
                cluster: text("cluster"),
            }),
            _ => ActionError::Database { action, sqlstate, message },
        })
    }
}

/// The answer of one of the SQL action functions; a failure to reach the database is audited here (best effort:
/// the function could not write its own row).
async fn answer(
    pool: &PgPool,
    action: &'static str,
    run: Uuid,
    operator: &str,
    called: Result<ActionResult, sqlx::Error>,
) -> Result<serde_json::Value, ActionError> {
    match called {
        Ok(result) => result.into_result(run, action),
        Err(e) => {
            audit(pool, operator, action, run, "error", json!({ "error": e.to_string() })).await;
            Err(e.into())
        }
    }
}

fn started(detail: &serde_json::Value) -> Started {
    Started { job: JobId(detail["job"].as_i64().unwrap_or_default()), seq: detail["seq"].as_i64().unwrap_or_default() }
}

/// Executes a Previewed run: checks the confirmation and the operator's grants, then queues its first job (the
/// run takes a slot, or waits Queued for one). `transfer_execute` in SQL. Audited.
pub async fn execute(
    pool: &PgPool,
    run: Uuid,
    confirm: &Confirmation,
    operator: &str,
    default_max_attempts: i32,
) -> Result<Started, ActionError> {
    let called = store::transfer_execute(pool, run, confirm, operator, default_max_attempts).await;
    answer(pool, "execute", run, operator, called).await.map(|d| started(&d))
}

/// Asks a run to stop: the batch in flight finishes (and an in-doubt batch is settled) first. Needs what starting
/// the run needed. `transfer_stop` in SQL. Audited.
pub async fn stop(pool: &PgPool, run: Uuid, reason: &str, operator: &str) -> Result<StopRequest, ActionError> {
    let called = store::transfer_stop(pool, run, reason, operator).await;
    let detail = answer(pool, "stop", run, operator, called).await?;
    Ok(jobs::runs::stop_request_from(&detail))
}

/// Resumes a Stopped, Interrupted or Failed run from where it stopped (staging, counters and cursor reused).
/// Needs what starting the run needed. `transfer_resume` in SQL. Audited.
pub async fn resume(
    pool: &PgPool,
    run: Uuid,
    operator: &str,
    default_max_attempts: i32,
) -> Result<Started, ActionError> {
    let called = store::transfer_resume(pool, run, operator, default_max_attempts).await;
    answer(pool, "resume", run, operator, called).await.map(|d| started(&d))
}

/// Returns what a Stopped, Interrupted or Failed move still holds in staging to the source queue (§4.5). Needs
/// message:move on the source cluster. `transfer_return` in SQL. Audited.
pub async fn return_to_source(
    pool: &PgPool,
    run: Uuid,
    operator: &str,
    default_max_attempts: i32,
) -> Result<Started, ActionError> {
    let called = store::transfer_return(pool, run, operator, default_max_attempts).await;
    answer(pool, "return", run, operator, called).await.map(|d| started(&d))
}

/// The words the confirmation of a return shows before the operator types the queue name (§4.5).
pub const RETURN_WARNING: &str = "Messages already delivered stay on the target. Returned messages come back to the \
     source queue with new message ids, without expiration, at the tail of the queue.";
