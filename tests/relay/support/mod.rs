//! What every end-to-end move test needs: a fresh database with both test-bed clusters registered, worker
//! processes (the real binary), a preview-and-execute shortcut, waiting for a run to end, and the census of
//! payload ids taken by the Java helper.

#[allow(dead_code)]
#[path = "../../jobs/support/process.rs"]
pub mod process;
#[allow(dead_code)]
pub mod west;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use artemis_transfer::broker::jolokia::{BrokerManagement, Endpoint, JolokiaClient, QueueConfig};
use artemis_transfer::registry::discover::{discover, Seed};
use artemis_transfer::registry::{store, Cluster, Credentials};
use artemis_transfer::transfer::actions::{self, Confirmation};
use artemis_transfer::transfer::relay::state::Counters;
use artemis_transfer::transfer::service::{preview_and_store, PreviewRequest, StoredPreview};
use artemis_transfer::transfer::{Kind, Mode, PreviewSettings, QueueRef, Selection};
use sqlx::PgPool;
use testbed::fidelity;
use testbed::scratch::ScratchBroker;
use testbed::{Node, NodeRole, TestBed};

use self::process::WorkerProcess;

/// Waits until `check` gives a value, at most `limit`.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "gave up after {limit:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The registry names the test bed's credentials `testbed`.
fn export_credentials(bed: &TestBed) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::env::set_var("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__USER", &bed.nodes[0].user);
        std::env::set_var("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__PASSWORD", &bed.nodes[0].password);
    });
}

/// A management client straight to a test-bed node (for test set-up, not through the product).
pub fn management(node: &Node) -> BrokerManagement {
    let endpoint = Endpoint {
        node: node.name.clone(),
        url: node.jolokia_url(),
        user: node.user.clone(),
        password: node.password.clone().into(),
        origin: None,
        tls: artemis_transfer::registry::tls::of_endpoint(&node.registered_core_url(), None),
    };
    BrokerManagement::new(JolokiaClient::new(endpoint, Duration::from_secs(30)), node.name.clone())
}

/// Registers the test bed's TLS node (`secure-1`) in `world` as the one-node cluster `secure`, from its Core URL
/// with the TLS parameters and the client certificate, as an operator would.
pub async fn register_secure(world: &World) {
    let node = TestBed::get().node("secure-1");
    let seed = Seed {
        jolokia_url: node.jolokia_url(),
        core_url: Some(node.registered_core_url()),
        jolokia_by_core: BTreeMap::new(),
    };
    let credentials = Credentials::from_env("testbed").unwrap();
    let nodes = discover(&seed, &credentials, Duration::from_secs(10)).await.unwrap();
    assert!(nodes[0].endpoints.iter().all(|e| e.core_url.contains("sslEnabled=true")), "{nodes:?}");
    store::add(&world.pool, &Cluster { name: "secure".into(), credentials_ref: "testbed".into(), nodes })
        .await
        .unwrap();
}

/// Creates a plain durable anycast queue `name` on `node`.
pub async fn create_queue(node: &Node, name: &str) {
    management(node).create_queue(&QueueConfig::plain_anycast(name)).await.unwrap();
}

/// Removes the queues a test made, with their messages: the brokers have 512 MiB heaps, and what one test leaves
/// behind every later test of the run pays for. A queue already gone is fine. (The test bed's helper, shared by
/// every suite; a test may rather hold a [`testbed::TestQueues`], which removes them even when the test fails.)
pub async fn remove_queues(queues: &[(&Node, &str)]) {
    testbed::remove_queues(queues).await;
}

