//! The management operations the product needs, on one node, typed.
//!
//! Every read returns `Option` fields: `None` means the broker did not say (an attribute this version lacks, an
//! error in its place), never "fine". Operations are called by their exact Java signature
//! (artemis-management.md §1.3, §2.2, §3.2, §4).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::client::JolokiaClient;
use super::error::{AgentError, JolokiaError};
use super::object_name::{ObjectName, RoutingType};
use super::request::Request;

/// One node's broker, managed over Jolokia.
#[derive(Debug, Clone)]
pub struct BrokerManagement {
    client: JolokiaClient,
    broker: String,
}

/// The broker MBean attributes that identify a node and its HA state.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BrokerState {
    /// `Active`: serving clients (a primary, or a backup that failed over).
    pub active: Option<bool>,
    /// `Backup`: configured as a backup.
    pub backup: Option<bool>,
    /// `NodeID`: shared by a primary and its backup, so the pair is one logical node.
    pub node_id: Option<String>,
    /// `Version`, e.g. `2.40.0`.
    pub version: Option<String>,
    /// `CurrentTimeMillis` (2.40+): the broker's clock, for `t0`.
    pub current_time_millis: Option<i64>,
    /// `IDCacheSize`: the broker-wide duplicate-id cache size.
    pub id_cache_size: Option<i64>,
    /// `PersistIDCache`: whether duplicate ids survive a restart.
    pub persist_id_cache: Option<bool>,
    /// `MaxDiskUsage` (percent).
    pub max_disk_usage: Option<i64>,
    /// `DiskStoreUsage` (a fraction 0..1).
    pub disk_store_usage: Option<f64>,
    /// `GlobalMaxSize` (bytes).
    pub global_max_size: Option<i64>,
    /// `AddressMemoryUsage` (bytes).
    pub address_memory_usage: Option<i64>,
    /// `UptimeMillis`: how long this broker has been running. With `CurrentTimeMillis` it dates the broker's
    /// start, which tells whether its in-memory counters (a queue's `MessagesAcknowledged`, …) began again.
    pub uptime_millis: Option<i64>,
}

/// The attributes of [`BrokerState`], in one read.
pub const BROKER_ATTRIBUTES: &[&str] = &[
    "Active",
    "Backup",
    "NodeID",
    "Version",
    "CurrentTimeMillis",
    "IDCacheSize",
    "PersistIDCache",
    "MaxDiskUsage",
    "DiskStoreUsage",
    "GlobalMaxSize",
    "AddressMemoryUsage",
    "UptimeMillis",
];

impl BrokerState {
    /// When this broker process started, by its own clock (`CurrentTimeMillis − UptimeMillis`): another value
    /// later means it restarted, or the node failed over to its backup.
    pub fn started_millis(&self) -> Option<i64> {
        Some(self.current_time_millis? - self.uptime_millis?)
    }

    /// From a lenient read of [`BROKER_ATTRIBUTES`]: an attribute in error is unknown.
    pub fn from_read(v: &Value) -> BrokerState {
        BrokerState {
            active: v["Active"].as_bool(),
            backup: v["Backup"].as_bool(),
            node_id: v["NodeID"].as_str().map(str::to_string),
            version: v["Version"].as_str().map(str::to_string),
            current_time_millis: v["CurrentTimeMillis"].as_i64(),
            id_cache_size: v["IDCacheSize"].as_i64(),
            persist_id_cache: v["PersistIDCache"].as_bool(),
            max_disk_usage: v["MaxDiskUsage"].as_i64(),
            disk_store_usage: v["DiskStoreUsage"].as_f64(),
            global_max_size: v["GlobalMaxSize"].as_i64(),
            address_memory_usage: v["AddressMemoryUsage"].as_i64(),
            uptime_millis: v["UptimeMillis"].as_i64(),
        }
    }
}

/// The broker JVM's heap (`java.lang:type=Memory`, `HeapMemoryUsage`), in bytes. `used` counts garbage not yet
/// collected, so it is an upper bound of what the heap really holds: a check built on it errs towards caution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeapUsage {
    /// Bytes in use (live and not yet collected).
    pub used: i64,
    /// The most the heap can grow to (`-Xmx`).
    pub max: i64,
}

/// The platform MBean that reports the JVM's heap.
pub const MEMORY_MBEAN: &str = "java.lang:type=Memory";

impl HeapUsage {
    /// From a lenient read of `HeapMemoryUsage` on [`MEMORY_MBEAN`]; `None` when it is missing, in error, or
    /// the heap has no maximum (`max` is -1 when undefined).
    pub fn from_read(v: &Value) -> Option<HeapUsage> {
        let usage = &v["HeapMemoryUsage"];
        let used = usage["used"].as_i64()?;
        let max = usage["max"].as_i64().filter(|m| *m > 0)?;
        Some(HeapUsage { used, max })
    }

