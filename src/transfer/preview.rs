//! The preview: every finding about a plan, computed by a **pure function** of the facts.
//!
//! Findings have three kinds (SPEC §3): **refused** (the run will not start), **needs acknowledgement** (it runs
//! only if every such code is acknowledged) and **could not be checked** (a fact is unknown: stated as unknown,
//! never as a pass). Each has a stable code (listed in `docs/findings.md`), plain words, and — where a
//! `broker.xml` setting would fix it — the exact snippet.

use serde::Serialize;

use super::facts::{EndFacts, Facts, NodeFacts, QueueFacts};
use super::plan::{Mode, Plan, Selection, STAGING_PREFIX};
use super::proof::SourceCount;
use crate::broker::jolokia::{AddressSettings, FullPolicy, QueueState};

/// A move by filter from a paging source refills staging only while the source broker's heap is below this
/// share of its maximum (see [`check_paged_source`]).
pub const SOURCE_HEAP_WAIT_PCT: i64 = 90;

/// The oldest Artemis the product supports.
pub const OLDEST_SUPPORTED: (u32, u32) = (2, 37);

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The run will not start.
    Refused,
    /// The run starts only if this code is acknowledged.
    NeedsAck,
    /// A fact could not be read: unknown, never a pass.
    Unknown,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Finding {
    /// Refused, needs acknowledgement, or could not be checked.
    pub kind: Kind,
    /// A stable code (`docs/findings.md`).
    pub code: &'static str,
    /// What was found, in plain words.
    pub words: String,
    /// The `broker.xml` snippet that would fix it, where one exists.
    pub snippet: Option<String>,
}

/// The settings the preview depends on (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreviewSettings {
    /// Messages per relay transaction.
    pub batch_size: i64,
    /// How full (percent) the target address or disk may get before a run waits.
    pub capacity_threshold_pct: i64,
    /// Above this many messages a run needs an explicit override.
    pub safety_cap: i64,
}

impl Default for PreviewSettings {
    fn default() -> Self {
        PreviewSettings { batch_size: 200, capacity_threshold_pct: 90, safety_cap: 1000 }
    }
}

/// What the preview shows.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Preview {
    /// Every finding, refusals first.
    pub findings: Vec<Finding>,
    /// How many messages are selected: exact for ids and a whole queue, `None` when it cannot be known.
    pub selection_size: Option<i64>,
    /// The bytes the selection is projected to take on the target, when known.
    pub projected_bytes: Option<i64>,
    /// The source queue's counters at `t0`, which the run's end is proven against (`proof`).
    pub source_count_at_t0: Option<SourceCount>,
    /// Things an operator should know about every run of this kind.
    pub notes: Vec<String>,
    /// The source queue's name must be typed to arm the run (a move, over the safety cap, or of unknown size).
    pub needs_typed_confirmation: bool,
    /// The run needs an explicit override of the safety cap (over the cap, or of unknown size).
    pub needs_cap_override: bool,
}

impl Preview {
    /// True when no finding refuses the run.
    pub fn can_start(&self) -> bool {
        !self.findings.iter().any(|f| f.kind == Kind::Refused)
    }

    /// The codes that must be acknowledged.
    pub fn codes_to_acknowledge(&self) -> Vec<&'static str> {
        self.findings.iter().filter(|f| f.kind == Kind::NeedsAck).map(|f| f.code).collect()
    }
}

struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, kind: Kind, code: &'static str, words: String, snippet: Option<String>) {
        self.0.push(Finding { kind, code, words, snippet });
    }
    fn refuse(&mut self, code: &'static str, words: String, snippet: Option<String>) {
        self.push(Kind::Refused, code, words, snippet);
    }
    fn ack(&mut self, code: &'static str, words: String, snippet: Option<String>) {
        self.push(Kind::NeedsAck, code, words, snippet);
    }
    fn unknown(&mut self, code: &'static str, words: String) {
        self.push(Kind::Unknown, code, words, None);
    }
}

fn address_setting(address: &str, body: &str) -> String {
    format!("<address-setting match=\"{address}\">\n   {body}\n</address-setting>")
}

