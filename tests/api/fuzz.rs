//! schemathesis (PyPI, 4.x) against the served `/openapi.json`: every operation, with its examples, the coverage
//! phase's edge values, generated positive and negative data, and the stateful phase's links — no server error,
//! no answer that breaks its declared schema, content type or headers, no undeclared status.
//!
//! `st` is `$SCHEMATHESIS`, else `target/schemathesis/bin/st` (where `scripts/testbed up` installs it), else `st` on
//! PATH.
//! A missing `st` fails the test, saying how to install it, unless `ARTEMIS_TRANSFER_SKIP_SCHEMATHESIS` is set
//! (for a machine that cannot reach PyPI; CI never sets it).

use super::*;

/// How many cases per operation and phase: the whole run stays within about two minutes on two cores.
const MAX_EXAMPLES: &str = "40";

/// Where `st` is, if anywhere.
fn schemathesis() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SCHEMATHESIS") {
        return Some(PathBuf::from(path));
    }
    let installed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/schemathesis/bin/st");
    if installed.exists() {
        return Some(installed);
    }
    let on_path = Command::new("st").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    on_path.is_ok_and(|s| s.success()).then(|| PathBuf::from("st"))
}

#[tokio::test]
async fn schemathesis_finds_no_server_error_schema_violation_or_undeclared_status() {
    let Some(st) = schemathesis() else {
        if std::env::var_os("ARTEMIS_TRANSFER_SKIP_SCHEMATHESIS").is_some() {
            eprintln!("SKIPPED: schemathesis is not installed and ARTEMIS_TRANSFER_SKIP_SCHEMATHESIS is set");
            return;
        }
        panic!(
            "schemathesis (`st`) is not installed: python3 -m venv target/schemathesis && \
             target/schemathesis/bin/pip install 'schemathesis==4.32.5' (or set SCHEMATHESIS to its path; \
             ARTEMIS_TRANSFER_SKIP_SCHEMATHESIS=1 skips this test where PyPI cannot be reached)"
        );
    };
    let world = World::new("api_fuzz", &[]).await;
    // The fuzzer sends as fast as it can: limits it never meets, so every case reaches the API's logic.
    let unlimited = rate_limits("100000", "100000");
    let api = Api::start_with(&world, &unlimited).await;
    let reports = world.log_dir.join("schemathesis");
    let started = std::time::Instant::now();
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/api/schemathesis.toml");
    let output = tokio::process::Command::new(&st)
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{}/openapi.json", api.base))
        .args(["--checks", "all", "--max-examples", MAX_EXAMPLES, "--seed", "16", "--workers", "2"])
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--report", "junit,ndjson", "--report-dir"])
        .arg(&reports)
        .args(["--output-truncate", "false", "--no-color"])
        .kill_on_drop(true)
        .output()
        .await
        .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("schemathesis took {:?}; reports in {}\n{stdout}\n{stderr}", started.elapsed(), reports.display());
    assert!(output.status.success(), "schemathesis found failures (above; reports in {})", reports.display());
    api.assert_no_secret();
}
