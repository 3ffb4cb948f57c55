//! The operator console in a real browser (ADR 0014): Debian's `chromium`, driven over WebDriver by `chromedriver`
//! (package `chromium-driver`) from this test through `fantoccini`. The console is served in-process on a free port
//! of 127.0.0.1 over a fresh database of the test bed's Postgres; runs are written as a worker leaves them, and
//! their counters moved as a relay batch moves them, so what is under test is the console: sign-in, the list, the
//! run's page, its numbers changing without a reload, and a browser log with no error and no CSP violation.
//!
//! Without `chromedriver` (on PATH, or named by `CHROMEDRIVER`) the test says it skipped and passes, unless
//! `ARTEMIS_TRANSFER_REQUIRE_BROWSER` is set: `.ci/run` installs both packages and sets it, so CI always runs it. Screenshots of the pages go to `target/console-screenshots/`, or
//! to the folder `ARTEMIS_TRANSFER_CONSOLE_SCREENSHOTS` names (`docs/console` to refresh the README's).

mod world;

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use world::{ConsoleWorld, ADMIN, HOSTILE_QUEUE, TOKEN};

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
    client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("no {css}: {e}")).text().await.unwrap()
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
    let Some(driver_path) = chromedriver() else {
        let required = std::env::var_os("ARTEMIS_TRANSFER_REQUIRE_BROWSER").is_some();
        assert!(!required, "ARTEMIS_TRANSFER_REQUIRE_BROWSER is set and there is no chromedriver (chromium-driver)");
        eprintln!("skipped: no chromedriver (install Debian's chromium and chromium-driver, as .ci/run does)");
        return;
    };
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
    world.deliver(run, 400).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while text(&client, "[data-step=\"Delivered\"]").await != "400" {
        assert!(Instant::now() < deadline, "the delivered count did not change within 20 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let same_page = client.execute("return window.notReloaded === true;", vec![]).await.unwrap();
    assert_eq!(same_page, json!(true), "the numbers changed in place: the page was not reloaded");
    assert!(text(&client, "#live").await.contains("400 of 1000"));
    client.screenshot().await.map(|png| std::fs::write(screenshots().join("run.png"), png).unwrap()).unwrap();
    client.set_window_size(390, 844).await.unwrap();
    assert!(fits_the_width(&client).await, "a run's page fits a phone's width");

    // Nothing went wrong in the browser: no error, no CSP violation.
    let problems: Vec<Value> = log_entries(&client)
        .await
        .into_iter()
        .filter(|e| {
            let message = e["message"].as_str().unwrap_or_default();
            e["level"] == "SEVERE" || message.contains("Content Security Policy") || message.contains("Refused to")
        })
        .collect();
    assert!(problems.is_empty(), "the browser logged problems: {problems:#?}");
    client.close().await.unwrap();
    eprintln!("the browser test took {:.1} s", started.elapsed().as_secs_f64());
}
