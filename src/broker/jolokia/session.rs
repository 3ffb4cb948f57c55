//! A console session: one login, then every Jolokia request of this process to that endpoint carries its cookie.
//!
//! Why: the console's filter runs a JAAS login for every request that comes with basic auth alone, which costs
//! the broker ~2 ms of CPU a call; a request whose cookie names a live session is run as the session's user with
//! no login of its own (docs/broker-notes.md, "A console session spares the broker a login per call"). A request
//! still carries basic auth, so a session the broker has forgotten (a restart, a failover, a timeout) costs that
//! one request its login and nothing else. The session is renewed every [`RENEW_AFTER`], so a role removed or a
//! password changed on the broker reaches a running worker within that time.
//!
//! Only a long-lived process uses sessions ([`enable`]: the worker and `serve`), and it logs them out as it ends
//! ([`log_out_all`]): the 2.40 console keeps a session until the servlet container's timeout, which Artemis leaves
//! at the container's default, so a command line run every minute would otherwise leave a session on the broker
//! every minute. A one-shot command makes a call or two and gains nothing from a login of its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderValue, SET_COOKIE};
use sha2::{Digest, Sha256};

use crate::secret::Secret;

/// How long a session (or a refused login) is kept before the next request logs in again.
pub const RENEW_AFTER: Duration = Duration::from_secs(30);

/// Whether this process logs in to consoles ([`enable`]); off unless a long-lived process turns it on.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// This process makes many management calls for a long time (a worker, `serve`): its clients log in to each
/// console once and carry the session. Call [`log_out_all`] as it ends.
pub fn enable() {
    ENABLED.store(true, Ordering::Release);
}

/// Whether this process's clients use console sessions.
pub(super) fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// What a slot is kept under: the Jolokia URL, the user and a SHA-256 digest of the password — never the password
/// itself, which this process-wide map would otherwise hold for as long as the process runs. The password is part of
/// the key so that a client given a wrong one is refused, never carried by another client's session.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct SlotKey {
    url: String,
    user: String,
    password_digest: [u8; 32],
}

impl SlotKey {
    /// The key of the session of `user` with `password` at the Jolokia URL `url`.
    pub(super) fn new(url: &str, user: &str, password: &Secret<String>) -> SlotKey {
        let password_digest = Sha256::digest(password.expose().as_bytes()).into();
        SlotKey { url: url.to_string(), user: user.to_string(), password_digest }
    }
}

impl std::fmt::Debug for SlotKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the digest: an unsalted digest of a weak password gives the password away.
        f.debug_struct("SlotKey").field("url", &self.url).field("user", &self.user).finish_non_exhaustive()
    }
}

/// The slots of this process in use: a logout ([`log_out_all`]) takes every slot out.
static SLOTS: LazyLock<Mutex<HashMap<SlotKey, Arc<Slot>>>> = LazyLock::new(Default::default);

fn slots() -> std::sync::MutexGuard<'static, HashMap<SlotKey, Arc<Slot>>> {
    SLOTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends every console session this process holds (`GET …/auth/logout` with its cookie), each within `timeout`;
/// later requests use basic auth alone. Every slot is taken out of the map and logged out, so the map holds only
/// the slots used since, and a slot logged out never logs in again (a request that still holds it uses basic auth
/// alone). Failures are left: the broker's own timeout ends such a session.
pub async fn log_out_all(timeout: Duration) {
    ENABLED.store(false, Ordering::Release);
    let slots: Vec<Arc<Slot>> = std::mem::take(&mut *slots()).into_values().collect();
    for slot in slots {
        let state = std::mem::replace(&mut *slot.state.lock().await, State::LoggedOut);
        if let State::Open { cookie, logout: Some((http, url)), .. } = state {
            let sent = http.get(&url).header(reqwest::header::COOKIE, cookie.expose().as_str()).timeout(timeout).send();
            if let Err(e) = sent.await {
                tracing::debug!(error = %e.without_url(), "a console logout did not answer");
            }
        }
    }
}

