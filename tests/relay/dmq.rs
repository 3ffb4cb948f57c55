//! The dead message queue (docs/dead-message-queue.md, issue 7): a proven poison message leaves the run's way for a DMQ on the
//! source broker with its reasons, the rest is delivered once; a chain falls through refusing queues; no DMQ
//! accepting stops the run with the message in staging and its properties logged; a copy records its poison;
//! a crash between the DMQ commit and the batch's record counts it once; and a real broker refusal (a message
//! bigger than the target's journal record) is dead-lettered like the seam's. Judged by the census of payload
//! ids (Java helper) on source, staging, target and DMQ, before and after.
//!
//! The target's refusal of one chosen message is the test seam `ARTEMIS_TRANSFER_FAULT_REFUSE` (fault.rs), except
//! in the real-refusal case.

use std::collections::BTreeMap;
use std::time::Duration;

use artemis_transfer::transfer::relay::state::Counters;
use artemis_transfer::transfer::service::StoredPreview;
use artemis_transfer::transfer::{actions, Selection};
use serde_json::{json, Value};
use testbed::fidelity::{self, Observed, Produce};
use testbed::jolokia::Jolokia;
use testbed::scratch::{ScratchBroker, ScratchOptions};
use testbed::{unique_name, Node, TestBed};
use uuid::Uuid;

use crate::support::{
    assert_accounting, assert_exactly_once, census, create_queue, management, queue_ref, register_scratch,
    scratch_node, Census, World, SCRATCH_CREDENTIALS,
};

const RUN_LIMIT: Duration = Duration::from_secs(240);
const BUILT_IN: &str = "studio.dmq.transfer";
const REFUSE: &str = "ARTEMIS_TRANSFER_FAULT_REFUSE";

