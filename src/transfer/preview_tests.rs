//! Table-driven tests of the pure preview: a healthy baseline, then one row per finding, each changing one fact.

use super::*;
use crate::broker::jolokia::{AddressSettings, BrokerState, HeapUsage, QueueState};
use crate::transfer::facts::{EndFacts, Facts, NodeFacts, QueueFacts};
use crate::transfer::plan::{Mode, Plan, QueueRef, Selection};
use serde_json::json;

fn node() -> NodeFacts {
    NodeFacts {
        broker: BrokerState {
            active: Some(true),
            backup: Some(false),
            node_id: Some("n".into()),
            version: Some("2.40.0".into()),
            current_time_millis: Some(1),
            id_cache_size: Some(20_000),
            persist_id_cache: Some(true),
            max_disk_usage: Some(90),
            disk_store_usage: Some(0.10),
            global_max_size: Some(1 << 30),
            address_memory_usage: Some(0),
            uptime_millis: Some(1),
        },
        core_acceptor: Some(true),
        heap: Some(HeapUsage { used: 200 << 20, max: 512 << 20 }),
    }
}

fn queue(depth: i64) -> QueueState {
    QueueState {
        routing_type: Some(crate::broker::jolokia::RoutingType::Anycast),
        filter: Some(None),
        durable: Some(true),
        enabled: Some(true),
        purge_on_no_consumers: Some(false),
        last_value: Some(false),
        ring_size: Some(-1),
        exclusive: Some(false),
        paused: Some(false),
        temporary: Some(false),
        auto_delete: Some(false),
        internal: Some(false),
        message_count: Some(depth),
        delivering_count: Some(0),
        scheduled_count: Some(0),
        persistent_size: Some(depth * 1000),
        consumer_count: Some(1),
        consumers_before_dispatch: Some(0),
        messages_acknowledged: Some(0),
        messages_expired: Some(0),
        messages_killed: Some(0),
    }
}

fn settings(v: serde_json::Value) -> AddressSettings {
    AddressSettings::from_json(v)
}

/// 100 messages of 1000 bytes on east-1, to an empty healthy queue on west-1.
fn healthy() -> Facts {
    Facts {
        source: EndFacts {
            node: Some(node()),
            queue: QueueFacts {
                queue: Some(Some(queue(100))),
                settings: Some(settings(json!({}))),
                address_size: Some(0),
                paging: Some(false),
            },
        },
        target: EndFacts {
            node: Some(node()),
            queue: QueueFacts {
                queue: Some(Some(queue(0))),
                settings: Some(settings(json!({}))),
                address_size: Some(0),
                paging: Some(false),
            },
        },
        filtered_count: None,
        browsed: None,
        filter_error: None,
        target_is_source_of_active_run: Some(false),
        runs_into_target_address: Some(0),
        source_has_active_run: Some(false),
        same_cluster: false,
    }
}

fn plan(mode: Mode, selection: Selection) -> Plan {
    Plan {
        mode,
        source: QueueRef { cluster: "east".into(), node: "east-1".into(), queue: "orders".into(), address: None },
        target: QueueRef { cluster: "west".into(), node: "west-1".into(), queue: "orders".into(), address: None },
        selection,
        t0_millis: 1_700_000_000_000,
        destination: Default::default(),
    }
}

fn codes(p: &Preview) -> Vec<(Kind, &'static str)> {
    p.findings.iter().map(|f| (f.kind, f.code)).collect()
}

#[test]
fn a_healthy_move_has_only_the_staging_rights_unknown() {
    let p = preview(&plan(Mode::Move, Selection::All), &healthy(), &PreviewSettings::default());
    assert_eq!(codes(&p), vec![(Kind::Unknown, "staging-rights")]);
    assert!(p.can_start());
    assert_eq!(p.selection_size, Some(100));
    assert_eq!(p.projected_bytes, Some(100_000));
    assert!(p.needs_typed_confirmation, "a move is always armed by typing the queue name");
    assert!(!p.needs_cap_override);
}

#[test]
fn a_healthy_small_copy_needs_no_typing() {
    let p = preview(&plan(Mode::Copy, Selection::Ids(vec![1, 2, 3])), &healthy(), &PreviewSettings::default());
    assert!(codes(&p).is_empty(), "{:?}", codes(&p));
    assert_eq!(p.selection_size, Some(3));
    assert_eq!(p.projected_bytes, Some(3000));
    assert!(!p.needs_typed_confirmation);
    assert!(p.notes.iter().any(|n| n.contains("keeps each message's expiration")));
}

type Mutation = fn(&mut Facts, &mut Plan);

