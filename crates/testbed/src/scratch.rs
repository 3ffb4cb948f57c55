//! A private, throwaway broker for tests that must stop or kill a broker.
//!
//! The shared test-bed brokers are never stopped: other engineers' tests run on
//! them. A [`ScratchBroker`] is a fresh instance made with `artemis create` from the
//! test bed's distribution, in its own folder under the test bed's `scratch/`,
//! on a free port, started as a child of the test process. It can be paused
//! (SIGSTOP), resumed, stopped cleanly (SIGTERM) or killed (SIGKILL), and restarted on its own data;
//! dropping it kills it and deletes its folder. By default only its Core acceptor listens; [`ScratchOptions`] adds
//! the web console (Jolokia) and edits of its `broker.xml` (a disk limit, `#` settings, security).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::config::TestBed;

/// Core ports tried for a scratch broker (above the test bed's, below the ephemeral range).
const PORTS: std::ops::Range<u16> = 63_100..64_900;

/// Core port of a broker made by `artemis create` before its `--port-offset`.
const CORE_BASE_PORT: u16 = 61_616;

/// HTTP (web console) port of a broker made by `artemis create` before its `--port-offset`.
const HTTP_BASE_PORT: u16 = 8_161;

/// `artemis create`'s disk limit, which a scratch broker raises to 100 unless its options replace it.
pub const DEFAULT_MAX_DISK_USAGE: &str = "<max-disk-usage>90</max-disk-usage>";

/// How to make a scratch broker.
#[derive(Debug, Clone, Default)]
pub struct ScratchOptions {
    /// Start the web console, so Jolokia answers at [`ScratchBroker::jolokia_url`].
    pub web: bool,
    /// Text replacements applied to `etc/broker.xml` after `artemis create`, in order: `(find, replace)`. The
    /// disk limit ([`DEFAULT_MAX_DISK_USAGE`]) is then raised to 100 if no replacement changed it.
    /// Each `find` must occur (the start fails otherwise), and only its first occurrence is replaced. For
    /// example `("</address-settings>", "<address-setting match=\"#\">…</address-setting></address-settings>")`
    /// or `("<core ", …)`.
    pub broker_xml: Vec<(String, String)>,
    /// The broker's `-Xmx` (`artemis create --java-memory`), e.g. `96M`; `None` is the test bed's 512M.
    pub heap: Option<String>,
}

/// A running private broker; see the module doc.
#[derive(Debug)]
pub struct ScratchBroker {
    dir: PathBuf,
    child: Option<tokio::process::Child>,
    /// Its Core acceptor's port on 127.0.0.1.
    pub core_port: u16,
    /// Its web console's port on 127.0.0.1, when started with [`ScratchOptions::web`].
    pub http_port: Option<u16>,
    /// The one user (role `amq`, every permission).
    pub user: String,
    /// Its password.
    pub password: String,
}

fn is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A free Core port (and, with `web`, a free HTTP port at the same `--port-offset`).
fn free_port(web: bool) -> u16 {
    let start = PORTS.start + (uuid::Uuid::new_v4().as_u128() % u128::from(PORTS.end - PORTS.start)) as u16;
    (start..PORTS.end)
        .chain(PORTS.start..start)
        .find(|p| is_free(*p) && (!web || is_free(HTTP_BASE_PORT + (p - CORE_BASE_PORT))))
        .expect("no free port for a scratch broker")
}

impl ScratchBroker {
    /// Creates and starts a private broker and waits until its Core port accepts
    /// connections. Panics (failing the test) with the broker's output if it cannot.
    pub async fn start(label: &str) -> ScratchBroker {
        ScratchBroker::start_with(label, ScratchOptions::default()).await
    }