/// A source queue on east-1 with `count` messages of every kind (payload ids `<prefix><n>`, the prefix unique to
/// this test), an empty target on west-1, and what the Java client saw on the source before.
async fn setup(label: &str, count: u32) -> (String, String, String, Vec<Observed>) {
    let bed = TestBed::require().await;
    let source = unique_name(&format!("{label}_src"));
    let target = unique_name(&format!("{label}_dst"));
    create_queue(bed.node("east-1"), &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let prefix = format!("{}-", unique_name(label));
    fidelity::produce(bed.node("east-1"), &source, &Produce { count, prefix: prefix.clone(), ..Produce::default() })
        .await;
    let before = fidelity::browse(bed.node("east-1"), &source).await;
    assert_eq!(before.len(), count as usize);
    (source, target, prefix, before)
}

fn ids_of(observed: &[Observed]) -> Vec<String> {
    observed.iter().map(|o| o.payload_id().unwrap().to_string()).collect()
}

/// What the Java client sees on `queue` of `node` of this test's messages (by payload-id prefix); nothing when
/// the queue does not exist.
async fn mine(node: &Node, queue: &str, prefix: &str) -> Vec<Observed> {
    if Jolokia::new(node).message_count(queue).await.is_err() {
        return Vec::new();
    }
    fidelity::browse(node, queue)
        .await
        .into_iter()
        .filter(|o| o.payload_id().is_some_and(|p| p.starts_with(prefix)))
        .collect()
}

fn census_of(observed: &[Observed]) -> BTreeMap<String, usize> {
    fidelity::census(observed)
}

async fn run_words(world: &World, run: Uuid) -> (String, Option<String>, Option<String>) {
    sqlx::query_as("SELECT state, stop_reason, last_error FROM transfer_run WHERE id = $1")
        .bind(run)
        .fetch_one(&world.pool)
        .await
        .unwrap()
}

async fn events(world: &World, run: Uuid, kind: &str) -> Vec<Value> {
    sqlx::query_scalar("SELECT detail FROM run_event WHERE run_id = $1 AND kind = $2 ORDER BY id")
        .bind(run)
        .bind(kind)
        .fetch_all(&world.pool)
        .await
        .unwrap()
}

fn staging_of(run: Uuid) -> String {
    format!("studio.transfer.{run}")
}

/// A whole-queue move from `source` on east-1 to `target` on west-1 under `settings`, by one worker whose target
/// refuses the message with payload id `poison` (the seam); waits until the run is in one of `states`. Returns the
/// world, the run, its state and its counters.
async fn move_with_poison(
    label: &str,
    settings: &[(&str, Value)],
    (source, target): (&str, &str),
    poison: &str,
    states: &[&str],
) -> (World, Uuid, String, Counters) {
    let mut world = World::new(label, settings).await;
    let refuse = format!("payload_id={poison}");
    world.spawn_worker("w1", &[(REFUSE, &refuse)]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", source), queue_ref("west", "west-1", target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, states, RUN_LIMIT).await;
    (world, stored.run_id, state, counters)
}

/// Executes `stored` with a worker that aborts at the crash step `fault` (`ARTEMIS_TRANSFER_FAULT`), then lets a
/// rescuer finish it; both refuse the message with payload id `poison`. Returns the run's final state and counters.
async fn through_a_crash(world: &mut World, stored: &StoredPreview, poison: &str, fault: &str) -> (String, Counters) {
    let refuse = format!("payload_id={poison}");
    let doomed = world.spawn_worker("doomed", &[(REFUSE, &refuse), ("ARTEMIS_TRANSFER_FAULT", fault)]).await;
    world.execute(stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort at {fault}, but exited {status}");
    world.spawn_worker("rescuer", &[(REFUSE, &refuse)]).await;
    world.wait_run(stored.run_id, &["partial", "succeeded"], RUN_LIMIT).await
}

/// Removes this run's messages from the shared built-in DMQ (other tests use it too).
async fn clear_built_in(node: &Node, run: Uuid) {
    let j = Jolokia::new(node);
    let mbean = j.queue_mbean(BUILT_IN, BUILT_IN);
    let _ = j.exec(&mbean, "removeMessages(java.lang.String)", json!([format!("_studio_dmq_run = '{run}'")])).await;
}

async fn destroy(node: &Node, queues: &[&str]) {
    let j = Jolokia::new(node);
    for q in queues {
        let _ = j.destroy_queue(q).await;
    }
}

/// Makes the queue `full` (its own address, on `node`) refuse every further message: FAIL at 1,000 bytes, then
/// one 4,000-byte message `<filler>0`. The broker takes that first message only while the address is under its
/// limit *and the broker as a whole is not full* — a FAIL address refuses everything while the broker's
/// global-max-size is reached or its disk is over max-disk-usage, which other tests can cause for a while (a CI
/// run failed here on AMQ219058 for the filler itself). So the filler is tried again until taken, the broker's
/// figures printed at each refusal; once taken, the address is over its own limit whatever the rest of the
/// broker does, and that is checked.
async fn fill_past_a_fail_limit(node: &Node, full: &str, filler: &str) {
    management(node)
        .add_address_settings(
            full,
            &json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1000, "pageSizeBytes": 500}),
        )
        .await
        .unwrap();
    let fill = Produce { count: 1, prefix: filler.into(), kinds: "bytes".into(), body_size: 4000, durable_only: true };
    let j = Jolokia::new(node);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while let Err(refused) = fidelity::try_produce(node, full, &fill).await {
        let broker = j
            .read(&node.broker_mbean(), &["AddressMemoryUsage", "GlobalMaxSize", "DiskStoreUsage", "MaxDiskUsage"])
            .await;
        assert!(
            refused.contains("AMQ219058") && std::time::Instant::now() < deadline,
            "the filler of {full} was refused (broker: {broker:?}): {refused}"
        );
        eprintln!("the filler of {full} was refused while the broker is full ({broker:?}); trying again");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let mbean = format!("{},component=addresses,address={}", node.broker_mbean(), testbed::jolokia::quote(full));
    let size = j.read(&mbean, &["AddressSize"]).await.unwrap()["AddressSize"].as_i64().unwrap();
    assert!(size > 1000, "{full} holds {size} bytes, not over its 1,000-byte limit");
}

fn prop<'a>(o: &'a Observed, name: &str) -> &'a Value {
    &o.0["properties"][name]["value"]
}