/// What this process knows about one endpoint's console session.
#[derive(Default)]
enum State {
    /// Never tried.
    #[default]
    Unknown,
    /// Logged in at `since`; `cookie` is the `Cookie` header that names the session, `logout` the HTTP client and
    /// page that end it.
    Open { cookie: Secret<String>, since: Instant, logout: Option<(reqwest::Client, String)> },
    /// The console had no login for us at `since` (no such page, refused, throttled): basic auth alone until
    /// [`RENEW_AFTER`] has passed.
    Refused { since: Instant },
    /// Logged out by [`log_out_all`], and out of the map: basic auth alone for a request that still holds it (the
    /// next one's slot is a new one).
    LoggedOut,
}

/// One endpoint's session, shared by every client of the same URL and credentials in this process ([`SlotKey`]).
#[derive(Default)]
pub(super) struct Slot {
    state: tokio::sync::Mutex<State>,
}

/// A login's session: its cookie, and the client and page that log it out (`None`: it is left to the broker).
pub(super) struct Login {
    pub(super) cookie: Secret<String>,
    pub(super) logout: Option<(reqwest::Client, String)>,
}

/// Whether a client of this endpoint has a session now (what the tests ask of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionStatus {
    /// No login tried yet.
    NotTried,
    /// Requests carry a session cookie.
    Open,
    /// The console refused a login: requests carry basic auth alone.
    Refused,
}

/// The slot of `key` in this process, made empty on first use (and again after [`log_out_all`]). A client asks for
/// it at each request, so that it always uses the slot in the map.
pub(super) fn slot(key: &SlotKey) -> Arc<Slot> {
    let mut slots = slots();
    if let Some(slot) = slots.get(key) {
        return Arc::clone(slot);
    }
    let slot = Arc::new(Slot::default());
    slots.insert(key.clone(), Arc::clone(&slot));
    slot
}

/// Whether requests of `key` carry a session now (no slot: none tried since the last logout).
pub(super) async fn status(key: &SlotKey) -> SessionStatus {
    let slot = slots().get(key).cloned();
    match slot {
        Some(slot) => slot.status().await,
        None => SessionStatus::NotTried,
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the cookie: it is a credential.
        f.write_str("Slot")
    }
}

impl Slot {
    /// The cookie to send, logging in first when there is no fresh session (`login` is given the cookie of the
    /// session it replaces, so the broker ends that one). Callers wait for one login rather than each making one.
    /// A login that did not reach the broker changes nothing and is the caller's error: the request it was for
    /// would not reach it either, and waiting for both would double the time to say so.
    pub(super) async fn cookie<F, Fut, E>(&self, login: F) -> Result<Option<Secret<String>>, E>
    where
        F: FnOnce(Option<Secret<String>>) -> Fut,
        Fut: std::future::Future<Output = Result<Option<Login>, E>>,
    {
        let mut state = self.state.lock().await;
        let replaced = match &*state {
            State::Open { cookie, since, .. } if since.elapsed() < RENEW_AFTER => return Ok(Some(cookie.clone())),
            State::Refused { since } if since.elapsed() < RENEW_AFTER => return Ok(None),
            State::LoggedOut => return Ok(None),
            State::Open { cookie, .. } => Some(cookie.clone()),
            _ => None,
        };
        let since = Instant::now();
        let login = login(replaced).await?;
        let cookie = login.as_ref().map(|l| l.cookie.clone());
        *state = match login {
            Some(Login { cookie, logout }) => State::Open { cookie, since, logout },
            None => State::Refused { since },
        };
        Ok(cookie)
    }

    /// Whether requests carry a session now.
    pub(super) async fn status(&self) -> SessionStatus {
        match &*self.state.lock().await {
            State::Unknown | State::LoggedOut => SessionStatus::NotTried,
            State::Open { .. } => SessionStatus::Open,
            State::Refused { .. } => SessionStatus::Refused,
        }
    }
}

/// The console's login and logout pages beside a Jolokia URL: `…/console/jolokia` → `…/console/auth/login` and
/// `…/console/auth/logout`, worked out once, when a client is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConsolePages {
    /// Where a session starts.
    pub(super) login: String,
    /// Where it ends.
    pub(super) logout: String,
}

