//! The conditions of a transfer's target, each defined once: a small pure function of the facts read from the
//! target (`facts.rs`) that returns a [`Verdict`] naming its [`Condition`] (the finding's stable code,
//! `docs/findings.md`) and saying what it found in plain words.
//!
//! Two edges judge the target. The **preview** judges it once before a run, against the whole selection, and
//! lists every verdict as a finding. The relay's **guard** judges it before every batch of a run under way,
//! against that batch, and ends in one outcome: fail the run, wait for room, try again later, or go. Where the two
//! legitimately differ, the difference is a column of the table below, not a second rule: a target short of room
//! refuses a selection but makes a batch wait; a missing queue is created by a run at its start, so one missing
//! mid-run was deleted; last-value, ring and redistribution are acknowledged once, in the preview. What could not
//! be read is unknown at both edges, never a pass.

use serde::Serialize;

use super::facts::{EndFacts, NodeFacts, QueueFacts};
use super::plan::QueueRef;
use crate::broker::jolokia::{AddressSettings, FullPolicy, QueueState};

/// How serious a finding of the preview is; findings are shown in this order (refusals first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The run will not start.
    Refused,
    /// The run starts only if this code is acknowledged.
    NeedsAck,
    /// A fact could not be read: unknown, never a pass.
    Unknown,
}

/// What the guard does about a condition found before a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// The target is no longer acceptable: the run fails before a commit that would lose messages.
    Refuse,
    /// The target is short of room: the run waits for it.
    Wait,
    /// A fact could not be read, or the node is changing hands: the batch is tried again later.
    Unknown,
    /// Judged once, before the run: what the operator acknowledged does not stop a batch.
    PreviewOnly,
}

/// One target condition: its stable code and what each edge makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Condition {
    /// The finding's code (`docs/findings.md`); API and CLI clients depend on it.
    pub code: &'static str,
    /// The preview's kind of finding.
    pub preview: Kind,
    /// The guard's response before a batch.
    pub guard: Response,
}

impl Condition {
    const fn new(code: &'static str, preview: Kind, guard: Response) -> Condition {
        Condition { code, preview, guard }
    }
    /// Refused before a run and fatal during it.
    const fn unacceptable(code: &'static str) -> Condition {
        Condition::new(code, Kind::Refused, Response::Refuse)
    }
    /// Unknown at both edges.
    const fn unknown(code: &'static str) -> Condition {
        Condition::new(code, Kind::Unknown, Response::Unknown)
    }
}

/// The table: every condition of the target, with what the preview and the guard make of it.
pub mod table {
    use super::Condition;
    use super::Kind::{NeedsAck, Refused, Unknown};
    use super::Response::{PreviewOnly, Refuse, Wait};

    // The target node. Not live mid-run is a failover under way: the next batch re-resolves the live node.
    pub const TARGET_UNREACHABLE: Condition = Condition::unknown("target-unreachable");
    pub const TARGET_BACKUP: Condition = Condition::new("target-backup", Refused, super::Response::Unknown);
    pub const TARGET_NOT_LIVE: Condition = Condition::new("target-not-live", Refused, super::Response::Unknown);
    pub const TARGET_HA_UNKNOWN: Condition = Condition::unknown("target-ha-unknown");
    // The source node, as the preview judges it (the relay re-resolves the source by its NodeID instead).
    pub const SOURCE_UNREACHABLE: Condition = Condition::new("source-unreachable", Unknown, PreviewOnly);
    pub const SOURCE_BACKUP: Condition = Condition::new("source-backup", Refused, PreviewOnly);
    pub const SOURCE_NOT_LIVE: Condition = Condition::new("source-not-live", Refused, PreviewOnly);
    pub const SOURCE_HA_UNKNOWN: Condition = Condition::new("source-ha-unknown", Unknown, PreviewOnly);