/// The DMQ copy of `original` carries its body, kind, priority, durability, JMSMessageID and application
/// properties, no expiry, and every reason property.
fn assert_dead_letter(
    dmq: &Observed,
    original: &Observed,
    run: Uuid,
    reason: &str,
    source: &str,
    target: (&str, &str),
) {
    for field in ["body_sha256", "body_size", "core_type", "priority", "durable", "user_id"] {
        assert_eq!(dmq.0[field], original.0[field], "{field} differs on the DMQ: {dmq:?}");
    }
    assert_eq!(dmq.0["expiration"], json!(0), "a DMQ message without a time-to-live must not expire: {dmq:?}");
    let props = original.0["properties"].as_object().unwrap();
    for (name, value) in props {
        if name.starts_with("p_") || name == "payload_id" || name == "JMSCorrelationID" || name == "JMSType" {
            assert_eq!(&dmq.0["properties"][name], value, "property {name} differs on the DMQ");
        }
    }
    assert_eq!(prop(dmq, "_studio_dmq_reason"), &json!(reason), "{dmq:?}");
    assert!(prop(dmq, "_studio_dmq_exception").as_str().is_some_and(|e| !e.is_empty()), "{dmq:?}");
    assert!(prop(dmq, "_studio_dmq_time").as_i64().is_some_and(|t| t > 1_700_000_000_000), "{dmq:?}");
    assert_eq!(prop(dmq, "_studio_dmq_run"), &json!(run.to_string()));
    assert_eq!(prop(dmq, "_studio_dmq_target_attempts"), &json!(3));
    assert_eq!(prop(dmq, "_studio_dmq_source_destination"), &json!(format!("east/east-1/{source}")));
    assert_eq!(prop(dmq, "_studio_dmq_source_message_id"), &original.0["message_id"], "{dmq:?}");
    let user_id = original.0["user_id"].as_str().unwrap();
    assert_eq!(prop(dmq, "_studio_dmq_source_jms_message_id"), &json!(format!("ID:{user_id}")));
    assert_eq!(prop(dmq, "_studio_dmq_source_correlation_id"), &original.0["properties"]["JMSCorrelationID"]["value"]);
    assert_eq!(prop(dmq, "_studio_dmq_source_jms_type"), &original.0["properties"]["JMSType"]["value"]);
    assert_eq!(prop(dmq, "_studio_dmq_source_timestamp"), &original.0["timestamp"]);
    assert_eq!(prop(dmq, "_studio_dmq_target_destination"), &json!(format!("{}::{}", target.1, target.1)));
    assert_eq!(prop(dmq, "_studio_dmq_target_cluster"), &json!(target.0));
    assert_eq!(prop(dmq, "_studio_dmq_target_node"), &json!(if target.0 == "west" { "west-1" } else { "scratch" }));
    assert_eq!(prop(dmq, "_studio_transfer_run"), &json!(run.to_string()));
}

#[tokio::test]
async fn dmq_a_poison_message_among_1000_is_dead_lettered_with_its_reasons_and_the_rest_delivered_once() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, target, prefix, before) = setup("dmq_poison", 1000).await;
    let poison_id = format!("{prefix}417");
    let dmq_before = mine(east, BUILT_IN, &prefix).await;
    assert!(dmq_before.is_empty());

    let (world, run, state, counters) = move_with_poison(
        "dmq_poison",
        &[("batch_size", json!(100)), ("dmq_send_interval_secs", json!(1))],
        (&source, &target),
        &poison_id,
        &["partial", "succeeded"],
    )
    .await;
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!((counters.delivered, counters.dead_lettered, counters.selected), (999, 1, Some(1000)), "{counters:?}");

    let others: Vec<String> = ids_of(&before).into_iter().filter(|id| *id != poison_id).collect();
    let on_target = census(bed.node("west-1"), &target).await;
    let left = census(east, &source).await;
    let dmq = mine(east, BUILT_IN, &prefix).await;
    let dmq_census = census_of(&dmq);
    assert_exactly_once(&others, &on_target, &[&left, &dmq_census]);
    assert!(!on_target.contains_key(&poison_id), "the poison reached the target");
    assert!(left.is_empty(), "left on the source: {left:?}");
    assert_eq!(dmq_census, BTreeMap::from([(poison_id.clone(), 1)]), "the DMQ holds {dmq_census:?}");
    assert_accounting(&counters, &Census::moved(&ids_of(&before), &on_target, &left).dead_letter(&dmq_census));
    assert!(Jolokia::new(east).message_count(&staging_of(run)).await.is_err(), "staging was not removed");

    let original = before.iter().find(|o| o.payload_id() == Some(poison_id.as_str())).unwrap();
    assert_dead_letter(&dmq[0], original, run, "SEND_FAILURE", &source, ("west", &target));
    assert!(prop(&dmq[0], "_studio_dmq_exception").as_str().unwrap().contains(REFUSE), "{:?}", dmq[0]);
    assert!(prop(&dmq[0], "_studio_dmq_staging_id").as_i64().is_some(), "{:?}", dmq[0]);
    let dead = events(&world, run, "dead_lettered").await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["dmq"], json!(BUILT_IN));
    assert_eq!(dead[0]["reason"], json!("SEND_FAILURE"));
    assert_eq!(dead[0]["staging_id"], *prop(&dmq[0], "_studio_dmq_staging_id"));
    eprintln!("dmq poison: {counters:?}; event {}", dead[0]);

    clear_built_in(east, run).await;
    destroy(east, &[&source]).await;
    destroy(bed.node("west-1"), &[&target]).await;
}

