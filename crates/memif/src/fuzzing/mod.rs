//! Entry points for the memif fuzz targets (and the corpus replay test).
//!
//! * [`handshake`] (`memif_handshake`): the control messages a hostile
//!   client sends the switch, through the server side twice — the
//!   [`ServerHandshake`] state machine fed directly, and the real socket
//!   path ([`serve::until_connect`] over a `SOCK_SEQPACKET` pair, file
//!   descriptors attached) — then `Connection::open` on what CONNECT
//!   set up (the regions mapped, the rings checked).
//! * [`ring_walk`] (`memif_rings`): a connected client that writes
//!   anything into its rings and memory, against a real port's rx and tx
//!   queues (server role), each burst checked against a model of what it
//!   may read and write.

// The two targets (`handshake.rs`, `rings.rs`) take these through
// `use super::*`, which the lint does not count as a use.
#![allow(unused_imports)]
use crate::MemifPort;
use crate::client::{Client, ClientConfig};
use crate::connection::Connection;
use crate::handshake::{Limits, Offer, Refusal, ServerHandshake, Setup, Step};
use crate::serve::{self, HandshakeError};
use crate::settings::MemifConfig;
use crate::socket::{Conn, Listener, Received, SocketPath};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache};
use nfv_ports::{Port, RxQueue, TxQueue};
use nfv_wire::memif::{self, DescRepr, Direction, MsgRepr, Name, Reason, Secret, VERSION};
use std::cell::RefCell;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Reads the input as a stream of decisions; zeros past its end.
struct Bytes<'a> {
    data: &'a [u8],
    at: usize,
}

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.u8()).collect()
    }
    fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }
}

const PAGE: u64 = 4096;
/// The interface on offer.
const ID: u32 = 7;
const SECRET: &[u8] = b"abc";

