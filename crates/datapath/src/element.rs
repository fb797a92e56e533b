//! The forwarding element a PMD runs on every received batch: decision
//! ([`Decision`]: keys, EMC, classifier), then per packet either the
//! single-output fast path straight into the fabric or the action
//! interpreter, then [`Element::flush`] sends each output's batch with one
//! tx burst. It owns no thread and no channel, so tests feed it batches
//! directly (`tests/fixtures.rs`).
//!
//! Thread safety: one element per PMD thread; it shares only the flow
//! table snapshot (immutable) and the MAC table (lock-free) with others.

use crate::controller::{ControllerPath, Origin, PacketOut};
use crate::ct::ConnTable;
use crate::decision::{Decision, Verdict};
use crate::fabric::Fabric;
use crate::interpreter::{GroupTally, Interpreter};
use crate::mac_learning::MacTable;
use crate::stats::PmdCounters;
use nfv_flow::PortNo;
use nfv_flow::meter::{MeterBudget, Meters};
use nfv_flow::table::{FlowTable, Groups};
use nfv_mem::{Batch, PoolCache};
use nfv_ports::{DropReason, PortStats, QueueCounters, TxQueue};
use std::sync::Arc;

pub struct Element {
    decision: Decision,
    fabric: Fabric,
    mac: Arc<MacTable>,
    /// Seconds since the PMD started: the clock of MAC learning.
    now_secs: u32,
    /// See [`Element::set_now`].
    now_tsc: u64,
    /// The groups of the table generation in use (the interpreter's
    /// `group:N`), and this batch's bucket counts.
    groups: Arc<Groups>,
    /// The generation's meters, and this PMD's tokens in hand for them.
    meters: Arc<Meters>,
    budget: MeterBudget,
    tally: GroupTally,
    /// Where `controller` actions send packets (none in tests without
    /// one), and the rx counters of packets a controller sent.
    controller: Option<Arc<ControllerPath>>,
    injected: Arc<QueueCounters>,
    /// This PMD's connection table (`ct`), and the clock it runs on:
    /// milliseconds of the TSC, advanced with [`Element::set_now`].
    conntrack: ConnTable,
    now_ms: u64,
}

impl Element {
    /// `emc_entries` 0 disables the exact-match cache, `megaflow_entries`
    /// 0 the megaflow cache.
    pub fn new(
        emc_entries: usize,
        megaflow_entries: usize,
        table: Arc<FlowTable>,
        mac: Arc<MacTable>,
    ) -> Element {
        Element {
            groups: table.groups.clone(),
            meters: table.meters.clone(),
            budget: MeterBudget::default(),
            tally: GroupTally::default(),
            decision: Decision::new(emc_entries, megaflow_entries, table),
            fabric: Fabric::default(),
            mac,
            now_secs: 0,
            now_tsc: nfv_tsc::now(),
            controller: None,
            injected: Arc::default(),
            conntrack: ConnTable::new(nfv_conntrack::Config::default())
                .expect("the default connection table settings are valid"),
            now_ms: 0,
        }
    }

    /// Replaces the connection table with an empty one of these settings
    /// (at PMD start, before any packet).
    pub fn set_conntrack(
        &mut self,
        config: nfv_conntrack::Config,
    ) -> Result<(), nfv_conntrack::ConfigError> {
        self.conntrack = ConnTable::new(config)?;
        Ok(())
    }

    /// The connection table (dumps, flushes, expiry and counters go
    /// through the PMD that owns it).
    pub fn conntrack(&mut self) -> &mut ConnTable {
        &mut self.conntrack
    }

    /// Milliseconds of the clock `ct` runs on (see [`Element::set_now`]).
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// Where `controller` actions send packets.
    pub fn set_controller(&mut self, path: Arc<ControllerPath>) {
        self.controller = Some(path);
    }

    /// Runs a controller's packet (`PACKET_OUT`): its actions, or a
    /// lookup as if received on its in_port (`output:TABLE`). Counted on
    /// the element's own rx counters for such packets, not a port's.
    pub fn inject(
        &mut self,
        po: &PacketOut,
        pkt: nfv_mem::Packet,
        pool: &mut PoolCache,
        c: &mut PmdCounters,
    ) {
        let rx = self.injected.clone();
        if po.to_table {
            let mut batch = Batch::new();
            batch.push(pkt);
            self.process(po.in_port, &rx, &mut batch, pool, c);
            return;
        }
        let origin = Origin::default();
        Interpreter {
            fabric: &mut self.fabric,
            mac: &self.mac,
            now_secs: self.now_secs,
            in_port: po.in_port,
            rx: &rx,
            pool,
            groups: &self.groups,
            tally: &mut self.tally,
            meters: &self.meters,
            budget: &mut self.budget,
            now_tsc: self.now_tsc,
            controller: self.controller.as_deref(),
            origin,
        }
        .run(&po.actions, pkt);
        self.tally.flush();
        self.budget.settle();
    }

