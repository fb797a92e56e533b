//! MAC learning for the `normal` action: a fixed-size, lock-free table of
//! (MAC → port, last seen). Collisions overwrite (it is a cache: an
//! unknown destination is flooded), so it can never grow or block.
//!
//! Thread safety: shared by all PMD threads; each entry is one atomic word
//! (MAC in the high 48 bits, port in the low 16) plus an atomic timestamp.
//! Learning writes only when the entry changes, so steady traffic does not
//! bounce cache lines between PMDs.

use nfv_wire::EthernetAddress;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Entries idle longer than this are forgotten (seconds), as in OVS.
pub const AGING_SECS: u32 = 300;

pub struct MacTable {
    entries: Box<[AtomicU64]>,
    seen: Box<[AtomicU32]>,
    mask: usize,
}

impl MacTable {
    pub fn new(entries: usize) -> MacTable {
        let n = entries.max(16).next_power_of_two();
        MacTable {
            entries: (0..n).map(|_| AtomicU64::new(0)).collect(),
            seen: (0..n).map(|_| AtomicU32::new(0)).collect(),
            mask: n - 1,
        }
    }

    #[inline(always)]
    fn slot(&self, mac: u64) -> usize {
        (mac.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & self.mask
    }

    /// Records that `mac` (a source address) was seen on `port` at `now`
    /// (seconds, any epoch). Multicast sources are ignored.
    #[inline]
    pub fn learn(&self, mac: &[u8; 6], port: u16, now: u32) {
        let mac = EthernetAddress(*mac);
        if mac.is_multicast() {
            return;
        }
        let m = mac.to_u64();
        let i = self.slot(m);
        let want = m << 16 | port as u64;
        if self.entries[i].load(Relaxed) != want {
            self.entries[i].store(want, Relaxed);
        }
        // Refresh the timestamp at most once a second per entry.
        if self.seen[i].load(Relaxed) != now {
            self.seen[i].store(now, Relaxed);
        }
    }

    /// The port `mac` was last seen on, if known and not aged out.
    #[inline]
    pub fn lookup(&self, mac: &[u8; 6], now: u32) -> Option<u16> {
        let mac = EthernetAddress(*mac);
        if mac.is_multicast() {
            return None;
        }
        let m = mac.to_u64();
        let i = self.slot(m);
        let e = self.entries[i].load(Relaxed);
        if e >> 16 != m || e == 0 {
            return None;
        }
        if now.wrapping_sub(self.seen[i].load(Relaxed)) > AGING_SECS {
            return None;
        }
        Some(e as u16)
    }

    /// Forgets everything learned on `port` (when it is deleted).
    pub fn flush_port(&self, port: u16) {
        for e in self.entries.iter() {
            let v = e.load(Relaxed);
            if v != 0 && v as u16 == port {
                e.store(0, Relaxed);
            }
        }
    }

    /// Live entries: (MAC, port, seconds since seen).
    pub fn dump(&self, now: u32) -> Vec<([u8; 6], u16, u32)> {
        let mut v = Vec::new();
        for (e, s) in self.entries.iter().zip(self.seen.iter()) {
            let e = e.load(Relaxed);
            let age = now.wrapping_sub(s.load(Relaxed));
            if e != 0 && age <= AGING_SECS {
                v.push((EthernetAddress::from_u64(e >> 16).0, e as u16, age));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_moves_ages_and_ignores_multicast() {
        let t = MacTable::new(1024);
        let a = [0x02, 0, 0, 0, 0, 0xa];
        assert_eq!(t.lookup(&a, 10), None);
        t.learn(&a, 3, 10);
        assert_eq!(t.lookup(&a, 11), Some(3));
        t.learn(&a, 4, 12);
        assert_eq!(t.lookup(&a, 12), Some(4), "station moved");
        assert_eq!(t.lookup(&a, 12 + AGING_SECS + 1), None, "aged out");
        let mcast = [0x01, 0, 0x5e, 0, 0, 1];
        t.learn(&mcast, 5, 10);
        assert_eq!(t.lookup(&mcast, 10), None);
        t.flush_port(4);
        assert_eq!(t.lookup(&a, 12), None);
    }
}
