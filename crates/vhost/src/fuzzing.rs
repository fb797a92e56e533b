//! Entry point for the `vhost_messages` fuzz target (and the corpus
//! replay test): drives the real protocol thread code — `Channel`,
//! `message::decode`, `dispatch`, `Backend` and ring publishing — over a
//! socket pair, with memfds attached as the input decides, and polls the
//! port's queues after every message as PMDs would.
//!
//! Input format (each message; the input ends where it ends):
//! `[selector, flags, nfds, fd_size, len_lo, len_hi, payload...]`.
//! `selector` is the request code (unknown codes included); bit 0 of `flags` sets
//! NEED_REPLY and bit 1 sends a bad version; `nfds` (mod 10) memfds of
//! `fd_size` × 4 KiB ride along; `len` (mod 300) payload bytes follow. The
//! selector 0xff instead sends a valid one-region memory table over a
//! 1 MiB memfd whose addresses come from the next 8 bytes, so that later
//! ring messages can reach running rings.

use std::io::{IoSlice, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use crate::{VhostUserConfig, VhostUserMode};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool};
use nfv_ports::{RxQueue, TxQueue};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

use crate::backend::Backend;
use crate::channel::Channel;
use crate::message::{code, encode};
use crate::rx::VhostRxq;
use crate::shared::Shared;
use crate::tx::VhostTxq;

const MIB: u64 = 1 << 20;

fn memfd(size: u64) -> Option<OwnedFd> {
    // SAFETY: a valid C string; on success the fd is new and ours.
    let fd = unsafe { libc::memfd_create(c"fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` is fresh and owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on an fd we own.
    (unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } == 0).then_some(fd)
}

fn send(s: &UnixStream, bytes: &[u8], fds: &[OwnedFd]) -> bool {
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg = [ControlMessage::ScmRights(&raw)];
    let cmsgs: &[ControlMessage] = if raw.is_empty() { &[] } else { &cmsg };
    sendmsg::<()>(
        s.as_raw_fd(),
        &[IoSlice::new(bytes)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT,
        None,
    )
    .is_ok()
}

/// Splits the input into messages: (wire bytes, fds to attach).
fn messages(mut data: &[u8]) -> Vec<(Vec<u8>, Vec<OwnedFd>)> {
    let mut out = Vec::new();
    while data.len() >= 6 && out.len() < 64 {
        let (sel, flags, nfds, fd_size) = (data[0], data[1], data[2] % 10, data[3]);
        let len = (u16::from_le_bytes([data[4], data[5]]) % 300) as usize;
        data = &data[6..];
        if sel == 0xff {
            let mut a = [0u8; 8];
            let take = data.len().min(8);
            a[..take].copy_from_slice(&data[..take]);
            data = &data[take..];
            let uva = u64::from_le_bytes(a) & !0xfff;
            let mut p = vec![1, 0, 0, 0, 0, 0, 0, 0];
            for v in [0, MIB, uva, 0] {
                p.extend_from_slice(&u64::to_le_bytes(v));
            }
            let fds = memfd(MIB).into_iter().collect();
            out.push((encode(code::SET_MEM_TABLE, flags & 1 != 0, &p), fds));
            continue;
        }
        let len = len.min(data.len());
        let mut bytes = encode(u32::from(sel), flags & 1 != 0, &data[..len]);
        if flags & 2 != 0 {
            bytes[4] = 2;
        }
        data = &data[len..];
        let fds = (0..nfds)
            .filter_map(|_| memfd(u64::from(fd_size % 64) * 4096))
            .collect();
        out.push((bytes, fds));
    }
    out
}

/// Runs one input through a fresh backend. Never panics on any input
/// (a panic is what the fuzzer looks for).
pub fn message_stream(data: &[u8]) {
    let cfg = VhostUserConfig {
        queues: 2,
        ..VhostUserConfig::new("/nonexistent/fuzz.sock", VhostUserMode::Server)
    };
    let shared = Arc::new(Shared::new("fuzz", &cfg));
    let Ok((ours, mut theirs)) = UnixStream::pair() else {
        return;
    };
    let Ok(mut ch) = Channel::new(ours) else {
        return;
    };
    let _ = theirs.set_nonblocking(true);
    let backend = std::sync::Mutex::new(Backend::new(shared.clone()));
    let Ok(pool) = PacketPool::new(
        "fuzz",
        &MemoryConfig {
            frame_size: 2048,
            frames: 256,
            hugepages: HugepageMode::Never,
        },
    ) else {
        return;
    };
    let mut cache = pool.cache();
    let mut rxq: Vec<VhostRxq> = (0..2).map(|q| VhostRxq::new(shared.clone(), q)).collect();
    let mut txq = VhostTxq::new(shared.clone(), 0);
    let mut sink = [0u8; 4096];
    for (bytes, fds) in messages(data) {
        if !send(&theirs, &bytes, &fds) {
            break;
        }
        drop(fds);
        let ended = crate::conn::serve_one(&shared, &backend, &mut ch).is_some();
        while matches!(theirs.read(&mut sink), Ok(n) if n > 0) {}
        for q in &mut rxq {
            let mut b = Batch::new();
            q.rx_burst(&mut b, &mut cache);
            cache.free_batch(&mut b);
        }
        let mut b = Batch::new();
        txq.tx_burst(&mut b, &mut cache);
        if ended {
            break;
        }
    }
    drop(rxq);
    drop(txq);
    backend.lock().unwrap_or_else(|p| p.into_inner()).reset();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(sel: u8, flags: u8, nfds: u8, fd_size: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![sel, flags, nfds, fd_size];
        v.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        v.extend_from_slice(payload);
        v
    }

    fn state(index: u32, num: u32) -> Vec<u8> {
        [index.to_le_bytes(), num.to_le_bytes()].concat()
    }

    /// A well-formed start (features, memory table, a ring pointed into
    /// the table and kicked) and assorted garbage all end without a panic;
    /// the structured inputs are also the corpus seeds.
    #[test]
    fn structured_inputs_run() {
        let uva = 0x7000_0000_0000u64;
        let mut good = Vec::new();
        good.extend(msg(1, 0, 0, 0, &[]));
        good.extend(msg(2, 1, 0, 0, &(1u64 << 32).to_le_bytes()));
        good.extend([0xff, 1, 0, 0, 0, 0]);
        good.extend(uva.to_le_bytes());
        good.extend(msg(8, 0, 0, 0, &state(1, 256)));
        let mut addr = state(1, 0);
        for v in [uva, uva + 0x2000, uva + 0x1000, 0] {
            addr.extend(v.to_le_bytes());
        }
        good.extend(msg(9, 0, 0, 0, &addr));
        good.extend(msg(12, 0, 1, 0, &1u64.to_le_bytes()));
        good.extend(msg(18, 1, 0, 0, &state(1, 1)));
        good.extend(msg(11, 0, 0, 0, &state(1, 0)));
        let inputs: [&[u8]; 5] = [
            &good,
            &msg(5, 1, 9, 1, &[1, 0, 0, 0, 0, 0, 0, 0]),
            &msg(200, 1, 0, 0, &[]),
            &msg(2, 3, 0, 0, &[0; 8]),
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ];
        for i in inputs {
            message_stream(i);
        }
    }
}