    // Whether the target queue exists. A run creates a missing one at its start, so one missing mid-run was deleted.
    pub const TARGET_QUEUE_UNKNOWN: Condition = Condition::unknown("target-queue-unknown");
    pub const TARGET_QUEUE_MISSING: Condition = Condition::unacceptable("target-queue-missing");
    pub const TARGET_QUEUE_CREATED: Condition = Condition::new("target-queue-created", NeedsAck, Refuse);
    pub const TARGET_QUEUE_MISSING_UNKNOWN: Condition = Condition::unknown("target-queue-missing-unknown");

    // The target queue: what makes it drop or lose what is sent to it.
    pub const INTERNAL_QUEUE: Condition = Condition::unacceptable("internal-queue");
    pub const TARGET_FILTERED: Condition = Condition::unacceptable("target-filtered");
    pub const TARGET_FILTER_UNKNOWN: Condition = Condition::unknown("target-filter-unknown");
    pub const TARGET_DISABLED: Condition = Condition::unacceptable("target-disabled");
    pub const TARGET_ENABLED_UNKNOWN: Condition = Condition::unknown("target-enabled-unknown");
    pub const TARGET_PURGES: Condition = Condition::unacceptable("target-purge-on-no-consumers");
    pub const TARGET_PURGE_UNKNOWN: Condition = Condition::unknown("target-purge-unknown");

    // The target queue: what the operator acknowledges once, before the run.
    pub const LAST_VALUE: Condition = Condition::new("last-value", NeedsAck, PreviewOnly);
    pub const LAST_VALUE_UNKNOWN: Condition = Condition::new("last-value-unknown", Unknown, PreviewOnly);
    pub const RING_TOO_SMALL: Condition = Condition::new("ring-too-small", Refused, PreviewOnly);
    pub const RING_PUSHES_OUT: Condition = Condition::new("ring-pushes-out", NeedsAck, PreviewOnly);
    pub const RING_UNKNOWN: Condition = Condition::new("ring-unknown", Unknown, PreviewOnly);
    pub const RING_SIZE_UNKNOWN: Condition = Condition::new("ring-size-unknown", Unknown, PreviewOnly);
    pub const MAY_REDISTRIBUTE: Condition = Condition::new("may-redistribute", NeedsAck, PreviewOnly);
    pub const CONSUMERS_UNKNOWN: Condition = Condition::new("consumers-unknown", Unknown, PreviewOnly);
    pub const TARGET_EXPIRY_DELAY: Condition = Condition::new("target-expiry-delay", NeedsAck, PreviewOnly);

    // The target address: dropping when full, and room under FAIL or BLOCK. A selection that cannot fit is
    // refused; a batch that cannot fit waits for room.
    pub const ADDRESS_SETTINGS_UNKNOWN: Condition = Condition::unknown("address-settings-unknown");
    pub const ADDRESS_FULL_DROP: Condition = Condition::unacceptable("address-full-drop");
    pub const PAGE_FULL_DROP: Condition = Condition::unacceptable("page-full-drop");
    pub const CAPACITY_BYTES: Condition = Condition::new("capacity-bytes", Refused, Wait);
    pub const CAPACITY_MESSAGES: Condition = Condition::new("capacity-messages", Refused, Wait);
    pub const CAPACITY_TIGHT: Condition = Condition::new("capacity-tight", NeedsAck, Wait);
    pub const CAPACITY_UNKNOWN: Condition = Condition::unknown("capacity-unknown");
    pub const CAPACITY_MESSAGES_UNKNOWN: Condition = Condition::unknown("capacity-messages-unknown");

    // The target node's journal disk.
    pub const DISK_FULL: Condition = Condition::new("disk-full", Refused, Wait);
    pub const DISK_TIGHT: Condition = Condition::new("disk-tight", NeedsAck, Wait);
    pub const DISK_UNKNOWN: Condition = Condition::unknown("disk-unknown");