/// A new queue on east-1 holding `count` messages of the Java helper's `kinds` (payload ids `<label>-<n>`) and an
/// empty new queue on west-1: (source, target, payload ids).
pub async fn source_and_target_of(label: &str, count: u32, kinds: &str) -> (String, String, Vec<String>) {
    let bed = TestBed::require().await;
    let source = testbed::unique_name(&format!("{label}_src"));
    let target = testbed::unique_name(&format!("{label}_dst"));
    create_queue(bed.node("east-1"), &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let prefix = format!("{label}-");
    let produce = fidelity::Produce { count, prefix: prefix.clone(), kinds: kinds.into(), ..Default::default() };
    fidelity::produce(bed.node("east-1"), &source, &produce).await;
    (source, target, (0..count).map(|i| format!("{prefix}{i}")).collect())
}

/// [`source_and_target_of`] with messages of every kind.
pub async fn source_and_target(label: &str, count: u32) -> (String, String, Vec<String>) {
    source_and_target_of(label, count, &fidelity::Produce::default().kinds).await
}

/// The operator the shortcuts of [`World`] act as.
pub const OPERATOR: &str = "tester";

/// Gives `principal` admin on every cluster (written as the Studio backend would, straight into the table).
pub async fn grant_all(pool: &PgPool, principal: &str) {
    sqlx::query(
        "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ($1, '*', 'admin', 'test') \
         ON CONFLICT DO NOTHING",
    )
    .bind(principal)
    .execute(pool)
    .await
    .unwrap();
}

/// One test's world: its own database with `east` and `west` registered, and its workers.
pub struct World {
    pub url: String,
    pub pool: PgPool,
    pub log_dir: PathBuf,
    pub workers: Vec<WorkerProcess>,
}

impl World {
    /// A fresh database, migrated, both clusters registered; `settings` overrides (key, JSON value).
    pub async fn new(label: &str, settings: &[(&str, serde_json::Value)]) -> World {
        TestBed::require().await;
        let url = testbed::postgres::fresh_database(label).await;
        World::on_database(label, url, settings).await
    }

    /// Like [`World::new`] on the empty database at `url` (a private cluster a test may restart).
    pub async fn on_database(label: &str, url: String, settings: &[(&str, serde_json::Value)]) -> World {
        let bed = TestBed::require().await;
        export_credentials(bed);
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(5).connect(&url).await.unwrap();
        let defaults = artemis_transfer::config::Config::from_sources(None, Vec::new()).unwrap().settings;
        artemis_transfer::jobs::migrate(&pool, &defaults, "test").await.unwrap();
        for (key, value) in settings {
            artemis_transfer::jobs::settings::set(&pool, key, value.clone(), "test").await.unwrap();
        }
        let credentials = Credentials::from_env("testbed").unwrap();
        for (cluster, seed) in [("east", "east-1"), ("west", "west-1")] {
            let seed =
                Seed { jolokia_url: bed.node(seed).jolokia_url(), core_url: None, jolokia_by_core: BTreeMap::new() };
            let nodes = discover(&seed, &credentials, Duration::from_secs(10)).await.unwrap();
            store::add(&pool, &Cluster { name: cluster.into(), credentials_ref: "testbed".into(), nodes })
                .await
                .unwrap();
        }
        // The operators the tests act as ("tester"; "test" for runs started through the engine) may do anything
        // on every cluster: a run re-checks its operator's grants before every batch (docs/permissions.md).
        for operator in [OPERATOR, "test"] {
            grant_all(&pool, operator).await;
        }
        let log_dir = bed.dir.join("test-logs").join(testbed::unique_name(label));
        std::fs::create_dir_all(&log_dir).unwrap();
        World { url, pool, log_dir, workers: Vec::new() }
    }

    /// The environment a worker process of this world runs with (plus `extra`).
    pub fn worker_env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let bed = TestBed::get();
        let mut env = process::fast_lease_env(6.0, 1.0);
        env.push(("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__USER".into(), bed.nodes[0].user.clone()));
        env.push(("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__PASSWORD".into(), bed.nodes[0].password.clone()));
        env.push(("TMPDIR".into(), self.log_dir.display().to_string()));
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        env
    }

    /// Starts a worker process named `name` and waits until it claims.
    pub async fn spawn_worker(&mut self, name: &str, extra: &[(&str, &str)]) -> usize {
        let worker = WorkerProcess::spawn(&self.url, name, 2, &self.worker_env(extra), &self.log_dir);
        worker.ready().await;
        self.workers.push(worker);
        self.workers.len() - 1
    }

    /// Previews a move and checks it may run once its needs-acknowledgement codes are acknowledged.
    pub async fn preview_move(&self, source: QueueRef, target: QueueRef, selection: Selection) -> StoredPreview {
        self.preview(Mode::Move, source, target, selection).await
    }

    /// Previews and stores a copy; asserts the preview refused nothing.
    pub async fn preview_copy(&self, source: QueueRef, target: QueueRef, selection: Selection) -> StoredPreview {
        self.preview(Mode::Copy, source, target, selection).await
    }

    /// Previews a retry of `source`'s selected messages to their original queues; asserts it refused nothing.
    pub async fn preview_retry(&self, source: QueueRef, selection: Selection) -> StoredPreview {
        let request =
            PreviewRequest { mode: Mode::Move, target: source.clone(), source, selection, operator: "tester".into() };
        let stored = artemis_transfer::transfer::retry::preview_retry_and_store(
            &self.pool,
            &request,
            &PreviewSettings::default(),
            Duration::from_secs(600),
        )
        .await
        .unwrap();
        Self::assert_not_refused(&stored);
        stored
    }

    async fn preview(&self, mode: Mode, source: QueueRef, target: QueueRef, selection: Selection) -> StoredPreview {
        self.preview_with(mode, source, target, selection, &PreviewSettings::default()).await
    }

    /// Previews and stores a run with the preview's `settings`; asserts the preview refused nothing.
    pub async fn preview_with(
        &self,
        mode: Mode,
        source: QueueRef,
        target: QueueRef,
        selection: Selection,
        settings: &PreviewSettings,
    ) -> StoredPreview {
        let request = PreviewRequest { mode, source, target, selection, operator: "tester".into() };
        let stored = preview_and_store(&self.pool, &request, settings, Duration::from_secs(600)).await.unwrap();
        Self::assert_not_refused(&stored);
        stored
    }

    fn assert_not_refused(stored: &StoredPreview) {
        let refused: Vec<_> = stored.preview.findings.iter().filter(|f| f.kind == Kind::Refused).collect();
        assert!(refused.is_empty(), "the preview refused the run: {refused:#?}");
    }

    /// Executes a stored preview, acknowledging everything it raised.
    pub async fn execute(&self, stored: &StoredPreview) {
        self.execute_with_budget(stored, 10).await;
    }

    /// Confirms and executes a stored preview; each of the run's jobs gets `max_attempts` attempts.
    pub async fn execute_with_budget(&self, stored: &StoredPreview, max_attempts: i32) {
        let confirm = Confirmation {
            plan_hash: stored.plan_hash.clone(),
            acknowledged: stored.preview.codes_to_acknowledge().iter().map(|c| c.to_string()).collect(),
            typed_queue: Some(stored.plan.source.queue.clone()),
            override_cap: true,
        };
        actions::execute(&self.pool, stored.run_id, &confirm, "tester", max_attempts).await.unwrap();
    }

    /// The run's state and counters now.
    pub async fn state(&self, run: uuid::Uuid) -> (String, Counters) {
        let (state, counters): (String, serde_json::Value) =
            sqlx::query_as("SELECT state, counters FROM transfer_run WHERE id = $1")
                .bind(run)
                .fetch_one(&self.pool)
                .await
                .unwrap();
        (state, serde_json::from_value(counters).unwrap())
    }

    /// The code of the run's last `failed` or `retries_exhausted` event (`None` when it has none, or no code).
    pub async fn end_code(&self, run: uuid::Uuid) -> Option<String> {
        sqlx::query_scalar(
            "SELECT detail->>'code' FROM run_event WHERE run_id = $1 \
             AND kind IN ('failed', 'retries_exhausted') ORDER BY id DESC LIMIT 1",
        )
        .bind(run)
        .fetch_optional(&self.pool)
        .await
        .unwrap()
        .flatten()
    }

    /// Waits until the run is in one of `states`; returns the state and counters.
    pub async fn wait_run(&self, run: uuid::Uuid, states: &[&str], limit: Duration) -> (String, Counters) {
        let log_dir = self.log_dir.clone();
        let pool = self.pool.clone();
        let found = tokio::time::timeout(limit, async {
            loop {
                let (state, counters, error): (String, serde_json::Value, Option<String>) =
                    sqlx::query_as("SELECT state, counters, last_error FROM transfer_run WHERE id = $1")
                        .bind(run)
                        .fetch_one(&pool)
                        .await
                        .unwrap();
                if states.contains(&state.as_str()) {
                    if matches!(state.as_str(), "succeeded" | "partial" | "unproven") {
                        assert_end_judged(&pool, run, &state).await;
                    }
                    return (state, serde_json::from_value(counters).unwrap());
                }
                if matches!(state.as_str(), "failed" | "interrupted") && !states.contains(&state.as_str()) {
                    panic!("run {run} ended {state}: {error:?} (worker logs in {})", log_dir.display());
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        })
        .await;
        match found {
            Ok(v) => v,
            Err(_) => {
                let state: String = sqlx::query_scalar(
                    "SELECT state || ' ' || coalesce(last_error, '') FROM transfer_run WHERE id = $1",
                )
                .bind(run)
                .fetch_one(&self.pool)
                .await
                .unwrap();
                panic!("run {run} not {states:?} after {limit:?}: {state} (worker logs in {})", self.log_dir.display())
            }
        }
    }
}

/// Every transfer run that ends Succeeded, Partial or Unproven judged its end (`end_proof`, issues 13 and 27): a
/// Succeeded run's end is proven — its numbers account for what the broker counted at t0, or, where no count could
/// say (a restart, a selection too large to count), a full pass over the source found nothing left; an Unproven
/// run's is not, and says so.
async fn assert_end_judged(pool: &PgPool, run: uuid::Uuid, state: &str) {
    let transfer: bool = sqlx::query_scalar("SELECT plan IS NOT NULL FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(pool)
        .await
        .unwrap();
    if !transfer {
        // A probe run of the job engine's own tests: no messages, nothing to prove.
        return;
    }
    let proofs: Vec<serde_json::Value> =
        sqlx::query_scalar("SELECT detail FROM run_event WHERE run_id = $1 AND kind = 'end_proof' ORDER BY id")
            .bind(run)
            .fetch_all(pool)
            .await
            .unwrap();
    let last = proofs.last().unwrap_or_else(|| panic!("run {run} ended {state} without an end_proof event"));
    match state {
        "succeeded" => {
            assert_eq!(last["proven"], serde_json::json!(true), "run {run} ended succeeded unproven: {last}")
        }
        "unproven" => {
            assert_eq!(last["proven"], serde_json::json!(false), "run {run} ended unproven but proven: {last}")
        }
        _ => {}
    }
}

/// A Core connection to `node` as the test bed's user.
pub async fn connect(node: &Node) -> artemis_core::Connection {
    let options = artemis_core::ConnectOptions::from_url(&node.core_url())
        .unwrap()
        .credentials(node.user.clone(), node.password.clone())
        .connection_ttl(Duration::from_secs(10));
    artemis_core::Connection::connect(&options).await.unwrap()
}

/// The run's proof of its end (its one `end_proof` event) says it is proven, not merely ended.
pub async fn assert_proven(world: &World, run: uuid::Uuid) {
    let proofs: Vec<serde_json::Value> =
        sqlx::query_scalar("SELECT detail FROM run_event WHERE run_id = $1 AND kind = 'end_proof' ORDER BY id")
            .bind(run)
            .fetch_all(&world.pool)
            .await
            .unwrap();
    assert_eq!(proofs.len(), 1, "{proofs:?}");
    assert_eq!(proofs[0]["proven"], serde_json::json!(true), "{proofs:?}");
}

/// `cluster/node/queue` on the test bed.
pub fn queue_ref(cluster: &str, node: &str, queue: &str) -> QueueRef {
    QueueRef { cluster: cluster.into(), node: node.into(), queue: queue.into(), address: None }
}

/// The census of a queue, by browsing it with the Java client.
pub async fn census(node: &Node, queue: &str) -> BTreeMap<String, usize> {
    fidelity::census(&fidelity::browse(node, queue).await)
}

/// Asserts every payload id of `expected` is on `target` exactly once and nowhere else among `others`.
pub fn assert_exactly_once(expected: &[String], target: &BTreeMap<String, usize>, others: &[&BTreeMap<String, usize>]) {
    let mut missing = Vec::new();
    let mut doubled = Vec::new();
    for id in expected {
        match target.get(id) {
            None => missing.push(id.clone()),
            Some(1) => {}
            Some(n) => doubled.push(format!("{id}×{n}")),
        }
        for other in others {
            if other.contains_key(id) {
                doubled.push(format!("{id} also left behind"));
            }
        }
    }
    assert!(missing.is_empty() && doubled.is_empty(), "missing {missing:?}; doubled {doubled:?}");
}

// Scratch brokers (private, made by a test) registered as clusters of a test's world.

/// The scratch brokers' credentials, by the reference `scratch` (every scratch broker has the same user).
pub const SCRATCH_CREDENTIALS: [(&str, &str); 2] = [
    ("ARTEMIS_TRANSFER_CREDENTIALS__SCRATCH__USER", "scratch"),
    ("ARTEMIS_TRANSFER_CREDENTIALS__SCRATCH__PASSWORD", "scratch-pw"),
];

pub fn export_scratch_credentials() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (key, value) in SCRATCH_CREDENTIALS {
            std::env::set_var(key, value);
        }
    });
}

