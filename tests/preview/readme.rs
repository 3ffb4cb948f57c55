//! The README's "Moving messages" block, run as pasted against the test bed: the block is read from README.md at
//! test time, only the deployment's particulars are put in (each `export` of the block gets the test bed's value,
//! the example hosts become the test bed's nodes, the queue `orders` a queue of this test's own), and bash runs
//! it with `set -euo pipefail`, the built binary first on `PATH`. A README example that no longer works as written
//! fails here.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use artemis_core::message::{CoreMessage, MessageHeaders, PropertyValue};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};

/// Messages the example's filter `region = 'eu'` selects, and the rest: over the safety cap (1000), so the second
/// run needs `--override-cap`, as the README says.
const EU: u32 = 100;
const OTHERS: u32 = 1_100;

/// How long the whole block may take (it measured about 10 s on the test bed).
const BLOCK_TIMEOUT: Duration = Duration::from_secs(300);

/// The first ```sh block after the heading `heading` of a Markdown text.
fn shell_block<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let section = &markdown[markdown.find(heading).unwrap_or_else(|| panic!("README.md has no {heading:?}"))..];
    let start = section.find("```sh\n").expect("a ```sh block under the heading") + "```sh\n".len();
    let len = section[start..].find("\n```").expect("the block ends") + 1;
    &section[start..start + len]
}

/// The block with the deployment's particulars put in: each `export NAME=…` line whose name `exports` holds is
/// given that value, and each `(README text, test bed text)` of `replace` is replaced (the README text must be
/// there: a README that changed its example fails here rather than run something else).
fn localised(block: &str, exports: &[(&str, String)], replace: &[(&str, String)]) -> String {
    let mut script = String::new();
    for line in block.lines() {
        let exported = exports.iter().find(|(name, _)| line.starts_with(&format!("export {name}=")));
        match exported {
            Some((name, value)) => script.push_str(&format!("export {name}='{value}'\n")),
            None => {
                script.push_str(line);
                script.push('\n');
            }
        }
    }
    for (name, _) in exports {
        assert!(block.contains(&format!("export {name}=")), "the README's block no longer exports {name}");
    }
    for (from, to) in replace {
        assert!(script.contains(from), "the README's block no longer holds {from:?}");
        script = script.replace(from, to);
    }
    script
}

/// Sends `count` durable messages with the string property `region` to `queue` on `node` over Core.
async fn send_with_region(node: &Node, queue: &str, region: &str, count: u32) {
    let options = artemis_core::ConnectOptions::from_url(&node.core_url())
        .unwrap()
        .credentials(node.user.clone(), node.password.clone())
        .connection_ttl(Duration::from_secs(10));
    let conn = artemis_core::Connection::connect(&options).await.unwrap();
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await.unwrap();
    let producer = session.producer(None);
    for i in 0..count {
        let mut headers = MessageHeaders {
            address: Some(format!("{queue}::{queue}").as_str().into()),
            durable: true,
            timestamp: chrono::Utc::now().timestamp_millis(),
            user_id: Some(artemis_core::message::new_user_id()),
            priority: 4,
            ..MessageHeaders::default()
        };
        headers.properties.insert("_AMQ_ROUTING_TYPE", PropertyValue::Byte(1));
        headers.properties.insert("region", PropertyValue::String(region.into()));
        headers.properties.insert("payload_id", PropertyValue::String(format!("{region}-{i}").as_str().into()));
        producer.send(&CoreMessage { headers, body: b"order".to_vec().into() }).await.unwrap();
    }
    session.commit().await.unwrap();
    let _ = conn.close().await;
}

/// The directory of the built binary, to put first on `PATH`.
fn binary_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_artemis-transfer")).parent().expect("the binary is in a directory").to_path_buf()
}

