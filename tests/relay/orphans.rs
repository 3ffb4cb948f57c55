//! Orphans (docs/guarantees.md): a staging queue no run owns, made for real — `staging::prepare` for a random uuid, filled by
//! the broker's move from two source queues, plus messages sent straight into it (no `_AMQ_ORIG_QUEUE`) — is
//! listed (the DMQ and staging queues that a run owns are not), and returned: each message back on its own original
//! queue, those without one on the queue the operator names (refused without one, nothing moved), staging gone.
//! Judged by a census of payload ids taken with the Java client.

use std::time::Duration;

use artemis_core::{ConnectOptions, Connection, ConsumerOptions, SessionOptions};
use artemis_transfer::broker::jolokia::RoutingType;
use artemis_transfer::jobs::{runs, RunId};
use artemis_transfer::transfer::orphans::{self, OrphanError, ReturnRequest};
use artemis_transfer::transfer::staging::{self, StagingSpec};
use testbed::fidelity::{self, Produce};
use testbed::{unique_name, TestBed};
use uuid::Uuid;

use crate::support::{assert_exactly_once, census, create_queue, management, World};

fn request(queue: &str, to: Option<&str>) -> ReturnRequest {
    ReturnRequest {
        cluster: "east".into(),
        node: "east-1".into(),
        queue: queue.into(),
        to: to.map(str::to_string),
        operator: "tester".into(),
    }
}

