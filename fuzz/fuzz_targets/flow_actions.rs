//! cargo-fuzz entry for `flow_actions`; the logic (and what it checks) is in
//! `nfv_fuzz_harness::flow_actions`, which `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 flow_actions` (or `cd fuzz && cargo +nightly fuzz run flow_actions corpus/flow_actions`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::flow_actions::run(data));