/// A scratch broker as a test-bed [`Node`], for the Java helper and the test's management client (its broker name
/// is `scratch`).
pub fn scratch_node(broker: &ScratchBroker, cluster: &str) -> Node {
    assert_eq!(broker.user, SCRATCH_CREDENTIALS[0].1);
    Node {
        name: "scratch".into(),
        cluster: cluster.into(),
        role: NodeRole::Primary,
        core_port: broker.core_port,
        http_port: broker.http_port.expect("scratch brokers here have a web console"),
        user: broker.user.clone(),
        password: broker.password.clone(),
        tls: None,
    }
}

/// Registers `broker` in `world` as the one-node cluster `cluster` (its node is called `scratch`).
pub async fn register_scratch(world: &World, cluster: &str, broker: &ScratchBroker) {
    export_scratch_credentials();
    let credentials = Credentials::from_env("scratch").unwrap();
    let seed = Seed {
        jolokia_url: broker.jolokia_url().unwrap(),
        core_url: Some(broker.core_url()),
        jolokia_by_core: BTreeMap::new(),
    };
    let nodes = discover(&seed, &credentials, Duration::from_secs(10)).await.unwrap();
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    store::add(&world.pool, &Cluster { name: cluster.into(), credentials_ref: "scratch".into(), nodes }).await.unwrap();
}

