//! Per-PMD counters and their cycle arithmetic.
//!
//! "Busy" follows OVS `dpif-netdev/pmd-perf-show`: an iteration that
//! received at least one packet is busy, and all its cycles (rx, lookup,
//! actions, tx) are busy cycles. Cycles per packet = busy cycles / packets
//! received. Cycles spent inside port rx/tx bursts are counted separately
//! so "switch work" (lookup, actions, batching) can be told apart from the
//! cost of the ports themselves.

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How a PMD figure behaves over time: a counter only grows (until
/// clear-stats; rates and [`PmdSnapshot::since`] subtract it), a gauge is
/// the latest value (an occupancy, never subtracted). One kind for every
/// family of figures.
pub use nfv_ports::FigureKind;

/// What a figure counts, for the readers that scale it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FigureUnit {
    Packets,
    /// Decisions (one per packet), named by the tier that took them.
    Decisions,
    Iterations,
    /// TSC cycles.
    Cycles,
    Bytes,
    Megaflows,
    Connections,
}

/// One per-PMD figure as every reader presents it: `/metrics` exports it as
/// `pmd_<name>` with `help`, `ctl show pmd` gives it a column when `column`
/// names one, the control protocol and the REST API carry it by `name`
/// (a [`PmdSnapshot`] field, flattened into their PMD reports).
#[derive(Clone, Copy, Debug)]
pub struct PmdFigure {
    pub name: &'static str,
    pub kind: FigureKind,
    pub unit: FigureUnit,
    pub help: &'static str,
    pub column: Option<&'static str>,
    pub get: fn(&PmdSnapshot) -> u64,
}

