//! Who may do what on which cluster (docs/permissions.md). Grants live in Postgres (`transfer_grant`, migration 0004), written
//! by the Studio backend or by `artemis-transfer grant`; the test of a grant is one SQL function,
//! `transfer_has_grant`, so the Studio backend, the SQL start path and this module can never disagree.
//!
//! - `admin` implies every permission on its cluster; a grant on `*` applies to every cluster.
//! - A cluster on which the caller holds no grant at all is invisible: it answers as if it did not exist.
//! - A run keeps the operator who (last) started it (`transfer_run.started_by`); before every batch the worker
//!   re-checks that this operator still holds what the run needs ([`recheck_run`]), and a revoked grant stops the
//!   run with words naming the permission ([`stop_if_revoked`]).
//! - Grants are changed by the admin commands [`grant`] and [`revoke`], audited. While nobody holds `admin` on `*`
//!   (a fresh database), they are open to anyone who can reach the database: that is how the first admin is made.

use std::fmt;
use std::str::FromStr;

use chrono::Utc;
use serde::Serialize;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::jobs::executor::error_chain;
use crate::jobs::handler::{JobContext, Outcome};
use crate::jobs::store::{record, run as jobs_run};
use crate::jobs::RunId;
use crate::transfer::audit::{audit_entry, AuditEntry};
use crate::transfer::plan::Mode;
pub use crate::transfer::store::grant::GrantRow;
use crate::transfer::store::grant::{self as store, RunGrantNeeds};
use crate::transfer::store::{mode_name, relay};

/// A permission a grant gives (the `transfer_grant.permission` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(into = "&'static str")]
pub enum Permission {
    /// See the cluster: list it, list its orphans.
    ClusterRead,
    /// Copy from it.
    MessageRead,
    /// Move from it, return to it, return its orphans.
    MessageMove,
    /// Send to it (the target of a move or copy).
    MessageSend,
    /// Every permission on the cluster; on `*`, the admin commands too.
    Admin,
}

impl Permission {
    /// Every permission.
    pub const ALL: [Permission; 5] = [
        Permission::ClusterRead,
        Permission::MessageRead,
        Permission::MessageMove,
        Permission::MessageSend,
        Permission::Admin,
    ];

    /// The name stored in the table.
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::ClusterRead => "cluster:read",
            Permission::MessageRead => "message:read",
            Permission::MessageMove => "message:move",
            Permission::MessageSend => "message:send",
            Permission::Admin => "admin",
        }
    }

    /// What taking messages from the source of a run of `mode` needs (docs/permissions.md).
    pub fn on_source(mode: Mode) -> Permission {
        match mode {
            Mode::Move => Permission::MessageMove,
            Mode::Copy => Permission::MessageRead,
        }
    }
}

impl From<Permission> for &'static str {
    fn from(p: Permission) -> &'static str {
        p.as_str()
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Permission {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Permission::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
            format!("{s:?} is not a permission: use cluster:read, message:read, message:move, message:send or admin")
        })
    }
}

/// The cluster a grant applies to: `*` means every cluster.
pub const EVERY_CLUSTER: &str = "*";

/// A grant the caller lacks. Its words are those of the SQL functions (`transfer_lacks_words`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MissingGrant {
    /// Who lacks it.
    pub principal: String,
    /// What (`cluster:read`, `message:read`, `message:move`, `message:send`, `admin`).
    #[schema(value_type = String, example = "message:send")]
    pub permission: Permission,
    /// On which cluster (`*`: on every cluster).
    pub cluster: String,
}

impl fmt::Display for MissingGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "operator {} lacks {} on ", self.principal, self.permission)?;
        if self.cluster == EVERY_CLUSTER {
            f.write_str("every cluster (*)")
        } else {
            write!(f, "cluster {}", self.cluster)
        }
    }
}

impl std::error::Error for MissingGrant {}

