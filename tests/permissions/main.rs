//! Permissions (docs/permissions.md), the audit on both clusters, and the Studio start path (issue 7), against the real test
//! bed: real previews of real queues, the SQL functions the Studio backend calls, the CLI as an operator types it,
//! and a real move whose grant is withdrawn between batches, judged by a census of payload ids.
//!
//! - `sql_start_path`: `transfer_execute` refuses a wrong plan hash, an unacknowledged finding, a wrong typed name,
//!   an expired preview, missing grants and an invisible run — each with its SQLSTATE and words, the same words
//!   as the Rust path, each audited on both clusters — and starts a valid run.
//! - `visibility`: an invisible cluster is not found (preview, targets, CLI); a target the caller may not send to
//!   is listed disabled, saying why.
//! - `revoked_mid_run`: a grant withdrawn mid-run stops the run with words naming the permission; nothing is lost
//!   or doubled, and a return puts the rest back.
//! - `admin_grants`: admin commands and grant changes need an admin grant; refusals are audited.
//! - `registry_and_settings`: `cluster add|remove` need admin on the cluster or on `*`, `settings set` admin on `*`;
//!   a refusal exits 4 in words, is audited and changes nothing; before the first admin on `*` they are open.

#[allow(dead_code)]
#[path = "../relay/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use artemis_transfer::api::error::ApiError;
use artemis_transfer::cli::run::refusal_words;
use artemis_transfer::transfer::actions::{self, ActionError, Confirmation};
use artemis_transfer::transfer::permissions::{self, Grant, Permission};
use artemis_transfer::transfer::relay::Phase;
use artemis_transfer::transfer::service::{
    preview_and_store, targets_for, PreviewRequest, ServiceError, StoredPreview,
};
use artemis_transfer::transfer::staging::staging_queue_name;
use artemis_transfer::transfer::{Mode, PreviewSettings, Selection};
use serde_json::{json, Value};
use sqlx::PgPool;
use testbed::fidelity::{self, Produce};
use testbed::{unique_name, TestBed, TestQueues};
use uuid::Uuid;

use support::{assert_accounting, census, create_queue, queue_ref, wait_for, Census, World, OPERATOR};

/// Gives `principal` `permission` on `cluster`, as the admin of the world.
async fn grant(pool: &PgPool, principal: &str, cluster: &str, permission: Permission) {
    let g = Grant { principal: principal.into(), cluster: cluster.into(), permission };
    permissions::grant(pool, OPERATOR, &g).await.unwrap();
}

/// A source queue on east-1 holding `count` messages `<label>-<n>`, removed with `queues`; returns its name and the
/// payload ids.
async fn source_with(queues: &TestQueues, label: &str, count: u32) -> (String, Vec<String>) {
    let bed = TestBed::require().await;
    let source = queues.name(bed.node("east-1"), &format!("{label}_src"));
    create_queue(bed.node("east-1"), &source).await;
    let prefix = format!("{label}-");
    fidelity::produce(bed.node("east-1"), &source, &Produce { count, prefix: prefix.clone(), ..Produce::default() })
        .await;
    (source, (0..count).map(|i| format!("{prefix}{i}")).collect())
}

/// A preview of moving the whole of `source` (east/east-1) to `target` (west/west-1), made by `operator`.
async fn preview_as(world: &World, operator: &str, source: &str, target: &str) -> Result<StoredPreview, ServiceError> {
    let request = PreviewRequest {
        mode: Mode::Move,
        source: queue_ref("east", "east-1", source),
        target: queue_ref("west", "west-1", target),
        selection: Selection::All,
        operator: operator.into(),
    };
    preview_and_store(&world.pool, &request, &PreviewSettings::default(), Duration::from_secs(600)).await
}

