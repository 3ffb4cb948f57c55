//! The HTTP side of Jolokia: one node's endpoint, basic auth, the `Origin` header strict CORS checking wants,
//! single and batched requests with per-entry results, and agent version detection.
//!
//! Jolokia 1.7 (Artemis ≤ 2.39) and 2.1 (2.40) both answer HTTP 200 and put each request's status in the body;
//! non-200 statuses come from the console's login filter (401/403, and 429 when 2.40 throttles logins).

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, RETRY_AFTER};
use serde_json::Value;

use artemis_core::tls::{StoreRole, TlsFailure, TlsOptions};

use super::error::{AgentError, JolokiaError};
use super::request::Request;
use super::session::{self, ConsolePages, SessionStatus, SlotKey};
use crate::broker::permits::PermitSource;
use crate::secret::Secret;

/// Where one node's Jolokia agent is and how to log in to it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The node's name, for error messages.
    pub node: String,
    /// `http://host:port/console/jolokia`.
    pub url: String,
    /// The management user.
    pub user: String,
    /// Its password; never logged.
    pub password: Secret<String>,
    /// The `Origin` header; `None` derives `scheme://host` from the URL, which matches the
    /// `*://<http-host>*` pattern `artemis create` writes into `jolokia-access.xml`.
    pub origin: Option<String>,
    /// For an `https://` URL: the CA(s) to trust instead of the public web roots, the client certificate, and
    /// whether the host name is verified. The registry gives each endpoint the material of its Core URL
    /// (`crate::registry::tls`). `None`: the public web roots, no client certificate.
    pub tls: Option<TlsOptions>,
}

impl Endpoint {
    fn origin(&self) -> String {
        if let Some(o) = &self.origin {
            return o.clone();
        }
        match reqwest::Url::parse(&self.url) {
            Ok(u) => format!("{}://{}", u.scheme(), u.host_str().unwrap_or("localhost")),
            Err(_) => "http://localhost".to_string(),
        }
    }
}

/// The Jolokia agent's major version: 1.x on Artemis ≤ 2.39 (HawtIO 2), 2.x on 2.40 (the new console).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentVersion {
    /// The agent's version string, e.g. `2.1.1`.
    pub agent: String,
    /// Its major number.
    pub major: u32,
}

/// A client of one node's Jolokia agent.
#[derive(Debug, Clone)]
pub struct JolokiaClient {
    endpoint: Endpoint,
    origin: HeaderValue,
    timeout: Duration,
    /// The HTTP client, or why the endpoint's TLS material could not be used (every request then fails with it).
    http: Result<reqwest::Client, JolokiaError>,
    permits: Option<Arc<dyn PermitSource>>,
    /// The console's login and logout pages, when the agent sits behind one.
    pages: Option<ConsolePages>,
    /// What this process's console session with the endpoint is kept under: shared with every client of the same
    /// URL and credentials.
    session: SlotKey,
}

impl JolokiaClient {
    /// A client with a timeout on every request.
    pub fn new(endpoint: Endpoint, timeout: Duration) -> JolokiaClient {
        let origin = HeaderValue::from_str(&endpoint.origin()).unwrap_or(HeaderValue::from_static("http://localhost"));
        let http = http_client(&endpoint, timeout);
        let pages = ConsolePages::beside(&endpoint.url);
        let session = SlotKey::new(&endpoint.url, &endpoint.user, &endpoint.password);
        JolokiaClient { endpoint, origin, timeout, http, permits: None, pages, session }
    }

    /// Every request first takes permits from `permits` (one per request in a batch), so the calls of all
    /// replicas to one node stay under the shared per-node rate.
    pub fn with_permits(mut self, permits: Arc<dyn PermitSource>) -> JolokiaClient {
        self.permits = Some(permits);
        self
    }

    /// The node this client talks to.
    pub fn node(&self) -> &str {
        &self.endpoint.node
    }

    /// The management user it logs in as (staging checks that user's broker roles).
    pub fn user(&self) -> &str {
        &self.endpoint.user
    }