    /// Bytes the heap can still grow by.
    pub fn headroom(&self) -> i64 {
        (self.max - self.used).max(0)
    }
}

/// A queue's attributes, as the preview and the run read them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueueState {
    /// `RoutingType`.
    pub routing_type: Option<RoutingType>,
    /// `Filter` (`Some(None)` = no filter; `None` = unknown).
    pub filter: Option<Option<String>>,
    /// `Durable`.
    pub durable: Option<bool>,
    /// `Enabled`: a disabled queue silently drops what is routed to it.
    pub enabled: Option<bool>,
    /// `PurgeOnNoConsumers`: drops what arrives while it has no consumer.
    pub purge_on_no_consumers: Option<bool>,
    /// `LastValue`: collapses messages by key.
    pub last_value: Option<bool>,
    /// `RingSize`: -1 = not a ring.
    pub ring_size: Option<i64>,
    /// `Exclusive`.
    pub exclusive: Option<bool>,
    /// `Paused`.
    pub paused: Option<bool>,
    /// `Temporary`.
    pub temporary: Option<bool>,
    /// `AutoDelete`.
    pub auto_delete: Option<bool>,
    /// `InternalQueue` (2.34+).
    pub internal: Option<bool>,
    /// `MessageCount`: includes scheduled, paged and in-delivery messages.
    pub message_count: Option<i64>,
    /// `DeliveringCount`: dispatched to consumers, not yet acknowledged.
    pub delivering_count: Option<i64>,
    /// `ScheduledCount`.
    pub scheduled_count: Option<i64>,
    /// `PersistentSize` (bytes).
    pub persistent_size: Option<i64>,
    /// `ConsumerCount`.
    pub consumer_count: Option<i64>,
    /// `ConsumersBeforeDispatch`.
    pub consumers_before_dispatch: Option<i64>,
    /// `MessagesAcknowledged`: removed by consumers and by the broker's own moves, since the broker started.
    pub messages_acknowledged: Option<i64>,
    /// `MessagesExpired`, since the broker started.
    pub messages_expired: Option<i64>,
    /// `MessagesKilled` (sent to a dead-letter address after too many deliveries), since the broker started.
    pub messages_killed: Option<i64>,
}

/// The attributes of [`QueueState`], in one read.
pub const QUEUE_ATTRIBUTES: &[&str] = &[
    "RoutingType",
    "Filter",
    "Durable",
    "Enabled",
    "PurgeOnNoConsumers",
    "LastValue",
    "RingSize",
    "Exclusive",
    "Paused",
    "Temporary",
    "AutoDelete",
    "InternalQueue",
    "MessageCount",
    "DeliveringCount",
    "ScheduledCount",
    "PersistentSize",
    "ConsumerCount",
    "ConsumersBeforeDispatch",
    "MessagesAcknowledged",
    "MessagesExpired",
    "MessagesKilled",
];

impl QueueState {
    /// From a lenient read of [`QUEUE_ATTRIBUTES`].
    pub fn from_read(v: &Value) -> QueueState {
        let filter = match v.get("Filter") {
            Some(Value::Null) => Some(None),
            Some(Value::String(s)) if s.is_empty() => Some(None),
            // An attribute in error comes back as its error text under ignoreErrors; only a plain read of a
            // present attribute is trusted, and the caller reads Filter strictly (see `queue_state`).
            Some(Value::String(s)) => Some(Some(s.clone())),
            _ => None,
        };
        QueueState {
            routing_type: v["RoutingType"].as_str().and_then(RoutingType::parse),
            filter,
            durable: v["Durable"].as_bool(),
            enabled: v["Enabled"].as_bool(),
            purge_on_no_consumers: v["PurgeOnNoConsumers"].as_bool(),
            last_value: v["LastValue"].as_bool(),
            ring_size: v["RingSize"].as_i64(),
            exclusive: v["Exclusive"].as_bool(),
            paused: v["Paused"].as_bool(),
            temporary: v["Temporary"].as_bool(),
            auto_delete: v["AutoDelete"].as_bool(),
            internal: v["InternalQueue"].as_bool(),
            message_count: v["MessageCount"].as_i64(),
            delivering_count: v["DeliveringCount"].as_i64(),
            scheduled_count: v["ScheduledCount"].as_i64(),
            persistent_size: v["PersistentSize"].as_i64(),
            consumer_count: v["ConsumerCount"].as_i64(),
            consumers_before_dispatch: v["ConsumersBeforeDispatch"].as_i64(),
            messages_acknowledged: v["MessagesAcknowledged"].as_i64(),
            messages_expired: v["MessagesExpired"].as_i64(),
            messages_killed: v["MessagesKilled"].as_i64(),
        }
    }
}

/// What happens when an address is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum FullPolicy {
    /// Page to disk.
    Page,
    /// Block producers.
    Block,
    /// Silently drop new messages.
    Drop,
    /// Refuse new messages with an error.
    Fail,
}

