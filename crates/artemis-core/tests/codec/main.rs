//! Codec tests that need no broker: golden frames captured from the official Java Core client
//! ([`golden`], `tests/golden/`), and the replay of the fuzz corpus through the fuzz harness ([`corpus`]).

mod corpus;
mod golden;
