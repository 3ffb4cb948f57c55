//! The router and its OpenAPI document agree, both ways, checked without a network or a database: the router is
//! built over a pool that is never reached (a request that needs it answers 503), and asked in memory.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use serde_json::Value;
use tower::ServiceExt as _;

use super::doc::strings_at;
use super::{document, router, ApiState, LiveTokens, ServiceTokens};

/// The methods a route could be served on (HEAD is GET's, OPTIONS and the rest are never routed here).
const METHODS: [Method; 5] = [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH];

/// A state whose database is never reached: connecting fails at once (nothing listens on port 9).
pub(super) fn unreachable_state() -> ApiState {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy("postgres://nobody@127.0.0.1:9/none")
        .expect("a lazy pool");
    ApiState {
        pool,
        tokens: Arc::new(LiveTokens::new(ServiceTokens::parse(TOKEN_ENTRY).expect("a token"))),
        metrics_token: None,
        max_attempts: 1,
        preview_valid_for: Duration::from_secs(60),
        events_every: Duration::from_millis(50),
        limits: super::limit::Limits::new(RATE, RATE),
        request_timeout: Duration::from_secs(30),
        metrics_cache: Default::default(),
        feeds: Default::default(),
        closing: Default::default(),
    }
}

/// The one service token of these tests.
const TOKEN_ENTRY: &str = "test=0123456789abcdef0123456789abcdef";

/// High enough that no test here meets it.
const RATE: super::limit::Rate = super::limit::Rate { per_second: 10_000.0, burst: 10_000 };

fn generated() -> Value {
    document()
}

/// Every (method, path) of the document.
fn documented(doc: &Value) -> BTreeSet<(Method, String)> {
    let mut operations = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            let method = method.to_uppercase().parse().unwrap_or_else(|_| panic!("{path}: {method} is no method"));
            operations.insert((method, path.clone()));
        }
    }
    operations
}

/// The paths the router routes, read from its `Debug` form (axum has no other way to list them): the quoted
/// paths of its path router's node, which lists every route once, nested ones with their prefix.
fn routed_paths(router: &Router) -> BTreeSet<String> {
    let debug = format!("{router:?}");
    let start = debug.find("node: Node { paths:").expect("axum's Router Debug names its node's paths");
    let end = debug[start..].find("fallback_router:").map_or(debug.len(), |e| start + e);
    let paths: BTreeSet<String> = debug[start..end]
        .split('"')
        .skip(1)
        .step_by(2)
        .filter(|p| p.starts_with('/') && !p.contains("__private__"))
        .map(str::to_string)
        .collect();
    assert!(paths.len() > 4, "no routes read from the router's Debug form: {debug}");
    paths
}

/// `path` with a value for each parameter.
fn concrete(path: &str) -> String {
    path.replace("{run}", "00000000-0000-4000-8000-000000000000")
        .replace("{cluster}", "east")
        .replace("{key}", "batch_size")
}

/// The status and error slug (if any) `router` answers `method path` with, without a token.
async fn answer(router: &Router, method: &Method, path: &str) -> (StatusCode, Option<String>) {
    let request = Request::builder().method(method).uri(concrete(path)).body(Body::empty()).expect("a request");
    let response = router.clone().oneshot(request).await.expect("an answer");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap_or_default();
    let problem_type = |v: Value| v["type"].as_str().map(|t| t.trim_start_matches("/problems/").to_string());
    let slug = serde_json::from_slice::<Value>(&bytes).ok().and_then(problem_type);
    (status, slug)
}

#[tokio::test]
async fn every_routed_path_is_documented_and_every_documented_path_is_routed() {
    let routed = routed_paths(&router(unreachable_state()));
    let documented: BTreeSet<String> = documented(&generated()).into_iter().map(|(_, p)| p).collect();
    assert_eq!(routed.difference(&documented).collect::<Vec<_>>(), Vec::<&String>::new(), "routed, undocumented");
    assert_eq!(documented.difference(&routed).collect::<Vec<_>>(), Vec::<&String>::new(), "documented, unrouted");
}

#[tokio::test]
async fn every_documented_operation_reaches_a_handler_and_no_other_method_is_served() {
    let router = router(unreachable_state());
    let operations = documented(&generated());
    let paths: BTreeSet<&String> = operations.iter().map(|(_, p)| p).collect();
    for path in paths {
        for method in &METHODS {
            let (status, slug) = answer(&router, method, path).await;
            if operations.contains(&(method.clone(), path.clone())) {
                // The handler (or its extractors) answered: not the fallback's 404, not a 405.
                assert_ne!(slug.as_deref(), Some("no-such-route"), "{method} {path} is documented, not routed");
                assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path} is documented, not routed");
                if path.starts_with("/api/v1") {
                    assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path} without a token");
                }
            } else {
                assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path} is served, not documented");
            }
        }
    }
}