/// The selection's last message is the poison, and it is received alone (21 messages in batches of 10): the
/// messages this run already committed to the target are the ones around it, so it is proven and dead-lettered
/// rather than stalling the run.
#[tokio::test]
async fn dmq_a_poison_message_alone_in_the_last_batch_is_dead_lettered() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, target, prefix, before) = setup("dmq_lone", 21).await;
    let poison_id = format!("{prefix}20");
    let (_world, run, state, counters) = move_with_poison(
        "dmq_lone",
        &[("batch_size", json!(10)), ("dmq_send_interval_secs", json!(1))],
        (&source, &target),
        &poison_id,
        &["partial", "succeeded"],
    )
    .await;
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!((counters.delivered, counters.dead_lettered), (20, 1), "{counters:?}");
    assert!(counters.batches >= 2, "{counters:?}");

    let others: Vec<String> = ids_of(&before).into_iter().filter(|id| *id != poison_id).collect();
    let on_target = census(bed.node("west-1"), &target).await;
    let dmq = census_of(&mine(east, BUILT_IN, &prefix).await);
    let left = census(east, &source).await;
    assert_exactly_once(&others, &on_target, &[&dmq, &left]);
    assert_eq!(dmq, BTreeMap::from([(poison_id.clone(), 1)]), "the DMQ holds {dmq:?}");
    assert_accounting(&counters, &Census::moved(&ids_of(&before), &on_target, &left).dead_letter(&dmq));

    clear_built_in(east, run).await;
    destroy(east, &[&source]).await;
    destroy(bed.node("west-1"), &[&target]).await;
}

#[tokio::test]
async fn dmq_a_chain_whose_first_queues_refuse_falls_through_to_the_next() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, target, prefix, before) = setup("dmq_chain", 200).await;
    let poison_id = format!("{prefix}77");
    // Missing; disabled (a send would be dropped); full under FAIL (the commit is refused); then one that accepts.
    let missing = unique_name("dmq_missing");
    let disabled = unique_name("dmq_disabled");
    let full = unique_name("dmq_full");
    let good = unique_name("dmq_good");
    let j = Jolokia::new(east);
    for q in [&disabled, &full, &good] {
        create_queue(east, q).await;
    }
    j.exec(&j.queue_mbean(&disabled, &disabled), "disable()", json!([])).await.unwrap();
    let filler = format!("{prefix}filler-");
    fill_past_a_fail_limit(east, &full, &filler).await;

    let chain = json!([missing, disabled, full, good]);
    let settings = [
        ("batch_size", json!(50)),
        ("dmq_chain", chain),
        ("dmq_send_attempts", json!(2)),
        ("dmq_send_interval_secs", json!(1)),
    ];
    let (world, run, state, counters) =
        move_with_poison("dmq_chain", &settings, (&source, &target), &poison_id, &["partial", "succeeded"]).await;
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!((counters.delivered, counters.dead_lettered), (199, 1), "{counters:?}");

    let others: Vec<String> = ids_of(&before).into_iter().filter(|id| *id != poison_id).collect();
    let on_target = census(bed.node("west-1"), &target).await;
    let on_good = census_of(&mine(east, &good, &prefix).await);
    let on_full = census_of(&mine(east, &full, &prefix).await);
    let on_disabled = census_of(&mine(east, &disabled, &prefix).await);
    let on_missing = census_of(&mine(east, &missing, &prefix).await);
    assert_exactly_once(&others, &on_target, &[&on_good]);
    assert_eq!(on_good, BTreeMap::from([(poison_id.clone(), 1)]), "the accepting DMQ holds {on_good:?}");
    assert_eq!(on_full, BTreeMap::from([(format!("{filler}0"), 1)]), "the full DMQ holds {on_full:?}");
    assert!(on_disabled.is_empty() && on_missing.is_empty(), "{on_disabled:?} {on_missing:?}");
    let left = census(east, &source).await;
    assert_accounting(&counters, &Census::moved(&ids_of(&before), &on_target, &left).dead_letter(&on_good));
    let dead = events(&world, run, "dead_lettered").await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["dmq"], json!(good), "{dead:?}");
    let log = std::fs::read_to_string(world.log_dir.join("worker-w1.log")).unwrap();
    assert!(log.contains("dead-lettered a poison message"), "no log line of the dead-lettering");
    // Each refusing queue was passed over for its own reason.
    let passed = |queue: &str, words: &str| {
        log.lines().any(|l| l.contains(queue) && l.contains(words) && l.contains("dead message queue"))
    };
    assert!(passed(&missing, "does not exist"), "the missing DMQ: {}", world.log_dir.display());
    assert!(passed(&disabled, "is disabled"), "the disabled DMQ: {}", world.log_dir.display());
    assert!(passed(&full, "AMQ229102"), "the full DMQ was not refused as full: {}", world.log_dir.display());

    management(east).remove_address_settings(&full).await.unwrap();
    destroy(east, &[&source, &disabled, &full, &good]).await;
    destroy(bed.node("west-1"), &[&target]).await;
}