/// What `transfer_execute` answered: (sqlstate, message, detail).
async fn sql_execute(pool: &PgPool, run: Uuid, confirm: &Confirmation, operator: &str) -> (String, String, Value) {
    sqlx::query_as("SELECT sqlstate, message, detail FROM transfer_execute($1, $2, $3, $4, $5, $6)")
        .bind(run)
        .bind(&confirm.plan_hash)
        .bind(&confirm.acknowledged)
        .bind(&confirm.typed_queue)
        .bind(confirm.override_cap)
        .bind(operator)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The confirmation that arms `stored`.
fn valid(stored: &StoredPreview) -> Confirmation {
    Confirmation {
        plan_hash: stored.plan_hash.clone(),
        acknowledged: stored.preview.codes_to_acknowledge().iter().map(|c| c.to_string()).collect(),
        typed_queue: Some(stored.plan.source.queue.clone()),
        override_cap: true,
    }
}

/// The same confirmation by the SQL path and by the Rust path: both refuse with `sqlstate`, in the same words.
async fn refused_alike(world: &World, run: Uuid, confirm: &Confirmation, operator: &str, sqlstate: &str) -> String {
    refusal(world, run, confirm, operator, sqlstate).await.words
}

/// A refusal by both paths: the SQL path's words and detail, and the Rust path's error.
struct Refusal {
    words: String,
    detail: Value,
    error: ActionError,
}

/// [`refused_alike`], keeping the SQL path's detail and the Rust path's error.
async fn refusal(world: &World, run: Uuid, confirm: &Confirmation, operator: &str, sqlstate: &str) -> Refusal {
    let (state, message, detail) = sql_execute(&world.pool, run, confirm, operator).await;
    assert_eq!(state, sqlstate, "{message} {detail}");
    let rust = actions::execute(&world.pool, run, confirm, operator, 10).await.expect_err("the Rust path refuses too");
    assert_eq!(rust.to_string(), message, "the Rust path's words are the SQL path's");
    Refusal { words: message, detail, error: rust }
}

async fn run_state(pool: &PgPool, run: Uuid) -> String {
    sqlx::query_scalar("SELECT state FROM transfer_run WHERE id = $1").bind(run).fetch_one(pool).await.unwrap()
}

/// (outcome, sqlstate, source_cluster, target_cluster) of the audit rows of `action` on `run`, in order.
async fn audit_of(
    pool: &PgPool,
    action: &str,
    run: Uuid,
) -> Vec<(String, Option<String>, Option<String>, Option<String>)> {
    sqlx::query_as(
        "SELECT outcome, detail->>'sqlstate', source_cluster, target_cluster FROM audit \
         WHERE action = $1 AND target = $2 ORDER BY id",
    )
    .bind(action)
    .bind(format!("run:{run}"))
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn sql_start_path_refuses_what_is_not_confirmed_audits_it_and_starts_a_valid_run() {
    let queues = TestQueues::new();
    let world = World::new("perm_sql", &[]).await;
    let (source, _) = source_with(&queues, "perm_sql", 5).await;
    // No target queue: the run would create it, which the preview asks to acknowledge.
    let target = unique_name("perm_sql_dst");
    grant(&world.pool, "alice", "east", Permission::MessageMove).await;
    grant(&world.pool, "alice", "west", Permission::MessageSend).await;
    grant(&world.pool, "bob", "east", Permission::ClusterRead).await;
    grant(&world.pool, "bob", "west", Permission::ClusterRead).await;

    let stored = preview_as(&world, "alice", &source, &target).await.unwrap();
    assert!(stored.preview.can_start(), "{:#?}", stored.preview.findings);
    assert!(!stored.preview.codes_to_acknowledge().is_empty(), "a finding to acknowledge: {:#?}", stored.preview);
    let run = stored.run_id;
    let good = valid(&stored);
    // A second preview of the same queue, made before either runs.
    let rival = preview_as(&world, "alice", &source, &target).await.unwrap();

    let wrong_hash = Confirmation { plan_hash: "0".repeat(32), ..good.clone() };
    let Refusal { words, detail, error } = refusal(&world, run, &wrong_hash, "alice", "AT004").await;
    assert!(words.contains("is not the one run"), "{words}");
    assert!(matches!(&error, ActionError::PlanHash { given, .. } if *given == wrong_hash.plan_hash), "{error:?}");
    // No answer tells the hash it expects: echoing it is what shows the operator saw the preview.
    assert!(!words.contains(&stored.plan_hash) && !detail.to_string().contains(&stored.plan_hash), "{words} {detail}");
    assert!(!format!("{error:?}").contains(&stored.plan_hash), "{error:?}");

    let unacknowledged = Confirmation { acknowledged: Vec::new(), ..good.clone() };
    let Refusal { words, detail, error } = refusal(&world, run, &unacknowledged, "alice", "AT006").await;
    let first_code = stored.preview.codes_to_acknowledge()[0];
    assert!(words.starts_with("acknowledge these findings") && words.contains(first_code), "{words}");
    let codes: Vec<String> = stored.preview.codes_to_acknowledge().iter().map(|c| c.to_string()).collect();
    assert_eq!(detail, json!({ "codes": codes }));
    assert!(matches!(&error, ActionError::NotAcknowledged { codes: c } if *c == codes), "{error:?}");
    // Each edge says how to acknowledge in its own terms — the CLI its flag, the API its field — and the SQL
    // path's words neither.
    let cli = refusal_words(&error);
    assert!(cli.contains("(--ack <code>)") && !words.contains("--ack"), "{cli} / {words}");
    let api = ApiError::from(error);
    assert!(!api.message.contains("--ack") && api.message.contains("`acknowledged`"), "{}", api.message);

    let stray = Confirmation { acknowledged: vec!["not-a-finding".into()], ..good.clone() };
    let words = refused_alike(&world, run, &stray, "alice", "AT007").await;
    assert!(words.contains("did not raise not-a-finding"), "{words}");

    let mistyped = Confirmation { typed_queue: Some(format!("{source}x")), ..good.clone() };
    let Refusal { words, detail, error } = refusal(&world, run, &mistyped, "alice", "AT008").await;
    assert_eq!(detail, json!({ "expected": source, "typed": format!("{source}x") }));
    assert!(matches!(&error, ActionError::Confirmation { typed: Some(t), .. } if *t == format!("{source}x")));
    let cli = refusal_words(&error);
    assert!(cli.contains(&format!("(--confirm {source}): `{source}x` is not the source queue's name")), "{cli}");
    assert!(!words.contains("--confirm"), "{words}");

    let untyped = Confirmation { typed_queue: None, ..good.clone() };
    refused_alike(&world, run, &untyped, "alice", "AT008").await;

    let words = refused_alike(&world, run, &good, "bob", "AT012").await;
    assert_eq!(words, "operator bob lacks message:move on cluster east");

    // Carol holds no grant on either cluster: the run does not exist for her.
    let words = refused_alike(&world, run, &good, "carol", "AT001").await;
    assert_eq!(words, format!("there is no run {run}"));
    let (state, unknown, _) = sql_execute(&world.pool, Uuid::new_v4(), &good, "alice").await;
    assert_eq!((state.as_str(), unknown.starts_with("there is no run ")), ("AT001", true), "the same answer");

    sqlx::query("UPDATE transfer_run SET preview_expires_at = now() - interval '1 minute' WHERE id = $1")
        .bind(run)
        .execute(&world.pool)
        .await
        .unwrap();
    let words = refused_alike(&world, run, &good, "alice", "AT003").await;
    assert!(words.contains("expired at") && words.ends_with(": preview again"), "{words}");
    sqlx::query("UPDATE transfer_run SET preview_expires_at = now() + interval '10 minutes' WHERE id = $1")
        .bind(run)
        .execute(&world.pool)
        .await
        .unwrap();
    assert_eq!(run_state(&world.pool, run).await, "previewed", "no refusal changed the run");
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM job WHERE run_id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert_eq!(jobs, 0, "no refusal queued a job");

    // The Studio backend's call that arms it.
    let (state, message, detail) = sql_execute(&world.pool, run, &good, "alice").await;
    assert_eq!((state.as_str(), message), ("00000", format!("run {run} is queued")), "{detail}");
    assert_eq!(run_state(&world.pool, run).await, "queued", "the run left Previewed");
    let (job_id, kind, payload, seq): (i64, String, Value, i64) =
        sqlx::query_as("SELECT id, kind, payload, seq FROM job WHERE run_id = $1")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
    assert_eq!(detail, json!({ "job": job_id, "seq": 0 }));
    let first = Phase::Prepare.job();
    assert_eq!((kind, payload, seq), (first.kind, first.payload, 0), "the first job a move across nodes starts with");
    let (started_by, by): (String, String) =
        sqlx::query_as("SELECT started_by, confirmed->>'by' FROM transfer_run WHERE id = $1")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
    assert_eq!((started_by.as_str(), by.as_str()), ("alice", "alice"), "the run keeps who started it");

    // One active run per source queue: the rival preview cannot start now.
    let words = refused_alike(&world, rival.run_id, &valid(&rival), "alice", "AT010").await;
    assert_eq!(
        words,
        format!("another run is active on the source queue east/east-1/{source}: wait for it, or stop it")
    );
    assert_eq!(run_state(&world.pool, rival.run_id).await, "previewed");
    // Executed twice: refused, in the same words on both paths.
    let words = refused_alike(&world, run, &good, "alice", "AT002").await;
    assert_eq!(words, format!("run {run} is queued: execute applies only to a previewed run"));
    // Bob may see the run but not stop it: stopping needs what starting needed.
    let (state, message, _): (String, String, Value) =
        sqlx::query_as("SELECT sqlstate, message, detail FROM transfer_stop($1, 'done', 'bob')")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), message.as_str()), ("AT012", "operator bob lacks message:move on cluster east"));
    let (state, message, _): (String, String, Value) =
        sqlx::query_as("SELECT sqlstate, message, detail FROM transfer_stop($1, 'done', 'alice')")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
    assert_eq!((state.as_str(), message), ("00000", format!("run {run} stopped")), "no worker held its job");

    // Every attempt is audited, on both clusters, with its SQLSTATE.
    let both = (Some("east".to_string()), Some("west".to_string()));
    let trail = audit_of(&world.pool, "execute", run).await;
    let codes: Vec<(&str, Option<&str>)> = trail.iter().map(|(o, s, _, _)| (o.as_str(), s.as_deref())).collect();
    let refusal = |code| [("refused", Some(code)), ("refused", Some(code))];
    let mut expected: Vec<(&str, Option<&str>)> = Vec::new();
    for code in ["AT004", "AT006", "AT007", "AT008", "AT008", "AT012", "AT001"] {
        expected.extend(refusal(code));
    }
    expected.extend(refusal("AT003"));
    expected.push(("ok", None));
    expected.extend(refusal("AT002"));
    assert_eq!(codes, expected);
    assert!(trail.iter().all(|(_, _, s, t)| (s.clone(), t.clone()) == both), "{trail:?}");
    let stops = audit_of(&world.pool, "stop", run).await;
    assert_eq!(stops.len(), 2);
    assert!(stops.iter().all(|(_, _, s, t)| (s.clone(), t.clone()) == both), "{stops:?}");
    let previews = audit_of(&world.pool, "preview", run).await;
    assert_eq!(previews, [("ok".to_string(), None, both.0.clone(), both.1.clone())]);
    // Each cluster's trail shows them.
    for cluster in ["east", "west"] {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM transfer_audit_trail($1, 1000) WHERE target = $2")
            .bind(cluster)
            .bind(format!("run:{run}"))
            .fetch_one(&world.pool)
            .await
            .unwrap();
        assert_eq!(n as usize, trail.len() + stops.len() + previews.len(), "{cluster}");
    }
}