/// Runs `script` under bash in `dir`, in a process group of its own that is killed afterwards (the block starts a
/// worker in the background), within [`BLOCK_TIMEOUT`].
async fn run_bash(script: &str, dir: &Path) -> std::process::Output {
    let path = format!("{}:{}", binary_dir().display(), std::env::var("PATH").unwrap_or_default());
    // The block's own `worker &` ends with it: SIGTERM lets the worker drain and exit.
    let wrapped = format!("trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n{script}");
    let mut command = tokio::process::Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", &wrapped])
        .current_dir(dir)
        .env("PATH", path)
        .env("RUST_LOG", "warn")
        .env_remove("ARTEMIS_TRANSFER_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let child = command.spawn().expect("cannot run bash");
    let group = child.id().expect("a running child has an id");
    let output = tokio::time::timeout(BLOCK_TIMEOUT, child.wait_with_output()).await;
    // Whatever happened, nothing the block started outlives the test.
    let _ = std::process::Command::new("kill").args(["-TERM", "--", &format!("-{group}")]).status();
    output.unwrap_or_else(|_| panic!("the README's block did not finish within {BLOCK_TIMEOUT:?}")).expect("bash ran")
}

/// The states of the runs the block started, oldest first, and what they delivered in all.
async fn outcome(database_url: &str) -> (Result<Vec<String>, sqlx::Error>, Result<i64, sqlx::Error>) {
    let pool = match sqlx::PgPool::connect(database_url).await {
        Ok(pool) => pool,
        Err(e) => return (Err(e), Ok(0)),
    };
    let states = sqlx::query_scalar("SELECT state FROM transfer_run WHERE state <> 'previewed' ORDER BY created_at")
        .fetch_all(&pool)
        .await;
    let delivered =
        sqlx::query_scalar("SELECT coalesce(sum((counters->>'delivered')::bigint), 0)::bigint FROM transfer_run")
            .fetch_one(&pool)
            .await;
    pool.close().await;
    (states, delivered)
}

/// Drops the database at `url` (its runs, jobs and audit), over the test bed's own connection.
async fn drop_database(admin_url: &str, url: &str) {
    use sqlx::Connection;
    let name = url.rsplit_once('/').expect("a database URL ends with /<database>").1;
    let mut admin = sqlx::PgConnection::connect(admin_url).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).execute(&mut admin).await.unwrap();
    let _ = admin.close().await;
}

#[tokio::test]
async fn the_readme_moving_messages_example_runs_as_written() {
    let bed = TestBed::require().await;
    let jq = std::process::Command::new("jq").arg("--version").output();
    assert!(jq.is_ok_and(|o| o.status.success()), "the README's example uses jq: install it (apt-get install jq)");
    let (east, west) = (bed.node("east-1"), bed.node("west-1"));
    let queue = unique_name("readme_orders");
    Jolokia::new(east).create_queue(&queue).await.unwrap();
    send_with_region(east, &queue, "eu", EU).await;
    send_with_region(east, &queue, "us", OTHERS).await;
    let database_url = testbed::postgres::fresh_database("readme").await;

    let readme = std::fs::read_to_string(testbed::config::repo_root().join("README.md")).unwrap();
    let script = localised(
        shell_block(&readme, "## Moving messages"),
        &[
            ("DATABASE_URL", database_url.clone()),
            ("ARTEMIS_TRANSFER_CREDENTIALS__PROD__USER", east.user.clone()),
            ("ARTEMIS_TRANSFER_CREDENTIALS__PROD__PASSWORD", east.password.clone()),
        ],
        &[
            ("tcp://east-1.example.com:61616", east.core_url()),
            ("tcp://west-1.example.com:61616", west.core_url()),
            ("/orders ", format!("/{queue} ")),
            ("--confirm orders", format!("--confirm {queue}")),
        ],
    );
    let dir = std::env::temp_dir().join(unique_name("readme_example"));
    std::fs::create_dir_all(&dir).unwrap();
    let ran = run_bash(&script, &dir).await;
    let (stdout, stderr) = (String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));

    // What the block did, by the database and the brokers rather than by its own words; read before the clean-up,
    // asserted after it.
    let (states, delivered) = outcome(&database_url).await;
    let on_source = Jolokia::new(east).message_count(&queue).await;
    let on_target = Jolokia::new(west).message_count(&queue).await;
    let _ = Jolokia::new(east).destroy_queue(&queue).await;
    let _ = Jolokia::new(west).destroy_queue(&queue).await;
    let _ = std::fs::remove_dir_all(&dir);
    drop_database(&bed.database_url, &database_url).await;

    assert_eq!(
        ran.status.code(),
        Some(0),
        "the README's block failed\n--- script\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let (on_source, on_target) = (on_source.unwrap(), on_target.unwrap());
    let (states, delivered) = (states.unwrap(), delivered.unwrap());
    assert_eq!(states, ["succeeded", "returned"], "{stdout}");
    assert_eq!(on_source + on_target, i64::from(EU + OTHERS), "every message is on one of the two queues");
    assert_eq!(on_target, delivered, "the target holds what the runs delivered");
    assert!(delivered >= i64::from(EU), "the filtered move delivered the {EU} eu messages: {delivered}");
}

#[test]
fn the_block_is_read_up_to_its_end_and_localised() {
    let markdown = "# x\n## Moving messages\n\n```sh\nexport A=1\necho /orders now\n```\n```sh\nnot this\n```\n";
    let block = shell_block(markdown, "## Moving messages");
    assert_eq!(block, "export A=1\necho /orders now\n");
    let script = localised(block, &[("A", "two words".into())], &[("/orders ", "/q1 ".into())]);
    assert_eq!(script, "export A='two words'\necho /q1 now\n");
}
