//! The staging queue of a move (SPEC §4.1): the durable queue `studio.transfer.<run id>` on the source broker
//! that holds the messages the broker's own move took from the source, until the relay has them on the target.
//!
//! **Why it is made fully explicit.** The broker's move acknowledges the source whatever becomes of the copy,
//! and a new queue takes every field left out from the `#` address settings. A `#` that says purge-on-no-consumers,
//! last-value (or only a last-value *key*), a small ring, no consumers at all (`default-max-consumers 0`), an
//! expiry delay, DROP when full, dead-lettering after one delivery, a redelivery delay, redistribution, or
//! slow-consumer KILL would silently lose, park or scatter staged messages. So [`prepare`] first writes an
//! exact-match address-setting entry for the staging address (so the queue never exists under inherited `#`
//! values), then creates the queue with every field the broker would otherwise default from the address settings,
//! and [`verify`] reads both back from the broker and lists, in words, every difference. Staging turns message
//! grouping off (`group-buckets 0`): groups would pin staged messages to one relay consumer, and a group-first
//! key would add a property to relayed messages.
//!
//! **What the broker's moves do** (live facts in `docs/broker-notes.md`, "Staging"): `moveMessages` skips
//! messages in delivery to a consumer, honours its count exactly, moves scheduled messages that match, gives
//! each copy a new message id with `_AMQ_ORIG_*` properties and no expiration; `moveMessage(id)` finds only a
//! message that is visible in the queue's memory. [`not_taken`] counts what a finished selection left behind,
//! by cause, from those facts.
//!
//! **Authorisation.** Management operations over Jolokia are not checked against `security-settings`: the
//! broker.xml security that [`SECURITY_SNIPPET`] grants is what the relay's Core session needs on staging
//! (consume, send, browse …). [`prepare`] therefore checks the management user's roles against the security
//! setting that matches the staging address before creating anything, and a refusal anywhere becomes
//! [`StagingError::NotAuthorized`] with the snippet.

use std::collections::{BTreeSet, HashSet};

use serde_json::{json, Map, Value};
use uuid::Uuid;

use crate::broker::jolokia::object_name::{quote, DOMAIN};
use crate::broker::jolokia::{
    AgentError, AgentErrorKind, BrokerManagement, JolokiaError, ObjectName, QueueConfig, Request, RoutingType,
};

/// The prefix of every staging queue (and of nothing else the product makes).
pub const STAGING_PREFIX: &str = crate::transfer::plan::STAGING_PREFIX;

/// The prefix of the dead message queues (docs/dead-message-queue.md): never a staging queue, never an orphan.
pub const DMQ_PREFIX: &str = "studio.dmq.";

/// The `broker.xml` security setting the source broker needs for staging (seed 000, "What the broker needs"),
/// shown at once whenever the broker refuses staging. Its roles should be the product's broker user's alone:
/// another consumer of a staging queue stops its run (relay/batch.rs, `check_staging_consumers`).
pub const SECURITY_SNIPPET: &str = r#"<security-setting match="studio.transfer.#">
<permission type="createAddress" roles="amq"/>
<permission type="deleteAddress" roles="amq"/>
<permission type="createDurableQueue" roles="amq"/>
<permission type="deleteDurableQueue" roles="amq"/>
<permission type="send" roles="amq"/>
<permission type="consume" roles="amq"/>
<permission type="browse" roles="amq"/>
</security-setting>"#;

/// The permissions of [`SECURITY_SNIPPET`], as `getRolesAsJSON` names them.
const NEEDED_PERMISSIONS: [&str; 7] =
    ["createAddress", "deleteAddress", "createDurableQueue", "deleteDurableQueue", "send", "consume", "browse"];

/// The smallest `managementBrowsePageSize` staging asks for: the broker's own default.
const MIN_BROWSE_PAGE_SIZE: i64 = 200;

/// `studio.transfer.<run id>` (the run id in its hyphenated lower-case form).
pub fn staging_queue_name(run: Uuid) -> String {
    format!("{STAGING_PREFIX}{}", run.hyphenated())
}

/// The run a staging queue belongs to: `Some` only for exactly `studio.transfer.<uuid>` as
/// [`staging_queue_name`] writes it, so a look-alike (`studio.transfer.orders`, the DMQ) is never taken for one.
pub fn run_of_staging_queue(name: &str) -> Option<Uuid> {
    let run = Uuid::parse_str(name.strip_prefix(STAGING_PREFIX)?).ok()?;
    (staging_queue_name(run) == name).then_some(run)
}

/// What a run's staging queue is: its name, and the batch size its browse page must cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagingSpec {
    /// The queue (and address) name, `studio.transfer.<run id>`.
    pub name: String,
    /// The run's batch size: staging holds at most about twice this many.
    pub batch_size: u32,
}

impl StagingSpec {
    /// The staging of `run`.
    pub fn for_run(run: Uuid, batch_size: u32) -> StagingSpec {
        StagingSpec { name: staging_queue_name(run), batch_size }
    }

    /// The `managementBrowsePageSize` asked: at least 4 × batch (staging holds up to 2 × batch, and a listing of
    /// staging must see all of it), and never below the broker's default of 200.
    pub fn browse_page_size(&self) -> i64 {
        (4 * i64::from(self.batch_size)).max(MIN_BROWSE_PAGE_SIZE)
    }

