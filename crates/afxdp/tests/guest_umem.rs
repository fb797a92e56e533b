//! A UMEM over guest memory on a real veth pair: the kernel must write
//! each received frame right after the virtio-net header of the guest
//! buffer whose fill address the switch posted, and nowhere else in the
//! guest. Needs root (namespaces, XDP); otherwise SKIPPED.

mod common;

use common::{RawSocket, frame, host_mac, test_seq};
use nfv_afxdp::bpf::{self, AttachMode, XskMap};
use nfv_afxdp::guest_umem::Placement;
use nfv_afxdp::umem::Umem;
use nfv_afxdp::xsk::{Bind, Rings, Xsk};
use nfv_testutil::rawsock::ETH_P_ALL;
use nfv_virtio::{GuestMemory, RegionSpec};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

const HDR: usize = 12;
const BUF_LEN: u32 = 1536;

fn guest() -> GuestMemory {
    // SAFETY: a valid name; plain syscalls on a descriptor we own.
    let fd = unsafe {
        let raw = libc::memfd_create(c"zc-guest".as_ptr(), libc::MFD_CLOEXEC);
        assert!(raw >= 0);
        assert_eq!(libc::ftruncate(raw, 4 << 20), 0);
        OwnedFd::from_raw_fd(raw)
    };
    let dup = fd.try_clone().unwrap();
    GuestMemory::map(vec![
        RegionSpec {
            guest_phys_addr: 0,
            size: 1 << 20,
            user_addr: 0x7000_0000_0000,
            mmap_offset: 0,
            fd,
            shrink_sealed: false,
        },
        RegionSpec {
            guest_phys_addr: 1 << 32,
            size: 3 << 20,
            user_addr: 0x7100_0000_0000,
            mmap_offset: 1 << 20,
            fd: dup,
            shrink_sealed: false,
        },
    ])
    .unwrap()
}

/// Reads `len` guest bytes at `gpa` through the guest's own mapping.
fn guest_bytes(mem: &GuestMemory, gpa: u64, len: usize) -> Vec<u8> {
    let p = mem.translate(gpa, len).expect("inside guest memory");
    let mut v = vec![0u8; len];
    // SAFETY: `translate` checked the range; nothing else writes it now.
    unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), len) };
    v
}

#[test]
fn frames_land_after_the_header_of_the_posted_guest_buffers() {
    let test = "afxdp::frames_land_after_the_header_of_the_posted_guest_buffers";
    let Some(env) = common::env(test) else {
        return;
    };
    let host = &env.veth.host;
    let ifindex = nfv_netdev::index(host).unwrap();
    let mem = guest();
    // Fill the guest with a pattern, to see what the kernel overwrote.
    for r in mem.regions() {
        // SAFETY: the whole region is mapped read/write.
        unsafe { std::ptr::write_bytes(r.host, 0xee, r.size as usize) };
    }
    let placement = Placement::for_frames(1518, HDR);
    let umem = Umem::over_guest(&mem, 128, placement).expect("UMEM over the guest");
    let rings = Rings {
        size: 64,
        fill_size: 128,
        own_fill: 0,
    };
    let xsk = Xsk::open_over(ifindex, 0, rings, Bind::Copy, umem).expect("socket over the guest");
    let map = XskMap::new(1).unwrap();
    let prog = bpf::load_program(&map).expect("XDP program");
    let _link = bpf::attach(prog.as_fd(), ifindex, AttachMode::Native).expect("attach");
    map.set(0, xsk.as_fd()).unwrap();

    // Guest buffers in both regions, some crossing 4 KiB pages.
    let bufs: Vec<u64> = (0..16u64)
        .map(|i| {
            if i % 2 == 0 {
                0x10_000 + i * 3000
            } else {
                (1 << 32) + 0x20_000 + i * 2100
            }
        })
        .collect();
    let (area, p) = xsk.umem.guest().unwrap();
    let mut r = xsk.take_rx().unwrap();
    let n = bufs.len() as u32;
    assert!(r.fill.free(n) >= n);
    for (i, &b) in bufs.iter().enumerate() {
        r.fill
            .write(i as u32, p.fill_addr(area, b, BUF_LEN).unwrap());
    }
    r.fill.submit(n);

    let sock = RawSocket::in_ns(&env.ns, &env.veth.inner, ETH_P_ALL);
    let frames: Vec<Vec<u8>> = (0..bufs.len() as u32)
        .map(|i| frame(host_mac(host), env.veth.inner_mac, i, 60 + i as usize * 91))
        .collect();
    for f in &frames {
        sock.send(f);
    }
    let mut got = Vec::new();
    let end = Instant::now() + Duration::from_secs(5);
    while got.len() < frames.len() && Instant::now() < end {
        let k = r.rx.available(64);
        for i in 0..k {
            got.push(r.rx.read(i));
        }
        r.rx.release(k);
        if k == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let mut seen = 0;
    for d in &got {
        let fill = Umem::fill_of(d.addr);
        let b = p.buffer_of(area, fill).expect("a guest buffer we posted");
        assert!(bufs.contains(&b), "unknown buffer {b:#x}");
        assert_eq!(
            Umem::data_addr(d.addr),
            area.umem_offset(b, 1).unwrap() + HDR as u64,
            "frame not right after the header"
        );
        let bytes = guest_bytes(&mem, b + HDR as u64, d.len as usize);
        // Other chatter (IPv6 neighbour discovery) may take a buffer too.
        let Some(seq) = test_seq(&bytes) else {
            continue;
        };
        assert_eq!(
            bytes, frames[seq as usize],
            "frame {seq} differs in the guest"
        );
        // The header's bytes and those in front were not written.
        assert_eq!(guest_bytes(&mem, b - 244, 244 + HDR), vec![0xee; 244 + HDR]);
        seen += 1;
    }
    assert!(
        seen >= frames.len() - 2,
        "only {seen} of {} test frames landed in guest buffers ({} descriptors)",
        frames.len(),
        got.len()
    );
    let st = xsk.statistics().unwrap();
    assert_eq!(st.rx_invalid_descs, 0, "the kernel refused fill addresses");
    xsk.return_rx(r);
}
