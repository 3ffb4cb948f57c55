//! A retry from a dead-letter queue (`transfer::retry`): every selected message back to the queue it was
//! dead-lettered from, on the same node, by the broker's own move in chunks — the variation of the move on one
//! node. Messages are dead-lettered by the broker itself (`sendMessagesToDeadLetterAddress`), into a dead-letter
//! queue of the test's own, so `_AMQ_ORIG_QUEUE` is what the broker writes. Judged by a census of payload ids taken
//! with the Java client, against the run's own numbers.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, Node, TestBed};

use crate::support::{assert_accounting, assert_exactly_once, census, create_queue, queue_ref, Census, World};
use artemis_transfer::transfer::{Destination, Kind, Selection};

const RUN_LIMIT: Duration = Duration::from_secs(180);

/// A dead-letter queue of the test's own and the queues whose messages it holds.
struct DeadLetters {
    dlq: String,
    /// Each original queue, with the payload ids dead-lettered from it.
    originals: Vec<(String, Vec<String>)>,
}

impl DeadLetters {
    /// Queues named after `label`, each given its count of messages of every kind, then all of them dead-lettered
    /// by the broker into one new dead-letter queue.
    async fn make(node: &Node, label: &str, counts: &[u32]) -> DeadLetters {
        let j = Jolokia::new(node);
        let dlq = unique_name(&format!("{label}_dlq"));
        create_queue(node, &dlq).await;
        let mut originals = Vec::new();
        for (i, count) in counts.iter().enumerate() {
            let queue = unique_name(&format!("{label}_q{i}"));
            create_queue(node, &queue).await;
            j.add_address_settings(&queue, &json!({ "deadLetterAddress": dlq }).to_string()).await.unwrap();
            let prefix = format!("{label}-{i}-");
            fidelity::produce(node, &queue, &Produce { count: *count, prefix: prefix.clone(), ..Produce::default() })
                .await;
            let moved = j
                .exec(&j.queue_mbean(&queue, &queue), "sendMessagesToDeadLetterAddress(java.lang.String)", json!([""]))
                .await
                .unwrap();
            assert_eq!(moved.as_i64(), Some(i64::from(*count)), "the broker dead-lettered {moved}");
            originals.push((queue, (0..*count).map(|n| format!("{prefix}{n}")).collect()));
        }
        DeadLetters { dlq, originals }
    }

    async fn destroy(&self, node: &Node) {
        let j = Jolokia::new(node);
        for (queue, _) in &self.originals {
            let _ = j.remove_address_settings(queue).await;
            let _ = j.destroy_queue(queue).await;
        }
        let _ = j.remove_address_settings(&self.dlq).await;
        let _ = j.destroy_queue(&self.dlq).await;
    }
}

/// The census of every queue in `queues`, merged.
async fn merged_census(node: &Node, queues: &[&str]) -> BTreeMap<String, usize> {
    let mut all = BTreeMap::new();
    for q in queues {
        for (id, n) in census(node, q).await {
            *all.entry(id).or_insert(0) += n;
        }
    }
    all
}