#[tokio::test]
async fn the_served_document_is_the_generated_one() {
    let router = router(unreachable_state());
    let request = Request::builder().uri("/openapi.json").body(Body::empty()).expect("a request");
    let response = router.oneshot(request).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22).await.expect("a body");
    let served: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert_eq!(served, generated());
    assert_eq!(served["openapi"], "3.1.0");
}

/// The statuses an operation declares.
fn statuses(operation: &Value) -> Vec<u16> {
    let responses = operation["responses"].as_object().expect("responses");
    responses.keys().map(|s| s.parse().unwrap_or_else(|_| panic!("status {s}"))).collect()
}

#[test]
fn every_operation_is_named_and_declares_its_failures() {
    let doc = generated();
    let mut ids = BTreeSet::new();
    for (method, path) in documented(&doc) {
        let operation = &doc["paths"][&path][method.as_str().to_lowercase()];
        let id = operation["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path}: no operationId"));
        assert!(ids.insert(id.to_string()), "{method} {path}: operationId {id} twice");
        assert!(operation["tags"].as_array().is_some_and(|t| !t.is_empty()), "{method} {path}: no tag");
        let statuses = statuses(operation);
        assert!(statuses.iter().any(|s| (200..300).contains(s)), "{method} {path}: no success");
        // /health and /openapi.json answer only 200, /ready its own 503: what a platform polls has no 4xx.
        if path.starts_with("/api/v1") {
            assert!(statuses.iter().any(|s| (400..500).contains(s)), "{method} {path}: no 4xx");
            assert!(statuses.iter().any(|s| *s >= 500), "{method} {path}: no 5xx");
            assert!(operation["security"].to_string().contains("bearer"), "{method} {path}: no bearer");
        }
    }
}

/// An answer of the document, followed through its `$ref` to `components`.
fn resolved<'d>(doc: &'d Value, answer: &'d Value) -> &'d Value {
    match answer["$ref"].as_str() {
        Some(name) => &doc["components"]["responses"][name.rsplit('/').next().unwrap_or_default()],
        None => answer,
    }
}

/// Every error answer is an RFC 9457 problem (the readiness 503 excepted: a platform reads its JSON), every
/// answer declares X-Request-Id, and an operation that takes a body declares 413 and 415.
#[test]
fn every_error_is_declared_a_problem_and_every_answer_its_request_id() {
    let doc = generated();
    for (method, path) in documented(&doc) {
        let operation = &doc["paths"][&path][method.as_str().to_lowercase()];
        let at = format!("{method} {path}");
        for (status, answer) in operation["responses"].as_object().expect("responses") {
            let answer = resolved(&doc, answer);
            assert!(answer["headers"]["X-Request-Id"].is_object(), "{at} {status}: no X-Request-Id");
            if status.as_str() < "400" || (path == "/ready" && status == "503") {
                continue;
            }
            let content = answer["content"].as_object().expect("an error answer has a body");
            let types: Vec<&String> = content.keys().collect();
            assert_eq!(types, ["application/problem+json"], "{at} {status}");
            assert_eq!(content["application/problem+json"]["schema"]["$ref"], "#/components/schemas/Problem");
        }
        if operation.get("requestBody").is_some() {
            let statuses = statuses(operation);
            assert!(statuses.contains(&413) && statuses.contains(&415), "{at}: {statuses:?}");
        }
    }
}

/// Where `schema` (followed through `$ref`s to `components`, and into its parts) is an object that says nothing
/// of its shape without saying it is free-form.
fn bare_objects(doc: &Value, schema: &Value, at: &str, seen: &mut BTreeSet<String>, found: &mut Vec<String>) {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default().to_string();
        if seen.insert(name.clone()) {
            bare_objects(doc, &doc["components"]["schemas"][&name], &name, seen, found);
        }
        return;
    }
    let is_object =
        schema["type"] == "object" || schema["type"].as_array().is_some_and(|t| t.contains(&"object".into()));
    let described =
        ["properties", "additionalProperties", "oneOf", "allOf", "anyOf"].iter().any(|k| schema.get(k).is_some());
    let free_form = schema["description"].as_str().is_some_and(|d| d.contains("free-form"));
    if is_object && !described && !free_form {
        found.push(at.to_string());
    }
    for key in ["oneOf", "allOf", "anyOf"] {
        for (i, part) in schema[key].as_array().into_iter().flatten().enumerate() {
            bare_objects(doc, part, &format!("{at}.{key}[{i}]"), seen, found);
        }
    }
    for (name, part) in schema["properties"].as_object().into_iter().flatten() {
        bare_objects(doc, part, &format!("{at}.{name}"), seen, found);
    }
    for key in ["items", "additionalProperties"] {
        if schema[key].is_object() {
            bare_objects(doc, &schema[key], &format!("{at}.{key}"), seen, found);
        }
    }
}

