//! What the API lets out over a whole session: a run through the API whose target broker goes away, so its worker
//! meets errors that name hosts and ports, read back through every call that shows a run — the list, the view,
//! the event stream. No answer may carry a token, a password or a broker's address (the registry's endpoints are
//! answered by `GET /clusters` alone, on purpose); no log line a token or a password.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use testbed::fidelity::Produce;
use testbed::scratch::{ScratchBroker, ScratchOptions};
use uuid::Uuid;

use super::support::{self, register_scratch, World, OPERATOR, SCRATCH_CREDENTIALS};
use super::{acks, Api, TOKEN};

/// The run's state as the API answers it.
async fn state_of(api: &Api, run: Uuid) -> (String, Value) {
    let (status, view) = api.get(&format!("/api/v1/runs/{run}"), OPERATOR).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    (view["state"].as_str().unwrap_or_default().to_string(), view)
}

#[tokio::test]
async fn a_whole_api_session_lets_out_no_secret_and_no_brokers_address() {
    let mut broker =
        ScratchBroker::start_with("api_leaks_dst", ScratchOptions { web: true, ..Default::default() }).await;
    let east = testbed::TestBed::require().await.node("east-1");
    let source = testbed::unique_name("api_leaks_src");
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

    let body = json!({
        "source": { "cluster": "east", "node": "east-1", "queue": source },
        "target": { "cluster": "target", "node": "scratch", "queue": target },
        "selection": { "kind": "all" },
    });
    let (status, stored) = api.post("/api/v1/previews", OPERATOR, body).await;
    assert_eq!(status, StatusCode::CREATED, "{stored}");
    let run: Uuid = stored["run_id"].as_str().unwrap().parse().unwrap();

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
    support::management(east).destroy_queue(&source).await.unwrap();
}

/// Words that reached a run by another path than the API (which refuses control characters at the door) — the SQL
/// start path, a broker's error — are printed by the command line with their control characters and
/// bidirectional marks escaped, as text and as JSON: an operator's terminal never obeys them.
#[tokio::test]
async fn the_command_line_shows_control_characters_in_a_runs_words_without_obeying_them() {
    let east = testbed::TestBed::require().await.node("east-1");
    let source = testbed::unique_name("cli_escape_src");
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
    support::management(east).destroy_queue(&source).await.unwrap();
}
