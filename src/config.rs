//! Process configuration: `config/default.toml` (built in), optionally a file laid over it, then environment
//! variables `ARTEMIS_TRANSFER__<SECTION>__<KEY>`; the database URL from `DATABASE_URL` alone.
//!
//! Loading is split so it can be tested without touching the process environment: [`Config::from_sources`]
//! is pure; [`Config::load`] feeds it the real file and environment. The URL's password never reaches
//! `Debug` output.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::jobs::executor::ExecutorConfig;
use crate::jobs::prune::Retention;
use crate::jobs::retry::RetryPolicy;
use crate::jobs::settings::Settings;

pub mod reference;

/// The built-in defaults.
const DEFAULTS: &str = include_str!("../config/default.toml");

/// Prefix of the environment variables that override single values.
const ENV_PREFIX: &str = "ARTEMIS_TRANSFER__";

/// What went wrong reading the configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A source is not valid TOML.
    #[error("{source_name} is not valid TOML")]
    Parse {
        /// Which source.
        source_name: String,
        /// Why.
        #[source]
        source: toml::de::Error,
    },
    /// The merged configuration does not fit the expected shape (unknown key, wrong type).
    #[error("invalid configuration")]
    Shape(#[source] toml::de::Error),
    /// A value is out of range.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// `DATABASE_URL` is not set.
    #[error("DATABASE_URL is not set")]
    NoDatabaseUrl,
}

/// A database URL whose password `Debug` hides.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> DatabaseUrl {
        DatabaseUrl(url.into())
    }

    /// The URL itself, for connecting.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // postgres://user:secret@host/db → postgres://user:***@host/db
        let redacted = match (self.0.find("://"), self.0.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                let userinfo = &self.0[scheme + 3..at];
                match userinfo.find(':') {
                    Some(colon) => format!("{}{}:***{}", &self.0[..scheme + 3], &userinfo[..colon], &self.0[at..]),
                    None => self.0.clone(),
                }
            }
            _ => self.0.clone(),
        };
        f.debug_tuple("DatabaseUrl").field(&redacted).finish()
    }
}

/// `[database]`: the Postgres pool of each process. The URL comes from `DATABASE_URL` alone.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// From `DATABASE_URL`, never from a file.
    #[serde(skip)]
    #[schema(ignore)]
    pub url: Option<DatabaseUrl>,
    /// The most connections a process opens; a worker opens up to `worker.concurrency + 3` if that is more (one per
    /// job in flight, the claim loop, LISTEN, one spare). Connections are opened as needed.
    pub max_connections: u32,
    /// How long a process waits for a connection (at start, and from its pool) before it gives up.
    pub connect_timeout_secs: u64,
}

/// `[worker]`: how an `artemis-transfer worker` process claims and runs jobs.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerConfig {
    /// Jobs one worker process runs at once (`worker --concurrency` overrides it).
    pub concurrency: usize,
    /// How long a claim is good for without a heartbeat: a worker that dies is replaced after at most this long.
    pub lease_secs: f64,
    /// How often a running job renews its lease (below `lease_secs`).
    pub heartbeat_secs: f64,
    /// How long one job may run before it is stopped and retried, an attempt spent (a handler that hangs while
    /// its worker lives on would otherwise keep its lease by heartbeating). Above `lease_secs`; a copy's time slice
    /// ends by half of it.
    pub job_deadline_secs: f64,
    /// How often a worker looks for due jobs when no notification wakes it sooner.
    pub poll_interval_ms: u64,
    /// The pause after a claim that found a due job another worker was taking.
    pub claim_cooldown_ms: u64,
    /// On SIGTERM: stop claiming, let jobs in flight finish for at most this long, then exit (jobs still running
    /// are left to their lease).
    pub shutdown_timeout_secs: u64,
    /// Where large message bodies are spooled: a directory of the worker's user alone (made with mode 0700 when
    /// missing; refused when others may write in it), shared by the workers of a host. Unset:
    /// `$TMPDIR/artemis-transfer-spool-<uid>`. See docs/deployment.md, "The spool directory".
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub spool_dir: Option<PathBuf>,
}

/// `[retry]`: how a job that failed for a transient reason (a broker or the database not answering) is retried.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Attempts of one job before its run is Interrupted (claims that expired count, so a job that kills its
    /// workers ends instead of killing every replica).
    pub max_attempts: i32,
    /// The first backoff between attempts.
    pub min_delay_ms: u64,
    /// The longest backoff, before jitter.
    pub max_delay_secs: u64,
    /// How much the backoff grows per attempt.
    pub factor: f32,
    /// Whether a random extra wait is added to each backoff.
    pub jitter: bool,
}

