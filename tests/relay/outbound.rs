//! What the target receives (docs/guarantees.md, "What the target receives"), against the real test bed and judged by the official Java client.
//!
//! The Java helper produces messages of every body type, header and property type on east-1, plus a large
//! message and two compressed ones (one regular-sized, one large). A move: the broker's own `moveMessages` takes
//! them into a second queue on east-1, which makes them exactly what staging holds (new ids, `_AMQ_ORIG_*`,
//! expiration cleared); this test consumes them over Core as the relay does (large bodies spooled to disk as they
//! arrive), builds the outbound headers, sends them in one transacted session to the FQQN of a queue on west-1
//! and commits. A copy: the same, browsing the source instead. Java then consumes the target, and every field
//! must equal what Java saw on the source, except the documented differences: the broker's id, the delivery
//! count, the address (the broker stores the FQQN a message was sent to), a move's cleared expiration, and the
//! properties of [`expected_on_target`].
//!
//! The Java client inflates a compressed body and then shows `_AMQ_LARGE_COMPRESSED = false`, so its view of a
//! compressed message on the target equals the source's only if the marker travelled: without it, Java would
//! read the zlib bytes as the body.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use artemis_core::{ConnectOptions, Connection, ConsumerOptions, CoreMessage, Delivery, RoutingType, SessionOptions};
use artemis_transfer::transfer::outbound::{outbound_headers, Origin, OutboundTarget};
use artemis_transfer::transfer::Mode;
use serde_json::{json, Value};
use testbed::fidelity::{self, Observed, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};
use uuid::Uuid;

/// How long a receive waits for a message that is there.
const WAIT: Duration = Duration::from_secs(10);

/// Every kind the helper makes, with headers and properties of every type.
fn small() -> Produce {
    Produce { count: 12, prefix: "s-".into(), ..Produce::default() }
}

/// One large bytes message of 1.5 MiB (over every client's threshold), streamed by the Java client.
fn large() -> Produce {
    Produce { count: 1, prefix: "large-".into(), kinds: "bytes".into(), body_size: 3 * 512 * 1024, durable_only: true }
}

/// One 2 MiB bytes message, sent compressed (`compressLargeMessage=true`). Its zlib stream (about 20 KB) fits
/// under the Java client's default 100 KiB threshold, so Java sends it as a **regular** message carrying
/// `_AMQ_LARGE_COMPRESSED` and `_AMQ_LARGE_SIZE`.
fn compressed() -> Produce {
    Produce { count: 1, prefix: "zip-".into(), kinds: "bytes".into(), body_size: 2 * 1024 * 1024, durable_only: true }
}

/// The same, with the Java client's threshold at 10 KiB: the zlib stream goes as a **large** compressed message.
fn compressed_large() -> Produce {
    Produce { prefix: "ziplarge-".into(), ..compressed() }
}

/// The Java client's URL parameters for [`compressed_large`].
const COMPRESSED_LARGE_URL: &str = "compressLargeMessage=true&minLargeMessageSize=10240";

const MESSAGES: usize = 15;

/// Queues made by a test, destroyed when it ends (also when it fails).
struct Queues(Vec<(Node, String)>);

impl Queues {
    async fn create(&mut self, node: &Node, label: &str) -> String {
        let name = unique_name(label);
        Jolokia::new(node).create_queue(&name).await.expect("create queue");
        self.0.push((node.clone(), name.clone()));
        name
    }
}

impl Drop for Queues {
    fn drop(&mut self) {
        let queues = std::mem::take(&mut self.0);
        // Drop may run inside the test's runtime: clean up on a thread with its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async {
                for (node, name) in queues {
                    let _ = Jolokia::new(&node).destroy_queue(&name).await;
                }
            });
        })
        .join();
    }
}

/// A spool folder for large bodies, removed when the test ends.
struct Spool(PathBuf);

impl Spool {
    fn new() -> Spool {
        let dir = std::env::temp_dir().join(unique_name("outbound-spool"));
        std::fs::create_dir_all(&dir).expect("spool folder");
        Spool(dir)
    }