    /// The exact-match address settings of the staging address (camelCase keys of `addAddressSettings`), each
    /// with the reason it is there. Every key exists from Artemis 2.32 on (checked in 2.37.0's `AddressSettings`).
    pub fn address_settings(&self) -> Vec<(&'static str, Value, &'static str)> {
        vec![
            ("maxDeliveryAttempts", json!(-1), "a relay rollback never dead-letters a staged message"),
            ("deadLetterAddress", json!(""), "no dead-letter address: staged messages never leave for the DLQ"),
            ("expiryAddress", json!(""), "no expiry address: nothing in staging expires (see the expiry keys)"),
            ("expiryDelay", json!(-1), "no expiry is put on a message that arrives without one"),
            ("minExpiryDelay", json!(-1), "no minimum expiry"),
            ("maxExpiryDelay", json!(-1), "no maximum expiry"),
            ("redeliveryDelay", json!(0), "a relay rollback makes messages available again at once, not scheduled"),
            ("redistributionDelay", json!(-1), "the cluster never redistributes staged messages to another node"),
            ("addressFullMessagePolicy", json!("PAGE"), "a full staging address pages; it never drops or blocks"),
            ("dropMessagesWhenFull", json!(false), "the legacy flag for DROP is off"),
            ("maxSizeBytes", json!(-1), "no address byte limit of its own"),
            ("maxSizeMessages", json!(-1), "no address message limit of its own"),
            ("pageLimitBytes", json!(-1), "paging has no limit, so a page-full policy never applies"),
            ("pageLimitMessages", json!(-1), "paging has no message limit"),
            ("managementBrowsePageSize", json!(self.browse_page_size()), "a listing of staging sees all of it"),
            ("autoDeleteQueues", json!(false), "the broker never deletes the staging queue"),
            ("autoDeleteCreatedQueues", json!(false), "the broker never deletes the staging queue"),
            ("autoDeleteAddresses", json!(false), "the broker never deletes the staging address"),
            ("slowConsumerThreshold", json!(-1), "a slow relay consumer is never killed"),
            ("retroactiveMessageCount", json!(0), "no retroactive copies of staged messages"),
            ("enableIngressTimestamp", json!(false), "a staged message keeps the ingress timestamp it had"),
            ("defaultLastValueKey", json!(""), "no last-value key by default"),
        ]
    }

    /// The queue, with every field the broker would otherwise take from the address settings.
    pub fn queue_config(&self) -> QueueConfig {
        let mut config = QueueConfig::plain_anycast(&self.name);
        config.group_buckets = 0;
        config
    }
}

/// Staging's depth as the broker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingDepth {
    /// `MessageCount`: every message staging holds, those in delivery and scheduled included.
    pub messages: u64,
    /// `DeliveringCount`: sent to a consumer (the relay's, or a dead worker's) and not yet acknowledged.
    pub in_delivery: u64,
    /// `ScheduledCount`: waiting for a delivery time (staging's redelivery delay is 0, so normally none).
    pub scheduled: u64,
}

/// The outcome of a move by ids.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdsMoved {
    /// Ids the broker moved into staging.
    pub moved: Vec<i64>,
    /// Ids the broker did not find in the queue's memory: in delivery, scheduled, paged out, or gone.
    pub not_moved: Vec<i64>,
}

/// Which messages a run selected, for [`not_taken`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selected<'a> {
    /// A filter or whole-queue selection.
    Frozen {
        /// The effective filter the refills used (`Plan::effective_filter`).
        effective_filter: &'a str,
        /// The user's own filter, without the freezing terms; `None` for the whole queue.
        user_filter: Option<&'a str>,
        /// The freezing time (source broker clock, ms).
        t0_millis: i64,
    },
    /// Explicit ids: those the broker did not move ([`IdsMoved::not_moved`]).
    Ids(&'a [i64]),
}

/// What is left on the source of a selection the run has finished taking, by cause (SPEC §4.3 "Partial").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NotTaken {
    /// In delivery to a consumer of the source queue (the broker's move skips those). Exact.
    pub in_delivery: u64,
    /// Scheduled for delivery after `t0` (the frozen filter leaves those out; by id the broker cannot move them).
    /// Exact for ids and a whole queue; for a user filter an upper bound — see [`NotTaken::scheduled_exact`].
    pub scheduled: u64,
    /// False when `scheduled` counts every scheduled message stamped at or before `t0` whether it matches the
    /// user's filter or not: the broker can apply a filter to scheduled messages only by moving them.
    pub scheduled_exact: bool,
    /// Ids: neither in delivery nor scheduled — gone (consumed, expired, removed) or paged out of reach of a
    /// move by id. Filter: still matching and visible — a message a consumer gave back after the last refill,
    /// which another refill would take (a lower bound when the source is deeper than its browse page size).
    pub other: u64,
}

/// Why staging could not be made, checked, filled, emptied or removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StagingError {
    /// The broker refused staging to the product's broker user. The run fails at once, showing the snippet.
    #[error("{words}\nThe source broker needs this in broker.xml (<security-settings>), with the roles of the product's broker user:\n{snippet}")]
    NotAuthorized {
        /// What was refused, in words.
        words: String,
        /// [`SECURITY_SNIPPET`].
        snippet: &'static str,
    },
    /// The broker's staging is not what was asked: each difference in words. Nothing is moved into it.
    #[error("the staging queue {queue} is not what was asked: {}", differences.join("; "))]
    Mismatch {
        /// The staging queue.
        queue: String,
        /// Each difference between what was asked and what the broker returned.
        differences: Vec<String>,
    },
    /// The staging queue is not on the broker (removed by hand, or never made).
    #[error("the staging queue {queue} does not exist on node {node}")]
    Missing {
        /// The staging queue.
        queue: String,
        /// The node.
        node: String,
    },
    /// A removal without force found messages: they are still the run's, so the queue stays.
    #[error(
        "the staging queue {queue} still holds {messages} messages ({in_delivery} in delivery to a consumer): it is \
         kept; return them to the source queue first"
    )]
    NotEmpty {
        /// The staging queue.
        queue: String,
        /// `MessageCount`.
        messages: u64,
        /// `DeliveringCount`.
        in_delivery: u64,
    },
    /// Some ids of a move by ids were answered with an error: which moved, which were not found, which failed.
    /// Transient only when every failure is the broker being busy with another management task.
    #[error(
        "the move by ids into {staging} failed for {} of them (first: {})",
        failed.len(),
        failed.first().map(|f| f.1.message.as_str()).unwrap_or("")
    )]
    IdsFailed {
        /// The staging queue.
        staging: String,
        /// Moved before or beside the failures (they are in staging).
        moved: Vec<i64>,
        /// Not found by the broker.
        not_moved: Vec<i64>,
        /// Each failed id with the agent's error.
        failed: Vec<(i64, AgentError)>,
    },
    /// A call the product itself must never make (it would move the wrong messages).
    #[error("{0}")]
    Invalid(String),
    /// Management failed (unreachable, busy, refused, not found …): see [`StagingError::is_refusal`].
    #[error("{0}")]
    Management(#[from] JolokiaError),
}