/// `[retention]`: every worker prunes ended runs with their jobs and events, at start and then periodically, one
/// replica at a time. Never pruned: live runs, and stopped/interrupted/failed runs that still hold a staging queue.
/// Audit rows go only after `audit_days`. A prune that deleted something writes an audit row under the worker's
/// name, and a worker being stopped lets a prune in progress end (up to 10 s) so that row is written.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionConfig {
    /// Runs that ended more than this many days ago are pruned (unless they hold staging).
    pub finished_runs_days: u32,
    /// How often each worker process prunes.
    pub prune_interval_secs: u64,
    /// Audit rows older than this many days are pruned by the same schedule.
    pub audit_days: u32,
}

/// `[api]`: `artemis-transfer serve`, the HTTP API. Its bearer tokens come from the environment, never from here.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Where `serve` listens, host:port (`serve --listen` overrides it). Plain HTTP beyond loopback is refused unless `plain_http_behind_proxy`.
    pub listen: String,
    /// The certificate chain (PEM, the server's own first) `serve` presents; with `tls_key` the API is served over
    /// TLS, and with neither over plain HTTP (`serve --tls-cert`).
    #[schema(value_type = Option<String>)]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1; `serve --tls-key`).
    #[schema(value_type = Option<String>)]
    pub tls_key: Option<PathBuf>,
    /// How long a preview made through the API may be executed.
    pub preview_valid_secs: u64,
    /// How often an event stream looks for news.
    pub events_poll_ms: u64,
    /// Requests a second each caller — a service and the operator it acts for — may make, on average (a token bucket
    /// per caller, per replica; over it: 429 with Retry-After). /health, /ready, /metrics and /openapi.json are not
    /// limited.
    pub rate_per_second: f64,
    /// Requests a caller (service and operator) may make at once after a quiet spell.
    pub rate_burst: u32,
    /// Requests a second without a known token, per client address: the peer's, or the one a trusted proxy names in
    /// X-Forwarded-For (`trusted_proxies`). A known token is never charged here.
    pub unidentified_per_second: f64,
    /// Requests without a known token a client address may make at once.
    pub unidentified_burst: u32,
    /// A request not answered within this long is answered 503 request-timeout (event streams excepted).
    pub request_timeout_ms: u64,
    /// How often the tokens file (ARTEMIS_TRANSFER_API_TOKENS_FILE) is looked at for a change; SIGHUP reads it at
    /// once.
    pub tokens_poll_ms: u64,
    /// The proxies (addresses or ranges) whose `X-Forwarded-For` names the client; from any other peer it is ignored.
    pub trusted_proxies: Vec<String>,
    /// The event streams one caller (a service and its operator) may hold open at once.
    pub streams_per_caller: usize,
    /// Plain HTTP beyond loopback is allowed only when this says a proxy in front terminates TLS.
    pub plain_http_behind_proxy: bool,
    /// The header in which a reverse proxy that has authenticated the person names the operator (e.g.
    /// `X-Forwarded-User`): the console signs them in without a token (ADR 0021). Empty: off.
    pub console_operator_header: String,
    /// The proxies (addresses or ranges) whose `console_operator_header` is believed; from any other peer it is
    /// ignored. Needed with the header.
    pub console_operator_peers: Vec<String>,
    /// The service (of the API tokens in force) an operator signed in by the proxy acts through: it must be one
    /// that may act for them, and their session ends when its token is removed. Needed with the header.
    pub console_operator_service: String,
}

impl ApiConfig {
    /// The proxies whose `X-Forwarded-For` is believed.
    pub fn trusted_proxies(&self) -> Result<crate::api::limit::TrustedProxies, ConfigError> {
        crate::api::limit::TrustedProxies::parse(&self.trusted_proxies).map_err(ConfigError::Invalid)
    }

    /// The console's sign-in by a trusted proxy's header (ADR 0021), when `console_operator_header` is set: the
    /// header, the proxies it is believed from, the service it acts through. Refused in words when half set.
    pub fn console_proxy_sign_in(&self) -> Result<Option<crate::console::ProxySignIn>, ConfigError> {
        let header = self.console_operator_header.trim();
        if header.is_empty() {
            return Ok(None);
        }
        let header = axum::http::HeaderName::try_from(header).map_err(|_| {
            ConfigError::Invalid(format!("api.console_operator_header: {header:?} is not an HTTP header name"))
        })?;
        let peers = crate::api::limit::TrustedProxies::parse(&self.console_operator_peers)
            .map_err(|e| ConfigError::Invalid(e.replace("api.trusted_proxies", "api.console_operator_peers")))?;
        if self.console_operator_peers.is_empty() || self.console_operator_service.trim().is_empty() {
            return Err(ConfigError::Invalid(
                "api.console_operator_header needs api.console_operator_peers (the proxies it is believed from) and \
                 api.console_operator_service (the service the operators it names act through)"
                    .into(),
            ));
        }
        let service = self.console_operator_service.trim().to_string();
        Ok(Some(crate::console::ProxySignIn { header, peers, service }))
    }

