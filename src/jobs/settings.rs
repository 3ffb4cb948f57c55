//! SPEC §8 settings: typed, with their defaults from `config/default.toml`, stored in the `setting` table and
//! read from it at runtime (the claim reads `concurrent_runs` there directly; the permit function reads
//! `node_calls_per_second`).

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::jobs::error::{DbContext, Error};
use crate::jobs::store::record;

/// Every SPEC §8 setting. Field names are the keys of the `setting` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Messages per relay transaction; staging holds at most twice this.
    pub batch_size: u32,
    /// Ceiling on one run's rate (durable pacing via `run_at`).
    pub messages_per_second: f64,
    /// Runs executing at once across every cluster and every replica (1..=64).
    pub concurrent_runs: u32,
    /// How full the target address or disk may get before a run waits.
    pub capacity_threshold_pct: u32,
    /// How long a run waits for room before it stops.
    pub capacity_wait_secs: u64,
    /// Above this a run needs an explicit override.
    pub safety_cap: u64,
    /// A batch also ends at this many body bytes.
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
    /// Expiry given to a dead-lettered message; `None` = none.
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
        if self.messages_per_second.is_nan() || self.messages_per_second <= 0.0 {
            return bad("messages_per_second", "must be above 0");
        }
        if self.node_calls_per_second.is_nan() || self.node_calls_per_second <= 0.0 {
            return bad("node_calls_per_second", "must be above 0");
        }
        if self.capacity_threshold_pct == 0 || self.capacity_threshold_pct > 100 {
            return bad("capacity_threshold_pct", "must be between 1 and 100");
        }
        if self.dmq_chain.is_empty() {
            return bad("dmq_chain", "must name at least one queue");
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

/// Changes one setting (audited by the caller's admin command).
pub async fn set(pool: &PgPool, key: &str, value: serde_json::Value, by: &str) -> Result<(), Error> {
    let mut current = load(pool).await?;
    let mut object = serde_json::to_value(&current).unwrap_or_default();
    object[key] = value.clone();
    current = serde_json::from_value(object).map_err(|e| Error::Setting { key: key.into(), problem: e.to_string() })?;
    current.validate()?;
    record::setting_set(pool, key, &value, by).await
}

#[cfg(test)]
mod tests {
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
    fn the_cap_must_fit_the_slot_table() {
        let mut s = sample();
        s.concurrent_runs = 65;
        assert!(matches!(s.validate(), Err(Error::Setting { key, .. }) if key == "concurrent_runs"));
        s.concurrent_runs = 64;
        assert!(s.validate().is_ok());
    }
}