/// Two original queues, the second one's messages all beyond the dead-letter queue's first browse page (where
/// the broker's `countMessages(filter, groupBy)` would stop looking), a third deleted since, and messages that were
/// never dead-lettered: each message of the two goes back to its own queue once, the rest stay.
#[tokio::test]
async fn a_retry_sends_each_dead_lettered_message_back_to_its_own_queue_once() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let dl = DeadLetters::make(node, "retry", &[210, 40, 10]).await;
    let (a, b, gone) = (&dl.originals[0], &dl.originals[1], &dl.originals[2]);
    // The third queue is deleted: its messages stay on the dead-letter queue, as do messages put there directly.
    Jolokia::new(node).destroy_queue(&gone.0).await.unwrap();
    fidelity::produce(node, &dl.dlq, &Produce { count: 5, prefix: "retry-none-".into(), ..Produce::default() }).await;

    // A browse page of 20 on the dead-letter queue: the broker's own count by original queue scans only that
    // much, and does not see the second queue at all.
    let j = Jolokia::new(node);
    j.add_address_settings(&dl.dlq, &json!({ "managementBrowsePageSize": 20 }).to_string()).await.unwrap();
    let grouped = j
        .exec(
            &j.queue_mbean(&dl.dlq, &dl.dlq),
            "countMessages(java.lang.String,java.lang.String)",
            json!(["", "_AMQ_ORIG_QUEUE"]),
        )
        .await
        .unwrap();
    assert!(!grouped.as_str().unwrap_or_default().contains(&b.0), "the broker's count saw {}: {grouped}", b.0);

    let mut world = World::new("retry", &[("batch_size", json!(50))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world.preview_retry(queue_ref("east", "east-1", &dl.dlq), Selection::All).await;
    let destinations: Vec<&str> = match &stored.plan.destination {
        Destination::OriginalQueues(queues) => queues.iter().map(|q| q.queue.as_str()).collect(),
        other => panic!("a retry's destination is its original queues, not {other:?}"),
    };
    assert_eq!(destinations, [a.0.as_str(), b.0.as_str()], "the second queue is found beyond the first page");
    // 265 messages on a queue whose browse page is 20: the broker cannot count the selection, and the preview
    // says so rather than guessing.
    assert_eq!(stored.preview.selection_size, None, "{:#?}", stored.preview);
    let gone_finding = stored.preview.findings.iter().find(|f| f.code == "original-queue-gone").expect("gone");
    assert_eq!(gone_finding.kind, Kind::NeedsAck);
    assert!(gone_finding.words.contains(&format!(" from {}", gone.0)), "{}", gone_finding.words);
    assert!(stored.preview.notes.iter().any(|n| n.contains("selected messages name no original queue")));

    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial"], RUN_LIMIT).await;
    assert_eq!(state, "succeeded", "{counters:?}");
    assert_eq!((counters.delivered, counters.not_taken(), counters.uncertain), (250, 0, 0), "{counters:?}");

    let on_a = census(node, &a.0).await;
    let on_b = census(node, &b.0).await;
    let left = census(node, &dl.dlq).await;
    assert_exactly_once(&a.1, &on_a, &[&on_b, &left]);
    assert_exactly_once(&b.1, &on_b, &[&on_a, &left]);
    assert_eq!(on_a.len() + on_b.len(), 250, "nothing else reached the original queues");
    let stay: Vec<String> = gone.1.iter().cloned().chain((0..5).map(|n| format!("retry-none-{n}"))).collect();
    for id in &stay {
        assert_eq!(left.get(id), Some(&1), "{id} is not selected and stays on the dead-letter queue once");
    }
    assert_eq!(left.len(), stay.len(), "the dead-letter queue holds only what was not selected");
    let selected: Vec<String> = a.1.iter().chain(&b.1).cloned().collect();
    let on_targets = merged_census(node, &[&a.0, &b.0]).await;
    assert_accounting(&counters, &Census { size_known: false, ..Census::moved(&selected, &on_targets, &left) });
    dl.destroy(node).await;
}

/// A worker aborts right after the broker's move of the retry's second chunk (the first original queue's last,
/// short one), before the count is written; a fresh worker settles the lost answer, moves on through the other
/// queues and finishes. Each message is on its original queue once; the counters say what they cannot know.
#[tokio::test]
async fn a_crash_between_a_retrys_move_and_its_count_loses_nothing() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let dl = DeadLetters::make(node, "retry_crash", &[30, 25, 15]).await;
    let mut world = World::new("retry_crash", &[("batch_size", json!(20))]).await;
    let doomed = world.spawn_worker("doomed", &[("ARTEMIS_TRANSFER_FAULT", "local-move:2")]).await;
    let stored = world.preview_retry(queue_ref("east", "east-1", &dl.dlq), Selection::Filter("1 = 1".into())).await;
    world.execute(&stored).await;
    let status = world.workers[doomed].wait_exit(Duration::from_secs(120)).await;
    assert!(!status.success(), "the worker was meant to abort after the broker's move, but exited {status}");

    world.spawn_worker("rescuer", &[]).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded", "partial"], RUN_LIMIT).await;
    let queues: Vec<&str> = dl.originals.iter().map(|(q, _)| q.as_str()).collect();
    let left = census(node, &dl.dlq).await;
    for (queue, ids) in &dl.originals {
        let others: Vec<BTreeMap<String, usize>> =
            others_census(node, &queues, queue).await.into_iter().chain([left.clone()]).collect();
        assert_exactly_once(ids, &census(node, queue).await, &others.iter().collect::<Vec<_>>());
    }
    // The lost answer: the count asked (20) as an upper bound on what the lost call moved (10). Counted, never
    // guessed; the run says so and ends Partial.
    assert_eq!(state, "partial", "an uncertain count is not a success: {counters:?}");
    assert_eq!(counters.uncertain, 20, "{counters:?}");
    assert_eq!(counters.delivered, 70 - 10, "{counters:?}");
    assert_eq!(counters.not_taken(), 0, "{counters:?}");
    assert_eq!(counters.selected, Some(70), "{counters:?}");
    let selected: Vec<String> = dl.originals.iter().flat_map(|(_, ids)| ids.clone()).collect();
    let on_targets = merged_census(node, &queues).await;
    assert_eq!(on_targets.len(), 70);
    assert_accounting(&counters, &Census::moved(&selected, &on_targets, &left));
    dl.destroy(node).await;
}

/// The census of each queue of `all` but `except`.
async fn others_census(node: &Node, all: &[&str], except: &str) -> Vec<BTreeMap<String, usize>> {
    let mut out = Vec::new();
    for q in all.iter().filter(|q| **q != except) {
        out.push(census(node, q).await);
    }
    out
}