/// (name, change, expected kind, expected code)
const ROWS: &[(&str, Mutation, Kind, &str)] = &[
    ("same queue", |_, p| p.target = p.source.clone(), Kind::Refused, "same-queue"),
    ("staging as source", |_, p| p.source.queue = "studio.transfer.abc".into(), Kind::Refused, "staging-queue"),
    ("staging as target", |_, p| p.target.queue = "studio.transfer.abc".into(), Kind::Refused, "staging-queue"),
    (
        "target backup",
        |f, _| {
            let b = &mut f.target.node.as_mut().unwrap().broker;
            b.backup = Some(true);
            b.active = Some(false)
        },
        Kind::Refused,
        "target-backup",
    ),
    (
        "target not live",
        |f, _| f.target.node.as_mut().unwrap().broker.active = Some(false),
        Kind::Refused,
        "target-not-live",
    ),
    (
        "source backup",
        |f, _| {
            let b = &mut f.source.node.as_mut().unwrap().broker;
            b.backup = Some(true);
            b.active = Some(false)
        },
        Kind::Refused,
        "source-backup",
    ),
    (
        "source not live",
        |f, _| f.source.node.as_mut().unwrap().broker.active = Some(false),
        Kind::Refused,
        "source-not-live",
    ),
    (
        "target too old",
        |f, _| f.target.node.as_mut().unwrap().broker.version = Some("2.36.1".into()),
        Kind::Refused,
        "target-too-old",
    ),
    (
        "source too old",
        |f, _| f.source.node.as_mut().unwrap().broker.version = Some("2.30.0".into()),
        Kind::Refused,
        "source-too-old",
    ),
    (
        "target no core",
        |f, _| f.target.node.as_mut().unwrap().core_acceptor = Some(false),
        Kind::Refused,
        "target-no-core",
    ),
    (
        "source no core",
        |f, _| f.source.node.as_mut().unwrap().core_acceptor = Some(false),
        Kind::Refused,
        "source-no-core",
    ),
    ("source missing", |f, _| f.source.queue.queue = Some(None), Kind::Refused, "source-queue-missing"),
    (
        "source internal",
        |f, _| f.source.queue.queue.as_mut().unwrap().as_mut().unwrap().internal = Some(true),
        Kind::Refused,
        "internal-queue",
    ),
    (
        "invalid filter",
        |f, p| {
            p.selection = Selection::Filter("a = = 1".into());
            f.filter_error = Some("AMQ229020: Invalid filter: a = = 1".into())
        },
        Kind::Refused,
        "invalid-filter",
    ),
    (
        "filter escaping its freeze",
        // The broker accepts it; its effective filter would be `(x = 1) OR ((1=1) AND <t0 terms>)`.
        |_, p| p.selection = Selection::Filter("x = 1) OR (1=1".into()),
        Kind::Refused,
        "invalid-filter",
    ),
    (
        "filter escaping its freeze through comments",
        // Issue 27: the parentheses are balanced outside string literals, but the broker skips comments, so it
        // reads `x=1) OR (1=1` and the effective filter as `(x=1) OR ((1=1) AND <t0 terms>)`.
        |_, p| p.selection = Selection::Filter("x=1 /* ( */) OR (1=1 /* ) */".into()),
        Kind::Refused,
        "invalid-filter",
    ),
    (
        "filter escaping its freeze through a line comment",
        |_, p| p.selection = Selection::Filter("x=1 -- (\n) OR (1=1 -- )\n".into()),
        Kind::Refused,
        "invalid-filter",
    ),
    ("source busy", |f, _| f.source_has_active_run = Some(true), Kind::Refused, "source-busy"),
    ("ping-pong", |f, _| f.target_is_source_of_active_run = Some(true), Kind::Refused, "target-in-active-run"),
    ("target filtered", |f, _| tq(f).filter = Some(Some("color = 'red'".into())), Kind::Refused, "target-filtered"),
    ("target disabled", |f, _| tq(f).enabled = Some(false), Kind::Refused, "target-disabled"),
    ("target purges", |f, _| tq(f).purge_on_no_consumers = Some(true), Kind::Refused, "target-purge-on-no-consumers"),
    ("ring too small", |f, _| tq(f).ring_size = Some(50), Kind::Refused, "ring-too-small"),
    (
        "ring pushes out",
        |f, _| {
            tq(f).ring_size = Some(150);
            tq(f).message_count = Some(80)
        },
        Kind::NeedsAck,
        "ring-pushes-out",
    ),
    ("last value", |f, _| tq(f).last_value = Some(true), Kind::NeedsAck, "last-value"),
    (
        "missing, auto-create off",
        |f, _| {
            f.target.queue.queue = Some(None);
            f.target.queue.settings = Some(settings(json!({"autoCreateQueues": false})))
        },
        Kind::Refused,
        "target-queue-missing",
    ),
    ("missing, auto-create on", |f, _| f.target.queue.queue = Some(None), Kind::NeedsAck, "target-queue-created"),
    (
        "drop policy",
        |f, _| f.target.queue.settings = Some(settings(json!({"addressFullMessagePolicy": "DROP"}))),
        Kind::Refused,
        "address-full-drop",
    ),
    (
        "page limit then drop",
        |f, _| {
            f.target.queue.settings = Some(settings(json!({"pageLimitMessages": 10, "pageFullMessagePolicy": "DROP"})))
        },
        Kind::Refused,
        "page-full-drop",
    ),
    (
        "full under FAIL",
        |f, _| {
            f.target.queue.settings =
                Some(settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 150000})));
            f.target.queue.address_size = Some(60_000)
        },
        Kind::Refused,
        "capacity-bytes",
    ),
    (
        "full under BLOCK",
        |f, _| {
            f.target.queue.settings =
                Some(settings(json!({"addressFullMessagePolicy": "BLOCK", "maxSizeBytes": 150000})));
            f.target.queue.address_size = Some(60_000)
        },
        Kind::Refused,
        "capacity-bytes",
    ),
    (
        "tight under FAIL",
        |f, _| {
            f.target.queue.settings =
                Some(settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 110000})));
            f.target.queue.address_size = Some(0)
        },
        Kind::NeedsAck,
        "capacity-tight",
    ),
    (
        "messages full",
        |f, _| {
            f.target.queue.settings =
                Some(settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 120})));
            tq(f).message_count = Some(30)
        },
        Kind::Refused,
        "capacity-messages",
    ),
    (
        "messages tight",
        |f, _| {
            f.target.queue.settings =
                Some(settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 105})));
            tq(f).message_count = Some(0)
        },
        Kind::NeedsAck,
        "capacity-tight",
    ),
    (
        "disk full",
        |f, _| f.target.node.as_mut().unwrap().broker.disk_store_usage = Some(0.95),
        Kind::Refused,
        "disk-full",
    ),
    (
        "disk tight",
        |f, _| f.target.node.as_mut().unwrap().broker.disk_store_usage = Some(0.85),
        Kind::NeedsAck,
        "disk-tight",
    ),
    (
        "dup cache off",
        |f, _| f.target.node.as_mut().unwrap().broker.id_cache_size = Some(0),
        Kind::NeedsAck,
        "duplicate-cache-off",
    ),
    (
        "dup cache not persisted",
        |f, _| f.target.node.as_mut().unwrap().broker.persist_id_cache = Some(false),
        Kind::NeedsAck,
        "duplicate-cache-not-persisted",
    ),
    (
        "dup cache small for the address",
        |f, _| f.target.queue.settings = Some(settings(json!({"idCacheSize": 1000}))),
        Kind::NeedsAck,
        "duplicate-cache-small",
    ),
    (
        "no consumer, redistribution on",
        |f, _| {
            tq(f).consumer_count = Some(0);
            f.target.queue.settings = Some(settings(json!({"redistributionDelay": 0})))
        },
        Kind::NeedsAck,
        "may-redistribute",
    ),
    (
        "expiry delay",
        |f, _| f.target.queue.settings = Some(settings(json!({"expiryDelay": 60000}))),
        Kind::NeedsAck,
        "target-expiry-delay",
    ),
    (
        "source paged, filter",
        |f, p| {
            f.source.queue.paging = Some(true);
            p.selection = Selection::Filter("a = 1".into());
            f.filtered_count = Some(3)
        },
        Kind::NeedsAck,
        "source-paged",
    ),
    (
        // 20,000 messages of 10,000 stored bytes: 200 MB + 32 MB; 80 % of the 312 MiB free is 250 MiB.
        "source paged, filter, scan within the free heap",
        |f, p| {
            f.source.queue.paging = Some(true);
            p.selection = Selection::Filter("a = 1".into());
            tq_src(f).message_count = Some(20_000);
            tq_src(f).persistent_size = Some(200_000_000)
        },
        Kind::NeedsAck,
        "source-paged",
    ),
    (
        // 200,000 messages of 1,000 stored bytes: 200 MB + 320 MB, more than the broker can spare.
        "source paged, filter, scan beyond the free heap",
        |f, p| {
            f.source.queue.paging = Some(true);
            p.selection = Selection::Filter("a = 1".into());
            tq_src(f).message_count = Some(200_000);
            tq_src(f).persistent_size = Some(200_000_000)
        },
        Kind::Refused,
        "source-paged-heap",
    ),
    (
        "source paged, filter, heap unknown",
        |f, p| {
            f.source.queue.paging = Some(true);
            p.selection = Selection::Filter("a = 1".into());
            f.source.node.as_mut().unwrap().heap = None
        },
        Kind::Unknown,
        "source-heap-unknown",
    ),
    (
        "source paged, ids",
        |f, p| {
            f.source.queue.paging = Some(true);
            p.selection = Selection::Ids(vec![1, 2]);
            tq_src(f).message_count = Some(200_000)
        },
        Kind::NeedsAck,
        "source-paged",
    ),
    (
        "source paged, copy by filter (a browse keeps nothing)",
        |f, p| {
            f.source.queue.paging = Some(true);
            p.mode = Mode::Copy;
            p.selection = Selection::Filter("a = 1".into());
            tq_src(f).message_count = Some(200_000)
        },
        Kind::NeedsAck,
        "source-paged",
    ),
    ("target unreachable", |f, _| f.target.node = None, Kind::Unknown, "target-unreachable"),
    ("source unreachable", |f, _| f.source.node = None, Kind::Unknown, "source-unreachable"),
    (
        "filter on a deep queue",
        |f, p| {
            p.selection = Selection::Filter("a = 1".into());
            tq_src(f).message_count = Some(500)
        },
        Kind::Unknown,
        "selection-size",
    ),
    ("target queue unknown", |f, _| f.target.queue.queue = None, Kind::Unknown, "target-queue-unknown"),
    ("settings unknown", |f, _| f.target.queue.settings = None, Kind::Unknown, "address-settings-unknown"),
    (
        "disk unknown",
        |f, _| f.target.node.as_mut().unwrap().broker.disk_store_usage = None,
        Kind::Unknown,
        "disk-unknown",
    ),
    (
        "capacity unknown",
        |f, _| {
            f.target.queue.settings =
                Some(settings(json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 1000000})));
            f.target.queue.address_size = None
        },
        Kind::Unknown,
        "capacity-unknown",
    ),
    (
        "dup cache unknown",
        |f, _| f.target.node.as_mut().unwrap().broker.id_cache_size = None,
        Kind::Unknown,
        "duplicate-cache-size-unknown",
    ),
    ("filter unknown", |f, _| tq(f).filter = None, Kind::Unknown, "target-filter-unknown"),
    (
        "version unknown",
        |f, _| f.target.node.as_mut().unwrap().broker.version = None,
        Kind::Unknown,
        "target-version-unknown",
    ),
    ("ha unknown", |f, _| f.target.node.as_mut().unwrap().broker.active = None, Kind::Unknown, "target-ha-unknown"),
    ("core unknown", |f, _| f.target.node.as_mut().unwrap().core_acceptor = None, Kind::Unknown, "target-core-unknown"),
    (
        "ring fit unknown",
        |f, _| {
            tq(f).ring_size = Some(500);
            tq(f).message_count = None
        },
        Kind::Unknown,
        "ring-unknown",
    ),
    ("runs unknown", |f, _| f.target_is_source_of_active_run = None, Kind::Unknown, "target-runs-unknown"),
];

