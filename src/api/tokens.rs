//! The service tokens: which services may call, by which tokens, for which operators — and how the set
//! is read, checked and replaced while the service runs.
//!
//! An **entry** is one line of text: `service=token`, then optionally `operators=alice|bob`, the operators the
//! service may act for (a service without the list may act for anyone). The list is `|`-separated, not
//! comma-separated, so an entry stays one entry in [`TOKENS_ENV`], whose entries are comma-separated as they
//! always were: `studio=A,studio=B,ops-bot=C operators=alice|bob`.
//!
//! A service may have several tokens (one entry each, same name): rotation is adding the new token, moving the
//! clients to it, and dropping the old one. Every entry of one service must name the same operators (the limit
//! is the service's, not a token's, so a rotation cannot widen it by accident).
//!
//! The tokens come from [`TOKENS_ENV`], or from the file [`TOKENS_FILE_ENV`] names (a mounted secret: one entry
//! a line, `#` starts a comment line), never from both ([`TokenSource::from_vars`] says why). The file is read
//! again when it changes ([`watch`]): a good read replaces the set at once (requests read it through an
//! [`ArcSwap`], so none waits on a reload), a bad one keeps the set in force and logs an ERROR.
//!
//! Only the tokens' SHA-256 digests are kept, and no word of an error, a log line or a `Debug` form holds a
//! token: errors name the entry (its place and its service) and say what is wrong with it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use sha2::{Digest, Sha256};

/// The longest operator name (the document says it too).
pub const MAX_OPERATOR_CHARS: usize = 200;

/// The environment variable holding the service tokens, comma-separated entries.
pub const TOKENS_ENV: &str = "ARTEMIS_TRANSFER_API_TOKENS";

/// The environment variable naming a file of service tokens, one entry a line.
pub const TOKENS_FILE_ENV: &str = "ARTEMIS_TRANSFER_API_TOKENS_FILE";

/// The environment variable holding the token a scrape of `/metrics` must present; unset, `/metrics` is open.
/// It is not a service token: a scraper's token sits in a Prometheus configuration and must not act for anyone,
/// and a service has no business scraping.
pub const METRICS_TOKEN_ENV: &str = "ARTEMIS_TRANSFER_METRICS_TOKEN";

/// Tokens shorter than this are refused: a bearer token must not be guessable.
pub const MIN_TOKEN_CHARS: usize = 24;

/// Tokens longer than this are refused, and a presented one is not even hashed: it bounds the work a request
/// with a made-up token costs (hyper takes headers of hundreds of KiB).
pub const MAX_TOKEN_CHARS: usize = 512;

/// The attribute of an entry naming the operators its service may act for.
const OPERATORS: &str = "operators=";

/// Where an entry was written, for the words of its error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The `n`th entry (from 1) of [`TOKENS_ENV`].
    Env(usize),
    /// Line `line` (from 1) of the file.
    File {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
    },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Env(n) => write!(f, "{TOKENS_ENV}, entry {n}"),
            Place::File { path, line } => write!(f, "{}, line {line}", path.display()),
        }
    }
}

/// Why the tokens cannot be used. The words name an entry by its place and service, never by its token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokensError {
    /// None set.
    #[error(
        "no API tokens: set {TOKENS_ENV} to service=token entries, e.g. {TOKENS_ENV}=studio=$(openssl rand -hex \
         32), or {TOKENS_FILE_ENV} to a file of them"
    )]
    None,
    /// Both sources are set.
    #[error(
        "both {TOKENS_ENV} and {TOKENS_FILE_ENV} are set: use one (a token left in the environment would outlive its \
         removal from the file)"
    )]
    BothSources,
    /// The file cannot be read.
    #[error("cannot read the tokens file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An entry is not `service=token` followed by attributes.
    #[error("{at}: not service=token (optionally followed by operators=name|name)")]
    Malformed {
        /// Where.
        at: Place,
    },
    /// A token is too short.
    #[error("{at}: the token of service {service} is shorter than {MIN_TOKEN_CHARS} characters")]
    Short {
        /// Where.
        at: Place,
        /// The service.
        service: String,
    },
    /// A token is too long.
    #[error("{at}: the token of service {service} is longer than {MAX_TOKEN_CHARS} characters")]
    Long {
        /// Where.
        at: Place,
        /// The service.
        service: String,
    },
    /// An entry has an attribute other than `operators=`.
    #[error("{at}: service {service}: after the token an entry takes only operators=name|name")]
    UnknownAttribute {
        /// Where.
        at: Place,
        /// The service.
        service: String,
    },
    /// The operator list is empty or names something that is no operator.
    #[error("{at}: service {service}: operators= {why}")]
    BadOperators {
        /// Where.
        at: Place,
        /// The service.
        service: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Two entries of one service name different operators.
    #[error("{at}: service {service} names other operators than its earlier entry: every token of a service must")]
    InconsistentOperators {
        /// Where (the later entry).
        at: Place,
        /// The service.
        service: String,
    },
    /// Two entries share a token.
    #[error("{at}: the token of service {service} is the token of an earlier entry")]
    DuplicateToken {
        /// Where (the later entry).
        at: Place,
        /// The service.
        service: String,
    },
    /// The metrics token is too short.
    #[error("{METRICS_TOKEN_ENV} is shorter than {MIN_TOKEN_CHARS} characters")]
    ShortMetrics,
}

