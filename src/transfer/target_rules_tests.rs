//! Each target rule, asserted by code, with what the table makes of it at both edges: the preview's kind of
//! finding and the guard's response before a batch.

use super::*;
use crate::broker::jolokia::BrokerState;
use serde_json::json;
use Kind::{NeedsAck, Refused};
use Response::{PreviewOnly, Refuse, Wait};

/// A healthy target: live, an empty plain queue with a consumer, default address settings, a disk 10% full.
pub(crate) fn healthy() -> EndFacts {
    EndFacts {
        node: Some(NodeFacts {
            broker: BrokerState {
                active: Some(true),
                backup: Some(false),
                disk_store_usage: Some(0.10),
                max_disk_usage: Some(90),
                ..BrokerState::default()
            },
            core_acceptor: Some(true),
            heap: None,
        }),
        queue: QueueFacts {
            queue: Some(Some(QueueState {
                filter: Some(None),
                enabled: Some(true),
                purge_on_no_consumers: Some(false),
                last_value: Some(false),
                ring_size: Some(-1),
                internal: Some(false),
                consumer_count: Some(1),
                message_count: Some(0),
                ..QueueState::default()
            })),
            settings: Some(AddressSettings::from_json(json!({}))),
            address_size: Some(0),
            paging: Some(false),
        },
    }
}

/// `west/west-1/orders`.
pub(crate) fn target() -> QueueRef {
    QueueRef { cluster: "west".into(), node: "west-1".into(), queue: "orders".into(), address: None }
}

/// The state of the target queue, known to exist.
pub(crate) fn queue(f: &mut EndFacts) -> &mut QueueState {
    f.queue.queue.as_mut().unwrap().as_mut().unwrap()
}

fn broker(f: &mut EndFacts) -> &mut BrokerState {
    &mut f.node.as_mut().unwrap().broker
}

fn settings(f: &mut EndFacts, raw: serde_json::Value) {
    f.queue.settings = Some(AddressSettings::from_json(raw));
}

/// 100 messages of 1,000 bytes: the preview's selection, or a batch of the guard.
fn load(of: Judged) -> Load {
    Load { messages: Some(100), bytes: Some(100_000), of }
}

type Change = fn(&mut EndFacts);

