//! The console's pages: Transfers (the runs the operator may see), a run's own page with its actions, sign-in and
//! the error page. Each handler checks the session and the operator's grants itself; what an operator may not see
//! answers 404, as on the API.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use super::chart::{self, RateChart};
use super::session::Session;
use super::{assets, html, ConsoleError, ConsoleState};
use crate::api::auth::Caller;
use crate::api::redact::Redactor;
use crate::api::ApiError;
use crate::jobs::store::record::{self, AuditRow};
use crate::jobs::RunState;
use crate::registry::store::{self as registry, EndpointRole};
use crate::transfer::actions::{self, RunAction, RETURN_WARNING};
use crate::transfer::plan::{redistributes, QueueRef};
use crate::transfer::store::view::latest_event_id;
use crate::transfer::view::{self, LinesQuery, RunRecord, RunView};

/// How many runs a page of Transfers lists.
const PAGE_SIZE: i64 = 50;

/// What every page shows around its content: the stylesheet, the script, who is signed in.
pub struct Chrome {
    /// The stylesheet's URL.
    pub css: String,
    /// The script's URL.
    pub js: String,
    /// The icon's URL.
    pub icon: String,
    /// The operator signed in, and the form token of their sign-out form.
    pub session: Option<(String, String)>,
}

impl Chrome {
    /// The chrome of a page for `session` (none: signed out).
    pub(super) fn of(session: Option<&Session>) -> Chrome {
        Chrome {
            css: assets::CSS.href(),
            js: assets::JS.href(),
            icon: assets::ICON.href(),
            session: session.map(|s| (s.operator.clone(), s.form_token.clone())),
        }
    }
}

/// A run state as a page shows it: its name in words and the class its badge is styled by. Made from
/// [`RunState::as_str`] for every state, so a state added to the library is shown without a change here.
pub struct StateBadge {
    /// `running`, `succeeded`, …: the class `state-<name>`.
    pub class: String,
    /// "Running", "In doubt", …
    pub words: String,
}

impl StateBadge {
    fn of(state: RunState) -> StateBadge {
        let name = state.as_str();
        let spaced = name.replace(['_', '-'], " ");
        let mut words = spaced.clone();
        if let Some(first) = spaced.chars().next() {
            words = first.to_uppercase().chain(spaced.chars().skip(1)).collect();
        }
        StateBadge { class: format!("state-{name}"), words }
    }
}

/// The error page.
#[derive(Template)]
#[template(path = "error.html")]
pub struct ErrorPage {
    chrome: Chrome,
    status: String,
    words: String,
}

impl ErrorPage {
    /// The page for `status` with `words`.
    pub fn new(status: StatusCode, words: &str) -> ErrorPage {
        let status = format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""));
        ErrorPage { chrome: Chrome::of(None), status, words: words.to_string() }
    }

    /// Its HTML; plain words should the template fail.
    pub fn html(&self) -> Response {
        match self.render() {
            Ok(text) => axum::response::Html(text).into_response(),
            Err(_) => self.words.clone().into_response(),
        }
    }
}

/// The sign-in page.
#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage {
    chrome: Chrome,
    error: Option<String>,
    operator: String,
}

/// The sign-in form with `status`, saying `error` if any, the operator's name kept.
pub fn sign_in_form(status: StatusCode, error: Option<&str>, operator: &str) -> Response {
    let page = SignInPage { chrome: Chrome::of(None), error: error.map(str::to_string), operator: operator.into() };
    (status, html(page.render())).into_response()
}

/// Query of Transfers: each filter, empty meaning any.
#[derive(Debug, Default, Deserialize)]
pub struct TransfersQuery {
    /// Runs from or to this cluster.
    #[serde(default)]
    pub cluster: String,
    /// Runs in this state.
    #[serde(default)]
    pub state: String,
    /// Runs this operator started.
    #[serde(default)]
    pub operator: String,
    /// Runs from or to this queue.
    #[serde(default)]
    pub queue: String,
    /// The next page's cursor.
    #[serde(default)]
    pub cursor: String,
}

/// What a run's line in Transfers and the head of its page show.
pub struct Summary {
    href: String,
    /// The whole id.
    id: String,
    /// Its first 8 characters, for a list.
    short_id: String,
    state: StateBadge,
    mode: String,
    from: String,
    to: String,
    started_by: String,
    executed: String,
    progress: Progress,
    rate: String,
}

