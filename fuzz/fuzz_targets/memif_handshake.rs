//! cargo-fuzz entry for `memif_handshake`; the logic is in
//! `nfv_fuzz_harness::memif_handshake` (and `nfv_memif::fuzzing`), which
//! `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 memif_handshake`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::memif_handshake::run(data));