#[tokio::test]
async fn an_invisible_cluster_is_not_found_and_a_target_without_send_is_listed_disabled() {
    let queues = TestQueues::new();
    let world = World::new("perm_visible", &[]).await;
    let (source, _) = source_with(&queues, "perm_vis", 1).await;
    let target = unique_name("perm_vis_dst");
    // Dave sees west but may not send there; Erin does not see west at all.
    grant(&world.pool, "dave", "east", Permission::MessageMove).await;
    grant(&world.pool, "dave", "east", Permission::MessageSend).await;
    grant(&world.pool, "dave", "west", Permission::ClusterRead).await;
    grant(&world.pool, "erin", "east", Permission::MessageMove).await;

    let dave = targets_for(&world.pool, "dave", "east").await.unwrap();
    let listed: Vec<(&str, bool, Option<&str>)> =
        dave.iter().map(|t| (t.cluster.as_str(), t.enabled, t.reason.as_deref())).collect();
    assert_eq!(
        listed,
        [("east", true, None), ("west", false, Some("operator dave lacks message:send on cluster west"))]
    );
    let erin = targets_for(&world.pool, "erin", "east").await.unwrap();
    assert_eq!(erin.iter().map(|t| t.cluster.as_str()).collect::<Vec<_>>(), ["east"], "west is absent");
    let invisible = targets_for(&world.pool, "erin", "west").await.unwrap_err().to_string();
    let unregistered = targets_for(&world.pool, "erin", "north").await.unwrap_err().to_string();
    assert_eq!(invisible, "no cluster named west is registered");
    assert_eq!(unregistered, "no cluster named north is registered", "the same answer as an invisible one");

    // The preview: not found for Erin, refused naming the grant for Dave; both audited on both clusters.
    match preview_as(&world, "erin", &source, &target).await {
        Err(e @ ServiceError::Registry(_)) => assert_eq!(e.to_string(), invisible),
        other => panic!("{other:?}"),
    }
    match preview_as(&world, "dave", &source, &target).await {
        Err(e @ ServiceError::Permission(_)) => {
            assert_eq!(e.to_string(), "operator dave lacks message:send on cluster west")
        }
        other => panic!("{other:?}"),
    }
    type PreviewAudit = (String, String, String, Option<String>, Option<String>);
    let audited: Vec<PreviewAudit> = sqlx::query_as(
        "SELECT actor, outcome, detail->>'reason', source_cluster, target_cluster FROM audit \
         WHERE action = 'preview' ORDER BY id",
    )
    .fetch_all(&world.pool)
    .await
    .unwrap();
    let east_west = (Some("east".to_string()), Some("west".to_string()));
    assert_eq!(audited.len(), 2);
    assert_eq!(
        (audited[0].0.as_str(), audited[0].1.as_str(), audited[0].2.as_str()),
        ("erin", "refused", invisible.as_str())
    );
    assert_eq!(audited[1].0, "dave");
    assert!(audited.iter().all(|a| (a.3.clone(), a.4.clone()) == east_west), "{audited:?}");
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM transfer_run").fetch_one(&world.pool).await.unwrap();
    assert_eq!(runs, 0, "a refused preview stores no run");

    // The command line says the same.
    let dave_list = cli(&world, &["cluster", "list", "--from", "east", "--as", "dave"]);
    assert_eq!(dave_list.0, Some(0), "{dave_list:?}");
    assert!(dave_list.1.contains("east  enabled"), "{dave_list:?}");
    assert!(dave_list.1.contains("west  disabled: operator dave lacks message:send on cluster west"), "{dave_list:?}");
    let erin_list = cli(&world, &["cluster", "list", "--as", "erin"]);
    assert!(erin_list.1.starts_with("east  (") && !erin_list.1.contains("west"), "{erin_list:?}");
    let erin_preview = cli(
        &world,
        &["preview", "--as", "erin", "--from", &format!("east/east-1/{source}"), "--to", "west/west-1/q", "--all"],
    );
    assert_eq!(erin_preview.0, Some(4), "{erin_preview:?}");
    assert!(erin_preview.2.contains("no cluster named west is registered"), "{erin_preview:?}");
}

