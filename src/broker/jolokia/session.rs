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

/// A slot's key: the Jolokia URL, the user and the password.
type SlotKey = (String, String, String);

/// Every slot of this process, for [`log_out_all`].
static SLOTS: LazyLock<Mutex<HashMap<SlotKey, Arc<Slot>>>> = LazyLock::new(Default::default);

/// Ends every console session this process holds (`GET …/auth/logout` with its cookie), each within `timeout`;
/// later requests use basic auth alone. Failures are left: the broker's own timeout ends such a session.
pub async fn log_out_all(timeout: Duration) {
    ENABLED.store(false, Ordering::Release);
    let slots: Vec<Arc<Slot>> = SLOTS.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
    for slot in slots {
        let state = std::mem::take(&mut *slot.state.lock().await);
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
}

/// One endpoint's session, shared by every client of the same URL and credentials in this process.
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

/// The slot of `url`, `user` and `password` in this process (created empty on first use). The password is part
/// of the key: a client given a wrong one must be refused, never carried by another client's session.
pub(super) fn slot(url: &str, user: &str, password: &Secret<String>) -> Arc<Slot> {
    let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    let key = (url.to_string(), user.to_string(), password.expose().clone());
    Arc::clone(slots.entry(key).or_default())
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
            State::Unknown => SessionStatus::NotTried,
            State::Open { .. } => SessionStatus::Open,
            State::Refused { .. } => SessionStatus::Refused,
        }
    }
}

/// The console's login page beside a Jolokia URL: `…/console/jolokia` → `…/console/auth/login`. `None` when the
/// URL does not end in `/jolokia` (an agent not behind the console has no login page: basic auth alone).
pub(super) fn login_url(jolokia_url: &str) -> Option<String> {
    page_beside(jolokia_url, "auth/login")
}

/// The console's logout page beside a Jolokia URL (as [`login_url`]).
pub(super) fn logout_url(jolokia_url: &str) -> Option<String> {
    page_beside(jolokia_url, "auth/logout")
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

    #[test]
    fn the_login_page_sits_beside_the_agent() {
        assert_eq!(
            login_url("http://127.0.0.1:8161/console/jolokia").as_deref(),
            Some("http://127.0.0.1:8161/console/auth/login")
        );
        assert_eq!(
            login_url("https://b.example:8443/console/jolokia/").as_deref(),
            Some("https://b.example:8443/console/auth/login")
        );
        assert_eq!(login_url("http://h/jolokia").as_deref(), Some("http://h/auth/login"));
        assert_eq!(login_url("http://h/console/jolokia-agent"), None);
        assert_eq!(login_url("not a url"), None);
        assert_eq!(
            logout_url("http://127.0.0.1:8161/console/jolokia").as_deref(),
            Some("http://127.0.0.1:8161/console/auth/logout")
        );
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
        let right = slot("http://h/console/jolokia", "u", &Secret::new("right".into()));
        let again = slot("http://h/console/jolokia", "u", &Secret::new("right".into()));
        let wrong = slot("http://h/console/jolokia", "u", &Secret::new("wrong".into()));
        assert!(Arc::ptr_eq(&right, &again));
        assert!(!Arc::ptr_eq(&right, &wrong));
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
