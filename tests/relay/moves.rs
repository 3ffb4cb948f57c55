//! Moves across clusters end to end (east-1 → west-1), by the whole queue, a filter and ids: judged by a census
//! of payload ids taken with the Java client on the source, the target and staging.

use std::time::Duration;

use serde_json::json;
use testbed::fidelity;
use testbed::TestBed;

use crate::support::{
    assert_accounting, assert_exactly_once, census, management, queue_ref, remove_queues, source_and_target, Census,
    World,
};
use artemis_transfer::transfer::Selection;

const RUN_LIMIT: Duration = Duration::from_secs(180);

/// The staging queue of `run` is gone from east-1.
async fn assert_staging_removed(run: uuid::Uuid) {
    let bed = TestBed::get();
    let queues = management(bed.node("east-1")).queues().await.unwrap();
    let staging = format!("studio.transfer.{run}");
    assert!(!queues.iter().any(|(_, _, q)| q == &staging), "{staging} is still on east-1");
}

/// What `runs show` tells an operator about a finished 300-message move, as JSON and in words.
async fn assert_run_view(world: &World, run: uuid::Uuid, source: &str, target: &str) {
    let show = |json: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_artemis-transfer"));
        cmd.args(["runs", "show", &run.to_string(), "--as", crate::support::OPERATOR]).env("DATABASE_URL", &world.url);
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let view: serde_json::Value = serde_json::from_str(&show(true)).unwrap();
    assert_eq!(view["state"], "succeeded");
    assert_eq!(view["pipeline"]["delivered"], 300);
    assert_eq!(view["pipeline"]["held_in_staging"], 0);
    assert_eq!(view["pipeline"]["in_doubt"], 0);
    assert!(view["rate"].as_f64().is_some_and(|r| r > 0.0), "{view}");
    let nodes = view["nodes"].as_array().unwrap();
    let outcome = |role: &str| nodes.iter().find(|n| n["role"] == role).unwrap_or_else(|| panic!("{role}: {view}"));
    assert_eq!(outcome("source")["at"], json!(format!("east/east-1/{source}")));
    assert_eq!(outcome("source")["outcome"], "300 taken into staging");
    assert_eq!(outcome("staging")["outcome"], "removed with its address settings");
    assert_eq!(outcome("target")["at"], json!(format!("west/west-1/{target}")));
    assert_eq!(outcome("target")["outcome"], "300 delivered");
    assert!(view["events"].as_array().unwrap().iter().any(|e| e["kind"] == "staging_prepared"), "{view}");
    let words = show(false);
    assert!(words.contains("nodes:") && words.contains("300 delivered") && words.contains("events:"), "{words}");
}

