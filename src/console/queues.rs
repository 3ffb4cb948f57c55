//! Queues and Messages (issue 30): the clusters and nodes the operator may see, a node's queues with their depth,
//! and a queue's messages page by page with a selector filter box and a checkbox per row, from which "Transfer…"
//! opens the transfer dialog ([`super::transfer`]). The same library reads as the API's (`transfer::browse`); every
//! name, property and body is user input and is shown escaped (askama), a body as text in a `<pre>`.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::DateTime;
use serde::Deserialize;

use super::pages::{form_urlencoded, messages_href, queues_href, some, Chrome};
use super::session::Session;
use super::transfer::transfer_is_possible;
use super::{html, ConsoleError, ConsoleState};
use crate::api::{ApiError, FilterVerdict};
use crate::broker::browse::BrowsedMessage;
use crate::registry::store;
use crate::transfer::browse::{self, BrowseError, MessagesAsked, NodeAsked, QueuesAsked};
use crate::transfer::permissions;

/// How many queues a page lists.
const QUEUES_PAGE: usize = 100;
/// How many messages a page shows.
const MESSAGES_PAGE: usize = 50;

/// A node as a picker offers it.
pub struct NodeLink {
    /// `cluster/node`.
    pub label: String,
    /// Its queues' page.
    pub href: String,
}

/// A cluster with its nodes.
pub struct ClusterLinks {
    /// Its name.
    pub name: String,
    /// Its nodes.
    pub nodes: Vec<NodeLink>,
}

/// The clusters page.
#[derive(Template)]
#[template(path = "clusters.html")]
struct ClustersPage {
    chrome: Chrome,
    clusters: Vec<ClusterLinks>,
}

/// The clusters `operator` may see, each with links to its nodes' queues.
async fn visible_clusters(state: &ConsoleState, operator: &str) -> Result<Vec<ClusterLinks>, ConsoleError> {
    let pool = &state.api.pool;
    let mut shown = Vec::new();
    for cluster in store::list(pool).await.map_err(ApiError::from)? {
        if !permissions::can_see(pool, operator, &cluster.name).await? {
            continue;
        }
        let nodes = cluster
            .nodes
            .iter()
            .map(|n| NodeLink {
                label: format!("{}/{}", cluster.name, n.name),
                href: queues_href(&cluster.name, &n.name),
            })
            .collect();
        shown.push(ClusterLinks { name: cluster.name, nodes });
    }
    Ok(shown)
}

/// `GET /console/clusters`: the cluster → node picker.
pub async fn clusters(State(state): State<ConsoleState>, session: Session) -> Result<Response, ConsoleError> {
    let clusters = visible_clusters(&state, &session.operator).await?;
    Ok(html(ClustersPage { chrome: Chrome::of(Some(&session)), clusters }.render()))
}

/// Query of the queues page.
#[derive(Debug, Default, Deserialize)]
pub struct QueuesQuery {
    /// Only queues whose name holds this.
    #[serde(default)]
    pub name_contains: String,
    /// The previous page's last queue.
    #[serde(default)]
    pub cursor: String,
}

/// A queue's line.
pub struct QueueRow {
    name: String,
    href: String,
    address: String,
    routing: String,
    depth: String,
    consumers: String,
    paused: String,
    internal: Option<&'static str>,
}

/// The queues page.
#[derive(Template)]
#[template(path = "queues.html")]
struct QueuesPage {
    chrome: Chrome,
    cluster: String,
    node: String,
    nodes: Vec<NodeLink>,
    filter: QueuesQuery,
    queues: Vec<QueueRow>,
    next: Option<String>,
}

/// A number a page shows: `?` when not known (never 0).
fn known<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "?".into(), |v| v.to_string())
}

/// `GET /console/clusters/{cluster}/nodes/{node}/queues`.
pub async fn queues(
    State(state): State<ConsoleState>,
    session: Session,
    Path((cluster, node)): Path<(String, String)>,
    Query(filter): Query<QueuesQuery>,
) -> Result<Response, ConsoleError> {
    let at = NodeAsked { operator: &session.operator, cluster: &cluster, node: &node };
    let asked =
        QueuesAsked { name_contains: some(&filter.name_contains), after: some(&filter.cursor), limit: QUEUES_PAGE };
    let page = browse::list_queues(&state.api.pool, at, &asked).await.map_err(ApiError::from)?;
    let next = page.more.then(|| page.queues.last()).flatten().map(|last| {
        let query = form_urlencoded(&[("name_contains", &filter.name_contains), ("cursor", &last.name)]);
        format!("{}?{query}", queues_href(&cluster, &node))
    });
    let queues = page
        .queues
        .into_iter()
        .map(|q| {
            let s = q.state.clone().unwrap_or_default();
            QueueRow {
                href: messages_href(&cluster, &node, &q.name),
                address: q.address,
                routing: q.routing_type.as_upper().to_ascii_lowercase(),
                depth: known(s.message_count),
                consumers: known(s.consumer_count),
                paused: s.paused.map_or("?", |p| if p { "paused" } else { "" }).to_string(),
                internal: q.internal,
                name: q.name,
            }
        })
        .collect();
    let nodes = visible_clusters(&state, &session.operator)
        .await?
        .into_iter()
        .filter(|c| c.name == cluster)
        .flat_map(|c| c.nodes)
        .collect();
    let page = QueuesPage { chrome: Chrome::of(Some(&session)), cluster, node, nodes, filter, queues, next };
    Ok(html(page.render()))
}

