//! What a platform asks of the service rather than of a run: liveness, readiness, Prometheus metrics, the OpenAPI
//! document, and the answer to an unknown path.

use std::fmt::Write as _;
use std::sync::LazyLock;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::Scraper;
use super::error::{ApiError, Problem};
use super::ApiState;
use crate::jobs::store::metrics;
use crate::jobs::{JobState, RunState};

/// The OpenAPI document, as JSON: made once, from the router's routes (see [`super::doc`]).
static DOCUMENT: LazyLock<String> = LazyLock::new(|| super::document().to_string());

/// The answer of `/health`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// `GET /health`: the process answers. Nothing else is checked, so a slow database never gets it restarted.
#[utoipa::path(get, path = "/health", operation_id = "health", tags = ["ops"], summary = "Liveness",
    description = "The process answers; nothing else is checked.",
    responses((status = 200, description = "Alive", body = Health)))]
pub async fn health() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The answer of `/ready`: `schema` when ready, `why` when not.
#[derive(Debug, Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` or `not ready`.
    #[schema(example = "ready")]
    pub status: &'static str,
    /// The database's schema version (when ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<i64>,
    /// Why not, in words (when not ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// `GET /ready`: 200 when the database answers and holds this build's schema and SQL functions; 503 with the
/// reason otherwise.
#[utoipa::path(get, path = "/ready", operation_id = "ready", tags = ["ops"], summary = "Readiness",
    description = "The database answers and holds this build's schema and SQL functions (those a `migrate` of \
        this build applies).",
    responses(
        (status = 200, description = "Ready, with the schema's version", body = Readiness),
        (status = 503, description = "Not ready, with the reason in `why`; or (a problem document) not answered \
            within the request timeout (request-timeout)", content(
            (Readiness = "application/json"),
            (Problem = "application/problem+json"),
        )),
    ))]
pub async fn ready(State(state): State<ApiState>) -> Response {
    let checked = async {
        let version = current_schema(&state.pool).await?;
        current_functions(&state.pool).await?;
        Ok::<_, String>(version)
    }
    .await;
    match checked {
        Ok(version) => {
            (StatusCode::OK, Json(Readiness { status: "ready", schema: Some(version), why: None })).into_response()
        }
        Err(why) => {
            (StatusCode::SERVICE_UNAVAILABLE, Json(Readiness { status: "not ready", schema: None, why: Some(why) }))
                .into_response()
        }
    }
}

/// The database's schema version when it is this build's; why not, in words, otherwise.
async fn current_schema(pool: &sqlx::PgPool) -> Result<i64, String> {
    let newest = crate::jobs::MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    match crate::jobs::store::schema::schema_level(pool).await.map_err(unanswered)? {
        Some(v) if v == newest => Ok(v),
        Some(v) if v > newest => {
            Err(format!("the database's schema ({v}) is newer than this build's ({newest}): deploy the newer build"))
        }
        v => Err(format!(
            "the database's schema ({}) is older than this build's ({newest}): run `artemis-transfer migrate`",
            v.unwrap_or(0)
        )),
    }
}

/// Whether the database runs this build's SQL functions: a `migrate` of another build (an older replica still
/// running, say) applies its own bodies at the same schema version, and only their recorded digest tells.
async fn current_functions(pool: &sqlx::PgPool) -> Result<(), String> {
    let ours = crate::jobs::functions::digest();
    match crate::jobs::store::schema::functions_digest(pool).await.map_err(unanswered)? {
        Some(recorded) if recorded == ours => Ok(()),
        Some(recorded) => Err(format!(
            "the database's SQL functions were applied by another build (digest {}, this build's {}); run \
             `artemis-transfer migrate` with this build",
            short(&recorded),
            short(ours)
        )),
        None => Err("the database's SQL functions were never recorded as applied; run `artemis-transfer migrate` \
             with this build"
            .into()),
    }
}

/// The first 12 characters of a digest: enough to tell builds apart in words.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// A readiness query that failed: logged, and reported without its details.
fn unanswered(e: sqlx::Error) -> String {
    tracing::warn!(error = %e, "readiness: the database does not answer");
    "the database does not answer".into()
}

/// `GET /metrics`: gauges read from the database at each scrape (so every replica reports the same figures; sum
/// nothing across replicas): runs by state, jobs by state, the slots taken and their limit, and the messages of
/// the runs not yet ended by outcome.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", tags = ["ops"], summary = "Prometheus metrics",
    description = "Gauges read from the database at each scrape (every replica reports the same figures): \
        artemis_transfer_runs{state}, artemis_transfer_jobs{state}, artemis_transfer_run_slots_taken, \
        artemis_transfer_run_slots_limit, artemis_transfer_live_run_messages{outcome}, \
        artemis_transfer_live_run_delivered_bytes.",
    security((), ("metrics" = [])),
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
        (status = 401, description = "ARTEMIS_TRANSFER_METRICS_TOKEN is set and the request does not present it \
            (unauthenticated)", body = Problem),
        (status = 500, description = "A failure of ours (internal)", body = Problem),
        (status = 503, description = "The database is out of reach (database-unavailable), or the scrape was not \
            answered within the request timeout (request-timeout)", body = Problem),
    ))]
