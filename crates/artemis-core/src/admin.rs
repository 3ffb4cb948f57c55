//! Queue and address management over Core (core-protocol.md §12): queue query,
//! binding (address) query, create queue, delete queue; and their friendly
//! result types.

use crate::connection::{expect_null, unexpected, Link, Matching};
use crate::error::Error;
use crate::protocol::message::routing_type;
use crate::protocol::packet::{
    CreateQueueV2, SessionBindingQuery, SessionDeleteQueue, SessionQueueQuery, SessionQueueQueryResponseV3,
};
use crate::protocol::{Packet, SimpleString};

/// How an address routes messages to its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoutingType {
    /// Every queue gets a copy (topics).
    Multicast,
    /// One queue gets each message (queues).
    Anycast,
}

impl RoutingType {
    /// The wire value (`RoutingType.getType`).
    pub fn code(self) -> i8 {
        match self {
            RoutingType::Multicast => routing_type::MULTICAST,
            RoutingType::Anycast => routing_type::ANYCAST,
        }
    }

    /// From the wire value; `None` for unknown values.
    pub fn from_code(code: i8) -> Option<RoutingType> {
        match code {
            routing_type::MULTICAST => Some(RoutingType::Multicast),
            routing_type::ANYCAST => Some(RoutingType::Anycast),
            _ => None,
        }
    }
}

/// A queue as the broker describes it (SESS_QUEUEQUERY_RESP_V3, §12.1).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// Its address (for an FQQN query, the real one: check it, §8.3).
    pub address: String,
    /// Its routing type (`None` if the broker sent an unknown value).
    pub routing_type: Option<RoutingType>,
    /// Durable.
    pub durable: bool,
    /// Temporary.
    pub temporary: bool,
    /// The queue's filter.
    pub filter: Option<String>,
    /// Messages in the queue, including those being delivered.
    pub message_count: i64,
    /// Consumers attached.
    pub consumer_count: i32,
    /// −1 = unlimited.
    pub max_consumers: i32,
    /// Created automatically by the broker.
    pub auto_created: bool,
    /// Deleted when its last consumer leaves.
    pub purge_on_no_consumers: bool,
    /// Deleted automatically (address setting), if the broker says.
    pub auto_delete: Option<bool>,
    /// Exclusive queue.
    pub exclusive: Option<bool>,
    /// Last-value queue.
    pub last_value: Option<bool>,
    /// Non-destructive queue.
    pub non_destructive: Option<bool>,
    /// Consumer window the broker suggests for this queue (§9.2).
    pub default_consumer_window_size: Option<i32>,
    /// Whether the queue is enabled.
    pub enabled: Option<bool>,
}

impl QueueInfo {
    pub(crate) fn from_response(r: &SessionQueueQueryResponseV3, asked: &str) -> Option<QueueInfo> {
        if !r.exists {
            return None;
        }
        let text = |s: &Option<SimpleString>| s.as_ref().map(SimpleString::to_string_lossy);
        Some(QueueInfo {
            name: text(&r.name).unwrap_or_else(|| asked.to_string()),
            address: text(&r.address).unwrap_or_default(),
            routing_type: RoutingType::from_code(r.routing_type),
            durable: r.durable,
            temporary: r.temporary,
            filter: text(&r.filter_string),
            message_count: r.message_count,
            consumer_count: r.consumer_count,
            max_consumers: r.max_consumers,
            auto_created: r.auto_created,
            purge_on_no_consumers: r.purge_on_no_consumers,
            auto_delete: r.auto_delete,
            exclusive: r.exclusive,
            last_value: r.last_value,
            non_destructive: r.non_destructive,
            default_consumer_window_size: r.default_consumer_window_size,
            enabled: r.enabled,
        })
    }
}

