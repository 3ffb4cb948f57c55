//! Filtered runs over a queue deeper than the broker's browse page (issue 27): the broker's `countMessages(filter)`
//! scans one `management-browse-page-size` (200 by default), so a filter over a real backlog had no count at t0
//! and its end no proof, yet said Succeeded. The preview now counts the frozen selection itself (a filtered Core
//! browse of the source), so the run is proven by the counts at its end — judged here by a census of payload ids,
//! the run's own numbers equal to it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};

use crate::support::{assert_accounting, assert_proven, census, connect, create_queue, queue_ref, Census, World};
use artemis_transfer::broker::count::CountLimit;
use artemis_transfer::transfer::relay::state::Counters;
use artemis_transfer::transfer::service::StoredPreview;
use artemis_transfer::transfer::{Mode, PreviewSettings, Selection};

const RUN_LIMIT: Duration = Duration::from_secs(240);

/// How deep the source is: 25 browse pages of the default 200.
const DEPTH: u32 = 5_000;

/// The user's filter of every test here.
const FILTER: &str = "grp = 'match'";

/// Whether message `i` matches [`FILTER`]: one in seven, spread over the whole queue (most beyond the first page).
fn matches(i: u32) -> bool {
    i % 7 == 3
}

/// Sends durable text messages `<prefix><i>` for `i` in `range` to `queue`, stamped now, each with `grp` =
/// `'match'` where [`matches`] says so (else `'other'`), in transactions of 500.
async fn send_grouped(node: &Node, queue: &str, prefix: &str, range: std::ops::Range<u32>) {
    let conn = connect(node).await;
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await.unwrap();
    let producer = session.producer(None);
    for i in range {
        let group = if matches(i) { "match" } else { "other" };
        let now = chrono::Utc::now().timestamp_millis();
        producer.send(&grouped_message(queue, &format!("{prefix}{i}"), group, now)).await.unwrap();
        if i % 500 == 499 {
            session.commit().await.unwrap();
        }
    }
    session.commit().await.unwrap();
    let _ = conn.close().await;
}

/// A durable message of 256 bytes for `queue`, payload id `payload`, `grp` = `group`, stamped `timestamp`.
fn grouped_message(queue: &str, payload: &str, group: &str, timestamp: i64) -> artemis_core::message::CoreMessage {
    use artemis_core::message::{CoreMessage, MessageHeaders, PropertyValue};
    let mut headers = MessageHeaders {
        address: Some(format!("{queue}::{queue}").as_str().into()),
        durable: true,
        timestamp,
        user_id: Some(artemis_core::message::new_user_id()),
        priority: 4,
        ..MessageHeaders::default()
    };
    headers.properties.insert("_AMQ_ROUTING_TYPE", PropertyValue::Byte(1));
    headers.properties.insert("payload_id", PropertyValue::String(payload.into()));
    headers.properties.insert("grp", PropertyValue::String(group.into()));
    CoreMessage { headers, body: vec![b'x'; 256].into() }
}

/// A deep source queue on east-1 and an empty target (on west-1, or on east-1 for a move on one node); the payload
/// ids of the messages the filter selects.
async fn deep_queues(label: &str, target_node: &str) -> (String, String, Vec<String>) {
    let bed = TestBed::get();
    let source = unique_name(&format!("{label}_src"));
    let target = unique_name(&format!("{label}_dst"));
    create_queue(bed.node("east-1"), &source).await;
    create_queue(bed.node(target_node), &target).await;
    let prefix = format!("{label}-");
    send_grouped(bed.node("east-1"), &source, &prefix, 0..DEPTH).await;
    let selected = (0..DEPTH).filter(|i| matches(*i)).map(|i| format!("{prefix}{i}")).collect();
    (source, target, selected)
}

/// Each of `expected` exactly once in `seen`, and nothing else of the prefix.
fn assert_each_once(expected: &[String], seen: &BTreeMap<String, usize>, what: &str) {
    let missing = expected.iter().filter(|id| !seen.contains_key(*id)).count();
    let doubled: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    let extra = seen.keys().filter(|id| !expected.contains(id)).count();
    assert!(
        missing == 0 && doubled.is_empty() && extra == 0,
        "{what}: {missing} of {} missing, doubled {doubled:?}, {extra} not selected",
        expected.len()
    );
}

async fn clean_up(node: &Node, queue: &str) {
    let _ = Jolokia::new(node).destroy_queue(queue).await;
}

/// Runs the stored preview to its end with one worker and returns the run's state and counters.
async fn run_to_end(world: &mut World, stored: &StoredPreview) -> (String, Counters) {
    world.spawn_worker("w1", &[]).await;
    world.execute(stored).await;
    world.wait_run(stored.run_id, &["succeeded", "partial", "unproven"], RUN_LIMIT).await
}