impl FullPolicy {
    /// `PAGE`, `BLOCK`, `DROP` or `FAIL`.
    pub fn as_str(self) -> &'static str {
        match self {
            FullPolicy::Page => "PAGE",
            FullPolicy::Block => "BLOCK",
            FullPolicy::Drop => "DROP",
            FullPolicy::Fail => "FAIL",
        }
    }
}

/// The merged address settings that apply to one address, with Artemis 2.40's defaults filled in for every
/// field the broker did not return (2.32+ returns only what some matching setting sets; §3.2).
#[derive(Debug, Clone, PartialEq)]
pub struct AddressSettings {
    /// `addressFullMessagePolicy` (default PAGE).
    pub address_full_policy: FullPolicy,
    /// `maxSizeBytes` (default -1 = no limit of its own).
    pub max_size_bytes: i64,
    /// `maxSizeMessages` (default -1).
    pub max_size_messages: i64,
    /// `pageLimitBytes` (default -1).
    pub page_limit_bytes: i64,
    /// `pageLimitMessages` (default -1).
    pub page_limit_messages: i64,
    /// `pageFullMessagePolicy` (no default: only meaningful with a page limit).
    pub page_full_policy: Option<FullPolicy>,
    /// `maxDeliveryAttempts` (default 10).
    pub max_delivery_attempts: i64,
    /// `redistributionDelay` (default -1 = never).
    pub redistribution_delay: i64,
    /// `redeliveryDelay` (default 0).
    pub redelivery_delay: i64,
    /// `expiryDelay` (default -1).
    pub expiry_delay: i64,
    /// `minExpiryDelay` (default -1).
    pub min_expiry_delay: i64,
    /// `maxExpiryDelay` (default -1).
    pub max_expiry_delay: i64,
    /// `autoCreateQueues` (default true).
    pub auto_create_queues: bool,
    /// `autoCreateAddresses` (default true).
    pub auto_create_addresses: bool,
    /// `idCacheSize`: `None` = the broker-wide `id-cache-size` applies.
    pub id_cache_size: Option<i64>,
    /// `managementBrowsePageSize` (default 200): how many messages a filtered count or browse scans.
    pub management_browse_page_size: i64,
    /// `deadLetterAddress`.
    pub dead_letter_address: Option<String>,
    /// `expiryAddress`.
    pub expiry_address: Option<String>,
    /// `defaultPurgeOnNoConsumers` (default false).
    pub default_purge_on_no_consumers: bool,
    /// `defaultLastValueQueue` (default false).
    pub default_last_value_queue: bool,
    /// `defaultRingSize` (default -1).
    pub default_ring_size: i64,
    /// `defaultNonDestructive` (default false).
    pub default_non_destructive: bool,
    /// `defaultExclusiveQueue` (default false).
    pub default_exclusive_queue: bool,
    /// `defaultConsumersBeforeDispatch` (default 0).
    pub default_consumers_before_dispatch: i64,
    /// The JSON the broker returned, for anything not typed here.
    pub raw: Value,
}

impl AddressSettings {
    /// From `getAddressSettingsAsJSON` (2.32+ shape), filling 2.40 defaults for absent keys.
    pub fn from_json(raw: Value) -> AddressSettings {
        let i = |k: &str, d: i64| raw[k].as_i64().unwrap_or(d);
        let b = |k: &str, d: bool| raw[k].as_bool().unwrap_or(d);
        let s = |k: &str| raw[k].as_str().filter(|v| !v.is_empty()).map(str::to_string);
        let policy = |k: &str| raw[k].as_str().and_then(|p| serde_json::from_value(json!(p)).ok());
        AddressSettings {
            address_full_policy: policy("addressFullMessagePolicy").unwrap_or(FullPolicy::Page),
            max_size_bytes: i("maxSizeBytes", -1),
            max_size_messages: i("maxSizeMessages", -1),
            page_limit_bytes: i("pageLimitBytes", -1),
            page_limit_messages: i("pageLimitMessages", -1),
            page_full_policy: policy("pageFullMessagePolicy"),
            max_delivery_attempts: i("maxDeliveryAttempts", 10),
            redistribution_delay: i("redistributionDelay", -1),
            redelivery_delay: i("redeliveryDelay", 0),
            expiry_delay: i("expiryDelay", -1),
            min_expiry_delay: i("minExpiryDelay", -1),
            max_expiry_delay: i("maxExpiryDelay", -1),
            auto_create_queues: b("autoCreateQueues", true),
            auto_create_addresses: b("autoCreateAddresses", true),
            id_cache_size: raw["idCacheSize"].as_i64(),
            management_browse_page_size: i("managementBrowsePageSize", 200),
            dead_letter_address: s("deadLetterAddress"),
            expiry_address: s("expiryAddress"),
            default_purge_on_no_consumers: b("defaultPurgeOnNoConsumers", false),
            default_last_value_queue: b("defaultLastValueQueue", false),
            default_ring_size: i("defaultRingSize", -1),
            default_non_destructive: b("defaultNonDestructive", false),
            default_exclusive_queue: b("defaultExclusiveQueue", false),
            default_consumers_before_dispatch: i("defaultConsumersBeforeDispatch", 0),
            raw,
        }
    }
}