#[tokio::test]
async fn dmq_no_queue_accepting_stops_the_run_with_the_message_in_staging_and_its_properties_logged() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, target, prefix, before) = setup("dmq_none", 300).await;
    let poison_id = format!("{prefix}120");
    let missing = unique_name("dmq_nowhere");
    let settings = [("batch_size", json!(50)), ("dmq_chain", json!([missing])), ("dmq_send_interval_secs", json!(1))];
    let (world, run, _, counters) =
        move_with_poison("dmq_none", &settings, (&source, &target), &poison_id, &["stopped"]).await;
    let (_, reason, _) = run_words(&world, run).await;
    let reason = reason.unwrap_or_default();
    eprintln!("dmq none: stopped: {reason}; {counters:?}");
    assert!(reason.contains(&missing) && reason.contains("does not exist"), "the reason does not say why: {reason}");
    assert!(reason.contains("staging message"), "the reason does not name the message: {reason}");
    assert_eq!(counters.dead_lettered, 0, "{counters:?}");

    let ids = ids_of(&before);
    let on_target = census(bed.node("west-1"), &target).await;
    let in_staging = census(east, &staging_of(run)).await;
    let on_source = census(east, &source).await;
    assert_eq!(in_staging.get(&poison_id), Some(&1), "the poison is not in staging: {in_staging:?}");
    let mut all = on_target.clone();
    for part in [&in_staging, &on_source] {
        for (id, n) in part {
            *all.entry(id.clone()).or_insert(0) += n;
        }
    }
    assert_exactly_once(&ids, &all, &[]);
    assert_eq!(all.len(), ids.len(), "{all:?}");
    assert_eq!(counters.delivered, on_target.len() as i64, "{counters:?}");
    let log = std::fs::read_to_string(world.log_dir.join("worker-w1.log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("no dead message queue accepted"))
        .unwrap_or_else(|| panic!("no log line in {}", world.log_dir.display()));
    assert!(line.contains(&format!("payload_id=\"{poison_id}\"")), "the properties are not logged: {line}");
    assert!(line.contains("p_int=") && line.contains(&missing), "{line}");
    assert_eq!(events(&world, run, "dead_letter_refused").await.len(), 1);

    // Nothing is lost: a return puts staging back on the source, the poison with it.
    actions::return_to_source(&world.pool, run, "tester", 10).await.unwrap();
    let (_, returned) = world.wait_run(run, &["returned"], RUN_LIMIT).await;
    let on_source = census(east, &source).await;
    assert_eq!(on_source.get(&poison_id), Some(&1));
    let on_target = census(bed.node("west-1"), &target).await;
    assert_exactly_once(&ids, &merge(&on_source, &on_target), &[]);
    assert_accounting(&returned, &Census::moved(&ids, &on_target, &on_source).returned(&in_staging));
    destroy(east, &[&source]).await;
    destroy(bed.node("west-1"), &[&target]).await;
}

fn merge(a: &BTreeMap<String, usize>, b: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    let mut all = a.clone();
    for (id, n) in b {
        *all.entry(id.clone()).or_insert(0) += n;
    }
    all
}

/// A copy of 300 in batches of 50 whose first worker aborts after its third ledger commit: the poison (in the
/// first batch) is dead-lettered once, recorded in the ledger, and neither copied nor dead-lettered again by the
/// browse from the head that the rescuer starts with.
#[tokio::test]
async fn dmq_a_poison_message_in_a_copy_is_dead_lettered_once_and_not_copied_again() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, target, prefix, before) = setup("dmq_copy", 300).await;
    let poison_id = format!("{prefix}10");
    let good = unique_name("dmq_copy_dmq");
    create_queue(east, &good).await;
    let settings = [("batch_size", json!(50)), ("dmq_chain", json!([good]))];
    let mut world = World::new("dmq_copy", &settings).await;
    let stored = world
        .preview_copy(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    let run = stored.run_id;
    let (state, counters) = through_a_crash(&mut world, &stored, &poison_id, "copy-ledger:3").await;
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!((counters.delivered, counters.dead_lettered), (299, 1), "{counters:?}");

    let others: Vec<String> = ids_of(&before).into_iter().filter(|id| *id != poison_id).collect();
    let on_target = census(bed.node("west-1"), &target).await;
    let dmq = mine(east, &good, &prefix).await;
    assert_exactly_once(&others, &on_target, &[&census_of(&dmq)]);
    assert!(!on_target.contains_key(&poison_id), "the poison reached the target");
    assert_eq!(census_of(&dmq), BTreeMap::from([(poison_id.clone(), 1)]));
    let after = fidelity::browse(east, &source).await;
    assert_eq!(after.len(), before.len(), "the copy changed the source");
    for (a, b) in after.iter().zip(&before) {
        assert_eq!(a.0, b.0, "the copy changed the source");
    }
    assert_accounting(
        &counters,
        &Census::copied(&ids_of(&before), &on_target, &census_of(&after)).dead_letter(&census_of(&dmq)),
    );
    let original = before.iter().find(|o| o.payload_id() == Some(poison_id.as_str())).unwrap();
    assert_dead_letter(&dmq[0], original, run, "SEND_FAILURE", &source, ("west", &target));
    assert_eq!(events(&world, run, "dead_lettered").await.len(), 1);

    destroy(east, &[&source, &good]).await;
    destroy(bed.node("west-1"), &[&target]).await;
}