    fn file(&self, n: usize) -> PathBuf {
        self.0.join(format!("{n}.body"))
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn connect(node: &Node) -> Connection {
    let options = ConnectOptions::new("127.0.0.1", node.core_port)
        .credentials(node.user.clone(), node.password.clone())
        .call_timeout(Duration::from_secs(20));
    Connection::connect(&options).await.unwrap_or_else(|e| panic!("connect to {}: {e}", node.name))
}

/// Java produces the small, large and both compressed messages on `queue`.
async fn produce_all(node: &Node, queue: &str) {
    fidelity::produce(node, queue, &small()).await;
    fidelity::produce(node, queue, &large()).await;
    fidelity::produce_with_url_params(node, "compressLargeMessage=true", queue, &compressed()).await;
    fidelity::produce_with_url_params(node, COMPRESSED_LARGE_URL, queue, &compressed_large()).await;
}

fn by_payload(observed: &[Observed]) -> BTreeMap<String, Value> {
    let map: BTreeMap<String, Value> =
        observed.iter().map(|o| (o.payload_id().expect("payload_id").to_string(), o.0.clone())).collect();
    assert_eq!(map.len(), observed.len(), "payload ids are unique");
    map
}

fn prop<'a>(observed: &'a Value, name: &str) -> Option<&'a Value> {
    observed["properties"].get(name)
}

fn typed(t: &str, value: Value) -> Value {
    json!({"type": t, "value": value})
}

/// What Java must see on the target for a message it saw as `source` on the source queue: the same fields,
/// except the broker's id, the delivery count and the address; the given expiration; `__AMQ_CID` (the producing
/// connection's id) gone; `_AMQ_ROUTING_TYPE` anycast; the run's duplicate id; and the five trace properties.
fn expected_on_target(
    source: &Value,
    expiration: Value,
    dup_message_id: i64,
    original_id: i64,
    origin: &Origin,
) -> Value {
    let mut v = source.clone();
    let map = v.as_object_mut().expect("an object");
    for f in ["message_id", "delivery_count", "address"] {
        map.remove(f);
    }
    map.insert("expiration".into(), expiration);
    let props = map.get_mut("properties").and_then(Value::as_object_mut).expect("properties");
    props.remove("__AMQ_CID");
    props.insert("_AMQ_ROUTING_TYPE".into(), typed("byte", json!(1)));
    props.insert("_AMQ_DUPL_ID".into(), typed("string", json!(format!("studio:{}:{dup_message_id}", origin.run))));
    props.insert("_studio_transfer_run".into(), typed("string", json!(origin.run.to_string())));
    props.insert("_studio_orig_message_id".into(), typed("long", json!(original_id)));
    props.insert("_studio_orig_cluster".into(), typed("string", json!(origin.cluster)));
    props.insert("_studio_orig_node".into(), typed("string", json!(origin.node)));
    props.insert("_studio_orig_queue".into(), typed("string", json!(origin.queue)));
    v
}

fn without_id_count_address(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(map) = v.as_object_mut() {
        for f in ["message_id", "delivery_count", "address"] {
            map.remove(f);
        }
    }
    v
}

/// Sends each message's outbound form to `target` on west-1 in one transacted session and commits. A body
/// spooled to disk goes with `send_large_from`, any other with `send` (which itself chunks a large one).
async fn send_to_target(west: &Node, outbound: Vec<(CoreMessage, Option<PathBuf>)>) {
    let conn = connect(west).await;
    let session = conn.create_session(SessionOptions::transacted()).await.expect("target session");
    // Unbound: the headers carry the FQQN (a producer bound to an address would replace it).
    let producer = session.producer(None);
    for (message, spooled) in &outbound {
        match spooled {
            Some(path) => {
                let file = tokio::fs::File::open(path).await.expect("open spooled body");
                producer.send_large_from(&message.headers, file).await.expect("send large");
            }
            None => producer.send(message).await.expect("send"),
        }
    }
    session.commit().await.expect("commit the target");
    conn.close().await.expect("close target");
}

/// Receives `count` messages from `queue` as the relay does: each large body is written to its own spool file
/// as it arrives. Returns the deliveries with their spool file when the body went there.
async fn receive_spooled(
    consumer: &mut artemis_core::Consumer,
    spool: &Spool,
    count: usize,
) -> Vec<(Delivery, Option<PathBuf>)> {
    let mut out = Vec::new();
    for n in 0..count {
        let path = spool.file(n);
        let mut file = tokio::fs::File::create(&path).await.expect("spool file");
        let d = consumer.recv_streaming(WAIT, &mut file).await.expect("receive").expect("a message within the wait");
        drop(file);
        if d.body_streamed() {
            out.push((d, Some(path)));
        } else {
            assert_eq!(std::fs::metadata(&path).expect("spool file").len(), 0, "a regular body is not spooled");
            std::fs::remove_file(&path).expect("remove unused spool file");
            out.push((d, None));
        }
    }
    out
}