/// Evaluates every rule. Pure: the same plan, facts and settings always give the same preview.
pub fn preview(plan: &Plan, facts: &Facts, settings: &PreviewSettings) -> Preview {
    let mut f = Findings(Vec::new());
    let selection_size = selection_size(plan, facts);

    check_names(plan, &mut f);
    if plan.target_is_source() {
        f.refuse("same-queue", format!("The target is the source queue itself ({}).", plan.source.display()), None);
    }
    if let Selection::Filter(filter) = &plan.selection {
        if let Err(why) = super::plan::check_filter_closed(filter) {
            f.refuse("invalid-filter", format!("The filter cannot be used: {why}."), None);
        }
    }
    if let Some(error) = &facts.filter_error {
        f.refuse("invalid-filter", format!("The source broker cannot use the filter: {error}."), None);
    }
    check_source(plan, facts, &mut f);
    check_target(plan, facts, settings, selection_size, &mut f);

    if selection_size.is_none() {
        f.unknown(
            "selection-size",
            "The number of selected messages is not known: the broker counts a filter over at most \
             management-browse-page-size messages and the source queue is deeper. The run needs an explicit \
             override of the safety cap."
                .into(),
        );
    }
    if plan.mode == Mode::Move && !plan.same_node() {
        f.unknown(
            "staging-rights",
            format!(
                "Whether the broker user may create the staging queue {STAGING_PREFIX}<run id> on {} is learnt when \
                 the run starts.",
                plan.source.node
            ),
        );
    }

    let mut findings = f.0;
    // Refusals first, then what needs acknowledgement, then the unknowns; stable within each kind.
    findings.sort_by_key(|x| match x.kind {
        Kind::Refused => 0,
        Kind::NeedsAck => 1,
        Kind::Unknown => 2,
    });
    let over_cap = selection_size.is_none_or(|n| n > settings.safety_cap);
    Preview {
        findings,
        selection_size,
        projected_bytes: projected_bytes(facts, selection_size),
        source_count_at_t0: source_count(facts),
        notes: notes(plan, facts),
        needs_typed_confirmation: plan.mode == Mode::Move || over_cap,
        needs_cap_override: over_cap,
    }
}

/// Exact for ids and a whole queue; for a filter, the broker's count only where it scans the whole queue.
fn selection_size(plan: &Plan, facts: &Facts) -> Option<i64> {
    match &plan.selection {
        Selection::Ids(ids) => Some(ids.len() as i64),
        Selection::All => facts.source.queue.state()?.message_count,
        Selection::Filter(_) => {
            let depth = facts.source.queue.state()?.message_count?;
            let page = facts.source.queue.settings.as_ref()?.management_browse_page_size;
            if depth <= page {
                facts.filtered_count
            } else {
                None
            }
        }
    }
}

/// The source queue's counters and its broker's start, as read at `t0`.
fn source_count(facts: &Facts) -> Option<SourceCount> {
    SourceCount::read(facts.source.queue.state()?, &facts.source.node.as_ref()?.broker)
}

/// `count × (source PersistentSize ÷ source MessageCount)`.
fn projected_bytes(facts: &Facts, count: Option<i64>) -> Option<i64> {
    let state = facts.source.queue.state()?;
    let (size, depth) = (state.persistent_size?, state.message_count?);
    if depth <= 0 {
        return None;
    }
    Some(((count? as i128 * size as i128) / depth as i128) as i64)
}

fn notes(plan: &Plan, facts: &Facts) -> Vec<String> {
    let mut notes = vec![
        "Messages published over AMQP, MQTT, STOMP or OpenWire arrive in their Core form.".to_string(),
        "The selection is frozen at t0 by each message's timestamp, which the producer's clock set: a producer \
         with a fast clock can put a message outside the selection."
            .to_string(),
    ];
    if plan.mode == Mode::Move && plan.selection == Selection::All {
        notes.push(
            "A move of the whole queue takes at most the messages counted at t0: a producer that sends no timestamp \
             (0) or has a slow clock stamps later messages at or before t0, and the count keeps the run from taking \
             them (one of a higher priority can still take the place of an older one)."
                .into(),
        );
    }
    notes.push(match plan.mode {
        Mode::Move => "A move clears each message's expiration (the broker's move does); a copy keeps it.".into(),
        Mode::Copy => "A copy keeps each message's expiration.".into(),
    });
    if let Some(waiting) = facts.source.queue.state().and_then(|q| q.scheduled_count).filter(|n| *n > 0) {
        notes.push(match plan.mode {
            Mode::Move => format!(
                "{waiting} messages on the source wait for a delivery time (a redelivery delay after a rollback, or \
                 a scheduled delivery). Those stamped at or before t0 and not scheduled for after it are moved with \
                 the rest, without waiting out their delay; those scheduled for after t0 are not selected and stay."
            ),
            Mode::Copy => format!(
                "{waiting} messages on the source wait for a delivery time (a redelivery delay or a scheduled \
                 delivery): a browser cannot see them, so a copy leaves them and reports them as not copied."
            ),
        });
    }
    notes.push(
        "The run's end is proven against the source broker's counts: what it delivered, dead-lettered and did \
         not take must account for the messages counted at t0, less what consumers took meanwhile; otherwise it \
         ends Partial, saying what differs."
            .into(),
    );
    notes
}

