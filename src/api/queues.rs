//! Queues and messages: what the console's Queues and Messages screens (and the Studio's) show before anything
//! moves — a node's queues with their depth, a page of a queue's messages browsed over Core, and the selector
//! parser's verdict on a filter as it is typed. Nothing is changed on any broker (`transfer::browse`).

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::ApiState;
use crate::broker::browse::{BrowseFailure, BrowsedMessage, MAX_PAGE};
use crate::transfer::browse::{self, BrowseError, MessagesAsked, NodeAsked, QueueLine, QueuesAsked};
use crate::transfer::plan::{parse_filter, FilterError};

impl From<BrowseError> for ApiError {
    fn from(e: BrowseError) -> ApiError {
        match e {
            BrowseError::Service(e) => e.into(),
            BrowseError::Filter(e) => filter_refused(&e),
            BrowseError::NoSuchQueue { .. } => ApiError::not_found(e.to_string()),
            BrowseError::Page(BrowseFailure::TooDeep { .. }) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "browse-limit", e.to_string())
            }
            BrowseError::Page(other) => ApiError::broker_unreachable(&other.to_string()),
            BrowseError::Broker(words) => ApiError::broker_unreachable(&words),
        }
    }
}

/// 400 with the parser's words: what it expected, and where.
pub(crate) fn filter_refused(e: &FilterError) -> ApiError {
    ApiError::bad_request("invalid-filter", e.to_string())
}

/// A limit in `1..=max`, `default` when absent; 400 otherwise.
fn limit_in(limit: Option<i64>, default: usize, max: usize) -> Result<usize, ApiError> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=max as i64).contains(&n) => Ok(n as usize),
        Some(_) => Err(ApiError::bad_request("invalid-request", format!("limit must be between 1 and {max}"))),
    }
}

/// The most queues a page lists.
pub const MAX_QUEUES: usize = 500;

/// Query of `GET /api/v1/clusters/{cluster}/nodes/{node}/queues`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct QueuesQuery {
    /// Only queues whose name holds this text.
    pub name_contains: Option<String>,
    /// The next page: the `next` of the previous answer (the last queue's name).
    pub cursor: Option<String>,
    /// At most this many (1–500, default 100).
    #[param(minimum = 1, maximum = 500, default = 100)]
    pub limit: Option<i64>,
}

/// A queue of a node.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueShown {
    /// Its name.
    pub name: String,
    /// Its address.
    pub address: String,
    /// `anycast` or `multicast`.
    pub routing_type: String,
    /// Its messages (MessageCount: scheduled, paged and in-delivery ones included); absent when not read.
    pub depth: Option<i64>,
    /// Its consumers; absent when not read.
    pub consumers: Option<i64>,
    /// Messages dispatched to consumers and not yet acknowledged; absent when not read.
    pub delivering: Option<i64>,
    /// Paused (delivers nothing to consumers); absent when not read.
    pub paused: Option<bool>,
    /// Not an application's queue: a run's staging queue, or the broker's own.
    pub internal: bool,
    /// Why it is internal, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub internal_because: Option<String>,
}

impl From<QueueLine> for QueueShown {
    fn from(q: QueueLine) -> QueueShown {
        let s = q.state.unwrap_or_default();
        QueueShown {
            name: q.name,
            address: q.address,
            routing_type: q.routing_type.as_upper().to_ascii_lowercase(),
            depth: s.message_count,
            consumers: s.consumer_count,
            delivering: s.delivering_count,
            paused: s.paused,
            internal: q.internal.is_some(),
            internal_because: q.internal.map(str::to_string),
        }
    }
}

/// The answer of `GET /api/v1/clusters/{cluster}/nodes/{node}/queues`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Queues {
    /// The queues, by name.
    pub queues: Vec<QueueShown>,
    /// The `cursor` of the next page, with the same filter; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// `GET /api/v1/clusters/{cluster}/nodes/{node}/queues`.
#[utoipa::path(get, path = "/clusters/{cluster}/nodes/{node}/queues", operation_id = "listQueues",
    tags = ["clusters"], summary = "A node's queues",
    description = "The node's queues by name, a page at a time, with their depth, consumers, routing type, address \
        and whether they are paused, read through the broker's management. A run's staging queue and the broker's \
        own queues are marked `internal`, not hidden. Needs only to see the cluster.",
    params(
        ("cluster" = String, Path, description = "The cluster's registered name"),
        ("node" = String, Path, description = "The node's name in the cluster"),
        QueuesQuery
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of queues", body = Queues),
        (status = 400, description = "A limit out of range or an unknown query field (invalid-request)",
            body = Problem),
        (status = 404, description = "No such cluster or node, or one the operator may not see (not-found)",
            body = Problem),
        (status = 422, description = "The cluster's credentials are not set (missing-credentials)", body = Problem),
        (status = 502, description = "The node's management could not be asked (discovery)", body = Problem),
    ))]
