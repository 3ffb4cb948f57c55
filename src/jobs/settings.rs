//! The runtime settings (docs/settings.md): typed, with their defaults from `config/default.toml`, stored in the `setting` table and
//! read from it at runtime (the claim reads `concurrent_runs` there directly; the permit function reads
//! `node_calls_per_second`; the relay loads them before every batch).
//!
//! A change ([`change`]) is validated against the whole set, under a lock on every row, so two changes at once
//! cannot together make an invalid set. Values written as an operator types them (`10m`, `64MiB`, `a,b`,
//! `none`) are read by [`parse_value`], which knows each key's [`Kind`].

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::jobs::error::{DbContext, Error};
pub use crate::jobs::store::record::value_schema;
use crate::jobs::store::record::{self, SettingRow};

/// `[settings]`: the runtime settings' defaults, which `artemis-transfer migrate` writes where the database has no
/// value yet. At runtime the database's value counts: change it with `settings set` (docs/settings.md).
///
/// Every runtime setting. Field names are the keys of the `setting` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Messages per relay transaction; staging holds at most twice this. Read before every batch (a change is
    /// safe mid-run); a batch never exceeds the target address's duplicate-id cache.
    pub batch_size: u32,
    /// Ceiling on one run's rate, in messages a second (the next batch is due when the rate allows).
    pub messages_per_second: f64,
    /// Runs executing at once across every cluster and every replica (1..=64).
    pub concurrent_runs: u32,
    /// How full (in %) the target address or disk may get before a run waits.
    pub capacity_threshold_pct: u32,
    /// How long (seconds) a run waits for room before it stops.
    pub capacity_wait_secs: u64,
    /// Above this many messages, or of an unknown size, a run needs `--override-cap` and the source queue's name.
    pub safety_cap: u64,
    /// A batch also ends at this many body bytes (at least 1 MiB); bounds a worker's memory and spool.
    pub batch_bytes: u64,
    /// The per-node management rate limit shared with the rest of Studio (`transfer_node_permit`).
    pub node_calls_per_second: f64,
    /// One-by-one attempts before a message is proven poison.
    pub target_attempts: u32,
    /// Dead message queues, tried in order.
    pub dmq_chain: Vec<String>,
    /// Sends tried per dead message queue.
    pub dmq_send_attempts: u32,
    /// Seconds between those sends.
    pub dmq_send_interval_secs: u64,
    /// Expiry (seconds) given to a dead-lettered message; unset: none.
    #[serde(default)]
    pub dmq_time_to_live_secs: Option<u64>,
}

impl Settings {
    /// Checks the ranges the schema and the engine rely on.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, problem: &str| Err(Error::Setting { key: key.into(), problem: problem.into() });
        if !(1..=64).contains(&self.concurrent_runs) {
            return bad("concurrent_runs", "must be between 1 and 64");
        }
        if self.batch_size == 0 {
            return bad("batch_size", "must be at least 1");
        }
        if !self.messages_per_second.is_finite() || self.messages_per_second <= 0.0 {
            return bad("messages_per_second", "must be above 0");
        }
        if !self.node_calls_per_second.is_finite() || self.node_calls_per_second <= 0.0 {
            return bad("node_calls_per_second", "must be above 0");
        }
        if self.capacity_threshold_pct == 0 || self.capacity_threshold_pct > 100 {
            return bad("capacity_threshold_pct", "must be between 1 and 100");
        }
        if self.capacity_wait_secs == 0 {
            return bad(
                "capacity_wait_secs",
                "must be at least 1 second (0 would stop a run as soon as the target is full)",
            );
        }
        if self.batch_bytes < MIN_BATCH_BYTES {
            return bad("batch_bytes", "must be at least 1 MiB (1048576): smaller batches end after a message or two");
        }
        if self.target_attempts == 0 {
            return bad("target_attempts", "must be at least 1 (a message is tried once before it is proven poison)");
        }
        if self.dmq_chain.is_empty() {
            return bad("dmq_chain", "must name at least one queue");
        }
        if self.dmq_chain.iter().any(|q| q.trim().is_empty() || q.trim() != q) {
            return bad("dmq_chain", "a queue name is empty or starts or ends with a space");
        }
        if self.dmq_send_attempts == 0 {
            return bad("dmq_send_attempts", "must be at least 1 (each dead message queue is tried at least once)");
        }
        if self.dmq_time_to_live_secs == Some(0) {
            return bad("dmq_time_to_live_secs", "must be at least 1 second; use none for no expiry");
        }
        Ok(())
    }

    /// The settings as (key, value) pairs, for the `setting` table.
    pub fn to_pairs(&self) -> Vec<(String, serde_json::Value)> {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
            // A struct of plain fields always serialises to an object.
            _ => Vec::new(),
        }
    }
}