impl Summary {
    /// The summary of `v`, the view of `record`.
    fn of(v: &RunView, record: &RunRecord) -> Summary {
        let id = v.id.to_string();
        Summary {
            href: format!("/console/runs/{id}"),
            short_id: id[..8].to_string(),
            id,
            state: StateBadge::of(v.state),
            mode: record_mode_words(record),
            from: v.from.clone(),
            to: v.to.clone(),
            started_by: v.started_by.clone().unwrap_or_else(|| "?".into()),
            executed: v.executed_at.map_or_else(|| "not yet".into(), when),
            progress: Progress::of(v),
            rate: rate_words(v.rate),
        }
    }
}

/// A run's mode in words: `move` or `copy`; a move that redistributes its queue to another node of its cluster
/// (`plan::redistributes`) says so, naming the node.
pub(super) fn mode_words(mode: &str, source: &QueueRef, target: &QueueRef) -> String {
    if mode == "move" && redistributes(source, target) {
        format!("move: redistribute to a node ({} of {})", target.node, target.cluster)
    } else {
        mode.to_string()
    }
}

/// [`mode_words`] of a run's row: its mode alone when the row does not name both ends (`?` when it has none).
fn record_mode_words(record: &RunRecord) -> String {
    let end = |c: &Option<String>, n: &Option<String>, q: &Option<String>| {
        Some(QueueRef { cluster: c.clone()?, node: n.clone()?, queue: q.clone()?, address: None })
    };
    let mode = record.mode.as_deref().unwrap_or("?");
    let source = end(&record.source_cluster, &record.source_node, &record.source_queue);
    let target = end(&record.target_cluster, &record.target_node, &record.target_queue);
    match (source, target) {
        (Some(source), Some(target)) => mode_words(mode, &source, &target),
        _ => mode.to_string(),
    }
}

/// A run's progress: how many of how many are accounted for, for a `<progress>` bar, and in words.
pub struct Progress {
    /// Accounted for (delivered, dead-lettered, not taken, returned).
    value: i64,
    /// The selection's size; `None` while not known (the bar is then indeterminate).
    max: Option<i64>,
    /// "1,200 of 10,000" or "1,200 of ?".
    words: String,
}

impl Progress {
    fn of(v: &RunView) -> Progress {
        let p = &v.pipeline;
        let value = p.delivered + p.dead_lettered + p.not_taken + p.returned;
        let max = p.selected;
        let words = format!("{} of {}", value, max.map_or_else(|| "?".to_string(), |m| m.to_string()));
        Progress { value: max.map_or(value, |m| value.min(m)), max, words }
    }
}

/// A state in the filter's list.
pub struct StateOption {
    value: &'static str,
    words: String,
    selected: bool,
}

/// Transfers.
#[derive(Template)]
#[template(path = "transfers.html")]
struct TransfersPage {
    chrome: Chrome,
    filter: TransfersQuery,
    states: Vec<StateOption>,
    lines: Vec<Summary>,
    next: Option<String>,
    /// What the script asks every few seconds before it fetches the list again ([`changes`]).
    changes: String,
    /// The instant the list is complete up to (RFC 3339): the script's first `changed_after`.
    as_of: String,
}

/// `GET /console/`: Transfers — the newest runs the operator may see, filtered, a page at a time.
pub async fn transfers(
    State(state): State<ConsoleState>,
    session: Session,
    Query(filter): Query<TransfersQuery>,
) -> Result<Response, ConsoleError> {
    let wanted = some(&filter.state)
        .map(str::parse::<RunState>)
        .transpose()
        .map_err(|_| ConsoleError::new(StatusCode::BAD_REQUEST, format!("{:?} is not a run state", filter.state)))?;
    let query = LinesQuery {
        limit: PAGE_SIZE,
        state: wanted,
        visible_to: Some(session.operator.clone()),
        older_than: some(&filter.cursor).map(crate::api::keyset_of).transpose()?,
        cluster: some(&filter.cluster).map(str::to_string),
        started_by: some(&filter.operator).map(str::to_string),
        queue: some(&filter.queue).map(str::to_string),
        since: None,
        until: None,
        changed_after: None,
    };
    // Before the list is read (view::changes_as_of): the list's script asks what changed after it.
    let as_of = view::changes_as_of(&state.api.pool).await?;
    let records = view::lines(&state.api.pool, &query).await?;
    let next = (records.len() as i64 == PAGE_SIZE).then(|| records.last().map(|r| next_href(&filter, r))).flatten();
    let shown = Redactor::load(&state.api.pool).await.map_err(ApiError::from)?;
    let now = Utc::now();
    let lines = records
        .into_iter()
        .map(|r| {
            let r = shown.record(r);
            Summary::of(&RunView::build(&r, Vec::new(), now), &r)
        })
        .collect();
    let states = RunState::ALL
        .iter()
        .map(|s| StateOption { value: s.as_str(), words: StateBadge::of(*s).words, selected: Some(*s) == wanted })
        .collect();
    let changes = changes_href(&filter);
    let as_of = as_of.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let page = TransfersPage { chrome: Chrome::of(Some(&session)), filter, states, lines, next, changes, as_of };
    Ok(html(page.render()))
}

