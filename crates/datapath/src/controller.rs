//! The path to and from OpenFlow controllers: packets a rule's
//! `controller` action sends up (`PACKET_IN`), and the packets a
//! controller sends down (`PACKET_OUT`, a [`crate::pmd`] command).
//!
//! Up: a PMD copies the packet's first bytes into a slot taken from a
//! free list and queues it on its in_port's queue; the agent
//! (`nfv_openflow`) takes slots from the queues, sends them, and gives
//! them back. All lists are bounded, preallocated channels used only
//! with `try_send`/`try_recv`: the PMD never allocates, never waits and
//! makes no system call for a packet-in; a packet-in that finds its
//! port's queue full is dropped and counted (`dropped_queue`), and the
//! packet itself goes on with the rule's other actions.
//!
//! The rate limit (OVS's `controller-rate-limit`, a packets-per-second
//! token bucket) is applied where the queues are drained, one port at a
//! time in turn, as OVS's packet-in scheduler does: a port flooding
//! misses fills only its own short queue, and every other port still
//! gets its turn at the rate. What waits past the rate stays queued, so
//! under a flood the PMD copies no more than the agent sends.

use crossbeam_channel::{Receiver, Sender, bounded};
use nfv_flow::PortNo;
use nfv_flow::meter::{Meter, MeterUnit};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Slots for packets on their way up (1 MiB with [`SLOT_BYTES`]).
pub const SLOTS: usize = 512;
/// Per-port queues (an in_port's is `in_port % PORT_QUEUES`: ports that
/// share one share its turn) and the slots each may hold: a burst of new
/// flows on one port fits, and a flooding port holds an eighth of the
/// slots at most.
pub const PORT_QUEUES: usize = 64;
pub const PORT_QUEUE_SLOTS: usize = SLOTS / 8;
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

/// Where a packet-in's [`Origin`] comes from: known already (a
/// controller's own packet), or the rule that decided, read only when a
/// `controller` action runs — most packets never need it, and working it
/// out compares the rule's whole mask.
#[derive(Clone, Copy, Debug)]
pub enum OriginOf<'a> {
    Known(Origin),
    Rule(&'a nfv_flow::Rule),
}

impl OriginOf<'_> {
    pub fn resolve(self) -> Origin {
        match self {
            OriginOf::Known(o) => o,
            OriginOf::Rule(r) => Origin::of_rule(r),
        }
    }
}

impl Origin {
    /// What a packet-in says about the rule that sent it: its table and
    /// cookie (a resolved pipeline's last rule's), and `NO_MATCH` for a
    /// table-miss rule (priority 0, matching everything in its table).
    pub fn of_rule(rule: &nfv_flow::Rule) -> Origin {
        let r = rule.parts.last().map_or(rule, |p| &**p);
        let mut mask = r.spec.matches.mask;
        mask.set_table(0);
        let miss = r.spec.priority == 0 && mask == nfv_flow::FlowKey::ZERO;
        Origin {
            table: r.spec.matches.key.table(),
            cookie: r.spec.cookie,
            reason: if miss { REASON_NO_MATCH } else { REASON_ACTION },
            metadata: 0,
        }
    }
}

/// The queues and counters between the PMDs and the agent.
/// One port's queue of packet-ins: both ends.
type PortQueue = (Sender<Box<PacketIn>>, Receiver<Box<PacketIn>>);

#[derive(Debug)]
pub struct ControllerPath {
    ports: Vec<PortQueue>,
    /// The port queue the drain starts at next (the agent's alone).
    turn: std::sync::atomic::AtomicUsize,
    free_tx: Sender<Box<PacketIn>>,
    free_rx: Receiver<Box<PacketIn>>,
    /// An agent takes packet-ins; until then the action drops them
    /// (`dropped_off`) without touching a slot.
    listening: AtomicBool,
    /// The rate limit (packets per second and burst), as a meter.
    pub rate: Arc<Meter>,
    pub sent: AtomicU64,
    /// Packet-ins whose port's queue was full (the agent, or the rate
    /// limit, did not keep up with that port), or that found no slot.
    pub dropped_queue: AtomicU64,
    pub dropped_off: AtomicU64,
    pub truncated: AtomicU64,
    /// Packets controllers sent that went out, and that could not be
    /// built (no buffer, too long) or found too many waiting.
    pub packet_out_sent: AtomicU64,
    pub packet_out_refused: AtomicU64,
    /// Packet-outs handed to PMDs and not yet sent.
    pub packet_outs_waiting: std::sync::atomic::AtomicUsize,
}

/// Packet-outs that may wait for the PMDs at once.
pub const PACKET_OUTS_WAITING: usize = 1024;