/// A worker killed (abort, as `kill -9`) right after the poison's DMQ commit, before its batch is recorded in
/// Postgres: the rescuer's reconcile finds the poison gone from staging and, by the dead-letter intent, counts it
/// dead-lettered, not delivered.
#[tokio::test]
async fn dmq_a_crash_after_the_dmq_commit_counts_the_poison_once_as_dead_lettered() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let (source, target, prefix, before) = setup("dmq_crash", 200).await;
    let poison_id = format!("{prefix}30");
    let good = unique_name("dmq_crash_dmq");
    create_queue(east, &good).await;
    let mut world = World::new("dmq_crash", &[("batch_size", json!(50)), ("dmq_chain", json!([good]))]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    let run = stored.run_id;
    let (state, counters) = through_a_crash(&mut world, &stored, &poison_id, "dmq-commit").await;
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!((counters.delivered, counters.dead_lettered), (199, 1), "{counters:?}");
    let others: Vec<String> = ids_of(&before).into_iter().filter(|id| *id != poison_id).collect();
    let on_target = census(bed.node("west-1"), &target).await;
    let dmq = census_of(&mine(east, &good, &prefix).await);
    let left = census(east, &source).await;
    assert_exactly_once(&others, &on_target, &[&dmq, &left]);
    assert_eq!(dmq, BTreeMap::from([(poison_id.clone(), 1)]));
    assert_accounting(&counters, &Census::moved(&ids_of(&before), &on_target, &left).dead_letter(&dmq));
    let dead = events(&world, run, "dead_lettered").await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["reconciled"], json!(true), "{dead:?}");
    destroy(east, &[&source, &good]).await;
    destroy(bed.node("west-1"), &[&target]).await;
}

// ------------------------------------------------------------------------------------------------ a real refusal

