//! Per-node access to Artemis brokers: Jolokia management over HTTP ([`jolokia`]) and, later, the Core protocol.
//!
//! No transfer logic lives here: this module answers "what does this node say" and "do this on that node".
//! It must not import `crate::transfer`.

pub mod jolokia;
pub mod permits;
