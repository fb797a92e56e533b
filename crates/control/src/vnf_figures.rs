//! Per-VNF figures, declared once (`vnf_figures!`): the control
//! protocol's [`VnfReport`] (also the REST API's), the time series'
//! [`VnfRates`] and the table ([`VNF_FIGURES`]) that `/metrics` and `ctl
//! show chains` iterate. A VNF hop is a port of the switch: what the
//! switch transmits to it is the VNF's rx, what the switch receives from
//! it is the VNF's tx (`chains.rs` fills the figures in from the port's
//! counters and rates).

use nfv_flow::PortNo;
use nfv_ports::FigureKind;
use serde::{Deserialize, Serialize};

/// What a per-VNF figure is, for the readers that scale or print it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VnfUnit {
    /// Millions of packets per second over the last interval (`f64`;
    /// `/metrics` exports packets per second).
    Mpps,
    /// Gigabits per second over the last interval (`f64`; `/metrics`
    /// exports bytes per second).
    Gbps,
    /// A packet count (`u64`).
    Packets,
    /// Yes or no (`bool`; `/metrics` exports 1 or 0).
    Flag,
}

impl VnfUnit {
    /// `/metrics`' value of `v`, in its base unit.
    pub fn metric(self, v: VnfValue) -> f64 {
        match (self, v) {
            (VnfUnit::Mpps, VnfValue::Real(x)) => x * 1e6,
            (VnfUnit::Gbps, VnfValue::Real(x)) => x * 1e9 / 8.0,
            (_, VnfValue::Real(x)) => x,
            (_, VnfValue::Count(n)) => n as f64,
            (_, VnfValue::Flag(b)) => f64::from(u8::from(b)),
        }
    }
}

/// A per-VNF figure's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VnfValue {
    Real(f64),
    Count(u64),
    Flag(bool),
}

impl From<f64> for VnfValue {
    fn from(x: f64) -> VnfValue {
        VnfValue::Real(x)
    }
}

impl From<u64> for VnfValue {
    fn from(n: u64) -> VnfValue {
        VnfValue::Count(n)
    }
}

impl From<bool> for VnfValue {
    fn from(b: bool) -> VnfValue {
        VnfValue::Flag(b)
    }
}

/// One per-VNF figure as every reader presents it: the control protocol
/// and the REST API carry it by `name` (a [`VnfReport`] field), `/metrics`
/// exports it as `vnf_<metric>` with `help`, `ctl show chains` gives it a
/// column when `column` names one.
#[derive(Clone, Copy, Debug)]
pub struct VnfFigure {
    pub name: &'static str,
    pub kind: FigureKind,
    pub unit: VnfUnit,
    pub column: Option<&'static str>,
    pub metric: &'static str,
    pub help: &'static str,
    pub get: fn(&VnfReport) -> VnfValue,
}

/// Declares every per-VNF figure once and generates [`VnfReport`] (its
/// name and port, then the figures), [`VnfRates`] (its name and port, the
/// `rates`, and the drop rate the sampler adds) and [`VNF_FIGURES`].
/// `rates` are over the last interval, so the time series keeps them;
/// `totals` are the VNF's state now.
///
/// Adding a figure: one line here, plus where it is filled in
/// (`chains::report`).
macro_rules! vnf_figures {
    (
        rates {
            $( $(#[doc = $rdoc:literal])* $rname:ident : $rkind:ident $runit:ident,
               $rcol:expr, $rmetric:literal, $rhelp:literal; )*
        }
        totals {
            $( $(#[doc = $tdoc:literal])* $tname:ident : $tkind:ident $tunit:ident,
               $tcol:expr, $tmetric:literal, $thelp:literal; )*
        }
    ) => {
        /// One VNF of a chain, from the switch's side of its vhost-user
        /// port.
        #[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
        pub struct VnfReport {
            pub name: String,
            pub port: u16,
            $( $(#[doc = $rdoc])* pub $rname: vnf_figures!(@type $runit), )*
            $( $(#[doc = $tdoc])* pub $tname: vnf_figures!(@type $tunit), )*
        }

        /// One VNF of a chain over one interval (rx = what the VNF
        /// received).
        #[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
        pub struct VnfRates {
            pub name: String,
            pub port: PortNo,
            $( $(#[doc = $rdoc])* pub $rname: vnf_figures!(@type $runit), )*
            /// Drops on the VNF's port, both directions.
            pub drops_per_sec: f64,
        }

        /// Every per-VNF figure, in declaration order.
        pub const VNF_FIGURES: &[VnfFigure] = &[
            $( VnfFigure {
                name: stringify!($rname),
                kind: FigureKind::$rkind,
                unit: VnfUnit::$runit,
                column: $rcol,
                metric: $rmetric,
                help: $rhelp,
                get: |r| VnfValue::from(r.$rname),
            }, )*
            $( VnfFigure {
                name: stringify!($tname),
                kind: FigureKind::$tkind,
                unit: VnfUnit::$tunit,
                column: $tcol,
                metric: $tmetric,
                help: $thelp,
                get: |r| VnfValue::from(r.$tname),
            }, )*
        ];

        impl VnfReport {
            /// The report's rates, for the time series, with the drop
            /// rate of the VNF's port.
            pub fn rates(&self, drops_per_sec: f64) -> VnfRates {
                VnfRates {
                    name: self.name.clone(),
                    port: self.port,
                    $( $rname: self.$rname, )*
                    drops_per_sec,
                }
            }
        }
    };
    (@type Mpps) => { f64 };
    (@type Gbps) => { f64 };
    (@type Packets) => { u64 };
    (@type Flag) => { bool };
}

vnf_figures! {
    rates {
        /// What the VNF received (the switch sent to it).
        rx_mpps: Gauge Mpps, Some("rx Mpps"), "rx_packets_per_second",
            "Packets per second delivered to a VNF over the last second.";
        rx_gbps: Gauge Gbps, Some("rx Gbps"), "rx_bytes_per_second",
            "Bytes per second delivered to a VNF over the last second.";
        /// What the VNF sent back into the switch.
        tx_mpps: Gauge Mpps, Some("tx Mpps"), "tx_packets_per_second",
            "Packets per second a VNF sent over the last second.";
        tx_gbps: Gauge Gbps, Some("tx Gbps"), "tx_bytes_per_second",
            "Bytes per second a VNF sent over the last second.";
    }
    totals {
        rx_packets: Counter Packets, None, "rx_packets",
            "Packets the switch delivered to a VNF of a chain.";
        tx_packets: Counter Packets, None, "tx_packets",
            "Packets a VNF of a chain sent back into the switch.";
        /// Packets the VNF did not take (ring full) and packets it sent
        /// that the switch dropped.
        drops: Counter Packets, Some("drops"), "dropped_packets",
            "Packets dropped on a VNF's port, both directions.";
        /// Whether its port's peer is connected (ports without one: yes).
        connected: Gauge Flag, Some("connected"), "connected", "1 when the VNF is connected.";
    }
}
