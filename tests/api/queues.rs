//! A node's queues and a queue's messages through the API (issue 30): read from the test bed's east-1, paged, a
//! filter read by the run's parser (400 in its words when it cannot be), grants deciding what is shown, and
//! nothing consumed.

use reqwest::StatusCode;
use serde_json::{json, Value};

use super::support::{connect, create_queue, World, OPERATOR};
use super::{slug, Api};
use artemis_core::message::{durable_message, PropertyValue};
use testbed::TestBed;

/// A property (name and value) a hostile producer could send.
pub const HOSTILE_PROPERTY: (&str, &str) = ("h<i>x</i>", "<script>alert('prop')</script>");

/// A message body a hostile producer could send.
pub const HOSTILE_BODY: &str = "<script>alert('body')</script><img src=x onerror=alert(3)>";

/// Sends `count` text messages to `queue` on `node`: message `i` has `color` red for even `i` (blue for odd),
/// `n` = i (a long), and the body `HOSTILE_BODY` for the first (with a hostile property, `HOSTILE_PROPERTY`),
/// `message <i>` for the rest.
pub async fn send_colored(node: &testbed::Node, queue: &str, count: i64) {
    let conn = connect(node).await;
    let session = conn.create_session(artemis_core::SessionOptions::transacted()).await.unwrap();
    let producer = session.producer(None);
    for i in 0..count {
        let mut m = durable_message(queue);
        m.headers.user_id = Some(artemis_core::message::new_user_id());
        let body = if i == 0 { HOSTILE_BODY.to_string() } else { format!("message {i}") };
        m.set_text(Some(&body));
        let color = if i % 2 == 0 { "red" } else { "blue" };
        m.headers.properties.insert("color", PropertyValue::String(color.into()));
        m.headers.properties.insert("n", PropertyValue::Long(i));
        if i == 0 {
            m.headers.properties.insert(HOSTILE_PROPERTY.0, PropertyValue::String(HOSTILE_PROPERTY.1.into()));
        }
        producer.send(&m).await.unwrap();
    }
    session.commit().await.unwrap();
    conn.close().await.unwrap();
}

fn ids(page: &Value) -> Vec<i64> {
    page["messages"].as_array().unwrap().iter().map(|m| m["message_id"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn a_nodes_queues_and_a_page_of_messages_are_read_without_consuming_anything() {
    let bed = TestBed::require().await;
    let queues = testbed::TestQueues::new();
    let queue = queues.name(bed.node("east-1"), "api_browse");
    let sibling = format!("{queue}_b");
    queues.add(bed.node("east-1"), &sibling);
    create_queue(bed.node("east-1"), &queue).await;
    create_queue(bed.node("east-1"), &sibling).await;
    send_colored(bed.node("east-1"), &queue, 5).await;
    let world = World::new("api_browse", &[]).await;
    sqlx::query(
        "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ('viewer', 'east', 'cluster:read', 'test')",
    )
    .execute(&world.pool)
    .await
    .unwrap();
    let api = Api::start(&world).await;
    let queues = format!("/api/v1/clusters/east/nodes/east-1/queues?name_contains={queue}");

    // The queues whose name holds the text, by name, a page at a time, with their depth.
    let (status, first) = api.get(&format!("{queues}&limit=1"), "viewer").await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["queues"][0]["name"], json!(queue), "{first}");
    assert_eq!(first["queues"][0]["depth"], json!(5), "{first}");
    assert_eq!(first["queues"][0]["routing_type"], json!("anycast"), "{first}");
    assert_eq!(first["queues"][0]["internal"], json!(false), "{first}");
    let next = first["next"].as_str().unwrap().to_string();
    let (_, second) = api.get(&format!("{queues}&limit=1&cursor={next}"), "viewer").await;
    assert_eq!(second["queues"][0]["name"], json!(sibling), "{second}");
    assert_eq!(second["queues"][0]["depth"], json!(0), "{second}");
    assert!(second.get("next").is_none(), "{second}");

    // The messages, two a page: every one once, in three pages.
    let messages = format!("/api/v1/clusters/east/nodes/east-1/queues/{queue}/messages");
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for expected in [2, 2, 1] {
        let (status, page) = api.get(&format!("{messages}?limit=2{cursor}"), OPERATOR).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        assert_eq!(ids(&page).len(), expected, "{page}");
        seen.extend(ids(&page));
        cursor = page["next"].as_str().map(|n| format!("&cursor={n}")).unwrap_or_default();
    }
    assert!(cursor.is_empty(), "the last page has no next");
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 5, "{seen:?}");
    let (_, all) = api.get(&messages, OPERATOR).await;
    let hostile = &all["messages"][0];
    assert_eq!(hostile["body_text"], json!(HOSTILE_BODY), "the body as text, as sent: {hostile}");
    assert_eq!(hostile["body_type"], json!("text"));
    assert!(hostile["user_id"].as_str().unwrap().starts_with("ID:"), "{hostile}");
    let color = hostile["properties"].as_array().unwrap().iter().find(|p| p["name"] == "color").unwrap();
    assert_eq!(color, &json!({ "name": "color", "type": "string", "value": "red" }));

    // A filter, read by the run's parser: the red ones; one it cannot read is a 400 in its words.
    let (_, red) = api.get(&format!("{messages}?filter=color%20%3D%20'red'"), OPERATOR).await;
    assert_eq!(ids(&red).len(), 3, "{red}");
    let (status, refused) = api.get(&format!("{messages}?filter=color%20%3D%20'red'%20AND"), OPERATOR).await;
    assert_eq!((status, slug(&refused)), (StatusCode::BAD_REQUEST, "invalid-filter"), "{refused}");
    assert!(refused["detail"].as_str().unwrap().contains("at position 18: expected"), "{refused}");
    let (status, verdict) = api.get("/api/v1/selector/check?filter=n%20%3E%20", OPERATOR).await;
    assert_eq!(status, StatusCode::OK, "{verdict}");
    assert_eq!((verdict["readable"].clone(), verdict["column"].clone()), (json!(false), json!(5)), "{verdict}");

    // Grants: seeing the cluster shows its queues, not its messages; an invisible cluster is not found.
    let (status, answer) = api.get(&messages, "viewer").await;
    assert_eq!((status, slug(&answer)), (StatusCode::FORBIDDEN, "missing-grant"), "{answer}");
    assert_eq!(answer["missing_grant"]["permission"], json!("message:read"));
    for path in [queues.clone(), messages.clone()] {
        let (status, answer) = api.get(&path, "nobody").await;
        assert_eq!((status, slug(&answer)), (StatusCode::NOT_FOUND, "not-found"), "{path}: {answer}");
    }
    let no_such = format!("/api/v1/clusters/east/nodes/east-1/queues/{queue}_none/messages");
    let (status, answer) = api.get(&no_such, OPERATOR).await;
    assert_eq!((status, slug(&answer)), (StatusCode::NOT_FOUND, "not-found"), "{answer}");

    // Nothing was consumed.
    let (_, after) = api.get(&queues, OPERATOR).await;
    assert_eq!(after["queues"][0]["depth"], json!(5), "{after}");
}
