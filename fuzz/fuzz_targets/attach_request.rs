//! cargo-fuzz entry for `attach_request`; the logic (and what it checks) is in
//! `nfv_fuzz_harness::attach_request`, which `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 attach_request` (or `cd fuzz && cargo +nightly fuzz run attach_request corpus/attach_request`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::attach_request::run(data));