/// Declares every per-PMD figure once and generates what each one needs:
/// the shared atomics ([`PmdStats`]), the PMD's local accumulators
/// ([`PmdCounters`], only for figures the poll loop counts), the reader's
/// copy ([`PmdSnapshot`], with `snapshot`, `publish` and `since`) and the
/// table ([`PMD_FIGURES`]) that the control protocol, `/metrics` and `ctl`
/// iterate. Figures in `poll_loop` are accumulated by the PMD in plain
/// `u64`s and published every few polls; figures in `housekeeping` are
/// stored by the PMD's housekeeping directly into [`PmdStats`].
///
/// Adding a figure: one line here, plus where it is counted.
macro_rules! pmd_figures {
    (
        poll_loop {
            $( $(#[doc = $ldoc:literal])* $lname:ident : $lkind:ident $lunit:ident, $lcol:expr, $lhelp:literal; )*
        }
        housekeeping {
            $( $(#[doc = $hdoc:literal])* $hname:ident : $hkind:ident $hunit:ident, $hcol:expr, $hhelp:literal; )*
        }
    ) => {
        /// Written by one PMD thread (plain stores), read by the control
        /// plane. The PMU part is a sequence lock so readers get whole
        /// readings.
        #[derive(Debug, Default)]
        #[repr(align(64))]
        pub struct PmdStats {
            $( $(#[doc = $ldoc])* pub $lname: AtomicU64, )*
            $( $(#[doc = $hdoc])* pub $hname: AtomicU64, )*
            /// Free frames in this PMD's packet-pool cache, published at
            /// housekeeping (every 16 polls); with the pool's shared free
            /// list it tells how many frames are held by packets. Not a
            /// figure of its own: `show node` sums it into the pool's.
            pub pool_cached: AtomicU64,
            /// PMU counter totals, published every ~100 ms (own cache lines).
            pub pmu: nfv_pmu::SharedPmu,
        }

        /// What a PMD accumulates locally between publications.
        #[derive(Debug, Default, Clone, Copy)]
        pub struct PmdCounters {
            $( $(#[doc = $ldoc])* pub $lname: u64, )*
        }

        /// A plain copy of a PMD's figures. Serialized by field name: the
        /// control protocol's PMD report flattens it.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct PmdSnapshot {
            $( $(#[doc = $ldoc])* pub $lname: u64, )*
            $( $(#[doc = $hdoc])* pub $hname: u64, )*
        }

        /// Every per-PMD figure, in declaration order.
        pub const PMD_FIGURES: &[PmdFigure] = &[
            $( PmdFigure {
                name: stringify!($lname),
                kind: FigureKind::$lkind,
                unit: FigureUnit::$lunit,
                help: $lhelp,
                column: $lcol,
                get: |s| s.$lname,
            }, )*
            $( PmdFigure {
                name: stringify!($hname),
                kind: FigureKind::$hkind,
                unit: FigureUnit::$hunit,
                help: $hhelp,
                column: $hcol,
                get: |s| s.$hname,
            }, )*
        ];

        impl PmdStats {
            /// Publishes the PMD's running totals (single writer: plain
            /// stores).
            #[inline]
            pub fn publish(&self, c: &PmdCounters) {
                $( self.$lname.store(c.$lname, Relaxed); )*
            }

            pub fn snapshot(&self) -> PmdSnapshot {
                PmdSnapshot {
                    $( $lname: self.$lname.load(Relaxed), )*
                    $( $hname: self.$hname.load(Relaxed), )*
                }
            }
        }

        impl PmdSnapshot {
            /// Counter-wise `self - earlier` (for rates over an interval);
            /// gauges keep their latest value.
            pub fn since(&self, earlier: &PmdSnapshot) -> PmdSnapshot {
                PmdSnapshot {
                    $( $lname: pmd_figures!(@since $lkind, self.$lname, earlier.$lname), )*
                    $( $hname: pmd_figures!(@since $hkind, self.$hname, earlier.$hname), )*
                }
            }

            /// Figure-wise `self + other`: several PMDs' figures as one
            /// (gauges too: the node's connections are the PMDs' sum).
            pub fn plus(&self, other: &PmdSnapshot) -> PmdSnapshot {
                PmdSnapshot {
                    $( $lname: self.$lname.wrapping_add(other.$lname), )*
                    $( $hname: self.$hname.wrapping_add(other.$hname), )*
                }
            }
        }
    };
    (@since Counter, $now:expr, $then:expr) => { $now.wrapping_sub($then) };
    (@since Gauge, $now:expr, $then:expr) => { $now };
}

pmd_figures! {
    poll_loop {
        iterations: Counter Iterations, None, "Poll loop iterations of a PMD thread.";
        busy_iterations: Counter Iterations, None,
            "Poll loop iterations that received packets.";
        busy_cycles: Counter Cycles, None,
            "TSC cycles a PMD thread spent in iterations that received packets.";
        idle_cycles: Counter Cycles, None,
            "TSC cycles a PMD thread spent in iterations that received nothing.";
        /// An estimate, timed on every 8th iteration and counted 8 times
        /// (see `pmd.rs`).
        port_cycles: Counter Cycles, None,
            "TSC cycles inside port rx and tx bursts during busy iterations (sampled).";
        rx_packets: Counter Packets, Some("rx pkts"), "Packets received by a PMD thread.";
        /// Here and in the megaflow, port-wide and classifier hits and the
        /// misses, a packet repeating the key of the one before it counts
        /// under the tier that answered that one.
        emc_hits: Counter Decisions, Some("emc hits"), "Exact-match cache hits.";
        /// Fewer than decisions while the EMC is bypassed for a low hit
        /// rate (see `decision.rs`).
        emc_probes: Counter Decisions, None, "Decisions that probed the exact-match cache.";
        megaflow_hits: Counter Decisions, Some("megaflow hits"), "Megaflow cache hits.";
        /// The packet's in_port has a rule that takes all of its packets
        /// (`nfv_flow::port_wide`).
        port_wide_hits: Counter Decisions, Some("port-wide hits"),
            "Decisions taken without a lookup: the in_port had a rule taking all of its packets.";
        classifier_hits: Counter Decisions, Some("cls hits"), "Classifier (rule table) hits.";
        table_misses: Counter Decisions, Some("misses"),
            "Packets that matched no rule (dropped as no_match).";
        repeated_keys: Counter Decisions, None,
            "Decisions that reused the answer for the packet before (same key), also counted under that answer's tier.";
        megaflow_runs: Counter Decisions, None,
            "Megaflow hits taken from an earlier packet of the batch in the same megaflow, without a probe.";
        /// Slow path only: the caches keep the resolved rule, so this
        /// grows with new flows through a pipeline, not with packets.
        pipeline_resolutions: Counter Decisions, None,
            "Classifier decisions that followed goto_table/resubmit through later tables.";
        /// `ct(table=T)`: the packet went through the decision again, in
        /// table T with its ct fields set.
        ct_recirculations: Counter Packets, None,
            "Packets looked up again after ct(table=N) (recirculations).";
        /// The first rules of a table whose matches only read what `ct`
        /// decided answer its packets (`nfv_flow::ct_dispatch`).
        ct_dispatched: Counter Packets, None,
            "Recirculations decided by the table's first rules on the ct verdict alone, without a lookup.";
        ct_recirc_too_deep: Counter Packets, None,
            "Packets dropped for recirculating more times than the limit.";
    }
    housekeeping {
        cache_bytes: Gauge Bytes, Some("cache KiB"),
            "Bytes a PMD thread's decision caches (EMC, megaflows) hold.";
        megaflows: Gauge Megaflows, Some("megaflows"), "Megaflows a PMD thread holds.";
        /// A full cache keeps what it has, so a growing refusal count is
        /// how an operator sees traffic that outgrew it.
        megaflow_refused: Counter Megaflows, Some("mf refused"),
            "Megaflows not cached because the PMD's megaflow cache was full.";
        /// This PMD's connection table (`nfv_conntrack`); zero until a
        /// flow table with a `ct` action is installed.
        ct_connections: Gauge Connections, Some("conns"),
            "Connections in a PMD thread's connection table.";
        ct_new: Counter Packets, None, "Packets ct() answered +new.";
        ct_established: Counter Packets, None, "Packets ct() answered +est.";
        ct_related: Counter Packets, None, "Packets ct() answered +rel.";
        ct_invalid: Counter Packets, None,
            "Packets ct() answered +inv (by the tracker, or untrackable, or a refused commit).";
        ct_committed: Counter Connections, None, "Connections committed by ct(commit).";
        ct_expired: Counter Connections, None, "Connections removed when their timeout passed.";
        /// Table full, zone limit, or both directions' keys taken.
        ct_commit_refused: Counter Connections, None,
            "ct(commit)s refused (connection table or zone limit full); the packet is +inv.";
        ct_untrackable: Counter Packets, None,
            "Packets ct() could not parse (not IP, IP fragments, malformed headers): +trk+inv.";
    }
}

impl PmdSnapshot {
    /// Busy cycles per received packet (`None` before any packet).
    pub fn cycles_per_packet(&self) -> Option<f64> {
        (self.rx_packets > 0).then(|| self.busy_cycles as f64 / self.rx_packets as f64)
    }
    /// Busy cycles per packet spent outside port rx/tx bursts.
    pub fn switch_cycles_per_packet(&self) -> Option<f64> {
        (self.rx_packets > 0).then(|| {
            self.busy_cycles.saturating_sub(self.port_cycles) as f64 / self.rx_packets as f64
        })
    }
    /// Share of cycles in busy iterations, 0..=100.
    pub fn busy_percent(&self) -> f64 {
        let total = self.busy_cycles + self.idle_cycles;
        if total == 0 {
            0.0
        } else {
            100.0 * self.busy_cycles as f64 / total as f64
        }
    }
    /// Mean packets per busy iteration (batch fill).
    pub fn packets_per_busy_iteration(&self) -> f64 {
        if self.busy_iterations == 0 {
            0.0
        } else {
            self.rx_packets as f64 / self.busy_iterations as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycle_arithmetic() {
        let a = PmdSnapshot {
            rx_packets: 100,
            busy_cycles: 1000,
            idle_cycles: 0,
            ..Default::default()
        };
        let b = PmdSnapshot {
            rx_packets: 1100,
            busy_cycles: 51_000,
            idle_cycles: 50_000,
            port_cycles: 20_000,
            busy_iterations: 40,
            ..Default::default()
        };
        let d = b.since(&a);
        assert_eq!(d.rx_packets, 1000);
        assert_eq!(d.cycles_per_packet(), Some(50.0));
        assert_eq!(d.switch_cycles_per_packet(), Some(30.0));
        assert!((d.busy_percent() - 50.0).abs() < 1e-9);
        assert_eq!(d.packets_per_busy_iteration(), 25.0);
        assert_eq!(PmdSnapshot::default().cycles_per_packet(), None);
    }

    #[test]
    fn every_figure_declared_once_under_its_field_name() {
        // The table's names are the snapshot's serialized keys, each once:
        // the protocol flattens the snapshot, `/metrics` and `ctl` iterate
        // the table, so a figure missing from either would vanish there.
        let mut s = PmdSnapshot::default();
        for (i, f) in PMD_FIGURES.iter().enumerate() {
            let mut v = serde_json::to_value(s).unwrap();
            v[f.name] = serde_json::json!(1000 + i as u64);
            s = serde_json::from_value(v).unwrap();
        }
        let keys = serde_json::to_value(s).unwrap();
        let keys = keys.as_object().unwrap();
        assert_eq!(keys.len(), PMD_FIGURES.len());
        for (i, f) in PMD_FIGURES.iter().enumerate() {
            assert_eq!((f.get)(&s), 1000 + i as u64, "{}", f.name);
            assert_eq!(keys[f.name], 1000 + i as u64, "{}", f.name);
            assert!(!f.help.is_empty() && f.help.ends_with('.'), "{}", f.name);
        }
    }

    #[test]
    fn since_subtracts_counters_and_keeps_gauges() {
        let earlier = PmdSnapshot {
            megaflows: 7,
            cache_bytes: 4096,
            megaflow_refused: 3,
            emc_hits: 10,
            ..Default::default()
        };
        let now = PmdSnapshot {
            megaflows: 5,
            cache_bytes: 8192,
            megaflow_refused: 13,
            emc_hits: 25,
            ..Default::default()
        };
        let d = now.since(&earlier);
        assert_eq!((d.megaflows, d.cache_bytes), (5, 8192), "gauges: latest");
        assert_eq!(
            (d.megaflow_refused, d.emc_hits),
            (10, 15),
            "counters: the difference"
        );
    }
}
