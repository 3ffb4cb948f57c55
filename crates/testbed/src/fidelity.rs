//! The Java fidelity helper (`tests/java/Fidelity.java`): the official Artemis client produces messages of
//! every kind, and consumes or browses a queue, printing one canonical JSON object per message.
//!
//! Tests compare what the helper saw on the source and on the target; the payload id (`payload_id` property)
//! is the census key.

use std::collections::BTreeMap;
use std::process::Stdio;

use serde_json::Value;

use crate::config::{Node, TestBed};

/// One message as the Java client saw it (the canonical JSON line, parsed).
#[derive(Debug, Clone, PartialEq)]
pub struct Observed(pub Value);

impl Observed {
    /// The `payload_id` property the helper gives every message it produces.
    pub fn payload_id(&self) -> Option<&str> {
        self.0["payload_id"].as_str()
    }

    /// The observation without the fields that legitimately differ between two looks at the same message
    /// (the delivery count rises on a consume).
    pub fn without(&self, fields: &[&str]) -> Value {
        let mut v = self.0.clone();
        if let Some(map) = v.as_object_mut() {
            for f in fields {
                map.remove(*f);
            }
        }
        v
    }
}

/// Options for [`produce`].
#[derive(Debug, Clone)]
pub struct Produce {
    /// How many messages.
    pub count: u32,
    /// Payload ids are `<prefix><n>`.
    pub prefix: String,
    /// Body kinds, cycled: `text,bytes,map,stream,object,bare`.
    pub kinds: String,
    /// Bytes messages of this many bytes, streamed (large messages above the client's threshold); 0 = small.
    pub body_size: u64,
    /// Every message durable (otherwise odd ones are non-durable).
    pub durable_only: bool,
}

impl Default for Produce {
    fn default() -> Self {
        Produce {
            count: 12,
            prefix: "p-".into(),
            kinds: "text,bytes,map,stream,object,bare".into(),
            body_size: 0,
            durable_only: false,
        }
    }
}

async fn run(node: &Node, command: &str, queue: &str, extra: &[String]) -> Vec<Observed> {
    run_at(node, &node.core_url(), command, queue, extra).await
}

async fn run_at(node: &Node, url: &str, command: &str, queue: &str, extra: &[String]) -> Vec<Observed> {
    try_run_at(node, url, command, queue, extra).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`run_at`], the helper's failure returned in words (with its stderr) instead of a panic.