#[test]
fn no_body_is_an_object_of_unknown_shape() {
    let doc = generated();
    let (mut seen, mut found) = (BTreeSet::new(), Vec::new());
    for (method, path) in documented(&doc) {
        let operation = &doc["paths"][&path][method.as_str().to_lowercase()];
        let bodies = operation["requestBody"]["content"].as_object().into_iter().flatten();
        let answers = operation["responses"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(_, r)| resolved(&doc, r)["content"].as_object().into_iter().flatten());
        for (content_type, content) in bodies.chain(answers) {
            let at = format!("{method} {path} {content_type}");
            bare_objects(&doc, &content["schema"], &at, &mut seen, &mut found);
        }
    }
    assert!(found.is_empty(), "objects of unknown shape: {found:#?}");
}

/// The operation `id` of the document.
fn operation<'d>(doc: &'d Value, id: &str) -> &'d Value {
    let items = doc["paths"].as_object().expect("paths").values();
    let mut operations = items.flat_map(|item| item.as_object().expect("a path item").values());
    operations.find(|o| o["operationId"] == id).unwrap_or_else(|| panic!("no operation {id}"))
}

/// What the hand-written document said wrongly (issue 16) is now said as the code does it.
#[test]
fn the_document_says_what_the_code_does() {
    let doc = generated();
    for id in ["stopRun", "returnRun"] {
        assert_eq!(operation(&doc, id)["requestBody"]["required"], false, "{id}: its body may be left out");
    }
    let orphan_body = &doc["components"]["schemas"]["ReturnOrphanBody"];
    assert!(!orphan_body["required"].as_array().expect("required").contains(&"confirm".into()), "{orphan_body}");
    let created = &operation(&doc, "createPreview")["responses"]["201"];
    assert!(created["headers"]["Location"].is_object(), "{created}");
    for id in ["createPreview", "returnOrphan"] {
        assert!(operation(&doc, id)["responses"]["502"].is_object(), "{id}: a broker that cannot be asked");
    }
    for id in ["createPreview", "executeRun", "stopRun", "resumeRun", "returnRun", "returnOrphan"] {
        let parameters = operation(&doc, id)["parameters"].as_array().cloned().unwrap_or_default();
        assert!(parameters.iter().any(|p| p["name"] == "Idempotency-Key" && p["in"] == "header"), "{id}");
    }
    for (id, declared) in [
        // 403: a service limited to named operators; 429: the door's rate limits (every authenticated call).
        ("getRun", &[200, 400, 401, 403, 404, 429, 500, 503][..]),
        ("executeRun", &[202, 400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503]),
        // 422: an Idempotency-Key sent with another request (every POST).
        ("stopRun", &[200, 202, 400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503]),
        ("followRun", &[200, 400, 401, 403, 404, 429, 500, 503]),
    ] {
        assert_eq!(statuses(operation(&doc, id)), declared.to_vec(), "{id}");
    }
}

/// The door's and the timeout's answers are declared where they can be given, and only there: 429 with
/// Retry-After, 503 with the request timeout except on an event stream, 403 naming the operator limit.
#[test]
fn the_limits_answers_are_declared_where_they_are_given() {
    let doc = generated();
    let answer = |id: &str, status: &str| resolved(&doc, &operation(&doc, id)["responses"][status]).clone();
    let limited = answer("getRun", "429");
    assert!(limited["headers"]["Retry-After"].is_object(), "{limited}");
    assert!(limited["description"].as_str().unwrap().contains("rate-limited"), "{limited}");
    assert!(answer("getRun", "503")["description"].as_str().unwrap().contains("request-timeout"));
    assert!(!answer("followRun", "503")["description"].as_str().unwrap().contains("request-timeout"));
    assert!(answer("followRun", "429")["description"].as_str().unwrap().contains("too-many-streams"));
    for id in ["getRun", "executeRun"] {
        let forbidden = answer(id, "403")["description"].as_str().unwrap().to_string();
        assert!(forbidden.contains("operator-not-allowed-for-service"), "{id}: {forbidden}");
    }
    for id in ["health", "ready", "metrics", "openapi"] {
        assert!(operation(&doc, id)["responses"]["429"].is_null(), "{id} is not rate-limited");
    }
    assert!(answer("ready", "503")["content"]["application/problem+json"].is_object());
}