    /// The generation of the flow table in use.
    pub fn table_version(&self) -> u64 {
        self.decision.table_version()
    }

    /// Bytes the decision caches hold.
    pub fn cache_bytes(&self) -> usize {
        self.decision.cache_bytes()
    }

    /// Megaflows cached, and refused for a full cache so far.
    pub fn megaflow_occupancy(&self) -> (usize, u64) {
        self.decision.megaflow_occupancy()
    }

    /// Switches to a new flow table generation (flushing the EMC).
    pub fn set_table(&mut self, table: Arc<FlowTable>) {
        self.groups = table.groups.clone();
        self.meters = table.meters.clone();
        self.decision.set_table(table);
    }

    /// Advances MAC learning's clock (seconds, any epoch) and the TSC the
    /// rules' last-hit times are stamped with (read at housekeeping, not
    /// per batch: `rdtsc` costs ~50 cycles in a VM, timeouts are seconds).
    pub fn set_now(&mut self, secs: u32, tsc: u64) {
        self.now_secs = secs;
        self.now_tsc = tsc;
        self.now_ms = (u128::from(tsc) * 1000 / u128::from(nfv_tsc::hz().max(1))) as u64;
    }

    /// Gives this element a tx queue on port `no` (`qid`: this PMD's tx
    /// counters in `stats`).
    pub fn add_output(
        &mut self,
        no: PortNo,
        txq: Box<dyn TxQueue>,
        stats: Arc<PortStats>,
        qid: usize,
    ) {
        self.fabric.add_tx(no, txq, stats, qid);
    }

    /// Forgets port `no`'s tx queue, freeing what was pending for it.
    pub fn remove_output(&mut self, no: PortNo, pool: &mut PoolCache) {
        self.fabric.del_tx(no, Some(pool));
    }

    /// Decides and queues every packet of `batch` (received on `in_port`,
    /// whose rx counters are `rx`), leaving `batch` empty. Outputs go out
    /// at the next [`Self::flush`].
    #[inline]
    pub fn process(
        &mut self,
        in_port: PortNo,
        rx: &QueueCounters,
        batch: &mut Batch,
        pool: &mut PoolCache,
        c: &mut PmdCounters,
    ) {
        let (verdicts, rx_bytes) = self.decision.classify(in_port, batch, c);
        rx.add(batch.len() as u64, rx_bytes);
        // A batch that one plain `output:N` rule takes whole (a service
        // chain's hop) goes to the fabric in one move.
        if let Some(out) = verdicts.sole_output(batch.len())
            && out != in_port
            && self.fabric.output_batch(out, batch)
        {
            self.decision.settle(self.now_tsc);
            return;
        }
        for (i, pkt) in batch.drain(..).enumerate() {
            match verdicts.get(i) {
                Verdict::Runt => {
                    rx.drop(DropReason::Runt, 1);
                    pool.free(pkt);
                }
                Verdict::NoMatch => {
                    rx.drop(DropReason::NoMatch, 1);
                    pool.free(pkt);
                }
                Verdict::Rule(rule) => match rule.single_output {
                    Some(out) if out != in_port => self.fabric.output(out, pkt, rx, pool),
                    _ => Interpreter {
                        fabric: &mut self.fabric,
                        mac: &self.mac,
                        now_secs: self.now_secs,
                        in_port,
                        rx,
                        pool,
                        groups: &self.groups,
                        tally: &mut self.tally,
                        meters: &self.meters,
                        budget: &mut self.budget,
                        now_tsc: self.now_tsc,
                        controller: self.controller.as_deref(),
                        origin: origin_of(rule),
                    }
                    .run(&rule.spec.actions, pkt),
                },
            }
        }
        self.tally.flush();
        self.budget.settle();
        self.decision.settle(self.now_tsc);
    }

    /// Sends every output's pending batch (one tx burst per port).
    #[inline]
    pub fn flush(&mut self, pool: &mut PoolCache) {
        self.fabric.flush(pool);
    }
}

/// What a packet-in says about the rule that sent it: its table and
/// cookie (a resolved pipeline's last rule's), and `NO_MATCH` for a
/// table-miss rule (priority 0, matching everything in its table).
fn origin_of(rule: &nfv_flow::Rule) -> Origin {
    let r = rule.parts.last().map_or(rule, |p| &**p);
    let mut mask = r.spec.matches.mask;
    mask.set_table(0);
    let miss = r.spec.priority == 0 && mask == nfv_flow::FlowKey::ZERO;
    Origin {
        table: r.spec.matches.key.table(),
        cookie: r.spec.cookie,
        reason: if miss {
            crate::controller::REASON_NO_MATCH
        } else {
            crate::controller::REASON_ACTION
        },
        metadata: 0,
    }
}
