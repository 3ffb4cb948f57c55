//! The transfer dialog (issue 30): from the Messages page, the ticked messages (the library's selection of ids), the
//! messages the filter matches, or the whole queue; Move or Copy, as the operator's grants allow; a target cluster
//! and node from the clusters they may see — those they may not send to listed, disabled, with the reason
//! (`service::targets_for`, as the API's targets) — and a queue. Or **Redistribute to a node** (SPEC §1): a move
//! into the queue of the same name on another node of the source's cluster — the same library call as a Move, its
//! target fixed but for the node, the source node listed disabled, saying why. **Preview** is the API's library call
//! (`service::preview_and_store`), made on the console's pool so its audit row says "console"; its page shows the
//! findings in the three kinds with their codes, words and escaped snippets, a checkbox to acknowledge each that
//! needs it, and the source queue's name to type (and the cap to override) when the preview says so. **Execute**
//! is `actions::execute`, as the API's; then the run's page.
//!
//! Every form works without JavaScript; the ids and acknowledgements are repeated form fields, read with
//! `form_urlencoded` (serde's form reader takes no repeated keys).

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::pages::{messages_href, mode_words, segment, visible_run, Chrome};
use super::session::Session;
use super::{html, store, ConsoleError, ConsoleState};
use crate::api::ApiError;
use crate::jobs::settings;
use crate::jobs::RunState;
use crate::registry::store as registry;
use crate::transfer::actions::{self, Confirmation};
use crate::transfer::browse::{self, NodeAsked, QueuesAsked};
use crate::transfer::permissions::{self, Permission};
use crate::transfer::plan::parse_filter;
use crate::transfer::service::{preview_and_store, targets_for, PreviewRequest};
use crate::transfer::{Mode, PreviewSettings, QueueRef, Selection};

/// The most ticked messages one dialog takes (the Messages page shows at most a page of them).
const MAX_IDS: usize = 200;

/// The modes `operator` may take messages from `cluster` in: Move with `message:move`, Copy with `message:read`.
async fn modes_on(state: &ConsoleState, operator: &str, cluster: &str) -> Result<Vec<Mode>, ConsoleError> {
    let mut modes = Vec::new();
    for mode in [Mode::Move, Mode::Copy] {
        if permissions::has_grant(&state.api.pool, operator, cluster, Permission::on_source(mode)).await? {
            modes.push(mode);
        }
    }
    Ok(modes)
}

/// Whether a transfer from `cluster` could start for `operator`: they may move or copy from it, and send to some
/// cluster they see. The Messages page offers "Transfer…" only then.
pub async fn transfer_is_possible(state: &ConsoleState, operator: &str, cluster: &str) -> Result<bool, ConsoleError> {
    if modes_on(state, operator, cluster).await?.is_empty() {
        return Ok(false);
    }
    let targets = targets_for(&state.api.pool, operator, cluster).await.map_err(ApiError::from)?;
    Ok(targets.iter().any(|t| t.enabled))
}

/// What the dialog was asked to take, as the Messages page sends it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// The source cluster.
    pub cluster: String,
    /// The source node.
    pub node: String,
    /// The source queue.
    pub queue: String,
    /// `ids`, `filter` or `all`.
    pub take: String,
    /// The ticked message ids.
    pub ids: Vec<i64>,
    /// The filter box's text.
    pub filter: String,
}

