//! cargo-fuzz entry for `memif_rings`; the logic is in
//! `nfv_fuzz_harness::memif_rings` (and `nfv_memif::fuzzing`), which
//! `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 memif_rings`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::memif_rings::run(data));