    /// Every row, for the tests that hold the table to its promises.
    pub const ALL: &[Condition] = &[
        TARGET_UNREACHABLE,
        TARGET_BACKUP,
        TARGET_NOT_LIVE,
        TARGET_HA_UNKNOWN,
        SOURCE_UNREACHABLE,
        SOURCE_BACKUP,
        SOURCE_NOT_LIVE,
        SOURCE_HA_UNKNOWN,
        TARGET_QUEUE_UNKNOWN,
        TARGET_QUEUE_MISSING,
        TARGET_QUEUE_CREATED,
        TARGET_QUEUE_MISSING_UNKNOWN,
        INTERNAL_QUEUE,
        TARGET_FILTERED,
        TARGET_FILTER_UNKNOWN,
        TARGET_DISABLED,
        TARGET_ENABLED_UNKNOWN,
        TARGET_PURGES,
        TARGET_PURGE_UNKNOWN,
        LAST_VALUE,
        LAST_VALUE_UNKNOWN,
        RING_TOO_SMALL,
        RING_PUSHES_OUT,
        RING_UNKNOWN,
        RING_SIZE_UNKNOWN,
        MAY_REDISTRIBUTE,
        CONSUMERS_UNKNOWN,
        TARGET_EXPIRY_DELAY,
        ADDRESS_SETTINGS_UNKNOWN,
        ADDRESS_FULL_DROP,
        PAGE_FULL_DROP,
        CAPACITY_BYTES,
        CAPACITY_MESSAGES,
        CAPACITY_TIGHT,
        CAPACITY_UNKNOWN,
        CAPACITY_MESSAGES_UNKNOWN,
        DISK_FULL,
        DISK_TIGHT,
        DISK_UNKNOWN,
    ];
}

use table::*;

/// What a rule found: the condition, in plain words, with the `broker.xml` snippet that would fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Which condition, with what each edge makes of it.
    pub condition: Condition,
    /// What was found, in plain words (one sentence or two, ending with a full stop).
    pub words: String,
    /// The `broker.xml` snippet that would fix it, where one exists.
    pub snippet: Option<String>,
}

impl Verdict {
    fn new(condition: Condition, words: String) -> Verdict {
        Verdict { condition, words, snippet: None }
    }
    fn fixed_by(mut self, snippet: String) -> Verdict {
        self.snippet = Some(snippet);
        self
    }
}

/// An `<address-setting>` for `address` holding `body`. The address is the broker's name, which may hold any
/// character, so it is escaped: the snippet must paste into broker.xml as the setting it shows.
pub fn address_setting(address: &str, body: &str) -> String {
    format!("<address-setting match=\"{}\">\n   {body}\n</address-setting>", xml_attribute(address))
}

/// `text` as an XML attribute value between double quotes: `& < > " '` escaped.
fn xml_attribute(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Which end of the transfer a node rule judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Where the messages come from.
    Source,
    /// Where they go.
    Target,
}

impl End {
    /// "source" or "target".
    pub fn word(self) -> &'static str {
        match self {
            End::Source => "source",
            End::Target => "target",
        }
    }
}

/// What the target is judged against: the whole selection (the preview) or the next batch (the guard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Load {
    /// How many messages it adds (`None`: unknown).
    pub messages: Option<i64>,
    /// How many bytes it adds (`None`: unknown).
    pub bytes: Option<i64>,
    /// Whether it is the selection or one batch, for the words.
    pub of: Judged,
}

/// What a [`Load`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// The whole selection, before a run.
    Selection,
    /// The next batch of a run under way.
    Batch,
}