/// Previews a run of `mode` of [`FILTER`] from `source` on east-1 to `target` on `target_node`, the preview counting
/// at most `count_limit` matching messages.
async fn preview_filter(
    world: &World,
    mode: Mode,
    source: &str,
    (target_node, target): (&str, &str),
    count_limit: CountLimit,
) -> StoredPreview {
    let cluster = if target_node.starts_with("east") { "east" } else { "west" };
    let settings = PreviewSettings { count_limit, ..PreviewSettings::default() };
    let (from, to) = (queue_ref("east", "east-1", source), queue_ref(cluster, target_node, target));
    world.preview_with(mode, from, to, Selection::Filter(FILTER.into()), &settings).await
}

/// The preview's limit in the tests of a selection larger than it counts.
const SMALL_LIMIT: CountLimit = CountLimit { messages: 100, time: Duration::from_secs(20) };

/// A filtered run of `mode` from a deep queue on east-1 to `target_node`: the preview counts the selection exactly,
/// the run ends Succeeded and proven by the counts, and its numbers are the census.
async fn a_filtered_run_is_counted_and_proven(label: &str, mode: Mode, target_node: &str) {
    let bed = TestBed::require().await;
    let (east, to) = (bed.node("east-1"), bed.node(target_node));
    let (source, target, selected) = deep_queues(label, target_node).await;
    let mut world = World::new(label, &[("batch_size", json!(100))]).await;
    let limit = PreviewSettings::default().count_limit;
    let stored = preview_filter(&world, mode, &source, (target_node, &target), limit).await;
    assert_eq!(stored.preview.selection_size, Some(selected.len() as i64), "{:#?}", stored.preview);

    let (state, counters) = run_to_end(&mut world, &stored).await;
    let on_target = census(to, &target).await;
    let on_source = census(east, &source).await;
    assert_each_once(&selected, &on_target, "the target");
    let kept = match mode {
        Mode::Move => DEPTH as usize - selected.len(),
        Mode::Copy => DEPTH as usize,
    };
    assert_eq!(on_source.len(), kept, "the source holds what the run left");
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    assert!(proof_words(&world, stored.run_id).await.starts_with("the source broker's counts account"));
    assert_eq!(counters.selected, Some(selected.len() as i64), "{counters:?}");
    let judged = match mode {
        Mode::Move => Census::moved(&selected, &on_target, &on_source),
        Mode::Copy => Census::copied(&selected, &on_target, &on_source),
    };
    assert_accounting(&counters, &judged);
    clean_up(east, &source).await;
    clean_up(to, &target).await;
}

#[tokio::test]
async fn a_filtered_move_of_a_deep_queue_is_counted_at_t0_and_proven() {
    a_filtered_run_is_counted_and_proven("deep_move", Mode::Move, "west-1").await;
}

#[tokio::test]
async fn a_filtered_copy_of_a_deep_queue_is_counted_at_t0_and_proven() {
    a_filtered_run_is_counted_and_proven("deep_copy", Mode::Copy, "west-1").await;
}

#[tokio::test]
async fn a_filtered_move_on_one_node_of_a_deep_queue_is_counted_at_t0_and_proven() {
    a_filtered_run_is_counted_and_proven("deep_local", Mode::Move, "east-1").await;
}

/// The preview's proof words of the run, from its `end_proof` event.
async fn proof_words(world: &World, run: uuid::Uuid) -> String {
    let proof: serde_json::Value =
        sqlx::query_scalar("SELECT detail FROM run_event WHERE run_id = $1 AND kind = 'end_proof' ORDER BY id DESC")
            .bind(run)
            .fetch_one(&world.pool)
            .await
            .unwrap();
    proof["words"].as_str().unwrap_or_default().to_string()
}

/// A selection larger than the preview counts ("more than N"): the run's end is proven by exhaustion — a full pass
/// over the source finds nothing left the frozen filter matches — and it says Succeeded only so.
#[tokio::test]
async fn a_filtered_move_larger_than_the_preview_counts_is_proven_by_exhaustion() {
    let bed = TestBed::require().await;
    let (east, west) = (bed.node("east-1"), bed.node("west-1"));
    let (source, target, selected) = deep_queues("deep_more", "west-1").await;
    let mut world = World::new("deep_more", &[("batch_size", json!(100))]).await;
    let stored = preview_filter(&world, Mode::Move, &source, ("west-1", &target), SMALL_LIMIT).await;
    let p = &stored.preview;
    assert_eq!((p.selection_size, p.selection_at_least), (None, Some(100)), "{p:#?}");
    assert!(p.needs_cap_override && p.needs_typed_confirmation, "{p:#?}");
    let size = p.findings.iter().find(|f| f.code == "selection-size").expect("a selection-size finding");
    assert!(size.words.starts_with("More than 100 messages match the filter"), "{}", size.words);

    let (state, counters) = run_to_end(&mut world, &stored).await;
    let on_target = census(west, &target).await;
    let on_source = census(east, &source).await;
    assert_each_once(&selected, &on_target, "the target");
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    let words = proof_words(&world, stored.run_id).await;
    assert!(words.starts_with("proven by exhaustion"), "{words}");
    assert_eq!(counters.selected, None, "{counters:?}");
    assert_accounting(&counters, &Census::moved(&selected, &on_target, &on_source).size_unknown());
    clean_up(east, &source).await;
    clean_up(west, &target).await;
}