/// A service that may call: its name and, when limited, the operators it may act for.
#[derive(Debug, PartialEq, Eq)]
pub struct Service {
    /// Its name (in every request's log line and the idempotency keys).
    pub name: String,
    /// The operators it may act for; `None`: anyone.
    pub operators: Option<BTreeSet<String>>,
}

impl Service {
    /// Whether it may act for `operator`.
    pub fn may_act_for(&self, operator: &str) -> bool {
        self.operators.as_ref().is_none_or(|o| o.contains(operator))
    }
}

/// The services that may call, each token by its digest.
#[derive(Clone)]
pub struct ServiceTokens {
    tokens: Vec<(Arc<Service>, [u8; 32])>,
}

impl fmt::Debug for ServiceTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceTokens").field("services", &self.summary()).finish_non_exhaustive()
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The form a token is held in (its SHA-256), for whoever must remember a token without keeping it.
pub fn token_digest(token: &str) -> [u8; 32] {
    digest(token)
}

/// One entry as written: its service, token and operators.
struct Entry<'t> {
    at: Place,
    service: &'t str,
    token: &'t str,
    operators: Option<BTreeSet<String>>,
}

/// Parses one entry: `service=token [operators=a|b]`. White space around `=` is allowed, as it always was.
fn entry(text: &str, at: Place) -> Result<Entry<'_>, TokensError> {
    let (service, rest) = text.split_once('=').ok_or_else(|| TokensError::Malformed { at: at.clone() })?;
    let service = service.trim();
    let mut words = rest.split_whitespace();
    let token = words.next().unwrap_or_default();
    if service.is_empty() || token.is_empty() || service.chars().any(char::is_control) {
        return Err(TokensError::Malformed { at });
    }
    let named = |at: &Place| (at.clone(), service.to_string());
    match token.chars().count() {
        n if n < MIN_TOKEN_CHARS => return Err(TokensError::Short { at, service: service.into() }),
        n if n > MAX_TOKEN_CHARS => return Err(TokensError::Long { at, service: service.into() }),
        _ => {}
    }
    let mut operators = None;
    for word in words {
        let list = word.strip_prefix(OPERATORS).filter(|_| operators.is_none());
        let Some(list) = list else {
            let (at, service) = named(&at);
            return Err(TokensError::UnknownAttribute { at, service });
        };
        operators = Some(operator_list(list).map_err(|why| {
            let (at, service) = named(&at);
            TokensError::BadOperators { at, service, why }
        })?);
    }
    Ok(Entry { at, service, token, operators })
}

/// The names of `a|b|c`: at least one, each a name `X-Operator` could carry (printable ASCII, at most 200).
fn operator_list(list: &str) -> Result<BTreeSet<String>, &'static str> {
    let names: BTreeSet<String> = list.split('|').map(str::to_string).collect();
    if names.iter().all(String::is_empty) {
        return Err("names no operator: leave the attribute out to let the service act for anyone");
    }
    let printable = |n: &String| !n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic());
    if !names.iter().all(printable) || names.iter().any(|n| n.len() > MAX_OPERATOR_CHARS) {
        return Err("takes names of printable ASCII (at most 200 characters) separated by |");
    }
    Ok(names)
}

