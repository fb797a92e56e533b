//! cargo-fuzz entry for `state_file`; the logic (and what it checks) is in
//! `nfv_fuzz_harness::state_file`, which `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 state_file` (or `cd fuzz && cargo +nightly fuzz run state_file corpus/state_file`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::state_file::run(data));
