//! `scripts/bench core`: this crate against the official Java Core client, side by side on the same test-bed
//! broker with the same settings — transacted sends of durable 1 KiB messages committed every 200, then
//! receive + individual ack + commit every 200 — measured in messages per second.
//!
//! The Java side is `tests/java/BenchCore.java` (compiled by `scripts/testbed up` against the distribution's
//! jars), one JVM driven over stdin/stdout, so that it stays warm across runs as this process does. Each side
//! gets an unmeasured warm-up round, then `--runs` measured rounds (the order of the two sides alternates, so
//! neither always finds the broker's journal in the same state). Every phase uses a fresh queue, and after each
//! phase the broker's own count (Jolokia `MessageCount`) must be what the phase claims: all sent, then none
//! left. The median of the runs is reported per side and phase, and the last line is
//! `core_ratio_vs_java: <min of send and consume ratios, ours/java>`.
//!
//! `cargo bench -p artemis-core --bench core -- [--messages N] [--runs N] [--warmup N] [--node NAME]
//! [--only rust|java]` (`--only` runs one side, to profile it; no ratio is printed then).

use std::fmt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use artemis_core::{message, ConnectOptions, Connection, ConsumerOptions, SessionOptions};
use bytes::Bytes;
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The settings: 1 KiB bodies, a commit every 200 messages.
const BODY_BYTES: usize = 1024;
const BATCH: usize = 200;
/// How long one receive may wait before the phase fails (a broken run, not a slow one).
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(30);

struct Settings {
    messages: usize,
    runs: usize,
    warmup: usize,
    node: String,
    /// Only one side (for profiling); no ratio is printed then.
    only: Option<Side>,
}

impl Settings {
    fn from_args() -> Settings {
        let mut s = Settings { messages: 50_000, runs: 3, warmup: 30_000, node: "east-1".into(), only: None };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().unwrap_or_else(|| panic!("{name} needs a value"));
            match arg.as_str() {
                // `cargo bench` passes this to every bench binary.
                "--bench" => {}
                "--messages" => s.messages = value("--messages").parse().expect("--messages N"),
                "--runs" => s.runs = value("--runs").parse().expect("--runs N"),
                "--warmup" => s.warmup = value("--warmup").parse().expect("--warmup N"),
                "--node" => s.node = value("--node"),
                "--only" => {
                    s.only = Some(match value("--only").as_str() {
                        "rust" => Side::Rust,
                        "java" => Side::Java,
                        other => panic!("--only rust|java, not {other}"),
                    })
                }
                other => panic!("unknown argument {other}; see the doc of benches/core.rs"),
            }
        }
        assert!(s.messages > 0 && s.runs > 0, "--messages and --runs must be positive");
        s
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Rust,
    Java,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Rust => "rust",
            Side::Java => "java",
        })
    }
}

/// One round of one side: the two phases' throughputs.
#[derive(Clone, Copy)]
struct Round {
    send: f64,
    consume: f64,
}

/// The Java client, one JVM for the whole benchmark.
struct JavaSide {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl JavaSide {
    async fn start(bed: &TestBed, node: &Node) -> JavaSide {
        let build = bed.java_build_dir();
        assert!(
            build.join("BenchCore.class").exists(),
            "{} has no BenchCore.class: run `scripts/testbed up`, which compiles tests/java",
            build.display()
        );
        let classpath = format!("{}:{}", build.display(), bed.artemis_home().join("lib").join("*").display());
        let mut child = Command::new("java")
            .args(["-Xms512m", "-Xmx512m", "-cp", &classpath, "BenchCore"])
            .args(["--url", &node.core_url(), "--user", &node.user, "--password", &node.password])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("cannot run `java`: is a JDK installed?");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        JavaSide { child, stdin, stdout }
    }

    /// Sends one command and returns the time it reported.
    async fn run(&mut self, command: String) -> Duration {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.expect("write to BenchCore");
        self.stdin.flush().await.expect("write to BenchCore");
        let line = self.stdout.next_line().await.expect("read from BenchCore");
        let line = line.unwrap_or_else(|| panic!("BenchCore ended during `{command}` (its error is above)"));
        let nanos = line.strip_prefix("ok ").and_then(|n| n.parse().ok());
        Duration::from_nanos(nanos.unwrap_or_else(|| panic!("BenchCore answered `{line}` to `{command}`")))
    }

