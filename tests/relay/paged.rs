//! A move by filter from a **paging** source (issue 6): the broker's filtered `moveMessages` reads page files
//! back as it scans, so the preview says so (with the source heap it costs) and every refill of staging first
//! looks at the source broker's heap. Judged by a census of payload ids.

use std::time::Duration;

use serde_json::json;
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, TestBed};

use crate::support::{
    assert_accounting, assert_exactly_once, census, create_queue, queue_ref, remove_queues, Census, World,
};
use artemis_transfer::transfer::Selection;

const RUN_LIMIT: Duration = Duration::from_secs(180);

/// 600 messages on a source address that pages beyond 16 KiB; a filter selecting 1 in 10 of them (`p_byte`
/// cycles 0–127), moved in batches of 20, so staging is refilled by several scans of the paged queue: exactly the
/// selection reaches the target, once, and the rest stay on the source.
#[tokio::test]
async fn a_move_by_filter_from_a_paging_source_takes_exactly_the_selection() {
    let bed = TestBed::require().await;
    let east1 = bed.node("east-1");
    let source = unique_name("paged_move_src");
    let target = unique_name("paged_move_dst");
    let judge = Jolokia::new(east1);
    judge.page_beyond(&source, 16384, 4096).await.unwrap();
    create_queue(east1, &source).await;
    create_queue(bed.node("west-1"), &target).await;
    let produce = Produce { count: 600, prefix: "paged-".into(), durable_only: true, ..Produce::default() };
    fidelity::produce(east1, &source, &produce).await;
    judge.assert_paging(&source).await;

    let mut world = World::new("paged_move", &[("batch_size", json!(20))]).await;
    world.spawn_worker("w1", &[]).await;
    let stored = world
        .preview_move(
            queue_ref("east", "east-1", &source),
            queue_ref("west", "west-1", &target),
            Selection::Filter("p_byte < 13".into()),
        )
        .await;
    let paged = stored.preview.findings.iter().find(|f| f.code == "source-paged").expect("source-paged raised");
    assert!(paged.words.contains("of the source broker's heap ("), "{}", paged.words);
    world.execute(&stored).await;
    let (_, counters) = world.wait_run(stored.run_id, &["succeeded"], RUN_LIMIT).await;

    let payload = |i: &u32| format!("paged-{i}");
    let selected: Vec<String> = (0..600u32).filter(|i| i % 128 < 13).map(|i| payload(&i)).collect();
    let rest: Vec<String> = (0..600u32).filter(|i| i % 128 >= 13).map(|i| payload(&i)).collect();
    assert_eq!(counters.delivered, selected.len() as i64, "{counters:?}");
    assert!(counters.batches >= 3, "several refills of staging from the paged queue: {counters:?}");
    let on_target = census(bed.node("west-1"), &target).await;
    let left = census(east1, &source).await;
    assert_exactly_once(&selected, &on_target, &[&left]);
    assert_exactly_once(&rest, &left, &[&on_target]);
    // 600 messages are deeper than the source's browse page (200): the preview counts the filter's selection by a
    // browse of the source, which has no page limit.
    assert_eq!(stored.preview.selection_size, Some(selected.len() as i64), "{:#?}", stored.preview);
    assert_accounting(&counters, &Census::moved(&selected, &on_target, &left));
    judge.remove_address_settings(&source).await.unwrap();
    remove_queues(&[(east1, &source), (bed.node("west-1"), &target)]).await;
}
