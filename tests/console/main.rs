//! The operator console in a real browser (ADR 0014): Debian's `chromium`, driven over WebDriver by `chromedriver`
//! (package `chromium-driver`) from this test through `fantoccini`. The console is served in-process on a free port
//! of 127.0.0.1 over a fresh database of the test bed's Postgres. The first test writes runs as a worker leaves them
//! and moves their counters as a relay batch does, so what is under test is the console: sign-in, the list, the
//! run's page, its numbers changing without a reload, and a browser log with no error and no CSP violation. The
//! others start a worker of their own and act as an operator would, from the Messages page through the dialog to
//! the run's end — ticked rows moved and redistributed to east-2; a filter's selection moved, a whole queue copied,
//! a stopped run returned — each judged by the census of the queues (the Java helper's browse).
//!
//! Without `chromedriver` (on PATH, or named by `CHROMEDRIVER`) the test says it skipped and passes, unless
//! `ARTEMIS_TRANSFER_REQUIRE_BROWSER` is set: `.ci/run` installs both packages and sets it, so CI always runs it. Screenshots of the pages go to `target/console-screenshots/`, or
//! to the folder `ARTEMIS_TRANSFER_CONSOLE_SCREENSHOTS` names (`docs/console` to refresh the README's).

#[allow(dead_code)]
#[path = "../relay/support/mod.rs"]
mod support;
mod world;

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource as _, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use world::{ConsoleWorld, ADMIN, EAST_ONLY, HOSTILE_QUEUE, TOKEN};

/// The chromedriver to use; `None` (the test then skips, saying so) when there is none and CI does not require one.
fn chromedriver_or_skip() -> Option<PathBuf> {
    let found = chromedriver();
    if found.is_none() {
        let required = std::env::var_os("ARTEMIS_TRANSFER_REQUIRE_BROWSER").is_some();
        assert!(!required, "ARTEMIS_TRANSFER_REQUIRE_BROWSER is set and there is no chromedriver (chromium-driver)");
        eprintln!("skipped: no chromedriver (install Debian's chromium and chromium-driver, as .ci/run does)");
    }
    found
}

/// The chromedriver to use, if there is one.
fn chromedriver() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CHROMEDRIVER") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("chromedriver")).find(|p| p.is_file())
}

/// A free port of 127.0.0.1.
fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// chromedriver, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start(path: &PathBuf) -> Driver {
        let port = free_port();
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", path.display()));
        let url = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while client.get(format!("{url}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not answer within 20 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Driver { child, url }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session whose browser log keeps everything.
async fn browser(driver: &Driver) -> Client {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let capabilities = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,900", "--force-prefers-reduced-motion"],
        },
        "goog:loggingPrefs": { "browser": "ALL" },
    });
    let Value::Object(capabilities) = capabilities else { unreachable!() };
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector).capabilities(capabilities).connect(&driver.url).await.expect("a WebDriver session")
}

/// chromedriver's browser log (the Selenium `se/log` command): every console message and CSP report.
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (axum::http::Method, Option<String>) {
        (axum::http::Method::POST, Some(json!({ "type": "browser" }).to_string()))
    }
}

/// The browser log's entries since it was last read.
async fn log_entries(client: &Client) -> Vec<Value> {
    let answer = client.issue_cmd(BrowserLog).await.expect("the browser log");
    answer.as_array().cloned().unwrap_or_default()
}

/// Serves the console and the API on a free port; answers its base URL.
async fn serve(world: &ConsoleWorld) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = world.app().into_make_service_with_connect_info::<artemis_transfer::api::PeerAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// The text of the element `css` selects.
async fn text(client: &Client, css: &str) -> String {
    // The script swaps a page's live parts every few seconds: an element found just before a swap is stale when
    // read, and is found again.
    for _ in 0..20 {
        let element = client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}"));
        match element.text().await {
            Ok(text) => return text,
            Err(e) if e.to_string().contains("stale element") => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("{css}: {e}"),
        }
    }
    panic!("{css} went stale 20 times in a row")
}

