//! VNF counters: per queue pair, single writer (the VNF's poll loop), read
//! by the reporter thread and by tests.
//!
//! Thread safety: every counter is an `AtomicU64` written by one thread
//! only, with a plain `load + store` (no locked instruction); readers may
//! see a counter a few packets old, never a torn one.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// One queue pair's counters, on its own cache line.
#[derive(Default)]
#[repr(align(64))]
pub struct QueueStats {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    drop_tx_full: AtomicU64,
    no_buffers: AtomicU64,
    rx_oversize: AtomicU64,
    tx_copy_failed: AtomicU64,
    switch_errors: AtomicU64,
    kicks: AtomicU64,
}

#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

impl QueueStats {
    #[inline]
    pub fn rx(&self, packets: u64, bytes: u64) {
        bump(&self.rx_packets, packets);
        bump(&self.rx_bytes, bytes);
    }
    #[inline]
    pub fn tx(&self, packets: u64, bytes: u64) {
        bump(&self.tx_packets, packets);
        bump(&self.tx_bytes, bytes);
    }
    /// Packets the app wanted to send but the tx ring had no room for.
    #[inline]
    pub fn drop_tx_full(&self, packets: u64) {
        bump(&self.drop_tx_full, packets);
    }
    /// Rx refills that found the VNF's pool empty.
    #[inline]
    pub fn no_buffers(&self, n: u64) {
        bump(&self.no_buffers, n);
    }
    /// Merged (MRG_RXBUF) frames too long for one packet buffer.
    pub fn rx_oversize(&self, n: u64) {
        bump(&self.rx_oversize, n);
    }
    /// Tx packets that could not be placed in shared memory.
    pub fn tx_copy_failed(&self, n: u64) {
        bump(&self.tx_copy_failed, n);
    }
    /// Virtqueue protocol violations by the switch (bad used ids, lengths).
    pub fn switch_errors(&self, n: u64) {
        bump(&self.switch_errors, n);
    }
    /// Kick eventfd writes (the switch asked to be woken).
    pub fn kicks(&self, n: u64) {
        bump(&self.kicks, n);
    }
    pub fn snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            rx_packets: self.rx_packets.load(Relaxed),
            rx_bytes: self.rx_bytes.load(Relaxed),
            tx_packets: self.tx_packets.load(Relaxed),
            tx_bytes: self.tx_bytes.load(Relaxed),
            drops: Drops {
                tx_ring_full: self.drop_tx_full.load(Relaxed),
                no_buffers: self.no_buffers.load(Relaxed),
                rx_oversize: self.rx_oversize.load(Relaxed),
                tx_copy_failed: self.tx_copy_failed.load(Relaxed),
            },
            switch_errors: self.switch_errors.load(Relaxed),
            kicks: self.kicks.load(Relaxed),
        }
    }
}

/// Drops by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Drops {
    /// Packets dropped because the tx virtqueue was full.
    pub tx_ring_full: u64,
    /// Rx refills that found the pool empty (DPDK's rx_nombuf); the
    /// switch drops what it cannot place in the rx ring meanwhile.
    pub no_buffers: u64,
    /// Received frames too long for one packet buffer (merged rx).
    pub rx_oversize: u64,
    /// Packets not placeable in shared memory for tx.
    pub tx_copy_failed: u64,
}