impl StagingError {
    /// The broker certainly moved nothing: the call was refused before it started (no permit, a login refused,
    /// the management lock busy, a queue or MBean that does not exist, a call this product never makes).
    pub fn moved_nothing(&self) -> bool {
        match self {
            StagingError::Invalid(_) => true,
            StagingError::Management(e) => match e {
                JolokiaError::NoPermit { .. }
                | JolokiaError::NotAuthenticated { .. }
                | JolokiaError::LoginThrottled { .. } => true,
                JolokiaError::Agent { error, .. } => matches!(
                    error.kind,
                    AgentErrorKind::Busy
                        | AgentErrorKind::NotFound
                        | AgentErrorKind::BadRequest
                        | AgentErrorKind::Forbidden
                ),
                _ => false,
            },
            _ => false,
        }
    }

    /// A refusal the run must fail on (with the words shown), as opposed to a transient failure worth retrying:
    /// unreachable or timed-out nodes, a broker busy with another management task, no permit, a proxy error.
    pub fn is_refusal(&self) -> bool {
        match self {
            StagingError::Management(e) => !is_transient(e),
            StagingError::IdsFailed { failed, .. } => !failed.iter().all(|(_, e)| e.kind == AgentErrorKind::Busy),
            _ => true,
        }
    }

    /// The opposite of [`StagingError::is_refusal`].
    pub fn is_transient(&self) -> bool {
        !self.is_refusal()
    }

    /// A refusal of the staging queue seen over Core (the relay's consumer or browser on staging, AMQ229213 and
    /// the like), with the snippet.
    pub fn refused_over_core(staging: &str, broker_words: &str) -> StagingError {
        StagingError::NotAuthorized {
            words: format!("the source broker refused the staging queue {staging} to the relay: {broker_words}"),
            snippet: SECURITY_SNIPPET,
        }
    }
}

/// Transient: worth retrying with backoff. A refused login (403, or 429 throttling, which a retry lengthens),
/// a missing MBean, a bad argument and a failed operation are not.
fn is_transient(e: &JolokiaError) -> bool {
    match e {
        JolokiaError::Unreachable { .. } | JolokiaError::Timeout { .. } | JolokiaError::NoPermit { .. } => true,
        JolokiaError::Http { status, .. } => matches!(status, 502..=504),
        JolokiaError::Agent { error, .. } => error.kind == AgentErrorKind::Busy,
        _ => false,
    }
}

/// A management refusal (the JMX role access of management.xml, or 403 from the RBAC guard) becomes
/// [`StagingError::NotAuthorized`]; anything else stays a management error.
fn refused(e: JolokiaError, what: &str, staging: &str, user: &str) -> StagingError {
    let forbidden = matches!(&e, JolokiaError::Agent { error, .. } if error.kind == AgentErrorKind::Forbidden);
    if forbidden {
        StagingError::NotAuthorized {
            words: format!(
                "the source broker refused to {what} for the staging queue {staging} to the management user {user}: \
                 {e}. That user needs management rights (management.xml role-access) as well as the staging \
                 security setting"
            ),
            snippet: SECURITY_SNIPPET,
        }
    } else {
        StagingError::Management(e)
    }
}

/// The management user's rights on a staging address, against [`SECURITY_SNIPPET`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagingRights {
    /// The broker user (management and Core use the same credentials).
    pub user: String,
    /// Its roles, as the broker lists them.
    pub roles: Vec<String>,
    /// The snippet's permissions none of those roles has on the staging address.
    pub missing: Vec<String>,
}

/// The management user's rights on `staging`: its roles (`listUser`) against the one security setting that
/// matches the address (`getRolesAsJSON`). `Ok(None)` when the broker cannot list the user (its users are not in
/// the properties login module, or listing users is not allowed): unknown, never read as "all granted".
pub async fn rights(mgmt: &BrokerManagement, staging: &str) -> Result<Option<StagingRights>, StagingError> {
    let user = mgmt.client().user();
    let roles = match mgmt.user_roles(user).await {
        Ok(roles) => roles,
        Err(e) if is_transient(&e) => return Err(e.into()),
        Err(e) => {
            tracing::warn!(staging, user, error = %e, "the broker cannot list the user's roles; staging rights unknown");
            return Ok(None);
        }
    };
    let settings = mgmt.roles_for_address(staging).await.map_err(|e| refused(e, "read the roles", staging, user))?;
    let missing = missing_permissions(&roles, &settings);
    Ok(Some(StagingRights { user: user.to_string(), roles, missing }))
}

/// The snippet's permissions that no role in `roles` is granted by `settings` (`getRolesAsJSON` entries).
fn missing_permissions(roles: &[String], settings: &[Value]) -> Vec<String> {
    let granted: BTreeSet<&str> = settings
        .iter()
        .filter(|r| r["name"].as_str().is_some_and(|n| roles.iter().any(|u| u == n)))
        .flat_map(|r| NEEDED_PERMISSIONS.iter().copied().filter(move |p| r[*p].as_bool() == Some(true)))
        .collect();
    NEEDED_PERMISSIONS.iter().filter(|p| !granted.contains(**p)).map(|p| p.to_string()).collect()
}

