//! Runs: list, view, follow (server-sent events), and the operator's actions — execute, stop, resume, return.
//! The actions are `transfer::actions` (the SQL functions the Studio backend also calls), so their checks, words
//! and audit rows are the same whichever way an operator comes.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use chrono::{DateTime, Utc};
use futures_util::stream::{self, Stream};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use utoipa::openapi::RefOr;
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use super::auth::Caller;
use super::error::{ApiError, Problem};
use super::feed::{self, Follower, Look, Position};
use super::input::{check_free_text, single_header, ApiJson, OptionalJson};
use super::redact::Redactor;
use super::ApiState;
use crate::jobs::runs::{self, StopRequest};
use crate::jobs::store::record::RunEvent;
use crate::jobs::{RunId, RunState};
use crate::transfer::actions::{self, Confirmation, RETURN_WARNING};
use crate::transfer::view::{self, LinesQuery, RunRecord};

/// A path's run id, refused in words when it is not a UUID.
pub(super) fn run_id(text: &str) -> Result<Uuid, ApiError> {
    text.parse().map_err(|_| ApiError::bad_request("invalid-run-id", format!("{text:?} is not a run id (a UUID)")))
}

/// 404 unless `run` exists and the operator may see both its clusters.
pub(super) async fn require_visible(state: &ApiState, run: Uuid, caller: &Caller) -> Result<(), ApiError> {
    if view::visible(&state.pool, run, &caller.operator).await? {
        Ok(())
    } else {
        Err(ApiError::not_found(format!("there is no run {run}")))
    }
}

/// Query of `GET /api/v1/runs`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// At most this many (1–500, default 50).
    #[param(minimum = 1, maximum = 500, default = 50)]
    pub limit: Option<i64>,
    /// Only runs in this state.
    #[param(value_type = Option<RunState>)]
    pub state: Option<String>,
    /// Only runs from or to this cluster.
    pub cluster: Option<String>,
    /// Only runs this operator previewed.
    pub operator: Option<String>,
    /// Only runs made at or after this instant (RFC 3339).
    pub since: Option<DateTime<Utc>>,
    /// Only runs made before this instant (RFC 3339).
    pub until: Option<DateTime<Utc>>,
    /// Only runs whose row changed (state, counters, anything) strictly after this instant (RFC 3339, a `+` of an
    /// offset written `%2B`): the `as_of` of an earlier answer, for a client that polls the list.
    #[param(value_type = Option<DateTime<Utc>>)]
    pub changed_after: Option<String>,
    /// The next page: the `next` of the previous answer, as it was given (opaque).
    pub cursor: Option<String>,
}

/// The answer of `GET /api/v1/runs`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Runs {
    /// The runs, newest first.
    pub runs: Vec<RunRecord>,
    /// The `cursor` of the next page, with the same filters; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The instant, on the database's clock, this listing is complete up to: asked again with it as
    /// `changed_after`, the list holds every run that changed after it, even by a transaction that commits later.
    /// The same on every page of one listing (its first page's).
    pub as_of: DateTime<Utc>,
}

/// Where a page of the list begins: after the run made at, and with the id of, the previous page's last; and the
/// listing's `as_of`, so every page answers its first page's (a client may pass any page's as `changed_after`).
pub(crate) struct PageCursor {
    /// The keyset: (made at, id) of the previous page's last run.
    pub after: (DateTime<Utc>, Uuid),
    /// The first page's `as_of`; `None` in a cursor of the console's pages, which do not carry one.
    pub as_of: Option<DateTime<Utc>>,
}

