//! Memory budgets (issue 36, item 1): a frontend's memory table costs it
//! nothing (a sparse memfd ftruncated to terabytes) but takes the switch's
//! address space. A table over the port's `max_guest_memory` or the
//! node's budget is refused with a NACK and counted (`mem_over_budget`),
//! and the port keeps its previous table and keeps forwarding; once memory
//! is unmapped the budget is free for another port.
//!
//! One test: the node's budget is process-wide, and the steps share it.

mod common;

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};

use common::*;
use nfv_vhost::VhostUserMode::Server;
use nfv_vhost::{DEFAULT_MAX_GUEST_MEMORY, DEFAULT_NODE_GUEST_MEMORY, NODE_BUDGET, VhostStatus};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo};

const TIB: u64 = 1 << 40;

/// A memfd of `len` bytes: only a size, no memory.
fn sparse(len: u64) -> File {
    // SAFETY: a literal name; the fd is taken over by the File.
    let fd = unsafe { libc::memfd_create(c"nfv-budget".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh fd we own.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

/// The guest's own regions plus `extra` (file, size, mmap_offset), placed
/// from guest-physical (and frontend) address 1 TiB on, 4 TiB apart.
fn table(g: &Guest, extra: &[(&File, u64, u64)]) -> Vec<VhostUserMemoryRegionInfo> {
    let mut t = g.regions();
    for (i, (f, size, off)) in extra.iter().enumerate() {
        let at = TIB + i as u64 * 4 * TIB;
        t.push(VhostUserMemoryRegionInfo {
            guest_phys_addr: at,
            memory_size: *size,
            userspace_addr: at,
            mmap_offset: *off,
            mmap_handle: f.as_raw_fd(),
        });
    }
    t
}

fn port(tag: &str) -> (SwitchSide, Guest) {
    let path = sock(tag);
    let sw = SwitchSide::open(tag, &cfg(&path, Server, 1, true), 1);
    let g = Guest::setup(connect(&path), tag, &GuestOpts::default());
    wait_status(&sw.port, "pair up", |s| s.pairs_enabled == 1);
    (sw, g)
}

fn works(g: &mut Guest, sw: &mut SwitchSide, seed: u32) {
    let frames: Vec<_> = (0..8)
        .map(|i| frame(64 + i * 100, seed + i as u32))
        .collect();
    round_trip(g, sw, 0, 0, 0, &frames);
}

/// Refused for its size: counted, the old table (`mapped` bytes) kept.
fn refused(sw: &SwitchSide, st: &VhostStatus, n: u64, mapped: u64) {
    assert_eq!(st.mem_over_budget, n, "{st:#?}");
    assert_eq!(st.mem_table_errors, n, "{st:#?}");
    assert_eq!(st.guest_memory, mapped, "old table kept: {st:#?}");
    assert_eq!(st.pairs_enabled, 1, "{st:#?}");
    let gauges = nfv_ports::Port::gauges(&*sw.port);
    assert_eq!(gauges.count("mem_over_budget"), Some(n), "{gauges:?}");
}

#[test]
fn tables_over_the_port_cap_or_the_node_budget_are_refused_and_the_old_one_stays() {
    assert_eq!(DEFAULT_MAX_GUEST_MEMORY, TIB);
    assert_eq!(NODE_BUDGET.limit(), DEFAULT_NODE_GUEST_MEMORY);
    let (mut a, mut ga) = port("budget-a");
    works(&mut ga, &mut a, 1);
    let small = a.port.status().guest_memory;
    assert!(small > 0 && small < 64 << 20, "{small}");

    // The port's cap (default 1 TiB): a 2 TiB region is refused...
    let big = sparse(4 * TIB);
    let e = ga.fe.set_mem_table(&table(&ga, &[(&big, 2 * TIB, 0)]));
    assert!(e.is_err(), "2 TiB accepted");
    refused(&a, &a.port.status(), 1, small);
    works(&mut ga, &mut a, 10);
    // ... and so is 4 KiB at 1.5 TiB into the file: the mapping starts at
    // offset 0, so it would take 1.5 TiB of address space.
    let e = ga
        .fe
        .set_mem_table(&table(&ga, &[(&big, 4096, 3 * TIB / 2)]));
    assert!(e.is_err(), "offset not counted");
    refused(&a, &a.port.status(), 2, small);
    works(&mut ga, &mut a, 20);

    // The node's budget: 3 TiB on top of what is mapped now, ports capped
    // at 4 TiB each. A takes 2 TiB...
    let limit = NODE_BUDGET.used() + 3 * TIB;
    NODE_BUDGET.set_limit(limit);
    a.port.set_max_guest_memory(4 * TIB);
    let (mut b, mut gb) = port("budget-b");
    b.port.set_max_guest_memory(4 * TIB);
    ga.fe
        .set_mem_table(&table(&ga, &[(&big, 2 * TIB, 0)]))
        .expect("2 TiB within A's cap and the node's budget");
    works(&mut ga, &mut a, 30);
    assert_eq!(a.port.status().guest_memory, small + 2 * TIB);
    // ... so B's 2 TiB would exceed the node's budget: refused, B keeps
    // its table and forwards.
    let big_b = sparse(2 * TIB);
    let e = gb.fe.set_mem_table(&table(&gb, &[(&big_b, 2 * TIB, 0)]));
    assert!(e.is_err(), "node budget exceeded");
    let st = b.port.status();
    refused(&b, &st, 1, st.guest_memory);
    assert!(st.last_error.contains("budget"), "{}", st.last_error);
    works(&mut gb, &mut b, 40);

    // A gives its 2 TiB back: charged until the last ring lets go (the
    // round trip moves its rx queue to the new table).
    ga.send_mem_table().expect("A's small table");
    works(&mut ga, &mut a, 50);
    assert!(
        nfv_testutil::wait_until(WAIT, || NODE_BUDGET.used() + 2 * TIB <= limit),
        "A's old table still charged: {} of {limit}",
        NODE_BUDGET.used()
    );
    gb.fe
        .set_mem_table(&table(&gb, &[(&big_b, 2 * TIB, 0)]))
        .expect("B fits once A let go");
    works(&mut gb, &mut b, 60);
    assert_eq!(b.port.status().mem_over_budget, 1);
    NODE_BUDGET.set_limit(DEFAULT_NODE_GUEST_MEMORY);
}
