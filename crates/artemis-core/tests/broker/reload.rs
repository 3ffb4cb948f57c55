//! A browse of queues reloaded from the journal: durable messages (one in 24 a
//! large message, one address paging) survive a `kill -9` of a private scratch
//! broker, and every browse — the first on the fresh broker, the first after the
//! restart, and again once it is warm — must see every message once, as many as
//! the queue's MessageCount.
//!
//! Before browser.rs waited for a second quiet marker, a browse on a freshly
//! started JVM often ended right after a large message (24, 336, 456, 1,632,
//! 5,856 of 6,000: always a multiple of 24), before and after the restart alike;
//! the reload itself is not the cause, the cold broker is (browser.rs, module
//! doc). Warm brokers seldom hit the window, so only the first browses show it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use artemis_core::message::{durable_message, PropertyValue};
use artemis_core::{ConnectOptions, Connection, ConsumerOptions, QueueConfig, SessionOptions};
use bytes::Bytes;
use testbed::scratch::{ScratchBroker, ScratchOptions};

/// Messages per queue.
const COUNT: usize = 6_000;

/// One message in this many is a 100 KiB BYTES message (a large message: above the 100 KiB - 4 limit).
const LARGE_EVERY: usize = 24;

/// Messages per transaction while producing.
const BATCH: usize = 500;

/// The paged address and queue: `max-size-bytes` 1 MiB, so nearly everything goes to page files.
const PAGED: &str = "reload_paged";

/// The other address and queue: everything stays in the journal and in memory.
const PLAIN: &str = "reload_plain";

fn options(broker: &ScratchBroker) -> ConnectOptions {
    ConnectOptions::new("127.0.0.1", broker.core_port)
        .credentials(broker.user.clone(), broker.password.clone())
        .call_timeout(Duration::from_secs(20))
}

/// Message `n` of a queue: TEXT, BYTES (1 KiB) or MAP by turn, every [`LARGE_EVERY`]th a 100 KiB BYTES message;
/// each with its index in the property `n`.
fn message(address: &str, n: usize) -> artemis_core::CoreMessage {
    let mut m = durable_message(address);
    if n % LARGE_EVERY == LARGE_EVERY - 1 {
        m.set_bytes(Bytes::from(vec![(n % 251) as u8; 100 * 1024]));
    } else {
        match n % 3 {
            0 => m.set_text(Some(&format!("text {n} {}", "t".repeat(200)))),
            1 => m.set_bytes(Bytes::from(vec![(n % 251) as u8; 1024])),
            _ => {
                let mut map = artemis_core::message::TypedProperties::default();
                map.insert("n", PropertyValue::Long(n as i64));
                map.insert("s", PropertyValue::String("m".repeat(100).as_str().into()));
                m.set_map(&map);
            }
        }
    }
    m.headers.properties.insert("n", PropertyValue::Long(n as i64));
    m
}

async fn produce(conn: &Connection, address: &str) {
    let session = conn.create_session(SessionOptions::transacted()).await.expect("session");
    session.create_queue(&QueueConfig::anycast(address, address)).await.expect("queue");
    let producer = session.producer(Some(address));
    for n in 0..COUNT {
        producer.send(&message(address, n)).await.expect("send");
        if (n + 1) % BATCH == 0 || n + 1 == COUNT {
            session.commit().await.expect("commit");
        }
    }
    session.close().await.expect("close");
}

/// What one browse saw.
#[derive(Debug)]
struct Browse {
    /// The `n` of every message seen.
    seen: BTreeSet<i64>,
    /// Messages seen, repeats included.
    deliveries: usize,
    /// The queue's MessageCount (queue query) just before the browse.
    message_count: i64,
    took: Duration,
}

impl Browse {
    /// The first indexes the browse did not see (a few, for the failure message).
    fn first_missing(&self) -> Vec<i64> {
        (0..COUNT as i64).filter(|n| !self.seen.contains(n)).take(5).collect()
    }
}

