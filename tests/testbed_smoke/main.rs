//! Smoke tests of the test bed itself: every node is in the HA state the topology promises, Postgres answers,
//! and the Java fidelity helper sees the same messages when it browses and when it consumes them back.

use serde_json::Value;
use testbed::fidelity::{self, Produce};
use testbed::jolokia::Jolokia;
use testbed::{unique_name, NodeRole, TestBed};

#[tokio::test]
async fn every_node_answers_with_its_ha_state() {
    let bed = TestBed::require().await;
    for node in &bed.nodes {
        let state = Jolokia::new(node).broker_state().await.expect("broker state");
        let (active, backup) = (state["Active"].as_bool(), state["Backup"].as_bool());
        match node.role {
            NodeRole::Primary => assert_eq!((active, backup), (Some(true), Some(false)), "{}: {state}", node.name),
            NodeRole::Backup => assert_eq!((active, backup), (Some(false), Some(true)), "{}: {state}", node.name),
        }
        assert!(state["NodeID"].as_str().is_some_and(|id| !id.is_empty()), "{}: {state}", node.name);
        assert_eq!(state["Version"].as_str(), Some(bed.artemis_version.as_str()), "{}", node.name);
    }
}

/// A shared-store backup reports the same NodeID as its primary: they are one logical node.
#[tokio::test]
async fn west_backup_shares_the_primary_node_id() {
    let bed = TestBed::require().await;
    let primary = Jolokia::new(bed.node("west-1")).broker_state().await.unwrap();
    let backup = Jolokia::new(bed.node("west-1-backup")).broker_state().await.unwrap();
    assert_eq!(primary["NodeID"], backup["NodeID"]);
    let east1 = Jolokia::new(bed.node("east-1")).broker_state().await.unwrap();
    let east2 = Jolokia::new(bed.node("east-2")).broker_state().await.unwrap();
    assert_ne!(east1["NodeID"], east2["NodeID"]);
}

/// east-1 and east-2 see each other through their static cluster connection; west does not join them.
#[tokio::test]
async fn east_nodes_form_one_cluster_with_redistribution() {
    let bed = TestBed::require().await;
    let east1 = bed.node("east-1");
    let jolokia = Jolokia::new(east1);
    // The cluster bridge may take a moment after start-up; wait up to 30 s for both members.
    let mut members = 0;
    for _ in 0..60 {
        let topology =
            jolokia.exec(&east1.broker_mbean(), "listNetworkTopology()", serde_json::json!([])).await.unwrap();
        let parsed: Value = serde_json::from_str(topology.as_str().unwrap()).unwrap();
        members = parsed.as_array().map_or(0, Vec::len);
        if members == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert_eq!(members, 2, "east-1 should see itself and east-2 in its topology");
    let settings = jolokia
        .exec(&east1.broker_mbean(), "getAddressSettingsAsJSON(java.lang.String)", serde_json::json!(["anything"]))
        .await
        .unwrap();
    let settings: Value = serde_json::from_str(settings.as_str().unwrap()).unwrap();
    assert_eq!(settings["redistributionDelay"].as_i64(), Some(0), "{settings}");
}

#[tokio::test]
async fn postgres_answers() {
    let bed = TestBed::require().await;
    let pool = sqlx::PgPool::connect(&bed.database_url).await.expect("connect to the test bed's Postgres");
    let (version, fsync): (String, String) =
        sqlx::query_as("SELECT current_setting('server_version'), current_setting('fsync')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(version.starts_with("15."), "{version}");
    assert_eq!(fsync, "on", "crash tests need fsync on");
}

/// The Java helper produces every body type, header and property type; browsing and then consuming the queue
/// shows the same messages with identical canonical JSON (but for the delivery count a consume raises).
#[tokio::test]
async fn java_helper_round_trips_every_kind_of_message() {
    let bed = TestBed::require().await;
    let node = bed.node("east-1");
    let queue = unique_name("java_helper_round_trip");
    let jolokia = Jolokia::new(node);
    jolokia.create_queue(&queue).await.unwrap();

    fidelity::produce(node, &queue, &Produce { count: 24, ..Produce::default() }).await;
    assert_eq!(jolokia.message_count(&queue).await.unwrap(), 24);

    let browsed = fidelity::browse(node, &queue).await;
    let consumed = fidelity::consume(node, &queue).await;
    assert_eq!(browsed.len(), 24);
    assert_eq!(fidelity::census(&browsed), fidelity::census(&consumed));
    assert!(fidelity::census(&browsed).values().all(|&n| n == 1));

    let by_id = |v: &[fidelity::Observed]| {
        v.iter()
            .map(|o| (o.payload_id().unwrap().to_string(), o.without(&["delivery_count"])))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    assert_eq!(by_id(&browsed), by_id(&consumed));

    // Every body type and every property type is really there.
    let core_types: std::collections::BTreeSet<i64> =
        consumed.iter().map(|o| o.0["core_type"].as_i64().unwrap()).collect();
    assert_eq!(core_types, [0, 2, 3, 4, 5, 6].into_iter().collect(), "default, object, text, bytes, map, stream");
    let props = &consumed[0].0["properties"];
    for (name, ty) in [
        ("p_bool", "boolean"),
        ("p_byte", "byte"),
        ("p_short", "short"),
        ("p_int", "int"),
        ("p_long", "long"),
        ("p_float", "float"),
        ("p_double", "double"),
        ("p_string", "string"),
        ("p_char", "char"),
        ("p_bytes", "bytes"),
        ("p_null", "null"),
        ("JMSCorrelationID", "string"),
        ("JMSType", "string"),
        ("JMSReplyTo", "string"),
        ("_AMQ_GROUP_ID", "string"),
    ] {
        assert_eq!(props[name]["type"].as_str(), Some(ty), "{name} in {props}");
    }
    assert!(consumed.iter().any(|o| o.0["durable"] == Value::Bool(false)));
    assert!(consumed.iter().any(|o| o.0["expiration"].as_i64().unwrap() > 0));

    assert_eq!(jolokia.message_count(&queue).await.unwrap(), 0);
    jolokia.destroy_queue(&queue).await.unwrap();
}

/// A private broker with its web console answers Jolokia as the test-bed nodes do, and carries the
/// `broker.xml` edit it was started with.
#[tokio::test]
async fn scratch_broker_with_web_console_answers_jolokia() {
    use testbed::scratch::{ScratchBroker, ScratchOptions};
    let options = ScratchOptions {
        web: true,
        broker_xml: vec![("<max-disk-usage>90</max-disk-usage>".into(), "<max-disk-usage>77</max-disk-usage>".into())],
        ..ScratchOptions::default()
    };
    let broker = ScratchBroker::start_with("smoke_web", options).await;
    let url = broker.jolokia_url().expect("started with the web console");
    let answer: Value = reqwest::Client::new()
        .get(format!("{url}/read/org.apache.activemq.artemis:broker=%22scratch%22/MaxDiskUsage"))
        .basic_auth(&broker.user, Some(&broker.password))
        .header("Origin", "http://127.0.0.1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["value"], 77, "{answer}");
}