/// (what changed, change, code, the preview's kind, the guard's response)
const ROWS: &[(&str, Change, &str, Kind, Response)] = &[
    ("no answer", |f| f.node = None, "target-unreachable", Kind::Unknown, Response::Unknown),
    ("not active", |f| broker(f).active = Some(false), "target-not-live", Refused, Response::Unknown),
    (
        "passive backup",
        |f| {
            broker(f).backup = Some(true);
            broker(f).active = Some(false)
        },
        "target-backup",
        Refused,
        Response::Unknown,
    ),
    ("live unread", |f| broker(f).active = None, "target-ha-unknown", Kind::Unknown, Response::Unknown),
    ("queue unread", |f| f.queue.queue = None, "target-queue-unknown", Kind::Unknown, Response::Unknown),
    ("queue missing", |f| f.queue.queue = Some(None), "target-queue-created", NeedsAck, Refuse),
    (
        "queue missing, no auto-create",
        |f| {
            f.queue.queue = Some(None);
            settings(f, json!({"autoCreateQueues": false}))
        },
        "target-queue-missing",
        Refused,
        Refuse,
    ),
    (
        "queue missing, settings unread",
        |f| {
            f.queue.queue = Some(None);
            f.queue.settings = None
        },
        "target-queue-missing-unknown",
        Kind::Unknown,
        Response::Unknown,
    ),
    ("internal", |f| queue(f).internal = Some(true), "internal-queue", Refused, Refuse),
    ("filtered", |f| queue(f).filter = Some(Some("a = 1".into())), "target-filtered", Refused, Refuse),
    ("filter unread", |f| queue(f).filter = None, "target-filter-unknown", Kind::Unknown, Response::Unknown),
    ("disabled", |f| queue(f).enabled = Some(false), "target-disabled", Refused, Refuse),
    ("enabled unread", |f| queue(f).enabled = None, "target-enabled-unknown", Kind::Unknown, Response::Unknown),
    ("purges", |f| queue(f).purge_on_no_consumers = Some(true), "target-purge-on-no-consumers", Refused, Refuse),
    (
        "purge unread",
        |f| queue(f).purge_on_no_consumers = None,
        "target-purge-unknown",
        Kind::Unknown,
        Response::Unknown,
    ),
    ("last value", |f| queue(f).last_value = Some(true), "last-value", NeedsAck, PreviewOnly),
    ("last value unread", |f| queue(f).last_value = None, "last-value-unknown", Kind::Unknown, PreviewOnly),
    ("ring of 0", |f| queue(f).ring_size = Some(0), "ring-too-small", Refused, PreviewOnly),
    (
        "ring pushes out",
        |f| {
            queue(f).ring_size = Some(150);
            queue(f).message_count = Some(80)
        },
        "ring-pushes-out",
        NeedsAck,
        PreviewOnly,
    ),
    (
        "ring of unread depth",
        |f| {
            queue(f).ring_size = Some(500);
            queue(f).message_count = None
        },
        "ring-unknown",
        Kind::Unknown,
        PreviewOnly,
    ),
    ("ring unread", |f| queue(f).ring_size = None, "ring-size-unknown", Kind::Unknown, PreviewOnly),
    (
        "redistribution",
        |f| {
            queue(f).consumer_count = Some(0);
            settings(f, json!({"redistributionDelay": 0}))
        },
        "may-redistribute",
        NeedsAck,
        PreviewOnly,
    ),
    ("consumers unread", |f| queue(f).consumer_count = None, "consumers-unknown", Kind::Unknown, PreviewOnly),
    ("expiry delay", |f| settings(f, json!({"expiryDelay": 0})), "target-expiry-delay", NeedsAck, PreviewOnly),
    ("settings unread", |f| f.queue.settings = None, "address-settings-unknown", Kind::Unknown, Response::Unknown),
    ("drop", |f| settings(f, json!({"addressFullMessagePolicy": "DROP"})), "address-full-drop", Refused, Refuse),
    (
        "page limit 0, then drop",
        |f| settings(f, json!({"pageLimitBytes": 0, "pageFullMessagePolicy": "DROP"})),
        "page-full-drop",
        Refused,
        Refuse,
    ),
    (
        "max-size-bytes 0",
        |f| settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 0})),
        "capacity-bytes",
        Refused,
        Wait,
    ),
    (
        "max-size-messages 0",
        |f| settings(f, json!({"addressFullMessagePolicy": "BLOCK", "maxSizeMessages": 0})),
        "capacity-messages",
        Refused,
        Wait,
    ),
    (
        "bytes at the threshold",
        |f| settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 110_000})),
        "capacity-tight",
        NeedsAck,
        Wait,
    ),
    (
        "messages at the threshold",
        |f| settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 105})),
        "capacity-tight",
        NeedsAck,
        Wait,
    ),
    (
        "address size unread",
        |f| {
            settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1_000_000}));
            f.queue.address_size = None
        },
        "capacity-unknown",
        Kind::Unknown,
        Response::Unknown,
    ),
    (
        "depth unread",
        |f| {
            settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 1000}));
            queue(f).message_count = None
        },
        "capacity-messages-unknown",
        Kind::Unknown,
        Response::Unknown,
    ),
    ("disk at its limit", |f| broker(f).disk_store_usage = Some(0.90), "disk-full", Refused, Wait),
    ("disk at the threshold", |f| broker(f).disk_store_usage = Some(0.81), "disk-tight", NeedsAck, Wait),
    ("disk unread", |f| broker(f).disk_store_usage = None, "disk-unknown", Kind::Unknown, Response::Unknown),
];

#[test]
fn a_healthy_target_raises_nothing_at_either_edge() {
    for of in [Judged::Selection, Judged::Batch] {
        assert_eq!(judge(&target(), &healthy(), &load(of), 90), vec![], "{of:?}");
    }
}

#[test]
fn every_rule_raises_its_condition_with_both_edges_mappings() {
    for (what, change, code, preview, guard) in ROWS {
        for of in [Judged::Selection, Judged::Batch] {
            let mut facts = healthy();
            change(&mut facts);
            let verdicts = judge(&target(), &facts, &load(of), 90);
            let found = verdicts.iter().find(|v| v.condition.code == *code);
            let codes: Vec<_> = verdicts.iter().map(|v| v.condition.code).collect();
            let v = found.unwrap_or_else(|| panic!("{what} ({of:?}): no {code} in {codes:?}"));
            assert_eq!((v.condition.preview, v.condition.guard), (*preview, *guard), "{what}: {code}");
            assert!(v.words.starts_with(|c: char| c.is_uppercase()) && v.words.ends_with('.'), "{what}: {v:?}");
        }
    }
}

