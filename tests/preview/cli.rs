//! The command line against the test bed: the built `artemis-transfer` binary, a fresh database each test,
//! `cluster add|list|remove` and `preview` as an operator types them. The helpers here ([`Cli`]) are shared
//! with the limiter and live-node tests, which also run the binary.

use std::process::Stdio;

use artemis_transfer::broker::jolokia::QueueConfig;
use serde_json::{json, Value};
use sqlx::Row;
use testbed::{Node, TestBed, TestQueues};

/// The operator every command of these tests acts for; [`Cli::fresh`] makes them an admin of every cluster.
pub const OPERATOR: &str = "cli-tester";

/// The binary, run with its own database.
#[derive(Debug, Clone)]
pub struct Cli {
    /// `DATABASE_URL` of the processes.
    pub database_url: String,
}

/// What one run of the binary did.
#[derive(Debug)]
pub struct Ran {
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Ran {
    /// Panics with the output unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Ran {
        assert_eq!(self.code, Some(code), "exit code\nstdout:\n{}\nstderr:\n{}", self.stdout, self.stderr);
        self
    }

    /// The standard output as JSON: one object on one line (docs/cli.md, "JSON": a single thing).
    pub fn json(&self) -> Value {
        assert_eq!(self.stdout.lines().count(), 1, "one object on one line:\n{}", self.stdout);
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }

    /// The standard output as JSON lines, one object a line (docs/cli.md, "JSON": a list), as an array.
    pub fn json_lines(&self) -> Value {
        let lines = self.stdout.lines().map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}\n{}", self.stdout))
        });
        Value::Array(lines.collect())
    }
}

impl Cli {
    /// A fresh database, migrated by `artemis-transfer migrate` (schema and the settings' defaults), where
    /// [`OPERATOR`] holds admin on every cluster (the bootstrap grant of a fresh database).
    pub async fn fresh(label: &str) -> Cli {
        let cli = Cli { database_url: testbed::postgres::fresh_database(label).await };
        cli.run(&["migrate"]).await.expect_code(0);
        cli.run(&["grant", "add", OPERATOR, "*", "admin"]).await.expect_code(0);
        cli
    }

    /// Runs the binary with `args`.
    pub async fn run(&self, args: &[&str]) -> Ran {
        self.run_with(args, &[]).await
    }