fn check_names(plan: &Plan, f: &mut Findings) {
    for (end, q) in [("source", &plan.source), ("target", &plan.target)] {
        if q.queue.starts_with(STAGING_PREFIX) || q.address().starts_with(STAGING_PREFIX) {
            f.refuse(
                "staging-queue",
                format!(
                    "The {end} {} is a transfer's staging queue; staging is never a source or a target.",
                    q.display()
                ),
                None,
            );
        }
    }
}

/// The version string's (major, minor), when it parses.
fn version_of(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(|c: char| !c.is_ascii_digit()).filter(|p| !p.is_empty());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Checks every node must pass: it answers, it is live, it is new enough, it has a Core acceptor.
/// Returns the node when it answered.
fn check_node<'a>(
    end: &str,
    name: &str,
    facts: &'a EndFacts,
    needs_core: bool,
    f: &mut Findings,
) -> Option<&'a NodeFacts> {
    let Some(node) = &facts.node else {
        f.unknown(
            if end == "source" { "source-unreachable" } else { "target-unreachable" },
            format!("The {end} node {name} did not answer; nothing about it could be checked."),
        );
        return None;
    };
    match node.broker.version.as_deref().and_then(version_of) {
        Some(v) if v < OLDEST_SUPPORTED => f.refuse(
            if end == "source" { "source-too-old" } else { "target-too-old" },
            format!(
                "The {end} node {name} runs Artemis {}; message transfer needs {}.{} or later.",
                node.broker.version.as_deref().unwrap_or("?"),
                OLDEST_SUPPORTED.0,
                OLDEST_SUPPORTED.1
            ),
            None,
        ),
        Some(_) => {}
        None => f.unknown(
            if end == "source" { "source-version-unknown" } else { "target-version-unknown" },
            format!("The {end} node {name} did not say which Artemis version it runs."),
        ),
    }
    match (node.broker.backup, node.broker.active) {
        (Some(true), Some(false)) | (Some(true), None) => f.refuse(
            if end == "source" { "source-backup" } else { "target-backup" },
            format!("The {end} node {name} is a passive backup: it serves no clients until its primary fails."),
            None,
        ),
        (_, Some(false)) => f.refuse(
            if end == "source" { "source-not-live" } else { "target-not-live" },
            format!("The {end} node {name} is not active."),
            None,
        ),
        (_, Some(true)) => {}
        (_, None) => f.unknown(
            if end == "source" { "source-ha-unknown" } else { "target-ha-unknown" },
            format!("Whether the {end} node {name} is live could not be read."),
        ),
    }
    if needs_core {
        match node.core_acceptor {
            Some(true) => {}
            Some(false) => f.refuse(
                if end == "source" { "source-no-core" } else { "target-no-core" },
                format!("The {end} node {name} has no Core acceptor the relay can connect to."),
                Some("<acceptor name=\"artemis\">tcp://0.0.0.0:61616?protocols=CORE</acceptor>".into()),
            ),
            None => f.unknown(
                if end == "source" { "source-core-unknown" } else { "target-core-unknown" },
                format!("Whether the {end} node {name} has a Core acceptor is not known."),
            ),
        }
    }
    Some(node)
}

fn internal(state: &QueueState) -> bool {
    state.internal == Some(true)
}

