//! The OpenAPI document, generated from the handlers' `#[utoipa::path]` and their types' `ToSchema`: the router
//! ([`super::routes`]) registers each handler through `utoipa_axum::routes!`, which adds its route and its
//! operation together, so no route exists without its entry and no entry without its route.
//!
//! What every authenticated call has in common comes from one place, [`Common`], because one piece of code
//! causes it: the [`super::auth::Caller`] extractor (the bearer token, `X-Operator`, 401, the `no-operator` 400
//! and the `operator-not-allowed-for-service` 403), the door (`super::auth::door`: 429), the request timeout
//! (`super::request::deadline`: 503) and [`ApiError::internal`](super::error::ApiError::internal) (500 and 503).
//! A handler declares what only it answers.

use serde_json::Value;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, Response, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::error::{Problem, PROBLEM_JSON};

/// The document's fixed parts; the paths come from the router.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "artemis-transfer",
        version = "1",
        description = "Moves or copies selected messages between Apache ActiveMQ Artemis brokers, once, as a \
            durable run (what a run promises: docs/guarantees.md). Every call under /api/v1 is made by a service with a bearer token \
            (ARTEMIS_TRANSFER_API_TOKENS or ARTEMIS_TRANSFER_API_TOKENS_FILE on the server; a service may be limited to \
            named operators) for the operator it names in X-Operator; that operator's \
            grants decide, as on the command line and the SQL start path, and the audit names them. A cluster or \
            run the operator may not see answers 404, as one that does not exist. Every error is an RFC 9457 \
            problem document (application/problem+json): type is /problems/<slug>, a stable name for the case \
            (a relative reference, not served), with its title, the status, the words as detail, the request's \
            id as request_id (and missing_grant when a grant is missing); the types are listed in the Problem \
            schema and each response says which slugs it may carry. Every answer carries X-Request-Id: the \
            caller's, when it is 1 to 64 letters, digits or -._:, else a new UUID; the service's log line of the \
            request carries it too.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    tags(
        (name = "ops", description = "What a platform asks of the service: liveness, readiness, metrics, this \
            document. No token."),
        (name = "clusters", description = "The registered clusters and where a transfer from one could go."),
        (name = "previews", description = "A preview reads the brokers and stores a Previewed run; nothing moves."),
        (name = "runs", description = "Runs: list, view, follow, and the operator's actions."),
        (name = "orphans", description = "Staging queues no run owns."),
        (name = "settings", description = "The runtime settings (docs/settings.md)."),
    ),
    components(schemas(Problem))
)]
pub struct ApiDoc;

/// The security scheme's name, as the handlers' `security(("bearer" = []))` say it.
pub const BEARER: &str = "bearer";

/// The security scheme of `/metrics`, as its `security(("metrics" = []))` says it.
pub const METRICS: &str = "metrics";

/// What every authenticated operation shares, and the answers of a failure of a system: applied to the document
/// once the router has added the paths (a `modifiers(..)` of [`ApiDoc`] would run before there are any).
pub struct Common;

impl Modify for Common {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        let service = "A service token from ARTEMIS_TRANSFER_API_TOKENS or ARTEMIS_TRANSFER_API_TOKENS_FILE \
            (service=token entries; a service may have several).";
        components.add_security_scheme(BEARER, bearer_scheme(service));
        let metrics = "The metrics token (ARTEMIS_TRANSFER_METRICS_TOKEN), when the service has one.";
        components.add_security_scheme(METRICS, bearer_scheme(metrics));
        for (name, description) in COMMON_ANSWERS {
            components.responses.insert(name.to_string(), RefOr::T(error_answer(description)));
        }
        for limited in ["RateLimited", "RateLimitedOrTooManyStreams"] {
            if let Some(RefOr::T(answer)) = components.responses.get_mut(limited) {
                with_retry_after(answer);
            }
        }
        for answer in components.responses.values_mut() {
            if let RefOr::T(answer) = answer {
                with_request_id(answer);
            }
        }
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_mut(item) {
                add_common(operation);
                body_may_be_left_out(operation);
                for answer in operation.responses.responses.values_mut() {
                    if let RefOr::T(answer) = answer {
                        problems_as_problem_json(answer);
                        with_request_id(answer);
                    }
                }
            }
        }
    }
}

