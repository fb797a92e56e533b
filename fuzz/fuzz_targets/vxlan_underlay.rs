//! cargo-fuzz entry for `vxlan_underlay`; the logic is in
//! `nfv_fuzz_harness::vxlan_underlay` (and `nfv_vxlan::fuzzing`), which
//! `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 vxlan_underlay`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::vxlan_underlay::run(data));