/// Makes staging fully explicit, then reads it back and compares ([`verify`]). Idempotent: a resumed run calls it
/// again and an existing queue is kept (with its messages) if it is what was asked.
///
/// Order: the user's rights on the staging address; the exact-match address settings (so the queue never
/// exists under inherited `#` values); the queue, unless it exists; the read-back.
pub async fn prepare(mgmt: &BrokerManagement, spec: &StagingSpec) -> Result<(), StagingError> {
    let user = mgmt.client().user().to_string();
    if let Some(r) = rights(mgmt, &spec.name).await? {
        if !r.missing.is_empty() {
            return Err(StagingError::NotAuthorized {
                words: format!(
                    "the broker user {user} (roles: {}) lacks {} on the staging address {} of node {}, so the relay \
                     could not use it; the snippet names role amq: put one of the user's roles there",
                    if r.roles.is_empty() { "none".to_string() } else { r.roles.join(", ") },
                    r.missing.join(", "),
                    spec.name,
                    mgmt.client().node()
                ),
                snippet: SECURITY_SNIPPET,
            });
        }
    }
    let settings: Map<String, Value> =
        spec.address_settings().into_iter().map(|(k, v, _)| (k.to_string(), v)).collect();
    mgmt.add_address_settings(&spec.name, &Value::Object(settings))
        .await
        .map_err(|e| refused(e, "add address settings", &spec.name, &user))?;
    mgmt.create_queue_if_absent(&spec.queue_config())
        .await
        .map_err(|e| refused(e, "create the queue", &spec.name, &user))?;
    verify(mgmt, spec).await
}

/// The queue attributes [`verify`] reads, with the value asked (as JSON).
fn expected_queue_attributes(spec: &StagingSpec) -> Vec<(&'static str, Value)> {
    let c = spec.queue_config();
    vec![
        ("Address", json!(c.address)),
        ("RoutingType", json!(c.routing_type.as_upper())),
        ("Filter", Value::Null),
        ("Durable", json!(c.durable)),
        ("Temporary", json!(c.temporary)),
        ("InternalQueue", json!(c.internal)),
        ("Enabled", json!(c.enabled)),
        ("Paused", json!(false)),
        ("PurgeOnNoConsumers", json!(c.purge_on_no_consumers)),
        ("LastValue", json!(c.last_value)),
        ("LastValueKey", json!(c.last_value_key)),
        ("RingSize", json!(c.ring_size)),
        ("Exclusive", json!(c.exclusive)),
        ("AutoDelete", json!(c.auto_delete)),
        ("MaxConsumers", json!(c.max_consumers)),
        ("ConsumersBeforeDispatch", json!(c.consumers_before_dispatch)),
        ("DelayBeforeDispatch", json!(c.delay_before_dispatch)),
        ("GroupBuckets", json!(c.group_buckets)),
        ("GroupRebalance", json!(c.group_rebalance)),
        ("GroupRebalancePauseDispatch", json!(c.group_rebalance_pause_dispatch)),
    ]
}

/// Reads staging back from the broker — the queue's attributes and the merged address settings of its address —
/// and compares them with what [`prepare`] asks; every difference in words. (Non-destructive is not a management
/// attribute: see [`check_core_view`].)
pub async fn verify(mgmt: &BrokerManagement, spec: &StagingSpec) -> Result<(), StagingError> {
    let expected = expected_queue_attributes(spec);
    let names: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    let mbean = staging_mbean(mgmt, &spec.name);
    let answers =
        mgmt.batch(&[Request::read_lenient(mbean, &names), mgmt.address_settings_request(&spec.name)]).await?;
    let mut answers = answers.into_iter();
    let (Some(queue), Some(settings)) = (answers.next(), answers.next()) else {
        return Err(StagingError::Invalid("the broker answered a two-request batch with fewer results".into()));
    };
    let queue = match queue {
        Ok(v) => v,
        Err(e) if e.kind == AgentErrorKind::NotFound => {
            return Err(StagingError::Missing { queue: spec.name.clone(), node: mgmt.client().node().into() })
        }
        Err(error) => return Err(JolokiaError::Agent { node: mgmt.client().node().into(), error }.into()),
    };
    let settings = settings.map_err(|error| JolokiaError::Agent { node: mgmt.client().node().into(), error })?;
    let settings = match settings {
        Value::String(s) => serde_json::from_str(&s).map_err(|e| JolokiaError::BadAnswer {
            node: mgmt.client().node().into(),
            reason: format!("getAddressSettingsAsJSON: {e}"),
        })?,
        other => other,
    };
    let mut differences = Vec::new();
    for (name, want) in &expected {
        let got = queue.get(*name).unwrap_or(&Value::Null);
        if !same_attribute(name, want, got) {
            differences.push(format!("queue attribute {name} is {}, asked {}", shown(got), shown(want)));
        }
    }
    for (key, want, why) in spec.address_settings() {
        match settings.get(key) {
            Some(got) if same_value(&want, got) => {}
            Some(got) => {
                differences.push(format!("address setting {key} is {}, asked {} ({why})", shown(got), shown(&want)))
            }
            None => differences.push(format!(
                "address setting {key} was not returned, asked {} ({why}); this broker may not know it",
                shown(&want)
            )),
        }
    }
    if differences.is_empty() {
        Ok(())
    } else {
        Err(StagingError::Mismatch { queue: spec.name.clone(), differences })
    }
}

