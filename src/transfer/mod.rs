//! The transfer domain: plans, the facts a preview reads, and the preview itself (a pure function).
//!
//! Later: run states, the relay batch, the outbound message, the dead message queue (SPEC §4–§7).

pub mod facts;
pub mod gather;
pub mod plan;
pub mod preview;
pub mod service;

pub use facts::{EndFacts, Facts, NodeFacts, QueueFacts};
pub use plan::{Mode, Plan, QueueRef, Selection};
pub use preview::{preview, Finding, Kind, Preview, PreviewSettings};
