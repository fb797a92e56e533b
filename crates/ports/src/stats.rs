//! Per-port, per-queue counters with drops by reason.
//!
//! Every queue has exactly one writer (the PMD thread polling it, or for tx
//! the PMD thread owning that tx queue), so counters are updated with plain
//! relaxed load+store — no locked instructions — and each queue's counters
//! sit on their own cache lines so PMDs never false-share. Readers (the
//! control plane) may see a value a few batches old, never a torn one.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Declares the drop reasons once: the enum, its count, the list every
/// reader iterates (`show ports`, the API, `/metrics`) and each reason's
/// name there. Adding a reason: one line here, plus where it is counted.
macro_rules! drop_reasons {
    ($( $(#[doc = $doc:literal])* $variant:ident => $name:literal, )*) => {
        /// Why a packet was dropped. Counted where it happened.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
        #[serde(rename_all = "snake_case")]
        #[repr(u8)]
        pub enum DropReason {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl DropReason {
            pub const COUNT: usize = [$(stringify!($variant),)*].len();
            pub const ALL: [DropReason; Self::COUNT] = [$(DropReason::$variant,)*];
            /// The reason's name in counters, reports and `/metrics`
            /// labels.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $( DropReason::$variant => $name, )*
                }
            }
        }
    };
}

drop_reasons! {
    /// No flow rule matched (table miss).
    NoMatch => "no_match",
    /// The matching rule's actions were `drop` (or outputs all skipped).
    Action => "action_drop",
    /// Shorter than an Ethernet header.
    Runt => "runt",
    /// The output queue was full (receiver not draining).
    TxFull => "tx_full",
    /// Output to a port that does not exist (any more).
    NoPort => "no_port",
    /// Larger than the output port accepts.
    TooBig => "too_big",
    /// Packet memory exhausted (rx, or copying for several outputs).
    NoBuffers => "no_buffers",
    /// No headroom to push a VLAN tag.
    NoHeadroom => "no_headroom",
    /// A port-specific error (see the port's own counters).
    PortError => "port_error",
    /// Offload metadata (a partial checksum, a large segment) that no
    /// longer fits its frame, or a segment that found no buffer: the
    /// checksum or segmentation the output needed could not be done.
    BadOffload => "bad_offload",
    /// `dec_ttl` met an IPv4 TTL or IPv6 hop limit of 0 or 1: a router
    /// may not forward it.
    TtlExpired => "ttl_expired",
    /// A `meter:N` action's rate was exceeded (the meter's band counts it
    /// too).
    MeterDrop => "meter_drop",
}

/// Counters of one queue in one direction.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct QueueCounters {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    pub drops: [AtomicU64; DropReason::COUNT],
    /// Rx queues: TSC cycles their PMD spent on their bursts (receive,
    /// decide, act, send), sampled one poll in several and scaled: what
    /// rx queue placement balances (`nfv_sched`). Written by the one PMD
    /// polling the queue; a queue moves only after its old PMD let go.
    pub cycles: AtomicU64,
}

#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    // Single writer per queue: a plain load+store is enough and avoids a
    // locked read-modify-write on the fast path.
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

impl QueueCounters {
    #[inline(always)]
    pub fn add(&self, packets: u64, bytes: u64) {
        bump(&self.packets, packets);
        bump(&self.bytes, bytes);
    }
    #[inline(always)]
    pub fn add_cycles(&self, n: u64) {
        bump(&self.cycles, n);
    }
    #[inline(always)]
    pub fn drop(&self, reason: DropReason, n: u64) {
        bump(&self.drops[reason as usize], n);
    }
    pub fn snapshot(&self) -> QueueSnapshot {
        let mut drops = [0; DropReason::COUNT];
        for (d, c) in drops.iter_mut().zip(&self.drops) {
            *d = c.load(Relaxed);
        }
        QueueSnapshot {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            drops,
        }
    }
}

/// A plain copy of a queue's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueSnapshot {
    pub packets: u64,
    pub bytes: u64,
    pub drops: [u64; DropReason::COUNT],
}

impl QueueSnapshot {
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    pub fn accumulate(&mut self, o: &QueueSnapshot) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        for (a, b) in self.drops.iter_mut().zip(o.drops) {
            *a += b;
        }
    }
}

/// All counters of a port: one set per rx queue and per tx queue.
#[derive(Debug)]
pub struct PortStats {
    pub rx: Box<[QueueCounters]>,
    pub tx: Box<[QueueCounters]>,
}

impl PortStats {
    pub fn new(rxqs: usize, txqs: usize) -> PortStats {
        PortStats {
            rx: (0..rxqs).map(|_| QueueCounters::default()).collect(),
            tx: (0..txqs).map(|_| QueueCounters::default()).collect(),
        }
    }
    pub fn rx_total(&self) -> QueueSnapshot {
        sum(&self.rx)
    }
    pub fn tx_total(&self) -> QueueSnapshot {
        sum(&self.tx)
    }
}

fn sum(qs: &[QueueCounters]) -> QueueSnapshot {
    let mut t = QueueSnapshot::default();
    for q in qs {
        t.accumulate(&q.snapshot());
    }
    t
}