impl Load {
    /// When it is delivered, in words.
    fn after(&self) -> &'static str {
        match self.of {
            Judged::Selection => "After the transfer",
            Judged::Batch => "After the next batch",
        }
    }
    /// What it is, in words.
    fn noun(&self) -> &'static str {
        match self.of {
            Judged::Selection => "the selection",
            Judged::Batch => "the next batch",
        }
    }
    /// Its bytes, in words.
    fn bytes_needed(&self, bytes: i64) -> String {
        format!("the {bytes} bytes {} needs", self.noun())
    }
    /// Its messages, in words.
    fn messages_taken(&self, messages: i64) -> String {
        match self.of {
            Judged::Selection => format!("the {messages} selected"),
            Judged::Batch => format!("the {messages} of the next batch"),
        }
    }
}

/// The end's node, when it answered; `end`'s unreachable condition when it did not (nothing else about it can be
/// judged then).
pub fn node_answered<'a>(end: End, name: &str, facts: &'a EndFacts) -> Result<&'a NodeFacts, Verdict> {
    let unreachable = if end == End::Source { SOURCE_UNREACHABLE } else { TARGET_UNREACHABLE };
    facts.node.as_ref().ok_or_else(|| {
        Verdict::new(
            unreachable,
            format!("The {} node {name} did not answer; nothing about it could be checked.", end.word()),
        )
    })
}

/// The node serves clients: a passive backup does not until its primary fails, and one not active does not.
pub fn node_live(end: End, name: &str, node: &NodeFacts) -> Option<Verdict> {
    let (backup, not_live, unknown) = match end {
        End::Source => (SOURCE_BACKUP, SOURCE_NOT_LIVE, SOURCE_HA_UNKNOWN),
        End::Target => (TARGET_BACKUP, TARGET_NOT_LIVE, TARGET_HA_UNKNOWN),
    };
    let end = end.word();
    match (node.broker.backup, node.broker.active) {
        (Some(true), Some(false) | None) => Some(Verdict::new(
            backup,
            format!("The {end} node {name} is a passive backup: it serves no clients until its primary fails."),
        )),
        (_, Some(false)) => {
            Some(Verdict::new(not_live, format!("The {end} node {name} is not active (stopped, or failing over).")))
        }
        (_, Some(true)) => None,
        (_, None) => Some(Verdict::new(unknown, format!("Whether the {end} node {name} is live could not be read."))),
    }
}

/// The target queue's state when it exists. A missing one is created by the run at its start (never left to
/// auto-create), where the broker may create queues; one missing after that was deleted.
pub fn queue_exists<'a>(t: &QueueRef, q: &'a QueueFacts) -> Result<&'a QueueState, Verdict> {
    let name = t.display();
    match &q.queue {
        Some(Some(state)) => Ok(state),
        None => Err(Verdict::new(
            TARGET_QUEUE_UNKNOWN,
            format!("Whether the target queue {name} exists could not be read."),
        )),
        Some(None) => Err(match q.settings.as_ref().map(|s| s.auto_create_queues) {
            Some(true) => Verdict::new(
                TARGET_QUEUE_CREATED,
                format!(
                    "The target queue {name} does not exist: the run creates it when it starts (durable, anycast, no \
                     filter) and fails if it is deleted after that, since a send to a missing queue would be dropped \
                     or re-create it by auto-create."
                ),
            ),
            Some(false) => Verdict::new(
                TARGET_QUEUE_MISSING,
                format!(
                    "The target queue {name} does not exist (or was deleted), and the broker does not create queues \
                     automatically."
                ),
            )
            .fixed_by(address_setting(t.address(), "<auto-create-queues>true</auto-create-queues>")),
            None => Verdict::new(
                TARGET_QUEUE_MISSING_UNKNOWN,
                format!("The target queue {name} does not exist, and whether the broker may create it is not known."),
            ),
        }),
    }
}

/// Internal to the broker: not a queue a transfer may write into.
pub fn queue_internal(t: &QueueRef, state: &QueueState) -> Option<Verdict> {
    (state.internal == Some(true))
        .then(|| Verdict::new(INTERNAL_QUEUE, format!("The target queue {} is internal to the broker.", t.display())))
}