pub async fn metrics(State(state): State<ApiState>, _scraper: Scraper) -> Result<Response, ApiError> {
    // One rendering at a time, and one per METRICS_FRESH_FOR: scrapes, however many and however often, cost the
    // database a handful of queries a second at most.
    let mut cached = state.metrics_cache.0.lock().await;
    let fresh = cached.as_ref().filter(|(at, _)| at.elapsed() < METRICS_FRESH_FOR).map(|(_, text)| text.clone());
    let text = match fresh {
        Some(text) => text,
        None => {
            let text = render_metrics(&state.pool).await?;
            *cached = Some((tokio::time::Instant::now(), text.clone()));
            text
        }
    };
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response())
}

/// How long a rendering of `/metrics` answers scrapes: well under any scrape interval.
const METRICS_FRESH_FOR: std::time::Duration = std::time::Duration::from_secs(2);

/// The last rendering of `/metrics` and when it was made (see [`metrics`]).
#[derive(Debug, Clone, Default)]
pub struct MetricsCache(std::sync::Arc<tokio::sync::Mutex<Option<(tokio::time::Instant, String)>>>);

/// The Prometheus text of the job engine's and the runs' counts now.
async fn render_metrics(pool: &sqlx::PgPool) -> Result<String, ApiError> {
    let runs = metrics::metrics_runs_by_state(pool).await?;
    let jobs = metrics::metrics_jobs_by_state(pool).await?;
    let slots = metrics::metrics_slots_taken(pool).await?;
    let limit = crate::jobs::settings::load(pool).await?.concurrent_runs;
    let live = metrics::metrics_live_messages(pool).await?;

    let mut out = String::new();
    let count = |rows: &[(String, i64)], state: &str| rows.iter().find(|(s, _)| s == state).map_or(0, |(_, n)| *n);
    gauge(&mut out, "artemis_transfer_runs", "Runs on record, by state.");
    for s in RunState::ALL {
        let _ = writeln!(out, "artemis_transfer_runs{{state=\"{}\"}} {}", s.as_str(), count(&runs, s.as_str()));
    }
    gauge(&mut out, "artemis_transfer_jobs", "Relay jobs on record, by state.");
    for s in JobState::ALL {
        let _ = writeln!(out, "artemis_transfer_jobs{{state=\"{}\"}} {}", s.as_str(), count(&jobs, s.as_str()));
    }
    gauge(&mut out, "artemis_transfer_run_slots_taken", "Runs holding an execution slot (concurrent runs).");
    let _ = writeln!(out, "artemis_transfer_run_slots_taken {slots}");
    gauge(&mut out, "artemis_transfer_run_slots_limit", "The concurrent runs setting.");
    let _ = writeln!(out, "artemis_transfer_run_slots_limit {limit}");
    gauge(&mut out, "artemis_transfer_live_run_messages", "Messages of the runs not yet ended, by outcome so far.");
    let outcomes = [
        ("staged", live.staged),
        ("delivered", live.delivered),
        ("dead_lettered", live.dead_lettered),
        ("returned", live.returned),
    ];
    for (outcome, n) in outcomes {
        let _ = writeln!(out, "artemis_transfer_live_run_messages{{outcome=\"{outcome}\"}} {n}");
    }
    gauge(&mut out, "artemis_transfer_live_run_delivered_bytes", "Body bytes delivered by the runs not yet ended.");
    let _ = writeln!(out, "artemis_transfer_live_run_delivered_bytes {}", live.delivered_bytes);
    Ok(out)
}

fn gauge(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// The schema of `/openapi.json`'s answer: an OpenAPI document, described by its own specification, so only its
/// required keys are named here.
pub struct DocumentShape;

impl utoipa::PartialSchema for DocumentShape {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
        let free_form = |what: &str| {
            ObjectBuilder::new().schema_type(Type::Object).description(Some(format!("{what} (free-form)")))
        };
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .description(Some("An OpenAPI 3.1 document (free-form beyond its required keys)"))
            .property("openapi", ObjectBuilder::new().schema_type(Type::String))
            .property("info", free_form("Title, version and description"))
            .property("paths", free_form("The operations, by path"))
            .required("openapi")
            .required("info")
            .required("paths")
            .additional_properties(Some(AdditionalProperties::FreeForm(true)))
            .into()
    }
}

impl ToSchema for DocumentShape {}

/// `GET /openapi.json`.
#[utoipa::path(get, path = "/openapi.json", operation_id = "openapi", tags = ["ops"], summary = "This document",
    responses((status = 200, description = "OpenAPI 3.1, generated from the handlers", body = DocumentShape,
        content_type = "application/json")))]
pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT.as_str()).into_response()
}

/// Any other path.
pub async fn no_such_route(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no-such-route",
        format!("there is no {} {}: see /openapi.json", request.method(), request.uri().path()),
    )
}
