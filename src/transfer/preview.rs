//! The preview: every finding about a plan, computed by a **pure function** of the facts.
//!
//! Findings have three kinds (SPEC §3): **refused** (the run will not start), **needs acknowledgement** (it runs
//! only if every such code is acknowledged) and **could not be checked** (a fact is unknown: stated as unknown,
//! never as a pass). Each has a stable code (listed in `docs/findings.md`), plain words, and — where a
//! `broker.xml` setting would fix it — the exact snippet.

use serde::Serialize;

use super::facts::{EndFacts, Facts, NodeFacts};
use super::plan::{Mode, Plan, Selection, STAGING_PREFIX, WHOLE_QUEUE_RULE};
use super::proof::SourceCount;
use super::target_rules::{self, address_setting, End, Judged, Load, Verdict};
use crate::broker::count::{CountLimit, Counted};
use crate::broker::jolokia::{AddressSettings, QueueState};

pub use super::target_rules::Kind;

/// A move by filter from a paging source refills staging only while the source broker's heap is below this
/// share of its maximum (see [`check_paged_source`]).
pub const SOURCE_HEAP_WAIT_PCT: i64 = 90;

/// The oldest Artemis the product supports.
pub const OLDEST_SUPPORTED: (u32, u32) = (2, 37);

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
    /// Where the preview stops counting a filter's selection (a browse of the source reads every matching
    /// message): past it the size is "more than N" (ADR 0015).
    pub count_limit: CountLimit,
}

/// Where a preview stops counting a filter's selection by default: 100,000 matching messages or 20 seconds,
/// whichever comes first (measured in ADR 0015).
pub const DEFAULT_COUNT_LIMIT: CountLimit = CountLimit { messages: 100_000, time: std::time::Duration::from_secs(20) };

impl Default for PreviewSettings {
    fn default() -> Self {
        PreviewSettings {
            batch_size: 200,
            capacity_threshold_pct: 90,
            safety_cap: 1000,
            count_limit: DEFAULT_COUNT_LIMIT,
        }
    }
}

impl PreviewSettings {
    /// The preview's settings as the runtime settings have them.
    pub fn from_settings(current: &crate::jobs::settings::Settings) -> PreviewSettings {
        PreviewSettings {
            batch_size: i64::from(current.batch_size),
            capacity_threshold_pct: i64::from(current.capacity_threshold_pct),
            safety_cap: i64::try_from(current.safety_cap).unwrap_or(i64::MAX),
            count_limit: DEFAULT_COUNT_LIMIT,
        }
    }
}

/// What the preview shows.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Preview {
    /// Every finding, refusals first.
    pub findings: Vec<Finding>,
    /// How many messages are selected: exact for ids, a whole queue and a filter counted to its end; `None` when
    /// it is not known (see `selection_at_least`).
    pub selection_size: Option<i64>,
    /// For a filter whose count stopped at the preview's limit: at least this many are selected ("more than N").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selection_at_least: Option<i64>,
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
    /// A target rule's verdict, as the finding of the kind the rule table gives the preview.
    fn verdict(&mut self, v: Verdict) {
        self.push(v.condition.preview, v.condition.code, v.words, v.snippet);
    }
    fn verdicts(&mut self, vs: impl IntoIterator<Item = Verdict>) {
        vs.into_iter().for_each(|v| self.verdict(v));
    }
}

/// Evaluates every rule. Pure: the same plan, facts and settings always give the same preview.
pub fn preview(plan: &Plan, facts: &Facts, settings: &PreviewSettings) -> Preview {
    let mut f = Findings(Vec::new());
    let size = selection_size(plan, facts);
    let selection_size = size.exact();

    check_names(plan, &mut f);
    if plan.target_is_source() {
        f.refuse("same-queue", format!("The target is the source queue itself ({}).", plan.source.display()), None);
    }
    if let Some(refusal) = filter_refusal(&plan.selection) {
        f.0.push(refusal);
    }
    if let Some(error) = &facts.filter_error {
        f.refuse("invalid-filter", format!("The source broker cannot use the filter: {error}."), None);
    }
    check_source(plan, facts, &mut f);
    check_target(plan, facts, settings, selection_size, &mut f);

    if let Some(words) = size.unknown_words(&settings.count_limit) {
        f.unknown("selection-size", words);
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
    findings.sort_by_key(|x| x.kind);
    let over_cap = selection_size.is_none_or(|n| n > settings.safety_cap);
    Preview {
        findings,
        selection_size,
        selection_at_least: size.at_least(),
        projected_bytes: projected_bytes(facts, selection_size),
        source_count_at_t0: source_count(facts),
        notes: notes(plan, facts, size),
        needs_typed_confirmation: plan.mode == Mode::Move || over_cap,
        needs_cap_override: over_cap,
    }
}

/// The `invalid-filter` refusal of a filter that cannot be read as the broker's selector grammar (or that the
/// product does not take: `XPATH`, a `--` comment without a line break), in words that point at the position;
/// `None` for a filter that can, and for ids or the whole queue. The run reads the filter with the same parser
/// ([`Plan::frozen_selector`]).
pub fn filter_refusal(selection: &Selection) -> Option<Finding> {
    let Selection::Filter(filter) = selection else {
        return None;
    };
    let e = super::plan::parse_filter(filter).err()?;
    // "The filter cannot be read at position 7: …", as a sentence.
    let words = format!("{e}.");
    let words = words[..1].to_uppercase() + &words[1..];
    Some(Finding { kind: Kind::Refused, code: "invalid-filter", words, snippet: None })
}

/// Exact for ids and a whole queue; for a filter, the broker's count only where it scans the whole queue.
/// How many messages a selection holds, as the preview knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Size {
    /// Exactly this many.
    Exact(i64),
    /// A filter's count stopped at the preview's limit with this many.
    AtLeast(i64),
    /// Not counted: the source queue, or the filter, could not be read or was refused (other findings say so).
    Unread,
    /// A filter not counted by a browse (the source's Core acceptor did not answer), and not by the broker either:
    /// its own filtered count did not answer, or (`deeper_than_page`) covers only one browse page of a deeper queue.
    NotCounted {
        /// The queue is deeper than the broker's filtered count scans.
        deeper_than_page: bool,
    },
}