/// Checks what the relay's Core queue query says of staging, which includes the one field management cannot
/// read: non-destructive (a non-destructive staging queue would hand the relay every message forever).
pub fn check_core_view(info: &artemis_core::QueueInfo, spec: &StagingSpec) -> Result<(), StagingError> {
    let mut differences = Vec::new();
    let mut check = |what: &str, ok: bool, got: String| {
        if !ok {
            differences.push(format!("{what} is {got} over Core"));
        }
    };
    check("the address", info.address == spec.name, info.address.clone());
    check(
        "the routing type",
        info.routing_type == Some(artemis_core::RoutingType::Anycast),
        format!("{:?}", info.routing_type),
    );
    check("durable", info.durable, info.durable.to_string());
    check("temporary", !info.temporary, info.temporary.to_string());
    check("the filter", info.filter.as_deref().unwrap_or("").is_empty(), format!("{:?}", info.filter));
    check("purge-on-no-consumers", !info.purge_on_no_consumers, info.purge_on_no_consumers.to_string());
    check("max-consumers", info.max_consumers == -1, info.max_consumers.to_string());
    check("non-destructive", info.non_destructive == Some(false), format!("{:?}", info.non_destructive));
    check("last-value", info.last_value == Some(false), format!("{:?}", info.last_value));
    check("exclusive", info.exclusive == Some(false), format!("{:?}", info.exclusive));
    check("enabled", info.enabled == Some(true), format!("{:?}", info.enabled));
    check("auto-delete", info.auto_delete == Some(false), format!("{:?}", info.auto_delete));
    if differences.is_empty() {
        Ok(())
    } else {
        Err(StagingError::Mismatch { queue: spec.name.clone(), differences })
    }
}

/// An attribute as asked: `Filter` and `LastValueKey` accept null and `""` alike (both mean none).
fn same_attribute(name: &str, want: &Value, got: &Value) -> bool {
    match name {
        "Filter" | "LastValueKey" => got.is_null() || got.as_str() == Some(""),
        _ => same_value(want, got),
    }
}

fn same_value(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => want == got,
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::String(s) if s.is_empty() => "empty".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Staging's queue MBean (staging is an anycast queue on an address of its own name).
pub fn staging_mbean(mgmt: &BrokerManagement, staging: &str) -> ObjectName {
    mgmt.queue_mbean(staging, RoutingType::Anycast, staging)
}

/// The broker's move of up to `count` messages matching `filter` from the source queue into staging
/// (`moveMessages(count, filter, staging, false, count)`) — of every match while the source holds scheduled
/// messages (see the body); how many moved. Zero means nothing visible matches any
/// more (messages in delivery to a consumer are skipped by the broker). A count of 0 and an empty filter are
/// refused here: the broker reads both as "everything", which would take messages outside the frozen selection.
pub async fn refill_by_filter(
    mgmt: &BrokerManagement,
    source: &ObjectName,
    staging: &str,
    filter: &str,
    count: u32,
    t0_millis: Option<i64>,
) -> Result<u64, StagingError> {
    if count == 0 {
        return Err(StagingError::Invalid(format!(
            "a refill of staging {staging} for 0 messages: the broker would read it as \"all\""
        )));
    }
    if filter.trim().is_empty() {
        return Err(StagingError::Invalid(format!(
            "a refill of staging {staging} without the frozen filter would take messages outside the selection"
        )));
    }
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    // A counted move takes every matching message out of the broker's scheduler and moves only up to the count
    // (`QueueImpl.iterQueue`): the rest are then in no queue until the broker restarts (docs/broker-notes.md). A
    // redelivery delay is such a schedule, and no filter can see it. So while the source holds a scheduled
    // message the filter could match — or that is unknown — the move is not counted: the broker moves every
    // match at once.
    let (flush, limit) =
        if scheduled_could_match(mgmt, source, t0_millis).await? { (UNCOUNTED_FLUSH, -1) } else { (count, count) };
    let moved = mgmt.move_messages(source, flush, Some(filter), staging, false, limit).await?;
    Ok(moved.unsigned_abs())
}

/// The flush limit of an uncounted broker move: how many messages the broker moves per journal transaction.
const UNCOUNTED_FLUSH: i32 = 500;

/// The queue's `ScheduledCount`; `None` when the broker's answer is not a count.
async fn scheduled_count(mgmt: &BrokerManagement, queue: &ObjectName) -> Result<Option<u64>, StagingError> {
    let v = mgmt.client().request(&Request::read(queue.clone(), &["ScheduledCount"])).await?;
    Ok(v["ScheduledCount"].as_i64().filter(|n| *n >= 0).map(i64::unsigned_abs))
}

/// Whether `queue` holds a scheduled message (a redelivery delay, or a scheduled delivery time) that a filter
/// could match. With `t0_millis` (a frozen selection, whose filter leaves out what was stamped or is scheduled after
/// `t0`) only those stamped and scheduled at or before it count — a message waiting out a redelivery delay always
/// does; without, any scheduled message. Unknown counts as could.
async fn scheduled_could_match(
    mgmt: &BrokerManagement,
    queue: &ObjectName,
    t0_millis: Option<i64>,
) -> Result<bool, StagingError> {
    match (scheduled_count(mgmt, queue).await?, t0_millis) {
        (Some(0), _) => Ok(false),
        (Some(_), Some(t0)) => match mgmt.list_scheduled_messages(queue).await {
            Ok(listed) => Ok(listed.iter().any(|m| {
                m["timestamp"].as_i64().is_none_or(|t| t <= t0)
                    && m["_AMQ_SCHED_DELIVERY"].as_i64().is_none_or(|at| at <= t0)
            })),
            // A listing the broker cannot render (a NaN property) says nothing.
            Err(_) => Ok(true),
        },
        _ => Ok(true),
    }
}

/// The broker's move of each id (`moveMessage(id, staging)`), all in one batched Jolokia request; which moved and
/// which the broker did not find (in delivery, scheduled, paged out, or gone).
pub async fn refill_by_ids(
    mgmt: &BrokerManagement,
    source: &ObjectName,
    staging: &str,
    ids: &[i64],
) -> Result<IdsMoved, StagingError> {
    let requests: Vec<Request> = ids
        .iter()
        .map(|id| Request::exec(source.clone(), "moveMessage(long,java.lang.String)", vec![json!(id), json!(staging)]))
        .collect();
    let answers = mgmt.batch(&requests).await?;
    let mut out = IdsMoved::default();
    let mut failed = Vec::new();
    for (id, answer) in ids.iter().zip(answers) {
        match answer {
            Ok(Value::Bool(true)) => out.moved.push(*id),
            Ok(Value::Bool(false)) => out.not_moved.push(*id),
            Ok(other) => failed.push((
                *id,
                AgentError::from_parts(-1, None, &format!("moveMessage answered {other}, which is not a boolean")),
            )),
            Err(e) => failed.push((*id, e)),
        }
    }
    if failed.is_empty() {
        Ok(out)
    } else {
        Err(StagingError::IdsFailed { staging: staging.into(), moved: out.moved, not_moved: out.not_moved, failed })
    }
}

/// One message of a staging queue as a Core browse sees it ([`list_over_core`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its staging id.
    pub id: i64,
    /// The source id the broker's move recorded on it (`_AMQ_ORIG_MESSAGE_ID`), where it did.
    pub original_id: Option<i64>,
    /// The queue the broker's move took it from (`_AMQ_ORIG_QUEUE`), where recorded.
    pub original_queue: Option<String>,
}

