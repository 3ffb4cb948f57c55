//! Bad input (issue 16): every malformed, hostile or ambiguous request is refused with a 400 (or the framework's
//! fitting 4xx) in the API's error form, before it reaches the database — never a 500.

use super::*;

/// A request as the service would not send it: `headers` as given (each name may repeat), `body` as raw JSON text
/// (none when empty).
async fn raw(api: &Api, method: Method, path: &str, headers: &[(&str, &str)], body: &str) -> (StatusCode, Value) {
    let body = (!body.is_empty()).then(|| ("application/json", body.to_string()));
    let (status, _, answer) = answered(api, method, path, headers, body).await;
    (status, answer)
}

/// The headers of a well-formed call for [`OPERATOR`].
fn caller() -> [(&'static str, String); 2] {
    [("Authorization", format!("Bearer {TOKEN}")), ("X-Operator", OPERATOR.to_string())]
}

#[tokio::test]
async fn text_postgres_or_a_terminal_would_choke_on_is_refused_in_words() {
    let world = World::new("api_input_text", &[]).await;
    let api = Api::start(&world).await;
    let run = Uuid::new_v4();
    let [auth, operator] = caller();
    let headers = [(auth.0, auth.1.as_str()), (operator.0, operator.1.as_str())];

    // NUL anywhere in a body: Postgres refuses byte 0x00, so it must never get that far.
    let bodies = [
        (format!("/api/v1/runs/{run}/execute"), json!({ "plan_hash": "x", "acknowledged": ["a\u{0}b"] })),
        (format!("/api/v1/runs/{run}/stop"), json!({ "reason": "nul \u{0} here" })),
        (format!("/api/v1/runs/{run}/return"), json!({ "confirm": "q\u{0}" })),
        ("/api/v1/previews".to_string(), {
            let mut body = move_body("a\u{0}", "b");
            body["selection"] = json!({ "kind": "filter", "value": "x = '\u{0}'" });
            body
        }),
        (
            "/api/v1/orphans/return".to_string(),
            json!({ "cluster": "east", "node": "east-1", "queue": "q\u{0}", "confirm": "q\u{0}" }),
        ),
    ];
    for (path, body) in bodies {
        let (status, answer) = raw(&api, Method::POST, &path, &headers, &body.to_string()).await;
        assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{path}: {answer}");
    }
    let (status, answer) =
        raw(&api, Method::PUT, "/api/v1/settings/dmq_chain", &headers, &json!({ "value": ["a\u{0}"] }).to_string())
            .await;
    assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{answer}");

    // Terminal escapes in free text that the CLI prints, and a stop reason of unbounded length.
    let stop = format!("/api/v1/runs/{run}/stop");
    for reason in ["\u{1b}[2J\u{1b}[31mall good".to_string(), "x".repeat(1001)] {
        let body = json!({ "reason": reason }).to_string();
        let (status, answer) = raw(&api, Method::POST, &stop, &headers, &body).await;
        assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{answer}");
    }

    // NUL or a control character in a path or a query value.
    for path in [
        "/api/v1/clusters/ea%00st/targets".to_string(),
        "/api/v1/clusters/%1B%5B2J/targets".to_string(),
        "/api/v1/runs?state=running%00".to_string(),
    ] {
        let (status, answer) = raw(&api, Method::GET, &path, &headers, "").await;
        assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{path}: {answer}");
    }
    let (status, answer) =
        raw(&api, Method::PUT, "/api/v1/settings/batch%00size", &headers, &json!({ "value": 1 }).to_string()).await;
    assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{answer}");
    api.assert_no_secret();
}

#[tokio::test]
async fn ambiguous_or_malformed_requests_are_refused_and_the_bearer_scheme_is_any_case() {
    let world = World::new("api_input_shape", &[]).await;
    let api = Api::start(&world).await;
    let bearer = format!("Bearer {TOKEN}");
    let one = [("Authorization", bearer.as_str()), ("X-Operator", OPERATOR)];

    // The scheme is case-insensitive (RFC 9110 §11.1).
    let upper = format!("BEARER {TOKEN}");
    let (status, answer) =
        raw(&api, Method::GET, "/api/v1/runs", &[("Authorization", &upper), ("X-Operator", OPERATOR)], "").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // A header sent twice: which one would count is an accident, so neither does.
    let two_tokens = [("Authorization", bearer.as_str()), ("Authorization", "Bearer other"), ("X-Operator", OPERATOR)];
    let (status, answer) = raw(&api, Method::GET, "/api/v1/runs", &two_tokens, "").await;
    assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{answer}");
    let two_operators = [("Authorization", bearer.as_str()), ("X-Operator", OPERATOR), ("X-Operator", "mallory")];
    let (status, answer) = raw(&api, Method::GET, "/api/v1/runs", &two_operators, "").await;
    assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{answer}");
    // An operator that is not an ASCII name: refused as such, not as a missing one.
    let response = api
        .client
        .get(format!("{}/api/v1/runs", api.base))
        .bearer_auth(TOKEN)
        .header("X-Operator", reqwest::header::HeaderValue::from_bytes("j\u{fc}rgen".as_bytes()).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(slug(&answer), "invalid-operator", "{answer}");

    // Selections: message ids are positive and named once.
    for ids in [json!([1, 1]), json!([-1]), json!([0])] {
        let mut body = move_body("a", "b");
        body["selection"] = json!({ "kind": "ids", "value": ids });
        let (status, answer) = raw(&api, Method::POST, "/api/v1/previews", &one, &body.to_string()).await;
        assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-selection"), "{ids}: {answer}");
    }
    // An unknown field anywhere in a body is refused, not ignored.
    let mut misspelt = move_body("a", "b");
    misspelt["source"]["adress"] = json!("a");
    let mut extra = move_body("a", "b");
    extra["selection"]["limit"] = json!(5);
    let run = Uuid::new_v4();
    for (path, body) in [
        ("/api/v1/previews".to_string(), misspelt),
        ("/api/v1/previews".to_string(), extra),
        (format!("/api/v1/runs/{run}/stop"), json!({ "reason": "r", "why": "w" })),
        (format!("/api/v1/runs/{run}/return"), json!({ "confirmed": "q" })),
        ("/api/v1/orphans/return".to_string(), json!({ "cluster": "e", "node": "n", "queue": "q", "force": true })),
    ] {
        let (status, answer) = raw(&api, Method::POST, &path, &one, &body.to_string()).await;
        assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{path} {body}: {answer}");
    }
    let (status, answer) =
        raw(&api, Method::PUT, "/api/v1/settings/batch_size", &one, &json!({ "value": 1, "x": 2 }).to_string()).await;
    assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{answer}");

    // A Last-Event-ID that is not an event id is refused, not taken as "from the start".
    let with_id = [("Authorization", bearer.as_str()), ("X-Operator", OPERATOR), ("Last-Event-ID", "seven")];
    let (status, answer) = raw(&api, Method::GET, &format!("/api/v1/runs/{run}/events"), &with_id, "").await;
    assert_eq!((status, slug(&answer)), (StatusCode::BAD_REQUEST, "invalid-request"), "{answer}");
    api.assert_no_secret();
}

/// A request with `headers` as given and `body` of its content type, answered with its headers.
async fn answered(
    api: &Api,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, String)>,
) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let mut request = api.client.request(method, format!("{}{path}", api.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some((content_type, body)) = body {
        request = request.header("Content-Type", content_type).body(body);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let text = response.text().await.unwrap();
    api.bodies.lock().unwrap().push(text.clone());
    (status, headers, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// A request (method, path, headers, content type and body) and the status and slug it must be answered with.
type Probe<'a> = (Method, &'a str, &'a [(&'a str, &'a str)], Option<(&'a str, String)>, StatusCode, &'a str);

#[tokio::test]
async fn every_failure_is_a_problem_document_carrying_the_request_id() {
    let world = World::new("api_input_problem", &[]).await;
    let api = Api::start(&world).await;
    let bearer = format!("Bearer {TOKEN}");
    let one = [("Authorization", bearer.as_str()), ("X-Operator", OPERATOR)];
    let json = |text: String| Some(("application/json", text));
    let huge = json!({ "source": "x".repeat(70 * 1024) }).to_string();
    let probes: Vec<Probe> = vec![
        (Method::GET, "/no/such/path", &[], None, StatusCode::NOT_FOUND, "no-such-route"),
        (Method::DELETE, "/api/v1/runs", &one, None, StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed"),
        (Method::POST, "/api/v1/previews", &one, json(huge), StatusCode::PAYLOAD_TOO_LARGE, "body-too-large"),
        (
            Method::POST,
            "/api/v1/previews",
            &one,
            Some(("text/plain", "{}".into())),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported-media-type",
        ),
        (Method::POST, "/api/v1/previews", &one, json("{".into()), StatusCode::BAD_REQUEST, "invalid-request"),
        (Method::GET, "/api/v1/runs/%FF%FE", &one, None, StatusCode::BAD_REQUEST, "invalid-request"),
        (Method::GET, "/api/v1/runs", &[], None, StatusCode::UNAUTHORIZED, "unauthenticated"),
        (Method::GET, "/api/v1/runs/not-a-run", &one, None, StatusCode::BAD_REQUEST, "invalid-run-id"),
    ];
    for (method, path, headers, body, status, expected) in probes {
        let (got, headers, problem) = answered(&api, method.clone(), path, headers, body).await;
        let at = format!("{method} {path}");
        assert_eq!((got, slug(&problem)), (status, expected), "{at}: {problem}");
        assert_eq!(headers["content-type"], "application/problem+json", "{at}");
        assert_eq!(problem["status"], json!(status.as_u16()), "{at}: {problem}");
        assert!(problem["title"].as_str().is_some_and(|t| !t.is_empty()), "{at}: {problem}");
        let id = headers["x-request-id"].to_str().unwrap();
        assert!(Uuid::parse_str(id).is_ok(), "{at}: a request id is made when none is sent: {id}");
        assert_eq!(problem["request_id"], json!(id), "{at}: {problem}");
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert_eq!(headers["allow"], "GET,HEAD", "{at}");
        }
    }

    // A caller's own request id, when it is a sane token, is kept: in the answer, its header and the log line.
    let mine = [("X-Request-Id", "console-7f3a.42")];
    let (status, headers, _) = answered(&api, Method::GET, "/health", &mine, None).await;
    assert_eq!((status, headers["x-request-id"].to_str().unwrap()), (StatusCode::OK, "console-7f3a.42"));
    let with_mine = [("Authorization", bearer.as_str()), ("X-Operator", OPERATOR), ("X-Request-Id", "console-9")];
    let (_, headers, problem) = answered(&api, Method::GET, "/api/v1/runs/nope", &with_mine, None).await;
    assert_eq!(headers["x-request-id"].to_str().unwrap(), "console-9");
    assert_eq!(problem["request_id"], json!("console-9"));
    // One that is not (too long, or with characters a log or a header should not carry) is replaced.
    let long = "x".repeat(200);
    for theirs in [long.as_str(), "a b", "<script>"] {
        let (_, headers, _) = answered(&api, Method::GET, "/health", &[("X-Request-Id", theirs)], None).await;
        assert!(Uuid::parse_str(headers["x-request-id"].to_str().unwrap()).is_ok(), "{theirs:?} was kept");
    }
    support::wait_for("the request's log line with its id", Duration::from_secs(5), || async {
        let log = std::fs::read_to_string(&api.log).unwrap();
        log.lines().any(|l| l.contains("console-9") && l.contains("API request")).then_some(())
    })
    .await;
    api.assert_no_secret();
}
