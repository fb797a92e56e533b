//! cargo-fuzz entry for `flow_extract`; the logic (and what it checks) is in
//! `nfv_fuzz_harness::flow_extract`, which `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 flow_extract` (or `cd fuzz && cargo +nightly fuzz run flow_extract corpus/flow_extract`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::flow_extract::run(data));