impl ServiceTokens {
    /// Parses comma-separated entries, as [`TOKENS_ENV`] holds them.
    pub fn parse(text: &str) -> Result<ServiceTokens, TokensError> {
        let entries = text.split(',').map(str::trim).filter(|e| !e.is_empty()).enumerate();
        ServiceTokens::from_entries(entries.map(|(i, e)| entry(e, Place::Env(i + 1))))
    }

    /// Parses a tokens file's text: one entry a line; blank lines and lines starting with `#` are skipped.
    pub fn parse_file(text: &str, path: &Path) -> Result<ServiceTokens, TokensError> {
        let lines = text.lines().enumerate().map(|(i, l)| (i, l.trim()));
        let entries = lines.filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        ServiceTokens::from_entries(
            entries.map(|(i, l)| entry(l, Place::File { path: path.to_path_buf(), line: i + 1 })),
        )
    }

    /// The set of `entries`: no token twice, one operator list per service, at least one entry.
    fn from_entries<'t>(
        entries: impl Iterator<Item = Result<Entry<'t>, TokensError>>,
    ) -> Result<ServiceTokens, TokensError> {
        let mut services: BTreeMap<&str, Arc<Service>> = BTreeMap::new();
        let mut tokens: Vec<(Arc<Service>, [u8; 32])> = Vec::new();
        for entry in entries {
            let Entry { at, service, token, operators } = entry?;
            let d = digest(token);
            if tokens.iter().any(|(_, other)| *other == d) {
                return Err(TokensError::DuplicateToken { at, service: service.into() });
            }
            let known = services
                .entry(service)
                .or_insert_with(|| Arc::new(Service { name: service.into(), operators: operators.clone() }));
            if known.operators != operators {
                return Err(TokensError::InconsistentOperators { at, service: service.into() });
            }
            tokens.push((known.clone(), d));
        }
        if tokens.is_empty() {
            return Err(TokensError::None);
        }
        Ok(ServiceTokens { tokens })
    }

    /// `token` as the one token of a scraper (none when empty).
    pub(super) fn metrics(token: &str) -> Result<Option<ServiceTokens>, TokensError> {
        match token.chars().count() {
            0 => Ok(None),
            n if n < MIN_TOKEN_CHARS => Err(TokensError::ShortMetrics),
            _ => {
                let scraper = Arc::new(Service { name: "metrics".into(), operators: Some(BTreeSet::new()) });
                Ok(Some(ServiceTokens { tokens: vec![(scraper, digest(token))] }))
            }
        }
    }

    /// The token `/metrics` asks for, from [`METRICS_TOKEN_ENV`]; `None` when it is unset or empty.
    pub fn metrics_from_env() -> Result<Option<ServiceTokens>, TokensError> {
        let token = std::env::var(METRICS_TOKEN_ENV).unwrap_or_default();
        ServiceTokens::metrics(token.trim())
    }

    /// The service whose token `presented` is. Every digest is compared in full, whatever matches, in time that
    /// does not depend on where they differ; a token too long to be one is not hashed.
    pub fn identify(&self, presented: &str) -> Option<Arc<Service>> {
        if presented.len() > MAX_TOKEN_CHARS * 4 || presented.chars().count() > MAX_TOKEN_CHARS {
            return None;
        }
        self.identify_digest(&digest(presented))
    }

    /// The service whose token has `digest` ([`token_digest`]), while that token is in force: a console session
    /// keeps its token's digest, and ends when the token is removed.
    pub fn identify_digest(&self, digest: &[u8]) -> Option<Arc<Service>> {
        let mut found = None;
        for (service, known) in &self.tokens {
            let differing = known.iter().zip(digest.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if differing == 0 && digest.len() == known.len() {
                found = Some(service);
            }
        }
        found.cloned()
    }

    /// The service called `name` and the digest of its first token in force: what a session made for it without
    /// a token (a proxy's sign-in, ADR 0021) is tied to, so that it ends when that token is removed.
    pub fn named(&self, name: &str) -> Option<(Arc<Service>, [u8; 32])> {
        self.tokens.iter().find(|(service, _)| service.name == name).map(|(s, d)| (s.clone(), *d))
    }

    /// The name of the service whose token `presented` is.
    pub fn service_of(&self, presented: &str) -> Option<String> {
        self.identify(presented).map(|s| s.name.clone())
    }

    /// Each service with its number of tokens and operators (`None`: anyone), for a log line.
    pub fn summary(&self) -> Vec<String> {
        let mut counts: BTreeMap<&str, (usize, Option<usize>)> = BTreeMap::new();
        for (service, _) in &self.tokens {
            let operators = service.operators.as_ref().map(BTreeSet::len);
            counts.entry(&service.name).or_insert((0, operators)).0 += 1;
        }
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        counts
            .into_iter()
            .map(|(name, (tokens, operators))| match operators {
                None => format!("{name} ({})", plural(tokens, "token")),
                Some(o) => format!("{name} ({}, for {})", plural(tokens, "token"), plural(o, "operator")),
            })
            .collect()
    }
}

