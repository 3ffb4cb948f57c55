//! A Jolokia client for Artemis management: what the preview and the run ask of a node.
//!
//! - [`client`]: HTTP, auth, the Origin header, single and batched requests, agent version.
//! - [`session`]: the console session that spares the broker a login per request.
//! - [`object_name`]: MBean names with correct quoting for any queue or address name.
//! - [`request`]: request bodies (overloaded operations are always called by signature).
//! - [`ops`]: the typed operations the product needs, on one node.
//! - [`error`]: typed errors (unreachable, not authenticated, login throttled, not found, busy).
//!
//! Facts: `../shared/reference/artemis-management.md`; live corrections in `docs/broker-notes.md`.

pub mod client;
pub mod error;
pub mod object_name;
pub mod ops;
pub mod request;
pub mod session;

pub use client::{AgentVersion, Endpoint, JolokiaClient};
pub use error::{AgentError, AgentErrorKind, JolokiaError};
pub use object_name::{ObjectName, RoutingType};
pub use ops::{
    AddressSettings, BrokerManagement, BrokerState, FullPolicy, HeapUsage, QueueConfig, QueueState, TopologyMember,
};
pub use request::Request;
pub use session::{enable as use_console_sessions, log_out_all as log_out_console_sessions, SessionStatus};