/// Why a permission check did not pass.
#[derive(Debug, thiserror::Error)]
pub enum PermissionError {
    /// The caller lacks a grant.
    #[error("{0}")]
    Missing(MissingGrant),
    /// The grants could not be read (nothing is allowed then).
    #[error("the grants could not be read: {0}")]
    Db(#[from] sqlx::Error),
}

impl PermissionError {
    /// A refusal the caller can act on, as opposed to a failure of the database.
    pub fn is_refusal(&self) -> bool {
        matches!(self, PermissionError::Missing(_))
    }
}

/// Whether `principal` holds `permission` on `cluster` (`*`: on every cluster).
pub async fn has_grant(
    pool: &PgPool,
    principal: &str,
    cluster: &str,
    permission: Permission,
) -> Result<bool, sqlx::Error> {
    store::grant_held(pool, principal, cluster, permission.as_str()).await
}

/// `Ok` when `principal` holds `permission` on `cluster`, else the missing grant.
pub async fn require(
    pool: &PgPool,
    principal: &str,
    cluster: &str,
    permission: Permission,
) -> Result<(), PermissionError> {
    if has_grant(pool, principal, cluster, permission).await? {
        Ok(())
    } else {
        Err(PermissionError::Missing(MissingGrant {
            principal: principal.to_string(),
            permission,
            cluster: cluster.to_string(),
        }))
    }
}

/// Whether `principal` may see `cluster` at all (any grant on it or on `*`). An invisible cluster must answer
/// exactly as an unregistered one.
pub async fn can_see(pool: &PgPool, principal: &str, cluster: &str) -> Result<bool, sqlx::Error> {
    store::grant_can_see(pool, principal, cluster).await
}

/// `Ok` when `principal` holds what a run of `mode` from `source` to `target` needs (docs/permissions.md), else the first
/// grant missing. The same SQL (`transfer_missing_grant`) decides for execute, stop, resume and every batch.
pub async fn require_for_run(
    pool: &PgPool,
    principal: &str,
    mode: Mode,
    source: &str,
    target: &str,
) -> Result<(), PermissionError> {
    let mode = mode_name(mode);
    match missing_for_run(pool, principal, mode, source, target).await? {
        None => Ok(()),
        Some(missing) => Err(PermissionError::Missing(missing)),
    }
}

async fn missing_for_run(
    pool: &PgPool,
    principal: &str,
    mode: &str,
    source: &str,
    target: &str,
) -> Result<Option<MissingGrant>, sqlx::Error> {
    let row = store::grant_missing_for_run(pool, principal, mode, source, target).await?;
    Ok(row.map(|(permission, cluster)| MissingGrant {
        principal: principal.to_string(),
        // The column's CHECK admits only known names.
        permission: permission.parse().unwrap_or(Permission::Admin),
        cluster,
    }))
}

/// `Ok` when `principal` may run an admin command on `run` (admin on its source and target cluster), or — with no
/// run, or a run that names no clusters — on the whole deployment (admin on `*`).
pub async fn require_admin_of(pool: &PgPool, principal: &str, run: Option<Uuid>) -> Result<(), PermissionError> {
    let clusters: Option<(Option<String>, Option<String>)> = match run {
        Some(run) => store::run_clusters(pool, run).await?,
        None => None,
    };
    match clusters {
        Some((Some(source), Some(target))) => {
            require(pool, principal, &source, Permission::Admin).await?;
            require(pool, principal, &target, Permission::Admin).await
        }
        _ => require(pool, principal, EVERY_CLUSTER, Permission::Admin).await,
    }
}

/// Why a run may not go on.
#[derive(Debug, thiserror::Error)]
pub enum Revoked {
    /// The operator who started it no longer holds a grant it needs.
    #[error("{missing}: a grant the run needs was withdrawn; grant it again, then resume run {run}")]
    Missing {
        /// The run.
        run: Uuid,
        /// The grant.
        missing: MissingGrant,
    },
    /// The run records no operator, mode or clusters, so what it needs cannot be checked (never taken as allowed).
    #[error("run {run} records no {what}, so its permissions cannot be checked: it does not go on")]
    Unknowable {
        /// The run.
        run: Uuid,
        /// What it lacks.
        what: &'static str,
    },
    /// The grants could not be read: a transient failure, not a revocation.
    #[error("the run's permissions could not be re-checked: {0}")]
    Db(#[from] sqlx::Error),
}

impl Revoked {
    /// What becomes of the batch: a missing grant stops the run with these words; an unreadable database retries.
    pub fn into_outcome(self) -> Outcome {
        match self {
            Revoked::Db(_) => Outcome::Retry { error: self.to_string(), code: None },
            other => Outcome::Stop { reason: other.to_string() },
        }
    }
}

/// Re-checks that the operator who started `run` still holds what it needs (docs/permissions.md: before every batch).
pub async fn recheck_run(pool: &PgPool, run: Uuid) -> Result<(), Revoked> {
    let row = store::run_grant_needs(pool, run).await?;
    let Some(RunGrantNeeds { started_by: operator, mode, source_cluster: source, target_cluster: target }) = row else {
        return Err(Revoked::Unknowable { run, what: "row (the run does not exist)" });
    };
    let operator = operator.filter(|o| !o.is_empty()).ok_or(Revoked::Unknowable { run, what: "operator" })?;
    let mode = mode.ok_or(Revoked::Unknowable { run, what: "mode" })?;
    let (Some(source), Some(target)) = (source, target) else {
        return Err(Revoked::Unknowable { run, what: "source or target cluster" });
    };
    match missing_for_run(pool, &operator, &mode, &source, &target).await? {
        None => Ok(()),
        Some(missing) => Err(Revoked::Missing { run, missing }),
    }
}

/// The re-check a batch makes before it touches a broker: `None` to go on, or what the job does instead.
///
/// A revoked grant stops the run (Stopped, with words naming the permission). When the run has a batch in doubt or
/// a refill whose outcome is unknown, that must be settled first while the target's duplicate cache still holds it
/// (docs/guarantees.md, I6), so the revocation is stored as the run's stop request (fenced) and the job is snoozed: its next
/// claim sees the request, settles, and stops with these words, as for an operator's stop. A run that is already
/// stopping goes its way.
pub async fn stop_if_revoked(ctx: &JobContext) -> Result<Option<Outcome>, crate::jobs::Error> {
    let run = ctx.job.run_id.0;
    let revoked = match recheck_run(&ctx.pool, run).await {
        Ok(()) => return Ok(None),
        Err(Revoked::Db(e)) => return Ok(Some(Revoked::Db(e).into_outcome())),
        Err(_) if ctx.stop_requested => return Ok(None),
        Err(revoked) => revoked,
    };
    let reason = revoked.to_string();
    let unsettled = relay::run_unsettled(&ctx.pool, run).await;
    match unsettled {
        Ok(false) => Ok(Some(Outcome::Stop { reason })),
        Ok(true) => {
            let mut tx = ctx.lease.begin().await?;
            // The same statements as an operator's stop request (the jobs store's), in the fenced transaction.
            let stored = async {
                let detail = json!({ "reason": reason, "by": "the permission re-check before a batch" });
                jobs_run::run_request_stop(&mut *tx.conn(), RunId(run), &reason).await?;
                record::run_event_insert(&mut *tx.conn(), RunId(run), "stop_requested", &detail).await
            }
            .await;
            if let Err(e) = stored {
                return Ok(Some(Outcome::Retry {
                    error: format!("recording a withdrawn grant's stop: {}", error_chain(&e)),
                    code: None,
                }));
            }
            tx.commit_progress().await?;
            Ok(Some(Outcome::Snooze {
                until: Utc::now(),
                reason: format!("{reason} (the batch in doubt is settled before the run stops)"),
            }))
        }
        Err(e) => Ok(Some(Outcome::Retry {
            error: format!("the run's permissions could not be re-checked: {e}"),
            code: None,
        })),
    }
}

/// A grant to add or remove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// Who holds it.
    pub principal: String,
    /// On which cluster (`*`: every cluster).
    pub cluster: String,
    /// What.
    pub permission: Permission,
}

impl Grant {
    fn target(&self) -> String {
        format!("grant:{}/{}/{}", self.principal, self.cluster, self.permission)
    }
}

/// Why a grant could not be changed or listed.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// The caller is not an admin of the grant's cluster.
    #[error(transparent)]
    Permission(#[from] PermissionError),
    /// The grant names no principal, or a cluster that is no cluster name.
    #[error("{0}")]
    Invalid(String),
    /// Postgres.
    #[error("the database: {0}")]
    Db(#[from] sqlx::Error),
}

impl GrantError {
    fn outcome(&self) -> &'static str {
        match self {
            GrantError::Permission(e) if e.is_refusal() => "refused",
            GrantError::Invalid(_) => "refused",
            _ => "error",
        }
    }
}

/// Whether somebody holds `admin` on `*`; until then grants are open (the bootstrap of a fresh database).
async fn bootstrapped(pool: &PgPool) -> Result<bool, sqlx::Error> {
    store::grant_admin_exists(pool).await
}

/// `Ok(bootstrap)` when `by` may change grants on `cluster`: the rule of [`require_admin_or_bootstrap`].
async fn may_administer(pool: &PgPool, by: &str, cluster: &str) -> Result<bool, GrantError> {
    Ok(require_admin_or_bootstrap(pool, by, cluster).await?)
}

/// Whether an admin command may bootstrap a fresh database (nobody holds `admin` on `*` yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bootstrap {
    /// The command line and the SQL path: whoever can reach the database sets the deployment up and makes the
    /// first admin.
    Allowed,
    /// The HTTP API: a service's caller never gets more than a grant gives it, fresh database or not — otherwise
    /// anyone holding a service token could change the deployment's settings before its first admin exists.
    Refused,
}