/// The cursor of the page after `last` of a listing as of `as_of`: where it stands in the list's order (made at,
/// then id), opaque to callers.
pub(crate) fn cursor_after(last: &RunRecord, as_of: Option<DateTime<Utc>>) -> String {
    let mut key = format!("{}.{}", last.created_at.timestamp_micros(), last.id.simple());
    if let Some(at) = as_of {
        key.push_str(&format!(".{}", at.timestamp_micros()));
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

/// The page a cursor of [`cursor_after`] stands for; a 400 for any other text.
pub(crate) fn page_of(cursor: &str) -> Result<PageCursor, ApiError> {
    let not_ours = || ApiError::bad_request("invalid-request", "the cursor is not one this service gave (use `next`)");
    let instant = |micros: &str| micros.parse().ok().and_then(DateTime::from_timestamp_micros).ok_or_else(not_ours);
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cursor).map_err(|_| not_ours())?;
    let text = String::from_utf8(bytes).map_err(|_| not_ours())?;
    let mut parts = text.split('.');
    let (Some(micros), Some(id), as_of, None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return Err(not_ours());
    };
    let after = (instant(micros)?, id.parse().map_err(|_| not_ours())?);
    Ok(PageCursor { after, as_of: as_of.map(instant).transpose()? })
}

/// The keyset a cursor of [`cursor_after`] stands for; a 400 for any other text.
pub(crate) fn keyset_of(cursor: &str) -> Result<(DateTime<Utc>, Uuid), ApiError> {
    page_of(cursor).map(|page| page.after)
}

/// A `changed_after`: an RFC 3339 instant, refused in words otherwise (the text is not repeated: it is the
/// caller's).
pub(crate) fn changed_after(text: &str) -> Result<DateTime<Utc>, ApiError> {
    DateTime::parse_from_rfc3339(text).map(|at| at.with_timezone(&Utc)).map_err(|_| {
        ApiError::bad_request(
            "invalid-request",
            "changed_after must be an instant in RFC 3339, such as 2026-12-07T13:05:00Z: the `as_of` of an earlier \
             answer (in a query, the `+` of an offset is written %2B)",
        )
    })
}

/// `GET /api/v1/runs`: the newest runs the operator may see.
#[utoipa::path(get, path = "/runs", operation_id = "listRuns", tags = ["runs"], summary = "Runs",
    description = "The newest runs the operator may see (both their clusters), newest first, a page at a time \
        (`cursor` = the previous answer's `next`, with the same filters).\n\n\
        A cheap poll: every answer carries `as_of`, an instant on the database's clock; asked again with \
        `changed_after` = that `as_of`, the list holds only the runs whose row changed since (state, counters, \
        anything; `updated_at` says when), in pages as any list, with the other filters applied to the runs as they \
        are now (a run that left a `state` filter is not listed: poll without it to see it leave). No change is \
        missed, not even one whose transaction began before the earlier answer and committed after it: each write \
        of a run holds a lock until it commits, and `as_of` is no later than the oldest write not yet committed \
        (ADR 0025), so a run may be listed twice, never missed. A run removed by retention or no longer visible \
        after a grant was withdrawn is not announced: read the whole list now and then.",
    params(ListQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of runs", body = Runs),
        (status = 400, description = "A limit out of range, an unknown state, a cursor this service did not give, \
            a `changed_after` that is not an RFC 3339 instant, or an unknown query field (invalid-request)",
            body = Problem),
    ))]
pub async fn list(
    State(state): State<ApiState>,
    caller: Caller,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Runs>, ApiError> {
    let Query(q) = query?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::bad_request("invalid-request", "limit must be between 1 and 500"));
    }
    let state_wanted = match &q.state {
        None => None,
        Some(s) => Some(s.parse::<RunState>().map_err(|_| {
            let known: Vec<&str> = RunState::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::bad_request("invalid-request", format!("{s:?} is not a run state; states: {}", known.join(", ")))
        })?),
    };
    let page = q.cursor.as_deref().map(page_of).transpose()?;
    let changed_after = q.changed_after.as_deref().map(changed_after).transpose()?;
    // Taken before the runs are read (view::changes_as_of); a later page keeps its listing's first.
    let as_of = match page.as_ref().and_then(|p| p.as_of) {
        Some(at) => at,
        None => view::changes_as_of(&state.pool).await?,
    };
    let query = LinesQuery {
        limit,
        state: state_wanted,
        visible_to: Some(caller.operator),
        older_than: page.map(|p| p.after),
        cluster: q.cluster,
        started_by: q.operator,
        queue: None,
        since: q.since,
        until: q.until,
        changed_after,
    };
    let runs = view::lines(&state.pool, &query).await?;
    let next = (runs.len() as i64 == limit).then(|| runs.last().map(|last| cursor_after(last, Some(as_of)))).flatten();
    let shown = Redactor::load(&state.pool).await?;
    let runs = runs.into_iter().map(|r| shown.record(r)).collect();
    Ok(Json(Runs { runs, next, as_of }))
}

/// `GET /api/v1/runs/{run}`: the run's view (docs/guarantees.md) — pipeline, rate, ETA, per-node outcome, events.
#[utoipa::path(get, path = "/runs/{run}", operation_id = "getRun", tags = ["runs"], summary = "A run",
    description = "The run's view: pipeline, rate, ETA, per-node outcome, notes, events. Its states and \
        what each promises: docs/guarantees.md.",
    params(RunParam),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The run", body = view::RunView),
        OnOneRun,
    ))]
