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
//! [`pcap`], [`ring`].

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

use nfv_mem::{Batch, PoolCache};
use std::sync::Arc;

pub use config::{PortConfig, PortKind, PortNo};
pub use gauges::{Gauge, PortGauges};
pub use generator::GeneratorControl;
pub use open::{OpenError, PortFactory};
pub use port_type::{Lenders, NoRoutes, OpenContext, PortOpenError, PortType, Routes};
pub use receiver::ReceiverStats;
pub use stats::{DropReason, PortStats, QueueCounters, QueueSnapshot};

/// A receive queue, owned by one PMD thread.
pub trait RxQueue: Send {
    /// Appends up to `batch.remaining_capacity()` received packets to
    /// `batch`, allocating from `pool` if the port copies into switch
    /// memory. Returns the number appended. Must not block.
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize;
    /// Ends the burst: every packet the last `rx_burst` produced has been
    /// sent or freed. A port whose packets borrow its own memory (split
    /// packets, see `nfv_mem::packet`) gives that memory back here; the
    /// next `rx_burst` also ends the previous burst, so a caller that
    /// keeps packets across bursts must join them first
    /// (`Packet::join_tail`).
    fn burst_done(&mut self) {}
}

/// A transmit queue, owned by one PMD thread.
pub trait TxQueue: Send {
    /// Sends a prefix of `batch` and removes the sent packets from it;
    /// packets it could not send stay in `batch` for the caller to count
    /// and free. Returns the number sent. Must not block.
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize;
    /// Largest frame (bytes, no FCS) this queue accepts.
    fn max_frame(&self) -> usize {
        usize::MAX
    }
    /// Whether the queue's peer takes packets now (a VNF connected and its
    /// rings running). A fast_failover group skips buckets watching a port
    /// that is not live. Read per packet of such a group: an atomic load,
    /// never a syscall or a lock.
    fn is_live(&self) -> bool {
        true
    }
    /// True when `tx_burst` takes split packets (head in a switch buffer,
    /// tail borrowed from the sender: see `nfv_mem::packet`) and is done
    /// with them when it returns. Ports that keep packets past their burst
    /// (kernel rings, other threads) answer false and the datapath joins
    /// split packets before handing them over.
    fn takes_split(&self) -> bool {
        false
    }
    /// The offloads this queue's peer takes as they are, now: packets
    /// carrying offload metadata it does not accept (a partial checksum,
    /// a large segment; `nfv_mem::Packet::offload`) are checksummed or
    /// segmented in software by the datapath before `tx_burst`. Asked only
    /// for such packets. None by default: ports without a virtio-net
    /// header get complete frames.
    fn offload_caps(&mut self) -> nfv_offload::OffloadCaps {
        nfv_offload::OffloadCaps::NONE
    }
    /// Largest frame this queue accepts when it carries a large segment
    /// its peer segments itself (only asked when [`Self::offload_caps`]
    /// accepts one).
    fn max_segment_frame(&self) -> usize {
        self.max_frame()
    }
}

/// Ends a [`TxQueue::tx_burst`] of a port that hands frames to the kernel
/// one by one: the first `done` packets of `batch` were tried, those whose
/// bit is set in `refused` were refused one at a time (too big, say) and
/// the rest went out. Frees what went out and leaves in `batch`, in order,
/// the refused ones and those not tried, for the caller to count and free.
/// Returns the number sent.
pub fn settle_tx(batch: &mut Batch, pool: &mut PoolCache, done: usize, refused: u64) -> usize {
    let sent = done - refused.count_ones() as usize;
    if sent == batch.len() {
        pool.free_batch(batch);
        return sent;
    }
    let mut rest = Batch::new();
    for (i, p) in batch.drain(..).enumerate() {
        if i < done && refused & (1 << i) == 0 {
            pool.free(p);
        } else {
            rest.push(p);
        }
    }
    *batch = rest;
    sent
}

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

/// The clock of ports that pace or timestamp: the TSC in the switch, a
/// fake clock in tests. Read once per burst.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub now: fn() -> u64,
    /// Ticks per second.
    pub hz: u64,
}

impl Clock {
    pub fn tsc() -> Clock {
        Clock {
            now: nfv_tsc::now,
            hz: nfv_tsc::hz(),
        }
    }
}