// The run's own numbers against the census (issue 13, docs/guarantees.md, I2).

/// What the Java client's census found of a run's selection once the run ended, for [`assert_accounting`].
/// Made by [`Census::moved`] or [`Census::copied`]; the builder methods add what a test has besides.
///
/// Every count is over the selection's payload ids only (a queue's other messages do not count), with
/// multiplicity: a message seen twice counts twice, so a double shows as a difference.
#[derive(Clone, Copy)]
pub struct Census<'a> {
    /// A move (the source gives its messages up) or a copy (the source keeps them).
    pub mode: Mode,
    /// The payload ids of the selected messages, each once.
    pub selected: &'a [String],
    /// The target queue's census (merged with what a test drained or deleted from it meanwhile).
    pub target: &'a BTreeMap<String, usize>,
    /// The source queue's census after the run.
    pub source: &'a BTreeMap<String, usize>,
    /// Selected messages still on the source that a browse cannot show (scheduled for later, waiting out a
    /// redelivery delay, in delivery to a consumer), counted by the test from the broker (`ScheduledCount`, a
    /// listing). Counted as on the source.
    pub unbrowsable: usize,
    /// Selected messages on no queue at all (an id selection naming a message that is not on the source): part of
    /// the selection, never seen by a census, and what the run counts as not taken (gone).
    pub gone: usize,
    /// The census of the dead message queue the run used, when the test has one; without one nothing may be
    /// dead-lettered.
    pub dead_letter: Option<&'a BTreeMap<String, usize>>,
    /// For a returned run: the census of its staging queue taken while it was stopped, just before the return,
    /// i.e. what the return put back. Without it, returned and not taken are judged together against the source.
    pub returned: Option<&'a BTreeMap<String, usize>>,
    /// Whether the run knows its selection's size (`Counters::selected` is then the selection's size). False only
    /// where the preview could not count it (a filter on a queue deeper than its browse page).
    pub size_known: bool,
}