#[test]
fn every_condition_of_the_table_has_a_row_here_and_one_code() {
    let mut codes: Vec<&str> = table::ALL.iter().map(|c| c.code).collect();
    codes.sort_unstable();
    let before = codes.len();
    codes.dedup();
    assert_eq!(codes.len(), before, "a code is in the table twice");
    for c in table::ALL.iter().filter(|c| !c.code.starts_with("source-")) {
        assert!(ROWS.iter().any(|row| row.2 == c.code), "no test row raises {}", c.code);
    }
}

#[test]
fn unknown_is_unknown_at_both_edges() {
    for c in table::ALL {
        if c.preview == Kind::Unknown {
            assert!(matches!(c.guard, Response::Unknown | PreviewOnly), "{c:?}");
        }
        if c.guard == Response::Unknown {
            // A node that is not live is known; mid-run it is a failover under way, retried like an unknown.
            let failover = ["target-not-live", "target-backup"].contains(&c.code);
            assert!(c.preview == Kind::Unknown || failover, "{c:?}");
        }
    }
}

#[test]
fn every_code_of_the_table_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/findings.md")).unwrap();
    for c in table::ALL {
        assert!(doc.contains(&format!("`{}`", c.code)), "docs/findings.md lacks `{}`", c.code);
    }
}

#[test]
fn the_words_name_what_is_judged() {
    let mut f = healthy();
    settings(&mut f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 50_000}));
    let words = |of| judge(&target(), &f, &load(of), 90).remove(0).words;
    assert!(words(Judged::Selection).contains("the 100000 bytes the selection needs"), "{}", words(Judged::Selection));
    assert!(words(Judged::Batch).contains("the 100000 bytes the next batch needs"), "{}", words(Judged::Batch));
}

#[test]
fn a_limit_of_zero_is_a_limit_and_only_a_negative_one_is_none() {
    let mut facts = healthy();
    let raised = |f: &EndFacts, code: &str| {
        judge(&target(), f, &load(Judged::Batch), 90).iter().any(|v| v.condition.code == code)
    };
    settings(&mut facts, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": -1, "maxSizeMessages": -1}));
    assert!(!raised(&facts, "capacity-bytes") && !raised(&facts, "capacity-messages"));
    settings(&mut facts, json!({"pageLimitMessages": 0, "pageFullMessagePolicy": "DROP"}));
    assert!(raised(&facts, "page-full-drop"));
    settings(&mut facts, json!({"pageLimitMessages": -1, "pageLimitBytes": -1, "pageFullMessagePolicy": "DROP"}));
    assert!(!raised(&facts, "page-full-drop"));
}

#[test]
fn nothing_else_is_judged_about_a_node_that_did_not_answer() {
    let mut silent = healthy();
    silent.node = None;
    silent.queue.queue = None;
    let codes: Vec<_> = judge(&target(), &silent, &load(Judged::Batch), 90).iter().map(|v| v.condition.code).collect();
    assert_eq!(codes, vec!["target-unreachable"]);
}

#[test]
fn nothing_else_is_judged_about_a_node_that_is_not_active() {
    let mut passive = healthy();
    broker(&mut passive).backup = Some(true);
    broker(&mut passive).active = Some(false);
    // A passive backup has no queues to show: not a deleted target.
    passive.queue.queue = Some(None);
    let codes: Vec<_> = judge(&target(), &passive, &load(Judged::Batch), 90).iter().map(|v| v.condition.code).collect();
    assert_eq!(codes, vec!["target-backup"]);
}

#[test]
fn the_source_node_has_its_own_codes_and_is_the_previews_alone() {
    let mut f = healthy();
    broker(&mut f).active = Some(false);
    let v = node_live(End::Source, "east-1", f.node.as_ref().unwrap()).unwrap();
    assert_eq!((v.condition.code, v.condition.guard), ("source-not-live", PreviewOnly));
    f.node = None;
    let v = node_answered(End::Source, "east-1", &f).unwrap_err();
    assert_eq!(v.condition.code, "source-unreachable");
    assert!(v.words.contains("did not answer"), "{}", v.words);
}

/// A queue's name is the broker's and may hold any character: the snippet escapes it, so pasted into broker.xml
/// it is the setting it shows (an unescaped `"` or `<` would end the attribute or open an element).
#[test]
fn a_snippet_escapes_the_address_it_names() {
    let snippet = address_setting("a&b<c>\"d'e", "<expiry-delay>-1</expiry-delay>");
    assert_eq!(
        snippet,
        "<address-setting match=\"a&amp;b&lt;c&gt;&quot;d&apos;e\">\n   <expiry-delay>-1</expiry-delay>\n</address-setting>"
    );
}
