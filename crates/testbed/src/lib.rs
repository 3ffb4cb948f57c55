//! Test support for artemis-transfer: the one way tests reach the test bed.
//!
//! Endpoints, credentials and paths come from `config/testbed.toml` (the one place for them), read here and by
//! `scripts/testbed`. Tests get unique queue names ([`unique_name`]), a small Jolokia client for setting up and
//! checking brokers ([`jolokia`]), and the Java fidelity helper ([`fidelity`]) — the official Artemis client as
//! the independent judge of what arrived. Tests that must kill a broker start a private one ([`scratch`]). Tests
//! remove the queues they made ([`TestQueues`], [`remove_queues`]).
//!
//! A test that needs the test bed and does not find it **fails** ([`TestBed::require`]) with the command that
//! starts it; it never returns early as a pass.
//!
//! This crate must not depend on `artemis-core` or on the application: it judges them.

mod cleanup;
pub mod config;
pub mod fidelity;
pub mod jolokia;
mod names;
pub mod postgres;
pub mod private_postgres;
pub mod scratch;

pub use cleanup::{remove_queues, TestQueues};
pub use config::{Node, NodeRole, NodeTls, TestBed};
pub use names::unique_name;