async fn audit_outcomes(world: &World, run: Uuid) -> Vec<String> {
    sqlx::query_scalar("SELECT outcome FROM audit WHERE action = 'orphan_return' AND target = $1 ORDER BY id")
        .bind(format!("run:{run}"))
        .fetch_all(&world.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn an_orphan_is_listed_and_each_message_returns_to_its_own_queue() {
    let bed = TestBed::require().await;
    let east1 = bed.node("east-1");
    let mgmt = management(east1);
    let world = World::new("orphans", &[]).await;

    // Two source queues, and a third for messages that name no original queue.
    let a = unique_name("orphan_a");
    let b = unique_name("orphan_b");
    let c = unique_name("orphan_c");
    for q in [&a, &b, &c] {
        create_queue(east1, q).await;
    }
    fidelity::produce(east1, &a, &Produce { count: 30, prefix: "oa-".into(), ..Produce::default() }).await;
    fidelity::produce(east1, &b, &Produce { count: 20, prefix: "ob-".into(), ..Produce::default() }).await;
    let a_ids: Vec<String> = (0..30).map(|i| format!("oa-{i}")).collect();
    let b_ids: Vec<String> = (0..20).map(|i| format!("ob-{i}")).collect();

    // The orphan: staging made for a uuid no run has, filled by the broker's move from both queues.
    let orphan_run = Uuid::new_v4();
    let orphan = staging::staging_queue_name(orphan_run);
    staging::prepare(&mgmt, &StagingSpec::for_run(orphan_run, 50)).await.unwrap();
    let everything = "AMQPriority >= 0";
    let a_mbean = mgmt.queue_mbean(&a, RoutingType::Anycast, &a);
    let b_mbean = mgmt.queue_mbean(&b, RoutingType::Anycast, &b);
    assert_eq!(staging::refill_by_filter(&mgmt, &a_mbean, &orphan, everything, 30, None).await.unwrap(), 30);
    assert_eq!(staging::refill_by_filter(&mgmt, &b_mbean, &orphan, everything, 12, None).await.unwrap(), 12);
    // Three sent straight into staging: no _AMQ_ORIG_QUEUE.
    fidelity::produce(east1, &orphan, &Produce { count: 3, prefix: "ox-".into(), ..Produce::default() }).await;
    let x_ids: Vec<String> = (0..3).map(|i| format!("ox-{i}")).collect();

    // Staging that runs own: one a run records as its staging_queue, one whose uuid is a run's id that recorded none
    // (a run that crashed between making staging and recording it). And a dead message queue.
    let owned_run = Uuid::new_v4();
    let owned = staging::staging_queue_name(owned_run);
    runs::create(&world.pool, RunId(owned_run), Some("tester")).await.unwrap();
    sqlx::query("UPDATE transfer_run SET staging_queue = $2 WHERE id = $1")
        .bind(owned_run)
        .bind(&owned)
        .execute(&world.pool)
        .await
        .unwrap();
    let unrecorded_run = Uuid::new_v4();
    let unrecorded = staging::staging_queue_name(unrecorded_run);
    runs::create(&world.pool, RunId(unrecorded_run), Some("tester")).await.unwrap();
    for q in [&owned, &unrecorded] {
        staging::prepare(&mgmt, &StagingSpec::for_run(staging::run_of_staging_queue(q).unwrap(), 50)).await.unwrap();
    }
    let dmq = format!("studio.dmq.{}", Uuid::new_v4());
    create_queue(east1, &dmq).await;

    // Listed: the orphan with its 45 messages; not the owned staging queues, not the DMQ.
    let found = orphans::list(&world.pool, None, "tester").await.unwrap();
    assert!(found.unchecked.is_empty(), "{:?}", found.unchecked);
    let mine: Vec<_> = found.orphans.iter().filter(|o| o.queue == orphan).collect();
    assert_eq!(mine.len(), 1, "{found:?}");
    assert_eq!((mine[0].cluster.as_str(), mine[0].node.as_str(), mine[0].messages), ("east", "east-1", 45));
    for q in [&owned, &unrecorded, &dmq] {
        assert!(!found.orphans.iter().any(|o| &o.queue == q), "{q} listed as an orphan: {found:?}");
    }
    assert!(found.orphans.iter().all(|o| o.queue.starts_with("studio.transfer.")), "{found:?}");

    // Not orphans: refused, in words.
    match orphans::return_orphan(&world.pool, None, &request(&owned, None)).await {
        Err(OrphanError::Owned { run, .. }) => assert_eq!(run, owned_run),
        other => panic!("an owned staging queue was returned: {other:?}"),
    }
    match orphans::return_orphan(&world.pool, None, &request(&dmq, None)).await {
        Err(e @ OrphanError::NotStaging(_)) => assert!(e.to_string().contains("not a staging queue"), "{e}"),
        other => panic!("the DMQ was returned: {other:?}"),
    }

    // Messages without an original queue and no --to: refused before anything moves.
    let before = census(east1, &orphan).await;
    match orphans::return_orphan(&world.pool, None, &request(&orphan, None)).await {
        Err(e @ OrphanError::NoOriginalQueue { count: 3, returned_so_far: 0, .. }) => {
            let words = e.to_string();
            assert!(words.contains("--to") && words.contains("nothing was moved"), "{words}")
        }
        other => panic!("a return without --to was not refused: {other:?}"),
    }
    assert_eq!(census(east1, &orphan).await, before, "a refused return moved messages");

    // Returned: each to its own original queue, the three to c, staging gone.
    let done = orphans::return_orphan(&world.pool, None, &request(&orphan, Some(&c))).await.unwrap();
    assert_eq!(done.to_original.get(&a), Some(&30), "{done:?}");
    assert_eq!(done.to_original.get(&b), Some(&12), "{done:?}");
    assert_eq!(done.to_original.len(), 2, "{done:?}");
    assert_eq!(done.to_named, 3, "{done:?}");

    let on_a = census(east1, &a).await;
    let on_b = census(east1, &b).await;
    let on_c = census(east1, &c).await;
    assert_exactly_once(&a_ids, &on_a, &[&on_b, &on_c]);
    assert_exactly_once(&b_ids, &on_b, &[&on_a, &on_c]);
    assert_exactly_once(&x_ids, &on_c, &[&on_a, &on_b]);
    assert_eq!((on_a.len(), on_b.len(), on_c.len()), (30, 20, 3));
    let queues = mgmt.queues().await.unwrap();
    assert!(!queues.iter().any(|(_, _, q)| q == &orphan), "{orphan} is still on east-1");
    let after = orphans::list(&world.pool, None, "tester").await.unwrap();
    assert!(!after.orphans.iter().any(|o| o.queue == orphan), "{after:?}");

    // Audited: the refusal and the return.
    assert_eq!(audit_outcomes(&world, orphan_run).await, vec!["refused".to_string(), "ok".to_string()]);
    assert_eq!(audit_outcomes(&world, Uuid::nil()).await, vec!["refused".to_string()]);

    for q in [&owned, &unrecorded] {
        let spec = StagingSpec { name: q.clone(), batch_size: 50 };
        staging::remove(&mgmt, &spec, true).await.unwrap();
    }
    for q in [&a, &b, &c, &dmq] {
        let _ = mgmt.destroy_queue_with(q, true, true).await;
    }
}

#[tokio::test]
async fn an_original_queue_that_is_gone_is_refused_before_anything_moves() {
    let bed = TestBed::require().await;
    let east1 = bed.node("east-1");
    let mgmt = management(east1);
    let world = World::new("orphans_gone", &[]).await;
    let a = unique_name("orphan_gone");
    create_queue(east1, &a).await;
    fidelity::produce(east1, &a, &Produce { count: 5, prefix: "og-".into(), ..Produce::default() }).await;
    let run = Uuid::new_v4();
    let orphan = staging::staging_queue_name(run);
    staging::prepare(&mgmt, &StagingSpec::for_run(run, 50)).await.unwrap();
    let mbean = mgmt.queue_mbean(&a, RoutingType::Anycast, &a);
    assert_eq!(staging::refill_by_filter(&mgmt, &mbean, &orphan, "AMQPriority >= 0", 5, None).await.unwrap(), 5);
    mgmt.destroy_queue_with(&a, true, true).await.unwrap();

    match orphans::return_orphan(&world.pool, None, &request(&orphan, None)).await {
        Err(e @ OrphanError::BadDestination { .. }) => {
            let words = e.to_string();
            assert!(words.contains(&a) && words.contains("no such queue"), "{words}");
            assert!(words.contains("nothing was moved"), "{words}");
        }
        other => panic!("a return to a queue that is gone was not refused: {other:?}"),
    }
    // Still all in staging; once the queue is back, the return goes through.
    let ids: Vec<String> = (0..5).map(|i| format!("og-{i}")).collect();
    let held = census(east1, &orphan).await;
    assert_exactly_once(&ids, &held, &[]);
    create_queue(east1, &a).await;

    // A consumer attached (a run this database does not know, relaying from it): refused, nothing moved.
    let options = ConnectOptions::new("127.0.0.1", east1.core_port)
        .credentials(east1.user.clone(), east1.password.clone())
        .call_timeout(Duration::from_secs(20));
    let conn = Connection::connect(&options).await.unwrap();
    let session = conn.create_session(SessionOptions::transacted()).await.unwrap();
    let consumer = session.create_consumer(&orphan, ConsumerOptions::default()).await.unwrap();
    match orphans::return_orphan(&world.pool, None, &request(&orphan, None)).await {
        Err(e @ OrphanError::InUse { consumers: 1, .. }) => assert!(e.to_string().contains("nothing was moved"), "{e}"),
        other => panic!("a staging queue with a consumer was returned: {other:?}"),
    }
    assert_exactly_once(&ids, &census(east1, &orphan).await, &[]);
    drop(consumer);
    let _ = session.close().await;
    let _ = conn.close().await;
    let done = orphans::return_orphan(&world.pool, None, &request(&orphan, None)).await.unwrap();
    assert_eq!(done.total(), 5, "{done:?}");
    assert_exactly_once(&ids, &census(east1, &a).await, &[]);
    assert!(!mgmt.queues().await.unwrap().iter().any(|(_, _, q)| q == &orphan));
    let _ = mgmt.destroy_queue_with(&a, true, true).await;
}