#[tokio::test]
async fn a_whole_queue_moves_across_clusters_exactly_once_in_order() {
    let bed = TestBed::require().await;
    let (source, target, ids) = source_and_target("whole", 300).await;
    let mut world = World::new("move_whole", &[("batch_size", json!(40))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(queue_ref("east", "east-1", &source), queue_ref("west", "west-1", &target), Selection::All)
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    assert_eq!(state, "succeeded");
    assert_eq!(counters.delivered, 300, "{counters:?}");
    assert_eq!(counters.selected, Some(300));

    let on_target = fidelity::browse(bed.node("west-1"), &target).await;
    let left = census(bed.node("east-1"), &source).await;
    assert_exactly_once(&ids, &fidelity::census(&on_target), &[&left]);
    assert_accounting(&counters, &Census::moved(&ids, &fidelity::census(&on_target), &left));
    assert_staging_removed(stored.run_id).await;
    assert_run_view(&world, stored.run_id, &source, &target).await;

    // Within a priority, the target holds the messages in the order they were produced.
    for priority in 0..10 {
        let order: Vec<u32> = on_target
            .iter()
            .filter(|o| o.0["priority"] == json!(priority))
            .map(|o| o.payload_id().unwrap().trim_start_matches("whole-").parse().unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "priority {priority} out of order: {order:?}");
    }
    // Trace properties present, bookkeeping absent.
    for o in &on_target {
        let props = &o.0["properties"];
        assert_eq!(props["_studio_transfer_run"]["value"], json!(stored.run_id.to_string()), "{o:?}");
        assert_eq!(props["_studio_orig_queue"]["value"], json!(source), "{o:?}");
        assert!(props.get("_AMQ_ORIG_QUEUE").is_none(), "bookkeeping forwarded: {o:?}");
    }
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

#[tokio::test]
async fn a_filter_moves_only_what_it_selects() {
    let bed = TestBed::require().await;
    let (source, target, ids) = source_and_target("filter", 200).await;
    let mut world = World::new("move_filter", &[("batch_size", json!(30))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(
            queue_ref("east", "east-1", &source),
            queue_ref("west", "west-1", &target),
            Selection::Filter("p_bool = true".into()),
        )
        .await;
    world.execute(&stored).await;
    let (_, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;
    assert_eq!(counters.delivered, 100, "{counters:?}");
    assert_eq!(counters.selected, Some(100));

    let selected: Vec<String> = ids.iter().enumerate().filter(|(i, _)| i % 2 == 0).map(|(_, id)| id.clone()).collect();
    let rest: Vec<String> = ids.iter().enumerate().filter(|(i, _)| i % 2 == 1).map(|(_, id)| id.clone()).collect();
    let on_target = census(bed.node("west-1"), &target).await;
    let left = census(bed.node("east-1"), &source).await;
    assert_exactly_once(&selected, &on_target, &[&left]);
    assert_exactly_once(&rest, &left, &[&on_target]);
    assert_accounting(&counters, &Census::moved(&selected, &on_target, &left));
    assert_staging_removed(stored.run_id).await;
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}

#[tokio::test]
async fn ids_move_exactly_the_messages_named() {
    let bed = TestBed::require().await;
    let (source, target, _) = source_and_target("ids", 50).await;
    // The broker's ids of every third message, read from the source.
    let mgmt = management(bed.node("east-1"));
    let mbean = mgmt.queue_mbean(&source, artemis_transfer::broker::jolokia::RoutingType::Anycast, &source);
    let listed = mgmt.list_messages(&mbean, None).await.unwrap();
    let mut chosen = Vec::new();
    let mut chosen_payloads = Vec::new();
    for (i, m) in listed.iter().enumerate() {
        if i % 3 == 0 {
            chosen.push(m["messageID"].as_i64().unwrap());
            chosen_payloads.push(m["payload_id"].as_str().unwrap().to_string());
        }
    }
    // One id that is not on the queue: counted as not taken (gone), never an error.
    chosen.push(i64::MAX - 7);
    let mut world = World::new("move_ids", &[("batch_size", json!(7))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(
            queue_ref("east", "east-1", &source),
            queue_ref("west", "west-1", &target),
            Selection::Ids(chosen.clone()),
        )
        .await;
    world.execute(&stored).await;
    let (state, counters) = world.wait_run(stored.run_id, &["partial"], RUN_LIMIT).await;
    assert_eq!(state, "partial");
    assert_eq!(counters.delivered, chosen_payloads.len() as i64, "{counters:?}");
    assert_eq!(counters.not_taken_gone, 1, "{counters:?}");

    let on_target = census(bed.node("west-1"), &target).await;
    let left = census(bed.node("east-1"), &source).await;
    assert_exactly_once(&chosen_payloads, &on_target, &[&left]);
    assert_eq!(on_target.len(), chosen_payloads.len());
    assert_eq!(left.len(), 50 - chosen_payloads.len());
    // The id that is not on the queue is selected, gone, and seen by no census.
    assert_accounting(&counters, &Census::moved(&chosen_payloads, &on_target, &left).gone(1));
    remove_queues(&[(bed.node("east-1"), &source), (bed.node("west-1"), &target)]).await;
}
