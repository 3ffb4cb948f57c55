//! The command line (clap derive): `migrate`, `worker`, `serve`, `cluster`, `preview`, `execute`, `stop`, `resume`,
//! `return`, `runs`, `watch`, `admin …`, `settings`. Parses, loads the configuration, connects,
//! and hands over to the library; errors come back typed and `main` prints their whole chain once.

pub mod admin;
pub mod cluster;
pub mod exit;
pub mod grant;
pub mod identity;
pub mod orphans;
pub mod preview;
pub mod run;
pub mod settings;
pub mod terminal;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::config::{Config, ConfigError};
use crate::jobs::runtime::ClaimConfig;
use crate::worker::{self, WorkerOptions};
pub use exit::Exit;

/// artemis-transfer: moves or copies selected messages between Artemis brokers, once, as a durable run.
#[derive(Debug, Parser)]
#[command(name = "artemis-transfer", version)]
pub struct Cli {
    /// A TOML file laid over the built-in defaults (config/default.toml).
    #[arg(long, global = true, env = "ARTEMIS_TRANSFER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log lines as text or JSON (level from RUST_LOG, default info).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Who acts: the operator whose grants are checked, whose name the audit records, and who sees only the runs
    /// and clusters they may (default: ARTEMIS_TRANSFER_OPERATOR, else $USER).
    #[arg(long = "as", global = true, value_name = "OPERATOR", alias = "operator")]
    pub operator: Option<String>,
    /// Deprecated: read as --as for one release, with a line saying so.
    #[arg(long, global = true, value_name = "OPERATOR", hide = true)]
    pub actor: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the database migrations and write the settings' defaults where none is set.
    Migrate,
    /// Run a worker: claim jobs and run them until SIGTERM.
    Worker(WorkerArgs),
    /// Serve the HTTP API until SIGTERM; tokens from ARTEMIS_TRANSFER_API_TOKENS (docs/deployment.md).
    Serve(ServeArgs),
    /// Admin commands over the job queue (each one audited).
    Admin(admin::AdminArgs),
    /// The cluster registry: add (discover from a seed node), list, remove.
    Cluster(cluster::ClusterArgs),
    /// Preview a move or copy: every finding in words, stored as a Previewed run for `execute`.
    Preview(preview::PreviewArgs),
    /// Execute a Previewed run (echo its plan hash, acknowledge its findings, type the source queue's name).
    Execute(run::ExecuteArgs),
    /// Stop a run: the batch in flight finishes first.
    Stop(run::StopArgs),
    /// Resume a stopped, interrupted or failed run from where it stopped.
    Resume(run::ResumeArgs),
    /// Return what a stopped, interrupted or failed move holds in staging to the source queue.
    Return(run::ReturnArgs),
    /// List runs, or show one.
    #[command(subcommand)]
    Runs(run::RunsCommand),
    /// Follow a run with a progress bar until it ends, then print its summary.
    Watch(run::WatchArgs),
    /// Staging queues no run owns: list them, or return one's messages to their original queues.
    Orphans(orphans::OrphansArgs),
    /// Who may do what on which cluster (docs/permissions.md): add, remove or list grants (each one audited).
    Grant(grant::GrantArgs),
    /// The runtime settings (docs/settings.md): show them, or change one (audited).
    Settings(settings::SettingsArgs),
}

/// `worker` options.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// Jobs run at once (default: worker.concurrency).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// This worker's name, the lease owner on its jobs (default: host:pid:random).
    #[arg(long)]
    pub name: Option<String>,
}

