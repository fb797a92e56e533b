//! The QEMU guest launcher and its serial shell live in
//! `nfv_testutil::qemu` (shared with `nfv-bench vm-tcp`); this module
//! keeps the name the QEMU tests use.

pub use nfv_testutil::qemu::*;
