//! What the API lets out over a whole session: a run through the API whose target broker goes away, so its worker
//! meets errors that name hosts and ports, read back through every call that shows a run — the list, the view,
//! the event stream. No answer may carry a token, a password or a broker's address (the registry's endpoints are
//! answered by `GET /clusters` alone, on purpose); no log line a token or a password. And a session with the TLS
//! node registered with an encrypted client key: its passphrase and the broker password are nowhere — not in the
//! logs, answers, run records, registry rows or metrics.

use std::time::{Duration, Instant};

use artemis_transfer::transfer::staging::staging_queue_name;
use reqwest::StatusCode;
use serde_json::{json, Value};
use testbed::fidelity::Produce;
use testbed::scratch::{ScratchBroker, ScratchOptions};
use testbed::TestQueues;
use uuid::Uuid;

use super::support::{self, assert_accounting, census, register_scratch, Census, World, OPERATOR, SCRATCH_CREDENTIALS};
use super::{acks, Api, TOKEN};

/// The run's state as the API answers it.
async fn state_of(api: &Api, run: Uuid) -> (String, Value) {
    let (status, view) = api.get(&format!("/api/v1/runs/{run}"), OPERATOR).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    (view["state"].as_str().unwrap_or_default().to_string(), view)
}

/// Previews through the API a move of every message of `source` on east-1 to `target` on `(cluster, node)`:
/// the run and the stored preview.
async fn preview_from_east(api: &Api, source: &str, (cluster, node): (&str, &str), target: &str) -> (Uuid, Value) {
    let body = json!({
        "source": { "cluster": "east", "node": "east-1", "queue": source },
        "target": { "cluster": cluster, "node": node, "queue": target },
        "selection": { "kind": "all" },
    });
    let (status, stored) = api.post("/api/v1/previews", OPERATOR, body).await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    (stored["run_id"].as_str().unwrap().parse().unwrap(), stored)
}