fn tq(f: &mut Facts) -> &mut QueueState {
    f.target.queue.queue.as_mut().unwrap().as_mut().unwrap()
}

fn tq_src(f: &mut Facts) -> &mut QueueState {
    f.source.queue.queue.as_mut().unwrap().as_mut().unwrap()
}

#[test]
fn every_row_raises_its_finding() {
    for (name, change, kind, code) in ROWS {
        let mut facts = healthy();
        let mut p = plan(Mode::Move, Selection::All);
        change(&mut facts, &mut p);
        let out = preview(&p, &facts, &PreviewSettings::default());
        let found = codes(&out);
        assert!(found.contains(&(*kind, *code)), "{name}: expected {kind:?} {code}, got {found:?}");
        assert_eq!(out.can_start(), !found.iter().any(|(k, _)| *k == Kind::Refused), "{name}");
        let finding = out.findings.iter().find(|f| f.code == *code).unwrap();
        assert!(!finding.words.is_empty() && finding.words.ends_with('.'), "{name}: {finding:?}");
    }
}

#[test]
fn every_code_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/findings.md")).unwrap();
    // Every code literal in the evaluator and its target rules (a quoted lowercase word-with-dashes), not only
    // those in ROWS.
    let source = concat!(include_str!("preview.rs"), include_str!("target_rules.rs"), include_str!("retry.rs"));
    let mut codes: Vec<&str> = source
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|lit| lit.contains('-') && lit.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .collect();
    codes.extend(ROWS.iter().map(|row| row.3));
    assert!(codes.len() > 40, "found only {codes:?}");
    for code in &codes {
        assert!(doc.contains(&format!("`{code}`")), "docs/findings.md lacks `{code}`");
    }
    // And the other way: every code the tables of findings list (from `## Refused` on, the first column) is one the
    // code can emit, so the page never describes a finding that no longer exists.
    let tables = &doc[doc.find("## Refused").expect("a Refused section")..];
    let documented: Vec<&str> = tables.lines().filter_map(|line| line.strip_prefix("| `")?.split('`').next()).collect();
    assert!(documented.len() > 40, "found only {documented:?}");
    for code in documented {
        assert!(codes.contains(&code), "docs/findings.md lists `{code}`, which no code emits");
    }
}