/// Every message of a staging queue but those in delivery, by a Core browse on `conn`: it carries every legal
/// message, where the broker's JSON rendering (`listMessagesAsJSON`) fails the whole listing on one float property
/// that is NaN or infinite, and it has no page limit, where management lists at most a browse page (staging grows
/// past one when a refill takes a whole selection at once, or after a resume with a larger batch). Large bodies
/// are read past, never kept. A browse can end early (docs/broker-notes.md): callers compare what it saw with the
/// queue's depth.
pub async fn list_over_core(conn: &artemis_core::Connection, queue: &str) -> Result<Vec<Listed>, artemis_core::Error> {
    use artemis_core::message::{names, PropertyValue};
    let session = conn.create_session(artemis_core::SessionOptions::auto_commit()).await?;
    let mut browser = session.create_browser(queue, artemis_core::ConsumerOptions::default()).await?;
    let mut listed = Vec::new();
    let mut discard = tokio::io::sink();
    while let Some(d) = browser.next_streaming(&mut discard).await? {
        let properties = &d.message().headers.properties;
        let original_id = match properties.get(names::ORIGINAL_MESSAGE_ID) {
            Some(PropertyValue::Long(id)) => Some(*id),
            _ => None,
        };
        let original_queue = match properties.get(names::ORIGINAL_QUEUE) {
            Some(PropertyValue::String(q)) => Some(q.to_string_lossy()).filter(|q| !q.is_empty()),
            _ => None,
        };
        listed.push(Listed { id: d.message_id(), original_id, original_queue });
    }
    let _ = browser.close().await;
    let _ = session.close().await;
    Ok(listed)
}

/// Staging's depth from the broker: every message it holds (those in delivery and scheduled included), those in
/// delivery, and those scheduled.
pub async fn depth(mgmt: &BrokerManagement, staging: &str) -> Result<StagingDepth, StagingError> {
    let read = Request::read(staging_mbean(mgmt, staging), &["MessageCount", "DeliveringCount", "ScheduledCount"]);
    let v = match mgmt.client().request(&read).await {
        Ok(v) => v,
        Err(e) if e.is_not_found() => {
            return Err(StagingError::Missing { queue: staging.into(), node: mgmt.client().node().into() })
        }
        Err(e) => return Err(e.into()),
    };
    let count = |k: &str| {
        v[k].as_i64().filter(|n| *n >= 0).map(i64::unsigned_abs).ok_or_else(|| {
            StagingError::Management(JolokiaError::BadAnswer {
                node: mgmt.client().node().into(),
                reason: format!("{k} of {staging} is {}, not a count", v[k]),
            })
        })
    };
    Ok(StagingDepth {
        messages: count("MessageCount")?,
        in_delivery: count("DeliveringCount")?,
        scheduled: count("ScheduledCount")?,
    })
}

/// Return to source (docs/guarantees.md, "Stop, resume, return"): the broker's move of everything visible in staging back to `source_queue` (a
/// queue name on the same broker); how many moved. Messages still in delivery to a consumer stay in staging: read
/// [`depth`] afterwards. The returned messages get new ids, no expiration, and join the tail of the source queue.
pub async fn move_back(mgmt: &BrokerManagement, staging: &str, source_queue: &str) -> Result<u64, StagingError> {
    let mbean = staging_mbean(mgmt, staging);
    let mut total = 0u64;
    // No count: a counted move cancels every matching scheduled message but moves only up to the count (see
    // docs/broker-notes.md). A second pass takes what a consumer gave back during the first; the third finds none.
    for _ in 0..3 {
        let moved = match mgmt.move_messages(&mbean, 500, None, source_queue, false, -1).await {
            Ok(n) => n.unsigned_abs(),
            Err(e) if e.is_not_found() => {
                return Err(StagingError::Missing { queue: staging.into(), node: mgmt.client().node().into() })
            }
            Err(e) => return Err(e.into()),
        };
        total += moved;
        if moved == 0 {
            break;
        }
    }
    Ok(total)
}

/// Removes the staging queue, its address and its address settings. Refuses while the queue holds messages
/// (or has a consumer) unless `force`, which destroys them. Idempotent: what is already gone is skipped. The
/// address settings go last, so the queue never exists without them.
pub async fn remove(mgmt: &BrokerManagement, spec: &StagingSpec, force: bool) -> Result<(), StagingError> {
    match depth(mgmt, &spec.name).await {
        Ok(d) if d.messages > 0 && !force => {
            return Err(StagingError::NotEmpty {
                queue: spec.name.clone(),
                messages: d.messages,
                in_delivery: d.in_delivery,
            })
        }
        Ok(_) => match mgmt.destroy_queue_with(&spec.name, force, true).await {
            Ok(()) => {}
            Err(e) if is_gone(&e) => {}
            Err(e) => return Err(refused(e, "destroy the queue", &spec.name, mgmt.client().user())),
        },
        Err(StagingError::Missing { .. }) => {}
        Err(e) => return Err(e),
    }
    match mgmt.delete_address(&spec.name, false).await {
        Ok(()) => {}
        Err(e) if is_gone(&e) => {}
        Err(e) => return Err(refused(e, "delete the address", &spec.name, mgmt.client().user())),
    }
    mgmt.remove_address_settings(&spec.name)
        .await
        .map_err(|e| refused(e, "remove the address settings", &spec.name, mgmt.client().user()))?;
    Ok(())
}