    async fn post(&self, body: &Value, cost: u32) -> Result<Value, JolokiaError> {
        let node = || self.endpoint.node.clone();
        if let Some(permits) = &self.permits {
            permits
                .acquire(&self.endpoint.node, cost)
                .await
                .map_err(|e| JolokiaError::NoPermit { node: node(), reason: e.reason })?;
        }
        let cookie = self.session_cookie().await?;
        tracing::trace!(node = %self.endpoint.node, request = %what(body), "management request");
        let url = format!("{}/", self.endpoint.url.trim_end_matches('/'));
        // Basic auth as well as the session: a session the broker has forgotten costs this request a login, no more.
        let mut post = self
            .http
            .as_ref()
            .map_err(Clone::clone)?
            .post(url)
            .basic_auth(&self.endpoint.user, Some(self.endpoint.password.expose()))
            .header("Origin", self.origin.clone());
        if let Some(cookie) = cookie {
            post = post.header(reqwest::header::COOKIE, cookie.expose().as_str());
        }
        let resp = post.json(body).send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status().as_u16();
        match status {
            200 => {}
            401 | 403 => return Err(JolokiaError::NotAuthenticated { node: node(), status }),
            429 => {
                let retry_after = resp
                    .headers()
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                return Err(JolokiaError::LoginThrottled { node: node(), retry_after });
            }
            _ => return Err(JolokiaError::Http { node: node(), status }),
        }
        let text = resp.text().await.map_err(|e| self.transport_error(e))?;
        serde_json::from_str(&text).map_err(|e| JolokiaError::BadAnswer { node: node(), reason: e.to_string() })
    }

    /// The session cookie for the next request: the shared session's, logged in first when it is due.
    async fn session_cookie(&self) -> Result<Option<Secret<String>>, JolokiaError> {
        let Some(pages) = self.pages.as_ref().filter(|_| session::enabled()) else { return Ok(None) };
        session::slot(&self.session).cookie(|replaced| self.login(pages, replaced)).await
    }

    /// Logs in to the console: the session's cookie, or `None` when the console gave none (no such page, a
    /// refusal, a throttle: the request's own basic auth then says what is wrong, in its words). A transport
    /// failure is the request's error.
    async fn login(
        &self,
        pages: &ConsolePages,
        replaced: Option<Secret<String>>,
    ) -> Result<Option<session::Login>, JolokiaError> {
        tracing::trace!(node = %self.endpoint.node, "console login");
        let credentials = serde_json::json!({
            "username": self.endpoint.user,
            "password": self.endpoint.password.expose(),
        });
        let http = self.http.as_ref().map_err(Clone::clone)?;
        let mut post = http.post(&pages.login).header("Origin", self.origin.clone());
        if let Some(cookie) = replaced {
            post = post.header(reqwest::header::COOKIE, cookie.expose().as_str());
        }
        let resp = post.json(&credentials).send().await.map_err(|e| self.transport_error(e))?;
        if resp.status().as_u16() != 200 {
            return Ok(None);
        }
        let logout = Some((http.clone(), pages.logout.clone()));
        Ok(session::cookie_header(session::set_cookies(resp.headers())).map(|cookie| session::Login { cookie, logout }))
    }

    /// Whether this client's requests carry a console session now.
    pub async fn session_status(&self) -> SessionStatus {
        session::status(&self.session).await
    }

    fn transport_error(&self, e: reqwest::Error) -> JolokiaError {
        let node = self.endpoint.node.clone();
        if e.is_timeout() {
            JolokiaError::Timeout { node, after: self.timeout }
        } else if let Some(failure) = TlsFailure::find_in(&e) {
            JolokiaError::Tls { node, url: self.endpoint.url.clone(), failure }
        } else {
            // The URL may carry no secret (credentials go in a header), but strip it anyway: words only.
            JolokiaError::Unreachable { node, reason: e.without_url().to_string() }
        }
    }

    /// Sends one request and returns its `value`, or the agent's error for it.
    pub async fn request(&self, request: &Request) -> Result<Value, JolokiaError> {
        let answer = self.post(&request.to_json(), request.cost()).await?;
        entry_result(&answer).map_err(|error| JolokiaError::Agent { node: self.endpoint.node.clone(), error })
    }

    /// Sends several requests in one HTTP round trip. The outer error is the transport's (nothing answered);
    /// each entry has its own result, in the order given.
    pub async fn batch(&self, requests: &[Request]) -> Result<Vec<Result<Value, AgentError>>, JolokiaError> {
        if requests.is_empty() {
            return Ok(Vec::new());
        }
        let body = Value::Array(requests.iter().map(Request::to_json).collect());
        let answer = self.post(&body, requests.iter().map(Request::cost).sum()).await?;
        let entries = match answer {
            Value::Array(entries) if entries.len() == requests.len() => entries,
            // A whole-batch refusal (e.g. CORS) comes back as one object, not an array.
            Value::Object(_) => {
                let error = entry_result(&answer).err().unwrap_or_else(|| {
                    AgentError::from_parts(-1, None, "a batched request was answered with a single result")
                });
                return Err(JolokiaError::Agent { node: self.endpoint.node.clone(), error });
            }
            other => {
                return Err(JolokiaError::BadAnswer {
                    node: self.endpoint.node.clone(),
                    reason: format!("expected {} results, got {}", requests.len(), short(&other)),
                })
            }
        };
        Ok(entries.iter().map(entry_result).collect())
    }

