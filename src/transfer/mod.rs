//! The transfer domain: plans, the facts a preview reads, the preview itself (a pure function), the operator's
//! actions on a run, the move's staging and relay, and what the target receives.
//!
//! The copy is in `relay::copy`, the dead message queue in `relay::dmq` (docs/dead-message-queue.md).

pub mod actions;
pub mod audit;
pub mod browse;
pub mod facts;
pub mod gather;
pub mod orphans;
pub mod outbound;
pub mod permissions;
pub mod plan;
pub mod preview;
pub mod proof;
pub mod relay;
pub mod retry;
pub mod service;
pub mod staging;
pub mod store;
pub mod target_rules;
pub mod view;

pub use facts::{EndFacts, Facts, NodeFacts, QueueFacts};
pub use plan::{Destination, Mode, Plan, QueueRef, Selection};
pub use preview::{preview, Finding, Kind, Preview, PreviewSettings};