/// "Does not exist": AMQ229017 (queue), AMQ229203 (address), AMQ229049 (no queue found), or a missing MBean.
fn is_gone(e: &JolokiaError) -> bool {
    e.is_not_found()
        || e.agent().and_then(|a| a.amq_id()).is_some_and(|id| matches!(id, "AMQ229017" | "AMQ229203" | "AMQ229049"))
}

/// Every `studio.transfer.<uuid>` queue on the node with its message count, for orphans. Look-alikes
/// (`studio.transfer.orders`) and the dead message queues (`studio.dmq.*`) are never listed.
pub async fn list(mgmt: &BrokerManagement) -> Result<Vec<(String, u64)>, StagingError> {
    let pattern = ObjectName::from_canonical(format!(
        "{DOMAIN}:broker={},component=addresses,address=*,subcomponent=queues,routing-type=*,queue=\"{STAGING_PREFIX}*\"",
        quote(mgmt.broker_name())
    ));
    let found = mgmt.client().request(&Request::Search { pattern }).await?;
    let mut mbeans = Vec::new();
    let mut seen = HashSet::new();
    for name in found.as_array().into_iter().flatten().filter_map(Value::as_str) {
        let on = ObjectName::from_canonical(name);
        if let Some(queue) = on.key("queue").filter(|q| run_of_staging_queue(q).is_some()) {
            if seen.insert(queue.clone()) {
                mbeans.push((queue, on));
            }
        }
    }
    let reads: Vec<Request> = mbeans.iter().map(|(_, on)| Request::read(on.clone(), &["MessageCount"])).collect();
    let answers = mgmt.batch(&reads).await?;
    let mut out = Vec::new();
    for ((queue, _), answer) in mbeans.into_iter().zip(answers) {
        match answer {
            Ok(v) => match v.as_i64().or_else(|| v["MessageCount"].as_i64()).filter(|n| *n >= 0) {
                Some(n) => out.push((queue, n.unsigned_abs())),
                None => {
                    return Err(JolokiaError::BadAnswer {
                        node: mgmt.client().node().into(),
                        reason: format!("MessageCount of {queue} is {v}, not a count"),
                    }
                    .into())
                }
            },
            // Removed between the search and the read: not an orphan any more.
            Err(e) if e.kind == AgentErrorKind::NotFound => {}
            Err(error) => return Err(JolokiaError::Agent { node: mgmt.client().node().into(), error }.into()),
        }
    }
    out.sort();
    Ok(out)
}