impl Asked {
    /// From form pairs: repeated `id` fields (or one `ids` field of comma-separated ids), the rest once.
    pub fn from_pairs(pairs: &[u8]) -> Result<Asked, ConsoleError> {
        let mut asked = Asked::default();
        let bad = || ConsoleError::new(StatusCode::BAD_REQUEST, "a message id is a whole number above 0");
        for (key, value) in form_urlencoded::parse(pairs) {
            match key.as_ref() {
                "cluster" => asked.cluster = value.into_owned(),
                "node" => asked.node = value.into_owned(),
                "queue" => asked.queue = value.into_owned(),
                "take" => asked.take = value.into_owned(),
                "filter" => asked.filter = value.into_owned(),
                "id" | "ids" => {
                    for id in value.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                        asked.ids.push(id.parse().ok().filter(|n: &i64| *n >= 1).ok_or_else(bad)?);
                    }
                }
                _ => {}
            }
        }
        asked.ids.sort_unstable();
        asked.ids.dedup();
        if asked.ids.len() > MAX_IDS {
            return Err(ConsoleError::new(StatusCode::BAD_REQUEST, format!("tick at most {MAX_IDS} messages")));
        }
        Ok(asked)
    }

    /// The library's selection; a refusal in words when it names nothing or its filter cannot be read.
    pub fn selection(&self) -> Result<Selection, String> {
        match self.take.as_str() {
            "ids" if self.ids.is_empty() => {
                Err("Tick at least one message, or take the filter or the whole queue.".into())
            }
            "ids" => Ok(Selection::Ids(self.ids.clone())),
            "filter" if self.filter.trim().is_empty() => {
                Err("The filter is empty: to take every message, take the whole queue.".into())
            }
            "filter" => {
                parse_filter(&self.filter).map(|_| Selection::Filter(self.filter.clone())).map_err(|e| e.to_string())
            }
            "all" => Ok(Selection::All),
            other => {
                Err(format!("{other:?} is not a selection: take the ticked messages, the filter or the whole queue"))
            }
        }
    }

    /// The selection in words.
    fn words(&self) -> String {
        match self.take.as_str() {
            "ids" => {
                let ids: Vec<String> = self.ids.iter().map(i64::to_string).collect();
                format!("the {} ticked message(s): ids {}", self.ids.len(), ids.join(", "))
            }
            "filter" => format!("every message matching the filter {}", self.filter),
            _ => "the whole queue".into(),
        }
    }
}

/// A way to transfer as the dialog offers it: `move`, `copy` or `redistribute`, in words, or disabled saying why.
pub struct ModeOption {
    /// The form's value.
    value: &'static str,
    /// What it does.
    words: String,
    /// Why it may not be chosen; `None`: it may.
    disabled: Option<String>,
}

/// A node of the source's cluster as the redistribution's node picker lists it.
pub struct NodeOption {
    /// The node's name.
    name: String,
    /// Why it may not be chosen (the source node itself, a cluster the operator may not send to); `None`: it may.
    disabled: Option<String>,
    /// Whether it is the one chosen.
    chosen: bool,
}

/// Why the source node is no target of a redistribution, in the words the picker and a refusal both say.
fn source_node_words(asked: &Asked) -> String {
    format!(
        "{} is the source node: a redistribution moves the messages to another node of {}",
        asked.node, asked.cluster
    )
}

/// The target of a redistribution of `asked` to `node`: the queue of the same name on that node of the source's
/// cluster; a refusal in words for no node or the source node.
fn redistribution_target(asked: &Asked, node: &str) -> Result<QueueRef, String> {
    let node = node.trim();
    if node.is_empty() {
        return Err(format!("Choose a node of {} to redistribute to.", asked.cluster));
    }
    if node == asked.node {
        return Err(format!("{}.", source_node_words(asked)));
    }
    Ok(QueueRef { cluster: asked.cluster.clone(), node: node.to_string(), queue: asked.queue.clone(), address: None })
}

/// What the dialog was last set to (a refused preview shows it again as it was sent).
#[derive(Debug, Clone, Default)]
pub struct Picked {
    /// `move`, `copy` or `redistribute`.
    mode: String,
    /// `<cluster>/<node>` of a move's or a copy's target.
    target: String,
    /// The node a redistribution goes to.
    node: String,
}

impl Picked {
    fn from_pairs(pairs: &[u8]) -> Picked {
        Picked { mode: field(pairs, "mode"), target: field(pairs, "target"), node: field(pairs, "redistribute_to") }
    }
}

/// A target node as the picker lists it.
pub struct TargetOption {
    /// `<cluster>/<node>`, each percent-encoded.
    value: String,
    /// `cluster / node`.
    label: String,
    /// Why it may not be chosen; `None`: it may.
    disabled: Option<String>,
    /// Whether it is the one chosen (whose queues the queue picker lists).
    chosen: bool,
}