/// Runs the binary on the world's database: (exit code, stdout, stderr).
fn cli(world: &World, args: &[&str]) -> (Option<i32>, String, String) {
    cli_with(world, args, &[])
}

/// [`cli`] with extra environment variables.
fn cli_with(world: &World, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let bed = TestBed::get();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_artemis-transfer"))
        .args(args)
        .env("DATABASE_URL", &world.url)
        .env("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__USER", &bed.nodes[0].user)
        .env("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__PASSWORD", &bed.nodes[0].password)
        .env("RUST_LOG", "warn")
        .env_remove("ARTEMIS_TRANSFER_CONFIG")
        .env_remove("ARTEMIS_TRANSFER_OPERATOR")
        .env_remove("ARTEMIS_TRANSFER_ACTOR")
        .envs(env.iter().copied())
        .output()
        .expect("run artemis-transfer");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every id in `ids` is held exactly once by all of `places` together.
fn each_once_across(ids: &[String], places: &[&BTreeMap<String, usize>]) {
    let wrong: Vec<String> = ids
        .iter()
        .filter_map(|id| {
            let n: usize = places.iter().map(|p| p.get(id).copied().unwrap_or(0)).sum();
            (n != 1).then(|| format!("{id}×{n}"))
        })
        .collect();
    assert!(wrong.is_empty(), "not exactly once: {wrong:?}");
}

const LIMIT: Duration = Duration::from_secs(180);

async fn delivered(pool: &PgPool, run: Uuid) -> i64 {
    let c: Value =
        sqlx::query_scalar("SELECT counters FROM transfer_run WHERE id = $1").bind(run).fetch_one(pool).await.unwrap();
    c["delivered"].as_i64().unwrap_or(0)
}

#[tokio::test]
async fn a_grant_revoked_mid_run_stops_it_in_words_and_nothing_is_lost() {
    const COUNT: u32 = 2000;
    const BATCH: i64 = 50;
    let bed = TestBed::require().await;
    let (east1, west1) = (bed.node("east-1"), bed.node("west-1"));
    let queues = TestQueues::new();
    let (source, ids) = source_with(&queues, "perm_revoke", COUNT).await;
    let target = queues.name(west1, "perm_revoke_dst");
    create_queue(west1, &target).await;
    let mut world =
        World::new("perm_revoke", &[("batch_size", json!(BATCH)), ("messages_per_second", json!(200))]).await;
    grant(&world.pool, "frank", "east", Permission::MessageMove).await;
    grant(&world.pool, "frank", "west", Permission::MessageSend).await;
    // Without it, west would be invisible to Frank once the send grant goes, and so would his run.
    grant(&world.pool, "frank", "west", Permission::ClusterRead).await;
    world.spawn_worker("w1", &[]).await;

    let stored = preview_as(&world, "frank", &source, &target).await.unwrap();
    let run = stored.run_id;
    queues.add(east1, &staging_queue_name(run));
    actions::execute(&world.pool, run, &valid(&stored), "frank", 10).await.unwrap();
    wait_for("a few batches", LIMIT, || async { (delivered(&world.pool, run).await >= 3 * BATCH).then_some(()) }).await;

    let send = Grant { principal: "frank".into(), cluster: "west".into(), permission: Permission::MessageSend };
    assert!(permissions::revoke(&world.pool, OPERATOR, &send).await.unwrap());
    let at_revoke = delivered(&world.pool, run).await;
    let (_, stopped) = world.wait_run(run, &["stopped"], LIMIT).await;
    let reason: String = sqlx::query_scalar("SELECT stop_reason FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert!(reason.starts_with("operator frank lacks message:send on cluster west"), "{reason}");
    assert!(stopped.delivered < i64::from(COUNT), "the run stopped before the end: {stopped:?}");
    assert!(
        stopped.delivered <= at_revoke + 2 * BATCH,
        "at most the batch in flight finished after the revocation: {at_revoke} then {stopped:?}"
    );

    // Nothing lost, nothing doubled: each message is on the source, in staging, or on the target.
    let staging = format!("studio.transfer.{run}");
    let on_source = census(east1, &source).await;
    let in_staging = census(east1, &staging).await;
    let on_target = census(west1, &target).await;
    each_once_across(&ids, &[&on_source, &in_staging, &on_target]);
    assert_eq!(on_target.len() as i64, stopped.delivered, "the target holds what the run delivered");

    // Frank may not resume it (it needs the send grant back), but may return what staging holds.
    match actions::resume(&world.pool, run, "frank", 10).await {
        Err(ActionError::Permission(missing)) => {
            assert_eq!(missing.to_string(), "operator frank lacks message:send on cluster west")
        }
        other => panic!("{other:?}"),
    }
    actions::return_to_source(&world.pool, run, "frank", 10).await.unwrap();
    let (_, returned) = world.wait_run(run, &["returned"], LIMIT).await;
    let on_source = census(east1, &source).await;
    let on_target = census(west1, &target).await;
    each_once_across(&ids, &[&on_source, &on_target]);
    assert_eq!(on_target.len() as i64, returned.delivered);
    // The run was stopped between batches: the return put back what staging held then.
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source).returned(&in_staging));

    let both = (Some("east".to_string()), Some("west".to_string()));
    let resumes = audit_of(&world.pool, "resume", run).await;
    assert_eq!(resumes, [("refused".to_string(), Some("AT012".to_string()), both.0.clone(), both.1.clone())]);
    let returns = audit_of(&world.pool, "return", run).await;
    assert_eq!(returns, [("ok".to_string(), None, both.0.clone(), both.1.clone())]);
    world.workers.pop().unwrap().stop().await;
}