/// Writes `defaults` for every key that has no value yet; a value changed at runtime stays.
pub async fn seed(pool: &PgPool, defaults: &Settings, by: &str) -> Result<(), Error> {
    defaults.validate()?;
    let mut tx = pool.begin().await.db("begin")?;
    for (key, value) in defaults.to_pairs() {
        record::setting_seed(&mut *tx, &key, &value, by).await?;
    }
    tx.commit().await.db("commit")
}

/// The settings as the database holds them now.
pub async fn load(pool: &PgPool) -> Result<Settings, Error> {
    let pairs = record::setting_list(pool).await?;
    let object: serde_json::Map<_, _> = pairs.into_iter().collect();
    serde_json::from_value(serde_json::Value::Object(object))
        .map_err(|e| Error::Setting { key: "*".into(), problem: format!("{e} (run `artemis-transfer migrate`)") })
}

/// Every setting as the database holds it, with who changed it last and when, by key.
pub async fn rows(pool: &PgPool) -> Result<Vec<SettingRow>, Error> {
    record::setting_rows(pool).await
}

/// What [`change`] did.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(description = "A setting's change: its old and its new value.")]
pub struct Changed {
    /// The setting.
    pub key: String,
    /// Its value before (`None`: it had none, the database was never migrated with it).
    #[schema(schema_with = value_schema)]
    pub old: Option<serde_json::Value>,
    /// Its value now.
    #[schema(schema_with = value_schema)]
    pub new: serde_json::Value,
    /// Who had set the old value.
    pub old_by: Option<String>,
    /// When the old value was set.
    pub old_at: Option<DateTime<Utc>>,
    /// The new value's tag (also the answer's `ETag`): `If-Match` for the next change.
    pub etag: String,
}

/// Changes one setting to `value`, changed by `by`, if the whole set is still valid with it. Callers audit it
/// ([`crate::jobs::admin::set_setting`] does for operators).
pub async fn change(
    pool: &PgPool,
    key: &str,
    value: serde_json::Value,
    by: &str,
    if_match: Option<&str>,
) -> Result<Changed, Error> {
    kind_of(key)?;
    let mut tx = pool.begin().await.db("begin")?;
    let current = record::setting_lock(&mut *tx).await?;
    let old = current.iter().find(|row| row.key == key);
    if let (Some(expected), Some(old)) = (if_match, old) {
        if !tag_matches(expected, &old.etag) {
            return Err(Error::SettingChanged { key: key.into(), by: old.updated_by.clone(), at: old.updated_at });
        }
    }
    let mut object: serde_json::Map<_, _> = current.iter().map(|row| (row.key.clone(), row.value.clone())).collect();
    object.insert(key.to_owned(), value.clone());
    let candidate: Settings = serde_json::from_value(serde_json::Value::Object(object))
        .map_err(|e| Error::Setting { key: key.into(), problem: format!("{value} does not fit: {e}") })?;
    candidate.validate()?;
    let now = record::setting_set(&mut *tx, key, &value, by).await?;
    let changed = Changed {
        key: key.to_owned(),
        old: old.map(|row| row.value.clone()),
        new: value,
        old_by: old.map(|row| row.updated_by.clone()),
        old_at: old.map(|row| row.updated_at),
        etag: now.etag,
    };
    tx.commit().await.db("commit")?;
    Ok(changed)
}

/// Whether an `If-Match` value names `etag`: `*` (any current value), or a list of tags one of which is it. Weak
/// tags (`W/"…"`) never match: If-Match compares strongly (RFC 9110 §13.1.1).
fn tag_matches(if_match: &str, etag: &str) -> bool {
    let if_match = if_match.trim();
    if_match == "*" || if_match.split(',').map(str::trim).any(|tag| tag == etag)
}

/// Changes one setting (see [`change`]).
pub async fn set(pool: &PgPool, key: &str, value: serde_json::Value, by: &str) -> Result<(), Error> {
    change(pool, key, value, by, None).await.map(|_| ())
}

/// How a setting's value is written, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole number up to 4294967295.
    Count,
    /// A whole number up to 18446744073709551615.
    BigCount,
    /// A number with decimals allowed (`1000`, `2.5`).
    Rate,
    /// A percentage (`90` or `90%`).
    Percent,
    /// Bytes: a number, or one with `KiB`, `MiB` or `GiB` (`64MiB`).
    Bytes,
    /// Seconds: a number, or one with `s`, `m`, `h` or `d` (`10m`).
    Seconds,
    /// Seconds as for [`Kind::Seconds`], or `none`.
    OptionalSeconds,
    /// Queue names, comma-separated, in order.
    QueueList,
}

