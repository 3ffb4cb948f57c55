//! The deployment files docs/deployment.md ships: the systemd units in `config/systemd/`. Each unit's command line
//! is parsed by the binary's own command-line definition, every variable it sets is one the configuration
//! reference names, and `systemd-analyze verify` (where this machine has it) finds nothing wrong with the unit
//! run against the built binary.

use std::path::{Path, PathBuf};

use artemis_transfer::cli::Cli;
use clap::Parser;

/// The units, from the repository's root.
const UNITS: &[&str] =
    &["config/systemd/artemis-transfer-worker.service", "config/systemd/artemis-transfer-serve.service"];

/// Where the units say the binary is installed.
const INSTALLED: &str = "/usr/local/bin/artemis-transfer";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The values of the unit's `key=` lines.
fn values<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines().filter_map(|line| line.strip_prefix(key)?.strip_prefix('=')).collect()
}

#[test]
fn each_unit_starts_a_command_the_binary_knows_with_variables_the_reference_names() {
    let reference = std::fs::read_to_string(repository().join("docs/configuration.md")).unwrap();
    for path in UNITS {
        let unit = std::fs::read_to_string(repository().join(path)).unwrap();
        let exec = values(&unit, "ExecStart");
        assert_eq!(exec.len(), 1, "{path}: one ExecStart");
        let words = shlex::split(exec[0]).unwrap();
        assert_eq!(words[0], INSTALLED, "{path}");
        if let Err(e) = Cli::try_parse_from(&words) {
            panic!("{path}: {} does not parse:\n{e}", exec[0]);
        }
        for assignment in values(&unit, "Environment") {
            let name = assignment.split('=').next().unwrap();
            assert!(
                reference.contains(&format!("`{name}`")),
                "{path} sets {name}, which docs/configuration.md does not name"
            );
        }
        assert!(values(&unit, "EnvironmentFile").iter().all(|f| f.starts_with("/etc/artemis-transfer/")), "{path}");
    }
}

/// `systemd-analyze verify` of `unit`, the binary it starts being the one built; `None` without systemd-analyze.
fn verify(unit: &Path, dir: &Path) -> Option<std::process::Output> {
    let text = std::fs::read_to_string(unit).unwrap().replace(INSTALLED, env!("CARGO_BIN_EXE_artemis-transfer"));
    let copy = dir.join(unit.file_name().unwrap());
    std::fs::write(&copy, text).unwrap();
    std::process::Command::new("systemd-analyze").args(["verify", "--man=no"]).arg(&copy).output().ok()
}

#[test]
fn systemd_finds_nothing_wrong_with_the_units() {
    let dir = std::env::temp_dir().join(testbed::unique_name("units"));
    std::fs::create_dir_all(&dir).unwrap();
    for path in UNITS {
        let Some(out) = verify(&repository().join(path), &dir) else {
            println!("skipped: systemd-analyze is not on this machine's PATH");
            break;
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.trim().is_empty(), "systemd-analyze verify {path}:\n{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every metric `/metrics` serves (each `artemis_transfer_…` name in `src/api/ops.rs`) is in docs/deployment.md.
#[test]
fn the_deployment_guide_lists_every_metric() {
    let source = std::fs::read_to_string(repository().join("src/api/ops.rs")).unwrap();
    let guide = std::fs::read_to_string(repository().join("docs/deployment.md")).unwrap();
    let names = regex::Regex::new(r"artemis_transfer_[a-z_]+").unwrap();
    let mut seen = 0;
    for name in names.find_iter(&source).map(|m| m.as_str()) {
        assert!(guide.contains(&format!("`{name}")), "docs/deployment.md does not list the metric {name}");
        seen += 1;
    }
    assert!(seen >= 6, "{seen}");
}

/// A worker whose spool directory others may write in refuses to start, saying which directory, why, and which key
/// to set — before it claims anything.
#[tokio::test]
async fn a_worker_refuses_a_spool_directory_others_may_write_in() {
    use std::os::unix::fs::PermissionsExt;
    let database_url = testbed::postgres::fresh_database("spool_refused").await;
    let dir = std::env::temp_dir().join(testbed::unique_name("shared_spool"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let binary = env!("CARGO_BIN_EXE_artemis-transfer");
    let migrated =
        std::process::Command::new(binary).arg("migrate").env("DATABASE_URL", &database_url).output().unwrap();
    assert!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    let out = tokio::process::Command::new(binary)
        .arg("worker")
        .env("DATABASE_URL", &database_url)
        .env("ARTEMIS_TRANSFER__WORKER__SPOOL_DIR", &dir)
        .env_remove("ARTEMIS_TRANSFER_CONFIG")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(30), out).await.expect("it stops at once").unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for words in
        [dir.display().to_string(), "may be written by others".into(), "ARTEMIS_TRANSFER__WORKER__SPOOL_DIR".into()]
    {
        assert!(stderr.contains(&words), "{words:?} not in:\n{stderr}");
    }
}
