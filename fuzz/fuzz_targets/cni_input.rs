//! cargo-fuzz entry for `cni_input`; the logic (and what it checks) is in
//! `nfv_fuzz_harness::cni_input`, which `cargo test` also replays the
//! corpus through.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run cni_input corpus/cni_input`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::cni_input::run(data));