    /// Runs the binary with `args` and extra environment variables, as [`OPERATOR`]. The test bed's broker
    /// credentials are exported as the reference `testbed`, as an operator would export them.
    pub async fn run_with(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let bed = TestBed::require().await;
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_artemis-transfer"))
            .args(args)
            .env("DATABASE_URL", &self.database_url)
            .env("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__USER", &bed.nodes[0].user)
            .env("ARTEMIS_TRANSFER_CREDENTIALS__TESTBED__PASSWORD", &bed.nodes[0].password)
            .env("RUST_LOG", "warn")
            .env_remove("ARTEMIS_TRANSFER_CONFIG")
            .env("ARTEMIS_TRANSFER_OPERATOR", OPERATOR)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .expect("cannot run the artemis-transfer binary");
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `cluster add <name>` from the test-bed node `seed`, with the `testbed` credentials.
    pub async fn register(&self, name: &str, seed: &Node) -> Ran {
        let ran = self.run(&["cluster", "add", name, "--core-url", &seed.core_url(), "--credentials", "testbed"]).await;
        ran.expect_code(0);
        ran
    }

    /// `preview … --json`: the exit code and the stored preview.
    pub async fn preview_json(&self, from: &str, to: &str, selection: &[&str]) -> (Option<i32>, Value) {
        let mut args = vec!["preview", "--from", from, "--to", to, "--json"];
        args.extend_from_slice(selection);
        let ran = self.run(&args).await;
        assert!(
            matches!(ran.code, Some(0 | 3 | 4)),
            "preview failed\nstdout:\n{}\nstderr:\n{}",
            ran.stdout,
            ran.stderr
        );
        (ran.code, ran.json())
    }
}

/// The (kind, code) pairs of a stored preview's findings, as JSON gives them.
pub fn codes(stored: &Value) -> Vec<(String, String)> {
    stored["preview"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| (f["kind"].as_str().unwrap_or("?").to_string(), f["code"].as_str().unwrap_or("?").to_string()))
        .collect()
}

/// Whether the stored preview has a finding of `kind` (`refused`, `needs_ack`, `unknown`) and `code`.
pub fn has(stored: &Value, kind: &str, code: &str) -> bool {
    codes(stored).iter().any(|(k, c)| k == kind && c == code)
}

fn at(node: &Node, queue: &str) -> String {
    format!("{}/{}/{queue}", node.cluster, node.name)
}

#[tokio::test]
async fn clusters_are_added_listed_and_removed_from_the_command_line() {
    let bed = TestBed::require().await;
    let cli = Cli::fresh("cli_clusters").await;
    let added = cli.register("east", bed.node("east-1")).await;
    assert!(added.stdout.contains("Registered cluster east with 2 node(s)"), "{}", added.stdout);
    for name in ["east-1", "east-2"] {
        assert!(added.stdout.contains(&format!("node {name}")), "{}", added.stdout);
        assert!(added.stdout.contains(&bed.node(name).jolokia_url()), "{}", added.stdout);
    }

    let listed = cli.run(&["cluster", "list"]).await;
    listed.expect_code(0);
    assert!(listed.stdout.starts_with("east  (2 node(s), credentials `testbed`)"), "{}", listed.stdout);
    assert!(listed.stdout.contains("node east-1") && listed.stdout.contains("node east-2"), "{}", listed.stdout);

    let json = cli.run(&["cluster", "list", "--json"]).await.json_lines();
    assert_eq!(json.as_array().map(Vec::len), Some(1), "{json}");
    let nodes: Vec<&str> = json[0]["nodes"].as_array().unwrap().iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(nodes, ["east-1", "east-2"]);
    for (i, name) in ["east-1", "east-2"].into_iter().enumerate() {
        let endpoint = &json[0]["nodes"][i]["endpoints"][0];
        assert_eq!(endpoint["core_url"], json!(bed.node(name).core_url()));
        assert_eq!(endpoint["role"], "primary");
    }
    assert!(!listed.stdout.contains(&bed.nodes[0].password), "no secret is printed");

    let again = cli.register_err("east", bed.node("east-2")).await;
    assert!(again.stderr.contains("already registered"), "{}", again.stderr);

    cli.run(&["cluster", "remove", "east"]).await.expect_code(0);
    let empty = cli.run(&["cluster", "list"]).await;
    assert!(empty.stdout.contains("No cluster is registered"), "{}", empty.stdout);
    let none = cli.run(&["cluster", "list", "--json"]).await;
    assert_eq!(none.stdout, "", "an empty list is no line at all");
    let gone = cli.run(&["cluster", "remove", "east"]).await;
    gone.expect_code(4);
    assert!(gone.stderr.contains("no cluster named east is registered"), "{}", gone.stderr);
}

impl Cli {
    /// `cluster add` that is expected to be refused (exit 4).
    async fn register_err(&self, name: &str, seed: &Node) -> Ran {
        let ran = self.run(&["cluster", "add", name, "--core-url", &seed.core_url(), "--credentials", "testbed"]).await;
        ran.expect_code(4);
        ran
    }
}

/// A refused preview: exit 4, the refusal in words with its `broker.xml` fix, and the way forward. A startable
/// one: exit 0 and what `execute` will need. `--json` is the stored Previewed run.
#[tokio::test]
async fn a_preview_prints_its_findings_for_a_new_user() {
    let bed = TestBed::require().await;
    let cli = Cli::fresh("cli_preview").await;
    cli.register("east", bed.node("east-1")).await;
    cli.register("west", bed.node("west-1")).await;
    let (east1, west1) = (bed.node("east-1"), bed.node("west-1"));
    let queues = TestQueues::new();
    let source = super::source_with(&queues, 4).await;
    let west = super::management(west1);
    let dropping = queues.name(west1, "cli_drop_target");
    west.create_queue(&QueueConfig::plain_anycast(&dropping)).await.unwrap();
    west.add_address_settings(&dropping, &json!({"addressFullMessagePolicy": "DROP"})).await.unwrap();
    let last_value = queues.name(west1, "cli_lv_target");
    west.create_queue(&QueueConfig { last_value: true, ..QueueConfig::plain_anycast(&last_value) }).await.unwrap();

    let refused = cli.run(&["preview", "--from", &at(east1, &source), "--to", &at(west1, &dropping), "--all"]).await;
    refused.expect_code(4);
    let text = &refused.stdout;
    for expected in [
        "Preview of a MOVE (the messages leave the source queue)",
        &format!("from         east/east-1/{source}"),
        "plan hash    ",
        "valid until  ",
        "selection    the whole queue: 4 message(s)",
        "Findings: 1 refused,",
        "Refused — the run will not start (1):",
        "  [address-full-drop]\n",
        "drops new messages silently when it is full (address-full-policy DROP).",
        "    Fix in broker.xml:\n",
        &format!("      <address-setting match=\"{dropping}\">\n"),
        "<address-full-policy>PAGE</address-full-policy>",
        "Could not be checked — unknown, which is never a pass",
        "  [staging-rights]",
        "Notes:\n  - ",
        "This run is refused. Fix what is listed under \"Refused\"",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }

    let ok = cli.run(&["preview", "--from", &at(east1, &source), "--to", &at(west1, &last_value), "--all"]).await;
    ok.expect_code(0);
    let text = &ok.stdout;
    for expected in [
        "Needs acknowledgement — the run starts only if you acknowledge each code",
        "  [last-value]\n",
        "artemis-transfer execute ",
        "--ack last-value",
        &format!("--confirm {source}\n"),
        &format!("--confirm: type the source queue's name, {source}, to arm the run"),
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("Refused —"), "{text}");

    let (code, stored) = cli.preview_json(&at(east1, &source), &at(west1, &last_value), &["--copy", "--all"]).await;
    assert_eq!(code, Some(0));
    assert_eq!(stored["plan"]["mode"], "copy");
    assert_eq!(stored["preview"]["selection_size"], 4);
    assert!(has(&stored, "needs_ack", "last-value"), "{:?}", codes(&stored));
    let pool = sqlx::PgPool::connect(&cli.database_url).await.unwrap();
    let run_id: uuid::Uuid = stored["run_id"].as_str().unwrap().parse().unwrap();
    let row = sqlx::query("SELECT state, plan_hash, mode FROM transfer_run WHERE id = $1")
        .bind(run_id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(row.get::<String, _>("state"), "previewed");
    assert_eq!(row.get::<String, _>("plan_hash"), stored["plan_hash"].as_str().unwrap());
    assert_eq!(row.get::<String, _>("mode"), "copy");

    // Wherever runs are listed or shown, the refused preview says it is refused, and what each selected is the
    // preview's count (issue 27).
    let listed = cli.run(&["runs", "list"]).await;
    let lines: Vec<&str> = listed.stdout.lines().collect();
    assert_eq!(lines.iter().filter(|l| l.contains("previewed, refused")).count(), 1, "{}", listed.stdout);
    assert_eq!(lines.iter().filter(|l| l.contains("previewed ")).count(), 2, "{}", listed.stdout);
    let shown = cli.run(&["runs", "show", stored["run_id"].as_str().unwrap()]).await;
    assert!(shown.stdout.contains("state      previewed\n"), "{}", shown.stdout);
    assert!(shown.stdout.contains("selected   4 (counted by the preview at t0)"), "{}", shown.stdout);
    let listed_json = cli.run(&["runs", "list", "--json"]).await.json_lines();
    let refused_runs = listed_json.as_array().unwrap().iter().filter(|r| r["refused"] == true).count();
    assert_eq!(refused_runs, 1, "{listed_json}");

    west.remove_address_settings(&dropping).await.unwrap();
}

/// Malformed or unknown input is refused with words saying what is wrong, and nothing is stored.
#[tokio::test]
async fn bad_input_is_refused_in_words() {
    let bed = TestBed::require().await;
    let cli = Cli::fresh("cli_bad_input").await;
    cli.register("east", bed.node("east-1")).await;

    let unknown_cluster = cli.run(&["preview", "--from", "north/n1/q", "--to", "east/east-1/q", "--all"]).await;
    unknown_cluster.expect_code(4);
    assert!(unknown_cluster.stderr.contains("no cluster named north is registered"), "{}", unknown_cluster.stderr);

    let unknown_node = cli.run(&["preview", "--from", "east/east-9/q", "--to", "east/east-1/q", "--all"]).await;
    unknown_node.expect_code(4);
    assert!(
        unknown_node.stderr.contains("cluster east has no node east-9; its nodes are east-1, east-2"),
        "{}",
        unknown_node.stderr
    );

    let malformed = cli.run(&["preview", "--from", "east/east-1", "--to", "east/east-2/q", "--all"]).await;
    malformed.expect_code(2);
    assert!(malformed.stderr.contains("\"east/east-1\" is not CLUSTER/NODE/QUEUE"), "{}", malformed.stderr);

    let no_selection = cli.run(&["preview", "--from", "east/east-1/q", "--to", "east/east-2/q"]).await;
    no_selection.expect_code(2);
    assert!(no_selection.stderr.contains("--ids"), "{}", no_selection.stderr);

    let two_selections =
        cli.run(&["preview", "--from", "east/east-1/q", "--to", "east/east-2/q", "--all", "--ids", "1"]).await;
    two_selections.expect_code(2);
    assert!(two_selections.stderr.contains("cannot be used with"), "{}", two_selections.stderr);

    let bad_ids = cli.run(&["preview", "--from", "east/east-1/q", "--to", "east/east-2/q", "--ids", "1,x"]).await;
    bad_ids.expect_code(2);
    assert!(bad_ids.stderr.contains("invalid value 'x'"), "{}", bad_ids.stderr);

    let no_credentials = cli
        .run(&["cluster", "add", "west", "--core-url", &bed.node("west-1").core_url(), "--credentials", "nope"])
        .await;
    no_credentials.expect_code(1);
    assert!(no_credentials.stderr.contains("ARTEMIS_TRANSFER_CREDENTIALS__NOPE__USER"), "{}", no_credentials.stderr);

    let pool = sqlx::PgPool::connect(&cli.database_url).await.unwrap();
    let runs: i64 = sqlx::query_scalar("SELECT count(*) FROM transfer_run").fetch_one(&pool).await.unwrap();
    assert_eq!(runs, 0, "a failed preview stores nothing");
}