fn spooled_len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("spooled body").len()
}

/// A move: Java's messages, staged by the broker's own move, consumed over Core, rebuilt and sent to west-1, are
/// what Java produced — body byte for byte, every header and typed property — except: the expiration the move
/// cleared; `__AMQ_CID` and every `_AMQ_ORIG_*` gone; `_AMQ_DUPL_ID = studio:<run>:<staging id>`; the trace
/// properties, with the source id read back from `_AMQ_ORIG_MESSAGE_ID`.
#[tokio::test]
async fn a_moved_message_arrives_as_java_produced_it_with_the_documented_differences() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let west = bed.node("west-1");
    let mut queues = Queues(Vec::new());
    let source = queues.create(east, "outbound_move_src").await;
    let staging = queues.create(east, "outbound_move_staging").await;
    let target = queues.create(west, "outbound_move_dst").await;
    produce_all(east, &source).await;
    let original = by_payload(&fidelity::browse(east, &source).await);
    assert_eq!(original.len(), MESSAGES);

    // The broker's own move, as staging is filled (SPEC §4.1).
    let jolokia = Jolokia::new(east);
    let moved = jolokia
        .exec(
            &jolokia.queue_mbean(&source, &source),
            "moveMessages(int,java.lang.String,java.lang.String,boolean,int)",
            json!([100, "", staging, false, -1]),
        )
        .await
        .expect("moveMessages");
    assert_eq!(moved.as_i64(), Some(MESSAGES as i64));
    let staged = by_payload(&fidelity::browse(east, &staging).await);
    assert_eq!(staged.len(), MESSAGES);
    for (id, s) in &staged {
        // Staged messages are what the relay meets: a new id, the broker's `_AMQ_ORIG_*`, no expiration.
        assert_ne!(s["message_id"], original[id]["message_id"], "{id}");
        assert_eq!(prop(s, "_AMQ_ORIG_MESSAGE_ID"), Some(&typed("long", original[id]["message_id"].clone())), "{id}");
        assert_eq!(prop(s, "_AMQ_ORIG_QUEUE"), Some(&typed("string", json!(source))), "{id}");
        assert_eq!(s["expiration"], 0, "{id}");
        // The move turns `_AMQ_ROUTING_TYPE` into `_AMQ_ORIG_ROUTING_TYPE`: the relay must set its own.
        assert_eq!(prop(s, "_AMQ_ROUTING_TYPE"), None, "{id}");
        assert_eq!(prop(s, "_AMQ_ORIG_ROUTING_TYPE"), Some(&typed("byte", json!(1))), "{id}");
    }
    assert!(original.values().any(|o| o["expiration"] != 0), "some messages had an expiration to clear");

    let run = Uuid::new_v4();
    let origin = Origin { run, cluster: east.cluster.clone(), node: east.name.clone(), queue: source.clone() };
    let out_target = OutboundTarget { address: target.clone(), queue: target.clone(), routing: RoutingType::Anycast };

    // Receive the batch from staging (transacted, individual acks), spooling large bodies as they arrive.
    let spool = Spool::new();
    let conn = connect(east).await;
    let session = conn.create_session(SessionOptions::transacted()).await.expect("staging session");
    let mut consumer = session.create_consumer(&staging, ConsumerOptions::default()).await.expect("consumer");
    session.start().await.expect("start");
    let received = receive_spooled(&mut consumer, &spool, MESSAGES).await;
    let mut outbound = Vec::new();
    for (d, spooled) in &received {
        let m = d.message();
        let out = outbound_headers(&m.headers, d.message_id(), Mode::Move, &out_target, &origin);
        let pid = out.headers.property("payload_id").and_then(|v| v.as_simple_string()).expect("payload_id");
        let pid = pid.to_string_lossy();
        // The run view learns the source id; the staging id is the one Java saw in staging.
        assert_eq!(json!(out.original_message_id), original[&pid]["message_id"], "{pid}");
        assert_eq!(json!(d.message_id()), staged[&pid]["message_id"], "{pid}");
        if pid.starts_with("zip") {
            assert!(m.headers.is_compressed(), "{pid}: the compressed body arrives compressed");
            let stored = spooled.as_deref().map(spooled_len).unwrap_or(m.body.len() as u64);
            assert!(stored < compressed().body_size / 10, "{pid}: and stays compressed: {stored} bytes");
        }
        // Which path each body took: the large ones through disk, the others in memory.
        let large_body = pid.starts_with("large-") || pid.starts_with("ziplarge-");
        assert_eq!(spooled.is_some(), large_body, "{pid}: spooled to disk as it arrived");
        if pid.starts_with("large-") {
            assert_eq!(spooled.as_deref().map(spooled_len), Some(large().body_size), "{pid}");
        }
        outbound.push((CoreMessage { headers: out.headers, body: m.body.clone() }, spooled.clone()));
    }
    assert_eq!(received.iter().filter(|(_, s)| s.is_some()).count(), 2, "two bodies went through disk");
    send_to_target(west, outbound).await;
    for (d, _) in &received {
        consumer.ack(d).await.expect("ack");
    }
    session.commit().await.expect("commit staging");
    conn.close().await.expect("close staging");

    let relayed = by_payload(&fidelity::consume(west, &target).await);
    assert_eq!(relayed.keys().collect::<Vec<_>>(), original.keys().collect::<Vec<_>>(), "every message, once");
    for (id, got) in &relayed {
        let source_id = original[id]["message_id"].as_i64().expect("source id");
        let staging_id = staged[id]["message_id"].as_i64().expect("staging id");
        let expected = expected_on_target(&original[id], json!(0), staging_id, source_id, &origin);
        assert_eq!(without_id_count_address(got), expected, "message {id}");
        // The broker keeps the FQQN as the stored address (as for the Java client's own FQQN sends).
        assert_eq!(got["address"], json!(out_target.fqqn()), "{id}");
    }
    assert_eq!(jolokia.message_count(&staging).await.expect("staging depth"), 0);
    assert_eq!(jolokia.message_count(&source).await.expect("source depth"), 0);
}