pub async fn get(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
) -> Result<Json<view::RunView>, ApiError> {
    let run = run_id(&run)?;
    require_visible(&state, run, &caller).await?;
    let view = view::load(&state.pool, run).await?;
    Ok(Json(Redactor::load(&state.pool).await?.view(view)))
}

/// The answer of `GET /api/v1/previews/{run}`: the run's stored preview, as `POST /api/v1/previews` answered it.
#[derive(Debug, Serialize, ToSchema)]
pub struct StoredPreviewAnswer {
    /// The run.
    pub run_id: Uuid,
    /// The plan, frozen at `t0`.
    #[schema(value_type = crate::transfer::Plan)]
    pub plan: serde_json::Value,
    /// The hash execute must echo.
    pub plan_hash: String,
    /// The findings, size and notes.
    #[schema(value_type = crate::transfer::Preview)]
    pub preview: serde_json::Value,
    /// After this the preview must be made again; `null` when not recorded.
    pub expires_at: Option<DateTime<Utc>>,
    /// No finding refuses the run.
    pub can_start: bool,
}

/// `GET /api/v1/previews/{run}` (here beside the other reads of one run): the run's stored preview, for a client that did not make it (a console, a second
/// operator): its plan, plan hash, findings and expiry, and whether it may start.
#[utoipa::path(get, path = "/previews/{run}", operation_id = "getPreview", tags = ["previews"],
    summary = "A run's stored preview",
    description = "The preview a run was stored with: its plan, plan hash (which execute must echo), findings (each \
        in words, with its fix), expiry, and whether its findings let it start (`can_start`). A run stays with its \
        preview after it is executed.",
    params(RunParam),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The stored preview", body = StoredPreviewAnswer),
        OnOneRun,
    ))]
pub async fn stored_preview(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
) -> Result<Json<StoredPreviewAnswer>, ApiError> {
    let run = run_id(&run)?;
    require_visible(&state, run, &caller).await?;
    let record = view::record(&state.pool, run).await?;
    let stored = view::stored_preview(&state.pool, run)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("run {run} was stored without a preview")))?;
    Ok(Json(StoredPreviewAnswer {
        run_id: run,
        plan: stored.plan,
        plan_hash: stored.plan_hash,
        preview: stored.preview,
        expires_at: stored.expires_at,
        can_start: !record.refused,
    }))
}

/// The answer of `GET /api/v1/runs/{run}/actions`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunActions {
    /// What the caller may do to the run now, in the order a console offers it.
    pub actions: Vec<actions::RunAction>,
}

/// `GET /api/v1/runs/{run}/actions`: what the caller may do to the run now (`actions::offered`, as the console
/// offers it).
#[utoipa::path(get, path = "/runs/{run}/actions", operation_id = "getRunActions", tags = ["runs"],
    summary = "What the caller may do to a run now",
    description = "The actions the run's state allows and the caller's grants permit now: `execute` (a Previewed run \
        its preview did not refuse), `stop`, `resume`, `return` (a cross-node move's staging). Each is checked again \
        when it is taken; an empty list: nothing.",
    params(RunParam),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "What the caller may do to the run now", body = RunActions),
        OnOneRun,
    ))]
pub async fn run_actions(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
) -> Result<Json<RunActions>, ApiError> {
    let run = run_id(&run)?;
    require_visible(&state, run, &caller).await?;
    let record = view::record(&state.pool, run).await?;
    let actions = actions::offered(&state.pool, &caller.operator, &record).await?;
    Ok(Json(RunActions { actions }))
}

/// The answer of `GET /api/v1/runs/{run}/rate`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RateHistory {
    /// The run's delivered count over time, oldest first, with the rate between points (at most 120 points).
    pub points: Vec<view::RatePoint>,
}

/// `GET /api/v1/runs/{run}/rate`: the run's rate over time, as data (a chart's points).
#[utoipa::path(get, path = "/runs/{run}/rate", operation_id = "getRunRate", tags = ["runs"],
    summary = "A run's rate over time",
    description = "The run's delivered count over time, oldest first, sampled when a batch changed it and at most \
        once a second (the last count of each second): at most 120 points, each the last sample of its share of the time, with the messages per second since the point \
        before. Empty before anything was delivered. Per-node outcomes, as data, are in the run's view (`nodes`).",
    params(RunParam),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The run's rate over time", body = RateHistory),
        OnOneRun,
    ))]
pub async fn rate(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
) -> Result<Json<RateHistory>, ApiError> {
    let run = run_id(&run)?;
    require_visible(&state, run, &caller).await?;
    Ok(Json(RateHistory { points: view::rate(&state.pool, run).await? }))
}