impl ControllerPath {
    /// `rate` packet-ins a second at most, `burst` at once.
    pub fn new(rate: u64, burst: u64) -> ControllerPath {
        let ports = (0..PORT_QUEUES)
            .map(|_| bounded(PORT_QUEUE_SLOTS))
            .collect();
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
            ports,
            turn: Default::default(),
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
            dropped_queue: AtomicU64::new(0),
            dropped_off: AtomicU64::new(0),
            truncated: AtomicU64::new(0),
            packet_out_sent: AtomicU64::new(0),
            packet_out_refused: AtomicU64::new(0),
            packet_outs_waiting: Default::default(),
        }
    }

    /// The counters by the names `show controllers` and `/metrics` give
    /// them (their one list): what happened to packet-ins, and to
    /// packet-outs.
    pub fn packet_in_figures(&self) -> [(&'static str, u64); 4] {
        [
            ("queued", self.sent.load(Relaxed)),
            ("dropped_queue", self.dropped_queue.load(Relaxed)),
            ("dropped_no_controller", self.dropped_off.load(Relaxed)),
            ("truncated", self.truncated.load(Relaxed)),
        ]
    }

    pub fn packet_out_figures(&self) -> [(&'static str, u64); 2] {
        [
            ("sent", self.packet_out_sent.load(Relaxed)),
            ("refused", self.packet_out_refused.load(Relaxed)),
        ]
    }

    /// An agent now takes packet-ins (or, `false`, no longer does).
    pub fn set_listening(&self, on: bool) {
        self.listening.store(on, Relaxed);
    }

    pub fn is_listening(&self) -> bool {
        self.listening.load(Relaxed)
    }

    /// The next packet-in within the rate, taking the port queues in
    /// turn; `None` when all are empty or the rate is spent for now
    /// (what waits stays queued). Never waits.
    pub fn take(&self) -> Option<Box<PacketIn>> {
        let start = self.turn.load(Relaxed);
        for i in 0..PORT_QUEUES {
            let q = (start + i) % PORT_QUEUES;
            if self.ports[q].1.is_empty() {
                continue;
            }
            // One packet's worth of tokens (thousandths of a packet).
            let cost = self.rate.cost(0);
            let got = self.rate.take(cost, nfv_tsc::now());
            if got < cost {
                self.rate.give_back(got);
                return None;
            }
            let Ok(slot) = self.ports[q].1.try_recv() else {
                self.rate.give_back(got);
                continue;
            };
            self.turn.store((q + 1) % PORT_QUEUES, Relaxed);
            return Some(slot);
        }
        None
    }

    /// Gives a slot back once sent.
    pub fn recycle(&self, slot: Box<PacketIn>) {
        let _ = self.free_tx.try_send(slot);
    }

    /// A PMD queues `frame` (already rate-checked) for the controllers:
    /// its first `max_len` bytes, at most a slot's.
    pub(crate) fn queue(&self, frame: &[u8], in_port: PortNo, max_len: u16, origin: Origin) {
        let port = &self.ports[usize::from(in_port) % PORT_QUEUES].0;
        // Checked before the copy: a flooding port's full queue costs
        // the PMD one load per packet, not a copy.
        if port.is_full() {
            self.dropped_queue.fetch_add(1, Relaxed);
            return;
        }
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
        match port.try_send(slot) {
            Ok(()) => {
                self.sent.fetch_add(1, Relaxed);
            }
            // Another PMD filled the queue meanwhile: never wait.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One port floods misses while another sends one every 10 ms:
    /// drained at the rate (1000/s), in turn, the quiet port's packet-ins
    /// all go up, and the flood's beyond its queue are counted, not
    /// copied. (A slow machine only lengthens the passes: more tokens
    /// each, the same turns.)
    #[test]
    fn a_flooding_port_does_not_starve_the_others() {
        let path = ControllerPath::new(1000, 20);
        path.set_listening(true);
        let frame = [0u8; 64];
        let mut quiet_sent = 0;
        let mut quiet_up = 0;
        let mut flood_up = 0;
        for round in 0..50 {
            for _ in 0..1000 {
                path.queue(&frame, 1, 64, Origin::default());
            }
            if round % 5 == 0 {
                path.queue(&frame, 2, 64, Origin::default());
                quiet_sent += 1;
            }
            // The agent's pass, every 2 ms: what the rate allows now
            // (2 packets' worth at 1000/s, more while the burst lasts).
            std::thread::sleep(std::time::Duration::from_millis(2));
            while let Some(slot) = path.take() {
                match slot.in_port {
                    1 => flood_up += 1,
                    _ => quiet_up += 1,
                }
                path.recycle(slot);
            }
        }
        assert_eq!(quiet_up, quiet_sent, "the quiet port was starved");
        assert!(flood_up > 0);
        assert!(path.dropped_queue.load(Relaxed) > 40_000);
        // Slots all came back.
        assert_eq!(
            path.free_rx.len() + path.ports.iter().map(|p| p.1.len()).sum::<usize>(),
            SLOTS
        );
    }
}