    async fn quit(mut self) {
        let _ = self.stdin.write_all(b"quit\n").await;
        let _ = self.child.wait().await;
    }
}

/// The Rust side: transacted sends, commit every `BATCH`; the clock runs from the first send to the answer of
/// the last commit, as on the Java side.
async fn rust_produce(conn: &Connection, queue: &str, count: usize) -> Duration {
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    let producer = session.producer(Some(queue));
    let payload = Bytes::from((0..BODY_BYTES).map(|i| i as u8).collect::<Vec<u8>>());
    let start = Instant::now();
    for i in 1..=count {
        let mut m = message::durable_message(queue);
        m.set_bytes(payload.clone());
        producer.send(&m).await.expect("send");
        if i % BATCH == 0 || i == count {
            session.commit().await.expect("commit");
        }
    }
    let elapsed = start.elapsed();
    session.close().await.expect("close");
    elapsed
}

/// The Rust side: receive, individual ack, commit every `BATCH`.
async fn rust_consume(conn: &Connection, queue: &str, count: usize) -> Duration {
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    let mut consumer = session.create_consumer(queue, ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let start = Instant::now();
    for i in 1..=count {
        let delivery = consumer.recv(RECEIVE_TIMEOUT).await.expect("receive");
        let delivery = delivery.unwrap_or_else(|| panic!("message {i} of {count} did not arrive in time"));
        consumer.ack(&delivery).await.expect("ack");
        if i % BATCH == 0 || i == count {
            session.commit().await.expect("commit");
        }
    }
    let elapsed = start.elapsed();
    consumer.close().await.expect("close consumer");
    session.close().await.expect("close");
    elapsed
}

/// Waits (briefly) until the broker counts `expected` messages on `queue`; anything else fails the benchmark.
async fn expect_count(jolokia: &Jolokia, queue: &str, expected: i64, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let count = jolokia.message_count(queue).await.expect("Jolokia MessageCount");
        if count == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after {after}, the broker counts {count} messages on {queue}, not {expected}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn rate(count: usize, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64()
}

/// One round of `side` on fresh queues, with the broker's counts checked after each phase.
async fn round(side: Side, count: usize, conn: &Connection, java: &mut JavaSide, jolokia: &Jolokia) -> Round {
    let queue = unique_name(&format!("bench-core-{side}"));
    jolokia.create_queue(&queue).await.expect("create the queue");
    let send = match side {
        Side::Rust => rust_produce(conn, &queue, count).await,
        Side::Java => java.run(format!("produce {queue} {count} {BATCH} {BODY_BYTES}")).await,
    };
    expect_count(jolokia, &queue, count as i64, &format!("{side} sent")).await;
    let consume = match side {
        Side::Rust => rust_consume(conn, &queue, count).await,
        Side::Java => java.run(format!("consume {queue} {count} {BATCH}")).await,
    };
    expect_count(jolokia, &queue, 0, &format!("{side} consumed")).await;
    jolokia.destroy_queue(&queue).await.expect("destroy the queue");
    Round { send: rate(count, send), consume: rate(count, consume) }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[tokio::main]
async fn main() {
    // Run as a spawned task, as a service's work runs, not on the main thread inside `block_on`: there every
    // handoff to the connection task (itself a spawned task) crosses threads, costing a context switch per
    // message (see docs/BENCHMARKS.md). `BENCH_ON_MAIN_THREAD=1` measures that case.
    if std::env::var_os("BENCH_ON_MAIN_THREAD").is_some() {
        bench().await;
    } else {
        tokio::spawn(bench()).await.expect("the benchmark failed");
    }
}

async fn bench() {
    let s = Settings::from_args();
    let bed = TestBed::require().await;
    let node = bed.node(&s.node);
    let jolokia = Jolokia::new(node);
    let version = jolokia.broker_state().await.expect("broker state")["Version"].as_str().unwrap_or("?").to_string();
    let opts = ConnectOptions::from_url(&node.core_url()).expect("url").credentials(&node.user, &node.password);
    let conn = Connection::connect(&opts).await.expect("connect");
    let mut java = JavaSide::start(bed, node).await;

    println!(
        "core benchmark: {} ({}), Artemis {version}; {} durable {BODY_BYTES}-byte messages per phase, transacted, \
         commit every {BATCH}; median of {} runs after a {}-message warm-up per side",
        node.name,
        node.core_url(),
        s.messages,
        s.runs,
        s.warmup
    );
    if s.warmup > 0 {
        for side in [Side::Rust, Side::Java].into_iter().filter(|side| s.only.is_none_or(|o| o == *side)) {
            round(side, s.warmup, &conn, &mut java, &jolokia).await;
        }
    }
    let mut rust = Vec::new();
    let mut javas = Vec::new();
    for run in 1..=s.runs {
        let order = if run % 2 == 1 { [Side::Rust, Side::Java] } else { [Side::Java, Side::Rust] };
        for side in order.into_iter().filter(|side| s.only.is_none_or(|o| o == *side)) {
            let r = round(side, s.messages, &conn, &mut java, &jolokia).await;
            println!("run {run}  {side}  send {:>8.0} msgs/s  consume+ack+commit {:>8.0} msgs/s", r.send, r.consume);
            match side {
                Side::Rust => rust.push(r),
                Side::Java => javas.push(r),
            }
        }
    }
    java.quit().await;
    conn.close().await.expect("close");

    if s.only.is_some() {
        return;
    }
    let phase = |v: &[Round], f: fn(&Round) -> f64| median(v.iter().map(f).collect());
    let (rust_send, java_send) = (phase(&rust, |r| r.send), phase(&javas, |r| r.send));
    let (rust_consume, java_consume) = (phase(&rust, |r| r.consume), phase(&javas, |r| r.consume));
    let (send_ratio, consume_ratio) = (rust_send / java_send, rust_consume / java_consume);
    println!();
    println!("| phase (median of {} runs, msgs/s) | artemis-core (Rust) | Java Core client | ours/java |", s.runs);
    println!("|---|---:|---:|---:|");
    println!("| transacted send, commit every {BATCH} | {rust_send:.0} | {java_send:.0} | {send_ratio:.2} |");
    println!("| receive + individual ack, commit every {BATCH} | {rust_consume:.0} | {java_consume:.0} | {consume_ratio:.2} |");
    println!("core_ratio_vs_java: {:.2}", send_ratio.min(consume_ratio));
}
