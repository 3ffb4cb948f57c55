//! The API's errors: RFC 9457 problem documents (`application/problem+json`) whose `type` is `/problems/<slug>`
//! (a stable slug; the path is a name, not served), with a `title` per slug, the `status`, the words a person
//! reads as `detail` and the request's id as `request_id` — never a stack trace, never a secret. A refusal the caller can act on keeps the library's own words (they say what to do); a failure of a
//! system (the database, a broker's management) is logged in full with an incident id and answered with that id
//! and plain words only, because its chain may name hosts and internals the caller has no business seeing.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::jobs::executor::error_chain;
use crate::registry::RegistryError;
use crate::transfer::actions::{ActionError, Remedy};
use crate::transfer::orphans::OrphanError;
use crate::transfer::permissions::{GrantError, MissingGrant, PermissionError};
use crate::transfer::service::ServiceError;
use crate::transfer::view::ViewError;

/// An answer other than success: a [`Problem`] (plus `missing_grant` when a grant is missing) with its status.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable name for the case (documented in the OpenAPI document).
    pub slug: &'static str,
    /// What happened and what to do, in words.
    pub message: String,
    /// The grant the operator lacks, when that is the reason.
    pub missing_grant: Option<MissingGrant>,
}

impl ApiError {
    /// An error with `status`, `slug` and `message`.
    pub fn new(status: StatusCode, slug: &'static str, message: impl Into<String>) -> ApiError {
        debug_assert!(title(slug).is_some(), "the slug {slug:?} is not in error::PROBLEMS (the document lists them)");
        ApiError { status, slug, message: message.into(), missing_grant: None }
    }

    /// 400: the request is malformed.
    pub fn bad_request(slug: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, slug, message)
    }

    /// 404: no such thing — or one the operator may not see, answered exactly alike (docs/permissions.md).
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not-found", message)
    }

    /// 403: the operator lacks `missing`.
    pub fn missing_grant(missing: MissingGrant) -> ApiError {
        ApiError {
            status: StatusCode::FORBIDDEN,
            slug: "missing-grant",
            message: missing.to_string(),
            missing_grant: Some(missing),
        }
    }

    /// A failure of a system: logged whole under the request's id; the caller gets the id and `what` failed.
    pub fn internal(what: &str, error: &(dyn std::error::Error + 'static)) -> ApiError {
        let request_id = super::request_id::current_id();
        tracing::error!(%request_id, error = %error_chain(error), "API request failed: {what}");
        let (status, slug) = if is_database(error) {
            (StatusCode::SERVICE_UNAVAILABLE, "database-unavailable")
        } else {
            (StatusCode::INTERNAL_SERVER_ERROR, "internal")
        };
        ApiError::new(status, slug, in_the_log(what, &request_id))
    }

    /// 502: a broker's management could not be asked. Its words name hosts and ports, which are ours: they go to
    /// the log under the request's id, the caller gets plain words and the id.
    pub fn broker_unreachable(details: &str) -> ApiError {
        let request_id = super::request_id::current_id();
        tracing::warn!(%request_id, details, "API request: a broker's management could not be asked");
        ApiError::new(StatusCode::BAD_GATEWAY, "discovery", in_the_log("asking a broker's management", &request_id))
    }
}

/// The words of a failure whose details are for the operators of the service only.
pub(super) fn in_the_log(what: &str, request_id: &str) -> String {
    format!("{what} failed; the service's log has the details under request {request_id}")
}

/// Whether `error` (or a cause) is the database out of reach (no connection, pool exhausted): the caller may
/// retry later (503). Any other failure is ours (500).
fn is_database(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(db) = e.downcast_ref::<sqlx::Error>() {
            return matches!(
                db,
                sqlx::Error::Io(_) | sqlx::Error::Tls(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
            );
        }
        next = e.source();
    }
    false
}