pub async fn queues(
    State(state): State<ApiState>,
    caller: Caller,
    Path((cluster, node)): Path<(String, String)>,
    query: Result<Query<QueuesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Queues>, ApiError> {
    let Query(q) = query?;
    let limit = limit_in(q.limit, 100, MAX_QUEUES)?;
    let at = NodeAsked { operator: &caller.operator, cluster: &cluster, node: &node };
    let asked = QueuesAsked { name_contains: q.name_contains.as_deref(), after: q.cursor.as_deref(), limit };
    let page = browse::list_queues(&state.pool, at, &asked).await?;
    let next = page.more.then(|| page.queues.last().map(|q| q.name.clone())).flatten();
    Ok(Json(Queues { queues: page.queues.into_iter().map(QueueShown::from).collect(), next }))
}

/// Query of `GET /api/v1/clusters/{cluster}/nodes/{node}/queues/{queue}/messages`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// An Artemis core selector (the parser a run uses reads it; the broker is given the parser's writing of it).
    pub filter: Option<String>,
    /// The next page: the `next` of the previous answer (the last message's id).
    pub cursor: Option<String>,
    /// At most this many (1–200, default 50).
    #[param(minimum = 1, maximum = 200, default = 50)]
    pub limit: Option<i64>,
}

/// A message property.
#[derive(Debug, Serialize, ToSchema)]
pub struct PropertyShown {
    /// Its name.
    pub name: String,
    /// `string`, `long`, `int`, `short`, `byte`, `boolean`, `double`, `float`, `char`, `bytes` or `null`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its value as text (bytes in hexadecimal, at most 64 of them).
    pub value: String,
}

/// A message as browsed.
#[derive(Debug, Serialize, ToSchema)]
pub struct MessageShown {
    /// The broker's message id on this node (what a selection of ids names).
    pub message_id: i64,
    /// The JMSMessageID (`ID:<uuid>`), when the producer set one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// When it was made (the broker's `AMQTimestamp`).
    pub timestamp: Option<DateTime<Utc>>,
    /// 0–9.
    pub priority: i8,
    /// Kept on disk by the broker.
    pub durable: bool,
    /// When it expires; absent: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// The body's size in bytes; absent when the broker did not record a large message's.
    pub body_bytes: Option<i64>,
    /// A large message: its body is not shown.
    pub large: bool,
    /// `text`, `bytes`, `map`, `stream`, `object` or `default`.
    pub body_type: String,
    /// A text body's first 1 KiB (plain text: never to be interpreted as HTML); absent for any other body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_text: Option<String>,
    /// The text body is longer than `body_text`.
    pub body_truncated: bool,
    /// Its properties.
    pub properties: Vec<PropertyShown>,
}

impl From<BrowsedMessage> for MessageShown {
    fn from(m: BrowsedMessage) -> MessageShown {
        let (body_text, body_truncated) = match m.text {
            Some(t) => (Some(t.text), t.truncated),
            None => (None, false),
        };
        MessageShown {
            message_id: m.message_id,
            user_id: m.user_id,
            timestamp: DateTime::from_timestamp_millis(m.timestamp),
            priority: m.priority,
            durable: m.durable,
            expires_at: m.expiration.and_then(DateTime::from_timestamp_millis),
            body_bytes: m.body_bytes,
            large: m.large,
            body_type: m.body_type.to_string(),
            body_text,
            body_truncated,
            properties: m
                .properties
                .into_iter()
                .map(|p| PropertyShown { name: p.name, kind: p.kind.to_string(), value: p.value })
                .collect(),
        }
    }
}

/// The answer of `GET /api/v1/clusters/{cluster}/nodes/{node}/queues/{queue}/messages`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Messages {
    /// The messages, in the queue's order (by priority, then arrival).
    pub messages: Vec<MessageShown>,
    /// The `cursor` of the next page, with the same filter; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The message the page was to start after has left the queue (consumed, moved or expired): start again from
    /// the first page.
    pub position_lost: bool,
}

/// The message id a cursor names; 400 for any other text.
fn cursor_id(cursor: &str) -> Result<i64, ApiError> {
    cursor
        .parse()
        .ok()
        .filter(|id: &i64| *id >= 1)
        .ok_or_else(|| ApiError::bad_request("invalid-request", "the cursor is not one this service gave (use `next`)"))
}