impl Drops {
    /// Every drop counter added up.
    pub fn total(&self) -> u64 {
        self.tx_ring_full + self.no_buffers + self.rx_oversize + self.tx_copy_failed
    }
    /// Packets received (counted in `rx_packets`) but not transmitted:
    /// `rx_packets == tx_packets + forward_drops()` (the apps drop nothing).
    pub fn forward_drops(&self) -> u64 {
        self.tx_ring_full + self.tx_copy_failed
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueSnapshot {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub drops: Drops,
    /// Virtqueue protocol violations by the switch.
    pub switch_errors: u64,
    /// Kick eventfd writes (syscalls the switch asked for).
    pub kicks: u64,
}

impl QueueSnapshot {
    fn add(&mut self, o: &QueueSnapshot) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.drops.tx_ring_full += o.drops.tx_ring_full;
        self.drops.no_buffers += o.drops.no_buffers;
        self.drops.rx_oversize += o.drops.rx_oversize;
        self.drops.tx_copy_failed += o.drops.tx_copy_failed;
        self.switch_errors += o.switch_errors;
        self.kicks += o.kicks;
    }
}

/// Everything the VNF counts. Shared (`Arc`) between the poll loop, the
/// reporter and whoever started the VNF.
pub struct VnfStats {
    queues: Vec<QueueStats>,
    connected: AtomicBool,
    connections: AtomicU64,
    sleeps: AtomicU64,
    features: AtomicU64,
}

impl VnfStats {
    pub fn new(queues: usize) -> VnfStats {
        VnfStats {
            queues: (0..queues).map(|_| QueueStats::default()).collect(),
            connected: AtomicBool::new(false),
            connections: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            features: AtomicU64::new(0),
        }
    }
    pub fn queue(&self, q: usize) -> &QueueStats {
        &self.queues[q]
    }
    /// Marks a negotiated session (`Some(features)`) or its end (`None`).
    pub fn set_connected(&self, features: Option<u64>) {
        if let Some(f) = features {
            self.features.store(f, Relaxed);
            bump(&self.connections, 1);
        }
        self.connected.store(features.is_some(), Relaxed);
    }
    pub fn connected(&self) -> bool {
        self.connected.load(Relaxed)
    }
    /// Times an adaptive VNF blocked on its call eventfds.
    #[inline]
    pub fn note_sleep(&self) {
        bump(&self.sleeps, 1);
    }
    pub fn snapshot(&self) -> Snapshot {
        let queues: Vec<QueueSnapshot> = self.queues.iter().map(|q| q.snapshot()).collect();
        let mut total = QueueSnapshot::default();
        for q in &queues {
            total.add(q);
        }
        Snapshot {
            connected: self.connected(),
            connections: self.connections.load(Relaxed),
            features: self.features.load(Relaxed),
            sleeps: self.sleeps.load(Relaxed),
            total,
            queues,
        }
    }
}

/// A consistent-enough copy of all counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    pub connected: bool,
    /// Sessions negotiated so far (reconnects = connections - 1).
    pub connections: u64,
    /// Virtio features of the current (or last) session.
    pub features: u64,
    pub sleeps: u64,
    pub total: QueueSnapshot,
    pub queues: Vec<QueueSnapshot>,
}

/// Rates over one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Rates {
    pub rx_mpps: f64,
    pub tx_mpps: f64,
    /// Frame bytes (no virtio header, no Ethernet preamble/IFG) x 8.
    pub rx_gbps: f64,
    pub tx_gbps: f64,
}

impl Rates {
    pub fn between(prev: &QueueSnapshot, now: &QueueSnapshot, dt: Duration) -> Rates {
        let s = dt.as_secs_f64().max(1e-9);
        let per = |a: u64, b: u64| b.wrapping_sub(a) as f64 / s;
        Rates {
            rx_mpps: per(prev.rx_packets, now.rx_packets) / 1e6,
            tx_mpps: per(prev.tx_packets, now.tx_packets) / 1e6,
            rx_gbps: per(prev.rx_bytes, now.rx_bytes) * 8.0 / 1e9,
            tx_gbps: per(prev.tx_bytes, now.tx_bytes) * 8.0 / 1e9,
        }
    }
}

/// The periodic stats line.
pub fn line(app: &str, r: &Rates, s: &Snapshot) -> String {
    format!(
        "vnf {app}: rx {:.3} Mpps {:.2} Gbps | tx {:.3} Mpps {:.2} Gbps | drops tx_ring_full {} no_buffers {}{} | {}",
        r.rx_mpps,
        r.rx_gbps,
        r.tx_mpps,
        r.tx_gbps,
        s.total.drops.tx_ring_full,
        s.total.drops.no_buffers,
        rare(&s.total),
        if s.connected {
            "connected"
        } else {
            "disconnected"
        }
    )
}

/// The rarer drop reasons and errors, only when they happened.
fn rare(q: &QueueSnapshot) -> String {
    let mut s = String::new();
    for (name, v) in [
        ("rx_oversize", q.drops.rx_oversize),
        ("tx_copy_failed", q.drops.tx_copy_failed),
        ("switch_errors", q.switch_errors),
    ] {
        if v > 0 {
            s += &format!(" {name} {v}");
        }
    }
    s
}