/// Every slug an answer may carry, with its problem's title, as the document lists them: a new slug is added
/// here first (a debug build refuses an unlisted one, so a test that reaches it fails).
pub const PROBLEMS: &[(&str, &str)] = &[
    ("unauthenticated", "No known bearer token"),
    ("no-operator", "No operator named"),
    ("invalid-operator", "Not an operator's name"),
    ("invalid-request", "Malformed request"),
    ("invalid-run-id", "Not a run id"),
    ("invalid-selection", "Not a selection"),
    ("invalid-setting", "Not a setting's value"),
    ("invalid-filter", "A filter the parser cannot read"),
    ("browse-limit", "Deeper than a page reads"),
    ("not-found", "Not found"),
    ("no-such-route", "No such path"),
    ("method-not-allowed", "Method not allowed"),
    ("missing-grant", "A grant is missing"),
    ("run-state", "The run's state forbids it"),
    ("preview-expired", "The preview has expired"),
    ("plan-hash-mismatch", "Not the run's plan hash"),
    ("preview-refused", "The preview refused the run"),
    ("source-busy", "Another run holds the source"),
    ("not-acknowledged", "Findings to acknowledge"),
    ("unknown-acknowledgement", "Not a finding of the preview"),
    ("confirmation-required", "Confirmation required"),
    ("safety-cap", "Over the safety cap"),
    ("unsupported", "Not supported"),
    ("conflict", "Conflict"),
    ("body-too-large", "Body too large"),
    ("unsupported-media-type", "Not JSON"),
    ("missing-credentials", "Credentials not set"),
    ("discovery", "A broker could not be asked"),
    ("orphan-state", "The orphan's state forbids it"),
    ("orphan-refused", "The return is refused"),
    ("database-unavailable", "The database is out of reach"),
    ("internal", "A failure of ours"),
    ("idempotency-in-progress", "The key's first request is being answered"),
    ("idempotency-key-reused", "The key names another request"),
    ("operator-not-allowed-for-service", "The service may not act for this operator"),
    ("rate-limited", "Too many requests"),
    ("too-many-streams", "Too many open event streams"),
    ("request-timeout", "Not answered in time"),
    ("precondition-failed", "Changed since it was read"),
];

/// The title of `slug`'s problem.
pub fn title(slug: &str) -> Option<&'static str> {
    PROBLEMS.iter().find(|(s, _)| *s == slug).map(|(_, title)| *title)
}

/// The content type of every error answer (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `type` of `slug`'s problem: a relative reference naming it, stable across releases.
pub fn problem_type(slug: &str) -> String {
    format!("/problems/{slug}")
}

/// The body of every answer other than success: an RFC 9457 problem document.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// `/problems/<slug>`: a stable, machine-readable name for the case (not served).
    #[serde(rename = "type")]
    #[schema(schema_with = type_schema)]
    pub problem_type: String,
    /// The slug's short title: the same for every occurrence of the case.
    pub title: &'static str,
    /// The HTTP status, as answered.
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    /// What happened and what to do, in words.
    pub detail: String,
    /// The request's id, as in the X-Request-Id header and the service's log line for it.
    pub request_id: String,
    /// The grant the operator lacks, when that is the reason (`missing-grant`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_grant: Option<MissingGrant>,
}