/// Every setting and its kind, in the order docs/settings.md lists them.
pub const KEYS: &[(&str, Kind)] = &[
    ("batch_size", Kind::Count),
    ("messages_per_second", Kind::Rate),
    ("concurrent_runs", Kind::Count),
    ("capacity_threshold_pct", Kind::Percent),
    ("capacity_wait_secs", Kind::Seconds),
    ("safety_cap", Kind::BigCount),
    ("batch_bytes", Kind::Bytes),
    ("node_calls_per_second", Kind::Rate),
    ("target_attempts", Kind::Count),
    ("dmq_chain", Kind::QueueList),
    ("dmq_send_attempts", Kind::Count),
    ("dmq_send_interval_secs", Kind::Seconds),
    ("dmq_time_to_live_secs", Kind::OptionalSeconds),
];

/// The smallest `batch_bytes`.
pub const MIN_BATCH_BYTES: u64 = 1 << 20;

/// The kind of setting `key`, or a refusal naming every known key.
pub fn kind_of(key: &str) -> Result<Kind, Error> {
    KEYS.iter().find(|(k, _)| *k == key).map(|(_, kind)| *kind).ok_or_else(|| Error::Setting {
        key: key.into(),
        problem: format!(
            "there is no such setting; the settings are: {}",
            KEYS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
        ),
    })
}

/// Reads `text` as a value of setting `key` (by its [`Kind`]); ranges are checked by [`Settings::validate`].
pub fn parse_value(key: &str, text: &str) -> Result<serde_json::Value, Error> {
    let kind = kind_of(key)?;
    let text = text.trim();
    let refuse = |expected: &str| Error::Setting { key: key.into(), problem: format!("{text:?} is not {expected}") };
    let value = match kind {
        Kind::Count => text.parse::<u32>().map(Into::into).map_err(|_| refuse("a whole number up to 4294967295"))?,
        Kind::BigCount => text.parse::<u64>().map(Into::into).map_err(|_| refuse("a whole number"))?,
        Kind::Percent => text
            .strip_suffix('%')
            .unwrap_or(text)
            .trim()
            .parse::<u32>()
            .map(Into::into)
            .map_err(|_| refuse("a whole percentage like 90"))?,
        Kind::Rate => {
            let rate = text.parse::<f64>().ok().filter(|r| r.is_finite()).ok_or_else(|| refuse("a number"))?;
            serde_json::Number::from_f64(rate).map(serde_json::Value::Number).ok_or_else(|| refuse("a number"))?
        }
        Kind::Bytes => parse_bytes(text).map(Into::into).ok_or_else(|| refuse("a size like 67108864 or 64MiB"))?,
        Kind::Seconds => {
            parse_duration(text).map(|d| d.as_secs().into()).map_err(|_| refuse("a duration like 600, 10m or 30s"))?
        }
        Kind::OptionalSeconds if text.eq_ignore_ascii_case("none") => serde_json::Value::Null,
        Kind::OptionalSeconds => {
            parse_duration(text).map(|d| d.as_secs().into()).map_err(|_| refuse("a duration like 3600, 1h or none"))?
        }
        Kind::QueueList => {
            let queues: Vec<&str> = text.split(',').map(str::trim).collect();
            if queues.iter().any(|q| q.is_empty()) {
                return Err(refuse("a comma-separated list of queue names (one is empty)"));
            }
            queues.into()
        }
    };
    Ok(value)
}

/// `64MiB`, `512KiB`, `1GiB` or a plain number of bytes; `None` when it is none of those or does not fit.
fn parse_bytes(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let unit_bytes: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(unit_bytes)
}