/// A worker dies right after recording its first batch as in doubt; the grant is withdrawn before another worker
/// claims the run. The batch in doubt is settled first (docs/guarantees.md, I6: the target's duplicate cache still holds it),
/// then the run stops with the words of the missing grant.
#[tokio::test]
async fn a_grant_revoked_while_a_batch_is_in_doubt_settles_it_first_then_stops() {
    const COUNT: u32 = 300;
    let bed = TestBed::require().await;
    let (east1, west1) = (bed.node("east-1"), bed.node("west-1"));
    let queues = TestQueues::new();
    let (source, ids) = source_with(&queues, "perm_doubt", COUNT).await;
    let target = queues.name(west1, "perm_doubt_dst");
    create_queue(west1, &target).await;
    let mut world = World::new("perm_doubt", &[("batch_size", json!(20))]).await;
    for (cluster, permission) in
        [("east", Permission::MessageMove), ("west", Permission::MessageSend), ("west", Permission::ClusterRead)]
    {
        grant(&world.pool, "grace", cluster, permission).await;
    }
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "in-doubt:1")]).await;
    let stored = preview_as(&world, "grace", &source, &target).await.unwrap();
    let run = stored.run_id;
    queues.add(east1, &staging_queue_name(run));
    actions::execute(&world.pool, run, &valid(&stored), "grace", 10).await.unwrap();
    world.workers[doomed].wait_exit(LIMIT).await;
    let in_doubt: Value = sqlx::query_scalar("SELECT relay->'in_doubt' FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert!(in_doubt.as_array().is_some_and(|ids| !ids.is_empty()), "a batch is in doubt: {in_doubt}");

    let send = Grant { principal: "grace".into(), cluster: "west".into(), permission: Permission::MessageSend };
    permissions::revoke(&world.pool, OPERATOR, &send).await.unwrap();
    world.spawn_worker("w2", &[]).await;
    let (_, stopped) = world.wait_run(run, &["stopped"], LIMIT).await;
    let (reason, in_doubt): (String, Value) =
        sqlx::query_as("SELECT stop_reason, relay->'in_doubt' FROM transfer_run WHERE id = $1")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
    assert!(reason.starts_with("operator grace lacks message:send on cluster west"), "{reason}");
    assert_eq!(in_doubt, json!([]), "the batch in doubt was settled before the run stopped");
    let events: Vec<(String, Value)> =
        sqlx::query_as("SELECT kind, detail FROM run_event WHERE run_id = $1 AND kind = 'stop_requested'")
            .bind(run)
            .fetch_all(&world.pool)
            .await
            .unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].1["by"], "the permission re-check before a batch");

    let staging = format!("studio.transfer.{run}");
    let on_source = census(east1, &source).await;
    let in_staging = census(east1, &staging).await;
    let on_target = census(west1, &target).await;
    each_once_across(&ids, &[&on_source, &in_staging, &on_target]);
    assert_eq!(on_target.len() as i64, stopped.delivered, "the target holds what the run delivered");
    // No assert_accounting: the run ends Stopped (resumable), not at an end where I2 holds; what it has not taken yet
    // is counted only when it ends.
    world.workers.pop().unwrap().stop().await;
}