fn check_source(plan: &Plan, facts: &Facts, f: &mut Findings) {
    let relay = !plan.same_node() || plan.mode == Mode::Copy;
    if check_node("source", &plan.source.node, &facts.source, relay, f).is_none() {
        return;
    }
    let q = &facts.source.queue;
    match &q.queue {
        None => f.unknown(
            "source-queue-unknown",
            format!("Whether the source queue {} exists could not be read.", plan.source.display()),
        ),
        Some(None) => f.refuse(
            "source-queue-missing",
            format!("The source queue {} does not exist.", plan.source.display()),
            None,
        ),
        Some(Some(state)) => {
            if internal(state) {
                f.refuse(
                    "internal-queue",
                    format!("The source queue {} is internal to the broker.", plan.source.display()),
                    None,
                );
            }
        }
    }
    match facts.source_has_active_run {
        Some(true) => f.refuse(
            "source-busy",
            format!(
                "Another run is already active on the source queue {}; at most one run per source queue.",
                plan.source.display()
            ),
            None,
        ),
        Some(false) => {}
        None => f.unknown(
            "source-busy-unknown",
            "Whether another run is active on the source queue could not be read.".into(),
        ),
    }
    if !matches!(plan.selection, Selection::All) && q.paging == Some(true) {
        check_paged_source(plan, facts, f);
    }
}

/// Heap the broker spends on each paged message a filtered move reads back into memory, beyond its stored size
/// (its reference, headers and buffers). Measured on Artemis 2.40 (`docs/broker-notes.md`, "A filtered move over
/// a paged queue"): 20,000 messages of 1,087 stored bytes took 2,634 bytes of heap each after a full GC.
pub const DEPAGED_OVERHEAD_BYTES: i64 = 1_600;

/// At most this share of the source broker's free heap may be spent on what a filtered move reads back from its
/// page files: the rest is the broker's own working room (and `used` already errs high, counting garbage).
pub const DEPAGE_HEAP_SHARE_PCT: i64 = 80;

/// The heap a filtered move over the paged queue `q` may make the broker hold: every message it passes over is
/// put back in the queue's memory and stays there until consumed, so the whole queue ahead of the last selected
/// message is paid for at once (`QueueImpl.iterQueue` in 2.40). `None` when the queue's size is unknown.
pub fn depaged_heap_estimate(q: &QueueState) -> Option<i64> {
    Some(q.persistent_size?.max(0) + q.message_count?.max(0) * DEPAGED_OVERHEAD_BYTES)
}

fn mib(bytes: i64) -> String {
    format!("{:.0} MiB", bytes as f64 / 1_048_576.0)
}

/// The source pages and the selection is not the whole queue. A **move** by filter is the broker's `moveMessages`,
/// which reads the paged messages back into the queue's memory as it scans and keeps every one it does not take
/// (a whole-queue move takes each message it reads, keeping nothing): refused when that cannot fit in the source
/// broker's free heap. Ids are moved by `moveMessage`, which finds only messages in memory. A copy browses, and a
/// browse reads pages through the page cache without keeping them.
fn check_paged_source(plan: &Plan, facts: &Facts, f: &mut Findings) {
    let address = plan.source.address();
    match (&plan.mode, &plan.selection) {
        (Mode::Move, Selection::Filter(_)) => {
            let estimate = facts.source.queue.state().and_then(depaged_heap_estimate);
            let heap = facts.source.node.as_ref().and_then(|n| n.heap);
            match (estimate, heap) {
                (Some(estimate), Some(heap)) if estimate * 100 > heap.headroom() * DEPAGE_HEAP_SHARE_PCT => f.refuse(
                    "source-paged-heap",
                    format!(
                        "The source address {address} is paging, and a move by filter makes the broker read its paged \
                         messages back into memory as it scans, keeping every one it passes over until it is \
                         consumed: up to about {} of heap for this queue, more than the source broker can spare \
                         ({} free of {}; the broker could run out of memory). Move the whole queue instead (nothing \
                         is kept), copy instead (a browse keeps nothing), let consumers drain the queue below its \
                         paging limit first, or give the broker more heap (-Xmx in etc/artemis.profile).",
                        mib(estimate),
                        mib(heap.headroom()),
                        mib(heap.max)
                    ),
                    None,
                ),
                (Some(estimate), Some(heap)) => f.ack(
                    "source-paged",
                    format!(
                        "The source address {address} is paging: a move by filter makes the broker read its paged \
                         messages back into memory as it scans and keep those it passes over until they are \
                         consumed: up to about {} of the source broker's heap ({} free of {}). Each refill of \
                         staging waits while the broker's heap is over {}% full.",
                        mib(estimate),
                        mib(heap.headroom()),
                        mib(heap.max),
                        SOURCE_HEAP_WAIT_PCT
                    ),
                    None,
                ),
                _ => {
                    f.ack(
                        "source-paged",
                        format!(
                            "The source address {address} is paging: a move by filter makes the broker read its paged \
                             messages back into memory as it scans and keep those it passes over until they are \
                             consumed. Each refill of staging waits while the broker's heap is over {}% full.",
                            SOURCE_HEAP_WAIT_PCT
                        ),
                        None,
                    );
                    f.unknown(
                        "source-heap-unknown",
                        "How much heap the source broker has free, or how big the source queue is, could not be \
                         read: whether the scan of its paged messages fits is not known (reading \
                         java.lang:type=Memory may need a role allowed in management.xml)."
                            .to_string(),
                    );
                }
            }
        }
        (Mode::Move, Selection::Ids(_)) => f.ack(
            "source-paged",
            format!(
                "The source address {address} is paging: the broker moves an id only while its message is in memory \
                 (moveMessage does not look in page files; the queue reads pages back up to its \
                 max-read-page-bytes), so ids of messages still paged are not taken and are counted as such."
            ),
            None,
        ),
        _ => f.ack(
            "source-paged",
            format!(
                "The source address {address} is paging: the copy's browse reads the page files back through the \
                 broker's page cache (disk reads while the run lasts; nothing is kept in memory)."
            ),
            None,
        ),
    }
}