#[tokio::test]
async fn a_whole_api_session_lets_out_no_secret_and_no_brokers_address() {
    let mut broker =
        ScratchBroker::start_with("api_leaks_dst", ScratchOptions { web: true, ..Default::default() }).await;
    let east = testbed::TestBed::require().await.node("east-1");
    let queues = TestQueues::new();
    let source = queues.name(east, "api_leaks_src");
    let target = testbed::unique_name("api_leaks_dst");
    support::create_queue(east, &source).await;
    let produce = Produce { count: 20, kinds: "bytes".into(), ..Produce::default() };
    testbed::fidelity::produce(east, &source, &produce).await;
    let mut world = World::new("api_leaks", &[("batch_size", json!(10))]).await;
    register_scratch(&world, "target", &broker).await;
    let retries = [
        ("ARTEMIS_TRANSFER__RETRY__MAX_ATTEMPTS", "2"),
        ("ARTEMIS_TRANSFER__RETRY__MIN_DELAY_MS", "200"),
        ("ARTEMIS_TRANSFER__RETRY__MAX_DELAY_SECS", "1"),
    ];
    let mut env: Vec<(&str, &str)> = SCRATCH_CREDENTIALS.to_vec();
    env.extend(retries);
    let api = Api::start_with(&world, &env).await;
    world.spawn_worker("w1", &env).await;

    let (run, stored) = preview_from_east(&api, &source, ("target", "scratch"), &target).await;
    queues.add(east, &staging_queue_name(run));

    // The target goes away before the run starts: the worker's errors name its host and port.
    broker.kill().await;
    let execute = json!({
        "plan_hash": stored["plan_hash"], "acknowledged": acks(&stored), "confirm": source, "override_cap": true,
    });
    let (status, answer) = api.post(&format!("/api/v1/runs/{run}/execute"), OPERATOR, execute).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let started = Instant::now();
    let view = loop {
        let (state, view) = state_of(&api, run).await;
        if state == "interrupted" {
            break view;
        }
        assert!(started.elapsed() < Duration::from_secs(180), "the run is {state}, not interrupted: {view:#}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };

    // The run record holds the worker's words whole (the test would prove nothing otherwise)…
    let (raw,): (Option<String>,) = sqlx::query_as("SELECT last_error FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    let raw = raw.expect("an interrupted run has a last error");
    let addresses = ["127.0.0.1".to_string(), broker.core_port.to_string(), broker.http_port.unwrap().to_string()];
    assert!(addresses.iter().any(|a| raw.contains(a.as_str())), "the worker's words name no address: {raw}");
    // …and the API tells them by the node's name.
    let last_error = view["last_error"].as_str().expect("the view has the last error");
    assert!(!last_error.is_empty(), "{view:#}");
    let (status, _) = api.get("/api/v1/runs", OPERATOR).await;
    assert_eq!(status, StatusCode::OK);
    let events = api.events(run, None).await;
    assert!(events.iter().any(|(name, _, _)| name == "end"), "{events:?}");

    // Every answer: no address (the registry's own listing, which answers them on purpose, comes after). Every
    // answer and log: no secret.
    for body in api.bodies.lock().unwrap().iter() {
        for address in &addresses {
            assert!(!body.contains(address.as_str()), "an answer carries {address}: {body}");
        }
    }
    let (status, _) = api.get("/api/v1/clusters", OPERATOR).await;
    assert_eq!(status, StatusCode::OK);
    api.assert_no_secret();
    let scratch_password = SCRATCH_CREDENTIALS[1].1;
    for entry in std::fs::read_dir(&world.log_dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(log) = std::fs::read_to_string(&path) else { continue };
        assert!(!log.contains(TOKEN), "{} holds the API token", path.display());
        assert!(!log.contains(scratch_password), "{} holds the target broker's password", path.display());
        let password = &testbed::TestBed::get().nodes[0].password;
        assert!(!log.contains(password.as_str()), "{} holds the test bed's password", path.display());
    }
    eprintln!("api_leaks: the worker wrote {raw:?}; the API said {last_error:?}");
}

/// Words that reached a run by another path than the API (which refuses control characters at the door) — the SQL
/// start path, a broker's error — are printed by the command line with their control characters and
/// bidirectional marks escaped, as text and as JSON: an operator's terminal never obeys them.
#[tokio::test]
async fn the_command_line_shows_control_characters_in_a_runs_words_without_obeying_them() {
    let east = testbed::TestBed::require().await.node("east-1");
    let queues = TestQueues::new();
    let source = queues.name(east, "cli_escape_src");
    support::create_queue(east, &source).await;
    let world = World::new("cli_escape", &[]).await;
    let stored = world
        .preview_move(
            support::queue_ref("east", "east-1", &source),
            support::queue_ref("west", "west-1", &testbed::unique_name("cli_escape_dst")),
            artemis_transfer::transfer::Selection::All,
        )
        .await;
    let reason = "maintenance\u{1b}]0;owned\u{7}\u{1b}[2J done \u{202e}txt.exe";
    sqlx::query("UPDATE transfer_run SET stop_reason = $2 WHERE id = $1")
        .bind(stored.run_id)
        .bind(reason)
        .execute(&world.pool)
        .await
        .unwrap();
    for json in [false, true] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_artemis-transfer"));
        cmd.args(["runs", "show", &stored.run_id.to_string(), "--as", OPERATOR]).env("DATABASE_URL", &world.url);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'), "{text:?}");
        assert!(text.contains("\\u001b[2J") && text.contains("\\u202e"), "the words are shown, escaped: {text}");
        if json {
            let view: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(view["stop_reason"], json!(reason), "the JSON still means the same");
        }
    }
}

/// `artemis-transfer cluster add` of the TLS node as `secure`, by its Core URL `core_url`, with the credentials
/// `securekey` from `env`: whether it succeeded, and what it printed.
fn add_secure_cluster(world: &World, core_url: &str, env: &[(&str, &str)]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_artemis-transfer"))
        .args(["cluster", "add", "secure", "--core-url", core_url, "--credentials", "securekey", "--as", OPERATOR])
        .env("DATABASE_URL", &world.url)
        .envs(env.iter().copied())
        .output()
        .expect("run artemis-transfer cluster add");
    let printed = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), printed)
}

/// Every row of every table of `world`'s database, as JSON text, by table.
async fn every_row(world: &World) -> Vec<(String, String)> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) FROM information_schema.tables \
         WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&world.pool)
    .await
    .unwrap();
    let mut rows = Vec::new();
    for table in tables {
        let text: Vec<String> = sqlx::query_scalar(&format!("SELECT row_to_json(t)::text FROM {table} t"))
            .fetch_all(&world.pool)
            .await
            .unwrap();
        rows.push((table, text.join("\n")));
    }
    rows
}

