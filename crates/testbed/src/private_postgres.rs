//! A throwaway Postgres cluster of a test's own, for tests that restart or crash Postgres: the shared test
//! bed's Postgres serves every other test at the same time and must never be restarted.
//!
//! Same binaries and OS user as the test bed (`config/testbed.toml` `[postgres]`), fsync on, trust
//! authentication on 127.0.0.1 only, a free port, a folder under the test bed's. Stopped and removed on drop.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::config::{repo_root, TestBed};

/// How to stop a private cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Disconnect clients, shut down cleanly.
    Fast,
    /// Kill the server processes: what a crash or power loss leaves (recovery replays the WAL on start).
    Immediate,
}

impl StopMode {
    fn as_arg(self) -> &'static str {
        match self {
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        }
    }
}

/// A running private Postgres cluster.
#[derive(Debug)]
pub struct PrivatePostgres {
    base: PathBuf,
    port: u16,
    bin_dir: PathBuf,
    os_user: String,
    /// `postgres://transfer@127.0.0.1:<port>/postgres`.
    pub url: String,
}

impl PrivatePostgres {
    /// Creates and starts a cluster; `label` (the test's name) names its folder. Panics, saying why, if it
    /// cannot (the test bed's Postgres binaries are installed by `scripts/testbed up`).
    pub async fn start(label: &str) -> PrivatePostgres {
        let bed = TestBed::require().await;
        let (bin_dir, os_user) = postgres_tools();
        let port = free_port();
        let label: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).take(40).collect();
        let base = bed.dir.join("private-postgres").join(format!("{label}-{port}"));
        if base.exists() {
            std::fs::remove_dir_all(&base).expect("remove a stale private cluster folder");
        }
        std::fs::create_dir_all(base.join("run")).expect("create the private cluster folder");
        let cluster = PrivatePostgres {
            url: format!("postgres://transfer@127.0.0.1:{port}/postgres"),
            base,
            port,
            bin_dir,
            os_user,
        };
        cluster.chown();
        let data = cluster.data();
        cluster.pg(&["initdb", "-D", &data, "-U", "transfer", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8"]);
        let conf = format!(
            "\n# private test cluster\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
             max_connections = 60\nfsync = on\n",
            cluster.base.join("run").display()
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(Path::new(&data).join("postgresql.conf"))
            .and_then(|mut f| std::io::Write::write_all(&mut f, conf.as_bytes()))
            .expect("configure the private cluster");
        cluster.start_server();
        cluster
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (clients see their connections drop).
    pub fn stop(&self, mode: StopMode) {
        let data = self.data();
        self.pg(&["pg_ctl", "-D", &data, "-m", mode.as_arg(), "-w", "-t", "60", "stop"]);
    }

    /// Starts the server again after [`PrivatePostgres::stop`].
    pub fn start_server(&self) {
        let (data, log) = (self.data(), self.base.join("postgres.log").display().to_string());
        self.pg(&["pg_ctl", "-D", &data, "-l", &log, "-w", "-t", "60", "start"]);
    }

    fn data(&self) -> String {
        self.base.join("data").display().to_string()
    }

    fn chown(&self) {
        if is_root() {
            run(Command::new("chown").arg("-R").arg(format!("{}:", self.os_user)).arg(&self.base));
            // The OS user must reach its folder through the checkout, which root may own.
            for dir in self.base.ancestors() {
                let _ = Command::new("chmod").arg("o+x").arg(dir).output();
                if dir == repo_root().parent().unwrap_or(Path::new("/")) {
                    break;
                }
            }
        }
    }

    /// Runs a Postgres binary as the OS user (initdb and pg_ctl refuse root).
    fn pg(&self, args: &[&str]) -> Output {
        let bin = self.bin_dir.join(args[0]);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", &self.os_user, "--"]).arg(bin);
            c
        } else {
            Command::new(bin)
        };
        cmd.args(&args[1..]);
        run(&mut cmd)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data();
        let bin = self.bin_dir.join("pg_ctl");
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", &self.os_user, "--"]).arg(bin);
            c
        } else {
            Command::new(bin)
        };
        let _ = cmd.args(["-D", &data, "-m", "immediate", "-w", "stop"]).output();
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

fn run(cmd: &mut Command) -> Output {
    let output = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        output.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// The test bed's Postgres program `name` (`pgbench`, `psql`, …): the binaries of `config/testbed.toml`
/// `[postgres] bin_dir`, the ones the test bed's server runs from.
pub fn postgres_program(name: &str) -> PathBuf {
    postgres_tools().0.join(name)
}

/// `[postgres] bin_dir` and `os_user` from `config/testbed.toml`.
fn postgres_tools() -> (PathBuf, String) {
    let text = std::fs::read_to_string(repo_root().join("config/testbed.toml")).expect("read config/testbed.toml");
    let config: toml::Table = text.parse().expect("config/testbed.toml parses");
    let pg = config.get("postgres").and_then(|v| v.as_table()).expect("config/testbed.toml has [postgres]");
    let get = |key: &str| {
        pg.get(key).and_then(|v| v.as_str()).unwrap_or_else(|| panic!("[postgres] {key} is missing")).to_owned()
    };
    (PathBuf::from(get("bin_dir")), get("os_user"))
}

/// A port nobody listens on now.
fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    socket.local_addr().expect("its address").port()
}