/// Where the tokens come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// [`TOKENS_ENV`]'s text.
    Env(String),
    /// The file [`TOKENS_FILE_ENV`] names.
    File(PathBuf),
}

impl TokenSource {
    /// From the process environment.
    pub fn from_env() -> Result<TokenSource, TokensError> {
        TokenSource::from_vars(std::env::var(TOKENS_ENV).ok(), std::env::var_os(TOKENS_FILE_ENV).map(PathBuf::from))
    }

    /// From the two variables' values. Both set is an error, not a union: the file is what rotation edits, and a
    /// token also left in the environment would stay good after it was dropped from the file — the operator
    /// would believe it revoked. An empty variable counts as unset.
    pub fn from_vars(env: Option<String>, file: Option<PathBuf>) -> Result<TokenSource, TokensError> {
        let env = env.filter(|e| !e.trim().is_empty());
        let file = file.filter(|f| !f.as_os_str().is_empty());
        match (env, file) {
            (Some(_), Some(_)) => Err(TokensError::BothSources),
            (_, Some(path)) => Ok(TokenSource::File(path)),
            (env, None) => Ok(TokenSource::Env(env.unwrap_or_default())),
        }
    }

    /// The tokens it holds now.
    pub fn load(&self) -> Result<ServiceTokens, TokensError> {
        match self {
            TokenSource::Env(text) => ServiceTokens::parse(text),
            TokenSource::File(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| TokensError::Read { path: path.clone(), source })?;
                ServiceTokens::parse_file(&text, path)
            }
        }
    }
}

/// The tokens in force: read by every request without a lock, replaced whole by [`LiveTokens::reload`].
pub struct LiveTokens(ArcSwap<ServiceTokens>);

impl fmt::Debug for LiveTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.load().fmt(f)
    }
}

impl LiveTokens {
    /// `tokens` in force.
    pub fn new(tokens: ServiceTokens) -> LiveTokens {
        LiveTokens(ArcSwap::from_pointee(tokens))
    }

    /// The tokens in force now.
    pub fn current(&self) -> arc_swap::Guard<Arc<ServiceTokens>> {
        self.0.load()
    }

    /// Reads `source` again: a good read replaces the tokens in force (INFO: the services and their token
    /// counts), a bad one keeps them (ERROR: what is wrong, in words that hold no token).
    pub fn reload(&self, source: &TokenSource) -> Result<(), TokensError> {
        match source.load() {
            Ok(tokens) => {
                tracing::info!(services = ?tokens.summary(), "the API tokens were read again; these are in force");
                self.0.store(Arc::new(tokens));
                Ok(())
            }
            Err(e) => {
                let error = crate::jobs::executor::error_chain(&e);
                tracing::error!(%error, "the API tokens could not be read again; the tokens in force are kept");
                Err(e)
            }
        }
    }
}

/// What tells a changed file: its modification time, size and inode (a mounted secret is replaced by a new file
/// behind a symbolic link). `None`: it cannot be read now.
fn file_stamp(path: &Path) -> Option<(SystemTime, u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len(), meta.ino()))
}

