//! The operator console in-process (ADR 0014): its router and the API's, as `serve` merges them, driven by
//! `tower::ServiceExt::oneshot` over a fresh database — the security headers exactly, the CSRF refusals, hostile
//! names escaped, what a read-only or east-only operator sees and may post, the audit naming "console", and the
//! bearer API ignoring the console's cookie.

#[allow(dead_code)]
#[path = "../console/world.rs"]
mod world;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use tower::ServiceExt as _;

use testbed::TestQueues;
use world::{ConsoleWorld, ADMIN, EAST_ONLY, HOSTILE_QUEUE, READER, TOKEN};

/// The CSP the console promises (ADR 0014), spelled out here so that a change to it is a change to this test.
const EXPECTED_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                            connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; \
                            base-uri 'none'";

/// An answer: status, headers, body text.
struct Answer {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }
}

async fn send(app: &axum::Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22).await.unwrap();
    Answer { status, headers, body: String::from_utf8_lossy(&bytes).into_owned() }
}

/// A GET with the session `cookie` (if any).
fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut b = Request::get(path).header(header::HOST, "console.test");
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    b.body(Body::empty()).unwrap()
}

/// A form POST from this service's own page (Sec-Fetch-Site: same-origin) unless `headers` say otherwise.
fn post(path: &str, cookie: Option<&str>, form: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut b = Request::post(path)
        .header(header::HOST, "console.test")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if headers.is_empty() {
        b = b.header("sec-fetch-site", "same-origin");
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    if let Some(c) = cookie {
        b = b.header(header::COOKIE, c);
    }
    b.body(Body::from(form.to_string())).unwrap()
}

/// A GET of the bearer API as `operator`, with the service's token.
fn bearer_get(path: &str, operator: &str) -> Request<Body> {
    Request::get(path)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .header("x-operator", operator)
        .body(Body::empty())
        .unwrap()
}

fn encoded(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Signs `operator` in; answers the cookie (`name=value`) and the page's form token.
async fn sign_in(app: &axum::Router, operator: &str) -> (String, String) {
    let form = format!("token={}&operator={operator}", encoded(TOKEN));
    let answer = send(app, post("/console/sign-in", None, &form, &[])).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let set = answer.header("set-cookie").to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: no Secure attribute: {set}");
    let cookie = set.split(';').next().unwrap().to_string();
    let page = send(app, get("/console/", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    (cookie, form_token(&page.body))
}

/// The value of the first `form_token` field of `page`.
fn form_token(page: &str) -> String {
    let at = page.find("name=\"form_token\" value=\"").expect("a form token on the page") + 25;
    page[at..].split('"').next().unwrap().to_string()
}

/// A world with a running move from `orders`, its app, and `operator` signed in: the app, the run, the session's
/// cookie and its form token.
async fn signed_in_beside_a_running_run(
    label: &str,
    operator: &str,
) -> (ConsoleWorld, axum::Router, uuid::Uuid, String, String) {
    let world = ConsoleWorld::new(label).await;
    let app = world.app();
    let run = world.run("running", "orders", 100, 10).await;
    let (cookie, token) = sign_in(&app, operator).await;
    (world, app, run, cookie, token)
}

#[tokio::test]
async fn every_console_answer_carries_the_security_headers_and_html_is_never_stored() {
    let world = ConsoleWorld::new("console_headers").await;
    let app = world.app();
    let page = send(&app, get("/console/sign-in", None)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.header("content-security-policy"), EXPECTED_CSP);
    assert_eq!(page.header("x-content-type-options"), "nosniff");
    assert_eq!(page.header("referrer-policy"), "same-origin");
    assert_eq!(page.header("cache-control"), "no-store");
    assert!(page.header("content-type").starts_with("text/html"), "{}", page.header("content-type"));
    assert!(!page.body.contains("http://") && !page.body.contains("https://"), "no external URL: {}", page.body);
    assert!(!page.body.contains(" style=") && !page.body.contains("<style"), "no inline style");
    // The page's own assets, by their hashed names, are cached for a year.
    for asset in [artemis_transfer::console::assets::CSS.href(), artemis_transfer::console::assets::JS.href()] {
        assert!(page.body.contains(&asset), "{asset}");
        let file = send(&app, get(&asset, None)).await;
        assert_eq!(file.status, StatusCode::OK, "{asset}");
        assert_eq!(file.header("cache-control"), "public, max-age=31536000, immutable");
        assert_eq!(file.header("x-content-type-options"), "nosniff");
    }
    assert_eq!(send(&app, get("/console/assets/console.0000.css", None)).await.status, StatusCode::NOT_FOUND);
    // `/` sends a browser to the console; without a session, the console sends it to sign in.
    let root = send(&app, get("/", None)).await;
    assert_eq!((root.status, root.header("location")), (StatusCode::SEE_OTHER, "/console/"));
    let list = send(&app, get("/console/", None)).await;
    assert_eq!((list.status, list.header("location")), (StatusCode::SEE_OTHER, "/console/sign-in"));
}

#[tokio::test]
async fn posts_without_proof_of_origin_or_the_form_token_are_refused() {
    let (world, app, run, cookie, token) = signed_in_beside_a_running_run("console_csrf", ADMIN).await;
    let path = format!("/console/runs/{run}/stop");
    let form = format!("form_token={token}&confirm=orders");
    let refusals: [(&str, &[(&str, &str)]); 4] = [
        ("no Origin and no Sec-Fetch-Site", &[]),
        ("another site", &[("sec-fetch-site", "cross-site")]),
        ("a sibling site", &[("sec-fetch-site", "same-site")]),
        ("a foreign Origin", &[("origin", "http://evil.test")]),
    ];
    for (what, headers) in refusals {
        // An empty header list means "same-origin" to `post`; send a harmless header to mean "nothing".
        let headers: &[(&str, &str)] = if headers.is_empty() { &[("x-nothing", "1")] } else { headers };
        let answer = send(&app, post(&path, Some(&cookie), &form, headers)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{what}: {}", answer.body);
        assert!(answer.body.contains("refused"), "{what}: {}", answer.body);
    }
    let wrong = send(&app, post(&path, Some(&cookie), "form_token=not-it&confirm=orders", &[])).await;
    assert_eq!(wrong.status, StatusCode::FORBIDDEN, "{}", wrong.body);
    assert!(wrong.body.contains("form token"), "{}", wrong.body);
    // Sign-in itself needs proof of origin.
    let form = format!("token={}&operator={ADMIN}", encoded(TOKEN));
    let cross = send(&app, post("/console/sign-in", None, &form, &[("origin", "http://evil.test")])).await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);
    // Nothing was done: the run is still running, and no stop is audited.
    let (state,): (String,) =
        sqlx::query_as("SELECT state FROM transfer_run WHERE id = $1").bind(run).fetch_one(&world.pool).await.unwrap();
    assert_eq!(state, "running");
    // The same form with its Origin (a browser on a plain-HTTP LAN address sends no Sec-Fetch-Site) is served.
    let ok = send(&app, post(&path, Some(&cookie), &form_of(&token), &[("origin", "http://console.test")])).await;
    assert_eq!(ok.status, StatusCode::SEE_OTHER, "{}", ok.body);
    assert_eq!(ok.header("location"), format!("/console/runs/{run}?done=stop"));
}

fn form_of(token: &str) -> String {
    format!("form_token={token}&confirm=orders")
}

#[tokio::test]
async fn hostile_queue_names_are_shown_as_text() {
    let world = ConsoleWorld::new("console_escape").await;
    let app = world.app();
    let run = world.run("stopped", HOSTILE_QUEUE, 100, 10).await;
    let (cookie, _) = sign_in(&app, ADMIN).await;
    let list = send(&app, get(&format!("/console/?queue={}", encoded(HOSTILE_QUEUE)), Some(&cookie))).await;
    let page = send(&app, get(&format!("/console/runs/{run}"), Some(&cookie))).await;
    for (what, answer) in [("the list, filtered by it", &list), ("the run's page", &page)] {
        assert_eq!(answer.status, StatusCode::OK, "{what}: {}", answer.body);
        assert!(!answer.body.contains("<script>alert"), "{what}: {}", answer.body);
        assert!(!answer.body.contains("<img src=x"), "{what}: {}", answer.body);
        // askama escapes with numeric references: < is &#60;, > is &#62;.
        assert!(answer.body.contains("&#60;script&#62;alert(1)&#60;/script&#62;"), "{what}: {}", answer.body);
    }
    assert!(list.body.contains(&run.to_string()[..8]), "the filter by the hostile name finds its run");
}

#[tokio::test]
async fn a_read_only_operator_sees_no_action_and_may_not_post_one() {
    let world = ConsoleWorld::new("console_readonly").await;
    let app = world.app();
    let running = world.run("running", "orders", 100, 10).await;
    let stopped = world.run("stopped", "invoices", 100, 10).await;
    let (cookie, token) = sign_in(&app, READER).await;
    for run in [running, stopped] {
        let page = send(&app, get(&format!("/console/runs/{run}"), Some(&cookie))).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        assert!(!page.body.contains("<button type=\"submit\" class=\"danger\""), "no action offered: {}", page.body);
    }
    for (run, action, queue) in
        [(running, "stop", "orders"), (stopped, "resume", "invoices"), (stopped, "return", "invoices")]
    {
        let form = format!("form_token={token}&confirm={queue}");
        let answer = send(&app, post(&format!("/console/runs/{run}/{action}"), Some(&cookie), &form, &[])).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{action}: {}", answer.body);
    }
    let (state,): (String,) = sqlx::query_as("SELECT state FROM transfer_run WHERE id = $1")
        .bind(running)
        .fetch_one(&world.pool)
        .await
        .unwrap();
    assert_eq!(state, "running");
    // The admin is offered each action its run's state allows.
    let (cookie, _) = sign_in(&app, ADMIN).await;
    let page = send(&app, get(&format!("/console/runs/{stopped}"), Some(&cookie))).await;
    for action in ["resume", "return"] {
        assert!(page.body.contains(&format!("/console/runs/{stopped}/{action}\"")), "{action}: {}", page.body);
    }
    assert!(!page.body.contains(&format!("/console/runs/{stopped}/stop\"")), "a stopped run is not stopped again");
    assert!(page.body.contains("Messages already delivered stay on the target"), "the return says so first");
}

#[tokio::test]
async fn a_run_the_operator_may_not_see_is_not_found_to_look_at_or_act_on() {
    let (_world, app, run, cookie, token) = signed_in_beside_a_running_run("console_invisible", EAST_ONLY).await;
    let page = send(&app, get(&format!("/console/runs/{run}"), Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::NOT_FOUND, "{}", page.body);
    let nothing = send(&app, get(&format!("/console/runs/{}", uuid::Uuid::new_v4()), Some(&cookie))).await;
    assert_eq!(nothing.status, StatusCode::NOT_FOUND);
    assert_eq!(page.body.replace(&run.to_string(), "ID"), nothing.body.replace(&nothing_id(&nothing.body), "ID"));
    let form = format!("form_token={token}&confirm=orders");
    let act = send(&app, post(&format!("/console/runs/{run}/stop"), Some(&cookie), &form, &[])).await;
    assert_eq!(act.status, StatusCode::NOT_FOUND, "{}", act.body);
    let list = send(&app, get("/console/", Some(&cookie))).await;
    assert!(!list.body.contains(&run.to_string()[..8]), "the list does not show it: {}", list.body);
}

/// The run id an error page names.
fn nothing_id(body: &str) -> String {
    let at = body.find("there is no run ").unwrap() + 16;
    body[at..at + 36].to_string()
}

#[tokio::test]
async fn a_console_stop_is_audited_with_the_operator_and_console_and_the_api_ignores_the_cookie() {
    let (world, app, run, cookie, token) = signed_in_beside_a_running_run("console_audit", ADMIN).await;
    // The typed name is checked first.
    let wrong = send(
        &app,
        post(&format!("/console/runs/{run}/stop"), Some(&cookie), &format!("form_token={token}&confirm=order"), &[]),
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", wrong.body);
    let done = send(&app, post(&format!("/console/runs/{run}/stop"), Some(&cookie), &form_of(&token), &[])).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let after = send(&app, get(done.header("location"), Some(&cookie))).await;
    assert!(after.body.contains("Stop asked"), "{}", after.body);
    let rows: Vec<(String, String, String, Option<String>)> =
        sqlx::query_as("SELECT actor, action, outcome, detail->>'via' FROM audit WHERE actor = $1 ORDER BY id")
            .bind(ADMIN)
            .fetch_all(&world.pool)
            .await
            .unwrap();
    let console = Some("console".to_string());
    assert!(rows.contains(&(ADMIN.into(), "console.sign_in".into(), "ok".into(), console.clone())), "{rows:?}");
    assert!(rows.contains(&(ADMIN.into(), "stop".into(), "ok".into(), console.clone())), "{rows:?}");
    // The bearer API reads no cookie: the console's session is no credential there.
    let me = send(&app, get("/api/v1/me", Some(&cookie))).await;
    assert_eq!(me.status, StatusCode::UNAUTHORIZED, "{}", me.body);
    // Signing out ends the session.
    let out = send(&app, post("/console/sign-out", Some(&cookie), &format!("form_token={token}"), &[])).await;
    assert_eq!((out.status, out.header("location")), (StatusCode::SEE_OTHER, "/console/sign-in"));
    let gone = send(&app, get("/console/", Some(&cookie))).await;
    assert_eq!((gone.status, gone.header("location")), (StatusCode::SEE_OTHER, "/console/sign-in"));
}

/// A run's page draws its rate over time from the samples its batches left, and lists its audit trail: who did
/// what, which way in, when.
#[tokio::test]
async fn a_runs_page_draws_its_rate_and_lists_its_audit_trail() {
    let (world, app, run, cookie, token) = signed_in_beside_a_running_run("console_run_page", ADMIN).await;
    let page = send(&app, get(&format!("/console/runs/{run}"), Some(&cookie))).await;
    assert!(page.body.contains("Not drawn yet"), "no samples, no chart: {}", page.body);
    // Two batches a second apart: two samples (one a second at most, migration 0017).
    world.deliver(run, 30).await;
    tokio::time::sleep(std::time::Duration::from_millis(1_050)).await;
    world.deliver(run, 60).await;
    let done = send(&app, post(&format!("/console/runs/{run}/stop"), Some(&cookie), &form_of(&token), &[])).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let page = send(&app, get(&format!("/console/runs/{run}"), Some(&cookie))).await;
    assert!(page.body.contains("<polyline class=\"rate\" points=\""), "{}", page.body);
    assert!(page.body.contains("60 delivered in all"), "{}", page.body);
    let audit = &page.body[page.body.find("Audit trail").expect("an audit trail")..];
    assert!(audit.contains(&format!("<td>{ADMIN}</td><td>stop</td><td>console</td><td>ok</td>")), "{audit}");
}

/// Migration 0017: a run's rate is sampled at most once a second — a batch within the second of the latest sample
/// updates it — where 0016 wrote a row per batch (500 for a move of 100,000 at a batch of 200).
#[tokio::test]
async fn a_runs_rate_samples_are_one_a_second_at_most_and_keep_the_latest_count() {
    let world = ConsoleWorld::new("console_rate_thinned").await;
    let run = world.run("running", "orders", 10_000, 0).await;
    let samples = || async {
        let rows: Vec<(i64,)> =
            sqlx::query_as("SELECT delivered FROM run_rate_sample WHERE run_id = $1 ORDER BY at, id")
                .bind(run)
                .fetch_all(&world.pool)
                .await
                .unwrap();
        rows.into_iter().map(|(d,)| d).collect::<Vec<i64>>()
    };
    let started = std::time::Instant::now();
    for batch in 1..=20 {
        world.deliver(run, batch * 200).await;
    }
    let quick = samples().await;
    let took = started.elapsed();
    // At most one sample for each second the 20 batches touched (however slow the machine), never one a batch.
    let seconds_touched = took.as_secs() as usize + 2;
    assert!(quick.len() <= seconds_touched.min(19), "20 batches in {took:?}: {quick:?}");
    assert_eq!(quick.last(), Some(&4_000), "the latest count is kept: {quick:?}");
    tokio::time::sleep(std::time::Duration::from_millis(1_050)).await;
    world.deliver(run, 4_200).await;
    let later = samples().await;
    assert_eq!(later.len(), quick.len() + 1, "another second, another sample: {later:?}");
    assert_eq!(later.last(), Some(&4_200), "{later:?}");
    let history = artemis_transfer::transfer::view::rate(&world.pool, run).await.unwrap();
    assert_eq!(history.last().map(|p| p.delivered), Some(4_200), "the rate reads the thinned samples");
}

#[tokio::test]
async fn sign_in_refuses_an_unknown_token_and_sessions_end_with_their_token() {
    let world = ConsoleWorld::new("console_sign_in").await;
    let app = world.app();
    let bad =
        send(&app, post("/console/sign-in", None, "token=made-up-token-0123456789abcdef&operator=alice", &[])).await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED, "{}", bad.body);
    assert!(bad.body.contains("not known") && !bad.body.contains("made-up-token"), "{}", bad.body);
    assert!(bad.headers.get("set-cookie").is_none());
    let (cookie, _) = sign_in(&app, ADMIN).await;
    // The token is rotated out: the session made with it ends at its next request.
    let rotated = artemis_transfer::api::tokens::TokenSource::from_vars(
        Some("console=another-token-0123456789abcdef".into()),
        None,
    )
    .unwrap();
    world.api.tokens.reload(&rotated).unwrap();
    let after = send(&app, get("/console/", Some(&cookie))).await;
    assert_eq!((after.status, after.header("location")), (StatusCode::SEE_OTHER, "/console/sign-in"));
    let (left,): (i64,) = sqlx::query_as("SELECT count(*) FROM console_session").fetch_one(&world.pool).await.unwrap();
    assert_eq!(left, 0, "the session row is gone");
    // Only the id's hash is kept.
    let id = cookie.split_once('=').unwrap().1;
    assert!(!id.is_empty());
}

#[tokio::test]
async fn sign_ins_with_unknown_tokens_are_limited_like_the_apis_unknown_callers() {
    let mut world = ConsoleWorld::new("console_sign_in_limit").await;
    let rate = artemis_transfer::api::limit::Rate { per_second: 0.01, burst: 2 };
    world.api.limits = artemis_transfer::api::limit::Limits::new(rate, rate);
    let app = world.app();
    let guess = "token=made-up-token-0123456789abcdef&operator=alice";
    for _ in 0..2 {
        assert_eq!(send(&app, post("/console/sign-in", None, guess, &[])).await.status, StatusCode::UNAUTHORIZED);
    }
    let limited = send(&app, post("/console/sign-in", None, guess, &[])).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS, "{}", limited.body);
    assert!(limited.body.contains("Too many sign-ins"), "{}", limited.body);
}

#[tokio::test]
async fn under_tls_the_session_cookie_is_secure_and_host_only() {
    let world = ConsoleWorld::new("console_tls_cookie").await;
    let app = world.app_over(true);
    let form = format!("token={}&operator={ADMIN}", encoded(TOKEN));
    let answer = send(&app, post("/console/sign-in", None, &form, &[])).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let set = answer.header("set-cookie");
    assert!(set.starts_with("__Host-at_console="), "{set}");
    for attribute in ["; HttpOnly", "; SameSite=Strict", "; Path=/", "; Secure"] {
        assert!(set.contains(attribute), "{attribute}: {set}");
    }
    assert!(!set.contains("Domain"), "host-only: {set}");
    // The plain-HTTP name is not read under TLS.
    let id = set.split(';').next().unwrap().split_once('=').unwrap().1;
    let plain = send(&app, get("/console/", Some(&format!("at_console={id}")))).await;
    assert_eq!((plain.status, plain.header("location")), (StatusCode::SEE_OTHER, "/console/sign-in"));
    let secure = send(&app, get("/console/", Some(&format!("__Host-at_console={id}")))).await;
    assert_eq!(secure.status, StatusCode::OK, "{}", secure.body);
}

/// A queue on east-1 holding `count` of [`crate::queues::send_colored`]'s messages (the first with a hostile body
/// and property), in a world with the test bed's clusters registered, and the console over it; the queue is removed
/// when the [`TestQueues`] given first is dropped.
async fn console_beside_a_queue(
    label: &str,
    queue_suffix: &str,
    count: i64,
) -> (TestQueues, crate::support::World, axum::Router, String) {
    let bed = testbed::TestBed::require().await;
    let queues = TestQueues::new();
    let queue = format!("{}{queue_suffix}", testbed::unique_name(label));
    queues.add(bed.node("east-1"), &queue);
    crate::support::create_queue(bed.node("east-1"), &queue).await;
    crate::queues::send_colored(bed.node("east-1"), &queue, count).await;
    let world = crate::support::World::new(label, &[]).await;
    let app = ConsoleWorld::on(world.pool.clone()).await.app();
    (queues, world, app, queue)
}

/// The Messages page of `queue` on east-1, with `query`.
fn messages_page(queue: &str, query: &str) -> String {
    format!("/console/clusters/east/nodes/east-1/queues/{}{query}", encoded(queue))
}

#[tokio::test]
async fn queue_names_properties_and_bodies_are_shown_as_text_and_a_bad_filter_is_refused_in_words() {
    let hostile = "_<b>q</b>\"'&<img src=x onerror=alert(4)>";
    let (_queues, _world, app, queue) = console_beside_a_queue("console_messages", hostile, 3).await;
    let (cookie, _) = sign_in(&app, ADMIN).await;
    // The node's queues, with the hostile name as text and its depth.
    let queues = send(
        &app,
        get(&format!("/console/clusters/east/nodes/east-1/queues?name_contains={}", encoded(&queue)), Some(&cookie)),
    )
    .await;
    assert_eq!(queues.status, StatusCode::OK, "{}", queues.body);
    assert!(!queues.body.contains("<img src=x"), "{}", queues.body);
    assert!(queues.body.contains("&#60;img src=x onerror=alert(4)&#62;"), "{}", queues.body);
    assert!(queues.body.contains("<td class=\"n\" data-label=\"Depth\">3</td>"), "{}", queues.body);
    // Its messages: the hostile body and property escaped, a checkbox per row, the three ways to transfer.
    let page = send(&app, get(&messages_page(&queue, ""), Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    for raw in ["<script>alert('body')", "<script>alert('prop')", "<img src=x"] {
        assert!(!page.body.contains(raw), "{raw} came through: {}", page.body);
    }
    assert!(page.body.contains("&#60;script&#62;alert(&#39;body&#39;)&#60;/script&#62;"), "{}", page.body);
    assert!(page.body.contains("&#60;script&#62;alert(&#39;prop&#39;)&#60;/script&#62;"), "{}", page.body);
    assert_eq!(page.body.matches("type=\"checkbox\" name=\"id\"").count(), 3, "{}", page.body);
    assert!(page.body.contains("Transfer ticked…") && page.body.contains("Transfer the whole queue…"));
    // A filter the parser cannot read: the page says where and why, with the filter kept, and no broker is asked.
    let bad = send(&app, get(&messages_page(&queue, "?filter=color%20%3D%20'red'%20AND"), Some(&cookie))).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    assert!(bad.body.contains("the filter cannot be read at position 18: expected"), "{}", bad.body);
    assert!(bad.body.contains("value=\"color = &#39;red&#39; AND\""), "the filter is kept: {}", bad.body);
    // A good one: the red messages (the first and the third), and the check route's verdict for the box.
    let red = send(&app, get(&messages_page(&queue, "?filter=color%20%3D%20'red'"), Some(&cookie))).await;
    assert_eq!(red.body.matches("type=\"checkbox\" name=\"id\"").count(), 2, "{}", red.body);
    assert!(red.body.contains("Transfer all matching the filter…"), "{}", red.body);
    let verdict = send(&app, get("/console/selector/check?filter=n%20%3E", Some(&cookie))).await;
    assert_eq!(verdict.status, StatusCode::OK, "{}", verdict.body);
    assert!(verdict.body.contains("\"readable\":false") && verdict.body.contains("\"column\":4"), "{}", verdict.body);
}

#[tokio::test]
async fn an_operator_who_may_only_read_gets_no_transfer_button_and_a_refused_dialog() {
    let (_queues, world, app, queue) = console_beside_a_queue("console_reader_msgs", "", 2).await;
    let (cookie, token) = sign_in(&app, READER).await;
    let page = send(&app, get(&messages_page(&queue, ""), Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("message 1"), "they may read the messages: {}", page.body);
    assert!(!page.body.contains("Transfer ") && !page.body.contains("type=\"checkbox\""), "{}", page.body);
    let dialog = format!("/console/transfer/new?cluster=east&node=east-1&queue={}&take=all", encoded(&queue));
    assert_eq!(send(&app, get(&dialog, Some(&cookie))).await.status, StatusCode::FORBIDDEN);
    let form = format!(
        "form_token={token}&cluster=east&node=east-1&queue={}&take=all&mode=copy&target=west/west-1&target_queue=x",
        encoded(&queue)
    );
    let posted = send(&app, post("/console/transfer/preview", Some(&cookie), &form, &[])).await;
    assert_eq!(posted.status, StatusCode::FORBIDDEN, "{}", posted.body);
    let (previews,): (i64,) = sqlx::query_as("SELECT count(*) FROM transfer_run").fetch_one(&world.pool).await.unwrap();
    assert_eq!(previews, 0, "nothing was previewed");
}

#[tokio::test]
async fn a_cluster_the_operator_may_not_see_is_absent_and_not_found() {
    let (_queues, _world, app, queue) = console_beside_a_queue("console_invisible_cluster", "", 1).await;
    let (cookie, _) = sign_in(&app, EAST_ONLY).await;
    let clusters = send(&app, get("/console/clusters", Some(&cookie))).await;
    assert!(clusters.body.contains("east/east-1") && !clusters.body.contains("west"), "{}", clusters.body);
    for path in [
        "/console/clusters/west/nodes/west-1/queues".to_string(),
        format!("/console/clusters/west/nodes/west-1/queues/{}", encoded(&queue)),
        format!("/console/transfer/new?cluster=west&node=west-1&queue={}&take=all", encoded(&queue)),
    ] {
        let answer = send(&app, get(&path, Some(&cookie))).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}: {}", answer.body);
        assert!(answer.body.contains("no cluster named west is registered"), "{path}: {}", answer.body);
    }
    // From east, the dialog lists east's nodes only: west is not theirs to see.
    let dialog = format!("/console/transfer/new?cluster=east&node=east-1&queue={}&take=all", encoded(&queue));
    let page = send(&app, get(&dialog, Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("east / east-2") && !page.body.contains("west"), "{}", page.body);
}

#[tokio::test]
async fn the_dialog_previews_the_ticked_messages_and_executes_once_armed_all_audited_as_console() {
    let (_queues, world, app, queue) = console_beside_a_queue("console_dialog", "", 3).await;
    sqlx::query(
        "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ('sendless', '*', 'message:move', 'test')",
    )
    .execute(&world.pool)
    .await
    .unwrap();
    let (cookie, token) = sign_in(&app, ADMIN).await;
    let page = send(&app, get(&messages_page(&queue, ""), Some(&cookie))).await;
    let ids: Vec<String> = page
        .body
        .match_indices("name=\"id\" value=\"")
        .map(|(at, _)| page.body[at + 17..].split('"').next().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3, "{}", page.body);
    // Two ticked: the dialog names them; every target node of both clusters is offered.
    let dialog = format!(
        "/console/transfer/new?cluster=east&node=east-1&queue={}&filter=&id={}&id={}&take=ids",
        encoded(&queue),
        ids[0],
        ids[2]
    );
    let page = send(&app, get(&dialog, Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(&format!("the 2 ticked message(s): ids {}, {}", ids[0], ids[2])), "{}", page.body);
    assert!(page.body.contains("<option value=\"west/west%2D1\">west / west-1</option>"), "{}", page.body);
    // Preview: a Previewed run, its page with the findings by kind and the arming form.
    let target = testbed::unique_name("console_dialog_dst");
    let form = format!(
        "form_token={token}&cluster=east&node=east-1&queue={}&take=ids&ids={},{}&filter=&mode=move&target=west/west%2D1&target_queue={target}",
        encoded(&queue),
        ids[0],
        ids[2]
    );
    let previewed = send(&app, post("/console/transfer/preview", Some(&cookie), &form, &[])).await;
    assert_eq!(previewed.status, StatusCode::SEE_OTHER, "{}", previewed.body);
    let at = previewed.header("location").to_string();
    let run = at.strip_prefix("/console/transfer/").unwrap().to_string();
    let preview = send(&app, get(&at, Some(&cookie))).await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    for heading in ["Refused", "Needs your acknowledgement", "Could not be checked"] {
        assert!(preview.body.contains(&format!("<h2>{heading}</h2>")), "{heading}: {}", preview.body);
    }
    assert!(preview.body.contains("2 message(s): the ticked messages"), "{}", preview.body);
    assert!(preview.body.contains(&format!("Type the source queue's name, <code>{queue}</code>")), "{}", preview.body);
    let acks: Vec<String> = preview
        .body
        .match_indices("name=\"ack\" value=\"")
        .map(|(at, _)| preview.body[at + 18..].split('"').next().unwrap().to_string())
        .collect();
    let plan_hash = preview.body.split("name=\"plan_hash\" value=\"").nth(1).unwrap().split('"').next().unwrap();
    // Unarmed, it is refused with the words; armed, it executes and the run's page follows.
    let base = format!("form_token={token}&plan_hash={plan_hash}");
    let ack_fields: String = acks.iter().map(|a| format!("&ack={a}")).collect();
    let unarmed = send(&app, post(&format!("{at}/execute"), Some(&cookie), &format!("{base}{ack_fields}"), &[])).await;
    assert_eq!(unarmed.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", unarmed.body);
    assert!(unarmed.body.contains("type the source queue"), "{}", unarmed.body);
    let armed = format!("{base}{ack_fields}&confirm={}", encoded(&queue));
    let done = send(&app, post(&format!("{at}/execute"), Some(&cookie), &armed, &[])).await;
    assert_eq!(
        (done.status, done.header("location")),
        (StatusCode::SEE_OTHER, format!("/console/runs/{run}").as_str()),
        "{}",
        done.body
    );
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT action, detail->>'via' FROM audit WHERE actor = $1 AND action IN ('preview', 'execute') ORDER BY id",
    )
    .bind(ADMIN)
    .fetch_all(&world.pool)
    .await
    .unwrap();
    let console = Some("console".to_string());
    assert!(
        rows.contains(&("preview".into(), console.clone())) && rows.contains(&("execute".into(), console)),
        "{rows:?}"
    );
    // An operator who may move but send nowhere is offered no transfer.
    let (cookie, _) = sign_in(&app, "sendless").await;
    let page = send(&app, get(&messages_page(&queue, ""), Some(&cookie))).await;
    assert!(!page.body.contains("Transfer ") && !page.body.contains("type=\"checkbox\""), "{}", page.body);
    sqlx::query("UPDATE transfer_run SET state = 'failed' WHERE id = $1::uuid")
        .bind(&run)
        .execute(&world.pool)
        .await
        .unwrap();
}

/// Staging with no run: an orphan is listed with what a return does; its return needs its name typed, then puts
/// every message back on its queue, and is audited as the operator's, via the console.
#[tokio::test]
async fn staging_with_no_run_is_listed_and_returned_through_its_form_audited_as_console() {
    use artemis_transfer::broker::jolokia::RoutingType;
    use artemis_transfer::transfer::staging::{self, StagingSpec};
    let (queues, world, app, queue) = console_beside_a_queue("console_orphan", "", 5).await;
    let mgmt = crate::support::management(testbed::TestBed::get().node("east-1"));
    let orphan_run = uuid::Uuid::new_v4();
    let orphan = staging::staging_queue_name(orphan_run);
    queues.add(testbed::TestBed::get().node("east-1"), &orphan);
    staging::prepare(&mgmt, &StagingSpec::for_run(orphan_run, 5)).await.unwrap();
    let mbean = mgmt.queue_mbean(&queue, RoutingType::Anycast, &queue);
    let moved = staging::refill_by_filter(&mgmt, &mbean, &orphan, "AMQPriority >= 0", 5, None).await.unwrap();
    assert_eq!(moved, 5);
    let (cookie, token) = sign_in(&app, ADMIN).await;

    let page = send(&app, get("/console/staging", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(&orphan) && page.body.contains("Each message goes back"), "{}", page.body);
    let form = |confirm: &str| {
        format!("form_token={token}&cluster=east&node=east-1&queue={orphan}&to=&confirm={}", encoded(confirm))
    };
    let wrong = send(&app, post("/console/staging/return", Some(&cookie), &form("nope"), &[])).await;
    assert_eq!(wrong.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", wrong.body);
    assert!(wrong.body.contains("Type the staging queue"), "{}", wrong.body);
    let done = send(&app, post("/console/staging/return", Some(&cookie), &form(&orphan), &[])).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let after = send(&app, get(done.header("location"), Some(&cookie))).await;
    assert!(after.body.contains("5 messages went back"), "{}", after.body);
    assert!(!after.body.contains(&format!("<code>{orphan}</code>")), "returned, so gone: {}", after.body);
    let via: Option<String> = sqlx::query_scalar(
        "SELECT detail->>'via' FROM audit WHERE action = 'orphan_return' AND actor = $1 AND outcome = 'ok'",
    )
    .bind(ADMIN)
    .fetch_one(&world.pool)
    .await
    .unwrap();
    assert_eq!(via.as_deref(), Some("console"));
    let back = crate::support::census(testbed::TestBed::get().node("east-1"), &queue).await;
    assert_eq!(back.values().sum::<usize>(), 5, "every message back on its queue: {back:?}");
}

/// Settings are an admin's: a reader gets no such page; an admin's change is validated in words, refused when the
/// setting changed since the page was read, and audited via the console.
#[tokio::test]
async fn settings_are_an_admins_validated_in_words_and_audited_as_console() {
    let world = ConsoleWorld::new("console_settings").await;
    let app = world.app();
    let (reader, _) = sign_in(&app, READER).await;
    let refused = send(&app, get("/console/settings", Some(&reader))).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{}", refused.body);
    assert!(!refused.body.contains("name=\"value\""), "{}", refused.body);

    let (cookie, token) = sign_in(&app, ADMIN).await;
    let page = send(&app, get("/console/settings", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let etag = {
        let form = &page.body[page.body.find("action=\"/console/settings/batch_size\"").unwrap()..];
        let marker = "name=\"etag\" value=\"";
        let at = form.find(marker).unwrap() + marker.len();
        form[at..].split('"').next().unwrap().replace("&#34;", "\"")
    };
    let set = |value: &str, etag: &str| {
        post(
            "/console/settings/batch_size",
            Some(&cookie),
            &format!("form_token={token}&value={}&etag={}", encoded(value), encoded(etag)),
            &[],
        )
    };
    let bad = send(&app, set("lots", &etag)).await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", bad.body);
    assert!(bad.body.contains("role=\"alert\"") && bad.body.contains("batch_size"), "{}", bad.body);
    let done = send(&app, set("123", &etag)).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let after = send(&app, get(done.header("location"), Some(&cookie))).await;
    assert!(after.body.contains("Changed batch_size") && after.body.contains("value=\"123\""), "{}", after.body);
    let stale = send(&app, set("124", &etag)).await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED, "{}", stale.body);
    let rows: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT outcome, detail->>'via' FROM audit WHERE action = 'settings.set' AND actor = $1 ORDER BY id",
    )
    .bind(ADMIN)
    .fetch_all(&world.pool)
    .await
    .unwrap();
    assert!(rows.contains(&("ok".into(), Some("console".into()))), "{rows:?}");
}

/// Sign-in by a trusted proxy's header (ADR 0021): honoured only from a configured proxy's address — from any other
/// peer (or none known) the header is ignored and the sign-in form shown; through the proxy a session is made for
/// the operator it names, audited, and honoured only while the proxy names that same operator.
#[tokio::test]
async fn a_proxys_operator_header_is_honoured_only_from_a_configured_proxy() {
    use artemis_transfer::api::limit::TrustedProxies;
    use artemis_transfer::console::{ConsoleState, ProxySignIn};
    use axum::extract::ConnectInfo;
    let world = ConsoleWorld::new("console_proxy").await;
    let proxy = ProxySignIn {
        header: axum::http::HeaderName::from_static("x-forwarded-user"),
        peers: TrustedProxies::parse(&["10.0.0.7".to_string()]).unwrap(),
        service: "console".into(),
    };
    let console =
        artemis_transfer::console::router(ConsoleState::new(world.api.clone(), false).with_proxy_sign_in(Some(proxy)));
    let app = console.merge(artemis_transfer::api::router(world.api.clone()));
    let from = |peer: Option<&str>, path: &str, user: Option<&str>, cookie: Option<&str>| {
        let mut request = get(path, cookie);
        if let Some(user) = user {
            request.headers_mut().insert("x-forwarded-user", user.parse().unwrap());
        }
        if let Some(peer) = peer {
            let addr = artemis_transfer::api::PeerAddr(format!("{peer}:40000").parse().unwrap());
            request.extensions_mut().insert(ConnectInfo(addr));
        }
        request
    };
    // From a peer that is not the proxy, or from an unknown peer: the header is ignored.
    for peer in [Some("10.0.0.9"), None] {
        let ignored = send(&app, from(peer, "/console/sign-in", Some(ADMIN), None)).await;
        assert_eq!(ignored.status, StatusCode::OK, "{peer:?}: {}", ignored.body);
        assert!(ignored.header("set-cookie").is_empty() && ignored.body.contains("name=\"token\""), "{}", ignored.body);
    }
    // From the proxy, a name that is not one: no session.
    let nameless = send(&app, from(Some("10.0.0.7"), "/console/sign-in", Some(" "), None)).await;
    assert_eq!(nameless.status, StatusCode::UNAUTHORIZED, "{}", nameless.body);
    assert!(nameless.header("set-cookie").is_empty());
    // From the proxy, naming alice: her session, audited as made by the proxy's header.
    let signed = send(&app, from(Some("10.0.0.7"), "/console/sign-in", Some(ADMIN), None)).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    let cookie = signed.header("set-cookie").split(';').next().unwrap().to_string();
    let page = send(&app, from(Some("10.0.0.7"), "/console/", Some(ADMIN), Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains(&format!("Signed in as <strong>{ADMIN}</strong>")), "{}", page.body);
    // The proxy naming someone else, or no one, with alice's cookie: not alice's session.
    for user in [Some(READER), None] {
        let other = send(&app, from(Some("10.0.0.7"), "/console/", user, Some(&cookie))).await;
        assert_eq!((other.status, other.header("location")), (StatusCode::SEE_OTHER, "/console/sign-in"), "{user:?}");
    }
    let by: Option<String> = sqlx::query_scalar(
        "SELECT detail->>'by' FROM audit WHERE action = 'console.sign_in' AND actor = $1 ORDER BY id DESC LIMIT 1",
    )
    .bind(ADMIN)
    .fetch_one(&world.pool)
    .await
    .unwrap();
    assert_eq!(by.as_deref(), Some("proxy header"));
}

/// The dialog's target queue picker lists the chosen target node's queues (a name may still be typed): the node
/// asked for when it may be chosen, and its queues, hostile names as text.
#[tokio::test]
async fn the_dialogs_queue_picker_lists_the_chosen_target_nodes_queues() {
    let (queues, _world, app, queue) = console_beside_a_queue("console_picker", "", 1).await;
    let bed = testbed::TestBed::get();
    let picked_queue = format!("{}_<i>dst</i>", testbed::unique_name("console_picker"));
    queues.add(bed.node("east-2"), &picked_queue);
    crate::support::create_queue(bed.node("east-2"), &picked_queue).await;
    let (cookie, _) = sign_in(&app, ADMIN).await;
    let dialog = format!(
        "/console/transfer/new?cluster=east&node=east-1&queue={}&take=all&target={}",
        encoded(&queue),
        encoded("east/east-2")
    );
    let page = send(&app, get(&dialog, Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("<option value=\"east/east%2D2\" selected>"), "{}", page.body);
    let picker = &page.body[page.body.find("<datalist id=\"target-queues\">").expect("a queue picker")..];
    let picker = &picker[..picker.find("</datalist>").unwrap()];
    let shown = picked_queue.replace('<', "&#60;").replace('>', "&#62;");
    assert!(picker.contains(&format!("<option value=\"{shown}\">")), "{picker}");
    assert!(!picker.contains("<i>"), "{picker}");
}

/// Redistribute to a node (SPEC §1), the dialog's third way: the source's cluster and queue fixed, the node picked
/// from the cluster's others — the source node listed disabled, saying why, and refused in those words if posted —
/// previewed as the Move it is (the same library call: a move to the same queue on the other node), and said so on
/// the preview and on the run's page.
#[tokio::test]
async fn the_dialog_redistributes_to_another_node_of_the_cluster_and_refuses_the_source_node() {
    let (_queues, world, app, queue) = console_beside_a_queue("console_redistribute", "", 2).await;
    let (cookie, token) = sign_in(&app, ADMIN).await;
    let dialog = format!("/console/transfer/new?cluster=east&node=east-1&queue={}&take=all", encoded(&queue));
    let page = send(&app, get(&dialog, Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let source_node_words = "east-1 is the source node: a redistribution moves the messages to another node of east";
    for offered in [
        format!("<input type=\"radio\" name=\"mode\" value=\"redistribute\"> Redistribute to a node: a move to {queue} on another node of east"),
        format!("<option value=\"east-1\" disabled>east-1 — not allowed: {source_node_words}</option>"),
        "<option value=\"east-2\" selected>east-2</option>".to_string(),
    ] {
        assert!(page.body.contains(&offered), "{offered}: {}", page.body);
    }
    let picker = &page.body[page.body.find("<select id=\"redistribute_to\"").expect("a node picker")..];
    let picker = &picker[..picker.find("</select>").unwrap()];
    assert!(!picker.contains("west"), "only the source's cluster: {picker}");

    // The source node, posted all the same: refused in the picker's words, nothing previewed.
    let form = |node: &str| {
        format!(
            "form_token={token}&cluster=east&node=east-1&queue={}&take=all&ids=&filter=&mode=redistribute\
             &redistribute_to={node}&target=west/west%2D1&target_queue=ignored",
            encoded(&queue)
        )
    };
    let refused = send(&app, post("/console/transfer/preview", Some(&cookie), &form("east-1"), &[])).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(refused.body.contains(&format!("{source_node_words}.")), "{}", refused.body);
    assert!(refused.body.contains("value=\"redistribute\" checked"), "the dialog as it was sent: {}", refused.body);
    let (runs,): (i64,) = sqlx::query_as("SELECT count(*) FROM transfer_run").fetch_one(&world.pool).await.unwrap();
    assert_eq!(runs, 0, "nothing was previewed");

    // east-2: the preview of a move to the same queue on east-2 (the target picker's fields ignored).
    let previewed = send(&app, post("/console/transfer/preview", Some(&cookie), &form("east-2"), &[])).await;
    assert_eq!(previewed.status, StatusCode::SEE_OTHER, "{}", previewed.body);
    let at = previewed.header("location").to_string();
    let run: uuid::Uuid = at.strip_prefix("/console/transfer/").unwrap().parse().unwrap();
    let (plan,): (serde_json::Value,) =
        sqlx::query_as("SELECT plan FROM transfer_run WHERE id = $1").bind(run).fetch_one(&world.pool).await.unwrap();
    let plan: artemis_transfer::transfer::Plan = serde_json::from_value(plan).unwrap();
    assert_eq!(plan.mode, artemis_transfer::transfer::Mode::Move, "{plan:?}");
    assert_eq!(
        (plan.target.cluster.as_str(), plan.target.node.as_str(), plan.target.queue.as_str()),
        ("east", "east-2", queue.as_str())
    );
    assert!(plan.is_redistribution(), "{plan:?}");
    let preview = send(&app, get(&at, Some(&cookie))).await;
    assert_eq!(preview.status, StatusCode::OK, "{}", preview.body);
    assert!(
        preview.body.contains("<h1>Preview of a move: redistribute to a node (east-2 of east)</h1>"),
        "{}",
        preview.body
    );
    assert!(preview.body.contains(&format!("<dt>To</dt><dd>east / east-2 / {queue}</dd>")), "{}", preview.body);

    // The API gives the stored preview to a client that did not make it: the same plan, hash and findings.
    let stored = send(&app, bearer_get(&format!("/api/v1/previews/{run}"), ADMIN)).await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.body);
    let stored: serde_json::Value = serde_json::from_str(&stored.body).unwrap();
    assert_eq!(stored["plan"]["target"]["node"], "east-2", "{stored}");
    assert_eq!(stored["can_start"], true, "{stored}");
    assert!(stored["preview"]["findings"].is_array(), "{stored}");
    // Executed as a move is (acknowledged, armed by the queue's name); the run's page says what it is.
    let acks: String = preview
        .body
        .match_indices("name=\"ack\" value=\"")
        .map(|(at, _)| format!("&ack={}", preview.body[at + 18..].split('"').next().unwrap()))
        .collect();
    let plan_hash = preview.body.split("name=\"plan_hash\" value=\"").nth(1).unwrap().split('"').next().unwrap();
    assert_eq!(stored["plan_hash"], plan_hash, "{stored}");
    let armed = format!("form_token={token}&plan_hash={plan_hash}{acks}&override_cap=yes&confirm={}", encoded(&queue));
    let done = send(&app, post(&format!("{at}/execute"), Some(&cookie), &armed, &[])).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    let page = send(&app, get(&format!("/console/runs/{run}"), Some(&cookie))).await;
    assert!(page.body.contains("<dt>Mode</dt><dd>move: redistribute to a node (east-2 of east)</dd>"), "{}", page.body);

    // One who may move from east but not send to it: the redistribution is listed, disabled, saying why.
    for (permission, cluster) in
        [("cluster:read", "east"), ("message:move", "east"), ("cluster:read", "west"), ("message:send", "west")]
    {
        sqlx::query(
            "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ('sam', $1, $2, 'test')",
        )
        .bind(cluster)
        .bind(permission)
        .execute(&world.pool)
        .await
        .unwrap();
    }
    let (cookie, _) = sign_in(&app, "sam").await;
    let page = send(&app, get(&dialog, Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let radio = &page.body[page.body.find("value=\"redistribute\"").expect("listed")..];
    let radio = &radio[..radio.find("</label>").unwrap()];
    assert!(radio.starts_with("value=\"redistribute\" disabled>") && radio.contains("message:send"), "{radio}");
    sqlx::query("UPDATE transfer_run SET state = 'failed' WHERE id = $1").bind(run).execute(&world.pool).await.unwrap();
}

/// `GET /api/v1/runs/{run}/actions` answers what the run's page offers, from the one rule (`actions::offered`): by the
/// run's state and the caller's grants; a run the caller may not see is a 404, as everywhere.
#[tokio::test]
async fn a_runs_actions_are_what_its_state_and_the_callers_grants_allow_as_the_console_offers() {
    let world = ConsoleWorld::new("api_run_actions").await;
    let app = world.app();
    let actions = |run: uuid::Uuid, operator: &'static str| {
        let app = app.clone();
        async move {
            let answer = send(&app, bearer_get(&format!("/api/v1/runs/{run}/actions"), operator)).await;
            let body: serde_json::Value = serde_json::from_str(&answer.body).unwrap_or_default();
            (answer.status, body)
        }
    };
    let running = world.run("running", "orders", 100, 10).await;
    let stopped = world.run("stopped", "orders", 100, 10).await;
    let previewed = world.run("previewed", "orders", 100, 0).await;
    let succeeded = world.run("succeeded", "orders", 100, 100).await;
    for (run, operator, expected) in [
        (running, ADMIN, serde_json::json!(["stop"])),
        (stopped, ADMIN, serde_json::json!(["resume", "return"])),
        (previewed, ADMIN, serde_json::json!(["execute"])),
        (succeeded, ADMIN, serde_json::json!([])),
        (stopped, READER, serde_json::json!([])),
    ] {
        let (status, body) = actions(run, operator).await;
        assert_eq!((status, &body["actions"]), (StatusCode::OK, &expected), "{operator} on {run}: {body}");
    }
    let (status, body) = actions(stopped, EAST_ONLY).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a run from east to west is not theirs to see: {body}");
    // A run written without a preview has none to give.
    let none = send(&app, bearer_get(&format!("/api/v1/previews/{stopped}"), ADMIN)).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND, "{}", none.body);
    assert!(none.body.contains("was stored without a preview"), "{}", none.body);
    // The run's page offers the same: resume and return on the stopped run, nothing to a reader.
    let (cookie, _) = sign_in(&app, ADMIN).await;
    let page = send(&app, get(&format!("/console/runs/{stopped}"), Some(&cookie))).await;
    for action in ["resume", "return"] {
        assert!(page.body.contains(&format!("/console/runs/{stopped}/{action}\"")), "{action}: {}", page.body);
    }
    assert!(!page.body.contains(&format!("/console/runs/{stopped}/stop\"")), "{}", page.body);
}

/// A GET of `path` with the session `cookie` whose answer is kept open: its status, its content type, and its body
/// (an event stream's, read a frame at a time).
async fn open_stream(app: &axum::Router, path: &str, cookie: Option<&str>) -> (StatusCode, String, Body) {
    let response = app.clone().oneshot(get(path, cookie)).await.unwrap();
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    (status, content_type.to_string(), response.into_body())
}

/// The text a stream sends until it has sent an event named `name` (or ten seconds pass: a failure).
async fn until_event(body: &mut axum::body::BodyDataStream, name: &str) -> String {
    use futures_util::StreamExt as _;
    let mut seen = String::new();
    let wanted = format!("event: {name}\n");
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while !seen.contains(&wanted) {
            let chunk = body.next().await.expect("the stream goes on").unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {name} event within 10 s; the stream sent: {seen}"));
    seen
}

/// The run page's live numbers come from the run's event stream over the session (issue 30, "Light"): the console's
/// stream answers a signed-in operator who may see the run with the run's progress at once, is not found for one who
/// may not (as the page is), sends someone with no session to sign in, and counts against the same cap of open
/// streams as the API's stream of the same service and operator.
#[tokio::test]
async fn the_run_pages_event_stream_is_the_sessions_and_counts_against_the_callers_cap() {
    let (world, app, run, cookie, _) = signed_in_beside_a_running_run("console_stream", ADMIN).await;
    let path = format!("/console/runs/{run}/events");
    let page = send(&app, get(&format!("/console/runs/{run}"), Some(&cookie))).await;
    assert!(page.body.contains(&format!("data-events=\"{path}\"")), "the page names its stream: {}", page.body);

    let (status, content_type, body) = open_stream(&app, &path, Some(&cookie)).await;
    assert_eq!((status, content_type.as_str()), (StatusCode::OK, "text/event-stream"));
    let mut first = body.into_data_stream();
    let sent = until_event(&mut first, "progress").await;
    assert!(sent.contains("\"state\":\"running\"") && sent.contains("\"counters\""), "{sent}");
    assert!(!sent.contains("id: "), "it begins after the events the page already shows: {sent}");

    let (status, _, _) = open_stream(&app, &path, None).await;
    assert_eq!(status, StatusCode::SEE_OTHER, "no session: sent to sign in, no stream");
    let (east_only, _) = sign_in(&app, EAST_ONLY).await;
    let invisible = send(&app, get(&path, Some(&east_only))).await;
    assert_eq!(invisible.status, StatusCode::NOT_FOUND, "{}", invisible.body);
    assert_eq!(invisible.body, send(&app, get(&format!("/console/runs/{run}"), Some(&east_only))).await.body);

    // The console's streams and the API's, of one service and operator, share one cap.
    let mut held = vec![first];
    let api_stream = app.clone().oneshot(bearer_get(&format!("/api/v1/runs/{run}/events"), ADMIN)).await.unwrap();
    assert_eq!(api_stream.status(), StatusCode::OK);
    for _ in 2..world.api.limits.streams.per_caller() {
        let (status, _, body) = open_stream(&app, &path, Some(&cookie)).await;
        assert_eq!(status, StatusCode::OK);
        held.push(body.into_data_stream());
    }
    let refused = send(&app, get(&path, Some(&cookie))).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS, "{}", refused.body);
    assert!(refused.body.contains("event streams open"), "{}", refused.body);
}

/// The value of the attribute `name` of the Transfers list (`#runs`), as the page's script reads it.
fn list_attribute(page: &str, name: &str) -> String {
    let list = &page[page.find("id=\"runs\"").expect("the list")..];
    let at = list.find(&format!("{name}=\"")).unwrap_or_else(|| panic!("no {name} on the list")) + name.len() + 2;
    list[at..].split('"').next().unwrap().replace("&#38;", "&").replace("&amp;", "&")
}

/// Transfers' cheap poll over the session: the page names it and the instant its list is complete up to; asked
/// from there it says no until a run the operator may see (by the page's cluster and queue) changes; an operator who
/// may not see the run is never told; an instant that is not one is refused.
#[tokio::test]
async fn the_transfers_list_asks_whether_a_run_changed_before_it_is_fetched_again() {
    let (world, app, run, cookie, _) = signed_in_beside_a_running_run("console_changes", ADMIN).await;
    let (east_only, _) = sign_in(&app, EAST_ONLY).await;
    let page = send(&app, get("/console/?cluster=east", Some(&cookie))).await;
    let (changes, as_of) = (list_attribute(&page.body, "data-changes"), list_attribute(&page.body, "data-as-of"));
    assert_eq!(changes, "/console/changes?cluster=east&queue=", "the filters a run cannot leave");
    let ask = |path: String, cookie: String| {
        let app = app.clone();
        async move {
            let answer = send(&app, get(&path, Some(&cookie))).await;
            assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
            serde_json::from_str::<serde_json::Value>(&answer.body).unwrap()
        }
    };
    let after = |from: &str, base: &str| format!("{base}&changed_after={}", encoded(from));
    let quiet = ask(after(&as_of, &changes), cookie.clone()).await;
    assert_eq!(quiet["changed"], false, "{quiet}");

    world.deliver(run, 20).await;
    let told = ask(after(quiet["as_of"].as_str().unwrap(), &changes), cookie.clone()).await;
    assert_eq!(told["changed"], true, "{told}");
    let elsewhere =
        ask(after(quiet["as_of"].as_str().unwrap(), "/console/changes?cluster=north"), cookie.clone()).await;
    assert_eq!(elsewhere["changed"], false, "another cluster's list: {elsewhere}");
    let not_theirs = ask(after(quiet["as_of"].as_str().unwrap(), "/console/changes?"), east_only).await;
    assert_eq!(not_theirs["changed"], false, "a run the operator may not see: {not_theirs}");
    let since_told = ask(after(told["as_of"].as_str().unwrap(), &changes), cookie.clone()).await;
    assert_eq!(since_told["changed"], false, "nothing since: {since_told}");

    let bad = send(&app, get("/console/changes?changed_after=yesterday", Some(&cookie))).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    assert!(bad.body.contains("RFC 3339"), "{}", bad.body);
}
