//! Errors of the Jolokia client, typed so callers decide without reading text: a node that does not answer,
//! credentials refused, a login throttled (never retried in a loop), an MBean that does not exist, a broker
//! busy with another management task, and the broker's own refusal in its words.

use std::time::Duration;

/// What went wrong asking one node's Jolokia agent.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum JolokiaError {
    /// No HTTP answer: the node is down, stopped (SIGSTOP) or unreachable.
    #[error("node {node} did not answer its management endpoint: {reason}")]
    Unreachable {
        /// The node.
        node: String,
        /// The transport's words.
        reason: String,
    },
    /// No answer within the timeout.
    #[error("node {node} did not answer its management endpoint within {after:?}")]
    Timeout {
        /// The node.
        node: String,
        /// The timeout that ran out.
        after: Duration,
    },
    /// TLS to the management endpoint failed: its certificate did not verify, it wanted a client certificate,
    /// the TLS material could not be used.
    #[error("node {node}'s management endpoint {url}: TLS failed: {failure}")]
    Tls {
        /// The node.
        node: String,
        /// The endpoint's URL (it carries no secret: the registry refuses URLs that do).
        url: String,
        /// What failed.
        failure: artemis_core::TlsFailure,
    },
    /// HTTP 401/403 from the console's login filter: wrong user or password, or a user without the console role.
    #[error(
        "node {node} refused the management login (HTTP {status}): check the user and password, and that the \
         user has a role listed in the broker's hawtio roles (artemis.profile `HAWTIO_ROLES`)"
    )]
    NotAuthenticated {
        /// The node.
        node: String,
        /// 401 or 403.
        status: u16,
    },
    /// HTTP 429: the 2.40 console locks a user out after three failed logins, doubling up to a day. Never retried
    /// in a loop: that would only lengthen the lock-out.
    #[error("node {node} is throttling management logins after failed attempts; retry after {retry_after:?}")]
    LoginThrottled {
        /// The node.
        node: String,
        /// The `Retry-After` the console sent, when it sent one.
        retry_after: Option<Duration>,
    },
    /// Another HTTP status than 200 (a proxy, a console error page).
    #[error("node {node} answered HTTP {status} on its management endpoint")]
    Http {
        /// The node.
        node: String,
        /// The HTTP status.
        status: u16,
    },
    /// The answer was not the JSON Jolokia sends.
    #[error("node {node} sent an answer that is not Jolokia JSON: {reason}")]
    BadAnswer {
        /// The node.
        node: String,
        /// What did not parse.
        reason: String,
    },
    /// The per-node rate limiter could not grant permits.
    #[error("no management permit for node {node}: {reason}")]
    NoPermit {
        /// The node.
        node: String,
        /// Why.
        reason: String,
    },
    /// Jolokia answered this request with an error status in its body.
    #[error("node {node}: {}", .error.message)]
    Agent {
        /// The node.
        node: String,
        /// The agent's error.
        error: AgentError,
    },
}

/// The kind of an error Jolokia reported for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentErrorKind {
    /// 404: the MBean or attribute does not exist (a queue that is not there, an attribute of a newer version).
    NotFound,
    /// 403: the JMX role access (management.xml) or the CORS policy refused it.
    Forbidden,
    /// 400: bad arguments, or the broker's IllegalArgumentException (e.g. AMQ229049 "No queue found").
    BadRequest,
    /// AMQ229245: the broker's management lock is held by another long task; try again later.
    Busy,
    /// 500 and anything else: the operation failed on the broker.
    Failed,
}

/// One request's error as Jolokia reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    /// What kind of error.
    pub kind: AgentErrorKind,
    /// Jolokia's status number.
    pub status: i64,
    /// The Java exception class, when given.
    pub error_type: Option<String>,
    /// The broker's words (Jolokia's `error`, with the exception class prefix removed).
    pub message: String,
}

impl AgentError {
    /// Builds from Jolokia's `status`, `error_type` and `error` fields.
    pub fn from_parts(status: i64, error_type: Option<String>, error: &str) -> AgentError {
        // Jolokia writes "<class> : <message>"; the words after the class are the broker's.
        let message = match error.split_once(" : ") {
            Some((class, rest)) if !class.contains(' ') => rest.to_string(),
            _ => error.to_string(),
        };
        let kind = if message.contains("AMQ229245") {
            AgentErrorKind::Busy
        } else {
            match status {
                404 => AgentErrorKind::NotFound,
                403 => AgentErrorKind::Forbidden,
                400 => AgentErrorKind::BadRequest,
                _ => AgentErrorKind::Failed,
            }
        };
        AgentError { kind, status, error_type, message }
    }

    /// The broker's message id (`AMQ229049` …) when the message starts with one.
    pub fn amq_id(&self) -> Option<&str> {
        let word = self.message.split(|c: char| !c.is_ascii_alphanumeric()).find(|w| w.starts_with("AMQ"))?;
        (word.len() == 9 && word[3..].chars().all(|c| c.is_ascii_digit())).then_some(word)
    }
}

impl std::fmt::Display for AgentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl JolokiaError {
    /// The agent error, when Jolokia answered with one.
    pub fn agent(&self) -> Option<&AgentError> {
        match self {
            JolokiaError::Agent { error, .. } => Some(error),
            _ => None,
        }
    }

    /// True when the node did not answer at all (down, stopped, unreachable, timed out): "could not be checked".
    pub fn is_unreachable(&self) -> bool {
        matches!(self, JolokiaError::Unreachable { .. } | JolokiaError::Timeout { .. })
    }

    /// True when the MBean or attribute does not exist.
    pub fn is_not_found(&self) -> bool {
        self.agent().is_some_and(|e| e.kind == AgentErrorKind::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_errors_are_classified() {
        let e = AgentError::from_parts(
            400,
            Some("java.lang.IllegalArgumentException".into()),
            "java.lang.IllegalArgumentException : AMQ229049: No queue found for nope",
        );
        assert_eq!(e.kind, AgentErrorKind::BadRequest);
        assert_eq!(e.message, "AMQ229049: No queue found for nope");
        assert_eq!(e.amq_id(), Some("AMQ229049"));
        let busy =
            AgentError::from_parts(500, None, "x.Y : AMQ229245: Management controller is busy with another task");
        assert_eq!(busy.kind, AgentErrorKind::Busy);
        let nf = AgentError::from_parts(404, None, "javax.management.InstanceNotFoundException : org.apache…");
        assert_eq!(nf.kind, AgentErrorKind::NotFound);
        assert_eq!(nf.amq_id(), None);
        let plain = AgentError::from_parts(500, None, "something went wrong : badly");
        assert_eq!(plain.message, "something went wrong : badly");
    }
}
