//! Per-node access to Artemis brokers: Jolokia management over HTTP ([`jolokia`]), a resolved node's management
//! and Core connection ([`node`]), the Core connections kept between batches ([`core_pool`]), and what a filter
//! matches on a queue, counted by a Core browse ([`count`]); a page of a queue's messages, browsed ([`browse`]).
//!
//! No transfer logic lives here: this module answers "what does this node say" and "do this on that node".
//! It must not import `crate::transfer`.

pub mod browse;
pub mod core_pool;
pub mod count;
pub mod jolokia;
pub mod node;
pub mod permits;