/// `serve` options.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Where to listen, host:port (default: api.listen).
    #[arg(long)]
    pub listen: Option<String>,
    /// Serve over TLS with this certificate chain, a PEM file; needs --tls-key (default: api.tls_cert).
    #[arg(long, value_name = "PEM_FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key, a PEM file; needs --tls-cert (default: api.tls_key).
    #[arg(long, value_name = "PEM_FILE")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP beyond loopback because a proxy in front terminates TLS (default:
    /// api.plain_http_behind_proxy); without it, or TLS, `serve` listens in clear on loopback only.
    #[arg(long)]
    pub behind_tls_proxy: bool,
}

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Connecting to the database.
    #[error("cannot connect to the database")]
    Connect(#[source] sqlx::Error),
    /// The job engine.
    #[error(transparent)]
    Jobs(#[from] crate::jobs::Error),
    /// The worker.
    #[error(transparent)]
    Worker(#[from] worker::WorkerError),
    /// Writing the output.
    #[error("cannot write the output")]
    Output(#[source] std::io::Error),
    /// The cluster registry.
    #[error(transparent)]
    Registry(#[from] crate::registry::RegistryError),
    /// Making a preview.
    #[error(transparent)]
    Preview(#[from] crate::transfer::service::ServiceError),
    /// The database did not answer a first connection.
    #[error(
        "cannot connect to the database at {at} (DATABASE_URL): is Postgres running there, and may this host reach \
         it?"
    )]
    Unreached {
        /// Host, port and database (never the password).
        at: String,
        /// Why.
        #[source]
        source: sqlx::Error,
    },
    /// Reading runs.
    #[error("the database: {0}")]
    Db(#[source] sqlx::Error),
    /// Reading a run's view.
    #[error(transparent)]
    View(#[from] crate::transfer::view::ViewError),
    /// The relay's spool directory.
    #[error(transparent)]
    Spool(#[from] crate::transfer::relay::spool::SpoolError),
    /// No operator is named (and `$USER` is not set).
    #[error("{0}")]
    NoOperator(String),
    /// The operator lacks a grant the command needs.
    #[error(transparent)]
    Permission(#[from] crate::transfer::permissions::PermissionError),
    /// The API's tokens.
    #[error(transparent)]
    Tokens(#[from] crate::api::tokens::TokensError),
    /// The database was not brought up by this build's `migrate`: the words say what to run.
    #[error("{0}")]
    NotMigrated(String),
    /// An action on a run that failed for a reason of the database's (not a refusal: those are [`CliError::Refused`]).
    #[error(transparent)]
    Action(crate::transfer::actions::ActionError),
    /// Listing or returning orphans.
    #[error(transparent)]
    Orphans(#[from] crate::transfer::orphans::OrphanError),
    /// The product said no (a missing grant, a confirmation not given, an unknown run…): the words say why and
    /// what to do, already in the command line's terms.
    #[error("{0}")]
    Refused(String),
    /// The API's TLS certificate or key.
    #[error(transparent)]
    Tls(#[from] crate::api::tls::TlsError),
    /// Listening or serving.
    #[error("the HTTP API on {addr}")]
    Serve {
        /// Where.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `serve` would answer plain HTTP beyond this host, and nothing says a proxy terminates TLS in front.
    #[error(
        "serve would answer plain HTTP on {addr}, beyond this host: bearer tokens would travel in clear. Serve over \
         TLS (--tls-cert and --tls-key), listen on loopback (--listen 127.0.0.1:8080), or, when a proxy in front \
         terminates TLS, say so with --behind-tls-proxy (api.plain_http_behind_proxy = true)"
    )]
    PlainHttpBeyondLoopback {
        /// The address asked for.
        addr: String,
    },
}

impl CliError {
    /// How a command that failed so ends: a refusal of the product's (a missing grant, an unknown run, cluster or
    /// node, a registration that conflicts) is [`Exit::Refused`], a command naming no operator [`Exit::Usage`],
    /// anything else [`Exit::Failure`].
    pub fn exit(&self) -> Exit {
        use crate::registry::RegistryError;
        use crate::transfer::service::ServiceError;
        let refused = match self {
            CliError::Refused(_) => true,
            CliError::NoOperator(_) => return Exit::Usage,
            CliError::Permission(e) | CliError::Preview(ServiceError::Permission(e)) => e.is_refusal(),
            CliError::View(crate::transfer::view::ViewError::NotFound(_)) => true,
            CliError::Orphans(e) => e.is_refusal(),
            CliError::Registry(e) | CliError::Preview(ServiceError::Registry(e)) => {
                matches!(e, RegistryError::NotFound(_) | RegistryError::Conflict(_))
            }
            _ => false,
        };
        if refused {
            Exit::Refused
        } else {
            Exit::Failure
        }
    }
}

/// The command line as `main` parses it: [`Cli`]'s, each `--help` ending with the exit status ([`exit`]).
pub fn command() -> clap::Command {
    exit::with_exit_status(<Cli as clap::CommandFactory>::command())
}

/// Sets up logging to stderr.
pub fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(terminal::colour(&std::io::stderr()));
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs the command.
pub async fn run(cli: Cli) -> Result<Exit, CliError> {
    let config = Config::load(cli.config.as_deref())?;
    let named = identity::Named { as_flag: cli.operator, actor_flag: cli.actor };
    match cli.command {
        Command::Migrate => {
            let pool = connect(&config, 2).await?;
            crate::jobs::migrate(&pool, &config.settings, "artemis-transfer migrate").await?;
            tracing::info!("the database is up to date");
            Ok(Exit::Success)
        }
        Command::Worker(args) => {
            let concurrency = args.concurrency.unwrap_or(config.worker.concurrency).max(1);
            let reached = reach(&config).await?;
            let pool = worker::pool_options(concurrency)
                .max_connections(config.database.max_connections.max(concurrency as u32 + 3))
                .acquire_timeout(Duration::from_secs(config.database.connect_timeout_secs))
                .connect_with(reached)
                .await
                .map_err(CliError::Connect)?;
            require_migrated(&pool).await?;
            let options = WorkerOptions {
                concurrency,
                claim: ClaimConfig {
                    owner: args.name.unwrap_or_else(worker::default_name),
                    lease: Duration::from_secs_f64(config.worker.lease_secs),
                    poll_interval: Duration::from_millis(config.worker.poll_interval_ms),
                    claim_cooldown: Duration::from_millis(config.worker.claim_cooldown_ms),
                    batch: concurrency,
                },
                executor: config.executor(),
                shutdown_timeout: Duration::from_secs(config.worker.shutdown_timeout_secs),
            };
            let mut relay = crate::transfer::relay::RelayConfig::default().within_deadline(options.executor.deadline);
            if let Some(dir) = &config.worker.spool_dir {
                relay.spool_dir = dir.clone();
            }
            let registry = worker::transfer_registry(&pool, relay)?;
            let pruner = worker::spawn_pruner(pool.clone(), options.claim.owner.clone(), config.retention());
            worker::run(pool, registry, options, worker::shutdown::terminate_signal()).await?;
            pruner.stop(worker::PRUNE_STOP_WAIT).await;
            Ok(Exit::Success)
        }
        Command::Serve(args) => serve(&config, args).await,
        Command::Settings(args) => settings::run(&connect_migrated(&config, 2).await?, args, &named).await,
        // Who acts is known before the database is asked: naming nobody is a malformed command line.
        command => {
            let operator = named.operator()?;
            let pool = connect_migrated(&config, 2).await?;
            act(&pool, command, &operator, config.retry.max_attempts).await
        }
    }
}

/// The commands that act for `operator` on a migrated database.
async fn act(pool: &PgPool, command: Command, operator: &str, max_attempts: i32) -> Result<Exit, CliError> {
    match command {
        Command::Admin(args) => admin::run(pool, args, operator).await,
        Command::Cluster(args) => cluster::run(pool, args, operator).await,
        Command::Preview(args) => preview::run(pool, args, operator).await,
        Command::Execute(args) => run::execute(pool, args, operator, max_attempts).await,
        Command::Stop(args) => run::stop(pool, args, operator).await,
        Command::Resume(args) => run::resume(pool, args, operator, max_attempts).await,
        Command::Return(args) => run::return_to_source(pool, args, operator, max_attempts).await,
        Command::Runs(command) => run::runs(pool, command, operator).await,
        Command::Watch(args) => run::watch(pool, args, operator).await,
        Command::Orphans(args) => orphans::run(pool, args, operator).await,
        Command::Grant(args) => grant::run(pool, args, operator).await,
        Command::Migrate | Command::Worker(_) | Command::Serve(_) | Command::Settings(_) => {
            unreachable!("run handles {command:?} itself")
        }
    }
}

/// `serve`: the HTTP API until SIGTERM (or Ctrl-C); requests in flight are answered first.
async fn serve(config: &Config, args: ServeArgs) -> Result<Exit, CliError> {
    let source = crate::api::tokens::TokenSource::from_env()?;
    let tokens = std::sync::Arc::new(crate::api::LiveTokens::new(source.load()?));
    let metrics_token = crate::api::ServiceTokens::metrics_from_env()?.map(std::sync::Arc::new);
    let tls = tls_config(config, &args)?;
    let proxies = config.api.trusted_proxies()?;
    let addr = args.listen.clone().unwrap_or_else(|| config.api.listen.clone());
    let listener =
        tokio::net::TcpListener::bind(&addr).await.map_err(|source| CliError::Serve { addr: addr.clone(), source })?;
    let behind_tls_proxy = args.behind_tls_proxy || config.api.plain_http_behind_proxy;
    if tls.is_none() && !behind_tls_proxy && crate::api::reachable_from_elsewhere(listener.local_addr().ok()) {
        return Err(CliError::PlainHttpBeyondLoopback { addr });
    }
    let pool = connect(config, 4).await?;
    // Without the schema every request would fail; say what to do at start, as the worker does.
    require_migrated(&pool).await?;
    let closing = tokio_util::sync::CancellationToken::new();
    if let crate::api::tokens::TokenSource::File(path) = source {
        let every = Duration::from_millis(config.api.tokens_poll_ms);
        crate::api::tokens::watch(path, tokens.clone(), every, closing.clone());
    }
    let state = crate::api::ApiState {
        pool,
        tokens,
        metrics_token,
        max_attempts: config.retry.max_attempts,
        preview_valid_for: Duration::from_secs(config.api.preview_valid_secs),
        events_every: Duration::from_millis(config.api.events_poll_ms),
        limits: crate::api::limit::Limits::build(
            config.api.service_rate(),
            config.api.unidentified_rate(),
            proxies,
            config.api.streams_per_caller,
        ),
        request_timeout: Duration::from_millis(config.api.request_timeout_ms),
        metrics_cache: Default::default(),
        feeds: Default::default(),
        closing,
    };
    let console_state = crate::console::ConsoleState::new(state.clone(), tls.is_some());
    let console = crate::console::router(console_state.with_proxy_sign_in(config.api.console_proxy_sign_in()?));
    let stop = worker::shutdown::terminate_signal();
    // The API's previews and browses make management calls for as long as it runs: one console login per broker.
    crate::broker::jolokia::use_console_sessions();
    let served = crate::api::serve(listener, tls, state, console, async move {
        stop.await;
    })
    .await;
    crate::broker::jolokia::log_out_console_sessions(worker::CONSOLE_LOGOUT_TIMEOUT).await;
    served.map_err(|source| CliError::Serve { addr, source })?;
    Ok(Exit::Success)
}

/// The TLS configuration of `serve` (`None`: plain HTTP): each option from the command line, else from the
/// configuration; read and checked before anything listens.
fn tls_config(config: &Config, args: &ServeArgs) -> Result<Option<Arc<rustls::ServerConfig>>, CliError> {
    let cert = args.tls_cert.clone().or_else(|| config.api.tls_cert.clone());
    let key = args.tls_key.clone().or_else(|| config.api.tls_key.clone());
    Ok(crate::api::tls::TlsFiles::pair(cert, key)?.map(|files| files.server_config()).transpose()?)
}

/// A pool (as [`connect`]) on a database whose schema is this build's; otherwise why not, and that `migrate` brings
/// it up — rather than the first statement's "relation … does not exist".
async fn connect_migrated(config: &Config, min_connections: u32) -> Result<PgPool, CliError> {
    let pool = connect(config, min_connections).await?;
    require_migrated(&pool).await?;
    Ok(pool)
}

/// Whether the database holds at least this build's schema (a newer one is a newer build's `migrate`: its tables
/// are a superset, and an older build's statements are told by their own errors).
async fn require_migrated(pool: &PgPool) -> Result<(), CliError> {
    let newest = crate::jobs::MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    match crate::jobs::store::schema::schema_level(pool).await.map_err(CliError::Db)? {
        Some(version) if version >= newest => Ok(()),
        Some(version) => Err(CliError::NotMigrated(format!(
            "the database's schema ({version}) is older than this build's ({newest}): run `artemis-transfer migrate` \
             with this build first"
        ))),
        None => Err(CliError::NotMigrated(
            "the database holds no artemis-transfer schema: run `artemis-transfer migrate` first (DATABASE_URL names \
             the database)"
                .into(),
        )),
    }
}

/// A pool of at least `min_connections` (or the configured size if larger).
async fn connect(config: &Config, min_connections: u32) -> Result<PgPool, CliError> {
    let reached = reach(config).await?;
    PgPoolOptions::new()
        .max_connections(config.database.max_connections.max(min_connections))
        .acquire_timeout(Duration::from_secs(config.database.connect_timeout_secs))
        .connect_with(reached)
        .await
        .map_err(CliError::Connect)
}

/// The database's connection options, once one connection to it was made: a pool that cannot connect retries
/// until its timeout and then says only "pool timed out", so the first connection is made alone, and its failure
/// names where it went and why (a closed port: at once).
async fn reach(config: &Config) -> Result<PgConnectOptions, CliError> {
    use sqlx::{ConnectOptions, Connection};
    let options: PgConnectOptions = config.database_url()?.expose().parse().map_err(CliError::Connect)?;
    let at = format!("{}:{}/{}", options.get_host(), options.get_port(), options.get_database().unwrap_or_default());
    let timeout = Duration::from_secs(config.database.connect_timeout_secs);
    let unreached = |source| CliError::Unreached { at: at.clone(), source };
    match tokio::time::timeout(timeout, options.connect()).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(options)
        }
        Ok(Err(e)) => Err(unreached(e)),
        Err(_) => Err(unreached(sqlx::Error::PoolTimedOut)),
    }
}

/// An error and its causes on one line, for `main`.
pub use crate::jobs::executor::error_chain;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every `--help` text, of the binary and of each command and subcommand, long form.
    fn every_help(command: &mut clap::Command, into: &mut Vec<(String, String)>) {
        into.push((command.get_name().to_owned(), command.render_long_help().to_string()));
        for sub in command.get_subcommands_mut() {
            every_help(sub, into);
        }
    }

    /// Every `--help`, short and long, of the binary and of each command, ends with the one exit table.
    #[test]
    fn every_help_says_the_exit_status() {
        let mut helps = Vec::new();
        every_help(&mut command(), &mut helps);
        let mut short = Vec::new();
        every_short_help(&mut command(), &mut short);
        assert!(helps.len() > 20, "{}", helps.len());
        // clap's own `help` subcommands print the help of the command they name.
        for (name, help) in helps.iter().chain(&short).filter(|(name, _)| name != "help") {
            assert!(help.trim_end().ends_with(exit::Exit::help().lines().last().unwrap()), "`{name}`:\n{help}");
            for e in exit::Exit::ALL {
                let line = format!("  {}  {}: {}", e.code(), e.name(), e.means());
                assert!(help.contains(&line), "`{name} --help` lacks {line:?}:\n{help}");
            }
        }
    }

    fn every_short_help(command: &mut clap::Command, into: &mut Vec<(String, String)>) {
        into.push((command.get_name().to_owned(), command.render_help().to_string()));
        for sub in command.get_subcommands_mut() {
            every_short_help(sub, into);
        }
    }

    #[test]
    fn help_points_to_the_repositorys_docs_never_to_the_spec() {
        let mut helps = Vec::new();
        every_help(&mut command(), &mut helps);
        assert!(helps.len() > 20, "{}", helps.len());
        for (name, help) in helps {
            for outside in ["SPEC", "shared/design"] {
                assert!(!help.contains(outside), "`{name} --help` mentions {outside}:\n{help}");
            }
        }
    }

    /// The docs whose `sh` blocks show command lines.
    const DOCS_WITH_COMMANDS: &[(&str, &str)] = &[
        ("README.md", include_str!("../../README.md")),
        ("docs/cli.md", include_str!("../../docs/cli.md")),
        ("docs/deployment.md", include_str!("../../docs/deployment.md")),
        ("docs/permissions.md", include_str!("../../docs/permissions.md")),
        ("docs/settings.md", include_str!("../../docs/settings.md")),
        ("docs/studio-integration.md", include_str!("../../docs/studio-integration.md")),
    ];

    /// The `artemis-transfer …` command lines of the `sh` blocks of `markdown`, continuation lines joined, each as
    /// the words the binary would get: up to a comment, a redirection or the next command; a shell expansion
    /// (`"$run"`, `"$(jq …)"`) stands for a run id.
    fn command_lines(markdown: &str) -> Vec<Vec<String>> {
        let mut lines = Vec::new();
        let (mut in_block, mut pending) = (false, String::new());
        for line in markdown.lines() {
            if line.starts_with("```") {
                in_block = line == "```sh";
                continue;
            }
            if !in_block {
                continue;
            }
            pending.push_str(line.trim_end().trim_end_matches('\\'));
            if line.trim_end().ends_with('\\') {
                continue;
            }
            let command = std::mem::take(&mut pending);
            let Some(rest) = command.trim_start().strip_prefix("artemis-transfer ") else { continue };
            let words = shlex::split(rest).unwrap_or_else(|| panic!("not shell words: {command}"));
            let end = ["#", ";", "&", "|", "||", "&&"];
            let words = words.into_iter().take_while(|w| !end.contains(&w.as_str()) && !w.starts_with(['>', '#']));
            let run = "4f0c3a9e-5b1d-4c2e-9a7f-0d6e8b1c2a3f";
            lines.push(words.map(|w| if w.contains('$') { run.to_owned() } else { w }).collect());
        }
        lines
    }

    #[test]
    fn every_command_line_of_the_docs_parses() {
        let mut seen = 0;
        for (doc, text) in DOCS_WITH_COMMANDS {
            for words in command_lines(text) {
                let argv = std::iter::once("artemis-transfer".to_owned()).chain(words.iter().cloned());
                if let Err(e) = Cli::try_parse_from(argv) {
                    panic!("{doc}: `artemis-transfer {}` does not parse:\n{e}", words.join(" "));
                }
                seen += 1;
            }
        }
        assert!(seen > 30, "{seen} command lines");
    }

    #[test]
    fn the_guarantees_page_says_what_every_run_state_means() {
        let page = include_str!("../../docs/guarantees.md");
        for state in crate::jobs::RunState::ALL {
            assert!(page.contains(&format!("| `{state}` |")), "docs/guarantees.md has no row for the state {state}");
        }
    }

    #[test]
    fn the_permissions_page_shows_the_staging_security_setting_the_runs_ask_for() {
        let page = include_str!("../../docs/permissions.md");
        for line in crate::transfer::staging::SECURITY_SNIPPET.lines() {
            assert!(page.contains(line), "docs/permissions.md lacks {line:?} of staging::SECURITY_SNIPPET");
        }
    }

    #[test]
    fn command_lines_are_read_as_a_shell_would() {
        let markdown = "```sh\nartemis-transfer stop \"$run\" --reason 'a b' # why\nartemis-transfer serve \\\n  \
                        --listen x >out\nls\n```\n```text\nartemis-transfer nope\n```\n";
        let run = "4f0c3a9e-5b1d-4c2e-9a7f-0d6e8b1c2a3f";
        assert_eq!(command_lines(markdown), [vec!["stop", run, "--reason", "a b"], vec!["serve", "--listen", "x"]]);
    }

    #[test]
    fn cluster_add_refuses_a_web_address_for_the_core_url() {
        let add = |url: &str| {
            Cli::try_parse_from(["artemis-transfer", "cluster", "add", "east", "--core-url", url, "--credentials", "c"])
        };
        for web in ["http://broker-1:8161/console/jolokia", "HTTPS://broker-1:8443"] {
            let words = add(web).unwrap_err().to_string();
            assert!(words.contains("is a web address") && words.contains("--jolokia-url"), "{words}");
        }
        assert!(add("tcp://broker-1:61616").is_ok());
    }

    #[test]
    fn each_run_action_takes_only_the_flags_it_acts_on() {
        let parse = |args: &[&str]| Cli::try_parse_from(["artemis-transfer"].iter().chain(args));
        let run = "4f0c3a9e-5b1d-4c2e-9a7f-0d6e8b1c2a3f";
        assert!(parse(&["stop", run, "--reason", "maintenance"]).is_ok());
        assert!(parse(&["return", run, "--confirm", "orders"]).is_ok());
        for ignored in [
            &["stop", run, "--confirm", "orders"][..],
            &["resume", run, "--reason", "x"],
            &["return", run, "--reason", "x"],
        ] {
            let err = parse(ignored).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument, "{ignored:?}");
        }
    }

    /// One identity flag, `--as`, before or after any subcommand, every command included; `--actor` still read.
    #[test]
    fn every_command_takes_as_anywhere() {
        let parse = |args: &[&str]| Cli::try_parse_from(["artemis-transfer"].iter().chain(args));
        let run = "4f0c3a9e-5b1d-4c2e-9a7f-0d6e8b1c2a3f";
        for command in [
            &["admin", "jobs"][..],
            &["settings", "set", "batch_size", "10"],
            &["settings"],
            &["runs", "list"],
            &["runs", "show", run],
            &["watch", run],
            &["stop", run],
            &["resume", run],
            &["return", run],
            &["grant", "list"],
            &["cluster", "list"],
            &["orphans", "list"],
            &["preview", "--from", "a/b/c", "--to", "a/b/d", "--all"],
        ] {
            // Before the command, after its name, at the end.
            for at in [0, 1, command.len()] {
                let mut args = command.to_vec();
                args.insert(at, "--as");
                args.insert(at + 1, "bob");
                let cli = parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                assert_eq!(cli.operator.as_deref(), Some("bob"), "{args:?}");
            }
            let mut old = command.to_vec();
            old.extend(["--actor", "carl"]);
            assert_eq!(parse(&old).unwrap_or_else(|e| panic!("{old:?}: {e}")).actor.as_deref(), Some("carl"));
        }
    }

    #[test]
    fn the_deprecated_actor_flag_is_not_in_the_help() {
        let mut helps = Vec::new();
        every_help(&mut command(), &mut helps);
        for (name, help) in helps {
            assert!(!help.contains("--actor"), "`{name} --help` shows --actor:\n{help}");
        }
    }

    #[test]
    fn admin_commands_parse() {
        let cli =
            Cli::try_parse_from(["artemis-transfer", "admin", "--as", "ops", "prune", "--older-than", "7d"]).unwrap();
        assert!(matches!(cli.command, Command::Admin(_)));
        assert!(Cli::try_parse_from(["artemis-transfer", "admin", "requeue"]).is_err());
    }

    #[test]
    fn a_preview_goes_to_a_target_or_to_the_original_queues_never_both() {
        let parse = |extra: &[&str]| {
            let args = ["artemis-transfer", "preview", "--from", "east/east-1/DLQ", "--all"];
            Cli::try_parse_from(args.iter().chain(extra))
        };
        let retry = parse(&["--to-original-queues"]).unwrap();
        assert!(matches!(&retry.command, Command::Preview(a) if a.to_original_queues && a.to.is_none()));
        assert!(parse(&["--to", "west/west-1/q"]).is_ok());
        assert!(parse(&[]).is_err(), "somewhere to go is required");
        assert!(parse(&["--to", "west/west-1/q", "--to-original-queues"]).is_err());
        assert!(parse(&["--to-original-queues", "--copy"]).is_err(), "a retry is a move");
    }
}