/// Query of the messages page.
#[derive(Debug, Default, Deserialize)]
pub struct MessagesQuery {
    /// A selector.
    #[serde(default)]
    pub filter: String,
    /// The previous page's last message id.
    #[serde(default)]
    pub cursor: String,
}

/// A message's line.
pub struct MessageRow {
    id: i64,
    user_id: String,
    timestamp: String,
    priority: i8,
    durable: &'static str,
    size: String,
    properties: Vec<(String, &'static str, String)>,
    body: Body,
}

/// A body as a page shows it: text (escaped, in a `<pre>`), or what it is and its size.
pub enum Body {
    /// The start of a text body.
    Text {
        /// The text.
        text: String,
        /// More follows.
        truncated: bool,
    },
    /// Any other body, in words.
    Described(String),
}

impl MessageRow {
    fn of(m: BrowsedMessage) -> MessageRow {
        let size = m.body_bytes.map_or_else(|| "size not known".into(), |n| format!("{n} bytes"));
        let body = match m.text {
            Some(t) => Body::Text { text: t.text, truncated: t.truncated },
            None if m.large => Body::Described(format!("large {} body, {size}: not shown", m.body_type)),
            None => Body::Described(format!("{} body, {size}: not shown", m.body_type)),
        };
        MessageRow {
            id: m.message_id,
            user_id: m.user_id.unwrap_or_default(),
            timestamp: DateTime::from_timestamp_millis(m.timestamp)
                .map_or_else(|| m.timestamp.to_string(), |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string()),
            priority: m.priority,
            durable: if m.durable { "durable" } else { "non-durable" },
            size,
            properties: m.properties.into_iter().map(|p| (p.name, p.kind, p.value)).collect(),
            body,
        }
    }
}

/// The messages page.
#[derive(Template)]
#[template(path = "messages.html")]
struct MessagesPage {
    chrome: Chrome,
    cluster: String,
    node: String,
    queue: String,
    queues_href: String,
    /// The first page with the same filter.
    first_href: String,
    filter: String,
    filter_error: Option<String>,
    messages: Vec<MessageRow>,
    next: Option<String>,
    position_lost: bool,
    /// "Transfer…" is offered: the operator may take from this cluster and send somewhere.
    may_transfer: bool,
}

/// `GET /console/clusters/{cluster}/nodes/{node}/queues/{queue}`: a page of the queue's messages; a filter the
/// parser cannot read is shown back with its words (400), and no broker is asked.
pub async fn messages(
    State(state): State<ConsoleState>,
    session: Session,
    Path((cluster, node, queue)): Path<(String, String, String)>,
    Query(q): Query<MessagesQuery>,
) -> Result<Response, ConsoleError> {
    let after = match some(&q.cursor) {
        None => None,
        Some(c) => Some(c.parse::<i64>().map_err(|_| {
            ConsoleError::new(StatusCode::BAD_REQUEST, "the page's position is not one this console gave")
        })?),
    };
    let at = NodeAsked { operator: &session.operator, cluster: &cluster, node: &node };
    let asked = MessagesAsked { queue: &queue, filter: some(&q.filter), after, limit: MESSAGES_PAGE };
    let (status, page, filter_error) = match browse::browse_messages(&state.api.pool, at, &asked).await {
        Ok(page) => (StatusCode::OK, Some(page), None),
        Err(BrowseError::Filter(e)) => (StatusCode::BAD_REQUEST, None, Some(e.to_string())),
        Err(e) => return Err(ApiError::from(e).into()),
    };
    let may_transfer = transfer_is_possible(&state, &session.operator, &cluster).await?;
    let (messages, more, position_lost) = match page {
        Some(p) => (p.messages, p.more, p.position_lost),
        None => (Vec::new(), false, false),
    };
    let next = more.then(|| messages.last()).flatten().map(|last| {
        let query = form_urlencoded(&[("filter", &q.filter), ("cursor", &last.message_id.to_string())]);
        format!("{}?{query}", messages_href(&cluster, &node, &queue))
    });
    let page = MessagesPage {
        chrome: Chrome::of(Some(&session)),
        queues_href: queues_href(&cluster, &node),
        first_href: format!("{}?{}", messages_href(&cluster, &node, &queue), form_urlencoded(&[("filter", &q.filter)])),
        cluster,
        node,
        queue,
        filter: q.filter,
        filter_error,
        messages: messages.into_iter().map(MessageRow::of).collect(),
        next,
        position_lost,
        may_transfer,
    };
    Ok((status, html(page.render())).into_response())
}

/// Query of the filter check.
#[derive(Debug, Deserialize)]
pub struct CheckQuery {
    /// The filter as typed.
    #[serde(default)]
    pub filter: String,
}

/// `GET /console/selector/check?filter=`: the parser's verdict for the filter box as the operator types (the API's
/// `/api/v1/selector/check`, over the session: nothing under `/api/v1` reads a cookie).
pub async fn check(_session: Session, Query(q): Query<CheckQuery>) -> Json<FilterVerdict> {
    Json(FilterVerdict::of(&q.filter))
}