/// The dialog.
#[derive(Template)]
#[template(path = "transfer_new.html")]
struct DialogPage {
    chrome: Chrome,
    asked: Asked,
    ids: String,
    selection_words: String,
    back: String,
    modes: Vec<ModeOption>,
    /// The mode checked.
    mode: String,
    targets: Vec<TargetOption>,
    /// The nodes of the source's cluster, for a redistribution; empty when it is not offered.
    nodes: Vec<NodeOption>,
    target_queue: String,
    /// The chosen target node's queues (a first page), for the queue picker; a name may also be typed.
    target_queues: Vec<String>,
    /// `cluster / node` whose queues the picker lists.
    target_queues_of: String,
    form_token: String,
    error: Option<String>,
}

/// The dialog for `asked`, set as `picked`, with `error` if a preview was refused.
async fn dialog(
    state: &ConsoleState,
    session: &Session,
    asked: Asked,
    picked: &Picked,
    error: Option<String>,
) -> Result<DialogPage, ConsoleError> {
    let operator = &session.operator;
    let allowed = modes_on(state, operator, &asked.cluster).await?;
    let targets = targets_for(&state.api.pool, operator, &asked.cluster).await.map_err(ApiError::from)?;
    if allowed.is_empty() || !targets.iter().any(|t| t.enabled) {
        return Err(ConsoleError::new(
            StatusCode::FORBIDDEN,
            format!("{operator} may not start a transfer from cluster {}: it needs message:move or message:read on it and message:send on a target", asked.cluster),
        ));
    }
    let clusters = registry::list(&state.api.pool).await.map_err(ApiError::from)?;
    let mut modes: Vec<ModeOption> = allowed
        .iter()
        .map(|m| match m {
            Mode::Move => {
                ModeOption { value: "move", words: "Move: the messages leave the source queue".into(), disabled: None }
            }
            Mode::Copy => {
                ModeOption { value: "copy", words: "Copy: the source queue is untouched".into(), disabled: None }
            }
        })
        .collect();
    let mut nodes = Vec::new();
    if allowed.contains(&Mode::Move) {
        let source_nodes: Vec<String> = clusters
            .iter()
            .find(|c| c.name == asked.cluster)
            .map(|c| c.nodes.iter().map(|n| n.name.clone()).collect())
            .unwrap_or_default();
        let send_refused = targets.iter().find(|t| t.cluster == asked.cluster).and_then(|t| t.reason.clone());
        nodes = redistribution_nodes(&asked, &source_nodes, send_refused.as_deref(), &picked.node);
        let why_not = nodes
            .iter()
            .all(|n| n.disabled.is_some())
            .then(|| send_refused.unwrap_or_else(|| format!("{} has no other node", asked.cluster)));
        modes.push(ModeOption {
            value: "redistribute",
            words: format!("Redistribute to a node: a move to {} on another node of {}", asked.queue, asked.cluster),
            disabled: why_not,
        });
    }
    let offered = |value: &str| modes.iter().any(|m| m.value == value && m.disabled.is_none());
    let mode = if offered(&picked.mode) { picked.mode.clone() } else { modes[0].value.to_string() };
    let chosen = picked.target.as_str();
    let mut options = Vec::new();
    for target in targets {
        let Some(cluster) = clusters.iter().find(|c| c.name == target.cluster) else { continue };
        for node in &cluster.nodes {
            options.push(TargetOption {
                value: format!("{}/{}", segment(&cluster.name), segment(&node.name)),
                label: format!("{} / {}", cluster.name, node.name),
                disabled: target.reason.clone(),
                chosen: false,
            });
        }
    }
    // The node asked for when it may be chosen, else the first that may: the picker lists its queues.
    let node_of = |value: &str| value.split_once('/').map(|(c, n)| (decoded(c), decoded(n)));
    let asked_for = node_of(chosen);
    let pick =
        options.iter().position(|o| o.disabled.is_none() && asked_for.is_some() && node_of(&o.value) == asked_for);
    let pick = pick.or_else(|| options.iter().position(|o| o.disabled.is_none()));
    let (mut target_queues, mut target_queues_of) = (Vec::new(), String::new());
    if let Some(at) = pick {
        options[at].chosen = true;
        target_queues_of = options[at].label.clone();
        let (cluster, node) =
            options[at].value.split_once('/').map(|(c, n)| (decoded(c), decoded(n))).unwrap_or_default();
        target_queues = queue_names(state, session, &cluster, &node).await;
    }
    Ok(DialogPage {
        chrome: Chrome::of(Some(session)),
        ids: asked.ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","),
        selection_words: asked.words(),
        back: messages_href(&asked.cluster, &asked.node, &asked.queue),
        target_queue: asked.queue.clone(),
        asked,
        modes,
        mode,
        targets: options,
        nodes,
        target_queues,
        target_queues_of,
        form_token: session.form_token.clone(),
        error,
    })
}