#[test]
fn every_reference_resolves() {
    let doc = generated();
    let mut found = Vec::new();
    strings_at(&doc, "$ref", &mut found);
    assert!(!found.is_empty());
    for reference in found {
        let pointer = reference.strip_prefix('#').unwrap_or_else(|| panic!("{reference} is not local"));
        assert!(doc.pointer(pointer).is_some(), "{reference} points at nothing");
    }
}

/// The descriptions come from doc comments; a rustdoc link (`[`Type`]`) there means nothing to a caller.
#[test]
fn no_description_carries_a_rustdoc_link() {
    let doc = generated();
    let mut found = Vec::new();
    strings_at(&doc, "description", &mut found);
    let links: Vec<&str> = found.into_iter().filter(|d| d.contains("[`")).collect();
    assert!(links.is_empty(), "rustdoc links in the document: {links:#?}");
}

/// The document says what the door refuses (`api::input`), so a client generating values from it is not refused
/// for a reason it could not read: body strings and path parameters are patterned, body objects closed.
#[test]
fn the_document_says_what_the_door_refuses() {
    let doc = generated();
    let schemas = &doc["components"]["schemas"];
    let reason = &schemas["StopBody"]["properties"]["reason"];
    assert_eq!((&reason["pattern"], &reason["maxLength"]), (&Value::from(super::doc::LINE_TEXT), &Value::from(1000)));
    let queue = &schemas["QueueBody"];
    assert_eq!(queue["additionalProperties"], false, "{queue}");
    assert!(queue["properties"]["queue"]["pattern"].is_string(), "{queue}");
    for variant in schemas["SelectionBody"]["oneOf"].as_array().expect("oneOf") {
        assert_eq!(variant["additionalProperties"], false, "{variant}");
    }
    let targets = operation(&doc, "listTargets");
    assert_eq!(targets["parameters"][0]["schema"]["pattern"], super::doc::LINE_TEXT, "{targets}");
}

/// A preview's links name operations of the document, by the keys OpenAPI spells (`operationId`).
#[test]
fn every_link_names_an_operation_of_the_document() {
    let doc = generated();
    let created = &operation(&doc, "createPreview")["responses"]["201"];
    let links = created["links"].as_object().expect("a stored preview links to its run's calls");
    assert!(links.contains_key("executeRun"), "{created}");
    for (name, link) in links {
        let id = link["operationId"].as_str().unwrap_or_else(|| panic!("{name}: no operationId: {link}"));
        operation(&doc, id);
        assert_eq!(link["parameters"]["run"], "$response.body#/run_id", "{name}");
    }
}

/// Where a value of the document is JSON null (a key added by indexing the JSON mutably, say).
fn nulls(value: &Value, at: &str, found: &mut Vec<String>) {
    match value {
        Value::Null => found.push(at.to_string()),
        // A value a schema describes may be null: a default, an example, an enum's or a const's.
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| !["default", "example", "examples", "enum", "const"].contains(&k.as_str()))
            .for_each(|(k, v)| nulls(v, &format!("{at}/{k}"), found)),
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| nulls(v, &format!("{at}/{i}"), found)),
        _ => {}
    }
}

/// No key of the document is null: a reader takes `"type": null` as a type (schemathesis 4.32 crashed on it).
#[test]
fn no_value_of_the_document_is_null() {
    let mut found = Vec::new();
    nulls(&generated(), "", &mut found);
    assert!(found.is_empty(), "null in the document at {found:#?}");
}

/// The document is read by people who have the repository at most: it points to its docs, never to the spec the
/// project was built from, which is not part of it.
#[test]
fn the_document_points_to_the_repositorys_docs_never_to_the_spec() {
    let text = generated().to_string();
    for outside in ["SPEC", "shared/design"] {
        let at = text.find(outside).map(|i| &text[i.saturating_sub(200)..(i + 40).min(text.len())]);
        assert!(at.is_none(), "the OpenAPI document mentions {outside}: …{}…", at.unwrap_or_default());
    }
}
