//! An async client for the Apache ActiveMQ Artemis **Core** protocol.
//!
//! The crate knows nothing of transfers, Postgres or HTTP. It has two layers:
//!
//! | layer | job | may depend on |
//! |---|---|---|
//! | [`protocol`] | the wire format: frames, packets, messages, typed properties, large-message chunking; pure, no I/O | `bytes`, `thiserror`, `std` |
//! | connection, session, consumer, producer | one task owns the socket; handles talk to it | `protocol`, tokio |
#![warn(missing_docs, missing_debug_implementations)]

pub mod protocol;