async fn try_run_at(
    node: &Node,
    url: &str,
    command: &str,
    queue: &str,
    extra: &[String],
) -> Result<Vec<Observed>, String> {
    let bed = TestBed::get();
    let classpath =
        format!("{}:{}", bed.java_build_dir().display(), bed.artemis_home().join("lib").join("*").display());
    let mut args = vec![
        "-Xmx256m".to_string(),
        "-cp".into(),
        classpath,
        "Fidelity".into(),
        command.into(),
        "--url".into(),
        url.to_string(),
        "--user".into(),
        node.user.clone(),
        "--password".into(),
        node.password.clone(),
        "--queue".into(),
        queue.into(),
    ];
    args.extend(extra.iter().cloned());
    let out = tokio::process::Command::new("java")
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("cannot run `java`: is a JDK installed?");
    if !out.status.success() {
        return Err(format!(
            "Fidelity {command} on {} queue {queue} failed ({}):\n{}",
            node.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8(out.stdout)
        .expect("the helper prints UTF-8")
        .lines()
        .map(|l| Observed(serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON from Fidelity ({e}): {l}"))))
        .collect())
}

/// Produces messages on `queue` of `node` with the official client.
pub async fn produce(node: &Node, queue: &str, opts: &Produce) {
    try_produce(node, queue, opts).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Like [`produce`], a refusal (e.g. `AMQ219058` from a full address) returned in words with the client's stderr.
pub async fn try_produce(node: &Node, queue: &str, opts: &Produce) -> Result<(), String> {
    let mut extra = vec![
        "--count".to_string(),
        opts.count.to_string(),
        "--prefix".into(),
        opts.prefix.clone(),
        "--kinds".into(),
        opts.kinds.clone(),
        "--body-size".into(),
        opts.body_size.to_string(),
    ];
    if opts.durable_only {
        extra.push("--durable-only".into());
    }
    try_run_at(node, &node.core_url(), "produce", queue, &extra).await.map(drop)
}

/// Like [`produce`], every message scheduled for delivery `delay_ms` after it is sent (`_AMQ_SCHED_DELIVERY`):
/// the broker holds it back (counted in `ScheduledCount`, invisible to browsers) until then.
pub async fn produce_scheduled(node: &Node, queue: &str, opts: &Produce, delay_ms: u64) {
    let mut extra = vec![
        "--count".to_string(),
        opts.count.to_string(),
        "--prefix".into(),
        opts.prefix.clone(),
        "--kinds".into(),
        opts.kinds.clone(),
        "--body-size".into(),
        opts.body_size.to_string(),
        "--scheduled-delay-ms".into(),
        delay_ms.to_string(),
    ];
    if opts.durable_only {
        extra.push("--durable-only".into());
    }
    run(node, "produce", queue, &extra).await;
}

/// Like [`produce`], with parameters added to the Java client's connection URL, e.g.
/// `compressLargeMessage=true` or `minLargeMessageSize=10240`.
pub async fn produce_with_url_params(node: &Node, url_params: &str, queue: &str, opts: &Produce) {
    let url = format!("{}?{url_params}", node.core_url());
    let mut extra = vec![
        "--count".to_string(),
        opts.count.to_string(),
        "--prefix".into(),
        opts.prefix.clone(),
        "--kinds".into(),
        opts.kinds.clone(),
        "--body-size".into(),
        opts.body_size.to_string(),
    ];
    if opts.durable_only {
        extra.push("--durable-only".into());
    }
    run_at(node, &url, "produce", queue, &extra).await;
}

/// Consumes (and acknowledges) everything on `queue`, in arrival order.
pub async fn consume(node: &Node, queue: &str) -> Vec<Observed> {
    run(node, "consume", queue, &[]).await
}

/// Browses `queue` without consuming, in the broker's delivery order.
///
/// The JMS `QueueBrowser` can end before the end of the queue (docs/broker-notes.md: its `hasMoreElements` gives
/// up at the first empty `receiveImmediate`; seen after large messages, and once after 10,000 small ones had just
/// arrived: 6,895 of 10,000). So when the broker says the queue holds more browsable messages (`MessageCount`
/// less scheduled and in delivery, read over Jolokia) than the browse saw, the queue is browsed again, at most
/// three times in all (each shortfall printed); the fullest browse is returned.
pub async fn browse(node: &Node, queue: &str) -> Vec<Observed> {
    let mut best = run(node, "browse", queue, &[]).await;
    let j = crate::jolokia::Jolokia::new(node);
    for attempt in 2..=3 {
        let Ok(counts) =
            j.read(&j.queue_mbean(queue, queue), &["MessageCount", "ScheduledCount", "DeliveringCount"]).await
        else {
            break; // not readable (no web console, or no such queue): the browse is all there is
        };
        let count = |k: &str| counts[k].as_i64().unwrap_or(0);
        let browsable = count("MessageCount") - count("ScheduledCount") - count("DeliveringCount");
        if best.len() as i64 >= browsable {
            break;
        }
        eprintln!(
            "browse of {queue} on {} saw {} of {browsable} messages: browsing again ({attempt} of 3)",
            node.name,
            best.len()
        );
        let again = run(node, "browse", queue, &[]).await;
        if again.len() > best.len() {
            best = again;
        }
    }
    best
}

/// The census of a set of observations: payload id → how many times it was seen.
pub fn census(observed: &[Observed]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for o in observed {
        *counts.entry(o.payload_id().unwrap_or("<none>").to_string()).or_insert(0) += 1;
    }
    counts
}