/// Sends one durable text message with a string property of `big` characters to `queue::queue` on `node` over
/// Core, in a transaction; the commit's result.
async fn send_big(node: &Node, queue: &str, payload_id: &str, big: usize) -> Result<(), artemis_core::Error> {
    use artemis_core::message::{CoreMessage, MessageHeaders, PropertyValue};
    let options = artemis_core::ConnectOptions::from_url(&node.core_url())?
        .credentials(node.user.clone(), node.password.clone())
        .connection_ttl(Duration::from_secs(10));
    let conn = artemis_core::Connection::connect(&options).await?;
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await?;
    let mut headers = MessageHeaders {
        address: Some(format!("{queue}::{queue}").as_str().into()),
        durable: true,
        timestamp: chrono::Utc::now().timestamp_millis(),
        user_id: Some(artemis_core::message::new_user_id()),
        ..MessageHeaders::default()
    };
    headers.properties.insert("_AMQ_ROUTING_TYPE", PropertyValue::Byte(1));
    headers.properties.insert("payload_id", PropertyValue::String(payload_id.into()));
    headers.properties.insert("p_big", PropertyValue::String("x".repeat(big).as_str().into()));
    let sent = async {
        session.producer(None).send(&CoreMessage { headers, body: b"big".to_vec().into() }).await?;
        session.commit().await
    }
    .await;
    let _ = conn.close().await;
    sent
}

/// A real broker refusal: the target (a scratch broker whose journal buffer, hence its largest journal record, is
/// 100 KiB) refuses a durable message carrying a 150,000-character property — `AMQ149005 Message of … bytes is
/// bigger than the max record size` — while the source (east-1, the NIO default of 490 KiB) keeps it and the
/// other messages pass. The relay proves it poison and dead-letters it with the broker's words.
#[tokio::test]
async fn dmq_a_message_bigger_than_the_targets_journal_record_is_dead_lettered() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let options = ScratchOptions {
        web: true,
        broker_xml: vec![(
            "<journal-type>NIO</journal-type>".into(),
            "<journal-type>NIO</journal-type>\n      <journal-buffer-size>102400</journal-buffer-size>".into(),
        )],
        ..ScratchOptions::default()
    };
    let dst = ScratchBroker::start_with("dmq_small_record", options).await;
    let dst_node = scratch_node(&dst, "small");
    let source = unique_name("dmq_real_src");
    let target = unique_name("dmq_real_dst");
    let good = unique_name("dmq_real_dmq");
    create_queue(east, &source).await;
    create_queue(east, &good).await;
    Jolokia::new(&dst_node).create_queue(&target).await.unwrap();
    let prefix = format!("{}-", unique_name("dmq_real"));
    fidelity::produce(east, &source, &Produce { count: 40, prefix: prefix.clone(), ..Produce::default() }).await;
    let big_id = format!("{prefix}big");
    send_big(east, &source, &big_id, 150_000)
        .await
        .expect("the source keeps a message with a 150,000-character property");
    fidelity::produce(east, &source, &Produce { count: 40, prefix: format!("{prefix}after-"), ..Produce::default() })
        .await;
    // The broker fact itself: the target refuses it straight from a client, with AMQ149005.
    let probe = send_big(&dst_node, &target, "probe", 150_000).await.expect_err("the target took the big message");
    eprintln!("dmq real refusal: the target answers a direct send: {probe}");
    assert!(probe.to_string().contains("AMQ149005"), "{probe}");
    let before = fidelity::browse(east, &source).await;
    assert_eq!(before.len(), 81);

    let settings = [("batch_size", json!(30)), ("dmq_chain", json!([good]))];
    let mut world = World::new("dmq_real", &settings).await;
    register_scratch(&world, "small", &dst).await;
    world.spawn_worker("w1", &SCRATCH_CREDENTIALS).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("small", "scratch", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let run = stored.run_id;
    let (state, counters) = world.wait_run(run, &["partial", "succeeded"], RUN_LIMIT).await;
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!((counters.delivered, counters.dead_lettered), (80, 1), "{counters:?}");
    let others: Vec<String> = ids_of(&before).into_iter().filter(|id| *id != big_id).collect();
    let on_target = census(&dst_node, &target).await;
    let dmq = mine(east, &good, &prefix).await;
    let left = census(east, &source).await;
    assert_exactly_once(&others, &on_target, &[&census_of(&dmq), &left]);
    assert_eq!(census_of(&dmq), BTreeMap::from([(big_id.clone(), 1)]));
    assert_accounting(&counters, &Census::moved(&ids_of(&before), &on_target, &left).dead_letter(&census_of(&dmq)));
    let exception = prop(&dmq[0], "_studio_dmq_exception").as_str().unwrap().to_string();
    eprintln!("dmq real refusal: reason {} exception {exception}", prop(&dmq[0], "_studio_dmq_reason"));
    assert!(exception.contains("AMQ149005"), "{exception}");
    assert_eq!(prop(&dmq[0], "_studio_dmq_reason"), &json!("COMMIT_FAILURE"));
    assert_eq!(prop(&dmq[0], "p_big").as_str().map(str::len), Some(150_000));
    destroy(east, &[&source, &good]).await;
}

