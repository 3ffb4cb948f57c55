//! `scripts/bench count`: what the preview's count of a filter's selection costs (ADR 0015). A browse of the
//! source with the frozen filter reads every matching message; the broker evaluates the filter on every message of
//! the queue (paging a deep one back in as it goes). Fills a fresh queue on east-1 with N messages of 1 KiB over
//! Core (`grp` = `rare` for 1 in 1,000, `tenth` for 1 in 10, else `other`), then times `count_matching` with no
//! limit for each filter, and the whole queue up to the preview's default limit; prints msg/s scanned and matched.
//!
//!   scripts/bench count [--messages N]      (default 1,000,000)

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use artemis_core::message::{CoreMessage, MessageHeaders, PropertyValue};
use artemis_core::{ConnectOptions, Connection, SessionOptions};
use artemis_transfer::broker::count::{count_matching, CountLimit, Counted};
use artemis_transfer::transfer::preview::DEFAULT_COUNT_LIMIT;
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};

fn group(i: u64) -> &'static str {
    if i % 1000 == 7 {
        "rare"
    } else if i % 10 == 3 {
        "tenth"
    } else {
        "other"
    }
}

async fn connect(node: &Node) -> Result<Connection> {
    let options = ConnectOptions::from_url(&node.core_url())?
        .credentials(node.user.clone(), node.password.clone())
        .call_timeout(Duration::from_secs(120));
    Ok(Connection::connect(&options).await?)
}

async fn fill(conn: &Connection, queue: &str, n: u64) -> Result<()> {
    let session = conn.create_session(SessionOptions::transacted()).await?;
    let producer = session.producer(None);
    let body = vec![b'x'; 1024];
    for i in 0..n {
        let mut headers = MessageHeaders {
            address: Some(format!("{queue}::{queue}").as_str().into()),
            durable: true,
            timestamp: chrono::Utc::now().timestamp_millis(),
            priority: 4,
            ..MessageHeaders::default()
        };
        headers.properties.insert("_AMQ_ROUTING_TYPE", PropertyValue::Byte(1));
        headers.properties.insert("grp", PropertyValue::String(group(i).into()));
        producer.send(&CoreMessage { headers, body: body.clone().into() }).await?;
        if i % 1000 == 999 {
            session.commit().await?;
        }
    }
    session.commit().await?;
    let _ = session.close().await;
    Ok(())
}

async fn time_count(conn: &Connection, queue: &str, filter: Option<&str>, limit: CountLimit) -> Result<()> {
    let started = Instant::now();
    let counted = count_matching(conn, queue, filter, limit).await?;
    let secs = started.elapsed().as_secs_f64();
    let n = match counted {
        Counted::Exact(n) | Counted::AtLeast(n) => n,
    };
    println!(
        "count {:<18} {counted:?} in {secs:.1} s ({:.0} matching msg/s)",
        filter.unwrap_or("(whole queue)"),
        n as f64 / secs
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 =
        args.iter().position(|a| a == "--messages").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(1_000_000);
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let queue = unique_name("bench_count");
    let jolokia = Jolokia::new(node);
    jolokia.create_queue(&queue).await.context("create the queue")?;
    let conn = connect(node).await?;
    let started = Instant::now();
    fill(&conn, &queue, n).await?;
    println!("filled {queue} with {n} messages of 1 KiB in {:.1} s", started.elapsed().as_secs_f64());
    let unlimited = CountLimit { messages: u64::MAX, time: Duration::from_secs(3600) };
    let result = async {
        time_count(&conn, &queue, Some("grp = 'rare'"), unlimited).await?;
        time_count(&conn, &queue, Some("grp = 'tenth'"), unlimited).await?;
        time_count(&conn, &queue, Some("grp = 'tenth'"), DEFAULT_COUNT_LIMIT).await?;
        time_count(&conn, &queue, None, DEFAULT_COUNT_LIMIT).await
    }
    .await;
    let _ = conn.close().await;
    destroy(&jolokia, &queue).await?;
    result
}

/// Destroys `queue`, asking again while the broker is busy: removing a million paged messages outlasts one
/// management call's timeout, and a queue left behind would fill the test bed's broker.
async fn destroy(jolokia: &Jolokia, queue: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        match jolokia.destroy_queue(queue).await {
            Ok(()) => return Ok(()),
            Err(e) if e.to_string().contains("AMQ229017") => return Ok(()), // no such queue: an earlier call did it
            Err(e) if Instant::now() > deadline => return Err(e).context("destroy the queue"),
            Err(_) => tokio::time::sleep(Duration::from_secs(5)).await,
        }
    }
}
