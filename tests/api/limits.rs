//! The door's hardening (issue 16): several tokens per service, a tokens file read again when it changes (no
//! restart), services limited to named operators, rate limits with `Retry-After`. The request timeout is tested
//! in `api::request`'s unit tests (no handler here is slow without a seam).

use super::*;

/// A second token of the service `studio`.
const TOKEN2: &str = "api-test-token-2-0123456789abcdef";
/// The token of `ops-bot`, a service limited to named operators.
const BOT: &str = "api-test-ops-bot-0123456789abcdef";

/// `GET path` with `token` for `operator`: status, answer, headers.
async fn get_as(api: &Api, token: &str, operator: &str, path: &str) -> (StatusCode, Value, reqwest::header::HeaderMap) {
    let request = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).header("X-Operator", operator);
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let text = response.text().await.unwrap();
    api.bodies.lock().unwrap().push(text.clone());
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), headers)
}

/// Panics if the service's log holds any of `tokens`.
fn assert_log_holds_none_of(api: &Api, tokens: &[&str]) {
    let log = std::fs::read_to_string(&api.log).unwrap();
    for token in tokens {
        assert!(!log.contains(token), "the log holds a token");
    }
}

#[tokio::test]
async fn a_service_may_have_several_tokens_and_be_limited_to_named_operators() {
    let world = World::new("api_tokens", &[]).await;
    let tokens = format!("studio={TOKEN},studio={TOKEN2},ops-bot={BOT} operators={OPERATOR}|alice");
    let api = Api::start_with_tokens(&world, Some(&tokens), &[]).await;

    for token in [TOKEN, TOKEN2] {
        let (status, answer, _) = get_as(&api, token, OPERATOR, "/api/v1/runs").await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    let (status, answer, _) = get_as(&api, BOT, "mallory", "/api/v1/runs").await;
    assert_eq!((status, slug(&answer)), (StatusCode::FORBIDDEN, "operator-not-allowed-for-service"), "{answer}");
    let detail = answer["detail"].as_str().unwrap();
    assert!(detail.contains("ops-bot") && detail.contains("mallory") && !detail.contains(BOT), "{detail}");
    let (status, answer, _) = get_as(&api, BOT, OPERATOR, "/api/v1/runs").await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    let log = std::fs::read_to_string(&api.log).unwrap();
    assert!(log.contains("studio (2 tokens)") && log.contains("ops-bot (1 token, for 2 operators)"), "{log}");
    assert_log_holds_none_of(&api, &[TOKEN2, BOT]);
    assert!(!api.bodies.lock().unwrap().iter().any(|b| b.contains(TOKEN2) || b.contains(BOT)));
    api.assert_no_secret();
}

/// Writes `text` to `path` as a mounted secret is replaced: a new file renamed over the old.
fn replace_file(path: &std::path::Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

#[tokio::test]
async fn a_tokens_file_is_read_again_when_it_changes_and_a_bad_one_keeps_the_tokens_in_force() {
    let world = World::new("api_tokens_file", &[]).await;
    let file = world.log_dir.join("api-tokens");
    replace_file(&file, &format!("# the console's backend\nstudio={TOKEN}\n"));
    let file_env = file.display().to_string();
    let env =
        [("ARTEMIS_TRANSFER_API_TOKENS_FILE", file_env.as_str()), ("ARTEMIS_TRANSFER__API__TOKENS_POLL_MS", "200")];

    // The environment and a file at once is refused at start, in words.
    let both = Command::new(env!("CARGO_BIN_EXE_artemis-transfer"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("DATABASE_URL", &world.url)
        .env("ARTEMIS_TRANSFER_API_TOKENS", format!("studio={TOKEN}"))
        .env("ARTEMIS_TRANSFER_API_TOKENS_FILE", &file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert!(!both.status.success() && stderr.contains("use one"), "{stderr}");
    assert!(!stderr.contains(TOKEN), "{stderr}");

    let api = Api::start_with_tokens(&world, None, &env).await;
    let (status, answer, _) = get_as(&api, TOKEN, OPERATOR, "/api/v1/runs").await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    // Rotation: the new token replaces the old one, without a restart, within the poll period.
    let rotated = Instant::now();
    replace_file(&file, &format!("studio={TOKEN2}\n"));
    support::wait_for("the rotated token to be in force", Duration::from_secs(5), || async {
        let (new, ..) = get_as(&api, TOKEN2, OPERATOR, "/api/v1/runs").await;
        (new == StatusCode::OK).then_some(())
    })
    .await;
    assert!(rotated.elapsed() < Duration::from_secs(3), "took {:?}", rotated.elapsed());
    let (status, answer, _) = get_as(&api, TOKEN, OPERATOR, "/api/v1/runs").await;
    assert_eq!((status, slug(&answer)), (StatusCode::UNAUTHORIZED, "unauthenticated"), "{answer}");

    // A file that does not parse keeps the tokens in force and says so in the log, without a token.
    replace_file(&file, &format!("studio={TOKEN2}\nstudio {BOT}\n"));
    support::wait_for("the bad file to be logged", Duration::from_secs(5), || async {
        let log = std::fs::read_to_string(&api.log).unwrap();
        log.contains("could not be read again").then_some(())
    })
    .await;
    let (status, answer, _) = get_as(&api, TOKEN2, OPERATOR, "/api/v1/runs").await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let log = std::fs::read_to_string(&api.log).unwrap();
    let error = log.lines().find(|l| l.contains("could not be read again")).unwrap();
    assert!(error.contains("ERROR") && error.contains("line 2"), "{error}");
    assert!(log.contains("read again") && log.contains("studio (1 token)"), "{log}");
    assert_log_holds_none_of(&api, &[TOKEN, TOKEN2, BOT]);
    api.assert_no_secret();
}

#[tokio::test]
async fn bursting_past_the_rate_limit_is_answered_429_with_retry_after() {
    let world = World::new("api_rate", &[]).await;
    let limits = rate_limits("0.5", "5");
    let api = Api::start_with(&world, &limits).await;

    let mut statuses = Vec::new();
    let mut refused = None;
    for _ in 0..10 {
        let (status, answer, headers) = get_as(&api, TOKEN, OPERATOR, "/api/v1/runs").await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            refused.get_or_insert((answer, headers));
        }
        statuses.push(status.as_u16());
    }
    assert_eq!(statuses[..5], [200; 5], "{statuses:?}");
    let (answer, headers) = refused.unwrap_or_else(|| panic!("never refused: {statuses:?}"));
    assert_eq!(slug(&answer), "rate-limited", "{answer}");
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert_eq!(headers["content-type"], "application/problem+json");
    assert_eq!(answer["request_id"].as_str(), headers["x-request-id"].to_str().ok());
    assert!(answer["detail"].as_str().unwrap().contains("studio"), "{answer}");

    // What a platform calls is not limited.
    for path in ["/health", "/ready", "/metrics", "/openapi.json"] {
        let r = api.client.get(format!("{}{path}", api.base)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }

    // Made-up tokens: 401 for the address's burst, then 429 before the token is looked at.
    let made_up = "made-up-token-0123456789abcdef";
    let mut statuses = Vec::new();
    for _ in 0..8 {
        statuses.push(get_as(&api, made_up, OPERATOR, "/api/v1/runs").await.0.as_u16());
    }
    assert_eq!(statuses[..5], [401; 5], "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
    api.assert_no_secret();
}

/// Behind a load balancer every browser shares its address. With the balancer among the trusted proxies, the client
/// is the one its `X-Forwarded-For` names: a client flooding without a token is limited alone — another client
/// behind the same balancer is answered, and so is every caller with a known token (identified first, charged to
/// its own bucket); an address a client writes to the left of the balancer's entry is not believed. From a peer
/// that is not a trusted proxy the header is ignored.
#[tokio::test]
async fn behind_a_trusted_proxy_a_flood_without_a_token_starves_no_other_caller() {
    let world = World::new("api_proxy", &[]).await;
    let mut env = rate_limits("0.01", "3").to_vec();
    env.push(("ARTEMIS_TRANSFER__API__TRUSTED_PROXIES", r#"["127.0.0.0/8"]"#));
    let behind = Api::start_with(&world, &env).await;
    let made_up = "made-up-token-0123456789abcdef";
    let from = |api: &Api, token: &str, forwarded: &str| {
        let url = format!("{}/api/v1/runs", api.base);
        let request = api.client.get(url).bearer_auth(token).header("X-Operator", OPERATOR);
        let request = request.header("X-Forwarded-For", forwarded);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let mut flood = Vec::new();
    for _ in 0..5 {
        flood.push(from(&behind, made_up, "198.51.100.1").await);
    }
    assert_eq!(flood, [401, 401, 401, 429, 429]);
    assert_eq!(from(&behind, made_up, "198.51.100.2").await, 401, "another client behind the proxy is answered");
    assert_eq!(from(&behind, made_up, "198.51.100.2, 198.51.100.1").await, 429, "the proxy's entry counts");
    assert_eq!(from(&behind, TOKEN, "198.51.100.1").await, 200, "a known token is never the address's");

    // Without trusted proxies the header is the client's own claim: every request is the peer's.
    let direct = Api::start_with(&world, &rate_limits("0.01", "3")).await;
    let mut claimed = Vec::new();
    for client in ["198.51.100.1", "198.51.100.2", "198.51.100.3", "198.51.100.4"] {
        claimed.push(from(&direct, made_up, client).await);
    }
    assert_eq!(claimed, [401, 401, 401, 429]);
    assert_eq!(from(&direct, TOKEN, "198.51.100.1").await, 200, "the flood from its address starves no known caller");
    behind.assert_no_secret();
}
