//! cargo-fuzz entry for `config_parse`; the logic (and what it checks) is in
//! `nfv_fuzz_harness::config_parse`, which `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 config_parse` (or `cd fuzz && cargo +nightly fuzz run config_parse corpus/config_parse`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::config_parse::run(data));
