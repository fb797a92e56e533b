//! cargo-fuzz entry for `virtio_burst`; the logic (and what it checks) is in
//! `nfv_fuzz_harness::virtio_burst`, which `cargo test` also replays the corpus through.
//!
//! Run: `scripts/fuzz 60 virtio_burst` (or `cd fuzz && cargo +nightly fuzz run virtio_burst corpus/virtio_burst`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nfv_fuzz_harness::virtio_burst::run(data));