#[test]
fn refusals_come_first_and_snippets_name_the_address() {
    let mut facts = healthy();
    facts.target.queue.settings = Some(settings(json!({"addressFullMessagePolicy": "DROP", "expiryDelay": 5})));
    facts.target.node.as_mut().unwrap().broker.version = None;
    let out = preview(&plan(Mode::Move, Selection::All), &facts, &PreviewSettings::default());
    let kinds: Vec<Kind> = out.findings.iter().map(|f| f.kind).collect();
    let mut sorted = kinds.clone();
    sorted.sort_by_key(|k| *k as u8);
    assert_eq!(kinds[0], Kind::Refused);
    let drop = out.findings.iter().find(|f| f.code == "address-full-drop").unwrap();
    assert_eq!(
        drop.snippet.as_deref(),
        Some("<address-setting match=\"orders\">\n   <address-full-policy>PAGE</address-full-policy>\n</address-setting>")
    );
    assert_eq!(out.codes_to_acknowledge(), vec!["target-expiry-delay"]);
}

#[test]
fn selection_size_rules() {
    let s = PreviewSettings::default();
    let mut facts = healthy();
    // A filter on a queue no deeper than the browse page size: the broker's count is exact.
    facts.filtered_count = Some(7);
    let p = preview(&plan(Mode::Copy, Selection::Filter("x > 1".into())), &facts, &s);
    assert_eq!(p.selection_size, Some(7));
    // The same filter on a deeper queue, not counted by a browse: unknown, needs the override and typing.
    tq_src(&mut facts).message_count = Some(201);
    let p = preview(&plan(Mode::Copy, Selection::Filter("x > 1".into())), &facts, &s);
    assert_eq!(p.selection_size, None);
    assert!(p.needs_cap_override && p.needs_typed_confirmation);
    let size = p.findings.iter().find(|f| f.code == "selection-size").expect("selection-size");
    assert!(size.words.contains("Core acceptor did not answer"), "{}", size.words);
    // Counted by a browse of the source: exact at any depth.
    facts.browsed = Some(Counted::Exact(150));
    let p = preview(&plan(Mode::Copy, Selection::Filter("x > 1".into())), &facts, &s);
    assert_eq!((p.selection_size, p.selection_at_least), (Some(150), None));
    assert!(!p.findings.iter().any(|f| f.code == "selection-size"), "{:#?}", p.findings);
    assert!(p.notes.iter().any(|n| n.starts_with("The run's end is proven against the source broker's counts")));
    // A browse that stopped at the preview's limit: more than N, over the cap, proven by exhaustion.
    facts.browsed = Some(Counted::AtLeast(100_000));
    let p = preview(&plan(Mode::Copy, Selection::Filter("x > 1".into())), &facts, &s);
    assert_eq!((p.selection_size, p.selection_at_least), (None, Some(100_000)));
    assert!(p.needs_cap_override && p.needs_typed_confirmation);
    let size = p.findings.iter().find(|f| f.code == "selection-size").expect("selection-size");
    assert!(size.words.starts_with("More than 100000 messages match the filter"), "{}", size.words);
    assert!(p.notes.iter().any(|n| n.contains("proven by exhaustion")), "{:#?}", p.notes);
    facts.browsed = None;
    // An empty selection is a number too: 0 bytes projected, and the preview says the run would do nothing.
    facts.browsed = Some(Counted::Exact(0));
    let p = preview(&plan(Mode::Move, Selection::Filter("x > 1".into())), &facts, &s);
    assert_eq!((p.selection_size, p.projected_bytes), (Some(0), Some(0)));
    assert!(p.notes.iter().any(|n| n.starts_with("Nothing is selected at t0")), "{:#?}", p.notes);
    facts.browsed = None;
    // A missing source queue is said once, by its own finding: no selection-size finding beside it.
    let mut missing = facts.clone();
    missing.source.queue.queue = Some(None);
    let p = preview(&plan(Mode::Copy, Selection::Filter("x > 1".into())), &missing, &s);
    assert!(p.findings.iter().any(|f| f.code == "source-queue-missing"), "{:#?}", p.findings);
    assert!(!p.findings.iter().any(|f| f.code == "selection-size"), "{:#?}", p.findings);
    // The browse page size comes from the source address settings.
    facts.source.queue.settings = Some(settings(json!({"managementBrowsePageSize": 1000})));
    let p = preview(&plan(Mode::Copy, Selection::Filter("x > 1".into())), &facts, &s);
    assert_eq!(p.selection_size, Some(7));
    // Over the safety cap.
    let mut facts = healthy();
    tq_src(&mut facts).message_count = Some(5000);
    let p = preview(&plan(Mode::Copy, Selection::All), &facts, &s);
    assert_eq!(p.selection_size, Some(5000));
    assert!(p.needs_cap_override && p.needs_typed_confirmation);
}