/// A queue to create (`createQueue(String json)`; kebab-case keys, `QueueConfiguration.java@2.40.0`).
/// Every field is explicit, so nothing is left to the `#` address settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct QueueConfig {
    /// Queue name.
    pub name: String,
    /// Address name.
    pub address: String,
    /// Routing type.
    pub routing_type: RoutingType,
    /// Durable.
    pub durable: bool,
    /// Filter, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_string: Option<String>,
    /// Purge when the last consumer leaves.
    pub purge_on_no_consumers: bool,
    /// Last-value queue.
    pub last_value: bool,
    /// Ring size (-1: not a ring).
    pub ring_size: i64,
    /// Non-destructive.
    pub non_destructive: bool,
    /// Exclusive.
    pub exclusive: bool,
    /// Enabled.
    pub enabled: bool,
    /// Auto-delete.
    pub auto_delete: bool,
    /// Consumers before dispatch.
    pub consumers_before_dispatch: i64,
    /// Max consumers (-1 unlimited).
    pub max_consumers: i64,
    /// Create the address too when it does not exist.
    pub auto_create_address: bool,
    /// The last-value key. `""` is explicit "none": a queue with any non-empty key is a last-value queue even
    /// when `last_value` is false, and a key left out is taken from the address's `default-last-value-key`.
    /// (JSON `null` is no way out: the broker reads it as the key `"null"`.)
    pub last_value_key: String,
    /// Milliseconds to wait for `consumers_before_dispatch` (-1: no wait).
    pub delay_before_dispatch: i64,
    /// Message groups: -1 unbounded groups (Artemis's own default), 0 grouping off, n buckets.
    pub group_buckets: i64,
    /// Rebalance groups when a consumer is added.
    pub group_rebalance: bool,
    /// Pause dispatch while rebalancing groups.
    pub group_rebalance_pause_dispatch: bool,
    /// A temporary queue (gone when its connection closes).
    pub temporary: bool,
    /// An internal queue (hidden from the console).
    pub internal: bool,
}

impl QueueConfig {
    /// A plain durable anycast queue on an address of the same name: no filter, no purge, not last-value (no
    /// key either), not a ring, destructive, not exclusive, enabled, never auto-deleted, no dispatch delay,
    /// Artemis's default message grouping. Every field the broker would otherwise take from the address
    /// settings' `default-*` values is given (`QueueConfigurationUtils.applyDynamicDefaults@2.40.0`), except
    /// `group-first-key`, which JSON cannot set to "none".
    pub fn plain_anycast(name: &str) -> QueueConfig {
        QueueConfig {
            name: name.to_string(),
            address: name.to_string(),
            routing_type: RoutingType::Anycast,
            durable: true,
            filter_string: None,
            purge_on_no_consumers: false,
            last_value: false,
            ring_size: -1,
            non_destructive: false,
            exclusive: false,
            enabled: true,
            auto_delete: false,
            consumers_before_dispatch: 0,
            max_consumers: -1,
            auto_create_address: true,
            last_value_key: String::new(),
            delay_before_dispatch: -1,
            group_buckets: -1,
            group_rebalance: false,
            group_rebalance_pause_dispatch: false,
            temporary: false,
            internal: false,
        }
    }
}

/// A member of the cluster topology as a node sees it (`listNetworkTopology`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TopologyMember {
    /// The member's NodeID.
    #[serde(rename = "nodeID")]
    pub node_id: String,
    /// `host:port` of its live server (2.32+ also writes the same under `primary`).
    pub live: Option<String>,
    /// `host:port` of its primary (2.32+).
    pub primary: Option<String>,
    /// `host:port` of its backup, if one announced itself.
    pub backup: Option<String>,
}

impl BrokerManagement {
    /// Manages the broker whose `<name>` is `broker` through `client`.
    pub fn new(client: JolokiaClient, broker: impl Into<String>) -> BrokerManagement {
        BrokerManagement { client, broker: broker.into() }
    }

