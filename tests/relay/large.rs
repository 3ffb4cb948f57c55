//! Large messages in a move (issue 6, "Prove"): 20 messages of 50 MiB among 1,000 small ones, moved whole queue
//! east-1 → west-1 by a real worker process with the default batch bytes (64 MiB). Judged by the Java client:
//! every body byte-equal on the target (SHA-256 and size of the raw Core body, compared with a browse of the
//! source taken before the move), each message once. The worker's peak RSS (VmHWM) and the spool's peak size are
//! measured and bounded: a large body is spooled to disk as it arrives and never held in memory (SPEC §4.2 step 2,
//! I3).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testbed::fidelity::{self, Observed, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, TestBed};

use crate::support::{assert_accounting, assert_exactly_once, create_queue, queue_ref, Census, World};
use artemis_transfer::transfer::Selection;

const MIB: u64 = 1024 * 1024;
const LARGE: u32 = 20;
const LARGE_BYTES: u64 = 50 * MIB;
const SMALL: u32 = 1_000;

/// The worker's peak resident memory may not pass this. Why 64 MiB: it is the bound for the worker
/// (1,000,000-message scale test), and it is less than the worker's resting RSS plus one 50 MiB body, so a
/// worker that held even one large body in memory (instead of spooling it as it arrives) would fail here. What
/// a batch may hold in memory is its small messages (at most `batch` of them, a few hundred KiB here).
const PEAK_RSS_BOUND: u64 = 64 * MIB;

/// The spool may hold a batch's large bodies: receiving stops at the message that reaches `batch bytes`, so at
/// most `batch bytes` plus one body (64 MiB + 50 MiB), never the 1,000 MiB of the queue.
const SPOOL_BOUND: u64 = 64 * MIB + LARGE_BYTES;

/// Bytes free on the file system holding `path`.
fn free_bytes(path: &Path) -> u64 {
    let stat = rustix::fs::statvfs(path).expect("statvfs");
    stat.f_bavail.saturating_mul(stat.f_frsize)
}

/// A process's `VmHWM` (peak resident set) or `VmRSS`, in bytes.
pub(crate) fn proc_status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Total size of the files in `dir` and its subdirectories (0 when it does not exist).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .filter_map(|e| Some((e.path(), e.metadata().ok()?)))
        .map(|(path, meta)| if meta.is_dir() { dir_bytes(&path) } else { meta.len() })
        .sum()
}

/// A Java browse of `queue` that saw all `expected` messages. The JMS `QueueBrowser` ends at the first
/// `receiveImmediate` that finds nothing, and right after 1 GiB of large messages was written it once ended after
/// 204 of 1,020 (the same browse later saw all 1,020; docs/broker-notes.md): so the browse is repeated, a few times
/// at most, until it sees the number the broker counts.
pub(crate) async fn browse_all(node: &testbed::Node, queue: &str, expected: usize) -> Vec<Observed> {
    let mut seen = Vec::new();
    for attempt in 1..=4 {
        seen = fidelity::browse(node, queue).await;
        if seen.len() == expected {
            break;
        }
        println!("large: browse {attempt} of {queue} saw {} of {expected} messages; again", seen.len());
        tokio::time::sleep(Duration::from_secs(2 * attempt)).await;
    }
    seen
}

/// Payload id → (body SHA-256, body size), from the Java client's view.
pub(crate) fn bodies(observed: &[Observed]) -> BTreeMap<String, (String, u64)> {
    observed
        .iter()
        .map(|o| {
            let id = o.payload_id().expect("every message has a payload id").to_string();
            let sha = o.0["body_sha256"].as_str().expect("a body digest").to_string();
            let size = o.0["body_size"].as_u64().expect("a body size");
            (id, (sha, size))
        })
        .collect()
}