#[test]
fn the_address_duplicate_cache_overrides_the_brokers() {
    let mut facts = healthy();
    facts.target.node.as_mut().unwrap().broker.id_cache_size = Some(100);
    facts.target.queue.settings = Some(settings(json!({"idCacheSize": 50000})));
    let out = preview(&plan(Mode::Move, Selection::All), &facts, &PreviewSettings::default());
    assert!(!codes(&out).iter().any(|(_, c)| c.starts_with("duplicate")), "{:?}", codes(&out));
    facts.target.queue.settings = Some(settings(json!({})));
    let out = preview(&plan(Mode::Move, Selection::All), &facts, &PreviewSettings::default());
    assert!(codes(&out).contains(&(Kind::NeedsAck, "duplicate-cache-small")));
}

#[test]
fn an_unreachable_target_is_one_unknown_and_never_a_pass() {
    let mut facts = healthy();
    facts.target = EndFacts::default();
    let out = preview(&plan(Mode::Move, Selection::All), &facts, &PreviewSettings::default());
    assert!(codes(&out).contains(&(Kind::Unknown, "target-unreachable")));
    assert!(
        !codes(&out).iter().any(|(_, c)| c.starts_with("target-") && *c != "target-unreachable"),
        "{:?}",
        codes(&out)
    );
}