impl Size {
    fn exact(self) -> Option<i64> {
        match self {
            Size::Exact(n) => Some(n),
            _ => None,
        }
    }

    fn at_least(self) -> Option<i64> {
        match self {
            Size::AtLeast(n) => Some(n),
            _ => None,
        }
    }

    /// The `selection-size` finding's words, when the size is unknown for a reason no other finding gives.
    fn unknown_words(self, limit: &CountLimit) -> Option<String> {
        match self {
            Size::Exact(_) | Size::Unread => None,
            Size::AtLeast(n) => Some(format!(
                "More than {n} messages match the filter: the preview stops counting at {} messages or {} seconds \
                 (it reads each matching message to count it). The run needs an explicit override of the safety \
                 cap, and its end is proven by a full pass over the source finding nothing left that the frozen \
                 filter matches, not by the count.",
                limit.messages,
                limit.time.as_secs()
            )),
            Size::NotCounted { deeper_than_page } => Some(format!(
                "The number of selected messages is not known: the source's Core acceptor did not answer, so the \
                 filter could not be counted by reading the queue, and {}. The run needs an explicit override of the \
                 safety cap, and its end is proven by a full pass over the source finding nothing left that the \
                 frozen filter matches.",
                if deeper_than_page {
                    "the broker's own filtered count covers only management-browse-page-size messages of a deeper \
                     queue"
                } else {
                    "the broker's own filtered count did not answer"
                }
            )),
        }
    }
}

fn selection_size(plan: &Plan, facts: &Facts) -> Size {
    let state = facts.source.queue.state();
    match &plan.selection {
        Selection::Ids(ids) => Size::Exact(ids.len() as i64),
        Selection::All => state.and_then(|s| s.message_count).map_or(Size::Unread, Size::Exact),
        Selection::Filter(_) if facts.filter_error.is_some() => Size::Unread,
        Selection::Filter(_) => match facts.browsed {
            Some(Counted::Exact(n)) => Size::Exact(n as i64),
            Some(Counted::AtLeast(n)) => Size::AtLeast(n as i64),
            None => state.map_or(Size::Unread, |s| page_count(facts, s)),
        },
    }
}

/// The broker's own filtered count, where it is exact: on a queue no deeper than the page it scans.
fn page_count(facts: &Facts, state: &QueueState) -> Size {
    let page = facts.source.queue.settings.as_ref().map(|s| s.management_browse_page_size);
    let within_page = state.message_count.zip(page).map(|(depth, page)| depth <= page);
    match (facts.filtered_count, within_page) {
        (Some(n), Some(true)) => Size::Exact(n),
        (_, within) => Size::NotCounted { deeper_than_page: within == Some(false) },
    }
}

/// The source queue's counters and its broker's start, as read at `t0`.
fn source_count(facts: &Facts) -> Option<SourceCount> {
    SourceCount::read(facts.source.queue.state()?, &facts.source.node.as_ref()?.broker)
}

/// `count × (source PersistentSize ÷ source MessageCount)`.
fn projected_bytes(facts: &Facts, count: Option<i64>) -> Option<i64> {
    if count == Some(0) {
        return Some(0);
    }
    let state = facts.source.queue.state()?;
    let (size, depth) = (state.persistent_size?, state.message_count?);
    if depth <= 0 {
        return None;
    }
    Some(((count? as i128 * size as i128) / depth as i128) as i64)
}