/// A copy: the source browsed (no broker move), rebuilt and sent to west-1: Java sees what it produced, with the
/// expiration kept, `_AMQ_DUPL_ID = studio:<run>:<source id>` and the source id in the trace; the source is
/// untouched. Large bodies here go through the browser's memory and `send`, the other sending path.
#[tokio::test]
async fn a_copied_message_arrives_as_java_produced_it_and_keeps_its_expiration() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let west = bed.node("west-1");
    let mut queues = Queues(Vec::new());
    let source = queues.create(east, "outbound_copy_src").await;
    let target = queues.create(west, "outbound_copy_dst").await;
    produce_all(east, &source).await;
    let original = by_payload(&fidelity::browse(east, &source).await);
    assert_eq!(original.len(), MESSAGES);

    let run = Uuid::new_v4();
    let origin = Origin { run, cluster: east.cluster.clone(), node: east.name.clone(), queue: source.clone() };
    let out_target = OutboundTarget { address: target.clone(), queue: target.clone(), routing: RoutingType::Anycast };
    let conn = connect(east).await;
    let session = conn.create_session(SessionOptions::auto_commit()).await.expect("source session");
    let mut browser = session.create_browser(&source, ConsumerOptions::default()).await.expect("browser");
    let browsed = browser.collect_all().await.expect("browse");
    browser.close().await.expect("close browser");
    conn.close().await.expect("close source");
    assert_eq!(browsed.len(), MESSAGES);
    let mut outbound = Vec::new();
    for d in &browsed {
        let m = d.message();
        let out = outbound_headers(&m.headers, d.message_id(), Mode::Copy, &out_target, &origin);
        assert_eq!(out.original_message_id, Some(d.message_id()));
        let pid = out.headers.property("payload_id").and_then(|v| v.as_simple_string()).expect("payload_id");
        if pid.starts_with_str("zip") {
            assert!(out.headers.is_compressed(), "{pid}: browsed compressed, sent compressed");
        }
        outbound.push((CoreMessage { headers: out.headers, body: m.body.clone() }, None));
    }
    send_to_target(west, outbound).await;

    let relayed = by_payload(&fidelity::consume(west, &target).await);
    assert_eq!(relayed.keys().collect::<Vec<_>>(), original.keys().collect::<Vec<_>>(), "every message, once");
    for (id, got) in &relayed {
        let source_id = original[id]["message_id"].as_i64().expect("source id");
        let expected =
            expected_on_target(&original[id], original[id]["expiration"].clone(), source_id, source_id, &origin);
        assert_eq!(without_id_count_address(got), expected, "message {id}");
        assert_eq!(got["address"], json!(out_target.fqqn()), "{id}");
    }
    assert!(relayed.values().any(|r| r["expiration"] != 0), "expirations were kept");
    // The source is untouched: the same messages, ids and delivery counts.
    let after = by_payload(&fidelity::browse(east, &source).await);
    assert_eq!(after, original);
}
