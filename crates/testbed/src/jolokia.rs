//! A small Jolokia client for setting up and checking brokers in tests.
//!
//! Deliberately separate from the application's own management client: a test must not judge the code under
//! test with that same code. Only what tests need: read, exec, queue create/destroy, depths, broker state.

use std::time::Duration;

use serde_json::{json, Value};

use crate::config::Node;

/// What went wrong talking to Jolokia.
#[derive(Debug, thiserror::Error)]
pub enum JolokiaError {
    /// The HTTP request failed (node down, stopped, refused).
    #[error("jolokia on {node} did not answer: {source}")]
    Http {
        /// The node.
        node: String,
        /// The transport error.
        source: reqwest::Error,
    },
    /// HTTP answered with a non-200 status (403 bad credentials or role, 429 login throttled).
    #[error("jolokia on {node} answered HTTP {status}")]
    HttpStatus {
        /// The node.
        node: String,
        /// The HTTP status.
        status: u16,
    },
    /// Jolokia answered, with an error status in its body.
    #[error("jolokia on {node}: {status} {error}")]
    Agent {
        /// The node.
        node: String,
        /// Jolokia's status (400, 403, 404, 500).
        status: i64,
        /// Jolokia's error text.
        error: String,
    },
}

/// The test bed's CA and client identity, if `scripts/testbed up` made them.
fn tls_material(tls: &crate::config::NodeTls) -> Option<(reqwest::Certificate, reqwest::Identity)> {
    let ca = reqwest::Certificate::from_pem(&std::fs::read(tls.ca_pem()).ok()?).ok()?;
    let identity = reqwest::Identity::from_pem(&std::fs::read(tls.client_bundle_pem()).ok()?).ok()?;
    Some((ca, identity))
}

/// A Jolokia client bound to one node.
#[derive(Debug, Clone)]
pub struct Jolokia {
    node: Node,
    http: reqwest::Client,
}

impl Jolokia {
    /// A client for `node`, authenticating as the test bed's broker user.
    pub fn new(node: &Node) -> Jolokia {
        let mut http = reqwest::Client::builder().timeout(Duration::from_secs(10));
        // HTTPS with the test bed's CA alone, and its client certificate (the web server requires one). Before
        // `scripts/testbed up` made them, the requests fail, and `TestBed::require` says to start the test bed.
        if let Some((ca, identity)) = node.tls.as_ref().and_then(tls_material) {
            http = http.tls_built_in_root_certs(false).add_root_certificate(ca).identity(identity);
        }
        Jolokia { node: node.clone(), http: http.build().expect("http client") }
    }

    fn origin(&self) -> &'static str {
        if self.node.tls.is_some() {
            "https://127.0.0.1"
        } else {
            "http://127.0.0.1"
        }
    }

    /// Sends one request object and returns its `value`.
    pub async fn request(&self, body: Value) -> Result<Value, JolokiaError> {
        let node = self.node.name.clone();
        let resp = self
            .http
            .post(format!("{}/", self.node.jolokia_url()))
            .basic_auth(&self.node.user, Some(&self.node.password))
            // The default jolokia-access.xml checks CORS strictly: every request needs a matching Origin.
            .header("Origin", self.origin())
            .json(&body)
            .send()
            .await
            .map_err(|source| JolokiaError::Http { node: node.clone(), source })?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(JolokiaError::HttpStatus { node, status });
        }
        let answer: Value = resp.json().await.map_err(|source| JolokiaError::Http { node: node.clone(), source })?;
        match answer["status"].as_i64() {
            Some(200) => Ok(answer["value"].clone()),
            other => Err(JolokiaError::Agent {
                node,
                status: other.unwrap_or(-1),
                error: answer["error"].as_str().unwrap_or("(no error text)").to_string(),
            }),
        }
    }

    /// Reads attributes of an MBean; the value is an object keyed by attribute name.
    pub async fn read(&self, mbean: &str, attributes: &[&str]) -> Result<Value, JolokiaError> {
        self.request(json!({"type": "read", "mbean": mbean, "attribute": attributes})).await
    }

    /// Runs an operation (`name(signature)`) of an MBean.
    pub async fn exec(&self, mbean: &str, operation: &str, arguments: Value) -> Result<Value, JolokiaError> {
        self.request(json!({"type": "exec", "mbean": mbean, "operation": operation, "arguments": arguments})).await
    }

    /// `Active`, `Backup`, `NodeID`, `Version` of the broker.
    pub async fn broker_state(&self) -> Result<Value, JolokiaError> {
        self.read(&self.node.broker_mbean(), &["Active", "Backup", "NodeID", "Version"]).await
    }

    /// The MBean of an anycast queue whose address has the same name.
    pub fn queue_mbean(&self, address: &str, queue: &str) -> String {
        format!(
            "{},component=addresses,address={},subcomponent=queues,routing-type=\"anycast\",queue={}",
            self.node.broker_mbean(),
            quote(address),
            quote(queue)
        )
    }

    /// Creates a durable anycast queue `name` on address `name`.
    pub async fn create_queue(&self, name: &str) -> Result<(), JolokiaError> {
        let config = json!({"name": name, "address": name, "routing-type": "ANYCAST", "durable": true}).to_string();
        self.exec(&self.node.broker_mbean(), "createQueue(java.lang.String,boolean)", json!([config, false])).await?;
        Ok(())
    }

    /// Destroys queue `name` and its messages (and its address, when it has no other queue).
    pub async fn destroy_queue(&self, name: &str) -> Result<(), JolokiaError> {
        self.exec(
            &self.node.broker_mbean(),
            "destroyQueue(java.lang.String,boolean,boolean)",
            json!([name, true, true]),
        )
        .await?;
        Ok(())
    }

    /// The queue's `MessageCount` (its depth, including messages in delivery and scheduled ones).
    pub async fn message_count(&self, queue: &str) -> Result<i64, JolokiaError> {
        let value = self.read(&self.queue_mbean(queue, queue), &["MessageCount"]).await?;
        Ok(value["MessageCount"].as_i64().unwrap_or(-1))
    }
}