/// What Transfers' script asks: whether a run it may list changed, by the filters a run cannot leave — its clusters
/// and queues never change, while its state and operator do (a run that left the page's state must still redraw it).
fn changes_href(filter: &TransfersQuery) -> String {
    let pairs = [("cluster", filter.cluster.as_str()), ("queue", filter.queue.as_str())];
    format!("/console/changes?{}", form_urlencoded(&pairs))
}

/// Query of [`changes`]: Transfers' filters a run cannot leave, and the `as_of` the page (or the last ask) gave.
#[derive(Debug, Deserialize)]
pub struct ChangesQuery {
    /// The instant asked after (RFC 3339).
    pub changed_after: String,
    /// Runs from or to this cluster.
    #[serde(default)]
    pub cluster: String,
    /// Runs from or to this queue.
    #[serde(default)]
    pub queue: String,
}

/// The answer of [`changes`].
#[derive(Debug, serde::Serialize)]
pub struct Changes {
    /// Whether a run the operator may see (by the filters) changed after `changed_after`.
    changed: bool,
    /// The next `changed_after`.
    as_of: DateTime<Utc>,
}

/// `GET /console/changes?changed_after=`: whether the Transfers list must be fetched again — the cheap poll of
/// `GET /api/v1/runs?changed_after=` (ADR 0025) over the session, asked every few seconds by the page's script
/// instead of the whole page. One run is enough to say yes; the page is then fetched as it is drawn.
pub async fn changes(
    State(state): State<ConsoleState>,
    session: Session,
    Query(q): Query<ChangesQuery>,
) -> Result<axum::Json<Changes>, ConsoleError> {
    let changed_after = crate::api::changed_after(&q.changed_after)?;
    let query = LinesQuery {
        limit: 1,
        visible_to: Some(session.operator.clone()),
        cluster: some(&q.cluster).map(str::to_string),
        queue: some(&q.queue).map(str::to_string),
        changed_after: Some(changed_after),
        ..LinesQuery::default()
    };
    let as_of = view::changes_as_of(&state.api.pool).await?;
    let changed = !view::lines(&state.api.pool, &query).await?.is_empty();
    Ok(axum::Json(Changes { changed, as_of }))
}

/// `text` unless it is blank.
pub(super) fn some(text: &str) -> Option<&str> {
    Some(text.trim()).filter(|t| !t.is_empty())
}

/// The URL of the page after `last` with the same filters.
fn next_href(filter: &TransfersQuery, last: &RunRecord) -> String {
    let pairs = [
        ("cluster", filter.cluster.as_str()),
        ("state", filter.state.as_str()),
        ("operator", filter.operator.as_str()),
        ("queue", filter.queue.as_str()),
    ];
    let mut query = form_urlencoded(&pairs);
    query.push_str(&format!("&cursor={}", crate::api::cursor_after(last, None)));
    format!("/console/?{query}")
}

/// `pairs` as a query string (each value percent-encoded).
pub(super) fn form_urlencoded(pairs: &[(&str, &str)]) -> String {
    use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
    let encoded: Vec<String> =
        pairs.iter().map(|(k, v)| format!("{k}={}", utf8_percent_encode(v.trim(), NON_ALPHANUMERIC))).collect();
    encoded.join("&")
}

/// A path segment, percent-encoded (queue names are anything a producer chose).
pub fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The queues page of `cluster`/`node`.
pub fn queues_href(cluster: &str, node: &str) -> String {
    format!("/console/clusters/{}/nodes/{}/queues", segment(cluster), segment(node))
}

