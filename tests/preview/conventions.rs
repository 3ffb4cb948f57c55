//! The command line's conventions (docs/cli.md) as an operator meets them with the built binary: a table of
//! commands and situations, each with its exit status and the stream that carries its words; the database out of
//! reach or not migrated is said with where and what to do, a closed pipe ends quietly, and logs piped away carry no
//! colour codes.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use testbed::{unique_name, TestBed};

use super::cli::{Cli, Ran, OPERATOR};

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_artemis-transfer"));
    command
        .env_remove("ARTEMIS_TRANSFER_CONFIG")
        .env_remove("NO_COLOR")
        .env("RUST_LOG", "info")
        .env("ARTEMIS_TRANSFER_OPERATOR", OPERATOR)
        .stdin(Stdio::null());
    command
}

fn run(database_url: &str, args: &[&str]) -> Output {
    binary().args(args).env("DATABASE_URL", database_url).output().expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_database_out_of_reach_is_named_at_once_without_its_password() {
    // Port 1 on loopback: nothing listens there.
    let started = Instant::now();
    let out = run("postgres://transfer:s3cret-pw@127.0.0.1:1/artemis_transfer", &["runs", "list"]);
    let words = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{words}");
    assert!(started.elapsed() < Duration::from_secs(5), "it waited {:?}: {words}", started.elapsed());
    assert!(words.contains("cannot connect to the database at 127.0.0.1:1/artemis_transfer (DATABASE_URL)"), "{words}");
    assert!(words.contains("refused"), "the cause is said: {words}");
    assert!(!words.contains("s3cret-pw") && !words.contains("pool timed out"), "{words}");
}

#[tokio::test]
async fn a_database_never_migrated_says_to_run_migrate() {
    let database_url = testbed::postgres::fresh_database("not_migrated").await;
    for args in [&["runs", "list"][..], &["settings"], &["admin", "jobs"]] {
        let out = run(&database_url, args);
        let words = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {words}");
        assert!(words.contains("holds no artemis-transfer schema: run `artemis-transfer migrate` first"), "{words}");
        assert!(!words.contains("does not exist"), "{args:?}: {words}");
    }
}

/// `serve` too: a server started on a database without the schema would answer every request with an error; it
/// says at start what to do and ends, as the worker and the other commands do.
#[tokio::test]
async fn serve_on_a_database_never_migrated_says_to_run_migrate_and_ends() {
    let database_url = testbed::postgres::fresh_database("serve_not_migrated").await;
    let mut child = binary()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("DATABASE_URL", &database_url)
        .env("ARTEMIS_TRANSFER_API_TOKENS", "studio=0123456789abcdef0123456789abcdef")
        .env_remove("ARTEMIS_TRANSFER_API_TOKENS_FILE")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve kept running on a database without the schema");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().expect("output");
    let words = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{words}");
    assert!(words.contains("holds no artemis-transfer schema: run `artemis-transfer migrate` first"), "{words}");
}

#[tokio::test]
async fn a_closed_pipe_ends_quietly_and_logs_to_a_pipe_have_no_colour() {
    let database_url = testbed::postgres::fresh_database("pipes").await;
    let migrated = run(&database_url, &["migrate"]);
    let words = stderr(&migrated);
    assert!(migrated.status.success(), "{words}");
    assert!(words.contains("the database is up to date"), "the log line is there: {words}");
    assert!(!words.contains('\u{1b}'), "colour codes in a log that is not a terminal: {words:?}");

    // `runs list | head -0`: the reader is gone before the command writes.
    let mut child = binary()
        .args(["runs", "list"])
        .env("DATABASE_URL", &database_url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let words = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{words}");
    assert!(!words.contains("Broken pipe") && !words.contains("panicked"), "{words}");
}

/// Where a row's words are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// One row of the table: a command line, extra environment, and what it must end with.
struct Row {
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    code: i32,
    stream: Stream,
    words: String,
}

fn row(args: &[&str], code: i32, stream: Stream, words: &str) -> Row {
    Row { args: args.iter().map(|a| a.to_string()).collect(), env: Vec::new(), code, stream, words: words.into() }
}

impl Row {
    fn with_env(mut self, name: &'static str, value: &str) -> Row {
        self.env.push((name, value.into()));
        self
    }

    /// Panics unless `ran` ended as this row says: the status, the words on their stream, and a refusal or a
    /// failure told on standard error saying nothing on standard output.
    fn check(&self, ran: &Ran) {
        let shown = format!("{:?} (env {:?})\nstdout:\n{}\nstderr:\n{}", self.args, self.env, ran.stdout, ran.stderr);
        assert_eq!(ran.code, Some(self.code), "exit status of {shown}");
        let (on, off) = match self.stream {
            Stream::Stdout => (&ran.stdout, &ran.stderr),
            Stream::Stderr => (&ran.stderr, &ran.stdout),
        };
        assert!(on.contains(&self.words), "{:?} not on {:?} of {shown}", self.words, self.stream);
        assert!(!off.contains(&self.words), "{:?} also on the other stream of {shown}", self.words);
        if matches!(self.code, 1 | 2 | 4) && self.stream == Stream::Stderr {
            assert!(ran.stdout.is_empty(), "a failure, a usage error or a refusal answers nothing: {shown}");
        }
    }
}

/// The convention as a table (docs/cli.md): command × situation → exit status, and which stream carries the words.
#[tokio::test]
async fn every_command_ends_by_the_table() {
    use Stream::{Stderr, Stdout};
    let bed = TestBed::require().await;
    let cli = Cli::fresh("cli_conventions").await;
    let east1 = bed.node("east-1");
    cli.register("east", east1).await;
    // A refused preview (its source queue does not exist) stores a run to act on and to look for.
    let missing = unique_name("conventions_missing");
    let (from, to) = (format!("east/east-1/{missing}"), format!("east/east-2/{missing}"));
    let previewed = cli.run(&["preview", "--from", &from, "--to", &to, "--all", "--json"]).await;
    let stored = previewed.expect_code(4).json();
    let run = stored["run_id"].as_str().unwrap().to_string();
    let unknown = "4f0c3a9e-5b1d-4c2e-9a7f-0d6e8b1c2a3f";
    let no_run = format!("refused: there is no run {unknown}");
    let invisible = format!("refused: there is no run {run}");
    let east1_core = east1.core_url();

    let rows = [
        // 0: done, the answer on stdout.
        row(&["runs", "list"], 0, Stdout, &run),
        row(&["runs", "show", &run], 0, Stdout, "state      previewed, refused"),
        row(&["--as", OPERATOR, "runs", "show", &run, "--json"], 0, Stdout, &format!("\"id\":\"{run}\"")),
        row(&["cluster", "list"], 0, Stdout, "east  (2 node(s)"),
        row(&["settings", "set", "batch_size", "150"], 0, Stdout, "batch_size: "),
        // --actor still works for one release, and says it goes.
        row(&["settings", "set", "batch_size", "160", "--actor", OPERATOR], 0, Stderr, "--actor is deprecated"),
        // 2: the command line could not be read (clap's words), nothing asked.
        row(&["runs", "list", "--no-such-flag"], 2, Stderr, "unexpected argument '--no-such-flag'"),
        row(&["stop", &run, "--confirm", "x"], 2, Stderr, "unexpected argument '--confirm'"),
        row(&["resume", &run, "--reason", "x"], 2, Stderr, "unexpected argument '--reason'"),
        row(&["preview", "--from", "east/east-1", "--to", &to, "--all"], 2, Stderr, "is not CLUSTER/NODE/QUEUE"),
        row(&["orphans", "return", "east/east-1"], 2, Stderr, "name the orphan as cluster/node/studio.transfer"),
        row(
            &["cluster", "add", "web", "--core-url", "http://127.0.0.1:8161", "--credentials", "testbed"],
            2,
            Stderr,
            "is a web address",
        ),
        row(&["runs", "list"], 2, Stderr, "name the operator you act for with --as <operator>")
            .with_env("ARTEMIS_TRANSFER_OPERATOR", "")
            .with_env("USER", ""),
        // 4: the product said no; an unknown run the same words in every command.
        row(&["runs", "show", unknown], 4, Stderr, &no_run),
        row(&["watch", unknown], 4, Stderr, &no_run),
        row(&["stop", unknown], 4, Stderr, &no_run),
        row(&["resume", unknown], 4, Stderr, &no_run),
        row(&["return", unknown, "--confirm", "q"], 4, Stderr, &no_run),
        row(&["execute", unknown, "--plan-hash", "x"], 4, Stderr, &no_run),
        // A run bob may not see is a run that does not exist, for every command, runs and watch included.
        row(&["runs", "show", &run, "--as", "bob"], 4, Stderr, &invisible),
        row(&["--as", "bob", "watch", &run], 4, Stderr, &invisible),
        row(&["resume", &run, "--as", "bob"], 4, Stderr, &invisible),
        row(&["execute", &run, "--plan-hash", "x"], 4, Stderr, "refused: "),
        row(&["return", &run], 4, Stderr, "refused: run "),
        row(&["admin", "jobs", "--as", "bob"], 4, Stderr, "refused: operator bob lacks admin on every cluster (*)"),
        row(&["--as", "bob", "admin", "jobs"], 4, Stderr, "refused: operator bob lacks admin on every cluster (*)"),
        row(&["settings", "set", "batch_size", "10", "--as", "bob"], 4, Stderr, "refused: operator bob lacks admin"),
        row(&["grant", "add", "zed", "east", "admin", "--as", "bob"], 4, Stderr, "refused: operator bob lacks admin"),
        row(&["preview", "--from", &from, "--to", &to, "--all"], 4, Stdout, "This run is refused"),
        row(&["preview", "--from", "north/n1/q", "--to", &to, "--all"], 4, Stderr, "refused: no cluster named north"),
        row(
            &["cluster", "add", "east-again", "--core-url", &east1_core, "--credentials", "testbed"],
            4,
            Stderr,
            "already registered as node east-1 of cluster east",
        ),
        // 1: something needed did not answer; the words say what was tried and what to do.
        row(
            &["cluster", "add", "nowhere", "--core-url", "tcp://127.0.0.1:61999", "--credentials", "testbed"],
            1,
            Stderr,
            "the seed's management endpoint http://127.0.0.1:8544/console/jolokia did not answer",
        ),
    ];
    for r in &rows {
        let env: Vec<(&str, &str)> = r.env.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let args: Vec<&str> = r.args.iter().map(String::as_str).collect();
        r.check(&cli.run_with(&args, &env).await);
    }

    // What bob may not see is not listed for him either; the operator's list is JSON lines.
    let bobs = cli.run(&["runs", "list", "--as", "bob"]).await;
    assert!(bobs.expect_code(0).stdout.lines().count() == 1 && !bobs.stdout.contains(&run), "{}", bobs.stdout);
    let listed = cli.run(&["runs", "list", "--json"]).await.json_lines();
    assert!(listed.as_array().unwrap().iter().any(|r| r["id"] == run.as_str()), "{listed}");
    assert!(cli.run(&["runs", "list", "--json", "--as", "bob"]).await.stdout.is_empty(), "an empty list is no line");
    // An unreachable seed whose Jolokia URL was derived says which flag gives the right one.
    let nowhere = cli
        .run(&["cluster", "add", "nowhere", "--core-url", "tcp://127.0.0.1:61999", "--credentials", "testbed"])
        .await;
    assert!(nowhere.stderr.contains("give its Jolokia URL with --jolokia-url"), "{}", nowhere.stderr);
}

/// `orphans list` where no node answers says that no node answered, naming them, and exits 3 — never "no orphans on
/// the nodes that answered"; as JSON lines, each node it could not check is a line of its own.
#[tokio::test]
async fn orphans_list_with_no_node_answering_says_so() {
    let cli = Cli::fresh("cli_orphans_unanswered").await;
    // A cluster whose one node listens nowhere, written as a registration would have stored it.
    let pool = sqlx::PgPool::connect(&cli.database_url).await.unwrap();
    for statement in [
        "INSERT INTO cluster (name, credentials_ref) VALUES ('ghost', 'testbed')",
        "INSERT INTO cluster_node (cluster, name, node_id, broker_name) VALUES ('ghost', 'ghost-1', 'id-1', 'ghost-1')",
        "INSERT INTO cluster_endpoint (cluster, node, core_url, jolokia_url, role, broker_name) VALUES \
         ('ghost', 'ghost-1', 'tcp://127.0.0.1:61999', 'http://127.0.0.1:8544/console/jolokia', 'primary', 'ghost-1')",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let text = cli.run(&["orphans", "list"]).await;
    text.expect_code(3);
    assert!(text.stdout.starts_with("no node answered (1: ghost/ghost-1)"), "{}", text.stdout);
    assert!(!text.stdout.contains("nodes that answered"), "{}", text.stdout);
    let json = cli.run(&["orphans", "list", "--json"]).await;
    json.expect_code(3);
    let lines = json.json_lines();
    assert_eq!(lines.as_array().unwrap().len(), 1, "{lines}");
    assert_eq!(lines[0]["unchecked"]["node"], "ghost-1", "{lines}");
}
