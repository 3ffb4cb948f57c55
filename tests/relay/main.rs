//! Moves across nodes against the real test bed (issue 6): staging, the outbound message, the relay batch,
//! judged by a census of payload ids taken by the Java helper.

mod conditions;
mod copy;
mod crash;
mod deep;
mod dmq;
mod ends;
mod faults;
mod large;
mod local;
mod moves;
mod orphans;
mod outbound;
mod paged;
mod retry;
mod returns;
mod staging;
mod support;
mod tls;
mod window;
