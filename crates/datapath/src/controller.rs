//! The path to and from OpenFlow controllers: packets a rule's
//! `controller` action sends up (`PACKET_IN`), and the packets a
//! controller sends down (`PACKET_OUT`, a [`crate::pmd`] command).
//!
//! Up: a PMD copies the packet's first bytes into a slot taken from a
//! free list and queues it; the agent (`nfv_openflow`) takes slots from
//! the queue, sends them, and gives them back. Both lists are bounded,
//! preallocated channels used only with `try_send`/`try_recv`: the PMD
//! never allocates, never waits and makes no system call for a
//! packet-in; when the agent is slow or absent, slots run out and the
//! packet-in is dropped and counted (`dropped_queue`), and the packet
//! itself goes on with the rule's other actions. A shared token bucket
//! (a packets-per-second [`Meter`], taken per PMD in chunks) caps the
//! rate (`dropped_rate`), as OVS's `controller-rate-limit` does.

use crossbeam_channel::{Receiver, Sender, bounded};
use nfv_flow::PortNo;
use nfv_flow::meter::{Meter, MeterUnit};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Slots for packets on their way up.
pub const SLOTS: usize = 256;
/// Bytes a slot holds: a whole standard frame. A longer packet sent
/// whole (`controller` with no length) is cut here.
pub const SLOT_BYTES: usize = 2048;

/// `ofp_packet_in_reason`.
pub const REASON_NO_MATCH: u8 = 0;
pub const REASON_ACTION: u8 = 1;

/// One packet for the controllers.
#[derive(Debug)]
pub struct PacketIn {
    pub in_port: PortNo,
    /// The table of the rule that sent it, its cookie, and why
    /// ([`REASON_NO_MATCH`]: a table-miss rule, priority 0 matching all).
    pub table: u8,
    pub cookie: u64,
    pub reason: u8,
    /// The packet's `metadata` field.
    pub metadata: u64,
    /// The packet's length; `data` holds its first bytes.
    pub total_len: u16,
    pub data: Vec<u8>,
}

/// Where a rule's packet-ins come from, as the interpreter knows it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Origin {
    pub table: u8,
    pub cookie: u64,
    pub reason: u8,
    pub metadata: u64,
}

/// The queues and counters between the PMDs and the agent.
#[derive(Debug)]
pub struct ControllerPath {
    full_tx: Sender<Box<PacketIn>>,
    full_rx: Receiver<Box<PacketIn>>,
    free_tx: Sender<Box<PacketIn>>,
    free_rx: Receiver<Box<PacketIn>>,
    /// An agent takes packet-ins; until then the action drops them
    /// (`dropped_off`) without touching a slot.
    listening: AtomicBool,
    /// The rate limit (packets per second and burst), as a meter.
    pub rate: Arc<Meter>,
    pub sent: AtomicU64,
    pub dropped_rate: AtomicU64,
    pub dropped_queue: AtomicU64,
    pub dropped_off: AtomicU64,
    pub truncated: AtomicU64,
    /// Packets controllers sent that went out, and that could not be
    /// built (no buffer, too long).
    pub packet_out_sent: AtomicU64,
    pub packet_out_refused: AtomicU64,
}

impl ControllerPath {
    /// `rate` packet-ins a second at most, `burst` at once.
    pub fn new(rate: u64, burst: u64) -> ControllerPath {
        let (full_tx, full_rx) = bounded(SLOTS);
        let (free_tx, free_rx) = bounded(SLOTS);
        for _ in 0..SLOTS {
            let _ = free_tx.try_send(Box::new(PacketIn {
                in_port: 0,
                table: 0,
                cookie: 0,
                reason: 0,
                metadata: 0,
                total_len: 0,
                data: Vec::with_capacity(SLOT_BYTES),
            }));
        }
        ControllerPath {
            full_tx,
            full_rx,
            free_tx,
            free_rx,
            listening: AtomicBool::new(false),
            rate: Arc::new(Meter::new(
                0,
                MeterUnit::Pktps,
                true,
                rate.max(1),
                burst.max(1),
            )),
            sent: AtomicU64::new(0),
            dropped_rate: AtomicU64::new(0),
            dropped_queue: AtomicU64::new(0),
            dropped_off: AtomicU64::new(0),
            truncated: AtomicU64::new(0),
            packet_out_sent: AtomicU64::new(0),
            packet_out_refused: AtomicU64::new(0),
        }
    }

    /// An agent now takes packet-ins (or, `false`, no longer does).
    pub fn set_listening(&self, on: bool) {
        self.listening.store(on, Relaxed);
    }

    pub fn is_listening(&self) -> bool {
        self.listening.load(Relaxed)
    }

    /// The next packet-in, if any (never waits).
    pub fn take(&self) -> Option<Box<PacketIn>> {
        self.full_rx.try_recv().ok()
    }

    /// Gives a slot back once sent.
    pub fn recycle(&self, slot: Box<PacketIn>) {
        let _ = self.free_tx.try_send(slot);
    }

    /// A PMD queues `frame` (already rate-checked) for the controllers:
    /// its first `max_len` bytes, at most a slot's.
    pub(crate) fn queue(&self, frame: &[u8], in_port: PortNo, max_len: u16, origin: Origin) {
        let Ok(mut slot) = self.free_rx.try_recv() else {
            self.dropped_queue.fetch_add(1, Relaxed);
            return;
        };
        let want = frame.len().min(usize::from(max_len));
        let take = want.min(SLOT_BYTES);
        if take < want {
            self.truncated.fetch_add(1, Relaxed);
        }
        slot.data.clear();
        slot.data.extend_from_slice(&frame[..take]);
        slot.in_port = in_port;
        slot.table = origin.table;
        slot.cookie = origin.cookie;
        slot.reason = origin.reason;
        slot.metadata = origin.metadata;
        slot.total_len = frame.len().min(usize::from(u16::MAX)) as u16;
        match self.full_tx.try_send(slot) {
            Ok(()) => {
                self.sent.fetch_add(1, Relaxed);
            }
            // Cannot happen (as many slots as room), but never wait.
            Err(e) => {
                self.dropped_queue.fetch_add(1, Relaxed);
                let _ = self.free_tx.try_send(e.into_inner());
            }
        }
    }
}

/// A packet a controller sends out (`PACKET_OUT`): its bytes, the port
/// it is taken to have come in on, and the actions to run on it.
#[derive(Debug)]
pub struct PacketOut {
    pub in_port: PortNo,
    pub actions: Vec<nfv_flow::Action>,
    /// An output to `TABLE`: look the packet up in the flow table (as if
    /// received on `in_port`) instead of running `actions`.
    pub to_table: bool,
    pub data: Vec<u8>,
}

/// The in_port of a packet a controller sent (OpenFlow 1.0's
/// `OFPP_CONTROLLER`: no port of the switch has this number).
pub const FROM_CONTROLLER: PortNo = 0xfffd;