    /// Each caller's (service and operator) rate limit.
    pub fn service_rate(&self) -> crate::api::limit::Rate {
        crate::api::limit::Rate { per_second: self.rate_per_second, burst: self.rate_burst }
    }

    /// The rate limit of a client address without a known token.
    pub fn unidentified_rate(&self) -> crate::api::limit::Rate {
        crate::api::limit::Rate { per_second: self.unidentified_per_second, burst: self.unidentified_burst }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.preview_valid_secs == 0 || self.events_poll_ms == 0 {
            return Err(ConfigError::Invalid(
                "api.preview_valid_secs and api.events_poll_ms must be at least 1".into(),
            ));
        }
        if !positive(self.rate_per_second) || !positive(self.unidentified_per_second) {
            return Err(ConfigError::Invalid(
                "api.rate_per_second and api.unidentified_per_second must be above 0".into(),
            ));
        }
        if self.rate_burst == 0 || self.unidentified_burst == 0 {
            return Err(ConfigError::Invalid("api.rate_burst and api.unidentified_burst must be at least 1".into()));
        }
        if self.streams_per_caller == 0 {
            return Err(ConfigError::Invalid("api.streams_per_caller must be at least 1".into()));
        }
        self.trusted_proxies()?;
        self.console_proxy_sign_in()?;
        if self.request_timeout_ms == 0 || self.tokens_poll_ms == 0 {
            return Err(ConfigError::Invalid(
                "api.request_timeout_ms and api.tokens_poll_ms must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `[database]`.
    pub database: DatabaseConfig,
    /// `[worker]`.
    pub worker: WorkerConfig,
    /// `[retry]`.
    pub retry: RetryConfig,
    /// `[retention]`.
    pub retention: RetentionConfig,
    /// `[api]`.
    pub api: ApiConfig,
    /// `[settings]`: the runtime settings' defaults (docs/settings.md).
    #[schema(inline)]
    pub settings: Settings,
}

impl Config {
    /// The built-in defaults, `file` (or `ARTEMIS_TRANSFER_CONFIG`) over them, then the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, ConfigError> {
        let file = file.map(Path::to_path_buf).or_else(|| std::env::var_os("ARTEMIS_TRANSFER_CONFIG").map(Into::into));
        let text = match &file {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?,
            ),
            None => None,
        };
        Config::from_sources(text.as_deref(), std::env::vars())
    }

    /// The configuration from the defaults, an optional file's text, and environment variables (pure).
    pub fn from_sources(
        file: Option<&str>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut merged = parse("config/default.toml", DEFAULTS)?;
        if let Some(text) = file {
            merge(&mut merged, parse("the configuration file", text)?);
        }
        let mut url = None;
        for (name, value) in env {
            if name == "DATABASE_URL" {
                url = Some(DatabaseUrl::new(value));
            } else if let Some(path) = name.strip_prefix(ENV_PREFIX) {
                set_path(&mut merged, path, &value);
            }
        }
        let mut config: Config = toml::Value::Table(merged).try_into().map_err(ConfigError::Shape)?;
        config.database.url = url;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let w = &self.worker;
        if w.concurrency == 0 {
            return Err(ConfigError::Invalid("worker.concurrency must be at least 1".into()));
        }
        if !positive(w.lease_secs) || !positive(w.heartbeat_secs) || w.heartbeat_secs >= w.lease_secs {
            return Err(ConfigError::Invalid(
                "worker.heartbeat_secs must be above 0 and below worker.lease_secs".into(),
            ));
        }
        let deadline_fits = Duration::try_from_secs_f64(w.job_deadline_secs).is_ok();
        if !deadline_fits || w.job_deadline_secs <= w.lease_secs {
            return Err(ConfigError::Invalid(format!(
                "worker.job_deadline_secs ({}) must be a number of seconds above worker.lease_secs ({}): the deadline \
                 stops a job whose handler stalled while its worker lives on, and must give every job longer than \
                 one lease",
                w.job_deadline_secs, w.lease_secs
            )));
        }
        self.api.validate()?;
        if self.retry.max_attempts < 1 {
            return Err(ConfigError::Invalid("retry.max_attempts must be at least 1".into()));
        }
        if self.retention.finished_runs_days == 0 || self.retention.prune_interval_secs == 0 {
            return Err(ConfigError::Invalid(
                "retention.finished_runs_days and retention.prune_interval_secs must be at least 1".into(),
            ));
        }
        self.settings.validate().map_err(|e| ConfigError::Invalid(e.to_string()))
    }

    /// The database URL, or why there is none.
    pub fn database_url(&self) -> Result<&DatabaseUrl, ConfigError> {
        self.database.url.as_ref().ok_or(ConfigError::NoDatabaseUrl)
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: self.retry.max_attempts,
            min_delay: Duration::from_millis(self.retry.min_delay_ms),
            max_delay: Duration::from_secs(self.retry.max_delay_secs),
            factor: self.retry.factor,
            jitter: self.retry.jitter,
        }
    }

    /// How long ended runs are kept, and how often a worker prunes.
    pub fn retention(&self) -> Retention {
        Retention {
            keep: Duration::from_secs(u64::from(self.retention.finished_runs_days) * 86_400),
            interval: Duration::from_secs(self.retention.prune_interval_secs),
            keep_audit: Duration::from_secs(u64::from(self.retention.audit_days) * 86_400),
        }
    }

    /// What the executor needs.
    pub fn executor(&self) -> ExecutorConfig {
        ExecutorConfig {
            lease: Duration::from_secs_f64(self.worker.lease_secs),
            heartbeat: Duration::from_secs_f64(self.worker.heartbeat_secs),
            deadline: Duration::from_secs_f64(self.worker.job_deadline_secs),
            retry: self.retry_policy(),
        }
    }
}

/// Above zero (and not NaN).
fn positive(x: f64) -> bool {
    x > 0.0
}

fn parse(source_name: &str, text: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|source| ConfigError::Parse { source_name: source_name.into(), source })
}

