//! artemis-core against the real broker of the test bed (Artemis 2.40.0), with the
//! official Java client as the independent judge of what arrived. One binary
//! (`autotests = false`): link time is paid once.
//!
//! Needs `scripts/testbed up`; a test that does not find the test bed fails with
//! that command. Shared brokers are never stopped: the test that kills a broker
//! starts a private one (`testbed::scratch`).

mod admin;
mod browse;
mod connect;
mod duplicates;
mod errors;
mod fidelity;
mod flow;
mod kill;
mod large;
mod login;
mod pipeline;
mod reload;
mod support;
mod tls;
mod transactions;
mod ttl;