    /// Like [`ScratchBroker::start`], made as `options` says.
    pub async fn start_with(label: &str, options: ScratchOptions) -> ScratchBroker {
        let bed = TestBed::get();
        let home = bed.artemis_home();
        let name = crate::unique_name(label);
        let dir = bed.dir.join("scratch").join(&name);
        std::fs::create_dir_all(dir.parent().expect("scratch parent")).expect("scratch folder");
        let core_port = free_port(options.web);
        let http_port = options.web.then(|| HTTP_BASE_PORT + (core_port - CORE_BASE_PORT));
        let (user, password) = ("scratch".to_string(), "scratch-pw".to_string());
        let offset = (core_port - CORE_BASE_PORT).to_string();
        let web_args: &[&str] = if options.web { &["--http-host", "127.0.0.1"] } else { &["--no-web"] };
        let out = tokio::process::Command::new(home.join("bin").join("artemis"))
            .arg("create")
            .arg(&dir)
            .args(["--silent", "--force", "--name", "scratch", "--host", "127.0.0.1"])
            .args(["--port-offset", &offset, "--user", &user, "--password", &password, "--role", "amq"])
            .args([
                "--require-login",
                "--no-autotune",
                "--nio",
                "--java-memory",
                options.heap.as_deref().unwrap_or("512M"),
            ])
            .args(web_args)
            .args(["--no-amqp-acceptor", "--no-stomp-acceptor", "--no-mqtt-acceptor", "--no-hornetq-acceptor"])
            .env("JAVA_ARGS_APPEND", if options.heap.is_some() { "-Xms32M" } else { "-Xms64M" })
            .env_remove("JAVA_ARGS")
            .stdin(Stdio::null())
            .output()
            .await
            .expect("cannot run `artemis create`");
        assert!(
            out.status.success(),
            "`artemis create` failed for a scratch broker:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let xml_path = dir.join("etc").join("broker.xml");
        let mut xml = std::fs::read_to_string(&xml_path).expect("the scratch broker.xml");
        for (find, replace) in &options.broker_xml {
            assert!(xml.contains(find.as_str()), "scratch broker.xml has no `{find}` to replace");
            xml = xml.replacen(find.as_str(), replace, 1);
        }
        // As the test bed's nodes (scripts/testbed, patch_broker_xml): never blocked by the shared host's disk,
        // unless the test set its own limit above.
        xml = xml.replacen(DEFAULT_MAX_DISK_USAGE, "<max-disk-usage>100</max-disk-usage>", 1);
        std::fs::write(&xml_path, xml).expect("the scratch broker.xml");
        let child = run_instance(&dir);
        let mut broker = ScratchBroker { dir, child: Some(child), core_port, http_port, user, password };
        broker.wait_ready().await;
        broker
    }

    /// Starts the broker again in the same instance folder, keeping its data (journal, bindings, paging), after
    /// [`ScratchBroker::kill`] or [`ScratchBroker::terminate`]; waits until it answers, as
    /// [`ScratchBroker::start`] does. Panics if it is still running.
    pub async fn restart(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let exited = child.try_wait().ok().flatten();
            assert!(exited.is_some(), "restart of a scratch broker that is still running: kill or terminate it first");
        }
        self.child = Some(run_instance(&self.dir));
        self.wait_ready().await;
    }

    async fn wait_ready(&mut self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            if self.answers().await {
                return;
            }
            let exited = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || tokio::time::Instant::now() > deadline {
                panic!(
                    "the scratch broker did not start ({exited:?}); its output:\n{}",
                    std::fs::read_to_string(self.dir.join("run.out")).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The Core port accepts connections and, with the web console, Jolokia answers a version request.
    async fn answers(&self) -> bool {
        if tokio::net::TcpStream::connect(("127.0.0.1", self.core_port)).await.is_err() {
            return false;
        }
        let Some(url) = self.jolokia_url() else { return true };
        let client = reqwest::Client::new();
        let answer = client
            .get(format!("{url}/version"))
            .basic_auth(&self.user, Some(&self.password))
            .header("Origin", "http://127.0.0.1")
            .timeout(Duration::from_secs(5))
            .send()
            .await;
        matches!(answer, Ok(r) if r.status().is_success())
    }

    /// `http://127.0.0.1:<port>/console/jolokia`, when started with the web console.
    pub fn jolokia_url(&self) -> Option<String> {
        self.http_port.map(|p| format!("http://127.0.0.1:{p}/console/jolokia"))
    }

    /// Its instance folder (`etc/`, `data/`, `log/`).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// `tcp://127.0.0.1:<port>`.
    pub fn core_url(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.core_port)
    }

    /// The broker process's id (`bin/artemis` execs java, so this is the JVM).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().and_then(|c| c.id()).expect("the scratch broker is not running")
    }

    fn signal(&self, signal: &str) {
        let pid = self.pid().to_string();
        let status = std::process::Command::new("kill").args([signal, &pid]).status().expect("cannot run `kill`");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    /// Freezes the broker (SIGSTOP): its sockets stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Resumes a paused broker (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Stops the broker cleanly (SIGTERM: its shutdown hook stops the server, which tells its clients) and
    /// waits for it to exit.
    pub async fn terminate(&mut self) {
        self.signal("-TERM");
        if let Some(mut child) = self.child.take() {
            let _ = child.wait().await;
        }
    }

    /// Kills the broker (SIGKILL) and waits for it to exit; its sockets close.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

/// `bin/artemis run` in the instance folder `dir`, its output appended to `run.out` (a restart keeps the first
/// run's output before its own).
fn run_instance(dir: &std::path::Path) -> tokio::process::Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("run.out")).expect("scratch log");
    tokio::process::Command::new(dir.join("bin").join("artemis"))
        .arg("run")
        .current_dir(dir)
        .env("JAVA_ARGS_APPEND", "-Xms64M")
        .env_remove("JAVA_ARGS")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("scratch log"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("cannot start the scratch broker")
}

impl Drop for ScratchBroker {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