/// The final counters, one line per queue pair and a total.
pub fn final_report(app: &str, s: &Snapshot, elapsed: Duration) -> String {
    let mut out = format!(
        "vnf {app}: final counters after {:.1} s ({} session(s), {} sleep(s))\n",
        elapsed.as_secs_f64(),
        s.connections,
        s.sleeps
    );
    let row = |name: String, q: &QueueSnapshot| {
        format!(
            "  {name:<6} rx {:>12} pkts {:>15} B | tx {:>12} pkts {:>15} B | drops tx_ring_full {} no_buffers {}{}\n",
            q.rx_packets,
            q.rx_bytes,
            q.tx_packets,
            q.tx_bytes,
            q.drops.tx_ring_full,
            q.drops.no_buffers,
            rare(q)
        )
    };
    for (i, q) in s.queues.iter().enumerate() {
        out += &row(format!("q{i}"), q);
    }
    if s.queues.len() > 1 {
        out += &row("total".into(), &s.total);
    }
    out
}

/// What `--json-stats` holds (rewritten every interval).
#[derive(Serialize)]
pub struct JsonStats<'a> {
    pub app: &'a str,
    pub socket: &'a str,
    pub uptime_s: f64,
    pub interval_s: f64,
    #[serde(flatten)]
    pub rates: Rates,
    #[serde(flatten)]
    pub counters: &'a Snapshot,
}

/// Writes `v` to `path` atomically (temp file + rename), so a reader
/// never sees half a file.
pub fn write_json(path: &std::path::Path, v: &JsonStats<'_>) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let body = serde_json::to_vec_pretty(v).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_rates_and_reports() {
        let st = VnfStats::new(2);
        st.queue(0).rx(1_000_000, 64_000_000);
        st.queue(0).tx(999_000, 63_936_000);
        st.queue(0).drop_tx_full(1000);
        st.queue(1).rx(1, 60);
        st.queue(1).no_buffers(3);
        st.set_connected(Some(1 << 32));
        let s = st.snapshot();
        assert_eq!(s.total.rx_packets, 1_000_001);
        assert_eq!(
            s.total.drops,
            Drops {
                tx_ring_full: 1000,
                no_buffers: 3,
                ..Drops::default()
            }
        );
        assert_eq!(s.total.drops.total(), 1003);
        assert_eq!((s.connected, s.connections, s.features), (true, 1, 1 << 32));
        let r = Rates::between(
            &QueueSnapshot::default(),
            &s.queues[0],
            Duration::from_secs(1),
        );
        assert!((r.rx_mpps - 1.0).abs() < 1e-9);
        assert!((r.rx_gbps - 0.512).abs() < 1e-9);
        let l = line("macswap", &r, &s);
        assert!(l.contains("rx 1.000 Mpps 0.51 Gbps"), "{l}");
        assert!(l.contains("tx 0.999 Mpps 0.51 Gbps"), "{l}");
        assert!(
            l.contains("drops tx_ring_full 1000 no_buffers 3 | connected"),
            "{l}"
        );
        let f = final_report("macswap", &s, Duration::from_secs(2));
        assert_eq!(f.lines().count(), 4, "{f}");
        st.set_connected(None);
        assert!(!st.snapshot().connected);
    }

    #[test]
    fn json_has_the_demo_fields() {
        let st = VnfStats::new(1);
        st.queue(0).rx(10, 640);
        let s = st.snapshot();
        let dir = std::env::temp_dir().join(format!("nfv-vnf-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.json");
        let j = JsonStats {
            app: "io",
            socket: "/x",
            uptime_s: 1.0,
            interval_s: 1.0,
            rates: Rates::default(),
            counters: &s,
        };
        write_json(&p, &j).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(v["total"]["rx_packets"], 10);
        assert_eq!(v["queues"][0]["rx_bytes"], 640);
        assert_eq!(v["total"]["drops"]["tx_ring_full"], 0);
        for k in [
            "rx_mpps",
            "tx_mpps",
            "rx_gbps",
            "tx_gbps",
            "connected",
            "app",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
