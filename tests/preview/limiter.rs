//! The per-node rate limiter, counted where it matters: at the node. A small recording HTTP proxy sits in
//! front of east-1's Jolokia and east-1 is registered through it, so every management call any process makes
//! to east-1 passes the proxy, which notes when it arrived and how many Jolokia requests it carried.
//!
//! Three loops of unequal demand run `artemis-transfer preview` processes at once, sharing nothing but
//! Postgres, with `node_calls_per_second` set to 5. At the proxy: no window of time holds more calls than the
//! bucket's burst plus the rate times the window; every loop makes progress; and each preview is exactly one
//! batched POST to the node.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use artemis_transfer::broker::jolokia::QueueConfig;
use artemis_transfer::jobs::settings;
use serde_json::Value;
use testbed::{TestBed, TestQueues};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::cli::{codes, Cli};

/// The node rate for this test (the bucket holds as many tokens: its burst), as low as the costliest preview's
/// batch (a filter's: 6 reads), so that request needs the whole bucket. Before permits were taken in turn
/// (migration 0007) such a request waited while cheaper ones kept taking tokens, and a CI run starved the greedy
/// process at this rate; now every caller is served in the order it asked.
const RATE: f64 = 6.0;

/// How late a call may reach the proxy after its permit was granted (process scheduling on a busy machine):
/// the check allows the rate times this much on top of every window.
const ARRIVAL_JITTER_SECS: f64 = 0.5;

/// One HTTP request seen by the proxy.
#[derive(Debug, Clone)]
struct Call {
    at: Instant,
    /// Jolokia requests it carried: a batch's length, else 1.
    cost: usize,
    /// A JSON array body (a batched request).
    batched: bool,
    /// The body, for the failure message.
    body: String,
}

/// A recording HTTP/1.1 proxy to one upstream: each request is forwarded on a fresh upstream connection with
/// `Connection: close`, and its answer relayed back until the upstream closes.
struct Proxy {
    port: u16,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl Proxy {
    async fn start(upstream_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&calls);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let _ = relay(client, upstream_port, log).await;
                });
            }
        });
        Proxy { port, calls }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/console/jolokia", self.port)
    }

    /// The calls recorded so far, and a fresh log from now on.
    fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

async fn relay(mut client: TcpStream, upstream_port: u16, log: Arc<Mutex<Vec<Call>>>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = client.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = &buf[head_end..head_end + length];
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let (cost, batched) = match &parsed {
        Some(Value::Array(entries)) => (entries.len(), true),
        _ => (1, false),
    };
    log.lock().unwrap().push(Call {
        at: Instant::now(),
        cost,
        batched,
        body: String::from_utf8_lossy(body).chars().take(300).collect(),
    });

    let mut forwarded: String = head
        .trim_end()
        .split("\r\n")
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            !l.starts_with("connection:") && !l.starts_with("keep-alive:")
        })
        .map(|l| format!("{l}\r\n"))
        .collect();
    forwarded.push_str("Connection: close\r\n\r\n");
    let mut upstream = TcpStream::connect(("127.0.0.1", upstream_port)).await?;
    upstream.write_all(forwarded.as_bytes()).await?;
    upstream.write_all(body).await?;
    tokio::io::copy(&mut upstream, &mut client).await?;
    client.shutdown().await
}

/// The largest excess of calls over what the bucket allows, over every window between two recorded calls:
/// `calls in [tᵢ, tⱼ] − (burst + rate × (tⱼ − tᵢ + jitter))`, with the window that gives it. Positive means
/// the node saw more than the limiter may let through.
fn worst_window(calls: &[Call]) -> (f64, usize, f64) {
    let mut worst = (f64::MIN, 0, 0.0);
    for i in 0..calls.len() {
        let mut sum = 0;
        for j in i..calls.len() {
            sum += calls[j].cost;
            let span = calls[j].at.duration_since(calls[i].at).as_secs_f64();
            let excess = sum as f64 - (RATE + RATE * (span + ARRIVAL_JITTER_SECS));
            if excess > worst.0 {
                worst = (excess, sum, span);
            }
        }
    }
    worst
}

/// The most calls in any one-second window starting at a recorded call (for the report).
fn busiest_second(calls: &[Call]) -> usize {
    (0..calls.len())
        .map(|i| {
            calls[i..]
                .iter()
                .take_while(|c| c.at.duration_since(calls[i].at) < Duration::from_secs(1))
                .map(|c| c.cost)
                .sum()
        })
        .max()
        .unwrap_or(0)
}