    /// Learns the broker's name by searching for its one broker MBean.
    pub async fn discover(client: JolokiaClient) -> Result<BrokerManagement, JolokiaError> {
        let found = client.request(&Request::Search { pattern: ObjectName::any_broker() }).await?;
        let names: Vec<String> = found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| ObjectName::from_canonical(n.as_str()?).key("broker"))
            .collect();
        match names.as_slice() {
            [one] => Ok(BrokerManagement::new(client, one.clone())),
            _ => Err(JolokiaError::BadAnswer {
                node: client.node().to_string(),
                reason: format!("expected exactly one broker MBean, found {names:?}"),
            }),
        }
    }

    /// The Jolokia client underneath.
    pub fn client(&self) -> &JolokiaClient {
        &self.client
    }

    /// The broker's name (its MBeans' `broker=` key).
    pub fn broker_name(&self) -> &str {
        &self.broker
    }

    /// The broker MBean.
    pub fn broker_mbean(&self) -> ObjectName {
        ObjectName::broker(&self.broker)
    }

    /// A queue's MBean.
    pub fn queue_mbean(&self, address: &str, routing: RoutingType, queue: &str) -> ObjectName {
        ObjectName::queue(&self.broker, address, routing, queue)
    }

    /// A lenient read of the broker's state (attributes a version lacks are `None`).
    pub fn broker_state_request(&self) -> Request {
        Request::read_lenient(self.broker_mbean(), BROKER_ATTRIBUTES)
    }

    /// The broker JVM's heap use (see [`HeapUsage`]). The JVM's platform MBean, not the broker's: a user whose
    /// role may not read it leaves the heap unknown.
    pub fn heap_request(&self) -> Request {
        Request::read_lenient(ObjectName::from_canonical(MEMORY_MBEAN), &["HeapMemoryUsage"])
    }

    /// The broker JVM's heap use now.
    pub async fn heap(&self) -> Result<Option<HeapUsage>, JolokiaError> {
        Ok(HeapUsage::from_read(&self.client.request(&self.heap_request()).await?))
    }

    /// The broker's identity, HA state, clock, duplicate-id cache and disk.
    pub async fn broker_state(&self) -> Result<BrokerState, JolokiaError> {
        Ok(BrokerState::from_read(&self.client.request(&self.broker_state_request()).await?))
    }

    /// A lenient read of a queue's attributes.
    pub fn queue_state_request(&self, address: &str, routing: RoutingType, queue: &str) -> Request {
        Request::read_lenient(self.queue_mbean(address, routing, queue), QUEUE_ATTRIBUTES)
    }

    /// A queue's attributes; `Ok(None)` when the queue does not exist.
    pub async fn queue_state(
        &self,
        address: &str,
        routing: RoutingType,
        queue: &str,
    ) -> Result<Option<QueueState>, JolokiaError> {
        match self.client.request(&self.queue_state_request(address, routing, queue)).await {
            Ok(v) => Ok(Some(QueueState::from_read(&v))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The request for [`Self::address_settings`].
    pub fn address_settings_request(&self, address: &str) -> Request {
        Request::exec(self.broker_mbean(), "getAddressSettingsAsJSON(java.lang.String)", vec![json!(address)])
    }

    /// The merged settings that apply to `address`, defaults filled in.
    pub async fn address_settings(&self, address: &str) -> Result<AddressSettings, JolokiaError> {
        let v = self.client.request(&self.address_settings_request(address)).await?;
        Ok(AddressSettings::from_json(parse_json_string(self.client.node(), &v)?))
    }

    /// Adds (replaces) the settings of the exact match `r#match` (2.32+; persisted in the journal). `settings`
    /// uses the camelCase keys of the 2.32+ JSON. Returns what the broker now has for that match.
    pub async fn add_address_settings(&self, r#match: &str, settings: &Value) -> Result<Value, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(
                self.broker_mbean(),
                "addAddressSettings(java.lang.String,java.lang.String)",
                vec![json!(r#match), json!(settings.to_string())],
            ))
            .await?;
        parse_json_string(self.client.node(), &v)
    }

    /// Removes the settings of the exact match `r#match`.
    pub async fn remove_address_settings(&self, r#match: &str) -> Result<(), JolokiaError> {
        self.client
            .request(&Request::exec(
                self.broker_mbean(),
                "removeAddressSettings(java.lang.String)",
                vec![json!(r#match)],
            ))
            .await?;
        Ok(())
    }

    /// Creates a queue; returns the configuration the broker applied (defaults filled in), to be compared with
    /// what was asked.
    pub async fn create_queue(&self, config: &QueueConfig) -> Result<Value, JolokiaError> {
        let config_json = serde_json::to_string(config).expect("a queue configuration serialises");
        let v = self
            .client
            .request(&Request::exec(
                self.broker_mbean(),
                "createQueue(java.lang.String,boolean)",
                vec![json!(config_json), json!(false)],
            ))
            .await?;
        parse_json_string(self.client.node(), &v)
    }

    /// Destroys a queue **and its messages**; consumers are removed, and the address too when nothing else is
    /// bound to it.
    pub async fn destroy_queue(&self, queue: &str) -> Result<(), JolokiaError> {
        self.client
            .request(&Request::exec(
                self.broker_mbean(),
                "destroyQueue(java.lang.String,boolean,boolean)",
                vec![json!(queue), json!(true), json!(true)],
            ))
            .await?;
        Ok(())
    }

    /// `moveMessages(flushLimit, filter, otherQueue, rejectDuplicates, messageCount)` on the source queue: the
    /// broker moves up to `count` matching messages (`count` ≤ 0: all) to `target` on the same broker, each in its
    /// own transaction; returns how many left the source. Seen live (docs/broker-notes.md, "Staging"): messages in
    /// delivery are skipped, the count is exact, each copy has a new id, `_AMQ_ORIG_*` and no expiration, and the
    /// order within a priority is kept. **Matching scheduled messages are moved too, and a counted move takes every
    /// matching scheduled message out of the scheduler but moves only up to the count: the rest are stranded** (out
    /// of every count and listing until a restart) — never give a count when scheduled messages may match. An
    /// answer that is not a count is an error, never "0 moved".
    pub async fn move_messages(
        &self,
        source: &ObjectName,
        flush_limit: i32,
        filter: Option<&str>,
        target: &str,
        reject_duplicates: bool,
        count: i32,
    ) -> Result<i64, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(
                source.clone(),
                "moveMessages(int,java.lang.String,java.lang.String,boolean,int)",
                vec![
                    json!(flush_limit),
                    json!(filter.unwrap_or("")),
                    json!(target),
                    json!(reject_duplicates),
                    json!(count),
                ],
            ))
            .await?;
        self.count_answer("moveMessages", &v)
    }

    /// `moveMessage(id, otherQueue)`: moves one message by its broker id; false when it is not in the queue's
    /// memory: in delivery, scheduled, in a page the queue has not read back (it reads pages up to its
    /// `max-read-page-*` limits), or gone. An answer that is not a boolean is an error.
    pub async fn move_message(&self, source: &ObjectName, message_id: i64, target: &str) -> Result<bool, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(
                source.clone(),
                "moveMessage(long,java.lang.String)",
                vec![json!(message_id), json!(target)],
            ))
            .await?;
        v.as_bool().ok_or_else(|| self.bad_answer("moveMessage", "a boolean", &v))
    }

    /// `countMessages(filter)`. Without a filter it is `MessageCount` (in delivery, scheduled and paged included).
    /// With a filter the broker browses the queue: messages in delivery and scheduled ones are not counted, and at
    /// most `managementBrowsePageSize` messages are scanned, so the count is a lower bound on a deeper queue.
    pub async fn count_messages(&self, queue: &ObjectName, filter: Option<&str>) -> Result<i64, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(
                queue.clone(),
                "countMessages(java.lang.String)",
                vec![json!(filter.unwrap_or(""))],
            ))
            .await?;
        self.count_answer("countMessages", &v)
    }

    /// `browse(1, 1, filter)`: the first message matching `filter`, as the broker's message map (`messageID`, its
    /// typed property tables such as `StringProperties`), or `None` when none matches. Unlike
    /// [`Self::count_messages`] and [`Self::list_messages`], the broker counts only matching messages against
    /// this page, so it scans the whole queue until a match (`QueueControlImpl.browse(int,int,String)`, seen
    /// live: docs/broker-notes.md, "A retry from a dead-letter queue"). Messages in delivery are not seen.
    pub async fn first_message(&self, queue: &ObjectName, filter: &str) -> Result<Option<Value>, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(
                queue.clone(),
                "browse(int,int,java.lang.String)",
                vec![json!(1), json!(1), json!(filter)],
            ))
            .await?;
        match v {
            Value::Array(mut items) if items.len() <= 1 => Ok(items.pop()),
            other => Err(self.bad_answer("browse", "a list of at most one message", &other)),
        }
    }

    /// `countDeliveringMessages(filter)`: messages matching `filter` that are in delivery to a consumer (sent, not
    /// yet acknowledged). Unlike [`Self::count_messages`] it checks every delivering message: no scan limit.
    pub async fn count_delivering_messages(
        &self,
        queue: &ObjectName,
        filter: Option<&str>,
    ) -> Result<i64, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(
                queue.clone(),
                "countDeliveringMessages(java.lang.String)",
                vec![json!(filter.unwrap_or(""))],
            ))
            .await?;
        self.count_answer("countDeliveringMessages", &v)
    }

    /// `listScheduledMessagesAsJSON()`: every message of the queue waiting for its scheduled delivery time, as
    /// message maps (`messageID`, `timestamp`, properties such as `_AMQ_SCHED_DELIVERY`). No filter, no scan
    /// limit.
    pub async fn list_scheduled_messages(&self, queue: &ObjectName) -> Result<Vec<Value>, JolokiaError> {
        let v = self.client.request(&Request::exec(queue.clone(), "listScheduledMessagesAsJSON()", vec![])).await?;
        self.list_answer("listScheduledMessagesAsJSON", &v)
    }

    /// `listDeliveringMessagesAsJSON()`: the messages in delivery, per consumer
    /// (`[{"consumerName": …, "elements": [message map, …]}]`), flattened to the message maps.
    pub async fn list_delivering_messages(&self, queue: &ObjectName) -> Result<Vec<Value>, JolokiaError> {
        let v = self.client.request(&Request::exec(queue.clone(), "listDeliveringMessagesAsJSON()", vec![])).await?;
        let per_consumer = self.list_answer("listDeliveringMessagesAsJSON", &v)?;
        Ok(per_consumer
            .into_iter()
            .flat_map(|c| match c.get("elements") {
                Some(Value::Array(items)) => items.clone(),
                _ => Vec::new(),
            })
            .collect())
    }

    /// Creates a queue unless one of that name exists (`createQueue(json, ignoreIfExists=true)`). The answer is
    /// the configuration **as asked** with the address's `default-*` values filled into the fields left out —
    /// for an existing queue too, so it says nothing about that queue: read its attributes instead.
    pub async fn create_queue_if_absent(&self, config: &QueueConfig) -> Result<Value, JolokiaError> {
        let config_json = serde_json::to_string(config).expect("a queue configuration serialises");
        let v = self
            .client
            .request(&Request::exec(
                self.broker_mbean(),
                "createQueue(java.lang.String,boolean)",
                vec![json!(config_json), json!(true)],
            ))
            .await?;
        parse_json_string(self.client.node(), &v)
    }

    /// Destroys a queue and its messages. `remove_consumers` false makes the broker refuse while a consumer is
    /// attached (AMQ229025); `auto_delete_address` removes the address too when it was auto-created and nothing
    /// else is bound to it.
    pub async fn destroy_queue_with(
        &self,
        queue: &str,
        remove_consumers: bool,
        auto_delete_address: bool,
    ) -> Result<(), JolokiaError> {
        self.client
            .request(&Request::exec(
                self.broker_mbean(),
                "destroyQueue(java.lang.String,boolean,boolean)",
                vec![json!(queue), json!(remove_consumers), json!(auto_delete_address)],
            ))
            .await?;
        Ok(())
    }

    /// `deleteAddress(name, force)`: without `force` the broker refuses while queues are bound (AMQ229205); an
    /// address that does not exist is AMQ229203.
    pub async fn delete_address(&self, address: &str, force: bool) -> Result<(), JolokiaError> {
        self.client
            .request(&Request::exec(
                self.broker_mbean(),
                "deleteAddress(java.lang.String,boolean)",
                vec![json!(address), json!(force)],
            ))
            .await?;
        Ok(())
    }

    /// `getRolesAsJSON(address)`: the roles of the one most specific `security-setting` matching `address`, each
    /// with its permission flags (`send`, `consume`, `createDurableQueue`, …). Roles, not users.
    pub async fn roles_for_address(&self, address: &str) -> Result<Vec<Value>, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(self.broker_mbean(), "getRolesAsJSON(java.lang.String)", vec![json!(address)]))
            .await?;
        self.list_answer("getRolesAsJSON", &v)
    }

    /// The roles of `user` (`listUser`), as the broker's properties login module knows them. An error when the
    /// broker authenticates some other way (LDAP, certificates, a guest module).
    pub async fn user_roles(&self, user: &str) -> Result<Vec<String>, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(self.broker_mbean(), "listUser(java.lang.String)", vec![json!(user)]))
            .await?;
        let users = self.list_answer("listUser", &v)?;
        let found = users.iter().find(|u| u["username"].as_str() == Some(user));
        match found.map(|u| &u["roles"]) {
            Some(Value::Array(roles)) => Ok(roles.iter().filter_map(|r| r.as_str().map(str::to_string)).collect()),
            _ => Err(self.bad_answer("listUser", &format!("the roles of user {user}"), &v)),
        }
    }

    /// A count the broker answered: a non-negative integer, or a [`JolokiaError::BadAnswer`] — never a silent 0,
    /// which callers read as "nothing (left)".
    fn count_answer(&self, operation: &str, v: &Value) -> Result<i64, JolokiaError> {
        v.as_i64().filter(|n| *n >= 0).ok_or_else(|| self.bad_answer(operation, "a count", v))
    }

    /// A JSON array, possibly inside a string.
    fn list_answer(&self, operation: &str, v: &Value) -> Result<Vec<Value>, JolokiaError> {
        match parse_json_string(self.client.node(), v)? {
            Value::Array(items) => Ok(items),
            other => Err(self.bad_answer(operation, "a list", &other)),
        }
    }

    fn bad_answer(&self, operation: &str, expected: &str, v: &Value) -> JolokiaError {
        let mut answer = v.to_string();
        if answer.len() > 200 {
            let cut = answer.char_indices().nth(200).map_or(answer.len(), |(i, _)| i);
            answer.truncate(cut);
            answer.push('…');
        }
        JolokiaError::BadAnswer {
            node: self.client.node().into(),
            reason: format!("{operation} answered {answer}, which is not {expected}"),
        }
    }

    /// `listMessagesAsJSON(filter)`: message maps (at most `managementBrowsePageSize` scanned).
    pub async fn list_messages(&self, queue: &ObjectName, filter: Option<&str>) -> Result<Vec<Value>, JolokiaError> {
        let v = self
            .client
            .request(&Request::exec(
                queue.clone(),
                "listMessagesAsJSON(java.lang.String)",
                vec![json!(filter.unwrap_or(""))],
            ))
            .await?;
        match parse_json_string(self.client.node(), &v)? {
            Value::Array(items) => Ok(items),
            other => {
                Err(JolokiaError::BadAnswer { node: self.client.node().into(), reason: format!("not a list: {other}") })
            }
        }
    }

    /// The cluster topology this node sees.
    pub async fn network_topology(&self) -> Result<Vec<TopologyMember>, JolokiaError> {
        let v = self.client.request(&Request::exec(self.broker_mbean(), "listNetworkTopology()", vec![])).await?;
        serde_json::from_value(parse_json_string(self.client.node(), &v)?)
            .map_err(|e| JolokiaError::BadAnswer { node: self.client.node().into(), reason: e.to_string() })
    }

    /// Every queue of the broker: (address, routing type, queue), from the MBean names.
    pub async fn queues(&self) -> Result<Vec<(String, RoutingType, String)>, JolokiaError> {
        let found = self.client.request(&Request::Search { pattern: ObjectName::all_queues(&self.broker) }).await?;
        Ok(found
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| {
                let on = ObjectName::from_canonical(n.as_str()?);
                Some((on.key("address")?, RoutingType::parse(&on.key("routing-type")?)?, on.key("queue")?))
            })
            .collect())
    }

    /// Sends a batch and returns each entry's result (see [`JolokiaClient::batch`]).
    pub async fn batch(&self, requests: &[Request]) -> Result<Vec<Result<Value, AgentError>>, JolokiaError> {
        self.client.batch(requests).await
    }
}