/// 400 for a run id that is not a UUID (or a malformed body or query), 404 for a run that does not exist or that
/// the operator may not see: what every call on one run may answer besides its own.
pub struct OnOneRun;

const NOT_A_RUN: (u16, &str) = (
    400,
    "The run id is not a UUID (invalid-run-id), the body or query is not the call's (invalid-request), or no \
     X-Operator (no-operator)",
);
const NO_SUCH_RUN: (u16, &str) = (404, "No such run, or one the operator may not see (not-found)");

impl utoipa::IntoResponses for OnOneRun {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
        super::doc::error_answers(&[NOT_A_RUN, NO_SUCH_RUN])
    }
}

/// [`OnOneRun`]'s answers and 403: an action on a run needs a grant on its clusters.
pub struct RunAction;

impl utoipa::IntoResponses for RunAction {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
        let missing_grant = (403, "The operator lacks a grant (missing-grant)");
        super::doc::error_answers(&[NOT_A_RUN, missing_grant, NO_SUCH_RUN])
    }
}

/// The `{run}` of a path.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct RunParam {
    /// The run's id (a UUID; another text answers 400 `invalid-run-id`).
    #[param(value_type = Uuid)]
    pub run: String,
}

/// The body of `POST /api/v1/runs/{run}/execute`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteBody {
    /// The plan hash the preview answered.
    pub plan_hash: String,
    /// The preview's needs-acknowledgement codes, acknowledged.
    #[serde(default)]
    pub acknowledged: Vec<String>,
    /// The source queue's name, typed (a move, or a run over the safety cap or of unknown size).
    pub confirm: Option<String>,
    /// Run although over the safety cap or of unknown size.
    #[serde(default)]
    pub override_cap: bool,
}

/// `POST /api/v1/runs/{run}/execute`: 202 once the run is queued for a worker (with its place when every slot is
/// taken).
#[utoipa::path(post, path = "/runs/{run}/execute", operation_id = "executeRun", tags = ["runs"],
    summary = "Execute a Previewed run",
    description = "Checks the plan hash, the acknowledgements, the typed confirmation and the safety cap, then \
        queues the run for a worker.",
    params(RunParam),
    request_body = ExecuteBody,
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Queued, with its place when every slot is taken", body = Accepted),
        RunAction,
        (status = 409, description = "The run's state or another run forbids it (run-state, preview-expired, \
            plan-hash-mismatch, preview-refused, source-busy)", body = Problem),
        (status = 422, description = "Needs something more from the operator (not-acknowledged, \
            unknown-acknowledgement, confirmation-required, safety-cap, unsupported)", body = Problem),
    ))]
pub async fn execute(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
    ApiJson(b): ApiJson<ExecuteBody>,
) -> Result<Response, ApiError> {
    let run = run_id(&run)?;
    let confirm = Confirmation {
        plan_hash: b.plan_hash,
        acknowledged: b.acknowledged,
        typed_queue: b.confirm,
        override_cap: b.override_cap,
    };
    actions::execute(&state.pool, run, &confirm, &caller.operator, state.max_attempts).await?;
    let place = runs::queue_position(&state.pool, RunId(run)).await?;
    Ok(accepted(run, RunState::Queued, Some(place)))
}

/// The answer of an action that queued the run: where it is and where to follow it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Accepted {
    /// The run.
    pub run: Uuid,
    /// Its state now: `queued` (execute, resume) or `returning` (return).
    pub state: RunState,
    /// Where to follow it (server-sent events).
    pub events: String,
    /// Execute only: its place among the runs waiting for a slot; null when it holds one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<i64>, required = false)]
    pub queue_position: Option<Option<i64>>,
}

/// 202 with the run, its state and where to follow it.
fn accepted(run: Uuid, state: RunState, queue_position: Option<Option<i64>>) -> Response {
    let events = format!("/api/v1/runs/{run}/events");
    (StatusCode::ACCEPTED, Json(Accepted { run, state, events, queue_position })).into_response()
}

/// The longest stop reason: it is one line of the run's view and of the CLI's output.
const MAX_REASON_CHARS: usize = 1000;

/// The body of `POST /api/v1/runs/{run}/stop`: optional, as is its field.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopBody {
    /// Why (recorded on the run); default "operator request". One line of printable text.
    #[schema(max_length = 1000, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$")]
    pub reason: Option<String>,
}