impl ConsolePages {
    /// The pages beside `jolokia_url`; `None` when the URL does not end in `/jolokia` (an agent not behind the
    /// console has no login page: basic auth alone).
    pub(super) fn beside(jolokia_url: &str) -> Option<ConsolePages> {
        let login = page_beside(jolokia_url, "auth/login")?;
        let logout = page_beside(jolokia_url, "auth/logout")?;
        Some(ConsolePages { login, logout })
    }
}

fn page_beside(jolokia_url: &str, page: &str) -> Option<String> {
    let mut url = reqwest::Url::parse(jolokia_url).ok()?;
    let path = url.path().trim_end_matches('/');
    let base = path.strip_suffix("/jolokia")?;
    let page = format!("{base}/{page}");
    url.set_path(&page);
    url.set_query(None);
    Some(url.to_string())
}

/// The `Cookie` header that returns the cookies a login answer set: each `Set-Cookie`'s `name=value`, without
/// its attributes. `None` when it set none.
pub(super) fn cookie_header<'a>(set_cookies: impl Iterator<Item = &'a HeaderValue>) -> Option<Secret<String>> {
    let pairs: Vec<&str> = set_cookies
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(str::trim)
        .filter(|pair| pair.split_once('=').is_some_and(|(name, _)| !name.is_empty()))
        .collect();
    (!pairs.is_empty()).then(|| Secret::new(pairs.join("; ")))
}