/// The nodes a redistribution of `asked` may go to, of the source cluster's `nodes`: each but the source node, unless
/// the operator may not send to the cluster (`send_refused`, the reason); `picked` chosen when it may be, else the
/// first that may.
fn redistribution_nodes(asked: &Asked, nodes: &[String], send_refused: Option<&str>, picked: &str) -> Vec<NodeOption> {
    let mut options: Vec<NodeOption> = nodes
        .iter()
        .map(|name| {
            let disabled =
                if *name == asked.node { Some(source_node_words(asked)) } else { send_refused.map(str::to_string) };
            NodeOption { name: name.clone(), disabled, chosen: false }
        })
        .collect();
    let pick = options.iter().position(|n| n.disabled.is_none() && n.name == picked);
    if let Some(at) = pick.or_else(|| options.iter().position(|n| n.disabled.is_none())) {
        options[at].chosen = true;
    }
    options
}

/// The names of a first page of `node`'s queues, for the queue picker: none when they cannot be listed (the
/// operator types the name; the preview then says what is wrong with it).
async fn queue_names(state: &ConsoleState, session: &Session, cluster: &str, node: &str) -> Vec<String> {
    let at = NodeAsked { operator: &session.operator, cluster, node };
    let asked = QueuesAsked { name_contains: None, after: None, limit: PICKER_QUEUES };
    match browse::list_queues(&state.api.pool, at, &asked).await {
        Ok(page) => page.queues.into_iter().filter(|q| q.internal.is_none()).map(|q| q.name).collect(),
        Err(e) => {
            tracing::debug!(error = %e, cluster, node, "the queue picker could not list the target's queues");
            Vec::new()
        }
    }
}

/// How many of a target node's queues the picker lists.
const PICKER_QUEUES: usize = 200;

/// `GET /console/transfer/new?cluster=&node=&queue=&take=&id=…&filter=`: the dialog. The source cluster must be
/// one the operator sees (404 otherwise, as everywhere).
pub async fn new(
    State(state): State<ConsoleState>,
    session: Session,
    RawQuery(query): RawQuery,
) -> Result<Response, ConsoleError> {
    let asked = Asked::from_pairs(query.as_deref().unwrap_or_default().as_bytes())?;
    require_visible_cluster(&state, &session, &asked.cluster).await?;
    let error = asked.selection().err();
    let status = if error.is_some() { StatusCode::BAD_REQUEST } else { StatusCode::OK };
    let picked = Picked::from_pairs(query.as_deref().unwrap_or_default().as_bytes());
    let page = dialog(&state, &session, asked, &picked, error).await?;
    Ok((status, html(page.render())).into_response())
}

/// 404 unless `operator` may see `cluster`, in the words of one not registered.
async fn require_visible_cluster(state: &ConsoleState, session: &Session, cluster: &str) -> Result<(), ConsoleError> {
    if permissions::can_see(&state.api.pool, &session.operator, cluster).await? {
        Ok(())
    } else {
        Err(ConsoleError::not_found(format!("no cluster named {cluster} is registered")))
    }
}

/// A form field of `pairs`, the last if repeated.
fn field(pairs: &[u8], name: &str) -> String {
    form_urlencoded::parse(pairs).filter(|(k, _)| k == name).map(|(_, v)| v.into_owned()).last().unwrap_or_default()
}

/// Every value of a repeated form field.
fn fields(pairs: &[u8], name: &str) -> Vec<String> {
    form_urlencoded::parse(pairs).filter(|(k, _)| k == name).map(|(_, v)| v.into_owned()).collect()
}

