//! The command line's conventions (docs/cli.md) as an operator meets them with the built binary: the database out of
//! reach or not migrated is said with where and what to do, a closed pipe ends quietly, and logs piped away carry no
//! colour codes.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_artemis-transfer"));
    command.env_remove("ARTEMIS_TRANSFER_CONFIG").env_remove("NO_COLOR").env("RUST_LOG", "info").stdin(Stdio::null());
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