/// [`require_admin_or_bootstrap`] for an admin command (with `bootstrap` saying whether a fresh database's
/// bootstrap applies), with a refusal audited under the command's own `action` and `target` (with `detail` and the
/// refusal's words), as the command would have been: one rule and one audit row for the CLI and the HTTP API.
pub async fn require_admin_audited(
    pool: &PgPool,
    actor: &str,
    cluster: &str,
    bootstrap: Bootstrap,
    action: &str,
    target: String,
    mut detail: serde_json::Value,
) -> Result<bool, PermissionError> {
    let result = match bootstrap {
        Bootstrap::Allowed => require_admin_or_bootstrap(pool, actor, cluster).await,
        Bootstrap::Refused => require(pool, actor, cluster, Permission::Admin).await.map(|_| false),
    };
    if let Err(PermissionError::Missing(missing)) = &result {
        detail["error"] = json!(missing.to_string());
        let entry = AuditEntry {
            actor,
            action,
            target,
            outcome: "refused",
            detail,
            source_cluster: Some(cluster),
            target_cluster: None,
        };
        audit_entry(pool, &entry).await?;
    }
    result
}

/// `Ok(bootstrap)` when `principal` may run an admin command on `cluster` (`*`: on the whole deployment): they hold
/// `admin` on it or on `*`, or nobody holds `admin` on `*` yet (then `bootstrap` is true). The rule of `grant add`,
/// shared with the other commands that set a deployment up (`cluster add|remove`, `settings set`): a fresh database
/// must be usable before its first admin exists, and from then on only an admin may change it.
pub async fn require_admin_or_bootstrap(
    pool: &PgPool,
    principal: &str,
    cluster: &str,
) -> Result<bool, PermissionError> {
    if !bootstrapped(pool).await? {
        return Ok(true);
    }
    require(pool, principal, cluster, Permission::Admin).await?;
    Ok(false)
}

