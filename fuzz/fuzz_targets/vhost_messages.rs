//! cargo-fuzz entry for `vhost_messages`; the logic is in
//! `nfv_fuzz_harness::vhost_messages` (and `nfv_vhost::fuzzing`), which
//! `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 vhost_messages`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::vhost_messages::run(data));