/// The messages page of a queue.
pub fn messages_href(cluster: &str, node: &str, queue: &str) -> String {
    format!("{}/{}", queues_href(cluster, node), segment(queue))
}

/// An instant as a page shows it.
fn when(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn rate_words(rate: Option<f64>) -> String {
    rate.map_or_else(|| "not started".into(), |r| format!("{r:.1} msg/s"))
}

/// One step of a run's pipeline.
pub struct Step {
    /// Its name.
    name: &'static str,
    /// How many; `?` when not known.
    count: String,
    /// What it means.
    means: &'static str,
}

/// One event of a run.
pub struct EventLine {
    at: String,
    kind: String,
    detail: String,
}

/// One act on a run, from the audit table: who, what, which way in, when, and what came of it.
pub struct AuditLine {
    at: String,
    actor: String,
    action: String,
    /// `console`, `api`, `cli`, `sql`…; "not recorded" when the row does not say.
    via: String,
    outcome: String,
}

impl AuditLine {
    fn of(row: AuditRow) -> AuditLine {
        let row = crate::api::audit_row_as_answered(row);
        let via = row.detail["via"].as_str().unwrap_or("not recorded").to_string();
        AuditLine { at: when(row.at), actor: row.actor, action: row.action, via, outcome: row.outcome }
    }
}

/// A run end's broker console: the Artemis web console its registered Jolokia URL belongs to.
pub struct BrokerLink {
    /// `source` or `target`.
    role: &'static str,
    /// `cluster/node`.
    node: String,
    href: String,
}

/// The broker console links of a run's two ends, for those whose node's primary is registered with a Jolokia URL
/// under an Artemis console (`…/console/jolokia`); an end without one is left out.
async fn broker_links(state: &ConsoleState, record: &RunRecord) -> Result<Vec<BrokerLink>, ConsoleError> {
    let ends = [
        ("source", &record.source_cluster, &record.source_node),
        ("target", &record.target_cluster, &record.target_node),
    ];
    let mut links = Vec::new();
    for (role, cluster, node) in ends {
        let (Some(cluster), Some(node)) = (cluster, node) else { continue };
        let Ok(registered) = registry::get(&state.api.pool, cluster).await else { continue };
        let Ok(registered_node) = registered.node(node) else { continue };
        let primary = registered_node.endpoints.iter().find(|e| e.role == EndpointRole::Primary);
        if let Some(href) = primary.and_then(|e| broker_console_url(&e.jolokia_url)) {
            links.push(BrokerLink { role, node: format!("{cluster}/{node}"), href });
        }
    }
    Ok(links)
}

/// The Artemis web console a Jolokia URL belongs to: `http://h:8161/console/jolokia` → `http://h:8161/console/`.
pub(super) fn broker_console_url(jolokia: &str) -> Option<String> {
    let console = jolokia.trim_end_matches('/').strip_suffix("/jolokia")?;
    (console.ends_with("/console") && (console.starts_with("http://") || console.starts_with("https://")))
        .then(|| format!("{console}/"))
}

/// An action the page offers, with its form.
pub struct Offer {
    /// `stop`, `resume` or `return`: the path and the button.
    action: &'static str,
    /// The button's words.
    button: &'static str,
    /// What it does, said before the operator types the queue name.
    words: String,
}

/// A run's page.
#[derive(Template)]
#[template(path = "run.html")]
struct RunPage {
    chrome: Chrome,
    run: Summary,
    ended: String,
    eta: String,
    steps: Vec<Step>,
    nodes: Vec<(String, String, String)>,
    proof: Option<String>,
    stop_reason: Option<String>,
    last_error: Option<String>,
    notes: Vec<String>,
    events: Vec<EventLine>,
    chart: Option<RateChart>,
    audit: Vec<AuditLine>,
    brokers: Vec<BrokerLink>,
    offers: Vec<Offer>,
    source_queue: String,
    form_token: String,
    notice: Option<String>,
    error: Option<String>,
}

/// Query of a run's page: what was just done (post/redirect/get), as one of the action names.
#[derive(Debug, Default, Deserialize)]
pub struct RunQuery {
    /// `stop`, `resume` or `return`.
    #[serde(default)]
    pub done: String,
}

/// `GET /console/runs/{run}`.
pub async fn run(
    State(state): State<ConsoleState>,
    session: Session,
    Path(run): Path<String>,
    Query(q): Query<RunQuery>,
) -> Result<Response, ConsoleError> {
    let run = visible_run(&state, &session, &run).await?;
    let notice = done_words(&q.done).map(str::to_string);
    run_page(&state, &session, run, notice, None).await.map(|page| html(page.render()))
}

/// `GET /console/runs/{run}/events`: the run's event stream over the session, for the run page's live numbers —
/// the API's stream (`GET /api/v1/runs/{run}/events`), fed by the same shared poll of the run and counted against
/// the same cap of open streams per service and operator. It begins after the newest event, since the page shows
/// those, unless the browser resumes by `Last-Event-ID`. An invisible run is a 404, as its page is.
pub async fn run_events(
    State(state): State<ConsoleState>,
    session: Session,
    Path(run): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let run = visible_run(&state, &session, &run).await?;
    let after = match crate::api::last_event_id(&headers)? {
        Some(resumed) => resumed,
        None => latest_event_id(&state.api.pool, run).await?,
    };
    let caller = Caller { service: session.service, operator: session.operator };
    Ok(crate::api::follow_run(state.api, caller, run, after).await?.into_response())
}

/// What an action did, in words, for the page it redirects to.
fn done_words(action: &str) -> Option<&'static str> {
    match action {
        "stop" => Some("Stop asked: the batch in flight finishes first."),
        "resume" => Some("Resumed: the run is queued for a worker."),
        "return" => Some("Returning: what staging holds goes back to the source queue."),
        _ => None,
    }
}