/// Waits (10 s at most) for the browser to be at `path`, its page loaded.
async fn at(client: &Client, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let url = client.current_url().await.unwrap();
        let ready = client.execute("return document.readyState;", vec![]).await.unwrap();
        if url.path() == path && ready == json!("complete") {
            return;
        }
        if Instant::now() > deadline {
            panic!("the browser is at {url}, not {path}: {}", client.source().await.unwrap_or_default());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Where screenshots go.
fn screenshots() -> PathBuf {
    let dir = std::env::var_os("ARTEMIS_TRANSFER_CONSOLE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target").join("console-screenshots"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether the page fits the window's width (nothing to scroll sideways).
async fn fits_the_width(client: &Client) -> bool {
    let fits =
        client.execute("return document.documentElement.scrollWidth <= window.innerWidth + 1;", vec![]).await.unwrap();
    fits.as_bool().unwrap_or(false)
}

#[tokio::test]
async fn an_operator_signs_in_opens_a_run_and_watches_it_move_without_a_reload() {
    let Some(driver_path) = chromedriver_or_skip() else { return };
    let started = Instant::now();
    let world = ConsoleWorld::new("console_browser").await;
    let run = world.run("running", "orders", 1000, 100).await;
    let other = world.run("stopped", HOSTILE_QUEUE, 500, 200).await;
    world.run("succeeded", "invoices", 300, 300).await;
    let base = serve(&world).await;
    let driver = Driver::start(&driver_path).await;
    let client = browser(&driver).await;

    // Signed out, the console sends the browser to sign in.
    client.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(client.current_url().await.unwrap().path(), "/console/sign-in");
    client.find(Locator::Id("token")).await.unwrap().send_keys(TOKEN).await.unwrap();
    client.find(Locator::Id("operator")).await.unwrap().send_keys(ADMIN).await.unwrap();
    client.find(Locator::Css("form.stack button[type=submit]")).await.unwrap().click().await.unwrap();
    at(&client, "/console/").await;
    let cookie = client.execute("return document.cookie;", vec![]).await.unwrap();
    assert_eq!(cookie, json!(""), "the session cookie is HttpOnly: no script reads it");

    // Transfers lists the runs; the hostile queue name is text, not markup.
    let list = text(&client, "#runs").await;
    assert!(list.contains(&run.to_string()[..8]) && list.contains(&other.to_string()[..8]), "{list}");
    assert!(list.contains("<script>alert(1)</script>"), "the name is shown as typed: {list}");
    client.screenshot().await.map(|png| std::fs::write(screenshots().join("transfers.png"), png).unwrap()).unwrap();
    client.set_window_size(390, 844).await.unwrap();
    assert!(fits_the_width(&client).await, "Transfers fits a phone's width");
    client.set_window_size(1280, 900).await.unwrap();

    // The run's page; its counters move as the relay delivers, without a reload.
    client.find(Locator::Css(&format!("a[href=\"/console/runs/{run}\"]"))).await.unwrap().click().await.unwrap();
    at(&client, &format!("/console/runs/{run}")).await;
    assert_eq!(text(&client, "[data-step=\"Delivered\"]").await, "100");
    assert!(text(&client, "#main").await.contains("Stop lets the batch in flight finish"));
    client.execute("window.notReloaded = true;", vec![]).await.unwrap();
    // The page follows the run's event stream over its session (not a re-fetch every few seconds).
    wait_live_by(&client, "stream").await;
    // Two batches a second apart: the rate chart has its two samples.
    world.deliver(run, 250).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    world.deliver(run, 400).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while text(&client, "[data-step=\"Delivered\"]").await != "400" {
        assert!(Instant::now() < deadline, "the delivered count did not change within 20 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let same_page = client.execute("return window.notReloaded === true;", vec![]).await.unwrap();
    assert_eq!(same_page, json!(true), "the numbers changed in place: the page was not reloaded");
    assert!(text(&client, "#live").await.contains("400 of 1000"));
    let chart = client.find(Locator::Css("figure.chart svg title")).await.unwrap().html(true).await.unwrap();
    assert!(chart.contains("400 delivered in all"), "the rate chart, redrawn in place: {chart}");
    client.screenshot().await.map(|png| std::fs::write(screenshots().join("run.png"), png).unwrap()).unwrap();
    client.set_window_size(390, 844).await.unwrap();
    assert!(fits_the_width(&client).await, "a run's page fits a phone's width");

    // Stop through the run page's form, armed by the queue's name; then the return is offered, saying first what it
    // does (submitting it needs a run with a real plan: the in-process and API tests return real runs).
    client.set_window_size(1280, 900).await.unwrap();
    let live = text(&client, "#main").await;
    assert!(live.contains("Stop lets the batch in flight finish"), "{live}");
    type_into(&client, "#confirm-stop", "orders").await;
    click(&client, "form[action$=\"/stop\"] button[type=submit]").await;
    wait_text(&client, "p.notice", "Stop asked").await;
    wait_text(&client, "#state", "Stopped").await;
    // A stopped run's stream has ended; the page asks again every few seconds, so a resume by another hand shows.
    wait_live_by(&client, "poll").await;
    let page = text(&client, "#main").await;
    assert!(page.contains("Messages already delivered stay on the target"), "said before typing: {page}");
    assert!(client.find(Locator::Id("confirm-return")).await.is_ok(), "the return is offered, armed by the name");

    // Staging with no run and Settings (an admin's) load under the same CSP, with nothing in the log.
    client.set_window_size(1280, 900).await.unwrap();
    client.goto(&format!("{base}/console/staging")).await.unwrap();
    assert!(text(&client, "h1").await.contains("Staging with no run"));
    client.goto(&format!("{base}/console/settings")).await.unwrap();
    assert!(text(&client, "#main").await.contains("batch_size"));

    assert_a_quiet_browser_log(&client).await;
    client.close().await.unwrap();
    eprintln!("the browser test took {:.1} s", started.elapsed().as_secs_f64());
}

/// Waits (10 s at most) for the page's script to say it keeps the live parts fresh `how`: "stream" or "poll".
async fn wait_live_by(client: &Client, how: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let by = "return document.documentElement.getAttribute('data-live-by');";
    while client.execute(by, vec![]).await.unwrap() != json!(how) {
        assert!(Instant::now() < deadline, "the page's live parts are not kept fresh by {how} within 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When the run's event stream cannot be had — here the operator holds as many streams as they may, so the console's
/// is refused 429 — the run page falls back to asking for its live part every few seconds, and its numbers still
/// change without a reload.
#[tokio::test]
async fn without_its_event_stream_the_run_page_still_moves_by_asking_again() {
    use tower::ServiceExt as _;
    let Some(driver_path) = chromedriver_or_skip() else { return };
    let world = ConsoleWorld::new("console_fallback").await;
    let run = world.run("running", "orders", 1000, 100).await;
    let base = serve(&world).await;
    let app = world.app();
    let mut held = Vec::new();
    for _ in 0..world.api.limits.streams.per_caller() {
        let request = axum::http::Request::get(format!("/api/v1/runs/{run}/events"))
            .header(axum::http::header::AUTHORIZATION, format!("Bearer {TOKEN}"))
            .header("x-operator", ADMIN)
            .body(axum::body::Body::empty())
            .unwrap();
        let stream = app.clone().oneshot(request).await.unwrap();
        assert_eq!(stream.status(), axum::http::StatusCode::OK);
        held.push(stream);
    }
    let driver = Driver::start(&driver_path).await;
    let client = browser(&driver).await;
    sign_in_as(&client, &base, ADMIN).await;
    client.goto(&format!("{base}/console/runs/{run}")).await.unwrap();
    at(&client, &format!("/console/runs/{run}")).await;
    wait_live_by(&client, "poll").await;
    client.execute("window.notReloaded = true;", vec![]).await.unwrap();
    world.deliver(run, 400).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while text(&client, "[data-step=\"Delivered\"]").await != "400" {
        assert!(Instant::now() < deadline, "the delivered count did not change within 20 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let same_page = client.execute("return window.notReloaded === true;", vec![]).await.unwrap();
    assert_eq!(same_page, json!(true), "the numbers changed in place: the page was not reloaded");
    // The refused stream is the one thing the browser may log.
    assert_a_quiet_browser_log_but(&client, &["429", "text/event-stream"]).await;
    client.close().await.unwrap();
    drop(held);
}

/// Nothing went wrong in the browser: no error, no CSP violation (`allowed`: messages expected of the test, such
/// as the 400 a refused filter is answered with).
async fn assert_a_quiet_browser_log_but(client: &Client, allowed: &[&str]) {
    let problems: Vec<Value> = log_entries(client)
        .await
        .into_iter()
        .filter(|e| {
            let message = e["message"].as_str().unwrap_or_default();
            let problem =
                e["level"] == "SEVERE" || message.contains("Content Security Policy") || message.contains("Refused to");
            problem && !allowed.iter().any(|a| message.contains(a))
        })
        .collect();
    assert!(problems.is_empty(), "the browser logged problems: {problems:#?}");
}

async fn assert_a_quiet_browser_log(client: &Client) {
    assert_a_quiet_browser_log_but(client, &[]).await;
}

/// Waits (10 s at most) for the element `css` selects to hold `wanted` in its text.
async fn wait_text(client: &Client, css: &str, wanted: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // The element may not be there yet: the page it is on may still be loading.
        let now = match client.find(Locator::Css(css)).await {
            Ok(element) => element.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        if now.contains(wanted) {
            return now;
        }
        assert!(Instant::now() < deadline, "{css} says {now:?}, not {wanted:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Clicks the element `css` selects.
async fn click(client: &Client, css: &str) {
    client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}")).click().await.unwrap();
}

/// Replaces the text of the input `css` selects with `typed`.
async fn type_into(client: &Client, css: &str, typed: &str) {
    let input = client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}"));
    input.clear().await.unwrap();
    input.send_keys(typed).await.unwrap();
}

#[tokio::test]
async fn an_operator_picks_a_queue_ticks_two_messages_and_moves_them_through_the_dialog() {
    let Some(driver_path) = chromedriver_or_skip() else { return };
    let started = Instant::now();
    let live = LiveConsole::start(&driver_path, "console_move", 4).await;
    let LiveConsole { source, target, ids, world, base, client, .. } = &live;
    let bed = testbed::TestBed::get();

    // Queues → east-1 → the queue the test filled, found by its name.
    click(client, "nav a[href=\"/console/clusters\"]").await;
    at(client, "/console/clusters").await;
    click(client, "a[href=\"/console/clusters/east/nodes/east%2D1/queues\"]").await;
    at(client, "/console/clusters/east/nodes/east%2D1/queues").await;
    type_into(client, "input[name=name_contains]", source).await;
    click(client, "form.filters button[type=submit]").await;
    wait_text(client, "table.queues", "4").await;
    client.find(Locator::LinkText(source)).await.unwrap().click().await.unwrap();
    wait_text(client, "h1", source).await;

    // A filter the parser cannot read: the words as it is typed, and again from the server on submit.
    type_into(client, "#filter", "payload_id LIKE").await;
    let words = wait_text(client, "#filter-verdict", "cannot be read").await;
    assert!(words.contains("position 16"), "{words}");
    click(client, "form.filters button[type=submit]").await;
    wait_text(client, "#filter-verdict", "the filter cannot be read at position 16").await;
    type_into(client, "#filter", "payload_id LIKE 'console_move-%'").await;
    wait_text(client, "#filter-verdict", "Reads as").await;
    click(client, "form.filters button[type=submit]").await;
    wait_text(client, "table.messages", "console_move-3").await;
    client.screenshot().await.map(|png| std::fs::write(screenshots().join("messages.png"), png).unwrap()).unwrap();

    // Two ticked → Transfer… → a move to a new queue on west-1 (which the preview asks to acknowledge) → Preview.
    let target = format!("{target}_new");
    let boxes = client.find_all(Locator::Css("input[name=id]")).await.unwrap();
    assert_eq!(boxes.len(), 4);
    for b in &boxes[..2] {
        b.click().await.unwrap();
    }
    click(client, "button[name=take][value=ids]").await;
    at(client, "/console/transfer/new").await;
    assert!(text(client, "#main").await.contains("the 2 ticked message(s)"));
    click(client, "option[value=\"west/west%2D1\"]").await;
    type_into(client, "#target_queue", &target).await;
    click(client, "form.dialog button[type=submit]").await;
    wait_text(client, "h1", "Preview of a move").await;
    client.screenshot().await.map(|png| std::fs::write(screenshots().join("preview.png"), png).unwrap()).unwrap();

    // Acknowledge each finding, arm with the queue's name, execute: the run's page follows the run to its end.
    let acks = client.find_all(Locator::Css("input[name=ack]")).await.unwrap();
    assert!(!acks.is_empty(), "a new target queue is a finding to acknowledge");
    acknowledge_arm_and_execute(client, source).await;
    wait_for_state(client, "Succeeded", Duration::from_secs(60)).await;
    assert_eq!(delivered(client).await, 2);

    // The census: two of the four on the target, the other two still on the source, each once.
    let (on_target, on_source) =
        tokio::join!(support::census(bed.node("west-1"), &target), support::census(bed.node("east-1"), source));
    assert_eq!((on_target.len(), on_source.len()), (2, 2), "{on_target:?} {on_source:?}");
    for id in ids {
        let seen = on_target.get(id).copied().unwrap_or(0) + on_source.get(id).copied().unwrap_or(0);
        assert_eq!(seen, 1, "{id}: {on_target:?} {on_source:?}");
    }

    // The two left, redistributed to east-2 (SPEC §1: the same queue on another node of the cluster): the source
    // node is listed, disabled, saying why; the preview and the run's page say what it is; the census agrees.
    client.goto(&format!("{base}{}", messages_path("east-1", source))).await.unwrap();
    wait_text(client, "table.messages", "console_move-").await;
    click(client, "button[name=take][value=all]").await;
    at(client, "/console/transfer/new").await;
    click(client, "input[name=mode][value=redistribute]").await;
    let source_node = client.find(Locator::Css("#redistribute_to option[value=\"east-1\"]")).await.unwrap();
    assert_eq!(source_node.attr("disabled").await.unwrap().as_deref(), Some("true"));
    let why = text(client, "fieldset.to-a-node").await;
    assert!(why.contains("east-1 is the source node: a redistribution moves the messages to another node of east"));
    assert!(!client.find(Locator::Id("target_queue")).await.unwrap().is_displayed().await.unwrap(), "not asked");
    client.screenshot().await.map(|png| std::fs::write(screenshots().join("dialog.png"), png).unwrap()).unwrap();
    click(client, "form.dialog button[type=submit]").await;
    wait_text(client, "h1", "Preview of a move: redistribute to a node (east-2 of east)").await;
    acknowledge_arm_and_execute(client, source).await;
    wait_for_state(client, "Succeeded", Duration::from_secs(60)).await;
    assert!(text(client, "#live").await.contains("move: redistribute to a node (east-2 of east)"));
    assert_eq!(delivered(client).await, 2);
    let (on_east_2, on_east_1) =
        tokio::join!(support::census(bed.node("east-2"), source), support::census(bed.node("east-1"), source));
    let left: Vec<String> = on_source.keys().cloned().collect();
    support::assert_exactly_once(&left, &on_east_2, &[&on_east_1, &on_target]);
    assert!(on_east_1.is_empty(), "{on_east_1:?}");

    // Another operator, who may move from east but send only to west: east's nodes are listed, disabled, saying
    // why; and one who sees east only: west is not listed at all.
    for (principal, cluster, permission) in [
        ("sam", "east", "cluster:read"),
        ("sam", "east", "message:read"),
        ("sam", "east", "message:move"),
        ("sam", "west", "cluster:read"),
        ("sam", "west", "message:send"),
    ] {
        sqlx::query(
            "INSERT INTO transfer_grant (principal, cluster, permission, granted_by) VALUES ($1, $2, $3, 'test')",
        )
        .bind(principal)
        .bind(cluster)
        .bind(permission)
        .execute(&world.pool)
        .await
        .unwrap();
    }
    let dialog = format!("{base}/console/transfer/new?cluster=east&node=east-1&queue={source}&take=all");
    for operator in ["sam", EAST_ONLY] {
        click(client, "form.signout button[type=submit]").await;
        at(client, "/console/sign-in").await;
        type_into(client, "#token", TOKEN).await;
        type_into(client, "#operator", operator).await;
        click(client, "form.stack button[type=submit]").await;
        at(client, "/console/").await;
        client.goto(&dialog).await.unwrap();
        at(client, "/console/transfer/new").await;
        let targets = text(client, "#main").await;
        if operator == "sam" {
            let disabled = client.find(Locator::Css("option[value=\"east/east%2D1\"]")).await.unwrap();
            assert_eq!(disabled.attr("disabled").await.unwrap().as_deref(), Some("true"), "{targets}");
            assert!(targets.contains("east / east-1: ") && targets.contains("message:send"), "the reason: {targets}");
            assert!(targets.contains("west / west-1"), "{targets}");
        } else {
            assert!(targets.contains("east / east-1") && !targets.contains("west"), "west is invisible: {targets}");
        }
    }

    // The refused filter's 400 is the one thing the browser may log.
    assert_a_quiet_browser_log_but(client, &["status of 400"]).await;
    client.clone().close().await.unwrap();
    for (node, queue) in [("east-1", source), ("east-2", source), ("west-1", &target)] {
        let _ = support::management(bed.node(node)).destroy_queue(queue).await;
    }
    eprintln!("the browser move took {:.1} s", started.elapsed().as_secs_f64());
}

/// A live worker's runs from the browser (issue 30's Prove): the messages a filter typed in the Messages page's box
/// selects, moved; a whole queue copied; a run stopped mid-way and returned through its page's dialog — each run's
/// page followed without a reload to its end, and its numbers judged by the census of both queues.
#[tokio::test]
async fn an_operator_moves_a_filters_selection_copies_a_queue_and_returns_a_stopped_run_in_the_browser() {
    let Some(driver_path) = chromedriver_or_skip() else { return };
    let started = Instant::now();
    let live = LiveConsole::start(&driver_path, "console_filter", 10).await;
    let LiveConsole { source, target, ids, world, base, client, .. } = &live;
    let bed = testbed::TestBed::get();

    // (a) A selector typed in the filter box, checked as typed; "Transfer all matching the filter…" takes it.
    let matching: Vec<String> = [1, 4, 7].iter().map(|n| ids[*n].clone()).collect();
    let filter = format!("payload_id IN ('{}')", matching.join("', '"));
    client.goto(&format!("{base}{}", messages_path("east-1", source))).await.unwrap();
    type_into(client, "#filter", &filter).await;
    wait_text(client, "#filter-verdict", "Reads as").await;
    click(client, "form.filters button[type=submit]").await;
    wait_text(client, "table.messages", &matching[2]).await;
    assert_eq!(client.find_all(Locator::Css("input[name=id]")).await.unwrap().len(), 3);
    click(client, "button[name=take][value=filter]").await;
    at(client, "/console/transfer/new").await;
    assert!(text(client, "#main").await.contains(&format!("every message matching the filter {filter}")));
    click(client, "option[value=\"west/west%2D1\"]").await;
    type_into(client, "#target_queue", target).await;
    click(client, "form.dialog button[type=submit]").await;
    wait_text(client, "h1", "Preview of a move").await;
    assert!(text(client, "#main").await.contains("3 message(s): the messages the filter matches"));
    acknowledge_arm_and_execute(client, source).await;
    client.execute("window.notReloaded = true;", vec![]).await.unwrap();
    // The page follows the run's event stream over its session (not a re-fetch every few seconds).
    let deadline = Instant::now() + Duration::from_secs(10);
    let by_stream = "return document.documentElement.getAttribute('data-live-by') === 'stream';";
    while client.execute(by_stream, vec![]).await.unwrap() != json!(true) {
        assert!(Instant::now() < deadline, "the run page did not open its event stream within 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for_state(client, "Succeeded", Duration::from_secs(60)).await;
    let same_page = client.execute("return window.notReloaded === true;", vec![]).await.unwrap();
    assert_eq!(same_page, json!(true), "the run's page followed it in place, without a reload");
    // The source's census is taken after (b), which leaves it as it is: one browse of it for both.
    let on_target = support::census(bed.node("west-1"), target).await;
    assert_eq!(delivered(client).await, on_target.len() as i64, "the page's Delivered is the census");
    let others: Vec<String> = ids.iter().filter(|id| !matching.contains(id)).cloned().collect();

    // (b) The whole queue copied to a new queue: all on the target, all still on the source.
    let copy = format!("{target}_copy");
    client.goto(&format!("{base}{}", messages_path("east-1", source))).await.unwrap();
    click(client, "button[name=take][value=all]").await;
    at(client, "/console/transfer/new").await;
    click(client, "input[name=mode][value=copy]").await;
    click(client, "option[value=\"west/west%2D1\"]").await;
    type_into(client, "#target_queue", &copy).await;
    click(client, "form.dialog button[type=submit]").await;
    wait_text(client, "h1", "Preview of a copy").await;
    acknowledge_arm_and_execute(client, source).await;
    wait_for_state(client, "Succeeded", Duration::from_secs(60)).await;
    let (copied, on_source) =
        tokio::join!(support::census(bed.node("west-1"), &copy), support::census(bed.node("east-1"), source));
    assert_eq!(delivered(client).await, copied.len() as i64, "the page's Delivered is the census");
    support::assert_exactly_once(&matching, &on_target, &[&on_source]);
    support::assert_exactly_once(&others, &on_source, &[&on_target]);
    support::assert_exactly_once(&others, &copied, &[]);

    // (c) A move of the rest, paced to one message a second, stopped through its page mid-way, then returned
    // through its dialog: what was delivered stays on the target (said before the name is typed), what staging
    // held goes back to the source.
    for (key, value) in [("batch_size", json!(1)), ("messages_per_second", json!(1))] {
        artemis_transfer::jobs::settings::set(&world.pool, key, value, "test").await.unwrap();
    }
    client.goto(&format!("{base}{}", messages_path("east-1", source))).await.unwrap();
    click(client, "button[name=take][value=all]").await;
    at(client, "/console/transfer/new").await;
    click(client, "option[value=\"west/west%2D1\"]").await;
    type_into(client, "#target_queue", target).await;
    click(client, "form.dialog button[type=submit]").await;
    wait_text(client, "h1", "Preview of a move").await;
    acknowledge_arm_and_execute(client, source).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while delivered(client).await < 1 {
        assert!(Instant::now() < deadline, "nothing delivered within 30 s: {}", text(client, "#live").await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    type_into(client, "#confirm-stop", source).await;
    click(client, "form[action$=\"/stop\"] button[type=submit]").await;
    wait_text(client, "p.notice", "Stop asked").await;
    wait_for_state(client, "Stopped", Duration::from_secs(30)).await;
    // The actions are offered as of the page's load (they are forms, never swapped): the page again, now Stopped.
    client.refresh().await.unwrap();
    wait_text(client, "#state", "Stopped").await;
    let page = text(client, "#main").await;
    assert!(page.contains("Messages already delivered stay on the target"), "said before typing: {page}");
    type_into(client, "#confirm-return", source).await;
    click(client, "form[action$=\"/return\"] button[type=submit]").await;
    wait_text(client, "p.notice", "Returning").await;
    wait_for_state(client, "Returned", Duration::from_secs(60)).await;
    let (moved, returned) = (delivered(client).await, step(client, "Returned").await);
    assert!((1..7).contains(&moved), "stopped mid-way: {moved} delivered");
    assert!(returned >= 1, "staging held messages that went back: {}", text(client, "#live").await);
    let (on_target, on_source) =
        tokio::join!(support::census(bed.node("west-1"), target), support::census(bed.node("east-1"), source));
    assert_eq!(on_target.len() as i64, 3 + moved, "the three of (a) and the {moved} delivered: {on_target:?}");
    assert_eq!(on_source.len() as i64, 7 - moved, "the rest back on the source: {on_source:?}");
    for id in ids {
        let seen = on_target.get(id).copied().unwrap_or(0) + on_source.get(id).copied().unwrap_or(0);
        assert_eq!(seen, 1, "{id}: {on_target:?} {on_source:?}");
    }

    assert_a_quiet_browser_log(client).await;
    client.clone().close().await.unwrap();
    for (node, queue) in [("east-1", source), ("west-1", target), ("west-1", &copy)] {
        let _ = support::management(bed.node(node)).destroy_queue(queue).await;
    }
    eprintln!("the browser's filter, copy and return took {:.1} s", started.elapsed().as_secs_f64());
}

/// The transfer dialog and a run's page by keyboard alone (issue 30: "keyboard operable, labelled controls"): every
/// control on them has a label, and Tab, the arrows, Space and Enter reach and operate the dialog's — the mode, the
/// target node, the typed target queue, Preview; then each acknowledgement, the typed name and Execute — with no
/// click, to a run that moves the two messages. Transfers and Messages, whence the dialog comes, are labelled too.
#[tokio::test]
async fn the_dialog_is_operated_by_keyboard_alone_and_every_control_has_a_label() {
    let Some(driver_path) = chromedriver_or_skip() else { return };
    let started = Instant::now();
    let live = LiveConsole::start(&driver_path, "console_keys", 2).await;
    let LiveConsole { source, target, base, client, .. } = &live;
    let target = format!("{target}_new");
    // The pages the dialog is reached from are labelled too: Transfers (its filters) and Messages (its ticks).
    assert_every_control_labelled(client).await;
    client.goto(&format!("{base}{}", messages_path("east-1", source))).await.unwrap();
    wait_text(client, "table.messages", "console_keys-").await;
    assert_every_control_labelled(client).await;
    client
        .goto(&format!("{base}/console/transfer/new?cluster=east&node=east-1&queue={source}&take=all"))
        .await
        .unwrap();
    at(client, "/console/transfer/new").await;
    assert_every_control_labelled(client).await;

    // The mode: Tab reaches the chosen one; the arrows change the choice (and back).
    tab_to(client, "input[name=mode]:checked").await;
    assert_eq!(focused(client, "value").await, "move");
    press(client, &[Key::Down.into()]).await;
    assert_eq!(focused(client, "value").await, "copy", "the arrow chose the next mode");
    press(client, &[Key::Up.into()]).await;
    assert_eq!(focused(client, "value").await, "move");
    // The target node: the arrows pick west-1 in the closed list.
    tab_to(client, "#target").await;
    for _ in 0..5 {
        if focused(client, "value").await == "west/west%2D1" {
            break;
        }
        press(client, &[Key::Down.into()]).await;
    }
    assert_eq!(focused(client, "value").await, "west/west%2D1", "the arrows reach west-1");
    // The target queue, typed; Preview by Enter.
    tab_to(client, "#target_queue").await;
    type_keys(client, &target).await;
    tab_to(client, "form.dialog button[type=submit]").await;
    press(client, &[Key::Enter.into()]).await;
    wait_text(client, "h1", "Preview of a move").await;
    assert_every_control_labelled(client).await;

    // Each acknowledgement ticked by Space, the name typed, Execute by Enter.
    let acks = client.find_all(Locator::Css("input[name=ack]")).await.unwrap().len();
    assert!(acks > 0, "a new target queue is a finding to acknowledge");
    for _ in 0..acks {
        tab_to(client, "input[name=ack]:not(:checked)").await;
        press(client, &[' ']).await;
    }
    if client.find(Locator::Id("confirm")).await.is_ok() {
        tab_to(client, "#confirm").await;
        type_keys(client, source).await;
    }
    if client.find(Locator::Css("input[name=override_cap]")).await.is_ok() {
        tab_to(client, "input[name=override_cap]").await;
        press(client, &[' ']).await;
    }
    tab_to(client, "form.dialog button.danger").await;
    press(client, &[Key::Enter.into()]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !client.current_url().await.unwrap().path().starts_with("/console/runs/") {
        assert!(Instant::now() < deadline, "{}", client.source().await.unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_for_state(client, "Succeeded", Duration::from_secs(60)).await;
    assert_eq!(delivered(client).await, 2);
    assert_every_control_labelled(client).await;

    assert_a_quiet_browser_log(client).await;
    client.clone().close().await.unwrap();
    let bed = testbed::TestBed::get();
    for (node, queue) in [("east-1", source), ("west-1", &live.target), ("west-1", &target)] {
        let _ = support::management(bed.node(node)).destroy_queue(queue).await;
    }
    eprintln!("the keyboard's dialog took {:.1} s", started.elapsed().as_secs_f64());
}

/// Presses `keys` on whatever has the focus, each down then up, as a keyboard does: no element named, no mouse.
async fn press(client: &Client, keys: &[char]) {
    let mut actions = KeyActions::new("keyboard".to_string());
    for key in keys {
        actions = actions.then(KeyAction::Down { value: *key }).then(KeyAction::Up { value: *key });
    }
    client.perform_actions(actions).await.unwrap();
}

/// Types `text` into whatever has the focus.
async fn type_keys(client: &Client, text: &str) {
    press(client, &text.chars().collect::<Vec<_>>()).await;
}

/// The property `name` of the element that has the focus.
async fn focused(client: &Client, name: &str) -> String {
    let value = client.execute("return String(document.activeElement[arguments[0]]);", vec![json!(name)]).await;
    value.unwrap().as_str().unwrap_or_default().to_string()
}

/// Presses Tab until the focus is on an element `css` selects: the keyboard reaches it (30 presses at most).
async fn tab_to(client: &Client, css: &str) {
    let mut passed = Vec::new();
    for _ in 0..30 {
        press(client, &[Key::Tab.into()]).await;
        let here = client.execute("return document.activeElement.matches(arguments[0]);", vec![json!(css)]).await;
        if here.unwrap() == json!(true) {
            return;
        }
        passed.push(focused(client, "outerHTML").await.chars().take(80).collect::<String>());
    }
    panic!("Tab never reached {css}; it went through: {passed:#?}");
}

/// Every form control of the page has a label: a `<label>` (for it, or around it) or an `aria-label` or
/// `aria-labelledby`; a button its words.
async fn assert_every_control_labelled(client: &Client) {
    let unlabelled = client
        .execute(
            "return Array.from(document.querySelectorAll('input:not([type=hidden]), select, textarea, button'))
               .filter(function (c) {
                 if (c.getAttribute('aria-label') || c.getAttribute('aria-labelledby')) { return false; }
                 if (c.tagName === 'BUTTON') { return c.textContent.trim() === ''; }
                 return !c.labels || c.labels.length === 0;
               })
               .map(function (c) { return c.outerHTML; });",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(unlabelled, json!([]), "controls without a label on {}", client.current_url().await.unwrap());
}

/// A console with a live worker, in a browser signed in as the admin: a queue on east-1 holding `count` text
/// messages (payload ids `<label>-<n>`) and an empty one on west-1, in a world of its own (a fresh database, both
/// clusters registered) whose worker runs what the browser executes.
struct LiveConsole {
    source: String,
    target: String,
    ids: Vec<String>,
    world: support::World,
    base: String,
    client: Client,
    _driver: Driver,
}

impl LiveConsole {
    async fn start(driver_path: &PathBuf, label: &str, count: u32) -> LiveConsole {
        let (source, target, ids) = support::source_and_target_of(label, count, "text").await;
        // The nodes' management calls paced at 200 a second, not the default 20: a preview makes dozens of them, and
        // at 20 each of these tests' previews waited about 8 s on the permits (the binary took ~80 s, now ~50 s).
        let mut world = support::World::new(label, &[("node_calls_per_second", json!(200))]).await;
        world.spawn_worker(label, &[]).await;
        let console = ConsoleWorld::on(world.pool.clone()).await;
        let base = serve(&console).await;
        let driver = Driver::start(driver_path).await;
        let client = browser(&driver).await;
        sign_in_as(&client, &base, ADMIN).await;
        LiveConsole { source, target, ids, world, base, client, _driver: driver }
    }
}

/// The Messages page of `queue` on `node` of east.
fn messages_path(node: &str, queue: &str) -> String {
    let segment = |t: &str| percent_encoding::utf8_percent_encode(t, percent_encoding::NON_ALPHANUMERIC).to_string();
    format!("/console/clusters/east/nodes/{}/queues/{}", segment(node), segment(queue))
}

/// Signs `operator` in through the sign-in page, with the service's token.
async fn sign_in_as(client: &Client, base: &str, operator: &str) {
    client.goto(&format!("{base}/console/sign-in")).await.unwrap();
    type_into(client, "#token", TOKEN).await;
    type_into(client, "#operator", operator).await;
    click(client, "form.stack button[type=submit]").await;
    at(client, "/console/").await;
}

/// On a preview's page: acknowledges every finding, types the source queue's name and overrides the cap where the
/// page asks, executes, and waits (60 s at most) for the run's page.
async fn acknowledge_arm_and_execute(client: &Client, source_queue: &str) {
    for ack in client.find_all(Locator::Css("input[name=ack]")).await.unwrap() {
        ack.click().await.unwrap();
    }
    if client.find(Locator::Id("confirm")).await.is_ok() {
        type_into(client, "#confirm", source_queue).await;
    }
    if let Ok(cap) = client.find(Locator::Css("input[name=override_cap]")).await {
        cap.click().await.unwrap();
    }
    click(client, "form.dialog button.danger").await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !client.current_url().await.unwrap().path().starts_with("/console/runs/") {
        assert!(Instant::now() < deadline, "{}", client.source().await.unwrap_or_default());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (`limit` at most) for the run's page, refreshing itself, to show the run in `state`.
async fn wait_for_state(client: &Client, state: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while text(client, "#state").await != state {
        assert!(Instant::now() < deadline, "not {state} within {limit:?}: {}", text(client, "#live").await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A step's count on the run's page.
async fn step(client: &Client, name: &str) -> i64 {
    let shown = text(client, &format!("[data-step=\"{name}\"]")).await;
    shown.parse().unwrap_or_else(|_| panic!("{name} shows {shown:?}"))
}

/// The run page's Delivered.
async fn delivered(client: &Client) -> i64 {
    step(client, "Delivered").await
}