#[tokio::test]
async fn admin_commands_and_grant_changes_need_an_admin_grant_and_refusals_are_audited() {
    let world = World::new("perm_admin", &[]).await;

    let refused = cli(&world, &["grant", "add", "zed", "west", "message:send", "--as", "mallory"]);
    assert_eq!(refused.0, Some(4), "{refused:?}");
    assert!(refused.2.contains("refused: operator mallory lacks admin on cluster west"), "{refused:?}");
    let jobs = cli(&world, &["admin", "--as", "mallory", "jobs"]);
    assert_eq!(jobs.0, Some(4), "{jobs:?}");
    assert!(jobs.2.contains("operator mallory lacks admin on every cluster (*)"), "{jobs:?}");

    // An admin of west may grant on west; the grantee lists their own grants.
    grant(&world.pool, "wendy", "west", Permission::Admin).await;
    let added = cli(&world, &["grant", "add", "zed", "west", "message:send", "--as", "wendy"]);
    assert_eq!(added.0, Some(0), "{added:?}");
    assert!(permissions::has_grant(&world.pool, "zed", "west", Permission::MessageSend).await.unwrap());
    let own = cli(&world, &["grant", "list", "zed", "--as", "zed", "--json"]);
    let rows: Vec<Value> = own.1.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(rows[0]["permission"], "message:send", "{own:?}");
    let others = cli(&world, &["grant", "list", "--as", "zed"]);
    assert_eq!(others.0, Some(4), "listing everybody's grants needs admin on *: {others:?}");

    let audited: Vec<(String, String, String, Option<String>)> = sqlx::query_as(
        "SELECT actor, action, outcome, source_cluster FROM audit WHERE actor IN ('mallory', 'wendy', 'zed') ORDER BY id",
    )
    .fetch_all(&world.pool)
    .await
    .unwrap();
    let seen: Vec<(&str, &str, &str, Option<&str>)> =
        audited.iter().map(|(a, b, c, d)| (a.as_str(), b.as_str(), c.as_str(), d.as_deref())).collect();
    assert_eq!(
        seen,
        [
            ("mallory", "grant.add", "refused", Some("west")),
            ("mallory", "jobs.list", "refused", Some("*")),
            ("wendy", "grant.add", "ok", Some("west")),
            ("zed", "grant.list", "ok", Some("*")),
            ("zed", "grant.list", "refused", Some("*")),
        ]
    );
}