/// What is left on the source of a finished selection, by cause (see [`NotTaken`]). Call it once the refills
/// found nothing more (a filter) or every id was handed to the broker (ids).
///
/// - In delivery: `countDeliveringMessages(effective filter)` — the broker checks every delivering message — or,
///   for ids, the ids among `listDeliveringMessagesAsJSON`.
/// - Scheduled: `listScheduledMessagesAsJSON`, those stamped at or before `t0` (whole queue; for a user filter the
///   same list is an upper bound, as the broker cannot select scheduled messages without moving them), or the ids
///   among it.
/// - Other: for a filter `countMessages(effective filter)` (visible, still matching); for ids the rest.
pub async fn not_taken(
    mgmt: &BrokerManagement,
    source: &ObjectName,
    selected: Selected<'_>,
) -> Result<NotTaken, StagingError> {
    match selected {
        Selected::Frozen { effective_filter, user_filter, t0_millis } => {
            let in_delivery = mgmt.count_delivering_messages(source, Some(effective_filter)).await?;
            let other = mgmt.count_messages(source, Some(effective_filter)).await?;
            let (scheduled, exact) = match mgmt.list_scheduled_messages(source).await {
                Ok(listed) => {
                    let n = listed
                        .iter()
                        .filter(|m| m["timestamp"].as_i64().is_none_or(|t| t <= t0_millis))
                        .filter(|m| m["_AMQ_SCHED_DELIVERY"].as_i64().is_none_or(|at| at > t0_millis))
                        .count() as u64;
                    (n, user_filter.is_none_or(|f| f.trim().is_empty()))
                }
                // The broker could not render the list (a NaN or infinite float property fails the whole JSON
                // listing): every scheduled message is counted, an upper bound, rather than the finish failing.
                Err(JolokiaError::Agent { .. }) => {
                    let count = scheduled_count(mgmt, source).await?.ok_or_else(|| JolokiaError::BadAnswer {
                        node: mgmt.client().node().into(),
                        reason: "ScheduledCount is not a count".into(),
                    })?;
                    (count, false)
                }
                Err(e) => return Err(e.into()),
            };
            Ok(NotTaken {
                in_delivery: in_delivery.unsigned_abs(),
                scheduled,
                scheduled_exact: exact,
                other: other.unsigned_abs(),
            })
        }
        Selected::Ids(ids) => {
            let scheduled = mgmt.list_scheduled_messages(source).await?;
            let delivering = mgmt.list_delivering_messages(source).await?;
            let ids_of =
                |list: &[Value]| -> HashSet<i64> { list.iter().filter_map(|m| m["messageID"].as_i64()).collect() };
            let (delivering, scheduled) = (ids_of(&delivering), ids_of(&scheduled));
            let mut out = NotTaken { scheduled_exact: true, ..NotTaken::default() };
            for id in ids.iter().collect::<BTreeSet<_>>() {
                if delivering.contains(id) {
                    out.in_delivery += 1;
                } else if scheduled.contains(id) {
                    out.scheduled += 1;
                } else {
                    out.other += 1;
                }
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_names_round_trip_and_look_alikes_do_not() {
        let run = Uuid::new_v4();
        let name = staging_queue_name(run);
        assert!(name.starts_with("studio.transfer."), "{name}");
        assert_eq!(run_of_staging_queue(&name), Some(run));
        assert_eq!(run_of_staging_queue("studio.transfer.orders"), None);
        assert_eq!(run_of_staging_queue(&format!("studio.dmq.{run}")), None);
        assert_eq!(run_of_staging_queue(&name.to_uppercase().replace("STUDIO.TRANSFER.", "studio.transfer.")), None);
        assert_eq!(run_of_staging_queue(&format!("{name}.x")), None);
        assert_eq!(run_of_staging_queue(&format!("studio.transfer.{}", run.simple())), None);
    }

    #[test]
    fn the_snippet_is_seed_000s_block() {
        assert!(SECURITY_SNIPPET.starts_with("<security-setting match=\"studio.transfer.#\">"));
        assert!(SECURITY_SNIPPET.ends_with("</security-setting>"));
        for p in NEEDED_PERMISSIONS {
            assert!(SECURITY_SNIPPET.contains(&format!("<permission type=\"{p}\" roles=\"amq\"/>")), "{p}");
        }
        assert_eq!(SECURITY_SNIPPET.lines().count(), 9);
    }

    #[test]
    fn browse_page_covers_four_batches_and_never_shrinks_below_the_default() {
        assert_eq!(StagingSpec { name: "s".into(), batch_size: 10 }.browse_page_size(), 200);
        assert_eq!(StagingSpec { name: "s".into(), batch_size: 500 }.browse_page_size(), 2000);
    }

    #[test]
    fn the_queue_leaves_nothing_to_the_address_defaults() {
        let v = serde_json::to_value(StagingSpec { name: "studio.transfer.x".into(), batch_size: 1 }.queue_config())
            .unwrap();
        // Every field QueueConfigurationUtils.applyDynamicDefaults@2.40.0 fills from the address settings when it
        // is absent, except group-first-key (inert with group-buckets 0 and not exclusive).
        for key in [
            "max-consumers",
            "exclusive",
            "group-rebalance",
            "group-rebalance-pause-dispatch",
            "group-buckets",
            "last-value",
            "last-value-key",
            "non-destructive",
            "consumers-before-dispatch",
            "delay-before-dispatch",
            "ring-size",
            "routing-type",
            "purge-on-no-consumers",
            "auto-create-address",
            "auto-delete",
        ] {
            assert!(v.get(key).is_some_and(|x| !x.is_null()), "{key} is left to the address settings: {v}");
        }
        assert_eq!(v["group-buckets"], 0);
        assert_eq!(v["last-value-key"], "");
        assert!(v.get("filter-string").is_none());
    }

    #[test]
    fn refusals_and_transients_are_told_apart() {
        let node = || "n".to_string();
        let transient = [
            JolokiaError::Unreachable { node: node(), reason: "refused".into() },
            JolokiaError::Timeout { node: node(), after: std::time::Duration::from_secs(1) },
            JolokiaError::Agent {
                node: node(),
                error: crate::broker::jolokia::AgentError::from_parts(500, None, "x : AMQ229245: busy"),
            },
            JolokiaError::Http { node: node(), status: 503 },
        ];
        for e in transient {
            assert!(StagingError::from(e).is_transient());
        }
        let refusals = [
            JolokiaError::NotAuthenticated { node: node(), status: 403 },
            JolokiaError::LoginThrottled { node: node(), retry_after: None },
            JolokiaError::Agent {
                node: node(),
                error: crate::broker::jolokia::AgentError::from_parts(400, None, "x : AMQ229049: No queue found"),
            },
        ];
        for e in refusals {
            assert!(StagingError::from(e).is_refusal());
        }
        assert!(StagingError::Mismatch { queue: "q".into(), differences: vec![] }.is_refusal());
        let ids_failed = |errors: &[&str]| StagingError::IdsFailed {
            staging: "s".into(),
            moved: vec![1],
            not_moved: vec![2],
            failed: errors.iter().map(|e| (3, AgentError::from_parts(500, None, e))).collect(),
        };
        assert!(ids_failed(&["x : AMQ229245: busy"]).is_transient());
        assert!(ids_failed(&["x : AMQ229245: busy", "x : AMQ229017: Queue does not exist"]).is_refusal());
        let forbidden = JolokiaError::Agent {
            node: node(),
            error: crate::broker::jolokia::AgentError::from_parts(403, None, "java.lang.Exception : forbidden"),
        };
        let e = refused(forbidden, "create the queue", "studio.transfer.x", "u");
        assert!(matches!(&e, StagingError::NotAuthorized { snippet, .. } if *snippet == SECURITY_SNIPPET));
        assert!(e.to_string().contains(SECURITY_SNIPPET), "{e}");
    }

    #[test]
    fn missing_permissions_count_only_the_users_roles() {
        let settings = vec![
            json!({"name": "amq", "send": true, "consume": true, "createDurableQueue": true, "deleteDurableQueue": true,
                "createAddress": true, "deleteAddress": true, "browse": true}),
            json!({"name": "viewer", "browse": true, "send": false}),
        ];
        assert!(missing_permissions(&["amq".into()], &settings).is_empty());
        assert_eq!(missing_permissions(&["viewer".into()], &settings).len(), 6);
        assert!(!missing_permissions(&["viewer".into()], &settings).contains(&"browse".to_string()));
        assert_eq!(missing_permissions(&[], &settings).len(), 7);
        assert!(missing_permissions(&["viewer".into(), "amq".into()], &settings).is_empty());
    }

    #[test]
    fn attribute_comparison_reads_none_and_empty_alike_only_where_both_mean_none() {
        assert!(same_attribute("Filter", &Value::Null, &json!("")));
        assert!(same_attribute("LastValueKey", &json!(""), &Value::Null));
        assert!(!same_attribute("LastValueKey", &json!(""), &json!("k")));
        assert!(same_attribute("RingSize", &json!(-1), &json!(-1.0)));
        assert!(!same_attribute("Durable", &json!(true), &Value::Null));
    }
}
