//! Ports: where packets enter and leave the switch.
//!
//! A port hands out queue objects; each queue is owned by exactly one PMD
//! thread, so bursts take `&mut self` and need no locks. Rx queues are
//! assigned to PMDs by the datapath; every PMD gets its own tx queue on
//! every port (queue index = PMD index), as OVS does with XPS when a port
//! has enough tx queues.
//!
//! The datapath counts packets, bytes and drops by reason for every queue
//! ([`stats`]); port types only count what is special to them, as typed
//! [`gauges`] ([`Port::gauges`]).
//!
//! One module per port type: [`generator`], [`sink`], [`receiver`],
//! [`pcap`], [`ring`]. Below them: `port` ([`Port`], [`Configured`]),
//! `queue` ([`RxQueue`], [`TxQueue`], [`settle_tx`]), `clock` ([`Clock`])
//! and `shared` (what the generator and receiver share with the control
//! plane: [`GeneratorControl`], [`ReceiverStats`]).

pub mod builtin_settings;
pub mod config;
pub mod gauges;
pub mod generator;
pub mod open;
pub mod pcap;
pub mod port_type;
pub mod receiver;
pub mod ring;
pub mod sink;
pub mod stats;

mod clock;
mod port;
mod queue;
mod shared;

pub use clock::Clock;
pub use config::{PortConfig, PortKind, PortNo};
pub use gauges::{GAUGE_METRICS, Gauge, GaugeMetric, PortGauges};
pub use generator::GeneratorControl;
pub use open::{OpenError, PortFactory};
pub use port::{Configured, Port};
pub use port_type::{Lenders, NoRoutes, OpenContext, PortOpenError, PortType, Routes};
pub use queue::{RxQueue, TxQueue, settle_tx};
pub use receiver::ReceiverStats;
pub use stats::{
    DropReason, FigureKind, PORT_FIGURES, PortExport, PortFigure, PortStats, PortUnit,
    QueueCounters, QueueFigures, QueueSnapshot,
};
