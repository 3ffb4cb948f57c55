//! The `decode` fuzz target: bytes from a broker's socket through the frame decoder, every packet decoder (under
//! each protocol version) and the large-message reassembly, with the invariants of `../harness.rs`.

#![no_main]

#[path = "../harness.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::check(data));