/// The TLS node registered with its client key encrypted and the passphrase by reference
/// (`ARTEMIS_TRANSFER_CREDENTIALS__SECUREKEY__KEY_PASSPHRASE`): registration without the passphrase is refused
/// naming the variable; with it, a move into the TLS node is previewed and run through the API (Jolokia over
/// HTTPS and Core over TLS, each decrypting the key) and judged by the census. Then the passphrase and the broker
/// password are looked for everywhere the session wrote: the command's output, every API answer, `/metrics`, the
/// worker's and the service's logs, and every row of the database (run records, events, audit, registry).
#[tokio::test]
async fn a_tls_session_with_an_encrypted_key_lets_out_neither_its_passphrase_nor_the_password() {
    let bed = testbed::TestBed::require().await;
    let (east, secure) = (bed.node("east-1"), bed.node("secure-1"));
    let queues = TestQueues::new();
    let tls = secure.tls.as_ref().expect("secure-1 is a TLS node");
    let passphrase = format!("passphrase-{}", Uuid::new_v4().simple());
    let mut world = World::new("api_tls_leaks", &[("batch_size", json!(25))]).await;
    let key_dir = world.log_dir.join("key");
    std::fs::create_dir_all(&key_dir).unwrap();
    let bundle = tls.encrypted_client_bundle(&key_dir, &passphrase);
    let core_url = tls.core_url_with_key_store(secure.core_port, Some(&bundle));
    let passphrase_var = "ARTEMIS_TRANSFER_CREDENTIALS__SECUREKEY__KEY_PASSPHRASE";
    let env = [
        ("ARTEMIS_TRANSFER_CREDENTIALS__SECUREKEY__USER", secure.user.as_str()),
        ("ARTEMIS_TRANSFER_CREDENTIALS__SECUREKEY__PASSWORD", secure.password.as_str()),
        (passphrase_var, passphrase.as_str()),
    ];

    let (added, refused) = add_secure_cluster(&world, &core_url, &env[..2]);
    assert!(!added && refused.contains(&format!("{passphrase_var} is not set")), "{refused}");
    let (added, printed) = add_secure_cluster(&world, &core_url, &env);
    assert!(added, "{printed}");

    let source = queues.name(east, "api_tls_leaks_src");
    let target = queues.name(secure, "api_tls_leaks_dst");
    support::create_queue(east, &source).await;
    support::create_queue(secure, &target).await;
    let produce = Produce { count: 60, prefix: "tls-leaks-".into(), kinds: "text,bytes".into(), ..Produce::default() };
    testbed::fidelity::produce(east, &source, &produce).await;
    let ids: Vec<String> = (0..60).map(|i| format!("tls-leaks-{i}")).collect();
    let api = Api::start_with(&world, &env).await;
    world.spawn_worker("w1", &env).await;
    let (run, stored) = preview_from_east(&api, &source, ("secure", "secure-1"), &target).await;
    assert_eq!(stored["can_start"], json!(true), "{stored:#}");
    let execute = json!({
        "plan_hash": stored["plan_hash"], "acknowledged": acks(&stored), "confirm": source, "override_cap": true,
    });
    let (status, answer) = api.post(&format!("/api/v1/runs/{run}/execute"), OPERATOR, execute).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
    let (_, counters) = world.wait_run(run, &["succeeded"], Duration::from_secs(180)).await;
    let (status, _) = api.get(&format!("/api/v1/runs/{run}"), OPERATOR).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = api.get("/api/v1/clusters", OPERATOR).await;
    assert_eq!(status, StatusCode::OK);
    assert!(api.events(run, None).await.iter().any(|(name, _, _)| name == "end"));
    let on_target = census(secure, &target).await;
    let left = census(east, &source).await;
    assert_accounting(&counters, &Census::moved(&ids, &on_target, &left));

    let metrics = api.client.get(format!("{}/metrics", api.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("artemis_transfer_runs"), "{metrics}");
    let mut texts: Vec<(String, String)> =
        vec![("cluster add's output".into(), refused + &printed), ("/metrics".into(), metrics)];
    texts.extend(api.bodies.lock().unwrap().iter().map(|b| ("an API answer".to_string(), b.clone())));
    for entry in std::fs::read_dir(&world.log_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            texts.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    let rows = every_row(&world).await;
    let registry: Vec<&str> =
        rows.iter().filter(|(table, _)| table.contains("cluster")).map(|(_, r)| r.as_str()).collect();
    let registry = registry.join("\n");
    assert!(registry.contains("client-bundle-encrypted.pem"), "the registry holds the key's path: {registry}");
    texts.extend(rows);
    let logs = texts.iter().filter(|(place, text)| place.ends_with(".log") && !text.is_empty()).count();
    assert!(logs >= 2, "the worker's and the service's logs were read: {logs}");
    for (place, text) in &texts {
        assert!(!text.contains(&passphrase), "{place} holds the key's passphrase");
        assert!(!text.contains(secure.password.as_str()), "{place} holds the broker password");
    }
}