async fn browse(conn: &Connection, queue: &str) -> Browse {
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("session");
    let message_count = session.queue_query(queue).await.expect("queue query").expect("the queue").message_count;
    let started = Instant::now();
    let mut browser = session.create_browser(queue, ConsumerOptions::default()).await.expect("browser");
    let mut seen = BTreeSet::new();
    let mut deliveries = 0;
    while let Some(d) = browser.next_streaming(&mut tokio::io::sink()).await.expect("browse") {
        deliveries += 1;
        match d.message().headers.property("n") {
            Some(PropertyValue::Long(n)) => seen.insert(*n),
            other => panic!("a message without its index: {other:?}"),
        };
    }
    let took = started.elapsed();
    browser.close().await.expect("close browser");
    session.close().await.expect("close session");
    Browse { seen, deliveries, message_count, took }
}

/// The paged address really pages: it has page files on disk.
fn page_files(broker: &ScratchBroker) -> usize {
    let dir = broker.dir().join("data").join("paging");
    let Ok(entries) = std::fs::read_dir(&dir) else { return 0 };
    entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .filter(|f| f.path().extension().is_some_and(|x| x == "page"))
        .count()
}

/// [`COUNT`] durable messages on a paged and on an unpaged queue, all seen by a browse; the broker is killed
/// (SIGKILL) and restarted on its journal and page files, and two browses after the restart see every message of
/// both queues again, once each, as many as the queue's MessageCount.
#[tokio::test]
async fn browse_after_a_journal_reload_sees_every_message() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    testbed::TestBed::require().await;
    let paged_setting = format!(
        "<address-setting match=\"{PAGED}\">\
           <address-full-policy>PAGE</address-full-policy>\
           <max-size-bytes>1048576</max-size-bytes>\
           <page-size-bytes>262144</page-size-bytes>\
         </address-setting></address-settings>"
    );
    let mut broker = ScratchBroker::start_with(
        "reload",
        ScratchOptions { broker_xml: vec![("</address-settings>".into(), paged_setting)], ..ScratchOptions::default() },
    )
    .await;

    let conn = Connection::connect(&options(&broker)).await.expect("connect to the scratch broker");
    let started = Instant::now();
    tokio::join!(produce(&conn, PAGED), produce(&conn, PLAIN));
    eprintln!("produced {COUNT} messages to each of {PAGED} and {PLAIN} in {:?}", started.elapsed());
    assert!(page_files(&broker) > 0, "{PAGED} must page for this test");
    let mut failures = Vec::new();
    for queue in [PAGED, PLAIN] {
        check(&browse(&conn, queue).await, &format!("{queue} before the restart"), &mut failures);
    }
    conn.close().await.ok();

    broker.kill().await;
    broker.restart().await;
    let conn = Connection::connect(&options(&broker)).await.expect("connect after the restart");
    for round in 1..=2 {
        for queue in [PAGED, PLAIN] {
            check(&browse(&conn, queue).await, &format!("{queue} after the restart, browse {round}"), &mut failures);
        }
    }
    conn.close().await.ok();
    broker.terminate().await;
    assert!(failures.is_empty(), "a browse ended early:\n{}", failures.join("\n"));
}

/// Prints what a browse saw; notes a failure unless it saw every message once and MessageCount agrees.
fn check(b: &Browse, what: &str, failures: &mut Vec<String>) {
    let line = format!(
        "{what}: saw {} distinct in {} deliveries of MessageCount {} (produced {COUNT}) in {:?}",
        b.seen.len(),
        b.deliveries,
        b.message_count,
        b.took
    );
    eprintln!("{line}");
    if b.message_count != COUNT as i64 || b.seen.len() != COUNT || b.deliveries != COUNT {
        failures.push(format!("{line}; first missing {:?}", b.first_missing()));
    }
}
