//! The test bed's `west` cluster as the tests that fail it over see it: `west-1` (primary) and `west-1-backup`
//! (shared store). Only test binaries of their own may use this (cargo runs binaries one after another): a
//! failover stops a broker every other test shares. Whatever happens, [`RestoreTestBed`] puts the cluster back —
//! `west-1` live, `west-1-backup` passive — with `scripts/testbed up`.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use testbed::jolokia::Jolokia;
use testbed::TestBed;

use super::wait_for;

fn testbed_script() -> std::path::PathBuf {
    testbed::config::repo_root().join("scripts").join("testbed")
}

/// `scripts/testbed status --json`.
pub fn status() -> Value {
    let out = Command::new(testbed_script()).args(["status", "--json"]).output().expect("run scripts/testbed status");
    assert!(out.status.success(), "scripts/testbed status failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("scripts/testbed status --json prints JSON")
}

/// One node's entry in [`status`].
pub fn node_status<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["nodes"].as_array().into_iter().flatten().find(|n| n["name"] == name).expect("the node is in the status")
}

/// `west-1` live and `west-1-backup` passive, as `scripts/testbed up` leaves them; otherwise what is wrong.
pub fn west_as_it_should_be(status: &Value) -> Result<(), String> {
    let (primary, backup) = (node_status(status, "west-1"), node_status(status, "west-1-backup"));
    let ok = primary["Active"] == json!(true)
        && primary["Backup"] == json!(false)
        && backup["Active"] == json!(false)
        && backup["Backup"] == json!(true)
        && primary["pid"].is_u64()
        && backup["pid"].is_u64();
    if ok {
        Ok(())
    } else {
        Err(format!("west-1: {primary}; west-1-backup: {backup}"))
    }
}

/// The process id of whichever west broker serves now (`Active`), and its node's name.
pub fn live_west() -> Option<(u32, &'static str)> {
    let now = status();
    ["west-1", "west-1-backup"].into_iter().find_map(|name| {
        let node = node_status(&now, name);
        (node["Active"] == json!(true)).then(|| node["pid"].as_u64().map(|pid| (pid as u32, name))).flatten()
    })
}

/// Kills west-1's primary (SIGKILL) and waits until west-1-backup is live; returns how long that took (s).
pub async fn fail_west_over(bed: &TestBed, primary_pid: u64) -> f64 {
    let killed = Instant::now();
    let kill = Command::new("kill").args(["-KILL", &primary_pid.to_string()]).status().expect("run kill");
    assert!(kill.success(), "kill -KILL {primary_pid} (west-1) failed");
    let backup = Jolokia::new(bed.node("west-1-backup"));
    wait_for("west-1-backup to become live", Duration::from_secs(120), || async {
        backup.broker_state().await.ok().filter(|s| s["Active"] == json!(true)).map(|_| ())
    })
    .await;
    killed.elapsed().as_secs_f64()
}

/// Puts the test bed back (`scripts/testbed up`, idempotent) when dropped, unless that was already done. Also
/// resumes a west broker a test left frozen (SIGSTOP) first.
pub struct RestoreTestBed {
    restored: bool,
}

impl RestoreTestBed {
    /// Armed: from here on the test bed is put back whatever happens.
    pub fn armed() -> RestoreTestBed {
        RestoreTestBed { restored: false }
    }

    /// Runs `scripts/testbed up` and checks west is as it should be; returns how long it took. When that fails
    /// (a broker that cannot start while a broken one holds the shared store's lock), both west brokers are killed
    /// and `up` runs once more.
    pub fn restore(&mut self) -> Result<Duration, String> {
        self.restored = true;
        let started = Instant::now();
        if let Err(first) = Self::up() {
            eprintln!("restoring the test bed: {first}; killing both west brokers and trying once more");
            let now = status();
            for name in ["west-1", "west-1-backup"] {
                if let Some(pid) = node_status(&now, name)["pid"].as_u64() {
                    let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                }
            }
            std::thread::sleep(Duration::from_secs(2));
            Self::up()?;
        }
        Ok(started.elapsed())
    }

    fn up() -> Result<(), String> {
        let now = status();
        for name in ["west-1", "west-1-backup"] {
            if let Some(pid) = node_status(&now, name)["pid"].as_u64() {
                let _ = Command::new("kill").args(["-CONT", &pid.to_string()]).status();
            }
        }
        let out = Command::new(testbed_script()).arg("up").output().map_err(|e| format!("scripts/testbed up: {e}"))?;
        if !out.status.success() {
            return Err(format!("scripts/testbed up failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        west_as_it_should_be(&status())
    }
}

impl Drop for RestoreTestBed {
    fn drop(&mut self) {
        if !self.restored {
            match self.restore() {
                Ok(took) => eprintln!("test bed restored after a failure in {took:?}"),
                Err(e) => eprintln!("COULD NOT RESTORE THE TEST BED: {e}; run scripts/testbed up"),
            }
        }
    }
}