/// `POST /api/v1/runs/{run}/stop`: the batch in flight finishes first. 200 `stopped` when nothing was in
/// flight, 202 `stop_requested` when a batch is, 200 `already_ended` with the state it ended in.
#[utoipa::path(post, path = "/runs/{run}/stop", operation_id = "stopRun", tags = ["runs"], summary = "Stop a run",
    description = "The batch in flight finishes first. The body may be left out.",
    params(RunParam),
    request_body(content = Option<StopBody>, description = "Optional: why (default \"operator request\")"),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Stopped (nothing was in flight), or already ended", body = StopAnswer),
        (status = 202, description = "Stop requested: the batch in flight finishes first", body = StopAnswer),
        RunAction,
        (status = 409, description = "The run's state forbids it (run-state)", body = Problem),
    ))]
pub async fn stop(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
    OptionalJson(body): OptionalJson<StopBody>,
) -> Result<Response, ApiError> {
    let run = run_id(&run)?;
    let reason = body.reason.unwrap_or_else(|| "operator request".into());
    check_free_text("`reason`", &reason, MAX_REASON_CHARS)?;
    let answer = match actions::stop(&state.pool, run, &reason, &caller.operator).await? {
        StopRequest::Stopped => StopAnswer::ended(run, StopResult::Stopped, RunState::Stopped),
        StopRequest::Requested => StopAnswer {
            run,
            result: StopResult::StopRequested,
            state: None,
            message: Some("the batch in flight finishes first"),
        },
        StopRequest::AlreadyEnded(s) => StopAnswer::ended(run, StopResult::AlreadyEnded, s),
    };
    let status = if answer.result == StopResult::StopRequested { StatusCode::ACCEPTED } else { StatusCode::OK };
    Ok((status, Json(answer)).into_response())
}

/// What a stop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopResult {
    /// Nothing was in flight: the run is stopped (200).
    Stopped,
    /// A batch is in flight and finishes first (202).
    StopRequested,
    /// The run had already ended, in `state` (200).
    AlreadyEnded,
}

/// The answer of `POST /api/v1/runs/{run}/stop`.
#[derive(Debug, Serialize, ToSchema)]
pub struct StopAnswer {
    /// The run.
    pub run: Uuid,
    /// What the stop did.
    pub result: StopResult,
    /// The state it is in (`stopped`, or the state it ended in); absent while a stop is requested.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<RunState>,
    /// Words for a requested stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'static str>,
}

impl StopAnswer {
    fn ended(run: Uuid, result: StopResult, state: RunState) -> StopAnswer {
        StopAnswer { run, result, state: Some(state), message: None }
    }
}

/// `POST /api/v1/runs/{run}/resume`: a stopped, interrupted or failed run goes on from where it stopped.
#[utoipa::path(post, path = "/runs/{run}/resume", operation_id = "resumeRun", tags = ["runs"],
    summary = "Resume a run",
    description = "A stopped, interrupted or failed run goes on from where it stopped.",
    params(RunParam),
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Queued", body = Accepted),
        RunAction,
        (status = 409, description = "The run's state or another run forbids it (run-state, source-busy)",
            body = Problem),
    ))]
pub async fn resume(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
) -> Result<Response, ApiError> {
    let run = run_id(&run)?;
    actions::resume(&state.pool, run, &caller.operator, state.max_attempts).await?;
    Ok(accepted(run, RunState::Queued, None))
}

/// The body of `POST /api/v1/runs/{run}/return`: may be left out, but without `confirm` the return is refused.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReturnBody {
    /// The source queue's name, typed to confirm.
    pub confirm: Option<String>,
}

/// `POST /api/v1/runs/{run}/return`: what a stopped, interrupted or failed move holds in staging goes back to its
/// source queue. Needs the source queue's name typed (`confirm`); without it, 422 says what a return does.
#[utoipa::path(post, path = "/runs/{run}/return", operation_id = "returnRun", tags = ["runs"],
    summary = "Return a run's staging to its source",
    description = "What a stopped, interrupted or failed move holds in staging goes back to its source queue. Needs \
        the source queue's name typed in `confirm`; without it (or without a body), 422 says what a return does.",
    params(RunParam),
    request_body(content = Option<ReturnBody>, description = "The typed confirmation; a missing body is refused \
        with 422 confirmation-required"),
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Returning", body = Accepted),
        RunAction,
        (status = 409, description = "The run's state forbids it (run-state)", body = Problem),
        (status = 422, description = "The source queue's name was not typed (confirmation-required), or a return \
            does not apply (unsupported)", body = Problem),
    ))]