fn memfd(size: u64, cookies: bool) -> Option<OwnedFd> {
    // SAFETY: a valid C string; on success the fd is new and ours.
    let fd = unsafe { libc::memfd_create(c"fuzz-memif".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is fresh and owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on an fd we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
        return None;
    }
    if cookies && size > 0 {
        // Every 4-byte word holds the ring cookie: a ring announced at any
        // aligned offset passes the connection's cookie check.
        let words: Vec<u8> = std::iter::repeat_n(memif::COOKIE.to_le_bytes(), (size / 4) as usize)
            .flatten()
            .collect();
        // SAFETY: writes from a live buffer into a file we own.
        let n = unsafe { libc::pwrite(fd.as_raw_fd(), words.as_ptr().cast(), words.len(), 0) };
        if n < 0 {
            return None;
        }
    }
    Some(fd)
}

fn eventfd() -> Option<OwnedFd> {
    // SAFETY: plain syscall; a non-negative result is a new fd we own.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    // SAFETY: as above.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

mod handshake;
mod rings;

pub use handshake::handshake;
#[cfg(test)]
use handshake::pair;
pub use rings::ring_walk;

#[cfg(test)]
mod tests {
    use super::*;

    /// INIT with the right secret.
    const INIT: &[u8] = &[0, 0];
    /// ADD_REGION 0 of 64 KiB with a 64 KiB memfd of cookies.
    const REGION: &[u8] = &[0x29, 0, 16, 16];
    /// ADD_RING c2s 0 at 0 and s2c 0 at 16,512, 1024 slots, eventfds.
    const RINGS: &[u8] = &[0x12, 0x0c, 0, 10, 0x12, 0x0d, 1, 10];
    const CONNECT: &[u8] = &[3];

    /// The seeds `fuzz/corpus/memif_handshake` starts from.
    fn seeds() -> Vec<(&'static str, Vec<u8>)> {
        // Two regions, one ring pair, rings up to 1024 slots, a secret.
        let h = 0x01 | (3 << 3) | 0x40;
        vec![
            ("dpdk-like", [&[h], INIT, REGION, RINGS, CONNECT].concat()),
            (
                "two-pairs-two-regions",
                [
                    &[h | 0x04],
                    INIT,
                    REGION,
                    &[0x29, 4, 16, 16], // region 1
                    RINGS,
                    // c2s 1 and s2c 1 in region 1
                    &[0x12, 0x1e, 0, 10, 0x12, 0x1f, 1, 10],
                    CONNECT,
                ]
                .concat(),
            ),
            (
                "file-shorter-than-region",
                [&[h], INIT, &[0x29, 0, 16, 1], RINGS, CONNECT].concat(),
            ),
            (
                "over-the-cap",
                [
                    &[h | 0x20],
                    INIT,
                    REGION,
                    &[0x29, 4, 16, 16],
                    RINGS,
                    CONNECT,
                ]
                .concat(),
            ),
            ("wrong-secret", [&[h][..], &[0, 2], REGION].concat()),
            (
                "ring-outside-region",
                [&[h], INIT, REGION, &[0x12, 0x08, 0xff, 0xff, 0xff, 0x7f, 6]].concat(),
            ),
            (
                "ring-without-fd-and-no-region-fd",
                [&[h], INIT, &[1, 0, 16], &[2, 0x0c, 0, 10]].concat(),
            ),
            (
                "garbage-then-disconnect",
                [
                    &[h],
                    INIT,
                    &[7, 5, 20],
                    &[0u8; 20][..],
                    &[6, 200],
                    &[0xaa; 200][..],
                    &[4, b'b', b'y', b'e', 0, 0, 0, 0, 0],
                ]
                .concat(),
            ),
            (
                "peer-leaves",
                [&[h][..], &[4, 0xff, 0xfe, b'x', 0, 0, 0, 0, 0], INIT].concat(),
            ),
            ("taken", [&[h | 0x80], INIT].concat()),
        ]
    }

    /// The seeds `fuzz/corpus/memif_rings` starts from.
    fn ring_seeds() -> Vec<(&'static str, Vec<u8>)> {
        let le = |v: u16| v.to_le_bytes();
        // Op 7: `n` C2S frames of the given lengths.
        let c2s = |lens: &[u16]| {
            let mut v = vec![7, 2 * lens.len() as u8];
            for l in lens {
                v.extend(le(*l - 1));
            }
            v
        };
        let repost = vec![7, 1];
        let tx = |lens: &[u16]| {
            let mut v = vec![6, lens.len() as u8];
            for l in lens {
                v.extend(le(*l - 1));
            }
            v
        };
        let rx = vec![3];
        // Op 0/4: a descriptor at `slot` in its slot's buffer, of
        // `bsize` bytes, NEXT as given.
        let desc = |op: u8, slot: u8, next: bool| {
            vec![op, slot, (5 << 3) | if next { 0x40 } else { 0 }, slot, 0]
        };
        let head = |op: u8, n: u8| vec![op, n];
        // 16 slots of 2048 bytes, one copy.
        let big = 0x3b;
        // 32 slots of 128 bytes.
        let small = 0x04;
        vec![
            (
                "traffic-both-ways",
                [
                    &[big][..],
                    &c2s(&[60, 1500, 129, 2048, 64]),
                    &rx,
                    &tx(&[60, 1514, 9, 2047]),
                    &repost,
                    &tx(&[64; 20]),
                ]
                .concat(),
            ),
            (
                "chains-over-small-buffers",
                [
                    &[small][..],
                    &desc(0, 1, true),
                    &desc(0, 2, true),
                    &desc(0, 3, false),
                    &desc(0, 4, true),
                    &head(1, 4),
                    &rx,
                    &tx(&[1500, 60, 300]),
                    &rx,
                ]
                .concat(),
            ),
            (
                "descriptors-outside",
                [
                    &[big][..],
                    // past the region: offset u32, length u32
                    &[0, 1, 5 | (4 << 3), 0, 0, 0, 0x80, 0xff, 0xff, 0, 0],
                    // the region's last 16 bytes, 255 long
                    &[0, 2, 3 | (1 << 3), 16, 255],
                    // region 2
                    &[0, 3, 0x80 | (5 << 3), 2, 3, 0],
                    &head(1, 3),
                    &rx,
                    &[4, 0, 5 | (4 << 3), 0, 0, 0, 0x80, 0, 8, 0, 0],
                    &tx(&[60, 60]),
                ]
                .concat(),
            ),
            (
                "bad-heads-then-sane",
                [
                    &[big][..],
                    &c2s(&[60, 60]),
                    &[1, 0x80, 0x00, 0x80],
                    &rx,
                    &head(1, 17),
                    &rx,
                    &head(1, 2),
                    &rx,
                    &[5, 0x80, 0xff, 0xff],
                    &tx(&[60]),
                    &head(5, 3),
                    &tx(&[60, 61, 62]),
                ]
                .concat(),
            ),
            (
                "hostile-writes",
                [
                    &[small | 0x20][..],
                    &c2s(&[100, 100]),
                    // C2S header: flags, head, tail
                    &[2, 0, 4, 8, 1, 0, 7, 0, 9, 9, 9, 9],
                    &rx,
                    // S2C descriptor 0 points into the S2C descriptors
                    &[4, 0, 6 | (7 << 3), 0, 0],
                    &tx(&[200, 60]),
                    // bytes over the S2C header
                    &[2, 1, 64, 4, 0xde, 0xad, 0xbe, 0xef],
                    &tx(&[60]),
                ]
                .concat(),
            ),
            (
                "empty-frames-and-unfinished-chain",
                [
                    &[big][..],
                    &[0, 1, 0, 1],
                    &desc(0, 2, true),
                    &head(1, 2),
                    &rx,
                    &[4, 0, 0, 0],
                    &tx(&[60]),
                ]
                .concat(),
            ),
        ]
    }

    #[test]
    fn ring_seeds_run() {
        for (name, s) in ring_seeds() {
            eprintln!("{name}");
            ring_walk(&s);
        }
        ring_walk(&[]);
        ring_walk(&[0xff; 200]);
    }

    #[test]
    fn seeds_run() {
        for (name, s) in seeds() {
            eprintln!("{name}");
            handshake(&s);
        }
        handshake(&[]);
        handshake(&[0xff; 64]);
    }

    /// Writes the seeds to `fuzz/corpus/memif_handshake` when asked
    /// (`NFV_WRITE_SEEDS=1 cargo test -p nfv-memif --lib fuzzing`).
    #[test]
    fn write_seeds() {
        if std::env::var_os("NFV_WRITE_SEEDS").is_none() {
            return;
        }
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/memif_handshake");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, s) in seeds() {
            std::fs::write(dir.join(name), s).unwrap();
        }
        let dir = dir.join("../memif_rings");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, s) in ring_seeds() {
            std::fs::write(dir.join(name), s).unwrap();
        }
    }
}