/// `90s`, `45m`, `12h`, `30d` (a bare number is seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("{s:?} is not a duration like 30d, 12h, 45m or 90s"))?;
    let secs = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use s, m, h or d)")),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn if_match_names_a_tag_strongly_or_any_value() {
        let tag = "\"0a1b2c\"";
        assert!(super::tag_matches(tag, tag));
        assert!(super::tag_matches(" \"ffff\", \"0a1b2c\" ", tag));
        assert!(super::tag_matches("*", tag));
        assert!(!super::tag_matches("W/\"0a1b2c\"", tag), "a weak tag never matches");
        assert!(!super::tag_matches("\"ffff\"", tag));
    }

    use super::*;

    fn sample() -> Settings {
        Settings {
            batch_size: 200,
            messages_per_second: 1000.0,
            concurrent_runs: 4,
            capacity_threshold_pct: 90,
            capacity_wait_secs: 600,
            safety_cap: 1000,
            batch_bytes: 64 << 20,
            node_calls_per_second: 20.0,
            target_attempts: 3,
            dmq_chain: vec!["studio.dmq.transfer".into()],
            dmq_send_attempts: 3,
            dmq_send_interval_secs: 5,
            dmq_time_to_live_secs: None,
        }
    }

    #[test]
    fn every_key_is_a_pair_and_none_is_null() {
        let pairs = sample().to_pairs();
        assert_eq!(pairs.len(), 13);
        let ttl = pairs.iter().find(|(k, _)| k == "dmq_time_to_live_secs").unwrap();
        assert!(ttl.1.is_null());
    }

    #[test]
    fn every_key_has_a_kind() {
        let mut keys: Vec<String> = sample().to_pairs().into_iter().map(|(k, _)| k).collect();
        keys.sort();
        let mut known: Vec<String> = KEYS.iter().map(|(k, _)| k.to_string()).collect();
        known.sort();
        assert_eq!(keys, known);
    }

    #[test]
    fn values_parse_by_the_kind_of_their_key() {
        let parse = |key, text| parse_value(key, text).unwrap();
        assert_eq!(parse("batch_size", "500"), serde_json::json!(500));
        assert_eq!(parse("messages_per_second", "2.5"), serde_json::json!(2.5));
        assert_eq!(parse("capacity_threshold_pct", "85%"), serde_json::json!(85));
        assert_eq!(parse("capacity_wait_secs", "10m"), serde_json::json!(600));
        assert_eq!(parse("dmq_send_interval_secs", "30s"), serde_json::json!(30));
        assert_eq!(parse("batch_bytes", "8MiB"), serde_json::json!(8 << 20));
        assert_eq!(parse("batch_bytes", "1048576"), serde_json::json!(1 << 20));
        assert_eq!(parse("dmq_chain", "a.dmq, b.dmq"), serde_json::json!(["a.dmq", "b.dmq"]));
        assert_eq!(parse("dmq_time_to_live_secs", "none"), serde_json::Value::Null);
        assert_eq!(parse("dmq_time_to_live_secs", "1h"), serde_json::json!(3600));
        for (key, bad) in [
            ("batch_size", "-1"),
            ("batch_size", "5000000000"),
            ("batch_size", "2.5"),
            ("messages_per_second", "fast"),
            ("messages_per_second", "inf"),
            ("capacity_wait_secs", "10 minutes"),
            ("batch_bytes", "64MB"),
            ("dmq_chain", "a,,b"),
            ("dmq_send_interval_secs", "none"),
        ] {
            assert!(matches!(parse_value(key, bad), Err(Error::Setting { .. })), "{key} = {bad:?}");
        }
    }

    #[test]
    fn an_unknown_key_is_refused_with_the_known_ones() {
        let err = parse_value("batch_sise", "5").unwrap_err().to_string();
        assert!(err.contains("no such setting") && err.contains("batch_size, messages_per_second"), "{err}");
    }

    #[test]
    fn ranges_the_engine_relies_on_are_checked() {
        let refused = |change: fn(&mut Settings), key: &str| {
            let mut s = sample();
            change(&mut s);
            assert!(matches!(s.validate(), Err(Error::Setting { key: k, .. }) if k == key), "{key}");
        };
        refused(|s| s.capacity_wait_secs = 0, "capacity_wait_secs");
        refused(|s| s.batch_bytes = MIN_BATCH_BYTES - 1, "batch_bytes");
        refused(|s| s.target_attempts = 0, "target_attempts");
        refused(|s| s.dmq_send_attempts = 0, "dmq_send_attempts");
        refused(|s| s.dmq_chain = vec![" ".into()], "dmq_chain");
        refused(|s| s.dmq_time_to_live_secs = Some(0), "dmq_time_to_live_secs");
        refused(|s| s.messages_per_second = f64::INFINITY, "messages_per_second");
        let mut s = sample();
        s.batch_bytes = MIN_BATCH_BYTES;
        s.dmq_time_to_live_secs = Some(1);
        assert!(s.validate().is_ok());
    }

    #[test]
    fn the_cap_must_fit_the_slot_table() {
        let mut s = sample();
        s.concurrent_runs = 65;
        assert!(matches!(s.validate(), Err(Error::Setting { key, .. }) if key == "concurrent_runs"));
        s.concurrent_runs = 64;
        assert!(s.validate().is_ok());
    }
}