#[tokio::test]
async fn large_messages_move_byte_equal_with_bounded_worker_memory_and_spool() {
    let bed = TestBed::require().await;
    // East-1 holds the source (1,000 MiB) and, while they are relayed, staged copies (up to as much again);
    // west-1 receives 1,000 MiB; the spool holds at most a batch. All on this one disk: ask for 5 GiB.
    let free = free_bytes(&bed.dir);
    assert!(
        free > 5 * 1024 * MIB,
        "only {} MiB free under {}: the large-message test needs 5 GiB",
        free / MIB,
        bed.dir.display()
    );

    let east = bed.node("east-1");
    let source = unique_name("large_src");
    let target = unique_name("large_dst");
    create_queue(east, &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let produced = Instant::now();
    fidelity::produce(east, &source, &Produce { count: SMALL, prefix: "small-".into(), ..Produce::default() }).await;
    fidelity::produce(
        east,
        &source,
        &Produce {
            count: LARGE,
            prefix: "large-".into(),
            kinds: "bytes".into(),
            body_size: LARGE_BYTES,
            durable_only: true,
        },
    )
    .await;
    let count = Jolokia::new(east).message_count(&source).await.unwrap();
    assert_eq!(count, (SMALL + LARGE) as i64);
    let before = browse_all(east, &source, count as usize).await;
    println!("large: produced and browsed the source in {:?}", produced.elapsed());
    let expected = bodies(&before);
    assert_eq!(expected.len(), (SMALL + LARGE) as usize);
    assert_eq!(before.iter().filter(|o| o.0["large"] == true).count(), LARGE as usize, "the 50 MiB bodies are large");
    let ids: Vec<String> = expected.keys().cloned().collect();

    let mut world = World::new("large", &[]).await;
    let w = world.spawn_worker("w1", &[]).await;
    let pid = world.workers[w].pid();
    // The worker's TMPDIR is the log directory, and it runs as this test's user: its spool is under
    // `artemis-transfer-spool-<uid>` there (the default base), in a subdirectory of its own.
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&world.log_dir).unwrap());
    let spool_dir: PathBuf = world.log_dir.join(format!("artemis-transfer-spool-{uid}"));
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;

    // Sample the spool's size while the run goes (the worker's peak RSS is the kernel's own VmHWM).
    let done = Arc::new(AtomicBool::new(false));
    let spool_peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, spool_peak, spool_dir) = (done.clone(), spool_peak.clone(), spool_dir.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                spool_peak.fetch_max(dir_bytes(&spool_dir), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], Duration::from_secs(600)).await;
    let took = started.elapsed();
    done.store(true, Ordering::SeqCst);
    sampler.await.unwrap();
    let peak_rss = proc_status_bytes(pid, "VmHWM:").expect("the worker's VmHWM");
    let rss_now = proc_status_bytes(pid, "VmRSS:").expect("the worker's VmRSS");
    let spool_peak = spool_peak.load(Ordering::SeqCst);
    world.workers.remove(w).stop().await;
    println!(
        "large: {state} in {took:?} ({:.1} MiB/s); worker peak RSS (VmHWM) {:.1} MiB, RSS at the end {:.1} MiB; \
         spool peak {:.1} MiB (sampled every 50 ms); {counters:?}",
        (LARGE as u64 * LARGE_BYTES) as f64 / MIB as f64 / took.as_secs_f64(),
        peak_rss as f64 / MIB as f64,
        rss_now as f64 / MIB as f64,
        spool_peak as f64 / MIB as f64,
    );
    assert_eq!(counters.delivered, (SMALL + LARGE) as i64, "{counters:?}");
    assert!(counters.delivered_bytes >= (LARGE as u64 * LARGE_BYTES) as i64, "{counters:?}");

    let browsed = Instant::now();
    let after = browse_all(bed.node("west-1"), &target, (SMALL + LARGE) as usize).await;
    let left = fidelity::browse(east, &source).await;
    println!("large: browsed the target in {:?}", browsed.elapsed());
    assert_exactly_once(&ids, &fidelity::census(&after), &[&fidelity::census(&left)]);
    assert_accounting(&counters, &Census::moved(&ids, &fidelity::census(&after), &fidelity::census(&left)));
    let arrived = bodies(&after);
    let differ: Vec<&String> =
        expected.iter().filter(|(id, body)| arrived.get(*id) != Some(body)).map(|(id, _)| id).collect();
    assert!(differ.is_empty(), "bodies differ on the target for {differ:?}");
    assert_eq!(after.iter().filter(|o| o.0["large"] == true).count(), LARGE as usize, "the large bodies arrive large");

    assert!(
        peak_rss < PEAK_RSS_BOUND,
        "the worker's peak RSS {} MiB passed {} MiB: is a large body held in memory?",
        peak_rss / MIB,
        PEAK_RSS_BOUND / MIB
    );
    assert!(
        spool_peak > 0,
        "nothing was ever seen in the spool {}: the sampler watched the wrong place",
        spool_dir.display()
    );
    assert!(
        spool_peak <= SPOOL_BOUND,
        "the spool held {} MiB at once, over {} MiB",
        spool_peak / MIB,
        SPOOL_BOUND / MIB
    );

    let j = Jolokia::new(east);
    let _ = j.destroy_queue(&source).await;
    let _ = Jolokia::new(bed.node("west-1")).destroy_queue(&target).await;
}