fn notes(plan: &Plan, facts: &Facts, size: Size) -> Vec<String> {
    let mut notes = vec![
        "Messages published over AMQP, MQTT, STOMP or OpenWire arrive in their Core form.".to_string(),
        "The selection is frozen at t0 by each message's timestamp, which the producer's clock set: a producer \
         with a fast clock can put a message outside the selection."
            .to_string(),
    ];
    if plan.selection == Selection::All {
        notes.push(WHOLE_QUEUE_RULE.into());
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
    if size == Size::Exact(0) {
        notes.push("Nothing is selected at t0: the run would take nothing, and end at once.".into());
    }
    notes.push(end_proof_note(size));
    notes
}

/// How the run's end will be proven (`proof`), given what the preview counted.
fn end_proof_note(size: Size) -> String {
    let by_count = "The run's end is proven against the source broker's counts: what it delivered, dead-lettered and \
                    did not take must account for the messages counted at t0, less what consumers took meanwhile; \
                    otherwise it takes another pass and then ends Partial, saying what differs.";
    let by_exhaustion = "The selection is not counted, so the run's end is proven by exhaustion: a full pass over the \
                         source must find nothing left that the frozen selection matches, and every message the run \
                         took must be delivered, dead-lettered or reported.";
    let neither = "An end that neither the counts nor such a pass can prove ends Unproven, never Succeeded.";
    match size {
        Size::Exact(_) => format!(
            "{by_count} Where the source broker restarts during the run (its counters begin \
                                   again), the end is proven by exhaustion instead: a full pass over the source must \
                                   find nothing left that the frozen selection matches. {neither}"
        ),
        Size::AtLeast(_) | Size::NotCounted { .. } | Size::Unread => format!("{by_exhaustion} {neither}"),
    }
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
    end: End,
    name: &str,
    facts: &'a EndFacts,
    needs_core: bool,
    f: &mut Findings,
) -> Option<&'a NodeFacts> {
    let node = match target_rules::node_answered(end, name, facts) {
        Ok(node) => node,
        Err(unreachable) => {
            f.verdict(unreachable);
            return None;
        }
    };
    check_version(end, name, node, f);
    f.verdicts(target_rules::node_live(end, name, node));
    if needs_core {
        check_core(end, name, node, f);
    }
    Some(node)
}

fn check_version(end: End, name: &str, node: &NodeFacts, f: &mut Findings) {
    let source = end == End::Source;
    let end = end.word();
    match node.broker.version.as_deref().and_then(version_of) {
        Some(v) if v < OLDEST_SUPPORTED => f.refuse(
            if source { "source-too-old" } else { "target-too-old" },
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
            if source { "source-version-unknown" } else { "target-version-unknown" },
            format!("The {end} node {name} did not say which Artemis version it runs."),
        ),
    }
}

fn check_core(end: End, name: &str, node: &NodeFacts, f: &mut Findings) {
    let source = end == End::Source;
    let end = end.word();
    match node.core_acceptor {
        Some(true) => {}
        Some(false) => f.refuse(
            if source { "source-no-core" } else { "target-no-core" },
            format!("The {end} node {name} has no Core acceptor the relay can connect to."),
            Some("<acceptor name=\"artemis\">tcp://0.0.0.0:61616?protocols=CORE</acceptor>".into()),
        ),
        None => f.unknown(
            if source { "source-core-unknown" } else { "target-core-unknown" },
            format!("Whether the {end} node {name} has a Core acceptor is not known."),
        ),
    }
}

fn internal(state: &QueueState) -> bool {
    state.internal == Some(true)
}

fn check_source(plan: &Plan, facts: &Facts, f: &mut Findings) {
    let relay = !plan.same_node() || plan.mode == Mode::Copy;
    if check_node(End::Source, &plan.source.node, &facts.source, relay, f).is_none() {
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

/// The target's conditions (`target_rules`, judged against the whole selection), then what only the preview
/// judges: the node's version and Core acceptor, other runs, and the duplicate-id cache.
fn check_target(plan: &Plan, facts: &Facts, settings: &PreviewSettings, count: Option<i64>, f: &mut Findings) {
    let load = Load { messages: count, bytes: projected_bytes(facts, count), of: Judged::Selection };
    f.verdicts(target_rules::judge(&plan.target, &facts.target, &load, settings.capacity_threshold_pct));
    let Some(node) = &facts.target.node else {
        return;
    };
    let name = &plan.target.node;
    check_version(End::Target, name, node, f);
    if !plan.same_node() || plan.mode == Mode::Copy {
        check_core(End::Target, name, node, f);
    }
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
    let address_settings = facts.target.queue.settings.as_ref();
    check_duplicate_cache(plan, node, address_settings, facts.runs_into_target_address, settings, f);
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

#[cfg(test)]
#[path = "preview_tests.rs"]
mod tests;