/// An HTTP bearer scheme described as `description`.
fn bearer_scheme(description: &str) -> SecurityScheme {
    SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some(description)).build())
}

/// The answers that several operations share, by component name.
const COMMON_ANSWERS: [(&str, &str); 10] = [
    (
        "NoOperator",
        "No X-Operator (no-operator), or not a printable ASCII name of at most 200 characters \
        (invalid-operator); a malformed request, or a header sent twice (invalid-request)",
    ),
    ("Unauthenticated", "No token, or not a known one (unauthenticated); with WWW-Authenticate: Bearer"),
    ("Internal", "A failure of ours, logged under the incident id the message gives (internal)"),
    ("DatabaseUnavailable", "The database is out of reach; retry later (database-unavailable)"),
    (
        "Unavailable",
        "The database is out of reach; retry later (database-unavailable); or the request was not answered within \
        the service's request timeout, and may have taken effect (request-timeout)",
    ),
    (
        "RateLimited",
        "The service is over its rate limit, or the client address over the limit of requests without a known \
        token; retry after Retry-After seconds (rate-limited)",
    ),
    (
        "RateLimitedOrTooManyStreams",
        "The service is over its rate limit, or the client address over the limit of requests without a known \
        token; retry after Retry-After seconds (rate-limited); or the caller (service and operator) holds as many \
        event streams open as it may (api.streams_per_caller): close one first (too-many-streams)",
    ),
    ("OperatorNotAllowed", OPERATOR_NOT_ALLOWED),
    ("BodyTooLarge", "The body is larger than 64 KiB (body-too-large)"),
    ("NotJson", "The body is not sent as application/json (unsupported-media-type)"),
];

/// The 403 of a service limited to named operators.
const OPERATOR_NOT_ALLOWED: &str =
    "The service's tokens name the operators it may act for, and X-Operator is not one (operator-not-allowed-for-service)";

/// A 429 says when to try again.
fn with_retry_after(answer: &mut Response) {
    let header = utoipa::openapi::HeaderBuilder::new()
        .schema(utoipa::openapi::ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)))
        .description(Some("Seconds until a request may be answered"))
        .build();
    answer.headers.insert("Retry-After".to_string(), header);
}

/// Error answers by status, for an `IntoResponses` shared by several handlers.
pub fn error_answers(answers: &[(u16, &str)]) -> std::collections::BTreeMap<String, RefOr<Response>> {
    answers.iter().map(|(status, description)| (status.to_string(), RefOr::T(error_answer(description)))).collect()
}

/// An error answer with `description`, whose body is a [`Problem`].
fn error_answer(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(PROBLEM_JSON, ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build())
        .build()
}

/// A handler's `body = Problem` is declared `application/json` by utoipa: it is answered as
/// `application/problem+json`.
fn problems_as_problem_json(answer: &mut Response) {
    let is_problem = |c: &utoipa::openapi::Content| matches!(&c.schema, Some(RefOr::Ref(r)) if r.ref_location == Ref::from_schema_name("Problem").ref_location);
    if answer.content.get("application/json").is_some_and(is_problem) {
        if let Some(content) = answer.content.shift_remove("application/json") {
            answer.content.insert(PROBLEM_JSON.to_string(), content);
        }
    }
}

/// Every answer carries the request's id.
fn with_request_id(answer: &mut Response) {
    let header = utoipa::openapi::HeaderBuilder::new()
        .schema(utoipa::openapi::ObjectBuilder::new().schema_type(Type::String))
        .description(Some("The request's id: the caller's X-Request-Id when it is a sane token, else a new UUID"))
        .build();
    answer.headers.insert("X-Request-Id".to_string(), header);
}

/// Whether `operation` answers server-sent events.
fn answers_event_stream(operation: &Operation) -> bool {
    operation
        .responses
        .responses
        .values()
        .any(|r| matches!(r, RefOr::T(r) if r.content.contains_key("text/event-stream")))
}