#[test]
fn the_safety_cap_is_inclusive() {
    let s = PreviewSettings { safety_cap: 100, ..PreviewSettings::default() };
    let at_cap = preview(&plan(Mode::Copy, Selection::All), &healthy(), &s);
    assert_eq!(at_cap.selection_size, Some(100));
    assert!(!at_cap.needs_cap_override && !at_cap.needs_typed_confirmation);
    let mut facts = healthy();
    tq_src(&mut facts).message_count = Some(101);
    let over = preview(&plan(Mode::Copy, Selection::All), &facts, &s);
    assert!(over.needs_cap_override && over.needs_typed_confirmation);
}

#[test]
fn the_oldest_supported_version_is_accepted() {
    let mut facts = healthy();
    facts.target.node.as_mut().unwrap().broker.version = Some("2.37.0".into());
    facts.source.node.as_mut().unwrap().broker.version = Some("2.37.0".into());
    let out = preview(&plan(Mode::Move, Selection::All), &facts, &PreviewSettings::default());
    assert!(!codes(&out).iter().any(|(_, c)| c.ends_with("too-old")), "{:?}", codes(&out));
}

#[test]
fn a_staging_address_is_refused_whatever_the_queue_is_called() {
    let mut p = plan(Mode::Move, Selection::All);
    p.target.address = Some("studio.transfer.1234".into());
    let out = preview(&p, &healthy(), &PreviewSettings::default());
    assert!(codes(&out).contains(&(Kind::Refused, "staging-queue")), "{:?}", codes(&out));
}

/// A move on one node is the broker's own move: no relay, so no Core acceptor is needed. A copy on one node
/// still relays (browse and send), so it needs one.
#[test]
fn core_acceptors_matter_only_when_the_run_relays() {
    let mut facts = healthy();
    facts.source.node.as_mut().unwrap().core_acceptor = Some(false);
    facts.target.node.as_mut().unwrap().core_acceptor = Some(false);
    let mut same_node = plan(Mode::Move, Selection::All);
    same_node.target = QueueRef { queue: "elsewhere".into(), ..same_node.source.clone() };
    let out = preview(&same_node, &facts, &PreviewSettings::default());
    assert!(!codes(&out).iter().any(|(_, c)| c.ends_with("no-core")), "{:?}", codes(&out));
    same_node.mode = Mode::Copy;
    let out = preview(&same_node, &facts, &PreviewSettings::default());
    assert!(codes(&out).contains(&(Kind::Refused, "source-no-core")), "{:?}", codes(&out));
    assert!(codes(&out).contains(&(Kind::Refused, "target-no-core")), "{:?}", codes(&out));
}

#[test]
fn a_ring_the_selection_fits_in_raises_nothing() {
    for (ring, depth) in [(100, 0), (500, 0), (150, 50)] {
        let mut facts = healthy();
        tq(&mut facts).ring_size = Some(ring);
        tq(&mut facts).message_count = Some(depth);
        let out = preview(&plan(Mode::Move, Selection::All), &facts, &PreviewSettings::default());
        assert!(
            !codes(&out).iter().any(|(_, c)| c.starts_with("ring")),
            "ring {ring} depth {depth}: {:?}",
            codes(&out)
        );
    }
}

/// What a boundary row expects of its finding.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Raised, with this kind.
    Raised(Kind),
    /// Not raised at all.
    Absent,
}

/// One rule at its edge: a change to the healthy facts (a move of all 100 messages of 1000 bytes, default settings:
/// batch 200, threshold 90 %) and what it must do to one finding. Each row moves one value to just inside or just
/// outside a limit, so that a rule that drifts by one (`>` for `>=`, 0 taken for "unset") fails here.
struct Boundary {
    rule: &'static str,
    change: Mutation,
    code: &'static str,
    expect: Expect,
}

use Expect::{Absent, Raised};

fn target_settings(f: &mut Facts, v: serde_json::Value) {
    f.target.queue.settings = Some(settings(v));
}

fn target_broker(f: &mut Facts) -> &mut BrokerState {
    &mut f.target.node.as_mut().unwrap().broker
}

