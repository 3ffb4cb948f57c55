//! The API's errors: a stable slug, an HTTP status and the words a person reads — never a stack trace, never a
//! secret. A refusal the caller can act on keeps the library's own words (they say what to do); a failure of a
//! system (the database, a broker's management) is logged in full with an incident id and answered with that id
//! and plain words only, because its chain may name hosts and internals the caller has no business seeing.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::jobs::executor::error_chain;
use crate::registry::RegistryError;
use crate::transfer::actions::{ActionError, Remedy};
use crate::transfer::orphans::OrphanError;
use crate::transfer::permissions::{MissingGrant, PermissionError};
use crate::transfer::service::ServiceError;
use crate::transfer::view::ViewError;

/// An answer other than success: `{"error": slug, "message": words}` (plus `missing_grant` when a grant is
/// missing) with its status.
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
        debug_assert!(SLUGS.contains(&slug), "the slug {slug:?} is not in error::SLUGS (the document lists them)");
        ApiError { status, slug, message: message.into(), missing_grant: None }
    }

    /// 400: the request is malformed.
    pub fn bad_request(slug: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, slug, message)
    }

    /// 404: no such thing — or one the operator may not see, answered exactly alike (SPEC §9).
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

    /// A failure of a system: logged whole under a new incident id; the caller gets the id and `what` failed.
    pub fn internal(what: &str, error: &(dyn std::error::Error + 'static)) -> ApiError {
        let incident = uuid::Uuid::new_v4();
        tracing::error!(%incident, error = %error_chain(error), "API request failed: {what}");
        let (status, slug) = if is_database(error) {
            (StatusCode::SERVICE_UNAVAILABLE, "database-unavailable")
        } else {
            (StatusCode::INTERNAL_SERVER_ERROR, "internal")
        };
        ApiError::new(
            status,
            slug,
            format!("{what} failed; the service's log has the details under incident {incident}"),
        )
    }
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

/// Every slug an answer may carry, as the document lists them: a new slug is added here first (a debug build
/// refuses an unlisted one, so a test that reaches it fails).
pub const SLUGS: &[&str] = &[
    "unauthenticated",
    "no-operator",
    "invalid-operator",
    "invalid-request",
    "invalid-run-id",
    "invalid-selection",
    "invalid-setting",
    "not-found",
    "no-such-route",
    "missing-grant",
    "run-state",
    "preview-expired",
    "plan-hash-mismatch",
    "preview-refused",
    "source-busy",
    "not-acknowledged",
    "unknown-acknowledgement",
    "confirmation-required",
    "safety-cap",
    "unsupported",
    "conflict",
    "body-too-large",
    "unsupported-media-type",
    "missing-credentials",
    "discovery",
    "orphan-state",
    "orphan-refused",
    "database-unavailable",
    "internal",
];

/// The body of every answer other than success.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// A stable, machine-readable name for the case.
    #[schema(schema_with = slug_schema)]
    pub error: &'static str,
    /// What happened and what to do, in words.
    pub message: String,
    /// The grant the operator lacks, when that is the reason (`missing-grant`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_grant: Option<MissingGrant>,
}

/// `error` is one of [`SLUGS`].
fn slug_schema() -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(SLUGS.iter().copied()))
        .build()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody { error: self.slug, message: self.message, missing_grant: self.missing_grant };
        let mut response = (self.status, Json(body)).into_response();
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

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> ApiError {
        match &e {
            RegistryError::NotFound(words) => ApiError::not_found(words.clone()),
            RegistryError::Conflict(words) => ApiError::new(StatusCode::CONFLICT, "conflict", words.clone()),
            RegistryError::MissingCredentials(words) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "missing-credentials", words.clone())
            }
            RegistryError::Discovery(words) => ApiError::new(StatusCode::BAD_GATEWAY, "discovery", words.clone()),
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
            e.message.starts_with("the action failed; the service's log has the details under incident "),
            "{}",
            e.message
        );
        let e: ApiError = ActionError::Db(sqlx::Error::RowNotFound).into();
        assert_eq!((e.status, e.slug), (StatusCode::INTERNAL_SERVER_ERROR, "internal"));
        assert!(!e.message.contains("no rows"), "{}", e.message);
    }
}