fn check_target(plan: &Plan, facts: &Facts, settings: &PreviewSettings, count: Option<i64>, f: &mut Findings) {
    let relay = !plan.same_node() || plan.mode == Mode::Copy;
    let Some(node) = check_node("target", &plan.target.node, &facts.target, relay, f) else {
        return;
    };
    let q = &facts.target.queue;
    let address = plan.target.address();
    match facts.target_is_source_of_active_run {
        Some(true) => f.refuse(
            "target-in-active-run",
            format!(
                "The target queue {} is the source of another active run: the two runs would pass messages back \
                 and forth.",
                plan.target.display()
            ),
            None,
        ),
        Some(false) => {}
        None => f.unknown(
            "target-runs-unknown",
            "Whether the target queue is the source of an active run could not be read.".into(),
        ),
    }

    let Some(settings_now) = &q.settings else {
        f.unknown(
            "address-settings-unknown",
            format!("The address settings of {address} on the target could not be read."),
        );
        check_queue(plan, q, None, settings, count, f);
        check_disk(plan, node, settings, f);
        check_duplicate_cache(plan, node, None, facts.runs_into_target_address, settings, f);
        return;
    };
    check_queue(plan, q, Some(settings_now), settings, count, f);
    check_full_policy(plan, q, settings_now, settings, count, facts, f);
    check_disk(plan, node, settings, f);
    check_duplicate_cache(plan, node, Some(settings_now), facts.runs_into_target_address, settings, f);
    check_expiry(address, settings_now, f);
}