/// Roles granted each permission of a security setting (comma-separated role names; empty = nobody).
#[derive(Debug, Clone, Default)]
pub struct Permissions {
    /// `send`.
    pub send: String,
    /// `consume`.
    pub consume: String,
    /// `createDurableQueue`.
    pub create_durable_queue: String,
    /// `deleteDurableQueue`.
    pub delete_durable_queue: String,
    /// `createNonDurableQueue`.
    pub create_non_durable_queue: String,
    /// `deleteNonDurableQueue`.
    pub delete_non_durable_queue: String,
    /// `manage`.
    pub manage: String,
    /// `browse`.
    pub browse: String,
    /// `createAddress`.
    pub create_address: String,
    /// `deleteAddress`.
    pub delete_address: String,
}

impl Permissions {
    /// Every permission for `role`.
    pub fn all(role: &str) -> Permissions {
        let r = role.to_string();
        Permissions {
            send: r.clone(),
            consume: r.clone(),
            create_durable_queue: r.clone(),
            delete_durable_queue: r.clone(),
            create_non_durable_queue: r.clone(),
            delete_non_durable_queue: r.clone(),
            manage: r.clone(),
            browse: r.clone(),
            create_address: r.clone(),
            delete_address: r,
        }
    }
}

impl Jolokia {
    /// Adds a security setting for `address_match` at run time (the most specific match wins, so a unique
    /// address can be given fewer permissions than the test bed's `#`). Remove it with
    /// [`Jolokia::remove_security_settings`].
    pub async fn add_security_settings(&self, address_match: &str, p: &Permissions) -> Result<(), JolokiaError> {
        let signature = format!("addSecuritySettings({})", ["java.lang.String"; 11].join(","));
        let args = json!([
            address_match,
            p.send,
            p.consume,
            p.create_durable_queue,
            p.delete_durable_queue,
            p.create_non_durable_queue,
            p.delete_non_durable_queue,
            p.manage,
            p.browse,
            p.create_address,
            p.delete_address
        ]);
        self.exec(&self.node.broker_mbean(), &signature, args).await?;
        Ok(())
    }

    /// Adds address settings for `address_match` at run time, given as the broker's JSON form, e.g.
    /// `{"maxSizeBytes": 20000, "addressFullMessagePolicy": "FAIL"}`.
    pub async fn add_address_settings(&self, address_match: &str, settings_json: &str) -> Result<(), JolokiaError> {
        self.exec(
            &self.node.broker_mbean(),
            "addAddressSettings(java.lang.String,java.lang.String)",
            json!([address_match, settings_json]),
        )
        .await?;
        Ok(())
    }

    /// Makes `address` page beyond `max_size_bytes` in memory, in page files of `page_size_bytes` (address-full policy
    /// PAGE). Set before the address exists, so its queue is made under it.
    pub async fn page_beyond(
        &self,
        address: &str,
        max_size_bytes: u64,
        page_size_bytes: u64,
    ) -> Result<(), JolokiaError> {
        let settings = json!({
            "addressFullMessagePolicy": "PAGE",
            "maxSizeBytes": max_size_bytes,
            "pageSizeBytes": page_size_bytes,
        });
        self.add_address_settings(address, &settings.to_string()).await
    }

    /// Panics unless `address` is paging now (a test that needs a paged source says so when it is not).
    pub async fn assert_paging(&self, address: &str) {
        let mbean = format!("{},component=addresses,address={}", self.node.broker_mbean(), quote(address));
        let paging = self.read(&mbean, &["Paging", "NumberOfPages"]).await.expect("read the address");
        assert_eq!(paging["Paging"], true, "the address {address} must page for this test: {paging}");
    }

    /// Removes the address settings added for `address_match`.
    pub async fn remove_address_settings(&self, address_match: &str) -> Result<(), JolokiaError> {
        self.exec(&self.node.broker_mbean(), "removeAddressSettings(java.lang.String)", json!([address_match])).await?;
        Ok(())
    }

    /// Removes the security setting added for `address_match`.
    pub async fn remove_security_settings(&self, address_match: &str) -> Result<(), JolokiaError> {
        self.exec(&self.node.broker_mbean(), "removeSecuritySettings(java.lang.String)", json!([address_match]))
            .await?;
        Ok(())
    }
}

/// `javax.management.ObjectName.quote`: wrap in double quotes, backslash-escape `" * ? \` and newline.
pub fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' | '*' | '?' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn quote_escapes_like_object_name_quote() {
        assert_eq!(quote("plain"), "\"plain\"");
        assert_eq!(quote("a\"b*c?d\\e\nf"), "\"a\\\"b\\*c\\?d\\\\e\\nf\"");
    }
}