impl<'a> Census<'a> {
    /// A move of `selected`, with the target's and the source's census.
    pub fn moved(
        selected: &'a [String],
        target: &'a BTreeMap<String, usize>,
        source: &'a BTreeMap<String, usize>,
    ) -> Census<'a> {
        Census {
            mode: Mode::Move,
            selected,
            target,
            source,
            unbrowsable: 0,
            gone: 0,
            dead_letter: None,
            returned: None,
            size_known: true,
        }
    }

    /// A copy of `selected`, with the target's and the source's census.
    pub fn copied(
        selected: &'a [String],
        target: &'a BTreeMap<String, usize>,
        source: &'a BTreeMap<String, usize>,
    ) -> Census<'a> {
        Census { mode: Mode::Copy, ..Census::moved(selected, target, source) }
    }

    /// With the census of the dead message queue.
    pub fn dead_letter(self, dmq: &'a BTreeMap<String, usize>) -> Census<'a> {
        Census { dead_letter: Some(dmq), ..self }
    }

    /// With the census of staging taken just before a return (what the return put back).
    pub fn returned(self, staging: &'a BTreeMap<String, usize>) -> Census<'a> {
        Census { returned: Some(staging), ..self }
    }

    /// With `n` selected messages on the source that a browse cannot show.
    pub fn unbrowsable(self, n: usize) -> Census<'a> {
        Census { unbrowsable: n, ..self }
    }

    /// With `n` selected ids that are on no queue.
    pub fn gone(self, n: usize) -> Census<'a> {
        Census { gone: n, ..self }
    }

    /// The selection's size is not known to the run.
    pub fn size_unknown(self) -> Census<'a> {
        Census { size_known: false, ..self }
    }

    /// How many of the selected ids `census` holds, with multiplicity.
    fn count(&self, census: &BTreeMap<String, usize>) -> i64 {
        self.selected.iter().map(|id| census.get(id).copied().unwrap_or(0) as i64).sum()
    }
}