fn check_queue(
    plan: &Plan,
    q: &QueueFacts,
    address_settings: Option<&AddressSettings>,
    _settings: &PreviewSettings,
    count: Option<i64>,
    f: &mut Findings,
) {
    let name = plan.target.display();
    let state = match &q.queue {
        None => {
            f.unknown("target-queue-unknown", format!("Whether the target queue {name} exists could not be read."));
            return;
        }
        Some(None) => {
            match address_settings.map(|s| s.auto_create_queues) {
                Some(false) => f.refuse(
                    "target-queue-missing",
                    format!(
                        "The target queue {name} does not exist, and the broker does not create queues automatically."
                    ),
                    Some(address_setting(plan.target.address(), "<auto-create-queues>true</auto-create-queues>")),
                ),
                // Never left to auto-create: a send to a missing queue through an FQQN is dropped silently.
                Some(true) => f.ack(
                    "target-queue-created",
                    format!(
                        "The target queue {name} does not exist; the run will create it (durable, anycast, no filter)."
                    ),
                    None,
                ),
                None => f.unknown(
                    "target-queue-missing-unknown",
                    format!(
                        "The target queue {name} does not exist, and whether the broker may create it is not known."
                    ),
                ),
            }
            return;
        }
        Some(Some(state)) => state,
    };
    if internal(state) {
        f.refuse("internal-queue", format!("The target queue {name} is internal to the broker."), None);
    }
    match &state.filter {
        Some(Some(filter)) => f.refuse(
            "target-filtered",
            format!("The target queue {name} has the filter `{filter}`: messages that do not match it would be dropped silently."),
            None,
        ),
        Some(None) => {}
        None => f.unknown("target-filter-unknown", format!("Whether the target queue {name} has a filter could not be read.")),
    }
    match state.enabled {
        Some(false) => f.refuse(
            "target-disabled",
            format!("The target queue {name} is disabled: the broker drops every message routed to it."),
            None,
        ),
        Some(true) => {}
        None => f.unknown(
            "target-enabled-unknown",
            format!("Whether the target queue {name} is enabled could not be read."),
        ),
    }
    match state.purge_on_no_consumers {
        Some(true) => f.refuse(
            "target-purge-on-no-consumers",
            format!(
                "The target queue {name} purges its messages when it has no consumer: delivered messages could vanish."
            ),
            None,
        ),
        Some(false) => {}
        None => f.unknown(
            "target-purge-unknown",
            format!("Whether the target queue {name} purges on no consumers could not be read."),
        ),
    }
    match state.last_value {
        Some(true) => f.ack(
            "last-value",
            format!("The target queue {name} is a last-value queue: messages with the same key replace each other."),
            None,
        ),
        Some(false) => {}
        None => f.unknown(
            "last-value-unknown",
            format!("Whether the target queue {name} is a last-value queue could not be read."),
        ),
    }
    match state.ring_size {
        // Artemis takes only -1 as "not a ring" (`QueueImpl`: `ringSize != -1`); a ring of 0 keeps (almost) nothing.
        Some(ring) if ring >= 0 => match (count, state.message_count) {
            (Some(n), _) if n > ring => f.refuse(
                "ring-too-small",
                format!("The target queue {name} is a ring of {ring} messages, smaller than the {n} selected: the oldest would be pushed out."),
                None,
            ),
            (Some(n), Some(depth)) if n + depth > ring => f.ack(
                "ring-pushes-out",
                format!(
                    "The target queue {name} is a ring of {ring} messages holding {depth}: delivering {n} pushes out \
                     {} of the messages already there.",
                    n + depth - ring
                ),
                None,
            ),
            (Some(_), Some(_)) => {}
            _ => f.unknown("ring-unknown", format!("The target queue {name} is a ring of {ring} messages, and whether the selection fits could not be worked out.")),
        },
        Some(_) => {}
        None => f.unknown("ring-size-unknown", format!("Whether the target queue {name} is a ring queue could not be read.")),
    }
    if let (Some(s), Some(0)) = (address_settings, state.consumer_count) {
        if s.redistribution_delay >= 0 {
            f.ack(
                "may-redistribute",
                format!(
                    "The target queue {name} has no consumer and redistribution is on (delay {} ms): the cluster may \
                     move the delivered messages on to another node that has a consumer.",
                    s.redistribution_delay
                ),
                None,
            );
        }
    } else if state.consumer_count.is_none() {
        f.unknown("consumers-unknown", format!("How many consumers the target queue {name} has could not be read."));
    }
}

fn check_full_policy(
    plan: &Plan,
    q: &QueueFacts,
    s: &AddressSettings,
    settings: &PreviewSettings,
    count: Option<i64>,
    facts: &Facts,
    f: &mut Findings,
) {
    let address = plan.target.address();
    match s.address_full_policy {
        FullPolicy::Drop => f.refuse(
            "address-full-drop",
            format!(
                "The target address {address} drops new messages silently when it is full (address-full-policy DROP)."
            ),
            Some(address_setting(address, "<address-full-policy>PAGE</address-full-policy>")),
        ),
        FullPolicy::Page => {
            // Artemis takes only a negative page limit as none (`PagingStoreImpl.applySetting`): 0 is the strictest.
            let limited = s.page_limit_bytes >= 0 || s.page_limit_messages >= 0;
            if limited && s.page_full_policy == Some(FullPolicy::Drop) {
                f.refuse(
                    "page-full-drop",
                    format!("The target address {address} pages up to a limit and then drops new messages silently (page-full-policy DROP)."),
                    Some(address_setting(address, "<page-full-policy>FAIL</page-full-policy>")),
                );
            }
        }
        FullPolicy::Fail | FullPolicy::Block => check_room(plan, q, s, settings, count, facts, f),
    }
}