/// A filter on the target queue drops what it does not match.
pub fn queue_filtered(t: &QueueRef, state: &QueueState) -> Option<Verdict> {
    let name = t.display();
    match &state.filter {
        Some(Some(filter)) => Some(Verdict::new(
            TARGET_FILTERED,
            format!("The target queue {name} has the filter `{filter}`: messages that do not match it would be dropped silently."),
        )),
        Some(None) => None,
        None => Some(Verdict::new(TARGET_FILTER_UNKNOWN, format!("Whether the target queue {name} has a filter could not be read."))),
    }
}

/// A yes-or-no attribute of the target queue that matters when it is `when`: `found` then, `unread` when it
/// could not be read.
fn attribute(
    value: Option<bool>,
    when: bool,
    found: (Condition, String),
    unread: (Condition, String),
) -> Option<Verdict> {
    match value {
        Some(v) if v == when => Some(Verdict::new(found.0, found.1)),
        Some(_) => None,
        None => Some(Verdict::new(unread.0, unread.1)),
    }
}

/// A disabled queue takes sends and commits, and drops them (docs/broker-notes.md).
pub fn queue_enabled(t: &QueueRef, state: &QueueState) -> Option<Verdict> {
    let name = t.display();
    attribute(
        state.enabled,
        false,
        (TARGET_DISABLED, format!("The target queue {name} is disabled: the broker drops every message routed to it.")),
        (TARGET_ENABLED_UNKNOWN, format!("Whether the target queue {name} is enabled could not be read.")),
    )
}

/// A queue that purges when its last consumer leaves deletes what was delivered to it.
pub fn queue_purges(t: &QueueRef, state: &QueueState) -> Option<Verdict> {
    let name = t.display();
    attribute(
        state.purge_on_no_consumers,
        true,
        (
            TARGET_PURGES,
            format!(
                "The target queue {name} purges its messages when it has no consumer: delivered messages could vanish."
            ),
        ),
        (TARGET_PURGE_UNKNOWN, format!("Whether the target queue {name} purges on no consumers could not be read.")),
    )
}

/// A last-value queue keeps one message per key.
pub fn queue_last_value(t: &QueueRef, state: &QueueState) -> Option<Verdict> {
    let name = t.display();
    attribute(
        state.last_value,
        true,
        (
            LAST_VALUE,
            format!("The target queue {name} is a last-value queue: messages with the same key replace each other."),
        ),
        (LAST_VALUE_UNKNOWN, format!("Whether the target queue {name} is a last-value queue could not be read.")),
    )
}

/// A ring queue pushes out its oldest messages past its size.
pub fn queue_ring(t: &QueueRef, state: &QueueState, load: &Load) -> Option<Verdict> {
    let name = t.display();
    match state.ring_size {
        // Artemis takes only -1 as "not a ring" (`QueueImpl`: `ringSize != -1`); a ring of 0 keeps (almost) nothing.
        Some(ring) if ring >= 0 => match (load.messages, state.message_count) {
            (Some(n), _) if n > ring => Some(Verdict::new(
                RING_TOO_SMALL,
                format!("The target queue {name} is a ring of {ring} messages, smaller than the {n} selected: the oldest would be pushed out."),
            )),
            (Some(n), Some(depth)) if n + depth > ring => Some(Verdict::new(
                RING_PUSHES_OUT,
                format!(
                    "The target queue {name} is a ring of {ring} messages holding {depth}: delivering {n} pushes out \
                     {} of the messages already there.",
                    n + depth - ring
                ),
            )),
            (Some(_), Some(_)) => None,
            _ => Some(Verdict::new(RING_UNKNOWN, format!("The target queue {name} is a ring of {ring} messages, and whether the selection fits could not be worked out."))),
        },
        Some(_) => None,
        None => Some(Verdict::new(RING_SIZE_UNKNOWN, format!("Whether the target queue {name} is a ring queue could not be read."))),
    }
}