/// Many Artemis operations return JSON inside a string; parse the second layer.
fn parse_json_string(node: &str, v: &Value) -> Result<Value, JolokiaError> {
    match v {
        Value::String(s) => {
            serde_json::from_str(s).map_err(|e| JolokiaError::BadAnswer { node: node.into(), reason: e.to_string() })
        }
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_address_settings_take_artemis_defaults() {
        let s = AddressSettings::from_json(json!({"maxSizeBytes": 1048576, "addressFullMessagePolicy": "FAIL"}));
        assert_eq!(s.address_full_policy, FullPolicy::Fail);
        assert_eq!(s.max_size_bytes, 1_048_576);
        assert_eq!(s.max_size_messages, -1);
        assert_eq!(s.max_delivery_attempts, 10);
        assert_eq!(s.redistribution_delay, -1);
        assert!(s.auto_create_queues);
        assert_eq!(s.id_cache_size, None, "absent: the broker-wide id-cache-size applies");
        assert_eq!(s.management_browse_page_size, 200);
        assert_eq!(s.page_full_policy, None);
    }

    #[test]
    fn queue_config_serialises_kebab_case_upper_routing() {
        let v = serde_json::to_value(QueueConfig::plain_anycast("q")).unwrap();
        assert_eq!(v["routing-type"], "ANYCAST");
        assert_eq!(v["purge-on-no-consumers"], false);
        assert_eq!(v["ring-size"], -1);
        assert!(v.get("filter-string").is_none());
    }

    #[test]
    fn answers_that_are_not_counts_are_errors_never_zero() {
        let endpoint = super::super::Endpoint {
            node: "n".into(),
            url: "http://127.0.0.1:9/console/jolokia".into(),
            user: "u".into(),
            password: String::new().into(),
            origin: None,
            tls: None,
        };
        let mgmt = BrokerManagement::new(JolokiaClient::new(endpoint, std::time::Duration::from_secs(1)), "b");
        assert_eq!(mgmt.count_answer("moveMessages", &json!(7)).unwrap(), 7);
        assert_eq!(mgmt.count_answer("moveMessages", &json!(0)).unwrap(), 0);
        for bad in [json!(null), json!("3"), json!(-1), json!(1.5), json!({"value": 3})] {
            let e = mgmt.count_answer("moveMessages", &bad).unwrap_err();
            assert!(matches!(e, JolokiaError::BadAnswer { .. }), "{bad}: {e}");
            assert!(e.to_string().contains("moveMessages answered"), "{e}");
        }
        assert!(mgmt.list_answer("x", &json!("[1,2]")).is_ok_and(|l| l.len() == 2));
        assert!(mgmt.list_answer("x", &json!("{}")).is_err());
    }

    #[test]
    fn topology_accepts_live_and_primary_keys() {
        let members: Vec<TopologyMember> = serde_json::from_value(
            json!([{"nodeID": "a", "live": "h:1", "primary": "h:1"}, {"nodeID": "b", "live": "h:2", "backup": "h:3"}]),
        )
        .unwrap();
        assert_eq!(members[1].backup.as_deref(), Some("h:3"));
    }
}