/// Room under FAIL or BLOCK: bytes against `max-size-bytes`, messages against `max-size-messages`.
fn check_room(
    plan: &Plan,
    q: &QueueFacts,
    s: &AddressSettings,
    settings: &PreviewSettings,
    count: Option<i64>,
    facts: &Facts,
    f: &mut Findings,
) {
    let address = plan.target.address();
    let policy = s.address_full_policy.as_str();
    // Artemis takes only a negative max-size as no limit (`SizeAwareMetric`: enabled when `max >= 0`); 0 leaves no room.
    if s.max_size_bytes >= 0 {
        match (q.address_size, projected_bytes(facts, count)) {
            (Some(used), Some(bytes)) => {
                if bytes > s.max_size_bytes - used {
                    f.refuse(
                        "capacity-bytes",
                        format!(
                            "The target address {address} has room for {} more bytes (max-size-bytes {} under {policy}), \
                             less than the {bytes} bytes the selection needs.",
                            (s.max_size_bytes - used).max(0),
                            s.max_size_bytes
                        ),
                        Some(address_setting(address, &format!("<max-size-bytes>{}</max-size-bytes>", (used + bytes) * 2))),
                    );
                } else if (used + bytes) as i128 * 100 >= s.max_size_bytes as i128 * settings.capacity_threshold_pct as i128 {
                    f.ack(
                        "capacity-tight",
                        format!(
                            "After the transfer the target address {address} would be {}% full (max-size-bytes {} under \
                             {policy}); the run waits whenever it passes {}%.",
                            // max-size-bytes 0 is full from the first byte.
                            ((used + bytes) * 100).checked_div(s.max_size_bytes).unwrap_or(100),
                            s.max_size_bytes,
                            settings.capacity_threshold_pct
                        ),
                        None,
                    );
                }
            }
            _ => f.unknown(
                "capacity-unknown",
                format!("Whether the target address {address} has room (max-size-bytes {} under {policy}) could not be worked out.", s.max_size_bytes),
            ),
        }
    }
    if s.max_size_messages >= 0 {
        match (count, q.state().and_then(|st| st.message_count)) {
            (Some(n), Some(depth)) => {
                if n > s.max_size_messages - depth {
                    f.refuse(
                        "capacity-messages",
                        format!(
                            "The target address {address} has room for {} more messages (max-size-messages {} under \
                             {policy}), fewer than the {n} selected.",
                            (s.max_size_messages - depth).max(0),
                            s.max_size_messages
                        ),
                        Some(address_setting(address, &format!("<max-size-messages>{}</max-size-messages>", (depth + n) * 2))),
                    );
                } else if (depth + n) * 100 >= s.max_size_messages * settings.capacity_threshold_pct {
                    f.ack(
                        "capacity-tight",
                        format!(
                            "After the transfer the target address {address} would hold {} of at most {} messages; the \
                             run waits whenever it passes {}%.",
                            depth + n,
                            s.max_size_messages,
                            settings.capacity_threshold_pct
                        ),
                        None,
                    );
                }
            }
            // A missing queue holds nothing yet.
            (Some(n), None) if q.queue == Some(None) && n > s.max_size_messages => f.refuse(
                "capacity-messages",
                format!("The target address {address} holds at most {} messages, fewer than the {n} selected.", s.max_size_messages),
                Some(address_setting(address, &format!("<max-size-messages>{}</max-size-messages>", n * 2))),
            ),
            (Some(_), None) if q.queue == Some(None) => {}
            _ => f.unknown(
                "capacity-messages-unknown",
                format!("Whether the target address {address} has room for the selection (max-size-messages {}) could not be worked out.", s.max_size_messages),
            ),
        }
    }
}

fn check_disk(plan: &Plan, node: &NodeFacts, settings: &PreviewSettings, f: &mut Findings) {
    let name = &plan.target.node;
    match (node.broker.disk_store_usage, node.broker.max_disk_usage) {
        // -1 turns the broker's check off; it blocks only *above* max-disk-usage, which 100 never is; 0 blocks
        // every message (`FileStoreMonitor`: `usage > max / 100`).
        (_, Some(max)) if !(0..100).contains(&max) => {}
        (Some(usage), Some(max)) => {
            let pct = usage * 100.0;
            if pct >= max as f64 {
                f.refuse(
                    "disk-full",
                    format!("The target node {name}'s journal disk is {pct:.0}% full, at or over its max-disk-usage of {max}%: it blocks or refuses new messages."),
                    Some(format!("<max-disk-usage>{}</max-disk-usage>", (max + 5).min(99))),
                );
            } else if pct >= max as f64 * settings.capacity_threshold_pct as f64 / 100.0 {
                f.ack(
                    "disk-tight",
                    format!("The target node {name}'s journal disk is {pct:.0}% full, near its max-disk-usage of {max}%; the run waits if it gets closer."),
                    None,
                );
            }
        }
        _ => f.unknown("disk-unknown", format!("How full the target node {name}'s journal disk is could not be read.")),
    }
}