pub async fn return_to_source(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
    OptionalJson(ReturnBody { confirm: typed }): OptionalJson<ReturnBody>,
) -> Result<Response, ApiError> {
    let run = run_id(&run)?;
    require_visible(&state, run, &caller).await?;
    let line =
        view::line(&state.pool, run).await?.ok_or_else(|| ApiError::not_found(format!("there is no run {run}")))?;
    let source = line.source_queue.unwrap_or_default();
    if typed.as_deref() != Some(source.as_str()) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "confirmation-required",
            format!("{RETURN_WARNING} To return what run {run} holds in staging, type the source queue's name: confirm: {source}"),
        ));
    }
    actions::return_to_source(&state.pool, run, &caller.operator, state.max_attempts).await?;
    Ok(accepted(run, RunState::Returning, None))
}

/// Query of the event stream: resume after this event id (as the `Last-Event-ID` header does).
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// The last event id already seen.
    #[param(minimum = 0)]
    pub after: Option<i64>,
}

/// How long a client waits before it reconnects to a stream that closed (the SSE `retry` field of the first
/// events): a stream closes at the run's end, when the service closes, and for a run not yet executed.
const RECONNECT_AFTER: Duration = Duration::from_secs(3);

/// One server-sent event of a run's stream, as a client parses it. Only its schema is used: the stream writes
/// axum's `Event`s.
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct StreamEvent {
    /// Its name: the kind of an event log row, or `progress`, `error` or `end`.
    pub event: String,
    /// JSON: a RunEvent (an event log row), {state, counters, stop_reason, last_error} (`progress`), {message}
    /// (`error`) or {run, state} (`end`).
    pub data: String,
    /// The event log row's id (rows only): what Last-Event-ID or `after` resumes from.
    pub id: Option<String>,
}

/// Where a stream is: its place in the run's log, the progress last sent, whether it is behind its run's feed (a
/// long log replayed, or looks it was too slow to take) and so reads on its own, whether the end was sent.
struct Cursor {
    state: ApiState,
    run: Uuid,
    /// Who follows: the stream ends when they may no longer see the run (a grant revoked meanwhile).
    operator: String,
    position: Position,
    last_progress: Option<serde_json::Value>,
    /// The registry's endpoints as read when the stream began: what the words of events may name.
    shown: Redactor,
    behind: bool,
    ended: bool,
    first: bool,
    /// Its place in the run's shared poll (joined before the stream's own first look, so nothing falls between).
    follower: Follower,
    /// The caller's slot among its open streams: freed when the stream is dropped (ended, or its client left).
    _slot: super::limit::StreamSlot,
}

/// `GET /api/v1/runs/{run}/events`: server-sent events. Each row of the run's event log is an SSE event named
/// after its kind, with the row's id as the SSE id (so a reconnecting client's `Last-Event-ID`, or `?after=`,
/// resumes without a gap or a repeat); `progress` events (no id) carry the state and counters whenever they
/// change. The stream ends after the run's last event once the run has ended (an `end` event says so), at once
/// for a run not yet executed (`end` with state `previewed`), when the operator may no longer see the run (`end`
/// with state `gone`), and when the service closes (no `end`: the client resumes elsewhere by Last-Event-ID).
///
/// No row is skipped: one that commits after a higher id was sent (see [`feed::LATE_WINDOW_SECS`]) is sent when it
/// appears, once, out of id order; a client that resumes from such a row's id may get a few rows again (their ids
/// tell), never miss one.
#[utoipa::path(get, path = "/runs/{run}/events", operation_id = "followRun", tags = ["runs"],
    summary = "Follow a run (server-sent events)",
    description = "Each row of the run's event log is an SSE event named after its kind, with the row's id as the \
        SSE id and a RunEvent as its data; `progress` events (no id) carry {state, counters, stop_reason, \
        last_error} whenever they change; `error` events {message} say the database does not answer; the stream \
        ends with an `end` event {run, state} once the run has ended, at once for a run not yet executed (state \
        `previewed`), and when the operator may no longer see the run (state `gone`); it closes without one when \
        the service closes. The first events carry `retry`. Resume with Last-Event-ID or `after`.",
    params(
        RunParam,
        EventsQuery,
        ("Last-Event-ID" = Option<i64>, Header, minimum = 0,
            description = "The last event id already seen (as `after`)"),
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The event stream", body = StreamEvent, content_type = "text/event-stream"),
        OnOneRun,
    ))]