/// `POST /console/transfer/preview`: the preview, stored as a Previewed run; then its page. A refusal (a grant, an
/// unknown node, a filter that cannot be read) shows the dialog again with the words.
pub async fn preview(
    State(state): State<ConsoleState>,
    session: Session,
    body: Bytes,
) -> Result<Response, ConsoleError> {
    session.check_form_token(&field(&body, "form_token"))?;
    let asked = Asked::from_pairs(&body)?;
    require_visible_cluster(&state, &session, &asked.cluster).await?;
    let picked = Picked::from_pairs(&body);
    let refuse = |status: StatusCode, words: String, asked: Asked| {
        let (state, session, picked) = (&state, &session, &picked);
        async move {
            let page = dialog(state, session, asked, picked, Some(words)).await?;
            Ok::<Response, ConsoleError>((status, html(page.render())).into_response())
        }
    };
    let selection = match asked.selection() {
        Ok(s) => s,
        Err(words) => return refuse(StatusCode::BAD_REQUEST, words, asked).await,
    };
    // A redistribution is a Move whose target is fixed but for the node: the same library call, preview and audit.
    let mode = if picked.mode == "copy" { Mode::Copy } else { Mode::Move };
    let target = if picked.mode == "redistribute" {
        redistribution_target(&asked, &picked.node)
    } else {
        chosen_target(&picked.target, &field(&body, "target_queue"))
    };
    let target = match target {
        Ok(target) => target,
        Err(words) => return refuse(StatusCode::BAD_REQUEST, words, asked).await,
    };
    let request = PreviewRequest {
        mode,
        source: QueueRef {
            cluster: asked.cluster.clone(),
            node: asked.node.clone(),
            queue: asked.queue.clone(),
            address: None,
        },
        target,
        selection,
        operator: session.operator.clone(),
    };
    let current = settings::load(&state.api.pool).await.map_err(ApiError::from)?;
    let made = preview_and_store(
        &state.pool,
        &request,
        &PreviewSettings::from_settings(&current),
        state.api.preview_valid_for,
    )
    .await;
    match made {
        Ok(stored) => Ok(Redirect::to(&format!("/console/transfer/{}", stored.run_id)).into_response()),
        Err(e) => {
            let e = ApiError::from(e);
            refuse(e.status, e.message, asked).await
        }
    }
}

/// A move's or a copy's target: the node picked (`<cluster>/<node>`, each percent-encoded) and the queue named; a
/// refusal in words when either is missing.
fn chosen_target(node: &str, queue: &str) -> Result<QueueRef, String> {
    let Some((cluster, node)) = node.split_once('/').map(|(c, n)| (decoded(c), decoded(n))) else {
        return Err("Choose a target node.".into());
    };
    let queue = queue.trim();
    if queue.is_empty() {
        return Err("Name the target queue.".into());
    }
    Ok(QueueRef { cluster, node, queue: queue.to_string(), address: None })
}

/// A percent-decoded path segment.
fn decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// A finding as the preview page shows it.
pub struct FindingRow {
    code: String,
    words: String,
    snippet: Option<String>,
}

/// The preview page.
#[derive(Template)]
#[template(path = "transfer_preview.html")]
struct PreviewPage {
    chrome: Chrome,
    run: Uuid,
    mode: String,
    from: String,
    to: String,
    source_queue: String,
    selection_words: String,
    refused: Vec<FindingRow>,
    needs_ack: Vec<FindingRow>,
    unknown: Vec<FindingRow>,
    notes: Vec<String>,
    needs_typed_confirmation: bool,
    needs_cap_override: bool,
    can_start: bool,
    expires: String,
    plan_hash: String,
    form_token: String,
    error: Option<String>,
}

/// The findings of `preview` of one kind.
fn findings(preview: &serde_json::Value, kind: &str) -> Vec<FindingRow> {
    let all = preview["findings"].as_array().cloned().unwrap_or_default();
    all.iter()
        .filter(|f| f["kind"] == kind)
        .map(|f| FindingRow {
            code: f["code"].as_str().unwrap_or_default().to_string(),
            words: f["words"].as_str().unwrap_or_default().to_string(),
            snippet: f["snippet"].as_str().map(str::to_string),
        })
        .collect()
}

/// A run's end as its row names it.
fn end(cluster: &str, node: &str, queue: &str) -> QueueRef {
    QueueRef { cluster: cluster.into(), node: node.into(), queue: queue.into(), address: None }
}