const BOUNDARIES: &[Boundary] = &[
    // Room under FAIL or BLOCK, in bytes: the selection projects to 100 000 bytes.
    Boundary {
        rule: "room for exactly the projected bytes is not refused",
        change: |f, _| target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 100_000})),
        code: "capacity-bytes",
        expect: Absent,
    },
    Boundary {
        rule: "bytes already on the address take room: one byte too few is refused",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 100_000}));
            f.target.queue.address_size = Some(1)
        },
        code: "capacity-bytes",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "bytes reaching exactly the threshold are tight",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "BLOCK", "maxSizeBytes": 120_000}));
            f.target.queue.address_size = Some(8_000)
        },
        code: "capacity-tight",
        expect: Raised(Kind::NeedsAck),
    },
    Boundary {
        rule: "bytes one under the threshold are not tight",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "BLOCK", "maxSizeBytes": 120_000}));
            f.target.queue.address_size = Some(7_999)
        },
        code: "capacity-tight",
        expect: Absent,
    },
    Boundary {
        rule: "max-size-bytes 0 is a limit that leaves no room, not \"no limit\"",
        change: |f, _| target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeBytes": 0})),
        code: "capacity-bytes",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "an empty selection to an address of max-size-bytes 0 is tight (and words need no division by 0)",
        change: |f, p| {
            target_settings(f, json!({"addressFullMessagePolicy": "BLOCK", "maxSizeBytes": 0}));
            p.selection = Selection::Ids(vec![])
        },
        code: "capacity-tight",
        expect: Raised(Kind::NeedsAck),
    },
    // Room under FAIL or BLOCK, in messages: 100 selected.
    Boundary {
        rule: "max-size-messages 0 is a limit that leaves no room, not \"no limit\"",
        change: |f, _| target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 0})),
        code: "capacity-messages",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "room for exactly the selected messages is not refused",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 130}));
            tq(f).message_count = Some(30)
        },
        code: "capacity-messages",
        expect: Absent,
    },
    Boundary {
        rule: "messages reaching exactly the threshold are tight",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 120}));
            tq(f).message_count = Some(8)
        },
        code: "capacity-tight",
        expect: Raised(Kind::NeedsAck),
    },
    Boundary {
        rule: "messages one under the threshold are not tight",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 120}));
            tq(f).message_count = Some(7)
        },
        code: "capacity-tight",
        expect: Absent,
    },
    Boundary {
        rule: "a missing target queue holds nothing: room for fewer than selected is refused",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 99}));
            f.target.queue.queue = Some(None)
        },
        code: "capacity-messages",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "a missing target queue with room for exactly the selection is not refused",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 100}));
            f.target.queue.queue = Some(None)
        },
        code: "capacity-messages",
        expect: Absent,
    },
    Boundary {
        rule: "a missing target queue's room is known, since it holds nothing",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 1000}));
            f.target.queue.queue = Some(None)
        },
        code: "capacity-messages-unknown",
        expect: Absent,
    },
    Boundary {
        rule: "an existing target queue of unknown depth leaves its room unknown",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 1000}));
            tq(f).message_count = None
        },
        code: "capacity-messages-unknown",
        expect: Raised(Kind::Unknown),
    },
    Boundary {
        rule: "a target queue not known to exist leaves its room unknown",
        change: |f, _| {
            target_settings(f, json!({"addressFullMessagePolicy": "FAIL", "maxSizeMessages": 1000}));
            f.target.queue.queue = None
        },
        code: "capacity-messages-unknown",
        expect: Raised(Kind::Unknown),
    },
    // Paging up to a limit, then dropping. Artemis takes only a negative page limit as none.
    Boundary {
        rule: "a page limit in bytes alone, then DROP, is refused",
        change: |f, _| target_settings(f, json!({"pageLimitBytes": 1_000_000, "pageFullMessagePolicy": "DROP"})),
        code: "page-full-drop",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "a page limit of 0 messages is the strictest limit, not none",
        change: |f, _| target_settings(f, json!({"pageLimitMessages": 0, "pageFullMessagePolicy": "DROP"})),
        code: "page-full-drop",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "a page limit of 0 bytes is the strictest limit, not none",
        change: |f, _| target_settings(f, json!({"pageLimitBytes": 0, "pageFullMessagePolicy": "DROP"})),
        code: "page-full-drop",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "page-full DROP without a page limit never drops",
        change: |f, _| target_settings(f, json!({"pageFullMessagePolicy": "DROP"})),
        code: "page-full-drop",
        expect: Absent,
    },
    Boundary {
        rule: "a page limit then FAIL drops nothing silently",
        change: |f, _| target_settings(f, json!({"pageLimitMessages": 10, "pageFullMessagePolicy": "FAIL"})),
        code: "page-full-drop",
        expect: Absent,
    },
    // The target's journal disk; the node's max-disk-usage is 90.
    Boundary {
        rule: "a disk at exactly max-disk-usage is full",
        change: |f, _| target_broker(f).disk_store_usage = Some(0.90),
        code: "disk-full",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "a disk one percent under max-disk-usage is not full",
        change: |f, _| target_broker(f).disk_store_usage = Some(0.89),
        code: "disk-full",
        expect: Absent,
    },
    Boundary {
        rule: "a disk at exactly the threshold of max-disk-usage is tight",
        change: |f, _| target_broker(f).disk_store_usage = Some(0.81),
        code: "disk-tight",
        expect: Raised(Kind::NeedsAck),
    },
    Boundary {
        rule: "a disk one percent under the threshold is not tight",
        change: |f, _| target_broker(f).disk_store_usage = Some(0.80),
        code: "disk-tight",
        expect: Absent,
    },
    Boundary {
        rule: "max-disk-usage 100 is never exceeded (the broker blocks only above it)",
        change: |f, _| {
            target_broker(f).max_disk_usage = Some(100);
            target_broker(f).disk_store_usage = Some(1.0)
        },
        code: "disk-full",
        expect: Absent,
    },
    Boundary {
        rule: "max-disk-usage -1 turns the disk check off",
        change: |f, _| {
            target_broker(f).max_disk_usage = Some(-1);
            target_broker(f).disk_store_usage = Some(0.99)
        },
        code: "disk-full",
        expect: Absent,
    },
    Boundary {
        rule: "max-disk-usage 0 blocks every message",
        change: |f, _| target_broker(f).max_disk_usage = Some(0),
        code: "disk-full",
        expect: Raised(Kind::Refused),
    },
    Boundary {
        rule: "an unknown max-disk-usage leaves the disk unknown",
        change: |f, _| target_broker(f).max_disk_usage = None,
        code: "disk-unknown",
        expect: Raised(Kind::Unknown),
    },
    // Expiry given by the target address. Artemis takes -1 as unset; 0 expires a message at once.
    Boundary {
        rule: "expiry-delay 0 expires messages without an expiration at once",
        change: |f, _| target_settings(f, json!({"expiryDelay": 0})),
        code: "target-expiry-delay",
        expect: Raised(Kind::NeedsAck),
    },
    Boundary {
        rule: "min-expiry-delay alone gives messages an expiry",
        change: |f, _| target_settings(f, json!({"minExpiryDelay": 0})),
        code: "target-expiry-delay",
        expect: Raised(Kind::NeedsAck),
    },
    Boundary {
        rule: "max-expiry-delay alone gives messages an expiry",
        change: |f, _| target_settings(f, json!({"maxExpiryDelay": 0})),
        code: "target-expiry-delay",
        expect: Raised(Kind::NeedsAck),
    },
    // The duplicate-id cache: 10 × the batch size of 200 is enough.
    Boundary {
        rule: "an id cache of exactly 10 batches is enough",
        change: |f, _| target_settings(f, json!({"idCacheSize": 2000})),
        code: "duplicate-cache-small",
        expect: Absent,
    },
    Boundary {
        rule: "an id cache one short of 10 batches is small",
        change: |f, _| target_settings(f, json!({"idCacheSize": 1999})),
        code: "duplicate-cache-small",
        expect: Raised(Kind::NeedsAck),
    },
    Boundary {
        rule: "an id cache of 1 is small, not off",
        change: |f, _| target_settings(f, json!({"idCacheSize": 1})),
        code: "duplicate-cache-off",
        expect: Absent,
    },
    Boundary {
        rule: "two other runs into the address: 30 batches of cache are enough",
        change: |f, _| {
            target_settings(f, json!({"idCacheSize": 6000}));
            f.runs_into_target_address = Some(2);
        },
        code: "duplicate-cache-shared",
        expect: Absent,
    },
    Boundary {
        rule: "two other runs into the address: one short of 30 batches of cache is shared thin",
        change: |f, _| {
            target_settings(f, json!({"idCacheSize": 5999}));
            f.runs_into_target_address = Some(2);
        },
        code: "duplicate-cache-shared",
        expect: Raised(Kind::NeedsAck),
    },
    Boundary {
        rule: "whether other runs write into the address unknown",
        change: |f, _| f.runs_into_target_address = None,
        code: "target-address-runs-unknown",
        expect: Raised(Kind::Unknown),
    },
    Boundary {
        rule: "unknown address settings leave the effective id cache size unknown",
        change: |f, _| f.target.queue.settings = None,
        code: "duplicate-cache-size-unknown",
        expect: Raised(Kind::Unknown),
    },
    // Ring queues: Artemis takes -1 as "not a ring"; a ring of 0 keeps (almost) nothing.
    Boundary {
        rule: "a ring of 0 is a ring, too small for any selection",
        change: |f, _| tq(f).ring_size = Some(0),
        code: "ring-too-small",
        expect: Raised(Kind::Refused),
    },
];

#[test]
fn every_rule_holds_at_its_boundary() {
    for Boundary { rule, change, code, expect } in BOUNDARIES {
        let mut facts = healthy();
        let mut p = plan(Mode::Move, Selection::All);
        change(&mut facts, &mut p);
        let found = codes(&preview(&p, &facts, &PreviewSettings::default()));
        let got = found.iter().find(|(_, c)| c == code).map_or(Absent, |(k, _)| Raised(*k));
        assert_eq!(got, *expect, "{rule}: {code}; all findings {found:?}");
    }
}