/// Lays `over` onto `base`, table by table.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Sets `SECTION__KEY` (any depth) to `raw`, read as a TOML value when it is one (`10`, `true`, `["a"]`) and
/// as a string otherwise.
fn set_path(table: &mut toml::Table, path: &str, raw: &str) {
    let keys: Vec<String> = path.split("__").map(str::to_lowercase).collect();
    let value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_owned()));
    let (last, parents) = keys.split_last().expect("split yields at least one key");
    let mut at = table;
    for key in parents {
        let entry = at.entry(key.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        at = entry.as_table_mut().expect("just made a table");
    }
    at.insert(last.clone(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_load_and_match_spec_section_8() {
        let config = Config::from_sources(None, env(&[])).unwrap();
        assert_eq!(config.settings.batch_size, 200);
        assert_eq!(config.settings.concurrent_runs, 4);
        assert_eq!(config.settings.node_calls_per_second, 20.0);
        assert_eq!(config.settings.dmq_chain, ["studio.dmq.transfer"]);
        assert_eq!(config.settings.dmq_time_to_live_secs, None);
        assert!(config.database.url.is_none());
    }

    #[test]
    fn environment_overrides_single_values_with_their_types() {
        let config = Config::from_sources(
            Some("[worker]\nconcurrency = 7\n"),
            env(&[
                ("ARTEMIS_TRANSFER__WORKER__LEASE_SECS", "2.5"),
                ("ARTEMIS_TRANSFER__WORKER__HEARTBEAT_SECS", "1"),
                ("ARTEMIS_TRANSFER__RETRY__JITTER", "false"),
                ("DATABASE_URL", "postgres://u:p@h/db"),
                ("UNRELATED", "x"),
            ]),
        )
        .unwrap();
        assert_eq!(config.worker.concurrency, 7);
        assert_eq!(config.worker.lease_secs, 2.5);
        assert!(!config.retry.jitter);
        assert_eq!(config.database_url().unwrap().expose(), "postgres://u:p@h/db");
    }

    #[test]
    fn an_unknown_key_is_refused() {
        let err = Config::from_sources(None, env(&[("ARTEMIS_TRANSFER__WORKER__LEASE_SEC", "3")])).unwrap_err();
        assert!(matches!(err, ConfigError::Shape(_)), "{err:?}");
    }

    #[test]
    fn the_consoles_proxy_header_is_off_by_default_and_refused_without_its_proxies_and_service() {
        let config = Config::from_sources(None, env(&[])).unwrap();
        assert!(config.api.console_proxy_sign_in().unwrap().is_none());
        let header = ("ARTEMIS_TRANSFER__API__CONSOLE_OPERATOR_HEADER", "X-Forwarded-User");
        let err = Config::from_sources(None, env(&[header])).unwrap_err();
        assert!(matches!(&err, ConfigError::Invalid(words) if words.contains("console_operator_peers")), "{err:?}");
        let bad = ("ARTEMIS_TRANSFER__API__CONSOLE_OPERATOR_HEADER", "not a header");
        let err = Config::from_sources(None, env(&[bad])).unwrap_err();
        assert!(matches!(&err, ConfigError::Invalid(words) if words.contains("not an HTTP header name")), "{err:?}");
    }

    #[test]
    fn heartbeat_must_be_shorter_than_the_lease() {
        let err = Config::from_sources(None, env(&[("ARTEMIS_TRANSFER__WORKER__HEARTBEAT_SECS", "30")])).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid(_)), "{err:?}");
    }

    #[test]
    fn the_job_deadline_defaults_to_half_an_hour_and_must_outlast_the_lease() {
        let config = Config::from_sources(None, env(&[])).unwrap();
        assert_eq!(config.executor().deadline, Duration::from_secs(1800));
        let config = Config::from_sources(
            None,
            env(&[
                ("ARTEMIS_TRANSFER__WORKER__LEASE_SECS", "2"),
                ("ARTEMIS_TRANSFER__WORKER__HEARTBEAT_SECS", "0.5"),
                ("ARTEMIS_TRANSFER__WORKER__JOB_DEADLINE_SECS", "3"),
            ]),
        )
        .unwrap();
        assert_eq!(config.executor().deadline, Duration::from_secs(3));
        for deadline in ["30", "10", "-1", "nan", "inf", "1e300"] {
            let err = Config::from_sources(None, env(&[("ARTEMIS_TRANSFER__WORKER__JOB_DEADLINE_SECS", deadline)]))
                .unwrap_err();
            match err {
                ConfigError::Invalid(words) => assert!(words.contains("worker.job_deadline_secs"), "{words}"),
                other => panic!("a deadline of {deadline} s with the default 30 s lease: {other:?}"),
            }
        }
    }

    #[test]
    fn retention_defaults_and_overrides() {
        let config = Config::from_sources(None, env(&[])).unwrap();
        assert_eq!(
            config.retention(),
            Retention {
                keep: Duration::from_secs(30 * 86_400),
                interval: Duration::from_secs(3600),
                keep_audit: Duration::from_secs(365 * 86_400)
            }
        );
        let config =
            Config::from_sources(None, env(&[("ARTEMIS_TRANSFER__RETENTION__PRUNE_INTERVAL_SECS", "60")])).unwrap();
        assert_eq!(config.retention().interval, Duration::from_secs(60));
        let err =
            Config::from_sources(None, env(&[("ARTEMIS_TRANSFER__RETENTION__FINISHED_RUNS_DAYS", "0")])).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid(_)), "{err:?}");
    }

    #[test]
    fn tls_files_are_unset_by_default_and_set_like_the_listen_address() {
        let config = Config::from_sources(None, env(&[])).unwrap();
        assert_eq!((config.api.tls_cert, config.api.tls_key), (None, None));
        let config = Config::from_sources(
            Some("[api]\ntls_cert = \"/etc/transfer/cert.pem\"\n"),
            env(&[("ARTEMIS_TRANSFER__API__TLS_KEY", "/etc/transfer/key.pem")]),
        )
        .unwrap();
        assert_eq!(config.api.tls_cert, Some(PathBuf::from("/etc/transfer/cert.pem")));
        assert_eq!(config.api.tls_key, Some(PathBuf::from("/etc/transfer/key.pem")));
    }

    #[test]
    fn the_spool_directory_is_unset_by_default_and_set_like_any_key() {
        let config = Config::from_sources(None, env(&[])).unwrap();
        assert_eq!(config.worker.spool_dir, None);
        let config =
            Config::from_sources(None, env(&[("ARTEMIS_TRANSFER__WORKER__SPOOL_DIR", "/var/cache/transfer/spool")]))
                .unwrap();
        assert_eq!(config.worker.spool_dir, Some(PathBuf::from("/var/cache/transfer/spool")));
    }

    #[test]
    fn debug_hides_the_password() {
        let url = DatabaseUrl::new("postgres://transfer:s3cret@127.0.0.1:5432/db");
        let shown = format!("{url:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("transfer:***@127.0.0.1"), "{shown}");
    }
}