fn check_duplicate_cache(
    plan: &Plan,
    node: &NodeFacts,
    s: Option<&AddressSettings>,
    other_runs: Option<i64>,
    settings: &PreviewSettings,
    f: &mut Findings,
) {
    let address = plan.target.address();
    let snippet = || {
        Some(format!(
            "<id-cache-size>{}</id-cache-size>\n<persist-id-cache>true</persist-id-cache>",
            (settings.batch_size * 10).max(20_000)
        ))
    };
    match node.broker.persist_id_cache {
        Some(false) => f.ack(
            "duplicate-cache-not-persisted",
            format!("The target node {}'s duplicate-id cache is not persisted: after a broker restart a retried batch could be delivered twice.", plan.target.node),
            snippet(),
        ),
        Some(true) => {}
        None => f.unknown("duplicate-cache-unknown", "Whether the target's duplicate-id cache is persisted could not be read.".into()),
    }
    // The address setting overrides the broker-wide size (per-address id-cache-size, 2.31+).
    match crate::transfer::facts::duplicate_cache_size(&node.broker, s) {
        Some(size) if size <= 0 => f.ack(
            "duplicate-cache-off",
            format!("Duplicate detection is off for the target address {address} (id-cache-size {size}): a retried batch could be delivered twice."),
            snippet(),
        ),
        Some(size) if size < 10 * settings.batch_size => f.ack(
            "duplicate-cache-small",
            format!(
                "The target address {address} remembers only {size} duplicate ids, fewer than 10 × the batch size of {}: \
                 a batch retried late could be delivered twice.",
                settings.batch_size
            ),
            Some(address_setting(address, &format!("<id-cache-size>{}</id-cache-size>", 10 * settings.batch_size))),
        ),
        Some(size) => check_shared_cache(address, size, other_runs, settings, f),
        None => f.unknown("duplicate-cache-size-unknown", format!("How many duplicate ids the target address {address} remembers could not be read.")),
    }
}

/// Other active runs into the target address share its duplicate-id cache (ADR 0010): each waits while its
/// batch could push another's batch in doubt out of it, so the cache should hold 10 batches for every run.
fn check_shared_cache(address: &str, size: i64, other_runs: Option<i64>, settings: &PreviewSettings, f: &mut Findings) {
    match other_runs {
        Some(0) => {}
        Some(others) => {
            let wanted = 10 * settings.batch_size * (others + 1);
            if size < wanted {
                f.ack(
                    "duplicate-cache-shared",
                    format!(
                        "{others} other active run(s) write into the target address {address}, sharing its {size} \
                         duplicate ids with this run (fewer than 10 batches of {} for each): the runs will wait \
                         for each other's batches in doubt, and run slower.",
                        settings.batch_size
                    ),
                    Some(address_setting(address, &format!("<id-cache-size>{wanted}</id-cache-size>"))),
                );
            }
        }
        None => f.unknown(
            "target-address-runs-unknown",
            format!("Whether other active runs write into the target address {address} could not be read."),
        ),
    }
}

fn check_expiry(address: &str, s: &AddressSettings, f: &mut Findings) {
    // Artemis takes -1 as unset; 0 is the harshest value: a message without an expiration of its own expires at once
    // (`PostOfficeImpl.applyExpiryDelay`; message-expiry.adoc warns of max-expiry-delay 0).
    if s.expiry_delay >= 0 || s.min_expiry_delay >= 0 || s.max_expiry_delay >= 0 {
        f.ack(
            "target-expiry-delay",
            format!(
                "The target address {address} gives messages an expiry (expiry-delay {}, min {}, max {} ms): delivered \
                 messages may expire there.",
                s.expiry_delay, s.min_expiry_delay, s.max_expiry_delay
            ),
            Some(address_setting(address, "<expiry-delay>-1</expiry-delay>")),
        );
    }
}

#[cfg(test)]
#[path = "preview_tests.rs"]
mod tests;