/// `GET /api/v1/clusters/{cluster}/nodes/{node}/queues/{queue}/messages`.
#[utoipa::path(get, path = "/clusters/{cluster}/nodes/{node}/queues/{queue}/messages", operation_id = "browseMessages",
    tags = ["clusters"], summary = "A page of a queue's messages",
    description = "A page of the queue's messages, browsed over Core: nothing is consumed, no delivery count \
        rises. Each message with its id, user id, timestamp, priority, durability, size and properties, and the \
        first 1 KiB of a text body (plain text); a large or binary body is named with its size only. The filter \
        is read by the parser a run uses: one it cannot read is a 400 saying where and why, before any broker is \
        asked. Needs message:read (or message:move) on the cluster.",
    params(
        ("cluster" = String, Path, description = "The cluster's registered name"),
        ("node" = String, Path, description = "The node's name in the cluster"),
        ("queue" = String, Path, description = "The queue's name"),
        MessagesQuery
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of messages", body = Messages),
        (status = 400, description = "A filter the parser cannot read (invalid-filter), a limit out of range, a \
            cursor this service did not give or an unknown query field (invalid-request)", body = Problem),
        (status = 403, description = "The operator may not read the cluster's messages (missing-grant)",
            body = Problem),
        (status = 404, description = "No such cluster, node or queue, or a cluster the operator may not see \
            (not-found)", body = Problem),
        (status = 422, description = "The cluster's credentials are not set (missing-credentials), or the page \
            starts deeper than a page reads past (browse-limit)", body = Problem),
        (status = 502, description = "The node could not be browsed (discovery)", body = Problem),
    ))]
pub async fn messages(
    State(state): State<ApiState>,
    caller: Caller,
    Path((cluster, node, queue)): Path<(String, String, String)>,
    query: Result<Query<MessagesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Messages>, ApiError> {
    let Query(q) = query?;
    let limit = limit_in(q.limit, 50, MAX_PAGE)?;
    let after = q.cursor.as_deref().map(cursor_id).transpose()?;
    let at = NodeAsked { operator: &caller.operator, cluster: &cluster, node: &node };
    let asked = MessagesAsked { queue: &queue, filter: q.filter.as_deref(), after, limit };
    let page = browse::browse_messages(&state.pool, at, &asked).await?;
    let next = page.more.then(|| page.messages.last().map(|m| m.message_id.to_string())).flatten();
    Ok(Json(Messages {
        messages: page.messages.into_iter().map(MessageShown::from).collect(),
        next,
        position_lost: page.position_lost,
    }))
}

/// Query of `GET /api/v1/selector/check`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CheckQuery {
    /// The selector to read.
    pub filter: String,
}

/// The parser's verdict on a filter.
#[derive(Debug, Serialize, ToSchema)]
pub struct FilterVerdict {
    /// The parser reads it (the broker may still refuse it by a type rule, as `5 AND x`).
    pub readable: bool,
    /// How it reads, fully parenthesised: what the broker would be given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reads_as: Option<String>,
    /// Why it cannot be read, in words with the position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the trouble is: characters before it (0 is the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// Its line, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Its column in the line, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

impl FilterVerdict {
    /// The verdict on `text`.
    pub fn of(text: &str) -> FilterVerdict {
        match parse_filter(text) {
            Ok(s) => FilterVerdict {
                readable: true,
                reads_as: Some(s.to_string()),
                error: None,
                offset: None,
                line: None,
                column: None,
            },
            Err(e) => FilterVerdict {
                readable: false,
                reads_as: None,
                error: Some(e.to_string()),
                offset: Some(e.offset),
                line: Some(e.line),
                column: Some(e.column),
            },
        }
    }
}

/// `GET /api/v1/selector/check`: the parser's verdict, for a filter box checked as the operator types.
#[utoipa::path(get, path = "/selector/check", operation_id = "checkSelector", tags = ["clusters"],
    summary = "Check a filter",
    description = "Reads the filter with the parser a run uses and says whether it reads, how (what the broker \
        would be given), or why not and where. No broker is asked: a filter that reads may still be refused by \
        the broker for a type rule.",
    params(CheckQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The verdict", body = FilterVerdict),
        (status = 400, description = "No filter given or an unknown query field (invalid-request)", body = Problem),
    ))]
pub async fn check(
    _caller: Caller,
    query: Result<Query<CheckQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<FilterVerdict>, ApiError> {
    let Query(q) = query?;
    Ok(Json(FilterVerdict::of(&q.filter)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_that_does_not_read_is_refused_in_the_parsers_words_with_its_place() {
        let verdict = FilterVerdict::of("color = 'red' AND");
        assert!(!verdict.readable);
        assert_eq!((verdict.line, verdict.column), (Some(1), Some(18)));
        let words = verdict.error.unwrap();
        assert!(words.starts_with("the filter cannot be read at position 18: expected"), "{words}");
        let e = filter_refused(&parse_filter("x = 'open").unwrap_err());
        assert_eq!((e.status, e.slug), (StatusCode::BAD_REQUEST, "invalid-filter"));
        assert!(e.message.contains("never ends"), "{}", e.message);
        let ok = FilterVerdict::of("color = 'red'");
        assert_eq!(ok.reads_as.as_deref(), Some("(color = 'red')"));
    }

    #[test]
    fn a_cursor_is_a_message_id() {
        assert_eq!(cursor_id("42").unwrap(), 42);
        for bad in ["", "0", "-3", "x", "4.5"] {
            assert_eq!(cursor_id(bad).unwrap_err().slug, "invalid-request", "{bad}");
        }
    }
}