/// `type` is `/problems/<slug>` for one of [`PROBLEMS`].
fn type_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(PROBLEMS.iter().map(|(slug, _)| problem_type(slug))))
        .build()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Problem {
            problem_type: problem_type(self.slug),
            title: title(self.slug).unwrap_or("Error"),
            status: self.status.as_u16(),
            // Library words may quote an error chain: its addresses are ours (see `redact`).
            detail: super::redact::addresses(&self.message),
            request_id: super::request_id::current_id(),
            missing_grant: self.missing_grant,
        };
        let mut response = (self.status, Json(body)).into_response();
        response
            .headers_mut()
            .insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static(PROBLEM_JSON));
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<ActionError> for ApiError {
    fn from(e: ActionError) -> ApiError {
        use StatusCode as S;
        let (status, slug) = match &e {
            ActionError::NotFound(_) => (S::NOT_FOUND, "not-found"),
            ActionError::State { .. } => (S::CONFLICT, "run-state"),
            ActionError::Expired { .. } => (S::CONFLICT, "preview-expired"),
            ActionError::PlanHash { .. } => (S::CONFLICT, "plan-hash-mismatch"),
            ActionError::Refused(_) => (S::CONFLICT, "preview-refused"),
            ActionError::SourceBusy(_) => (S::CONFLICT, "source-busy"),
            ActionError::NotAcknowledged { .. } => (S::UNPROCESSABLE_ENTITY, "not-acknowledged"),
            ActionError::UnknownAcknowledgement(_) => (S::UNPROCESSABLE_ENTITY, "unknown-acknowledgement"),
            ActionError::Confirmation { .. } => (S::UNPROCESSABLE_ENTITY, "confirmation-required"),
            ActionError::Cap { .. } => (S::UNPROCESSABLE_ENTITY, "safety-cap"),
            ActionError::Unsupported(_) => (S::UNPROCESSABLE_ENTITY, "unsupported"),
            ActionError::Invalid(_) => (S::BAD_REQUEST, "invalid-request"),
            ActionError::Permission(m) => return ApiError::missing_grant(m.clone()),
            ActionError::Database { .. } | ActionError::Jobs(_) | ActionError::Db(_) => {
                return ApiError::internal("the action", &e)
            }
        };
        ApiError::new(status, slug, e.words_with(execute_body_hint))
    }
}

/// How a refused caller of `POST /runs/{run}/execute` gives what is missing: the fields of its body.
fn execute_body_hint(remedy: Remedy<'_>) -> String {
    match remedy {
        Remedy::Acknowledge => "list their codes in `acknowledged`".into(),
        Remedy::Confirm { expected } => format!("confirm: {expected}"),
        Remedy::OverrideCap => "send `override_cap: true`".into(),
    }
}

impl From<PermissionError> for ApiError {
    fn from(e: PermissionError) -> ApiError {
        match e {
            PermissionError::Missing(m) => ApiError::missing_grant(m),
            PermissionError::Db(_) => ApiError::internal("reading the grants", &e),
        }
    }
}

impl From<GrantError> for ApiError {
    fn from(e: GrantError) -> ApiError {
        match e {
            GrantError::Permission(e) => e.into(),
            GrantError::Invalid(words) => ApiError::bad_request("invalid-request", words),
            GrantError::Db(_) => ApiError::internal("reading the grants", &e),
        }
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> ApiError {
        match &e {
            RegistryError::NotFound(words) => ApiError::not_found(words.clone()),
            RegistryError::Conflict(words) => ApiError::new(StatusCode::CONFLICT, "conflict", words.clone()),
            RegistryError::MissingCredentials(words) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "missing-credentials", words.clone())
            }
            RegistryError::Discovery(words) => ApiError::broker_unreachable(words),
            RegistryError::CredentialsInUrl(words) => ApiError::bad_request("invalid-request", words.clone()),
            RegistryError::Db(_) | RegistryError::Jolokia(_) => ApiError::internal("the cluster registry", &e),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> ApiError {
        match e {
            ServiceError::Registry(r) => r.into(),
            ServiceError::Permission(p) => p.into(),
            ServiceError::Db(_) => ApiError::internal("the preview", &e),
        }
    }
}

impl From<ViewError> for ApiError {
    fn from(e: ViewError) -> ApiError {
        match &e {
            ViewError::NotFound(run) => ApiError::not_found(format!("there is no run {run}")),
            _ => ApiError::internal("reading the run", &e),
        }
    }
}

impl From<OrphanError> for ApiError {
    fn from(e: OrphanError) -> ApiError {
        match e {
            OrphanError::Registry(r) => r.into(),
            OrphanError::Permission(p) => p.into(),
            OrphanError::Missing { .. } => ApiError::not_found(e.to_string()),
            OrphanError::Owned { .. } | OrphanError::InUse { .. } | OrphanError::Left { .. } => {
                ApiError::new(StatusCode::CONFLICT, "orphan-state", e.to_string())
            }
            ref refusal if refusal.is_refusal() => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "orphan-refused", e.to_string())
            }
            _ => ApiError::internal("the orphan return", &e),
        }
    }
}