fn validate(grant: &Grant) -> Result<(), GrantError> {
    if grant.principal.trim().is_empty() {
        return Err(GrantError::Invalid("name the principal (the operator's name) the grant is for".into()));
    }
    let plain = grant.cluster.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && grant.cluster.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if grant.cluster != EVERY_CLUSTER && !plain {
        return Err(GrantError::Invalid(format!(
            "{:?} is not a cluster name: name a registered cluster, or * for every cluster",
            grant.cluster
        )));
    }
    Ok(())
}

async fn audited<T: Serialize>(
    pool: &PgPool,
    by: &str,
    action: &str,
    target: String,
    cluster: Option<&str>,
    mut detail: serde_json::Value,
    result: Result<T, GrantError>,
) -> Result<T, GrantError> {
    let outcome = match &result {
        Ok(done) => {
            detail["result"] = json!(done);
            "ok"
        }
        Err(e) => {
            detail["reason"] = json!(e.to_string());
            e.outcome()
        }
    };
    let entry = AuditEntry {
        actor: by,
        action,
        target,
        outcome,
        detail,
        source_cluster: Some(cluster.unwrap_or(EVERY_CLUSTER)),
        target_cluster: None,
    };
    match (result, audit_entry(pool, &entry).await) {
        (Ok(done), Ok(_)) => Ok(done),
        // An admin action that cannot be audited must not look fine.
        (Ok(_), Err(e)) => Err(e.into()),
        (Err(e), _) => Err(e),
    }
}