    /// The agent's version (`{"type":"version"}`).
    pub async fn agent_version(&self) -> Result<AgentVersion, JolokiaError> {
        let value = self.request(&Request::Version).await?;
        let agent = value["agent"].as_str().unwrap_or_default().to_string();
        let major = agent.split('.').next().and_then(|m| m.parse().ok()).ok_or_else(|| JolokiaError::BadAnswer {
            node: self.endpoint.node.clone(),
            reason: format!("no agent version in {}", short(&value)),
        })?;
        Ok(AgentVersion { agent, major })
    }
}

/// The HTTP client of `endpoint`: with its TLS material when it has some.
fn http_client(endpoint: &Endpoint, timeout: Duration) -> Result<reqwest::Client, JolokiaError> {
    let mut builder = reqwest::Client::builder().timeout(timeout);
    if let Some(tls) = &endpoint.tls {
        let unusable = |role, path: &std::path::Path, fault: String| JolokiaError::Tls {
            node: endpoint.node.clone(),
            url: endpoint.url.clone(),
            failure: TlsFailure::Material { role, path: path.to_owned(), fault },
        };
        let read = |role, path: &std::path::Path| {
            std::fs::read(path).map_err(|e| unusable(role, path, format!("cannot be read ({e})")))
        };
        if !tls.ca_files.is_empty() {
            // The private CA replaces the public roots, as for the Core connection.
            builder = builder.tls_built_in_root_certs(false);
        }
        for path in &tls.ca_files {
            let certs = reqwest::Certificate::from_pem_bundle(&read(StoreRole::Trust, path)?)
                .map_err(|_| unusable(StoreRole::Trust, path, "holds no usable PEM certificate".into()))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some(client) = &tls.client {
            // Read (and decrypted with its passphrase) as the Core connection reads it, in the same words.
            let pem = artemis_core::tls::identity_pem(client).map_err(|failure| JolokiaError::Tls {
                node: endpoint.node.clone(),
                url: endpoint.url.clone(),
                failure,
            })?;
            // Never the parser's words: they may quote the key.
            let identity = reqwest::Identity::from_pem(pem.as_bytes()).map_err(|_| {
                unusable(StoreRole::Key, &client.key_file, "is not a usable PEM certificate chain and key".into())
            })?;
            builder = builder.identity(identity);
        }
        builder = builder.danger_accept_invalid_hostnames(!tls.verify_host);
    }
    builder.build().map_err(|e| JolokiaError::Unreachable {
        node: endpoint.node.clone(),
        reason: format!("the HTTP client could not be built: {}", e.without_url()),
    })
}

/// One entry of a Jolokia answer: its `value` on status 200, else its error.
fn entry_result(entry: &Value) -> Result<Value, AgentError> {
    match entry["status"].as_i64() {
        Some(200) => Ok(entry.get("value").cloned().unwrap_or(Value::Null)),
        status => Err(AgentError::from_parts(
            status.unwrap_or(-1),
            entry["error_type"].as_str().map(str::to_string),
            entry["error"].as_str().unwrap_or("(the agent gave no error text)"),
        )),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!("{}…", &s[..s.char_indices().nth(200).map_or(s.len(), |(i, _)| i)])
    } else {
        s
    }
}

/// What a request asks, for the trace that counts management calls: each entry's type and operation or attribute
/// (never its arguments: a filter or an id list may be long, and says nothing about the cost of the call).
fn what(body: &Value) -> String {
    let entry = |e: &Value| {
        let kind = e["type"].as_str().unwrap_or("?");
        let name = match (&e["operation"], &e["attribute"]) {
            (Value::String(op), _) => op.clone(),
            (_, Value::String(attribute)) => attribute.clone(),
            (_, Value::Array(attributes)) => attributes.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("+"),
            _ => String::new(),
        };
        format!("{kind} {name}")
    };
    match body {
        Value::Array(entries) => entries.iter().map(entry).collect::<Vec<_>>().join(", "),
        one => entry(one),
    }
}
