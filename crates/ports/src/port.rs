//! The port ([`Port`]): what every port type implements, shared between
//! the control plane and PMD threads; and [`Configured`], a port with the
//! config it was opened from.

use crate::config::PortConfig;
use crate::gauges::PortGauges;
use crate::queue::{RxQueue, TxQueue};
use crate::shared::{GeneratorControl, ReceiverStats};
use std::sync::Arc;

/// A port. Shared between the control plane and PMD threads.
pub trait Port: Send + Sync {
    fn name(&self) -> &str;
    fn type_name(&self) -> &'static str;
    fn n_rxq(&self) -> usize;
    /// True for a port that never receives (a sink): its queues cost a
    /// poll but carry no load, so spreading queues over PMDs does not
    /// count them (else a sink could take a PMD's share from a VNF).
    fn never_receives(&self) -> bool {
        false
    }
    /// Opens rx queue `q` (`q < n_rxq()`); called once per queue.
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue>;
    /// Opens tx queue `q` for PMD thread `q`; called once per PMD.
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue>;
    /// Port-type-specific facts and counters (`show ports`, `/metrics`,
    /// the chain report). Control plane only; may take a lock.
    fn gauges(&self) -> PortGauges {
        PortGauges::default()
    }
    /// A generator's run control (rate, packet budget), for the control
    /// plane.
    fn generator_control(&self) -> Option<Arc<GeneratorControl>> {
        None
    }
    /// A receiver's per-stream loss, reordering and latency counters.
    fn receiver_stats(&self) -> Option<Arc<ReceiverStats>> {
        None
    }
    /// The validated config the port was opened from, when it carries
    /// one ([`Configured`]): the control plane keeps no port list of its
    /// own beside the datapath's.
    fn config(&self) -> Option<&PortConfig> {
        None
    }
}

/// A port with the config it was opened from ([`Port::config`]); every
/// other method is the inner port's. Cold only: queues are opened from
/// the inner port, so bursts do not pass through here.
pub struct Configured {
    config: PortConfig,
    port: Arc<dyn Port>,
}

impl Configured {
    pub fn wrap(config: PortConfig, port: Arc<dyn Port>) -> Arc<dyn Port> {
        Arc::new(Configured { config, port })
    }
}

impl Port for Configured {
    fn name(&self) -> &str {
        self.port.name()
    }
    fn type_name(&self) -> &'static str {
        self.port.type_name()
    }
    fn n_rxq(&self) -> usize {
        self.port.n_rxq()
    }
    fn never_receives(&self) -> bool {
        self.port.never_receives()
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        self.port.open_rxq(q)
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        self.port.open_txq(q)
    }
    fn gauges(&self) -> PortGauges {
        self.port.gauges()
    }
    fn generator_control(&self) -> Option<Arc<GeneratorControl>> {
        self.port.generator_control()
    }
    fn receiver_stats(&self) -> Option<Arc<ReceiverStats>> {
        self.port.receiver_stats()
    }
    fn config(&self) -> Option<&PortConfig> {
        Some(&self.config)
    }
}