/// The `Set-Cookie` headers of an answer.
pub(super) fn set_cookies(headers: &reqwest::header::HeaderMap) -> impl Iterator<Item = &HeaderValue> {
    headers.get_all(SET_COOKIE).iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that read or empty the process-wide map, one at a time.
    static MAP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    #[test]
    fn the_login_page_sits_beside_the_agent() {
        let login = |url: &str| ConsolePages::beside(url).map(|pages| pages.login);
        assert_eq!(
            login("http://127.0.0.1:8161/console/jolokia").as_deref(),
            Some("http://127.0.0.1:8161/console/auth/login")
        );
        assert_eq!(
            login("https://b.example:8443/console/jolokia/").as_deref(),
            Some("https://b.example:8443/console/auth/login")
        );
        assert_eq!(login("http://h/jolokia").as_deref(), Some("http://h/auth/login"));
        assert_eq!(login("http://h/console/jolokia-agent"), None);
        assert_eq!(login("not a url"), None);
        assert_eq!(
            ConsolePages::beside("http://127.0.0.1:8161/console/jolokia").map(|pages| pages.logout).as_deref(),
            Some("http://127.0.0.1:8161/console/auth/logout")
        );
    }

    #[test]
    fn the_login_and_logout_pages_are_worked_out_together() {
        assert_eq!(
            ConsolePages::beside("https://b.example:8443/console/jolokia/?maxDepth=3"),
            Some(ConsolePages {
                login: "https://b.example:8443/console/auth/login".into(),
                logout: "https://b.example:8443/console/auth/logout".into(),
            })
        );
        // Both or neither: a login with nowhere to log out never happens.
        assert_eq!(ConsolePages::beside("http://h/jolokia-agent"), None);
    }

    #[test]
    fn the_cookie_header_keeps_names_and_values_only() {
        let set = [
            HeaderValue::from_static("JSESSIONID=node01abc.node0; Path=/console; HttpOnly; SameSite=Strict"),
            HeaderValue::from_static("other=1"),
            HeaderValue::from_static("=nameless; Path=/"),
        ];
        let header = cookie_header(set.iter()).expect("two cookies");
        assert_eq!(header.expose(), "JSESSIONID=node01abc.node0; other=1");
        assert!(cookie_header(std::iter::empty()).is_none());
    }

    #[test]
    fn a_wrong_password_has_a_session_of_its_own() {
        let _map = MAP.blocking_lock();
        let key = |password: &str| SlotKey::new("http://h/console/jolokia", "u", &Secret::new(password.into()));
        let right = slot(&key("right"));
        let again = slot(&key("right"));
        let wrong = slot(&key("wrong"));
        assert!(Arc::ptr_eq(&right, &again));
        assert!(!Arc::ptr_eq(&right, &wrong));
        let other_user = slot(&SlotKey::new("http://h/console/jolokia", "v", &Secret::new("right".into())));
        assert!(!Arc::ptr_eq(&right, &other_user));
    }

    #[test]
    fn a_slot_is_kept_under_a_digest_of_the_password_never_the_password() {
        let password = "hunter2-the-password";
        let key = SlotKey::new("http://h/console/jolokia", "u", &Secret::new(password.into()));
        assert_eq!(key.password_digest, <[u8; 32]>::from(Sha256::digest(password.as_bytes())));
        assert_ne!(key, SlotKey::new("http://h/console/jolokia", "u", &Secret::new("hunter3-the-password".into())));
        let shown = format!("{key:?}");
        assert!(shown.contains("http://h/console/jolokia") && !shown.contains(password), "{shown}");
    }

    #[tokio::test]
    async fn a_logged_out_slot_leaves_the_map_and_is_never_logged_in_again() {
        let _map = MAP.lock().await;
        let key = SlotKey::new("http://logged-out/console/jolokia", "u", &Secret::new("p".into()));
        let open = slot(&key);
        let login = || Login { cookie: Secret::new("s=1".to_string()), logout: None };
        open.cookie(|_| async { Ok::<_, ()>(Some(login())) }).await.unwrap();
        assert_eq!(status(&key).await, SessionStatus::Open);

        log_out_all(Duration::from_secs(1)).await;
        assert!(!slots().contains_key(&key), "the slot left the map");
        assert_eq!(status(&key).await, SessionStatus::NotTried);
        // A request that held the slot before the logout: basic auth alone, no login on a slot nobody logs out.
        let held = open.cookie(|_| async { panic!("a logged-out slot logs in again") as Result<_, ()> }).await;
        assert!(held.unwrap().is_none());
        assert_eq!(open.status().await, SessionStatus::NotTried);
        // The next request has a new slot, in the map.
        let next = slot(&key);
        assert!(!Arc::ptr_eq(&open, &next));
        assert!(Arc::ptr_eq(&next, &slot(&key)));
    }

    /// The docs give the renewal time in words (docs/permissions.md, ADR 0011): they say [`RENEW_AFTER`].
    #[test]
    fn the_docs_say_the_renewal_time() {
        let secs = RENEW_AFTER.as_secs();
        for (doc, text, said) in [
            (
                "docs/permissions.md",
                include_str!("../../../docs/permissions.md"),
                [format!("renewed every {secs} seconds"), format!("within {secs} seconds")],
            ),
            (
                "docs/adr/0011-a-batch-is-a-pipeline-of-steps.md",
                include_str!("../../../docs/adr/0011-a-batch-is-a-pipeline-of-steps.md"),
                [format!("renew the session every {secs} s"), format!("within the {secs} s renewal")],
            ),
        ] {
            crate::docs_said::assert_says(doc, text, &said, &format!("session::RENEW_AFTER is {secs} s"));
        }
    }

    #[tokio::test]
    async fn one_login_serves_until_it_is_due_again_and_a_refusal_is_not_retried_at_once() {
        let slot = Slot::default();
        assert_eq!(slot.status().await, SessionStatus::NotTried);
        let unreached = slot.cookie(|_| async { Err::<Option<Login>, _>("unreachable") }).await;
        assert_eq!(unreached.err(), Some("unreachable"));
        assert_eq!(slot.status().await, SessionStatus::NotTried, "a login that reached nothing changes nothing");
        let login = || Login { cookie: Secret::new("s=1".to_string()), logout: None };
        let first = slot.cookie(|_| async { Ok::<_, ()>(Some(login())) }).await;
        assert_eq!(first.unwrap().as_ref().map(|c| c.expose().as_str()), Some("s=1"));
        let again = slot.cookie(|_| async { panic!("a fresh session logs in again") as Result<_, ()> }).await;
        assert_eq!(again.unwrap().as_ref().map(|c| c.expose().as_str()), Some("s=1"));

        let refused = Slot::default();
        assert!(refused.cookie(|_| async { Ok::<_, ()>(None) }).await.unwrap().is_none());
        assert_eq!(refused.status().await, SessionStatus::Refused);
        let later = refused.cookie(|_| async { panic!("a refusal is retried at once") as Result<_, ()> }).await;
        assert!(later.unwrap().is_none());
    }
}