/// Matching messages a producer sends after t0 are outside the frozen selection: the run does not take them, it
/// ends, and its proof holds (what arrived after t0 is allowed for, never counted as the run's).
#[tokio::test]
async fn a_filtered_move_of_a_deep_queue_ends_proven_beside_a_producer_of_matching_messages() {
    let bed = TestBed::require().await;
    let (east, west) = (bed.node("east-1"), bed.node("west-1"));
    let (source, target, selected) = deep_queues("deep_live", "west-1").await;
    let mut world = World::new("deep_live", &[("batch_size", json!(50)), ("messages_per_second", json!(400.0))]).await;
    let limit = PreviewSettings::default().count_limit;
    let stored = preview_filter(&world, Mode::Move, &source, ("west-1", &target), limit).await;
    assert_eq!(stored.preview.selection_size, Some(selected.len() as i64), "{:#?}", stored.preview);
    // Stamped after t0 by this host's clock, which the test bed's broker shares.
    tokio::time::sleep(Duration::from_millis(20)).await;
    world.spawn_worker("w1", &[]).await;
    world.execute(&stored).await;
    let late_prefix = "deep_live_late-";
    send_grouped(east, &source, late_prefix, 0..700).await;
    let late: Vec<String> = (0..700).filter(|i| matches(*i)).map(|i| format!("{late_prefix}{i}")).collect();
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial", "unproven"], RUN_LIMIT).await;

    let on_target = census(west, &target).await;
    let on_source = census(east, &source).await;
    assert_each_once(&selected, &on_target, "the target");
    assert!(late.iter().all(|id| on_source.get(id) == Some(&1)), "a message sent after t0 left the source");
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_proven(&world, stored.run_id).await;
    assert_eq!(counters.selected, Some(selected.len() as i64), "{counters:?}");
    assert_accounting(&counters, &Census::moved(&selected, &on_target, &on_source));
    clean_up(east, &source).await;
    clean_up(west, &target).await;
}

/// Sends one durable matching message `payload` to `queue`, stamped `timestamp` (a producer whose clock is slow).
async fn send_stamped(node: &Node, queue: &str, payload: &str, timestamp: i64) {
    let conn = connect(node).await;
    let session = conn.create_session(artemis_core::SessionOptions::auto_commit()).await.unwrap();
    session.producer(None).send(&grouped_message(queue, payload, "match", timestamp)).await.unwrap();
    let _ = conn.close().await;
}

/// The end's pass over the source is real: a message of the frozen selection (stamped before t0 by a slow clock)
/// that arrives after the last refill, at the tail of a queue deeper than the broker's filtered count scans, is
/// found by it — and the run goes over the source again and takes it, rather than saying Succeeded beside it.
#[tokio::test]
async fn the_pass_that_proves_an_uncounted_end_finds_what_arrived_after_the_last_refill() {
    let bed = TestBed::require().await;
    let (east, west) = (bed.node("east-1"), bed.node("west-1"));
    let (source, target, mut selected) = deep_queues("deep_late", "west-1").await;
    let mut world = World::new("deep_late", &[("batch_size", json!(100))]).await;
    let stored = preview_filter(&world, Mode::Move, &source, ("west-1", &target), SMALL_LIMIT).await;
    assert_eq!(stored.preview.selection_at_least, Some(100), "{:#?}", stored.preview);
    world.spawn_worker("w1", &[("ARTEMIS_TRANSFER_FAULT_PAUSE", "finish:6000")]).await;
    world.execute(&stored).await;
    let log = world.log_dir.join("worker-w1.log");
    crate::support::wait_for("the worker paused at its finish", RUN_LIMIT, || async {
        std::fs::read_to_string(&log).ok().filter(|l| l.contains("at step finish")).map(|_| ())
    })
    .await;
    send_stamped(east, &source, "deep_late-slow-clock", stored.plan.t0_millis - 1_000).await;
    selected.push("deep_late-slow-clock".into());

    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial", "unproven"], RUN_LIMIT).await;
    let on_target = census(west, &target).await;
    let on_source = census(east, &source).await;
    assert_each_once(&selected, &on_target, "the target");
    assert_eq!(state, "succeeded", "{counters:?}");
    assert!(proof_words(&world, stored.run_id).await.starts_with("proven by exhaustion"));
    let passes: i64 = sqlx::query_scalar("SELECT count(*) FROM run_event WHERE run_id = $1 AND kind = 'another_pass'")
        .bind(stored.run_id)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert!(passes >= 1, "the message was taken without the end's pass finding it");
    assert_accounting(&counters, &Census::moved(&selected, &on_target, &on_source).size_unknown());
    clean_up(east, &source).await;
    clean_up(west, &target).await;
}