/// Asserts that a run's own numbers (`Counters`, as [`World::wait_run`] returned them at the run's end) equal the
/// census (docs/guarantees.md, I2), for the selection's payload ids; on failure it shows the run's numbers and the census's side
/// by side.
///
/// - `selected` is the selection's size (ids, plus those `gone`), unless the census says the run cannot know it.
/// - `delivered` is what the target holds of the selection; for a copy, what was copied. `already_on_target` is part
///   of `delivered` (kept once by the target's duplicate cache) and is not judged apart.
/// - A move: not taken (the `not_taken_*` counters) plus `returned` is what is still on the source (plus the
///   `unbrowsable` and the `gone`); with the staging census of a return, `returned` is that census and not taken the
///   rest. A copy: the source still holds each selected message once (or unbrowsable), and `returned` is 0.
/// - `dead_lettered` is what the dead message queue holds of the selection (0 without one).
/// - delivered + dead-lettered + not taken + returned = selected.
/// - A move on one node whose worker lost the broker's answer counts up to `uncertain` messages it cannot place: each
///   is on the target or still on the source, so the target holds between `delivered` and `delivered + uncertain`,
///   the source between not taken and not taken + `uncertain`, and the sum lies as far below the selection. With
///   `uncertain` 0 every one of these is an equality.
pub fn assert_accounting(counters: &Counters, census: &Census) {
    let selected = census.selected.len() as i64 + census.gone as i64;
    let on_target = census.count(census.target);
    let on_source = census.count(census.source) + census.unbrowsable as i64 + census.gone as i64;
    let on_dmq = census.dead_letter.map(|d| census.count(d)).unwrap_or(0);
    let returned_ids = census.returned.map(|r| census.count(r));
    let c = counters;
    let (not_taken, uncertain) = (c.not_taken(), c.uncertain);
    let sum = c.delivered + c.dead_lettered + not_taken + c.returned;
    let within = |value: i64, low: i64, slack: i64| value >= low && value <= low + slack;
    let mut wrong: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            wrong.push(what);
        }
    };

    // `selected` is the broker's count at t0; what the end's proof found stamped at or before t0 but committed
    // after the count is in the selection too (`taken_beyond_count`).
    let counted = c.selected.map(|n| n + c.taken_beyond_count);
    if census.size_known {
        check(
            counted == Some(selected),
            format!(
                "selected {:?} + {} beyond the count is not the selection's {selected}",
                c.selected, c.taken_beyond_count
            ),
        );
    } else if let Some(n) = counted {
        check(n == selected, format!("selected {n} (with those beyond the count) is not the selection's {selected}"));
    }
    check(
        c.dead_lettered == on_dmq,
        format!("dead_lettered {} but the dead message queue holds {on_dmq} of the selection", c.dead_lettered),
    );
    match census.mode {
        Mode::Move => {
            check(
                within(on_target, c.delivered, uncertain),
                format!("delivered {} (uncertain {uncertain}) but the target holds {on_target}", c.delivered),
            );
            match returned_ids {
                Some(back) => {
                    check(c.returned == back, format!("returned {} but the return put back {back}", c.returned));
                    check(
                        within(on_source - back, not_taken, uncertain),
                        format!(
                            "not taken {not_taken} but the source holds {} of the selection besides the {back} returned",
                            on_source - back
                        ),
                    );
                }
                None => check(
                    within(on_source, not_taken + c.returned, uncertain),
                    format!(
                        "not taken {not_taken} + returned {} but the source holds {on_source} of the selection",
                        c.returned
                    ),
                ),
            }
            check(
                within(selected, sum, uncertain),
                format!(
                    "delivered + dead-lettered + not taken + returned = {sum} (uncertain {uncertain}), not the \
                     selection's {selected}"
                ),
            );
        }
        Mode::Copy => {
            check(
                c.delivered == on_target,
                format!("copied (delivered) {} but the target holds {on_target}", c.delivered),
            );
            let doubled: Vec<&String> = census.selected.iter().filter(|id| census.source.get(*id) > Some(&1)).collect();
            check(
                on_source == selected && doubled.is_empty(),
                format!("the source holds {on_source} of the selection's {selected} (doubled: {doubled:?})"),
            );
            check(c.returned == 0, format!("a copy returned {}", c.returned));
            check(c.uncertain == 0, format!("a copy is uncertain of {}", c.uncertain));
            check(
                sum == selected,
                format!("copied + dead-lettered + not taken + returned = {sum}, not the selection's {selected}"),
            );
        }
    }
    let mode = if census.mode == Mode::Move { "move" } else { "copy" };
    let row = |name: &str, run: String, seen: String| format!("\n  {name:<14} {run:>9}   {seen}");
    let table = [
        row("", "run".into(), "census".into()),
        row(
            "selected",
            c.selected.map_or("none".into(), |n| n.to_string()),
            format!("{selected} ({} payload ids, {} gone)", census.selected.len(), census.gone),
        ),
        row("delivered", c.delivered.to_string(), format!("{on_target} on the target")),
        row(
            "not taken",
            not_taken.to_string(),
            format!("{on_source} on the source ({} a browse cannot see, {} gone)", census.unbrowsable, census.gone),
        ),
        row(
            "dead-lettered",
            c.dead_lettered.to_string(),
            census.dead_letter.map_or("no dead message queue".into(), |_| format!("{on_dmq} on the DMQ")),
        ),
        row(
            "returned",
            c.returned.to_string(),
            returned_ids.map_or("(on the source)".into(), |n| format!("{n} in staging before the return")),
        ),
        row("uncertain", uncertain.to_string(), String::new()),
        row("sum", sum.to_string(), selected.to_string()),
    ]
    .concat();
    assert!(
        wrong.is_empty(),
        "the run's numbers are not the census ({mode}):{table}\ndifferences: {}\ncounters: {counters:?}",
        wrong.join("; ")
    );
}

/// The staging ids the run holds in doubt.
pub async fn in_doubt_ids(world: &World, run: uuid::Uuid) -> Vec<i64> {
    let in_doubt: serde_json::Value = sqlx::query_scalar("SELECT relay->'in_doubt' FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    let marks = in_doubt.as_array().cloned().unwrap_or_default();
    marks.iter().flat_map(|m| m["ids"].as_array().cloned().unwrap_or_default()).filter_map(|id| id.as_i64()).collect()
}
