//! Bad input (issue 16): every malformed, hostile or ambiguous request is refused with a 400 (or the framework's
//! fitting 4xx) in the API's error form, before it reaches the database — never a 500.

use super::*;

/// A request as the service would not send it: `headers` as given (each name may repeat), `body` as raw text.
async fn raw(api: &Api, method: Method, path: &str, headers: &[(&str, &str)], body: &str) -> (StatusCode, Value) {
    let mut request = api.client.request(method, format!("{}{path}", api.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if !body.is_empty() {
        request = request.header("Content-Type", "application/json").body(body.to_string());
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    api.bodies.lock().unwrap().push(text.clone());
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
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
