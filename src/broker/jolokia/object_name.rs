//! ObjectNames of Artemis MBeans, built with correct quoting for any queue or address name.
//!
//! Artemis quotes every value but the component keywords with `javax.management.ObjectName.quote`
//! (`ObjectNameBuilder.java@2.40.0`; artemis-management.md §1.4): wrapped in double quotes, with `" * ? \`
//! and newline backslash-escaped. A name with a comma, a colon or an equals sign is safe once quoted.

use std::fmt;

/// The JMX domain of Artemis (`jmx-domain` default).
pub const DOMAIN: &str = "org.apache.activemq.artemis";

/// How a queue routes: the lower-cased `routing-type` key of a queue MBean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum RoutingType {
    /// Point to point.
    Anycast,
    /// Publish/subscribe.
    Multicast,
}

impl RoutingType {
    /// `ANYCAST` / `MULTICAST`, as queue configuration JSON and `getRoutingType` spell it.
    pub fn as_upper(self) -> &'static str {
        match self {
            RoutingType::Anycast => "ANYCAST",
            RoutingType::Multicast => "MULTICAST",
        }
    }

    fn as_key(self) -> &'static str {
        match self {
            RoutingType::Anycast => "anycast",
            RoutingType::Multicast => "multicast",
        }
    }

    /// Parses `ANYCAST`/`MULTICAST` in any case.
    pub fn parse(s: &str) -> Option<RoutingType> {
        match s.to_ascii_uppercase().as_str() {
            "ANYCAST" => Some(RoutingType::Anycast),
            "MULTICAST" => Some(RoutingType::Multicast),
            _ => None,
        }
    }
}

/// `ObjectName.quote`: the value in double quotes, `" * ? \` and newline backslash-escaped.
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

/// An MBean's ObjectName, as Jolokia takes it in `"mbean"`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectName(String);

impl ObjectName {
    /// The broker MBean: `org.apache.activemq.artemis:broker="<broker>"`.
    pub fn broker(broker: &str) -> ObjectName {
        ObjectName(format!("{DOMAIN}:broker={}", quote(broker)))
    }

    /// An address MBean.
    pub fn address(broker: &str, address: &str) -> ObjectName {
        ObjectName(format!("{DOMAIN}:broker={},component=addresses,address={}", quote(broker), quote(address)))
    }

    /// A queue MBean.
    pub fn queue(broker: &str, address: &str, routing: RoutingType, queue: &str) -> ObjectName {
        ObjectName(format!(
            "{DOMAIN}:broker={},component=addresses,address={},subcomponent=queues,routing-type={},queue={}",
            quote(broker),
            quote(address),
            quote(routing.as_key()),
            quote(queue)
        ))
    }

    /// A pattern matching every queue MBean of the broker (for `search`).
    pub fn all_queues(broker: &str) -> ObjectName {
        ObjectName(format!("{DOMAIN}:broker={},component=addresses,address=*,subcomponent=queues,*", quote(broker)))
    }

    /// A pattern matching every broker MBean (exactly one key), to learn the broker name.
    pub fn any_broker() -> ObjectName {
        ObjectName(format!("{DOMAIN}:broker=*"))
    }

    /// Wraps an ObjectName a broker returned (already canonical).
    pub fn from_canonical(name: impl Into<String>) -> ObjectName {
        ObjectName(name.into())
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value of `key` in this name, unquoted (`None` when absent).
    pub fn key(&self, key: &str) -> Option<String> {
        let props = self.0.split_once(':')?.1;
        let mut rest = props;
        while !rest.is_empty() {
            let (k, after) = rest.split_once('=')?;
            let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = None;
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some((_, 'n')) => value.push('\n'),
                            Some((_, other)) => value.push(other),
                            None => return None,
                        },
                        '"' => {
                            end = Some(i + 1);
                            break;
                        }
                        _ => value.push(c),
                    }
                }
                let tail = &quoted[end?..];
                (value, tail.strip_prefix(',').unwrap_or(tail))
            } else {
                match after.split_once(',') {
                    Some((v, t)) => (v.to_string(), t),
                    None => (after.to_string(), ""),
                }
            };
            if k == key {
                return Some(value);
            }
            rest = tail;
        }
        None
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_object_name_quote() {
        assert_eq!(quote("orders"), "\"orders\"");
        assert_eq!(quote("a\"b*c?d\\e\nf,g=h:i"), "\"a\\\"b\\*c\\?d\\\\e\\nf,g=h:i\"");
    }

    #[test]
    fn queue_names_round_trip_through_key() {
        for name in ["plain", "with \"quotes\"", "back\\slash", "star*and?", "comma,eq=colon:", "new\nline", "ünï"] {
            let on = ObjectName::queue("b1", name, RoutingType::Anycast, name);
            assert_eq!(on.key("queue").as_deref(), Some(name), "{on}");
            assert_eq!(on.key("address").as_deref(), Some(name), "{on}");
            assert_eq!(on.key("routing-type").as_deref(), Some("anycast"));
            assert_eq!(on.key("broker").as_deref(), Some("b1"));
        }
    }

    #[test]
    fn unquoted_keys_parse() {
        let on =
            ObjectName::from_canonical("org.apache.activemq.artemis:address=\"q\",broker=\"b\",component=addresses");
        assert_eq!(on.key("component").as_deref(), Some("addresses"));
        assert_eq!(on.key("missing"), None);
    }
}
