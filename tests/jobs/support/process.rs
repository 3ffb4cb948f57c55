//! `artemis-transfer` as child processes: workers (stopped by signal, killed with -9, paused with SIGSTOP) and
//! admin commands.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

/// The binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_artemis-transfer")
}

/// Environment for a worker with short leases, so crash tests take seconds.
pub fn fast_lease_env(lease_secs: f64, heartbeat_secs: f64) -> Vec<(String, String)> {
    vec![
        ("ARTEMIS_TRANSFER__WORKER__LEASE_SECS".into(), lease_secs.to_string()),
        ("ARTEMIS_TRANSFER__WORKER__HEARTBEAT_SECS".into(), heartbeat_secs.to_string()),
        ("ARTEMIS_TRANSFER__WORKER__POLL_INTERVAL_MS".into(), "500".into()),
        ("ARTEMIS_TRANSFER__WORKER__SHUTDOWN_TIMEOUT_SECS".into(), "60".into()),
    ]
}

/// A worker process.
pub struct WorkerProcess {
    pub name: String,
    child: Child,
    log: std::path::PathBuf,
}

impl WorkerProcess {
    /// Starts `artemis-transfer worker` named `name` on `url` with `concurrency` tasks; its stderr goes to
    /// `<log_dir>/worker-<name>.log`.
    pub fn spawn(url: &str, name: &str, concurrency: usize, env: &[(String, String)], log_dir: &Path) -> WorkerProcess {
        let seams = env.iter().any(|(k, _)| k.starts_with("ARTEMIS_TRANSFER_FAULT"));
        assert!(
            !seams || cfg!(feature = "fault-injection"),
            "worker {name} needs the fault seams: run the tests as the README says (--features fault-injection)"
        );
        let log = log_dir.join(format!("worker-{name}.log"));
        let stderr = std::fs::File::create(&log).expect("create the worker's log");
        let child = Command::new(binary())
            .args(["worker", "--name", name, "--concurrency", &concurrency.to_string()])
            .env("DATABASE_URL", url)
            .env("RUST_LOG", "info,artemis_transfer=debug")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start a worker process");
        WorkerProcess { name: name.to_owned(), child, log }
    }

    /// Waits until the worker says it started (it is connected and listening).
    pub async fn ready(&self) {
        crate::support::wait_for(&format!("worker {} to start", self.name), Duration::from_secs(60), || async {
            std::fs::read_to_string(&self.log).ok().filter(|text| text.contains("worker started")).map(|_| ())
        })
        .await
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill").args([sig, &self.pid().to_string()]).status().expect("run kill");
        assert!(status.success(), "kill {sig} {} failed", self.pid());
    }

    /// SIGTERM: stop claiming, finish what is in flight, exit.
    pub fn terminate(&self) {
        self.signal("-TERM");
    }

    /// SIGKILL: gone at once, leases held and all.
    pub fn kill9(&mut self) {
        self.signal("-KILL");
        let _ = self.child.wait();
    }

    /// SIGSTOP: frozen (a hung worker).
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT: back, late.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// The exit status if the process has exited.
    #[allow(dead_code)] // the relay tests' (this file is shared)
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("poll the worker process")
    }

    /// Waits for the process to exit, at most `limit`.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll the worker process") {
                return status;
            }
            assert!(tokio::time::Instant::now() < deadline, "worker {} did not exit within {limit:?}", self.name);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM and wait for a clean exit.
    pub async fn stop(mut self) {
        self.terminate();
        let status = self.wait_exit(Duration::from_secs(60)).await;
        assert!(status.success(), "worker {} exited with {status}", self.name);
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        // A test that failed midway must not leave workers behind.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `artemis-transfer admin --as <actor> <args…>` against `url` and returns its output.
pub fn admin(url: &str, actor: &str, args: &[&str]) -> Output {
    Command::new(binary())
        .arg("admin")
        .args(["--as", actor])
        .args(args)
        .env("DATABASE_URL", url)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run artemis-transfer admin")
}