/// A query string that is not the call's: 400 in the API's form, with the extractor's words.
impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(e: axum::extract::rejection::QueryRejection) -> ApiError {
        ApiError::bad_request("invalid-request", e.body_text())
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> ApiError {
        ApiError::internal("the database", &e)
    }
}

impl From<crate::jobs::Error> for ApiError {
    fn from(e: crate::jobs::Error) -> ApiError {
        match &e {
            crate::jobs::Error::Setting { .. } => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-setting", e.to_string())
            }
            crate::jobs::Error::RunNotFound(_) => ApiError::not_found(e.to_string()),
            crate::jobs::Error::SettingChanged { .. } => {
                ApiError::new(StatusCode::PRECONDITION_FAILED, "precondition-failed", e.to_string())
            }
            _ => ApiError::internal("the job engine", &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transfer::permissions::Permission;

    #[test]
    fn refusals_keep_their_words_with_the_apis_field_names() {
        let cap: ApiError = ActionError::Cap { cap: 1000 }.into();
        assert_eq!((cap.status, cap.slug), (StatusCode::UNPROCESSABLE_ENTITY, "safety-cap"));
        assert!(cap.message.ends_with("send `override_cap: true` to run it"), "{}", cap.message);
        let ack: ApiError = ActionError::NotAcknowledged { codes: vec!["target-missing".into()] }.into();
        assert_eq!(
            ack.message,
            "acknowledge these findings to run it (list their codes in `acknowledged`): target-missing"
        );
        let typed: ApiError = ActionError::Confirmation { expected: "orders".into(), typed: None }.into();
        assert_eq!(typed.message, "type the source queue's name to arm this run (confirm: orders)");
        let missing =
            MissingGrant { principal: "bob".into(), permission: Permission::MessageSend, cluster: "west".into() };
        let forbidden: ApiError = ActionError::Permission(missing).into();
        assert_eq!((forbidden.status, forbidden.slug), (StatusCode::FORBIDDEN, "missing-grant"));
        assert_eq!(forbidden.missing_grant.unwrap().cluster, "west");
    }

    /// A wrong plan hash is answered without the hash the run expects, so it cannot be echoed from the answer.
    #[test]
    fn a_plan_hash_mismatch_names_only_the_hash_given() {
        let run = uuid::Uuid::new_v4();
        let api: ApiError = ActionError::PlanHash { run, given: "0".repeat(64) }.into();
        assert_eq!((api.status, api.slug), (StatusCode::CONFLICT, "plan-hash-mismatch"));
        assert_eq!(
            api.message,
            format!("the plan hash {} is not the one run {run} was previewed with: preview again", "0".repeat(64))
        );
    }

    #[test]
    fn a_failure_of_a_system_answers_an_incident_not_its_causes() {
        let e: ApiError = ActionError::Db(sqlx::Error::PoolTimedOut).into();
        assert_eq!((e.status, e.slug), (StatusCode::SERVICE_UNAVAILABLE, "database-unavailable"));
        assert!(
            e.message.starts_with("the action failed; the service's log has the details under request "),
            "{}",
            e.message
        );
        let e: ApiError = ActionError::Db(sqlx::Error::RowNotFound).into();
        assert_eq!((e.status, e.slug), (StatusCode::INTERNAL_SERVER_ERROR, "internal"));
        assert!(!e.message.contains("no rows"), "{}", e.message);
    }

    /// A broker that cannot be asked is named in the log, not to the caller (its words carry hosts and ports).
    #[test]
    fn an_unreachable_broker_answers_without_its_address() {
        let words = "east-1 (http://10.0.0.7:8161/console/jolokia): connection refused";
        let e: ApiError = RegistryError::Discovery(words.into()).into();
        assert_eq!((e.status, e.slug), (StatusCode::BAD_GATEWAY, "discovery"));
        assert!(!e.message.contains("10.0.0.7") && !e.message.contains("east-1"), "{}", e.message);
    }

    #[test]
    fn every_slug_has_a_title_and_a_type() {
        for (slug, title) in PROBLEMS {
            assert!(!title.is_empty(), "{slug}");
            assert_eq!(problem_type(slug).strip_prefix("/problems/"), Some(*slug));
        }
    }
}
