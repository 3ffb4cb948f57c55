//! artemis-transfer: moves or copies selected messages between Apache ActiveMQ Artemis brokers, once, as a
//! durable run that can be watched, stopped, resumed and undone.
//!
//! Layers, each knowing only those below it:
//!
//! | module | job |
//! |---|---|
//! | `cli`, `api`, `console`, `worker` | edges: the command line, the HTTP API, the operator console (HTML), the worker process |
//! | `transfer` | plan, preview (pure over facts), run states, relay, outbound message, DMQ |
//! | `jobs` | the Postgres job engine: SKIP LOCKED claims, fenced leases, one batch per run in flight |
//! | [`broker`] | per-node access: Jolokia management and Core |
//! | [`secret`] | values that never reach logs, answers or records |

pub mod api;
pub mod broker;
pub mod cli;
pub mod config;
pub mod console;
pub mod jobs;
pub mod limiter;
pub mod registry;
pub mod secret;
pub mod transfer;
pub mod worker;

#[cfg(test)]
mod docs_said;
#[cfg(test)]
mod shape_tests;
#[cfg(test)]
mod sql_placement_tests;
