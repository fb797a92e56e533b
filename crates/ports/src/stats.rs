//! Per-port, per-queue counters with drops by reason.
//!
//! Every queue has exactly one writer (the PMD thread polling it, or for tx
//! the PMD thread owning that tx queue), so counters are updated with plain
//! relaxed load+store — no locked instructions — and each queue's counters
//! sit on their own cache lines so PMDs never false-share. Readers (the
//! control plane) may see a value a few batches old, never a torn one.

use serde::{Deserialize, Serialize};
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
    /// `ct(table=N)` sent the packet back through the pipeline more times
    /// than the limit, or more packets came back at once than a batch holds.
    RecircLimit => "recirc_limit",
}

/// How a figure behaves over time. Shared by every family of figures (per
/// port here, per PMD in `nfv_datapath::stats`, per VNF in
/// `nfv_control`), so `/metrics` types them all alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FigureKind {
    /// Only grows: readers take rates and deltas of it.
    Counter,
    /// The latest value: never subtracted.
    Gauge,
}

/// What a per-port figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PortUnit {
    Packets,
    /// `/metrics` gives these its `bytes` unit: `port_rx` + bytes is
    /// `nfvswitch_port_rx_bytes_total`.
    Bytes,
    /// TSC cycles.
    Cycles,
}

/// How one direction of a per-port figure is shown; `None`: not there.
#[derive(Clone, Copy, Debug)]
pub struct PortExport {
    /// `ctl show ports` column of the port's total.
    pub column: Option<&'static str>,
    /// `/metrics` help of the port's total, `port_<rx|tx>_<name>`.
    pub port_help: Option<&'static str>,
    /// `/metrics` help of each queue's, `port_queue_<rx|tx>_<name>`.
    pub queue_help: Option<&'static str>,
}

/// One per-queue figure as every reader presents it, per direction (`rx`
/// on rx queues, `tx` on tx queues, `None` where it is not counted). The
/// control protocol and the REST API carry it by `name` in a port's
/// direction and queue reports ([`QueueFigures`], flattened into them);
/// `/metrics` exports the directions and levels that have a help text,
/// `ctl show ports` the ones with a column.
#[derive(Clone, Copy, Debug)]
pub struct PortFigure {
    pub name: &'static str,
    pub kind: FigureKind,
    pub unit: PortUnit,
    pub rx: Option<PortExport>,
    pub tx: Option<PortExport>,
    pub get: fn(&QueueFigures) -> u64,
}

impl PortFigure {
    /// How direction `rx` (else tx) shows it.
    pub fn export(&self, rx: bool) -> Option<PortExport> {
        if rx { self.rx } else { self.tx }
    }
}

/// Declares every per-queue figure once and generates what each one
/// needs: the queue's atomics ([`QueueCounters`]), the reader's copy
/// ([`QueueSnapshot`], with `snapshot`, `accumulate` and `since`), the
/// control protocol's part of it ([`QueueFigures`]) and the table
/// ([`PORT_FIGURES`]) that `/metrics` and `ctl show ports` iterate. Drops
/// are counted beside them, by [`DropReason`].
///
/// Adding a figure: one entry here (per direction: `ctl` column, help of
/// the port total, help per queue, each `None` where not shown), plus
/// where it is counted (`QueueCounters::add` and friends, from the PMD).
macro_rules! port_figures {
    ( $(
        $(#[doc = $doc:literal])*
        $name:ident : $kind:ident $unit:ident {
            $( rx: $rcol:expr, $rport:expr, $rqueue:expr; )?
            $( tx: $tcol:expr, $tport:expr, $tqueue:expr; )?
        }
    )* ) => {
        /// Counters of one queue in one direction.
        #[derive(Debug, Default)]
        #[repr(align(64))]
        pub struct QueueCounters {
            $( $(#[doc = $doc])* pub $name: AtomicU64, )*
            pub drops: [AtomicU64; DropReason::COUNT],
        }

        /// A plain copy of a queue's counters (or of a port direction's,
        /// summed over its queues).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct QueueSnapshot {
            $( $(#[doc = $doc])* pub $name: u64, )*
            pub drops: [u64; DropReason::COUNT],
        }

        /// A queue's or a port direction's figures but its drops, as the
        /// control protocol carries them (flattened, by name).
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct QueueFigures {
            $( $(#[doc = $doc])* pub $name: u64, )*
        }

        /// Every per-queue figure, in declaration order.
        pub const PORT_FIGURES: &[PortFigure] = &[
            $( PortFigure {
                name: stringify!($name),
                kind: FigureKind::$kind,
                unit: PortUnit::$unit,
                rx: port_figures!(@export $( $rcol, $rport, $rqueue )?),
                tx: port_figures!(@export $( $tcol, $tport, $tqueue )?),
                get: |s| s.$name,
            }, )*
        ];

        impl QueueCounters {
            pub fn snapshot(&self) -> QueueSnapshot {
                let mut drops = [0; DropReason::COUNT];
                for (d, c) in drops.iter_mut().zip(&self.drops) {
                    *d = c.load(Relaxed);
                }
                QueueSnapshot {
                    $( $name: self.$name.load(Relaxed), )*
                    drops,
                }
            }
        }

        impl QueueSnapshot {
            pub fn accumulate(&mut self, o: &QueueSnapshot) {
                $( self.$name += o.$name; )*
                for (a, b) in self.drops.iter_mut().zip(o.drops) {
                    *a += b;
                }
            }

            /// `self - earlier`, figure by figure (counters wrap).
            pub fn since(&self, earlier: &QueueSnapshot) -> QueueSnapshot {
                let mut drops = self.drops;
                for (a, b) in drops.iter_mut().zip(earlier.drops) {
                    *a = a.wrapping_sub(b);
                }
                QueueSnapshot {
                    $( $name: port_figures!(@since $kind, self.$name, earlier.$name), )*
                    drops,
                }
            }

            /// The figures the control protocol carries.
            pub fn figures(&self) -> QueueFigures {
                QueueFigures {
                    $( $name: self.$name, )*
                }
            }
        }
    };
    (@export) => { None };
    (@export $col:expr, $port:expr, $queue:expr) => {
        Some(PortExport { column: $col, port_help: $port, queue_help: $queue })
    };
    (@since Counter, $now:expr, $then:expr) => { $now.wrapping_sub($then) };
    (@since Gauge, $now:expr, $then:expr) => { $now };
}

port_figures! {
    packets: Counter Packets {
        rx: Some("rx pkts"), Some("Packets received by the switch on a port."),
            Some("Packets received on one rx queue of a port.");
        tx: Some("tx pkts"), Some("Packets transmitted by the switch on a port."),
            Some("Packets transmitted on one tx queue of a port (one per PMD thread).");
    }
    bytes: Counter Bytes {
        rx: None, Some("Bytes received on a port."), Some("Bytes received on one rx queue.");
        tx: None, Some("Bytes transmitted on a port."), Some("Bytes transmitted on one tx queue.");
    }
    /// Rx queues: TSC cycles their PMD spent on their bursts (receive,
    /// decide, act, send), sampled one poll in several and scaled: what rx
    /// queue placement balances (`nfv_sched`). Written by the one PMD
    /// polling the queue; a queue moves only after its old PMD let go. Tx
    /// queues do not count it.
    cycles: Counter Cycles {
        rx: None, None, Some("TSC cycles the polling PMD thread spent on one rx queue's bursts \
            (receive, decide, act, send; sampled), what rx queue placement balances.");
    }
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
}

impl QueueSnapshot {
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
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