/// Reads the tokens file again whenever it changes (looked at every `every`) and on SIGHUP, until `closing`.
pub fn watch(
    path: PathBuf,
    live: Arc<LiveTokens>,
    every: Duration,
    closing: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let source = TokenSource::File(path.clone());
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangup = signal(SignalKind::hangup())
            .inspect_err(|e| tracing::warn!(error = %e, "cannot watch SIGHUP; the tokens file is polled only"))
            .ok();
        let mut stamp = file_stamp(&path);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let hung_up = async {
                match hangup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = closing.cancelled() => return,
                _ = hung_up => tracing::info!("SIGHUP: reading the API tokens again"),
                _ = tick.tick() => {
                    let now = file_stamp(&path);
                    if now == stamp {
                        continue;
                    }
                    stamp = now;
                }
            }
            let _ = live.reload(&source);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    const C: &str = "cccccccccccccccccccccccccccccccc";

    #[test]
    fn tokens_name_their_service() {
        let t = ServiceTokens::parse(&format!("studio={A}, ops = {B}")).unwrap();
        assert_eq!(t.service_of(A).as_deref(), Some("studio"));
        assert_eq!(t.service_of(B).as_deref(), Some("ops"));
        assert_eq!(t.service_of("aaaa"), None);
        assert_eq!(t.service_of(""), None);
        assert_eq!(t.service_of(&"a".repeat(MAX_TOKEN_CHARS + 1)), None);
    }

    #[test]
    fn a_service_may_have_several_tokens() {
        let t = ServiceTokens::parse(&format!("studio={A},studio={B},ops={C}")).unwrap();
        assert_eq!(t.service_of(A).as_deref(), Some("studio"));
        assert_eq!(t.service_of(B).as_deref(), Some("studio"));
        assert_eq!(t.summary(), ["ops (1 token)", "studio (2 tokens)"]);
    }

    #[test]
    fn an_entry_may_name_the_operators_its_service_acts_for() {
        let t = ServiceTokens::parse(&format!("ops-bot={A} operators=alice|bob,ops-bot = {B}  operators=bob|alice"))
            .unwrap();
        let bot = t.identify(B).unwrap();
        assert_eq!(bot.name, "ops-bot");
        assert!(bot.may_act_for("alice") && bot.may_act_for("bob") && !bot.may_act_for("carol"));
        assert_eq!(t.summary(), ["ops-bot (2 tokens, for 2 operators)"]);
        let anyone = ServiceTokens::parse(&format!("studio={A}")).unwrap().identify(A).unwrap();
        assert!(anyone.may_act_for("carol"));
    }

    #[test]
    fn a_tokens_file_has_an_entry_a_line_and_comments() {
        let text =
            format!("# rotation: B replaces A\n\nstudio={A}\n  studio={B}\n# ops\nops-bot={C} operators=alice\n");
        let t = ServiceTokens::parse_file(&text, Path::new("/run/secrets/tokens")).unwrap();
        assert_eq!(t.summary(), ["ops-bot (1 token, for 1 operator)", "studio (2 tokens)"]);
        let e = ServiceTokens::parse_file(&format!("# x\nstudio={A}\nstudio {B}\n"), Path::new("/t")).unwrap_err();
        assert!(matches!(&e, TokensError::Malformed { at: Place::File { line: 3, .. } }), "{e:?}");
        assert_eq!(e.to_string(), "/t, line 3: not service=token (optionally followed by operators=name|name)");
    }

    /// Every bad list, asserted by kind, and no error's words hold a token — even one written where the service
    /// or an attribute belongs.
    #[test]
    fn bad_entries_are_refused_by_kind_without_repeating_a_token() {
        type IsKind = fn(&TokensError) -> bool;
        let cases: Vec<(String, IsKind)> = vec![
            (String::new(), |e| matches!(e, TokensError::None)),
            (" , ".into(), |e| matches!(e, TokensError::None)),
            ("studio".into(), |e| matches!(e, TokensError::Malformed { at: Place::Env(1) })),
            (format!("studio={A},={B}"), |e| matches!(e, TokensError::Malformed { at: Place::Env(2) })),
            ("studio=tiny-token".into(), |e| matches!(e, TokensError::Short { .. })),
            (format!("studio={}", "x".repeat(513)), |e| matches!(e, TokensError::Long { .. })),
            (format!("a={A},b={A}"), |e| matches!(e, TokensError::DuplicateToken { at: Place::Env(2), .. })),
            (format!("a={A},a={A}"), |e| matches!(e, TokensError::DuplicateToken { .. })),
            (format!("a={A} {B}"), |e| matches!(e, TokensError::UnknownAttribute { .. })),
            (format!("a={A} rate={B}"), |e| matches!(e, TokensError::UnknownAttribute { .. })),
            (format!("a={A} operators=x operators=y"), |e| matches!(e, TokensError::UnknownAttribute { .. })),
            (format!("a={A} operators="), |e| matches!(e, TokensError::BadOperators { .. })),
            (format!("a={A} operators=|"), |e| matches!(e, TokensError::BadOperators { .. })),
            (format!("a={A} operators=x||y"), |e| matches!(e, TokensError::BadOperators { .. })),
            (format!("a={A} operators=j\u{fc}rgen"), |e| matches!(e, TokensError::BadOperators { .. })),
            (format!("a={A} operators=x,a={B}"), |e| matches!(e, TokensError::InconsistentOperators { .. })),
            (format!("a={A} operators=x,a={B} operators=y"), |e| {
                matches!(e, TokensError::InconsistentOperators { .. })
            }),
        ];
        for (text, is_kind) in cases {
            let e = ServiceTokens::parse(&text).unwrap_err();
            assert!(is_kind(&e), "{text}: {e:?}");
            let words = format!("{e} {e:?}");
            assert!(
                ![A, B, "tiny-token", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"].iter().any(|t| words.contains(t)),
                "{words}"
            );
        }
        let debug = format!("{:?}", ServiceTokens::parse(&format!("studio={A}")).unwrap());
        assert!(debug.contains("studio") && !debug.contains(A), "{debug}");
    }

    #[test]
    fn the_tokens_come_from_the_environment_or_a_file_never_both() {
        let path = PathBuf::from("/run/secrets/tokens");
        let (file, env) = (Some(path.clone()), format!("studio={A}"));
        assert!(matches!(TokenSource::from_vars(Some(env.clone()), file.clone()), Err(TokensError::BothSources)));
        assert_eq!(TokenSource::from_vars(None, file.clone()).unwrap(), TokenSource::File(path.clone()));
        assert_eq!(TokenSource::from_vars(Some(" ".into()), file).unwrap(), TokenSource::File(path));
        assert_eq!(TokenSource::from_vars(Some(env.clone()), Some(PathBuf::new())).unwrap(), TokenSource::Env(env));
        assert!(matches!(TokenSource::from_vars(None, None).unwrap().load(), Err(TokensError::None)));
        let missing = TokenSource::File("/nonexistent/artemis-transfer-tokens".into()).load().unwrap_err();
        assert!(matches!(missing, TokensError::Read { .. }), "{missing:?}");
    }

    #[test]
    fn a_reload_replaces_the_tokens_or_keeps_them_when_the_file_is_bad() {
        let dir = std::env::temp_dir().join(format!("artemis-transfer-tokens-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens");
        std::fs::write(&path, format!("studio={A}\n")).unwrap();
        let source = TokenSource::File(path.clone());
        let live = LiveTokens::new(source.load().unwrap());
        std::fs::write(&path, format!("studio={B}\n")).unwrap();
        live.reload(&source).unwrap();
        assert_eq!((live.current().service_of(A), live.current().service_of(B).as_deref()), (None, Some("studio")));
        std::fs::write(&path, format!("studio={C} {A}\n")).unwrap();
        assert!(matches!(live.reload(&source), Err(TokensError::UnknownAttribute { .. })));
        assert_eq!(live.current().service_of(B).as_deref(), Some("studio"), "the tokens in force are kept");
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(live.reload(&source), Err(TokensError::Read { .. })));
        assert_eq!(live.current().service_of(B).as_deref(), Some("studio"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_metrics_token_is_optional_and_long() {
        assert!(ServiceTokens::metrics("").unwrap().is_none());
        assert!(matches!(ServiceTokens::metrics("short"), Err(TokensError::ShortMetrics)));
        let t = ServiceTokens::metrics(A).unwrap().unwrap();
        assert_eq!(t.service_of(A).as_deref(), Some("metrics"));
        assert_eq!(t.service_of(B), None);
    }
}
