//! `artemis-transfer settings` as the real binary: a change shows in `settings show` and in what the engine
//! loads; a bad value or an unknown key is refused in words and changes nothing; every change and every
//! refusal leaves an audit row naming the operator, with the old and the new value.

use std::process::{Command, Output};

use artemis_transfer::jobs::settings;
use artemis_transfer::jobs::store::record::{self, AuditRow};
use serde_json::{json, Value};
use sqlx::PgPool;

use crate::support::{self, process};

/// Changing a setting needs admin on `*` (docs/permissions.md); the test database gives it to the admin tests' actor.
const ACTOR: &str = support::ADMIN_ACTOR;

fn settings_cmd(url: &str, args: &[&str]) -> Output {
    Command::new(process::binary())
        .arg("settings")
        .args(args)
        .env("DATABASE_URL", url)
        .env("ARTEMIS_TRANSFER_OPERATOR", ACTOR)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run artemis-transfer settings")
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "exit {}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The command failed; its error output.
fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "expected a refusal, got: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `settings show --json`, by key.
fn shown(url: &str) -> serde_json::Map<String, Value> {
    ok(&settings_cmd(url, &["show", "--json"]))
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            (row["key"].as_str().unwrap().to_owned(), row)
        })
        .collect()
}

async fn setting_audit(pool: &PgPool) -> Vec<AuditRow> {
    let mut rows: Vec<_> =
        record::audit_list(pool, 100).await.unwrap().into_iter().filter(|r| r.action == "settings.set").collect();
    rows.reverse();
    rows
}

#[tokio::test]
async fn settings_set_shows_and_audits_a_change() {
    let db = support::db("settings_set").await;
    let text = ok(&settings_cmd(&db.url, &[]));
    let line = text.lines().find(|l| l.starts_with("batch_size ")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(" 200 ") && line.contains("test"), "the seeded default, seeded by `test`: {line}");
    assert_eq!(text.lines().count(), 1 + settings::KEYS.len(), "a header and every setting:\n{text}");

    let out = ok(&settings_cmd(&db.url, &["set", "batch_size", "500"]));
    assert!(out.starts_with("batch_size: 200 -> 500 (200 was set by test at "), "{out}");
    let rows = shown(&db.url);
    assert_eq!(rows["batch_size"]["value"], 500);
    assert_eq!(rows["batch_size"]["updated_by"], ACTOR);
    assert_eq!(rows["batch_bytes"]["updated_by"], "test", "the other settings are untouched");
    let text = ok(&settings_cmd(&db.url, &["show"]));
    let line = text.lines().find(|l| l.starts_with("batch_size ")).unwrap();
    assert!(line.contains(" 500 ") && line.contains(ACTOR), "{line}");
    // What the relay loads before its next batch.
    assert_eq!(settings::load(&db.pool).await.unwrap().batch_size, 500);

    // Values as an operator writes them, by the key's kind.
    ok(&settings_cmd(&db.url, &["set", "capacity_wait_secs", "10m"]));
    ok(&settings_cmd(&db.url, &["set", "batch_bytes", "8MiB"]));
    ok(&settings_cmd(&db.url, &["set", "dmq_chain", "first.dmq, second.dmq"]));
    ok(&settings_cmd(&db.url, &["set", "dmq_time_to_live_secs", "1h"]));
    let loaded = settings::load(&db.pool).await.unwrap();
    assert_eq!(loaded.capacity_wait_secs, 600);
    assert_eq!(loaded.batch_bytes, 8 << 20);
    assert_eq!(loaded.dmq_chain, ["first.dmq", "second.dmq"]);
    assert_eq!(loaded.dmq_time_to_live_secs, Some(3600));
    ok(&settings_cmd(&db.url, &["set", "dmq_time_to_live_secs", "none"]));
    assert_eq!(settings::load(&db.pool).await.unwrap().dmq_time_to_live_secs, None);
    let text = ok(&settings_cmd(&db.url, &["show"]));
    assert!(text.lines().any(|l| l.starts_with("dmq_chain ") && l.contains("first.dmq,second.dmq")), "{text}");
    assert!(text.lines().any(|l| l.starts_with("dmq_time_to_live_secs ") && l.contains(" none ")), "{text}");

    let trail = setting_audit(&db.pool).await;
    assert_eq!(trail.len(), 6);
    assert!(trail.iter().all(|r| r.actor == ACTOR && r.outcome == "ok"), "{trail:?}");
    assert_eq!(trail[0].target, "setting batch_size");
    assert_eq!((&trail[0].detail["old"], &trail[0].detail["new"]), (&json!(200), &json!(500)));
    assert_eq!((&trail[5].detail["old"], &trail[5].detail["new"]), (&json!(3600), &Value::Null));
}

#[tokio::test]
async fn a_bad_value_or_an_unknown_key_is_refused_in_words_and_changes_nothing() {
    let db = support::db("settings_refused").await;
    let before = settings::rows(&db.pool).await.unwrap();

    let cases: [(&[&str], &[&str]); 6] = [
        (&["set", "batch_size", "0"], &["batch_size", "at least 1"]),
        (&["set", "batch_size", "-5"], &["batch_size", "not a whole number"]),
        (&["set", "batch_bytes", "1000"], &["batch_bytes", "at least 1 MiB"]),
        (&["set", "concurrent_runs", "65"], &["concurrent_runs", "between 1 and 64"]),
        (&["set", "capacity_wait_secs", "soon"], &["capacity_wait_secs", "a duration like"]),
        (&["set", "batch_sise", "5"], &["no such setting", "batch_size, messages_per_second"]),
    ];
    for (args, words) in cases {
        let err = refused(&settings_cmd(&db.url, args));
        for word in words {
            assert!(err.contains(word), "{args:?}: {word:?} missing from: {err}");
        }
    }
    let after = settings::rows(&db.pool).await.unwrap();
    let values = |rows: &[record::SettingRow]| {
        rows.iter().map(|r| (r.key.clone(), r.value.clone(), r.updated_by.clone())).collect::<Vec<_>>()
    };
    assert_eq!(values(&after), values(&before), "nothing changed");

    let trail = setting_audit(&db.pool).await;
    assert_eq!(trail.len(), cases.len(), "every refusal is audited: {trail:?}");
    for (row, (args, _)) in trail.iter().zip(cases) {
        assert_eq!(row.outcome, "refused", "{args:?}");
        assert_eq!(row.actor, ACTOR);
        assert_eq!(row.target, format!("setting {}", args[1]));
        assert_eq!(row.detail["text"], args[2]);
        assert!(row.detail["error"].as_str().is_some_and(|e| !e.is_empty()), "{row:?}");
    }
}