/// Runs previews in a loop until `until`, pausing `pause` between them; returns how many completed.
async fn preview_loop(
    cli: Cli,
    from: String,
    to: String,
    selection: Vec<String>,
    pause: Duration,
    until: Instant,
) -> usize {
    let mut done = 0;
    while Instant::now() < until {
        let mut args = vec!["preview", "--from", &from, "--to", &to, "--json"];
        args.extend(selection.iter().map(String::as_str));
        let ran = cli.run(&args).await;
        ran.expect_code(0);
        let stored = ran.json();
        // A permit failure would leave the node unread: every preview must have read its source.
        assert!(
            !codes(&stored).iter().any(|(_, c)| c == "source-unreachable" || c == "source-queue-unknown"),
            "{:?}",
            codes(&stored)
        );
        done += 1;
        tokio::time::sleep(pause).await;
    }
    done
}

#[tokio::test]
async fn three_processes_share_the_node_rate_and_each_preview_is_one_batch() {
    let bed = TestBed::require().await;
    let (east1, west1) = (bed.node("east-1"), bed.node("west-1"));
    let cli = Cli::fresh("limiter").await;
    let pool = sqlx::PgPool::connect(&cli.database_url).await.unwrap();
    settings::set(&pool, "node_calls_per_second", RATE.into(), "limiter test").await.unwrap();

    let proxy = Proxy::start(east1.http_port).await;
    let added = cli
        .run(&[
            "cluster",
            "add",
            "east",
            "--core-url",
            &east1.core_url(),
            "--jolokia-url",
            &proxy.url(),
            "--credentials",
            "testbed",
        ])
        .await;
    added.expect_code(0);
    let clusters = cli.run(&["cluster", "list", "--json"]).await.json_lines();
    assert_eq!(clusters[0]["nodes"][0]["name"], "east-1");
    assert_eq!(
        clusters[0]["nodes"][0]["endpoints"][0]["jolokia_url"],
        proxy.url(),
        "east-1 is reached through the proxy"
    );
    cli.register("west", west1).await;

    let queues = TestQueues::new();
    let source = super::source_with(&queues, 3).await;
    let target = queues.name(west1, "limiter_target");
    super::management(west1).create_queue(&QueueConfig::plain_anycast(&target)).await.unwrap();
    let (from, to) = (format!("east/east-1/{source}"), format!("west/west-1/{target}"));

    // One preview alone: one batched POST to the node (after the single read that finds its live endpoint).
    proxy.take();
    let (_, stored) = cli.preview_json(&from, &to, &["--all"]).await;
    assert_eq!(stored["preview"]["selection_size"], 3, "{stored}");
    let calls = proxy.take();
    let batches: Vec<&Call> = calls.iter().filter(|c| c.batched).collect();
    assert_eq!(batches.len(), 1, "one batched request per node per preview: {calls:#?}");
    assert_eq!(batches[0].cost, 5, "queue, address settings, address, JVM heap, broker state: {calls:#?}");
    assert_eq!(calls.len(), 2, "the batch and the live-endpoint check, nothing else: {calls:#?}");
    assert!(calls.iter().any(|c| !c.batched && c.body.contains("\"Active\"")), "{calls:#?}");

    // Three processes at once, unequal demand: one back to back with a filter (7 calls a preview), one every
    // half second, one every two seconds (6 calls a preview each).
    tokio::time::sleep(Duration::from_secs_f64(2.0)).await;
    proxy.take();
    let started = Instant::now();
    let until = started + Duration::from_secs(20);
    let loops = [
        ("greedy", vec!["--filter".to_string(), "p_int >= 0".to_string()], Duration::ZERO),
        ("steady", vec!["--all".to_string()], Duration::from_millis(500)),
        ("light", vec!["--ids".to_string(), "1,2,3".to_string()], Duration::from_secs(2)),
    ];
    let tasks: Vec<_> = loops
        .iter()
        .map(|(_, selection, pause)| {
            tokio::spawn(preview_loop(cli.clone(), from.clone(), to.clone(), selection.clone(), *pause, until))
        })
        .collect();
    let mut done = Vec::new();
    for task in tasks {
        done.push(task.await.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    let calls = proxy.take();
    let total: usize = calls.iter().map(|c| c.cost).sum();
    let (excess, window_calls, window_secs) = worst_window(&calls);
    println!(
        "limiter: {elapsed:.1} s, previews {:?} (greedy, steady, light), {total} calls at east-1 = {:.2}/s \
         (limit {RATE}/s), busiest second {} calls, worst window {window_calls} calls in {window_secs:.2} s \
         (excess {excess:.2})",
        done,
        total as f64 / elapsed,
        busiest_second(&calls)
    );
    assert!(
        excess <= 0.0,
        "east-1 saw {window_calls} calls in {window_secs:.2} s: more than the burst {RATE} + {RATE}/s allow"
    );
    for ((name, _, _), n) in loops.iter().zip(&done) {
        assert!(*n >= 2, "the {name} process starved: {done:?}");
    }
    let previews: usize = done.iter().sum();
    assert_eq!(
        calls.iter().filter(|c| c.batched).count(),
        previews,
        "exactly one batched request to east-1 per preview, under contention too"
    );
    assert!(total as f64 / elapsed > RATE * 0.5, "the node's budget was used, not wasted: {total} calls");
}