fn operations_mut(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut Operation> {
    [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch, &mut item.head]
        .into_iter()
        .filter_map(Option::as_mut)
}

/// The caller's parts (token, operator, 400, 401, 403) on an operation that needs a bearer token, with the door's
/// 429, and the 500 and 503 of a failure of a system or the request timeout.
fn add_common(operation: &mut Operation) {
    let authenticated =
        operation.security.iter().flatten().any(|s| serde_json::to_value(s).is_ok_and(|v| v.get(BEARER).is_some()));
    // An event stream is not timed (`request::deadline`): its 503 is the database's only.
    let timed = !answers_event_stream(operation);
    let has_body = operation.request_body.is_some();
    let answers = &mut operation.responses.responses;
    let mut answer = |status: &str, component: &str| {
        answers.entry(status.to_string()).or_insert_with(|| RefOr::Ref(Ref::from_response_name(component)));
    };
    if has_body {
        answer("413", "BodyTooLarge");
        answer("415", "NotJson");
    }
    if authenticated {
        answer("400", "NoOperator");
        answer("401", "Unauthenticated");
        // An event stream is limited in number per caller too (`runs::events`).
        answer("429", if timed { "RateLimited" } else { "RateLimitedOrTooManyStreams" });
        answer("500", "Internal");
        answer("503", if timed { "Unavailable" } else { "DatabaseUnavailable" });
        match answers.get_mut("403") {
            // A handler's own 403 (a missing grant) says it may be the operator's limit too.
            Some(RefOr::T(forbidden)) => {
                forbidden.description = format!("{}; or: {OPERATOR_NOT_ALLOWED}", forbidden.description)
            }
            Some(RefOr::Ref(_)) => {}
            None => {
                answers.insert("403".into(), RefOr::Ref(Ref::from_response_name("OperatorNotAllowed")));
            }
        }
        let operator = ParameterBuilder::new()
            .name("X-Operator")
            .parameter_in(ParameterIn::Header)
            .required(Required::True)
            .description(Some("The operator this call acts for: the grants checked and the name audited."))
            .schema(Some(
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::Type::String)
                    .max_length(Some(super::auth::MAX_OPERATOR_CHARS))
                    .pattern(Some(OPERATOR_PATTERN)),
            ))
            .build();
        operation.parameters.get_or_insert_with(Vec::new).push(operator);
    }
}

/// An optional body (`request_body(content = Option<T>)`) may be left out; it is never JSON `null`, which utoipa
/// adds to its schema (`oneOf: [null, T]`) and the handler refuses as not the call's JSON.
fn body_may_be_left_out(operation: &mut Operation) {
    let Some(body) = operation.request_body.as_mut() else { return };
    if body.required == Some(Required::True) {
        return;
    }
    body.required = Some(Required::False);
    for content in body.content.values_mut() {
        if let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema {
            if let [only] = one_of.items.iter().filter(|s| !is_null(s)).collect::<Vec<_>>().as_slice() {
                content.schema = Some((*only).clone());
            }
        }
    }
}

fn is_null(schema: &RefOr<Schema>) -> bool {
    matches!(schema, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null))
}

/// What `X-Operator` takes: printable US-ASCII, no white space at either end (it is trimmed).
const OPERATOR_PATTERN: &str = "^[!-~]([ -~]*[!-~])?$";

/// What a string of a body takes ([`Controls::LineBreaks`](super::input::Controls)): no control character but
/// tab, line feed and carriage return. Both ECMA-262 and Python read `\uXXXX` in a pattern.
const BODY_TEXT: &str = "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$";

/// What a path parameter or one-line free text takes: no control character at all.
pub const LINE_TEXT: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$";

/// The document as served: utoipa's, with what is done over its JSON form — the door's rules ([`text_rules`]) and
/// a preview's links ([`links_from_a_preview`]; utoipa writes a link's keys in snake case, which no reader takes).
pub fn finish(mut doc: Value) -> Value {
    text_rules(&mut doc);
    super::previews::where_messages_go(&mut doc);
    links_from_a_preview(&mut doc);
    doc
}

/// What a stored preview leads to: each call on its run, by `run_id` (and execute with the `plan_hash` it
/// answered), so a client — or a fuzzer's stateful phase — can follow a preview through the run's actions.
fn links_from_a_preview(doc: &mut Value) {
    let run = "$response.body#/run_id";
    let mut links = serde_json::Map::new();
    for id in ["getRun", "followRun", "stopRun", "resumeRun", "returnRun"] {
        links.insert(id.into(), serde_json::json!({ "operationId": id, "parameters": { "run": run } }));
    }
    let execute = serde_json::json!({
        "operationId": "executeRun",
        "parameters": { "run": run },
        "requestBody": { "plan_hash": "$response.body#/plan_hash" },
    });
    links.insert("executeRun".into(), execute);
    doc["paths"]["/api/v1/previews"]["post"]["responses"]["201"]["links"] = Value::Object(links);
}