/// `cluster add <name>` seeded from the test-bed node `seed`, with the `testbed` credentials, then `extra`.
fn cluster_add(world: &World, name: &str, seed: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let core_url = TestBed::get().node(seed).registered_core_url();
    let mut args = vec!["cluster", "add", name, "--core-url", &core_url, "--credentials", "testbed"];
    args.extend_from_slice(extra);
    cli(world, &args)
}

/// The registered clusters with their number of nodes.
async fn registry(pool: &PgPool) -> Vec<(String, i64)> {
    sqlx::query_as(
        "SELECT c.name, count(n.name) FROM cluster c LEFT JOIN cluster_node n ON n.cluster = c.name \
         GROUP BY c.name ORDER BY c.name",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// (value, changed by) of a setting.
async fn setting(pool: &PgPool, key: &str) -> (Value, String) {
    sqlx::query_as("SELECT value, updated_by FROM setting WHERE key = $1").bind(key).fetch_one(pool).await.unwrap()
}

/// (actor, action, target, outcome, source_cluster, detail) of the audit rows of the registry and settings
/// commands, in order.
async fn admin_audit(pool: &PgPool) -> Vec<(String, String, String, String, Option<String>, Value)> {
    sqlx::query_as(
        "SELECT actor, action, target, outcome, source_cluster, detail FROM audit \
         WHERE action IN ('cluster.add', 'cluster.remove', 'settings.set') ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn registry_and_settings_changes_need_an_admin_grant_and_refusals_are_audited_and_change_nothing() {
    // The world's operators hold admin on `*`, so the bootstrap is over.
    let world = World::new("perm_registry", &[]).await;
    grant(&world.pool, "nora", "north", Permission::Admin).await;
    grant(&world.pool, "eve", "east", Permission::Admin).await;
    let clusters = registry(&world.pool).await;
    assert_eq!(clusters, [("east".to_string(), 2), ("west".to_string(), 1)], "the world's clusters");
    let batch_size = setting(&world.pool, "batch_size").await;

    // Mallory holds nothing. The grant is checked first: credentials that are not exported do not get her further.
    let add = cluster_add(&world, "north", "east-1", &["--as", "mallory"]);
    assert_eq!(add.0, Some(4), "{add:?}");
    assert_eq!(add.2.trim(), "refused: operator mallory lacks admin on cluster north", "{add:?}");
    let blind = cli(
        &world,
        &["cluster", "add", "north", "--core-url", "tcp://127.0.0.1:1", "--credentials", "nope", "--as", "mallory"],
    );
    assert_eq!(blind.0, Some(4), "refused before the credentials are read or a broker is asked: {blind:?}");
    assert!(blind.2.contains("lacks admin on cluster north") && !blind.2.contains("NOPE"), "{blind:?}");
    let remove = cli(&world, &["cluster", "remove", "west", "--operator", "mallory"]);
    assert_eq!(remove.0, Some(4), "{remove:?}");
    assert_eq!(remove.2.trim(), "refused: operator mallory lacks admin on cluster west", "{remove:?}");
    let set = cli(&world, &["settings", "set", "batch_size", "777", "--as", "mallory"]);
    assert_eq!(set.0, Some(4), "{set:?}");
    assert_eq!(set.2.trim(), "refused: operator mallory lacks admin on every cluster (*)", "{set:?}");
    // An admin of one cluster may not change what every cluster shares, nor remove another cluster.
    let set = cli_with(&world, &["settings", "set", "batch_size", "777"], &[("ARTEMIS_TRANSFER_OPERATOR", "eve")]);
    assert_eq!(set.0, Some(4), "{set:?}");
    assert_eq!(set.2.trim(), "refused: operator eve lacks admin on every cluster (*)", "{set:?}");
    let remove = cli(&world, &["cluster", "remove", "west", "--as", "eve"]);
    assert_eq!(remove.0, Some(4), "{remove:?}");
    assert_eq!(registry(&world.pool).await, clusters, "no refusal changed the registry");
    assert_eq!(setting(&world.pool, "batch_size").await, batch_size, "no refusal changed a setting");

    // An admin of north may register north (secure-1: west-1's brokers belong to west already); an admin of `*` may
    // remove it and change a setting.
    let add = cluster_add(&world, "north", "secure-1", &["--as", "nora"]);
    assert_eq!(add.0, Some(0), "{add:?}");
    assert!(add.1.starts_with("Registered cluster north with 1 node(s)"), "{add:?}");
    assert_eq!(registry(&world.pool).await.len(), 3);
    // Allowed, but the registry says no: audited too.
    let again = cluster_add(&world, "north", "secure-1", &["--as", "nora"]);
    assert_eq!(again.0, Some(4), "{again:?}");
    assert!(again.2.contains("a cluster named north is already registered"), "{again:?}");
    let remove = cli(&world, &["cluster", "remove", "north", "--as", OPERATOR]);
    assert_eq!(remove.0, Some(0), "{remove:?}");
    assert_eq!(registry(&world.pool).await, clusters);
    let set = cli(&world, &["settings", "set", "batch_size", "777", "--as", OPERATOR]);
    assert_eq!(set.0, Some(0), "{set:?}");
    assert_eq!(setting(&world.pool, "batch_size").await, (json!(777), OPERATOR.to_string()));

    let trail = admin_audit(&world.pool).await;
    let seen: Vec<(&str, &str, &str, &str, Option<&str>)> = trail
        .iter()
        .map(|(actor, action, target, outcome, cluster, _)| {
            (actor.as_str(), action.as_str(), target.as_str(), outcome.as_str(), cluster.as_deref())
        })
        .collect();
    let expected = [
        ("mallory", "cluster.add", "cluster:north", "refused", Some("north")),
        ("mallory", "cluster.add", "cluster:north", "refused", Some("north")),
        ("mallory", "cluster.remove", "cluster:west", "refused", Some("west")),
        ("mallory", "settings.set", "setting batch_size", "refused", Some("*")),
        ("eve", "settings.set", "setting batch_size", "refused", Some("*")),
        ("eve", "cluster.remove", "cluster:west", "refused", Some("west")),
        ("nora", "cluster.add", "cluster:north", "ok", Some("north")),
        ("nora", "cluster.add", "cluster:north", "refused", Some("north")),
        (OPERATOR, "cluster.remove", "cluster:north", "ok", Some("north")),
        (OPERATOR, "settings.set", "setting batch_size", "ok", Some("*")),
    ];
    assert_eq!(seen, expected);
    assert_eq!(trail[0].5["error"], "operator mallory lacks admin on cluster north", "the refusal's words");
    let added = trail.iter().find(|t| t.3 == "ok").unwrap();
    assert_eq!((&added.5["nodes"], &added.5["bootstrap"]), (&json!(["secure-1"]), &json!(false)), "{added:?}");
}

#[tokio::test]
async fn before_the_first_admin_on_every_cluster_registry_and_settings_changes_are_open() {
    let world = World::new("perm_bootstrap", &[]).await;
    // A fresh deployment: nobody holds any grant yet (the world's own grants are taken away).
    sqlx::query("DELETE FROM transfer_grant").execute(&world.pool).await.unwrap();

    let add = cluster_add(&world, "north", "secure-1", &["--as", "newbie"]);
    assert_eq!(add.0, Some(0), "{add:?}");
    let set = cli(&world, &["settings", "set", "batch_size", "321", "--as", "newbie"]);
    assert_eq!(set.0, Some(0), "{set:?}");
    assert_eq!(setting(&world.pool, "batch_size").await, (json!(321), "newbie".to_string()));
    let remove = cli(&world, &["cluster", "remove", "north", "--as", "newbie"]);
    assert_eq!(remove.0, Some(0), "{remove:?}");
    assert!(registry(&world.pool).await.iter().all(|(name, _)| name != "north"));

    // The first admin on `*` ends the bootstrap: the same commands by the same operator are refused now.
    let first = cli(&world, &["grant", "add", "root", "*", "admin", "--as", "newbie"]);
    assert_eq!(first.0, Some(0), "{first:?}");
    let add = cluster_add(&world, "north", "secure-1", &["--as", "newbie"]);
    assert_eq!(add.0, Some(4), "{add:?}");
    let set = cli(&world, &["settings", "set", "batch_size", "654", "--as", "newbie"]);
    assert_eq!(set.0, Some(4), "{set:?}");
    assert_eq!(setting(&world.pool, "batch_size").await, (json!(321), "newbie".to_string()));

    let trail = admin_audit(&world.pool).await;
    let seen: Vec<(&str, &str, &str)> = trail
        .iter()
        .map(|(actor, action, _, outcome, _, _)| (actor.as_str(), action.as_str(), outcome.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("newbie", "cluster.add", "ok"),
            ("newbie", "settings.set", "ok"),
            ("newbie", "cluster.remove", "ok"),
            ("newbie", "cluster.add", "refused"),
            ("newbie", "settings.set", "refused"),
        ]
    );
    assert_eq!(trail[0].5["bootstrap"], true, "the audit row says the bootstrap allowed it: {:?}", trail[0]);
    assert_eq!(trail[2].5["bootstrap"], true, "{:?}", trail[2]);
}
