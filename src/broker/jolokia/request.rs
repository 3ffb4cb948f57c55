//! Jolokia request bodies: read, exec (overloaded operations by signature), search and version
//! (artemis-management.md §1.2–§1.3).

use serde_json::{json, Value};

use super::object_name::ObjectName;

/// One Jolokia request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Read attributes of an MBean (never all of them: some Artemis getters throw).
    Read {
        /// The MBean.
        mbean: ObjectName,
        /// The attributes.
        attributes: Vec<String>,
        /// Put an attribute's error in place of its value instead of failing the read (an attribute a
        /// version lacks).
        ignore_errors: bool,
    },
    /// Run an operation. `operation` carries the Java signature, `moveMessages(int,java.lang.String,…)`, so an
    /// overloaded operation is never ambiguous.
    Exec {
        /// The MBean.
        mbean: ObjectName,
        /// `name(type,type,…)`.
        operation: String,
        /// The arguments, in order.
        arguments: Vec<Value>,
    },
    /// ObjectNames matching a pattern.
    Search {
        /// The pattern.
        pattern: ObjectName,
    },
    /// The agent's version.
    Version,
}

impl Request {
    /// A read of some attributes.
    pub fn read(mbean: ObjectName, attributes: &[&str]) -> Request {
        Request::Read { mbean, attributes: attributes.iter().map(|a| a.to_string()).collect(), ignore_errors: false }
    }

    /// A read that reports per-attribute errors in place of values (for attributes only some versions have).
    pub fn read_lenient(mbean: ObjectName, attributes: &[&str]) -> Request {
        Request::Read { mbean, attributes: attributes.iter().map(|a| a.to_string()).collect(), ignore_errors: true }
    }

    /// An operation call.
    pub fn exec(mbean: ObjectName, operation: &str, arguments: Vec<Value>) -> Request {
        Request::Exec { mbean, operation: operation.to_string(), arguments }
    }

    /// How much this request costs the per-node management rate limiter: one call per request.
    pub fn cost(&self) -> u32 {
        1
    }

    /// The JSON body.
    pub fn to_json(&self) -> Value {
        match self {
            Request::Read { mbean, attributes, ignore_errors } => {
                let mut body = json!({"type": "read", "mbean": mbean.as_str(), "attribute": attributes});
                if *ignore_errors {
                    body["config"] = json!({"ignoreErrors": true});
                }
                body
            }
            Request::Exec { mbean, operation, arguments } => {
                json!({"type": "exec", "mbean": mbean.as_str(), "operation": operation, "arguments": arguments})
            }
            Request::Search { pattern } => json!({"type": "search", "mbean": pattern.as_str()}),
            Request::Version => json!({"type": "version"}),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_jolokia_shapes() {
        let on = ObjectName::broker("b1");
        assert_eq!(
            Request::read(on.clone(), &["Active", "Backup"]).to_json(),
            json!({"type": "read", "mbean": "org.apache.activemq.artemis:broker=\"b1\"", "attribute": ["Active", "Backup"]})
        );
        assert_eq!(Request::read_lenient(on.clone(), &["X"]).to_json()["config"]["ignoreErrors"], json!(true));
        let exec = Request::exec(on, "destroyQueue(java.lang.String)", vec![json!("q")]).to_json();
        assert_eq!(exec["operation"], "destroyQueue(java.lang.String)");
        assert_eq!(exec["arguments"], json!(["q"]));
    }
}