/// The run `text` names if the operator may see it; 404 otherwise, whichever the reason.
pub(super) async fn visible_run(state: &ConsoleState, session: &Session, text: &str) -> Result<Uuid, ConsoleError> {
    let missing = || ConsoleError::not_found(format!("there is no run {text}"));
    let run: Uuid = text.parse().map_err(|_| missing())?;
    if view::visible(&state.api.pool, run, &session.operator).await? {
        Ok(run)
    } else {
        Err(missing())
    }
}

async fn run_page(
    state: &ConsoleState,
    session: &Session,
    run: Uuid,
    notice: Option<String>,
    error: Option<String>,
) -> Result<RunPage, ConsoleError> {
    let pool = &state.api.pool;
    let shown = Redactor::load(pool).await.map_err(ApiError::from)?;
    let v = shown.view(view::load(pool, run).await.map_err(ApiError::from)?);
    let record =
        view::line(pool, run).await?.ok_or_else(|| ConsoleError::not_found(format!("there is no run {run}")))?;
    let offers = offers(state, session, &record).await?;
    let proof = v.events.iter().rev().find(|e| e.kind == "end_proof").and_then(|e| e.detail["words"].as_str());
    let chart = chart::rate_chart(&view::rate(pool, run).await.map_err(ApiError::from)?);
    let audit = record::audit_for_run(pool, run).await.map_err(ApiError::from)?;
    let brokers = broker_links(state, &record).await?;
    Ok(RunPage {
        chrome: Chrome::of(Some(session)),
        run: Summary::of(&v, &record),
        ended: v.ended_at.map_or_else(|| "not yet".into(), when),
        eta: v.eta_secs.map_or_else(|| "not known".into(), |s| format!("about {} s", s.ceil() as i64)),
        steps: steps(&v),
        nodes: v.nodes.iter().map(|n| (n.role.to_string(), n.at.clone(), n.outcome.clone())).collect(),
        proof: proof.map(str::to_string),
        stop_reason: v.stop_reason.clone(),
        last_error: v.last_error.clone(),
        notes: v.notes.clone(),
        events: v
            .events
            .iter()
            .rev()
            .map(|e| EventLine { at: when(e.at), kind: e.kind.clone(), detail: e.detail.to_string() })
            .collect(),
        chart,
        audit: audit.into_iter().map(AuditLine::of).collect(),
        brokers,
        offers,
        source_queue: record.source_queue.clone().unwrap_or_default(),
        form_token: session.form_token.clone(),
        notice,
        error,
    })
}