pub async fn events(
    State(state): State<ApiState>,
    caller: Caller,
    Path(RunParam { run }): Path<RunParam>,
    headers: HeaderMap,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let run = run_id(&run)?;
    let Query(q) = query?;
    if q.after.is_some_and(|after| after < 0) {
        return Err(ApiError::bad_request("invalid-request", "after must be an event id (0 or more)"));
    }
    let from_header = last_event_id(&headers)?;
    follow(state, caller, run, q.after.or(from_header).unwrap_or(0)).await
}

/// `caller`'s stream of `run` from after the event id `after`, for the API's stream and the console's: 404 for a
/// run the caller may not see, 429 when the caller holds as many streams as it may. It joins the run's shared feed.
pub(crate) async fn follow(
    state: ApiState,
    caller: Caller,
    run: Uuid,
    after: i64,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    require_visible(&state, run, &caller).await?;
    let slot = open_stream_slot(&state, &caller)?;
    let shown = Redactor::load(&state.pool).await?;
    let follower = feed::follow(&state, run, &caller.operator);
    let cursor = Cursor {
        state,
        run,
        operator: caller.operator,
        position: Position::from(after),
        last_progress: None,
        shown,
        behind: true,
        ended: false,
        first: true,
        follower,
        _slot: slot,
    };
    let stream = stream::unfold(cursor, |mut c| async move {
        if c.ended {
            return None;
        }
        let shared = if c.first {
            None
        } else {
            // The service is closing (SIGTERM): the stream ends now, not at the run's end, so the service exits
            // within its grace period; the client reconnects (to another replica) and resumes by Last-Event-ID.
            tokio::select! {
                look = c.follower.looks.recv() => match look {
                    Ok(look) => Some(look),
                    Err(RecvError::Lagged(_)) => {
                        c.behind = true;
                        None
                    }
                    Err(RecvError::Closed) => return None,
                },
                () = c.state.closing.cancelled() => return None,
            }
        };
        let mut batch = next_events(&mut c, shared.as_deref()).await;
        if std::mem::take(&mut c.first) {
            batch = batch.into_iter().map(|e| e.retry(RECONNECT_AFTER)).collect();
        }
        Some((stream::iter(batch.into_iter().map(Ok)), c))
    });
    use futures_util::StreamExt as _;
    Ok(Sse::new(stream.flatten()).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// A slot for one more open stream of `caller`, or 429 `too-many-streams` when it holds as many as it may: each
/// stream holds memory and looks at the database on its own when it starts, and a crowd of them (a console per browser
/// tab) would take the pool from everyone.
fn open_stream_slot(state: &ApiState, caller: &Caller) -> Result<super::limit::StreamSlot, ApiError> {
    let slots = &state.limits.streams;
    slots.open((caller.service.clone(), caller.operator.clone())).ok_or_else(|| {
        let words = format!(
            "service {} acting for {} holds {} event streams open, the most a caller may (api.streams_per_caller): \
             close one before opening another",
            caller.service,
            caller.operator,
            slots.per_caller()
        );
        ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too-many-streams", words)
    })
}

/// The event id a reconnecting client last saw: one `Last-Event-ID` header holding a number. Anything else is
/// refused, because taking it as "none" would replay the whole log to a client that has most of it.
pub(crate) fn last_event_id(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(value) = single_header(headers, "last-event-id")? else { return Ok(None) };
    let id = value.to_str().ok().and_then(|v| v.trim().parse::<i64>().ok()).filter(|id| *id >= 0);
    id.map(Some).ok_or_else(|| {
        ApiError::bad_request("invalid-request", "Last-Event-ID must be the id of an event this stream sent (a number)")
    })
}

/// What a stream sends next, from its feed's `shared` look when it is caught up and the look checked its operator,
/// else from a look of its own: new event rows, then progress if it changed, then `end` once the run has ended. A
/// database error is sent as an `error` event and the stream goes on (the client sees why it is quiet).
async fn next_events(c: &mut Cursor, shared: Option<&Look>) -> Vec<Event> {
    match shared {
        Some(Look::Failed) => failed(),
        Some(Look::Seen { line, rows, more, visible_to }) if !c.behind => match visible_to.get(&c.operator) {
            Some(visible) => {
                let rows = c.position.take(rows);
                events_of(c, line.clone(), *visible, rows, *more)
            }
            None => own_events(c).await,
        },
        _ => own_events(c).await,
    }
}

/// A stream's own look at its run, from its own position: as its feed looks, for one operator.
async fn own_events(c: &mut Cursor) -> Vec<Event> {
    let pool = &c.state.pool;
    // The run's state is read before its events: every event committed before the state was read is then among
    // the rows, so a run read as ended has all its events sent before `end`. Read the other way round, the run's
    // last events and its end could commit between the two reads, and the stream ended without them.
    let line = view::line(pool, c.run).await;
    // Grants are checked again at every look: one revoked while the stream is open ends it as for a run that does
    // not exist (docs/permissions.md: what the operator may not see is answered as nothing).
    let visible = view::visible(pool, c.run, &c.operator).await;
    let rows = c.position.read(pool, c.run).await;
    match (rows, line, visible) {
        (Ok((rows, more)), Ok(line), Ok(visible)) => {
            c.behind = more;
            let rows = c.position.take(&rows);
            events_of(c, line, visible, rows, more)
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            tracing::warn!(run = %c.run, error = %e, "event stream: the database does not answer");
            failed()
        }
    }
}

/// The `error` event of a look the database did not answer.
fn failed() -> Vec<Event> {
    vec![Event::default()
        .event("error")
        .data(json!({ "message": "the database does not answer; retrying" }).to_string())]
}

/// The events of one look: `end` (gone) for a run that is not there or not visible; else the rows not yet sent,
/// the progress when it changed, and `end` once the run has ended and no rows are waiting.
fn events_of(c: &mut Cursor, line: Option<RunRecord>, visible: bool, rows: Vec<RunEvent>, more: bool) -> Vec<Event> {
    let Some(line) = line.filter(|_| visible) else {
        c.ended = true;
        return vec![Event::default().event("end").data(json!({ "run": c.run, "state": "gone" }).to_string())];
    };
    let mut out = Vec::new();
    for row in rows {
        let data = json!({ "id": row.id, "at": row.at, "kind": row.kind, "detail": c.shown.json(row.detail) });
        out.push(Event::default().id(row.id.to_string()).event(row.kind.clone()).data(data.to_string()));
    }
    let line = c.shown.record(line);
    let progress = json!({ "state": line.state, "counters": line.counters, "stop_reason": line.stop_reason, "last_error": line.last_error });
    if c.last_progress.as_ref() != Some(&progress) {
        out.push(Event::default().event("progress").data(progress.to_string()));
        c.last_progress = Some(progress);
    }
    // A run not yet executed has nothing to follow: its stream ends after its progress, saying so, and a client
    // that executes it follows it again (EventSource reconnects by itself).
    if (line.state.is_ended() || line.state == RunState::Previewed) && !more {
        c.ended = true;
        out.push(Event::default().event("end").data(json!({ "run": c.run, "state": line.state }).to_string()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_stands_for_its_runs_keyset_and_nothing_else_is_taken_for_one() {
        let at = DateTime::from_timestamp_micros(1_796_416_586_701_123).unwrap();
        let id = Uuid::new_v4();
        let key = format!("{}.{}", at.timestamp_micros(), id.simple());
        let cursor = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key);
        assert_eq!(keyset_of(&cursor).unwrap(), (at, id));
        assert_eq!(page_of(&cursor).unwrap().as_of, None, "the console's cursors carry no as_of");
        let as_of = DateTime::from_timestamp_micros(1_796_416_590_000_042).unwrap();
        let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        let carried =
            page_of(&encode(&format!("{}.{}.{}", at.timestamp_micros(), id.simple(), as_of.timestamp_micros())));
        let carried = carried.unwrap();
        assert_eq!((carried.after, carried.as_of), ((at, id), Some(as_of)));
        let (garbled, too_long) =
            (encode(&format!("12.{}.x", id.simple())), encode(&format!("12.{}.1.2", id.simple())));
        for bad in ["", "2026-01-01", "!!!", &encode("12.nope"), &garbled, &too_long] {
            assert_eq!(keyset_of(bad).unwrap_err().slug, "invalid-request", "{bad:?}");
        }
    }

    #[test]
    fn changed_after_is_an_rfc_3339_instant_refused_in_words_otherwise() {
        let at = changed_after("2026-12-07T13:05:00.123456+01:00").unwrap();
        assert_eq!(at, DateTime::parse_from_rfc3339("2026-12-07T12:05:00.123456Z").unwrap());
        // An offset's `+` sent unencoded arrives as a space: refused, saying how to write it.
        for bad in ["", "yesterday", "2026-12-07", "2026-12-07T13:05:00 01:00", "1796416586"] {
            let e = changed_after(bad).unwrap_err();
            assert_eq!((e.status, e.slug), (StatusCode::BAD_REQUEST, "invalid-request"), "{bad:?}");
            assert!(e.message.contains("RFC 3339") && e.message.contains("%2B"), "{}", e.message);
        }
    }
}