/// A large poison message (bodies of 300,000 bytes, streamed through the worker's spool): its first DMQ is full
/// under FAIL, so the dead-letter transaction is refused and rolled back (the message goes back to staging and is
/// received — spooled — again) before the next DMQ takes it, body byte for byte.
#[tokio::test]
async fn dmq_a_large_poison_message_reaches_the_next_dmq_byte_equal_after_a_refused_transaction() {
    let bed = TestBed::require().await;
    let east = bed.node("east-1");
    let source = unique_name("dmq_large_src");
    let target = unique_name("dmq_large_dst");
    create_queue(east, &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let prefix = format!("{}-", unique_name("dmq_large"));
    let large =
        Produce { count: 60, prefix: prefix.clone(), kinds: "bytes".into(), body_size: 300_000, durable_only: true };
    fidelity::produce(east, &source, &large).await;
    let before = fidelity::browse(east, &source).await;
    assert_eq!(before.len(), 60);
    let poison_id = format!("{prefix}25");
    let original = before.iter().find(|o| o.payload_id() == Some(poison_id.as_str())).unwrap().clone();
    assert_eq!(original.0["large"], json!(true), "the poison must be a large message: {original:?}");

    let full = unique_name("dmq_large_full");
    let good = unique_name("dmq_large_good");
    create_queue(east, &full).await;
    create_queue(east, &good).await;
    let filler = format!("{prefix}filler-");
    fill_past_a_fail_limit(east, &full, &filler).await;

    let settings = [
        ("batch_size", json!(20)),
        ("dmq_chain", json!([full, good])),
        ("dmq_send_attempts", json!(2)),
        ("dmq_send_interval_secs", json!(1)),
    ];
    let (world, run, state, counters) =
        move_with_poison("dmq_large", &settings, (&source, &target), &poison_id, &["partial", "succeeded"]).await;
    assert_eq!(state, "partial", "{counters:?}");
    assert_eq!((counters.delivered, counters.dead_lettered), (59, 1), "{counters:?}");

    let others: Vec<String> = ids_of(&before).into_iter().filter(|id| *id != poison_id).collect();
    let on_target = census(bed.node("west-1"), &target).await;
    let dmq = mine(east, &good, &prefix).await;
    let on_full = census_of(&mine(east, &full, &prefix).await);
    let left = census(east, &source).await;
    assert_exactly_once(&others, &on_target, &[&census_of(&dmq), &left]);
    assert_eq!(census_of(&dmq), BTreeMap::from([(poison_id.clone(), 1)]));
    assert_accounting(&counters, &Census::moved(&ids_of(&before), &on_target, &left).dead_letter(&census_of(&dmq)));
    assert_eq!(on_full, BTreeMap::from([(format!("{filler}0"), 1)]), "the full DMQ holds {on_full:?}");
    assert_dead_letter(&dmq[0], &original, run, "SEND_FAILURE", &source, ("west", &target));
    assert_eq!(dmq[0].0["large"], json!(true), "{:?}", dmq[0]);
    let log = std::fs::read_to_string(world.log_dir.join("worker-w1.log")).unwrap();
    assert!(
        log.lines().any(|l| l.contains(&full) && l.contains("AMQ229102") && l.contains("refused a poison message")),
        "the full DMQ did not refuse the transaction: {}",
        world.log_dir.display()
    );

    management(east).remove_address_settings(&full).await.unwrap();
    destroy(east, &[&source, &full, &good]).await;
    destroy(bed.node("west-1"), &[&target]).await;
}