/// Adds a grant (`by` must be an admin of its cluster). Returns false when it existed already. Audited.
pub async fn grant(pool: &PgPool, by: &str, grant: &Grant) -> Result<bool, GrantError> {
    let mut bootstrap = false;
    let result = async {
        validate(grant)?;
        bootstrap = may_administer(pool, by, &grant.cluster).await?;
        Ok(store::grant_insert(pool, &grant.principal, &grant.cluster, grant.permission.as_str(), by).await?)
    }
    .await;
    let detail = json!({ "grant": grant, "bootstrap": bootstrap });
    audited(pool, by, "grant.add", grant.target(), Some(&grant.cluster), detail, result).await
}

/// Removes a grant (`by` must be an admin of its cluster). Returns false when there was none. Audited.
pub async fn revoke(pool: &PgPool, by: &str, grant: &Grant) -> Result<bool, GrantError> {
    let mut bootstrap = false;
    let result = async {
        validate(grant)?;
        bootstrap = may_administer(pool, by, &grant.cluster).await?;
        Ok(store::grant_delete(pool, &grant.principal, &grant.cluster, grant.permission.as_str()).await?)
    }
    .await;
    let detail = json!({ "grant": grant, "bootstrap": bootstrap });
    audited(pool, by, "grant.remove", grant.target(), Some(&grant.cluster), detail, result).await
}

/// The grants of `operator`, as they read their own: not audited, since reading is not an act (the console asks on
/// every page, and an audit row a call would bury the acts). Every other listing goes through [`list`].
pub async fn own(pool: &PgPool, operator: &str) -> Result<Vec<GrantRow>, GrantError> {
    Ok(store::grant_list(pool, Some(operator), None).await?)
}

/// Lists grants, optionally of one principal and one cluster. Anybody may list their own grants; every other
/// listing needs `admin` on `*`. Audited.
pub async fn list(
    pool: &PgPool,
    by: &str,
    principal: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<GrantRow>, GrantError> {
    let result = async {
        if principal != Some(by) {
            may_administer(pool, by, EVERY_CLUSTER).await?;
        }
        Ok(store::grant_list(pool, principal, cluster).await?)
    }
    .await;
    let detail = json!({ "principal": principal, "cluster": cluster, "rows": result.as_ref().map(Vec::len).ok() });
    let listed =
        audited(pool, by, "grant.list", "grants".into(), cluster, detail, result.map(|rows| (rows.len(), rows)))
            .await?;
    Ok(listed.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_round_trip_their_names() {
        for p in Permission::ALL {
            assert_eq!(p.as_str().parse::<Permission>(), Ok(p));
        }
        assert!("message:sned".parse::<Permission>().unwrap_err().contains("not a permission"));
        assert_eq!(Permission::on_source(Mode::Move), Permission::MessageMove);
        assert_eq!(Permission::on_source(Mode::Copy), Permission::MessageRead);
    }

    #[test]
    fn a_missing_grant_names_the_operator_the_permission_and_the_cluster() {
        let m = MissingGrant { principal: "alice".into(), permission: Permission::MessageSend, cluster: "west".into() };
        assert_eq!(m.to_string(), "operator alice lacks message:send on cluster west");
        let every = MissingGrant { principal: "bob".into(), permission: Permission::Admin, cluster: "*".into() };
        assert_eq!(every.to_string(), "operator bob lacks admin on every cluster (*)");
    }

    #[test]
    fn a_revoked_grant_stops_and_an_unreadable_database_retries() {
        let run = Uuid::nil();
        let missing =
            MissingGrant { principal: "alice".into(), permission: Permission::MessageSend, cluster: "west".into() };
        match (Revoked::Missing { run, missing }).into_outcome() {
            Outcome::Stop { reason } => {
                assert!(reason.starts_with("operator alice lacks message:send on cluster west"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!((Revoked::Db(sqlx::Error::PoolTimedOut)).into_outcome(), Outcome::Retry { .. }));
        assert!(matches!((Revoked::Unknowable { run, what: "operator" }).into_outcome(), Outcome::Stop { .. }));
    }

    #[test]
    fn grants_name_a_principal_and_a_cluster() {
        let g = |p: &str, c: &str| Grant { principal: p.into(), cluster: c.into(), permission: Permission::Admin };
        assert!(validate(&g("alice", "*")).is_ok());
        assert!(validate(&g("alice", "west-1.eu")).is_ok());
        assert!(validate(&g(" ", "west")).is_err());
        assert!(validate(&g("alice", "we st")).is_err());
        assert!(validate(&g("alice", "")).is_err());
    }
}