/// The pipeline, step by step (docs/guarantees.md).
fn steps(v: &RunView) -> Vec<Step> {
    let p = &v.pipeline;
    let n = |count: i64| count.to_string();
    vec![
        Step { name: "Selected", count: p.selected.map_or_else(|| "?".into(), n), means: "frozen at the preview" },
        Step { name: "Held in staging", count: n(p.held_in_staging), means: "off the source, still on its broker" },
        Step { name: "Delivered", count: n(p.delivered), means: "committed on the target" },
        Step { name: "Not taken", count: n(p.not_taken), means: "in delivery, scheduled or gone" },
        Step { name: "Dead-lettered", count: n(p.dead_lettered), means: "refused by the target, on the source's DMQ" },
        Step { name: "Returned", count: n(p.returned), means: "put back on the source" },
        Step { name: "In doubt", count: n(p.in_doubt), means: "sent, acknowledgement not yet known" },
    ]
}

/// The actions the operator may take on the run now (`actions::offered`, as the API's `GET /runs/{run}/actions`),
/// each with its form's words; a Previewed run's execute is its preview page's.
async fn offers(state: &ConsoleState, session: &Session, record: &RunRecord) -> Result<Vec<Offer>, ConsoleError> {
    let queue = record.source_queue.clone().unwrap_or_default();
    let offered = actions::offered(&state.api.pool, &session.operator, record).await?;
    Ok(offered
        .into_iter()
        .filter_map(|action| match action {
            RunAction::Stop => Some(Offer {
                action: "stop",
                button: "Stop",
                words: "Stop lets the batch in flight finish; what staging holds stays on the source broker, and the \
                        run can be resumed or returned."
                    .into(),
            }),
            RunAction::Resume => Some(Offer {
                action: "resume",
                button: "Resume",
                words: "Resume carries on from where the run stopped: staging, counters and ledgers are reused.".into(),
            }),
            RunAction::Return => Some(Offer {
                action: "return",
                button: "Return to source",
                words: format!("{RETURN_WARNING} Everything still held in staging goes back to {queue}."),
            }),
            _ => None,
        })
        .collect())
}

/// An action's form.
#[derive(Debug, Deserialize)]
pub struct ActForm {
    /// The session's form token.
    pub form_token: String,
    /// The source queue's name, typed.
    #[serde(default)]
    pub confirm: String,
}

/// `POST /console/runs/{run}/{action}`: stop, resume or return, once the source queue's name is typed; then back to
/// the run's page (post/redirect/get). A refusal shows the page again with the reason.
pub async fn act(
    State(state): State<ConsoleState>,
    session: Session,
    Path((run, action)): Path<(String, String)>,
    Form(form): Form<ActForm>,
) -> Result<Response, ConsoleError> {
    session.check_form_token(&form.form_token)?;
    let Some(action) = ["stop", "resume", "return"].into_iter().find(|a| *a == action) else {
        return Err(ConsoleError::not_found(format!("the console has no action {action}")));
    };
    let run = visible_run(&state, &session, &run).await?;
    let record = view::line(&state.api.pool, run).await?.ok_or_else(|| ConsoleError::not_found("there is no run"))?;
    if !offers(&state, &session, &record).await?.iter().any(|o| o.action == action) {
        let words = format!(
            "{action} is not offered on this run to {}: its state or their grants do not allow it",
            session.operator
        );
        return refused(&state, &session, run, StatusCode::FORBIDDEN, words).await;
    }
    let queue = record.source_queue.clone().unwrap_or_default();
    if form.confirm.trim() != queue {
        let words = format!("Type the source queue's name, {queue}, to confirm.");
        return refused(&state, &session, run, StatusCode::UNPROCESSABLE_ENTITY, words).await;
    }
    let (pool, operator, attempts) = (&state.pool, session.operator.as_str(), state.api.max_attempts);
    let done = match action {
        "stop" => actions::stop(pool, run, "operator request (console)", operator).await.map(|_| ()),
        "resume" => actions::resume(pool, run, operator, attempts).await.map(|_| ()),
        _ => actions::return_to_source(pool, run, operator, attempts).await.map(|_| ()),
    };
    match done {
        Ok(()) => Ok(Redirect::to(&format!("/console/runs/{run}?done={action}")).into_response()),
        Err(e) => {
            let e = ApiError::from(e);
            refused(&state, &session, run, e.status, e.message).await
        }
    }
}

/// The run's page again with `status`, saying why the action was refused.
async fn refused(
    state: &ConsoleState,
    session: &Session,
    run: Uuid,
    status: StatusCode,
    words: String,
) -> Result<Response, ConsoleError> {
    let page = run_page(state, session, run, None, Some(words)).await?;
    Ok((status, html(page.render())).into_response())
}