/// An address as the broker describes it (SESS_BINDINGQUERY_RESP_V4/V5, §12.2).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddressInfo {
    /// The address exists.
    pub exists: bool,
    /// Names of its queues.
    pub queue_names: Vec<String>,
    /// Address setting `auto-create-queues`.
    pub auto_create_queues: bool,
    /// Address setting `auto-create-addresses`.
    pub auto_create_addresses: bool,
    /// Supports MULTICAST (only known from version 135 on; `false` before).
    pub supports_multicast: bool,
    /// Supports ANYCAST (only known from version 135 on; `false` before).
    pub supports_anycast: bool,
}

/// A queue to create (CREATE_QUEUE_V2, §12.3): durable by default, auto-delete
/// off, not marked auto-created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// The address (created when the address settings allow it).
    pub address: String,
    /// The queue's name.
    pub name: String,
    /// Routing type.
    pub routing_type: RoutingType,
    /// Durable.
    pub durable: bool,
    /// Filter (selector) of the queue.
    pub filter: Option<String>,
    /// −1 = unlimited.
    pub max_consumers: i32,
}

impl QueueConfig {
    /// A durable ANYCAST queue `name` on `address`.
    pub fn anycast(address: impl Into<String>, name: impl Into<String>) -> Self {
        QueueConfig {
            address: address.into(),
            name: name.into(),
            routing_type: RoutingType::Anycast,
            durable: true,
            filter: None,
            max_consumers: -1,
        }
    }

    /// A durable MULTICAST queue (a subscription) `name` on `address`.
    pub fn multicast(address: impl Into<String>, name: impl Into<String>) -> Self {
        QueueConfig { routing_type: RoutingType::Multicast, ..QueueConfig::anycast(address, name) }
    }

    /// Sets the filter.
    pub fn filter(mut self, filter: impl Into<String>) -> Self {
        self.filter = Some(filter.into());
        self
    }

    /// Sets durability.
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    fn packet(&self) -> CreateQueueV2 {
        let mut p = CreateQueueV2::anycast(self.address.as_str(), self.name.as_str());
        p.routing_type = self.routing_type.code();
        p.durable = self.durable;
        p.filter_string = self.filter.as_deref().map(SimpleString::new);
        p.max_consumers = self.max_consumers;
        // "auto-delete off" explicitly, whatever the address settings say.
        p.auto_delete = Some(false);
        p
    }
}

pub(crate) async fn queue_query(link: &Link, channel: i64, queue: &str) -> Result<Option<QueueInfo>, Error> {
    let op = "queue query";
    let packet = SessionQueueQuery { queue_name: queue.into() };
    match link.call(channel, packet, Matching::InOrder, op).await? {
        Packet::SessionQueueQueryResponseV3(r) => Ok(QueueInfo::from_response(&r, queue)),
        other => Err(unexpected(channel, &other, op)),
    }
}

pub(crate) async fn binding_query(link: &Link, channel: i64, address: &str) -> Result<AddressInfo, Error> {
    let op = "binding query";
    let packet = SessionBindingQuery { address: address.into() };
    let (r, multicast, anycast) = match link.call(channel, packet, Matching::InOrder, op).await? {
        Packet::SessionBindingQueryResponseV5(r) => (r.result, r.supports_multicast, r.supports_anycast),
        Packet::SessionBindingQueryResponseV4(r) => (r, false, false),
        other => return Err(unexpected(channel, &other, op)),
    };
    Ok(AddressInfo {
        exists: r.exists,
        queue_names: r.queue_names.iter().map(SimpleString::to_string_lossy).collect(),
        auto_create_queues: r.auto_create_queues,
        auto_create_addresses: r.auto_create_addresses,
        supports_multicast: multicast,
        supports_anycast: anycast,
    })
}

pub(crate) async fn create_queue(link: &Link, channel: i64, config: &QueueConfig) -> Result<(), Error> {
    let op = "create queue";
    let answer = link.call(channel, config.packet(), Matching::InOrder, op).await?;
    expect_null(channel, answer, op)
}

pub(crate) async fn delete_queue(link: &Link, channel: i64, queue: &str) -> Result<(), Error> {
    let op = "delete queue";
    let packet = SessionDeleteQueue { queue_name: queue.into() };
    link.call_null(channel, packet, Matching::InOrder, op).await
}