/// With no consumer and redistribution on, the cluster may move what was delivered on to another node.
pub fn queue_redistribution(t: &QueueRef, state: &QueueState, s: Option<&AddressSettings>) -> Option<Verdict> {
    let name = t.display();
    match (s, state.consumer_count) {
        (Some(s), Some(0)) if s.redistribution_delay >= 0 => Some(Verdict::new(
            MAY_REDISTRIBUTE,
            format!(
                "The target queue {name} has no consumer and redistribution is on (delay {} ms): the cluster may \
                 move the delivered messages on to another node that has a consumer.",
                s.redistribution_delay
            ),
        )),
        (_, None) => Some(Verdict::new(
            CONSUMERS_UNKNOWN,
            format!("How many consumers the target queue {name} has could not be read."),
        )),
        _ => None,
    }
}

/// Every rule of an existing target queue, in the order the preview lists them.
fn queue_rules(t: &QueueRef, state: &QueueState, s: Option<&AddressSettings>, load: &Load) -> Vec<Verdict> {
    [
        queue_internal(t, state),
        queue_filtered(t, state),
        queue_enabled(t, state),
        queue_purges(t, state),
        queue_last_value(t, state),
        queue_ring(t, state, load),
        queue_redistribution(t, state, s),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// An address that drops when full, or pages up to a limit and then drops, loses messages silently.
pub fn address_drops(t: &QueueRef, s: &AddressSettings) -> Option<Verdict> {
    let address = t.address();
    match s.address_full_policy {
        FullPolicy::Drop => Some(
            Verdict::new(
                ADDRESS_FULL_DROP,
                format!("The target address {address} drops new messages silently when it is full (address-full-policy DROP)."),
            )
            .fixed_by(address_setting(address, "<address-full-policy>PAGE</address-full-policy>")),
        ),
        // Artemis takes only a negative page limit as none (`PagingStoreImpl.applySetting`): 0 is the strictest.
        FullPolicy::Page
            if (s.page_limit_bytes >= 0 || s.page_limit_messages >= 0)
                && s.page_full_policy == Some(FullPolicy::Drop) =>
        {
            Some(
                Verdict::new(
                    PAGE_FULL_DROP,
                    format!("The target address {address} pages up to a limit and then drops new messages silently (page-full-policy DROP)."),
                )
                .fixed_by(address_setting(address, "<page-full-policy>FAIL</page-full-policy>")),
            )
        }
        _ => None,
    }
}

/// How a load fits under a limit of an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Room {
    /// What the address holds, or what the load adds, could not be read.
    Unknown,
    /// The load (`adding`) does not fit: `left` is what room there is, `after` what the address would hold.
    Short { left: i64, adding: i64, after: i64 },
    /// It fits, but the address would be at or over the capacity threshold.
    Tight { after: i64 },
    /// It fits below the threshold.
    Enough,
}

/// How `adding` fits on top of `held` under `limit` (0 leaves no room), waiting at `threshold_pct` of it.
fn room(limit: i64, held: Option<i64>, adding: Option<i64>, threshold_pct: i64) -> Room {
    let (Some(held), Some(adding)) = (held, adding) else {
        return Room::Unknown;
    };
    let after = held.saturating_add(adding);
    if adding > limit - held {
        Room::Short { left: (limit - held).max(0), adding, after }
    } else if i128::from(after) * 100 >= i128::from(limit) * i128::from(threshold_pct) {
        Room::Tight { after }
    } else {
        Room::Enough
    }
}

/// The limit an address puts on what it holds in memory, where a full address refuses or blocks (FAIL, BLOCK)
/// rather than paging or dropping; `None` when there is none. Artemis takes only a negative max-size as no limit
/// (`SizeAwareMetric`: enabled when `max >= 0`): 0 leaves no room.
fn room_limit(s: &AddressSettings, limit: i64) -> Option<i64> {
    (matches!(s.address_full_policy, FullPolicy::Fail | FullPolicy::Block) && limit >= 0).then_some(limit)
}

/// Room in bytes under FAIL or BLOCK: what the address holds (`used`, its `AddressSize`) and the load against
/// `max-size-bytes`. Paging addresses never run out of room in memory.
pub fn room_in_bytes(t: &QueueRef, s: &AddressSettings, used: Option<i64>, load: &Load, pct: i64) -> Option<Verdict> {
    let max = room_limit(s, s.max_size_bytes)?;
    let (address, policy) = (t.address(), s.address_full_policy.as_str());
    match room(max, used, load.bytes, pct) {
        Room::Enough => None,
        Room::Unknown => Some(Verdict::new(
            CAPACITY_UNKNOWN,
            format!(
                "Whether the target address {address} has room (max-size-bytes {max} under {policy}) could not be \
                 worked out."
            ),
        )),
        Room::Short { left, adding, after } => Some(
            Verdict::new(
                CAPACITY_BYTES,
                format!(
                    "The target address {address} has room for {left} more bytes (max-size-bytes {max} under \
                     {policy}), less than {}.",
                    load.bytes_needed(adding)
                ),
            )
            .fixed_by(address_setting(address, &format!("<max-size-bytes>{}</max-size-bytes>", after * 2))),
        ),
        Room::Tight { after } => Some(Verdict::new(
            CAPACITY_TIGHT,
            format!(
                "{} the target address {address} would be {}% full (max-size-bytes {max} under {policy}); the run \
                 waits whenever it passes {pct}%.",
                load.after(),
                // max-size-bytes 0 is full from the first byte.
                (after * 100).checked_div(max).unwrap_or(100),
            ),
        )),
    }
}

/// Room in messages under FAIL or BLOCK: what the target queue holds (`depth`; 0 for a queue the run will create)
/// and the load against the address's `max-size-messages`.
pub fn room_in_messages(
    t: &QueueRef,
    s: &AddressSettings,
    depth: Option<i64>,
    load: &Load,
    pct: i64,
) -> Option<Verdict> {
    let max = room_limit(s, s.max_size_messages)?;
    let (address, policy) = (t.address(), s.address_full_policy.as_str());
    match room(max, depth, load.messages, pct) {
        Room::Enough => None,
        Room::Unknown => Some(Verdict::new(
            CAPACITY_MESSAGES_UNKNOWN,
            format!(
                "Whether the target address {address} has room for {} (max-size-messages {max}) could not be worked \
                 out.",
                load.noun()
            ),
        )),
        Room::Short { left, adding, after } => Some(
            Verdict::new(
                CAPACITY_MESSAGES,
                format!(
                    "The target address {address} has room for {left} more messages (max-size-messages {max} under \
                     {policy}), fewer than {}.",
                    load.messages_taken(adding)
                ),
            )
            .fixed_by(address_setting(address, &format!("<max-size-messages>{}</max-size-messages>", after * 2))),
        ),
        Room::Tight { after } => Some(Verdict::new(
            CAPACITY_TIGHT,
            format!(
                "{} the target address {address} would hold {after} of at most {max} messages; the run waits whenever \
                 it passes {pct}%.",
                load.after()
            ),
        )),
    }
}

/// The address gives delivered messages an expiry of its own.
pub fn address_expiry(t: &QueueRef, s: &AddressSettings) -> Option<Verdict> {
    // Artemis takes -1 as unset; 0 is the harshest value: a message without an expiration of its own expires at once
    // (`PostOfficeImpl.applyExpiryDelay`; message-expiry.adoc warns of max-expiry-delay 0).
    let address = t.address();
    (s.expiry_delay >= 0 || s.min_expiry_delay >= 0 || s.max_expiry_delay >= 0).then(|| {
        Verdict::new(
            TARGET_EXPIRY_DELAY,
            format!(
                "The target address {address} gives messages an expiry (expiry-delay {}, min {}, max {} ms): delivered \
                 messages may expire there.",
                s.expiry_delay, s.min_expiry_delay, s.max_expiry_delay
            ),
        )
        .fixed_by(address_setting(address, "<expiry-delay>-1</expiry-delay>"))
    })
}

/// Every rule of the target address, in the order the preview lists them. `q` gives the address's size and the
/// queue's depth (a queue that does not exist yet holds nothing).
fn address_rules(t: &QueueRef, q: &QueueFacts, s: &AddressSettings, load: &Load, threshold_pct: i64) -> Vec<Verdict> {
    let depth = match &q.queue {
        Some(None) => Some(0),
        _ => q.state().and_then(|state| state.message_count),
    };
    [
        address_drops(t, s),
        room_in_bytes(t, s, q.address_size, load, threshold_pct),
        room_in_messages(t, s, depth, load, threshold_pct),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The target node's journal disk against its `max-disk-usage`.
pub fn disk(t: &QueueRef, node: &NodeFacts, threshold_pct: i64) -> Option<Verdict> {
    let name = &t.node;
    match (node.broker.disk_store_usage, node.broker.max_disk_usage) {
        // -1 turns the broker's check off; it blocks only *above* max-disk-usage, which 100 never is; 0 blocks
        // every message (`FileStoreMonitor`: `usage > max / 100`).
        (_, Some(max)) if !(0..100).contains(&max) => None,
        (Some(usage), Some(max)) => {
            let pct = usage * 100.0;
            if pct >= max as f64 {
                Some(
                    Verdict::new(
                        DISK_FULL,
                        format!("The target node {name}'s journal disk is {pct:.0}% full, at or over its max-disk-usage of {max}%: it blocks or refuses new messages."),
                    )
                    .fixed_by(format!("<max-disk-usage>{}</max-disk-usage>", (max + 5).min(99))),
                )
            } else if pct >= max as f64 * threshold_pct as f64 / 100.0 {
                Some(Verdict::new(
                    DISK_TIGHT,
                    format!("The target node {name}'s journal disk is {pct:.0}% full, at or over {threshold_pct}% of its max-disk-usage of {max}%: the run waits while it is."),
                ))
            } else {
                None
            }
        }
        _ => Some(Verdict::new(
            DISK_UNKNOWN,
            format!("How full the target node {name}'s journal disk is could not be read."),
        )),
    }
}

/// Every condition of the target `t` (its node, queue, address and disk) for `load`, in the order the preview
/// lists them: one list for both edges. Nothing else is judged about a node that did not answer or is not active.
pub fn judge(t: &QueueRef, facts: &EndFacts, load: &Load, threshold_pct: i64) -> Vec<Verdict> {
    let node = match node_answered(End::Target, &t.node, facts) {
        Ok(node) => node,
        Err(unreachable) => return vec![unreachable],
    };
    let q = &facts.queue;
    let mut verdicts: Vec<Verdict> = node_live(End::Target, &t.node, node).into_iter().collect();
    if node.broker.active == Some(false) {
        // A node that is not active serves no queue: what it says of them (a passive backup has none) is not
        // what a run would write to, so a failover mid-run is not taken for a deleted target.
        return verdicts;
    }
    match queue_exists(t, q) {
        Ok(state) => verdicts.extend(queue_rules(t, state, q.settings.as_ref(), load)),
        Err(missing) => verdicts.push(missing),
    }
    match &q.settings {
        Some(s) => {
            verdicts.extend(address_rules(t, q, s, load, threshold_pct));
            verdicts.extend(address_expiry(t, s));
        }
        None => verdicts.push(Verdict::new(
            ADDRESS_SETTINGS_UNKNOWN,
            format!("The address settings of {} on the target could not be read.", t.address()),
        )),
    }
    verdicts.extend(disk(t, node, threshold_pct));
    verdicts
}

#[cfg(test)]
#[path = "target_rules_tests.rs"]
pub(crate) mod tests;