/// The document saying what `super::input` checks at the door, so a client (or a fuzzer) generating values
/// from it sends nothing refused for reasons it could not read: every string of a request body and every
/// string path or query parameter carries its pattern, and every object of a request body refuses properties it does not
/// name. Done over the JSON form, where the walk is one function.
fn text_rules(doc: &mut Value) {
    let mut found = Vec::new();
    strings_at(&doc["paths"], "$ref", &mut found);
    let mut bodies: Vec<String> = found.into_iter().filter(|r| r.contains("/schemas/")).map(str::to_string).collect();
    bodies.retain(|r| request_bodies_name(doc, r));
    for item in doc["paths"].as_object_mut().into_iter().flat_map(|paths| paths.values_mut()) {
        for operation in item.as_object_mut().into_iter().flat_map(|item| item.values_mut()) {
            // `get_mut`, not `[..]`: indexing a JSON object mutably adds the key, as null, where it is missing.
            let parameters = operation.get_mut("parameters").and_then(Value::as_array_mut);
            for parameter in parameters.into_iter().flatten() {
                // The door refuses a control character in the path and in the query alike (`input::refuse_bad_target`).
                let in_target = parameter["in"] == "path" || parameter["in"] == "query";
                let Some(schema) = parameter.get_mut("schema") else { continue };
                if in_target {
                    with_pattern(schema, LINE_TEXT);
                }
                never_null(schema);
            }
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    while let Some(reference) = bodies.pop() {
        let name = reference.rsplit('/').next().unwrap_or_default().to_string();
        if seen.insert(name.clone()) {
            let schema = &mut doc["components"]["schemas"][&name];
            let mut inner = Vec::new();
            strings_at(schema, "$ref", &mut inner);
            bodies.extend(inner.into_iter().map(str::to_string));
            tighten(schema);
        }
    }
}

/// Whether `reference` is the schema of some operation's request body.
fn request_bodies_name(doc: &Value, reference: &str) -> bool {
    let operations = doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|p| p.values())
        .flat_map(|item| item.as_object().into_iter().flat_map(|item| item.values()));
    operations
        .flat_map(|o| o["requestBody"]["content"].as_object().into_iter().flat_map(|c| c.values()))
        .any(|content| content["schema"]["$ref"] == reference)
}

/// A parameter's value is sent or not, never `null`: utoipa makes an `Option<T>` parameter `[T, "null"]`, and a
/// client reading that would send the text "null".
fn never_null(schema: &mut Value) {
    if let Some(types) = schema.get_mut("type").and_then(Value::as_array_mut) {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            schema["type"] = only.clone();
        }
    }
}

/// `pattern` on `schema` if it is a plain string (no enum, format or pattern of its own).
fn with_pattern(schema: &mut Value, pattern: &str) {
    let is_string =
        schema["type"] == "string" || schema["type"].as_array().is_some_and(|t| t.contains(&"string".into()));
    let plain = ["enum", "format", "pattern", "const"].iter().all(|k| schema.get(k).is_none());
    if is_string && plain {
        schema["pattern"] = Value::from(pattern);
    }
}

/// A request body's schema as [`text_rules`] says: its strings patterned, its objects closed.
fn tighten(schema: &mut Value) {
    with_pattern(schema, BODY_TEXT);
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.values_mut().for_each(tighten);
        if schema.get("additionalProperties").is_none() {
            schema["additionalProperties"] = Value::Bool(false);
        }
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        schema.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten().for_each(tighten);
    }
    if let Some(items) = schema.get_mut("items").filter(|i| i.is_object()) {
        tighten(items);
    }
}

/// Every string under `key` anywhere in `value` (`$ref`s, descriptions).
pub(super) fn strings_at<'v>(value: &'v Value, key: &str, found: &mut Vec<&'v str>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(text)) = map.get(key) {
                found.push(text);
            }
            map.values().for_each(|v| strings_at(v, key, found));
        }
        Value::Array(items) => items.iter().for_each(|v| strings_at(v, key, found)),
        _ => {}
    }
}