/// The preview page of `run`, saying `error` if any; `None` when the run is no longer Previewed.
async fn preview_page(
    state: &ConsoleState,
    session: &Session,
    run: Uuid,
    error: Option<String>,
) -> Result<Option<PreviewPage>, ConsoleError> {
    let Some(stored) = store::console_preview_load(&state.api.pool, run).await? else {
        return Err(ConsoleError::not_found(format!("there is no run {run}")));
    };
    if stored.state != RunState::Previewed.as_str() {
        return Ok(None);
    }
    let p = &stored.preview;
    let size = p["selection_size"].as_i64().map_or_else(
        || p["selection_at_least"].as_i64().map_or("an unknown number of".into(), |n| format!("more than {n}")),
        |n| n.to_string(),
    );
    let selection = match stored.plan["selection"]["kind"].as_str() {
        Some("ids") => "the ticked messages",
        Some("filter") => "the messages the filter matches",
        _ => "the whole queue",
    };
    Ok(Some(PreviewPage {
        chrome: Chrome::of(Some(session)),
        run,
        mode: mode_words(
            &stored.mode,
            &end(&stored.source_cluster, &stored.source_node, &stored.source_queue),
            &end(&stored.target_cluster, &stored.target_node, &stored.target_queue),
        ),
        from: format!("{} / {} / {}", stored.source_cluster, stored.source_node, stored.source_queue),
        to: format!("{} / {} / {}", stored.target_cluster, stored.target_node, stored.target_queue),
        source_queue: stored.source_queue.clone(),
        selection_words: format!("{size} message(s): {selection}"),
        refused: findings(p, "refused"),
        needs_ack: findings(p, "needs_ack"),
        unknown: findings(p, "unknown"),
        notes: p["notes"].as_array().into_iter().flatten().filter_map(|n| n.as_str().map(str::to_string)).collect(),
        needs_typed_confirmation: p["needs_typed_confirmation"] == true,
        needs_cap_override: p["needs_cap_override"] == true,
        can_start: !p["findings"].as_array().into_iter().flatten().any(|f| f["kind"] == "refused"),
        expires: stored
            .expires_at
            .map_or_else(|| "unknown".into(), |t: DateTime<Utc>| t.format("%H:%M:%S UTC").to_string()),
        plan_hash: stored.plan_hash.clone(),
        form_token: session.form_token.clone(),
        error,
    }))
}

/// `GET /console/transfer/{run}`: a Previewed run's preview, with its arming form; a run already executed goes to
/// its own page.
pub async fn show(
    State(state): State<ConsoleState>,
    session: Session,
    Path(run): Path<String>,
) -> Result<Response, ConsoleError> {
    let run = visible_run(&state, &session, &run).await?;
    match preview_page(&state, &session, run, None).await? {
        Some(page) => Ok(html(page.render())),
        None => Ok(Redirect::to(&format!("/console/runs/{run}")).into_response()),
    }
}

/// `POST /console/transfer/{run}/execute`: acknowledgements, the typed queue name and the cap override, as the
/// API's execute takes them; then the run's page. A refusal shows the preview again with the words.
pub async fn execute(
    State(state): State<ConsoleState>,
    session: Session,
    Path(run): Path<String>,
    body: Bytes,
) -> Result<Response, ConsoleError> {
    session.check_form_token(&field(&body, "form_token"))?;
    let run = visible_run(&state, &session, &run).await?;
    let typed = field(&body, "confirm");
    let confirm = Confirmation {
        plan_hash: field(&body, "plan_hash"),
        acknowledged: fields(&body, "ack"),
        typed_queue: Some(typed.trim().to_string()).filter(|t| !t.is_empty()),
        override_cap: field(&body, "override_cap") == "yes",
    };
    match actions::execute(&state.pool, run, &confirm, &session.operator, state.api.max_attempts).await {
        Ok(_) => Ok(Redirect::to(&format!("/console/runs/{run}")).into_response()),
        Err(e) => {
            let e = ApiError::from(e);
            match preview_page(&state, &session, run, Some(e.message)).await? {
                Some(page) => Ok((e.status, html(page.render())).into_response()),
                None => Ok(Redirect::to(&format!("/console/runs/{run}")).into_response()),
            }
        }
    }
}
