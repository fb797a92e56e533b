//! The forwarding element a PMD runs on every received batch: decision
//! ([`Decision`]: keys, EMC, classifier), then per packet either the
//! single-output fast path straight into the fabric or the action
//! interpreter, then [`Element::flush`] sends each output's batch with one
//! tx burst. It owns no thread and no channel, so tests feed it batches
//! directly (`tests/fixtures.rs`).
//!
//! Thread safety: one element per PMD thread; it shares only the flow
//! table snapshot (immutable) and the MAC table (lock-free) with others.

use crate::controller::{ControllerPath, Origin, OriginOf, PacketOut};
use crate::ct::ConnTable;
use crate::decision::{Decision, Verdict, Verdicts};
use crate::fabric::Fabric;
use crate::interpreter::{GroupTally, Interpreter};
use crate::mac_learning::MacTable;
use crate::recirculation::Recirculation;
use crate::stats::PmdCounters;
use nfv_flow::ct_dispatch::{CtDispatch, MAX_DISPATCH_RULES};
use nfv_flow::meter::{MeterBudget, Meters};
use nfv_flow::table::{FlowTable, Groups};
use nfv_flow::{FlowKey, PortNo, Rule};
use nfv_mem::{BATCH, Batch, Packet, PoolCache};
use nfv_ports::{DropReason, PortStats, QueueCounters, TxQueue};
use std::sync::Arc;

pub struct Element {
    decision: Decision,
    fwd: Forwarding,
    /// The rx counters of packets a controller sent.
    injected: Arc<QueueCounters>,
}

/// Times a packet may come back through the pipeline from `ct(table=N)`
/// (OVS's userspace datapath allows 6 as well): rules that send packets
/// round in a circle end here, counted `recirc_limit`.
pub const MAX_RECIRC_DEPTH: usize = 6;

/// Everything that acts on a batch's verdicts (all but the decision).
struct Forwarding {
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
    /// one).
    controller: Option<Arc<ControllerPath>>,
    /// This PMD's connection table (`ct`), and the clock it runs on:
    /// milliseconds of the TSC, advanced with [`Element::set_now`].
    conntrack: ConnTable,
    now_ms: u64,
    recirc: Recirculation,
    /// The wide ct fields some rule of the table in use matches.
    ct_wide: nfv_flow::table::CtWide,
    /// The table in use's rules that answer packets back from `ct`
    /// without a lookup, and the batch's counts for them.
    ct_dispatch: Arc<CtDispatch>,
    dispatched: RuleTally,
}

/// Packets and bytes of the rules [`CtDispatch`] answered in a batch,
/// credited once at its end (as the decision credits its rules).
#[derive(Default)]
struct RuleTally {
    entries: arrayvec::ArrayVec<(Arc<Rule>, u64, u64), MAX_DISPATCH_RULES>,
    packets: u64,
}

impl RuleTally {
    #[inline(always)]
    fn add(&mut self, rule: &Arc<Rule>, bytes: usize, now: u64) {
        self.packets += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| Arc::ptr_eq(&e.0, rule)) {
            e.1 += 1;
            e.2 += bytes as u64;
        } else if self.entries.is_full() {
            rule.credit(1, bytes as u64, now);
        } else {
            self.entries.push((Arc::clone(rule), 1, bytes as u64));
        }
    }

    /// Credits the rules; the packets answered since the last flush.
    fn flush(&mut self, now: u64) -> u64 {
        for (rule, packets, bytes) in self.entries.drain(..) {
            rule.credit(packets, bytes, now);
        }
        std::mem::take(&mut self.packets)
    }
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
        Element::with_conn_table(
            emc_entries,
            megaflow_entries,
            table,
            mac,
            ConnTable::with_defaults(),
        )
    }

    /// [`Element::new`] with this connection table: a PMD builds its
    /// configured one here, so no default table is built (and its memory
    /// faulted in, ~18 MB) only to be replaced.
    pub fn with_conn_table(
        emc_entries: usize,
        megaflow_entries: usize,
        table: Arc<FlowTable>,
        mac: Arc<MacTable>,
        conntrack: ConnTable,
    ) -> Element {
        Element {
            fwd: Forwarding {
                groups: table.groups.clone(),
                meters: table.meters.clone(),
                budget: MeterBudget::default(),
                tally: GroupTally::default(),
                fabric: Fabric::default(),
                mac,
                now_secs: 0,
                now_tsc: nfv_tsc::now(),
                controller: None,
                conntrack,
                now_ms: 0,
                recirc: Recirculation {
                    batch: Batch::new(),
                    keys: Box::new([FlowKey::ZERO; BATCH]),
                },
                ct_wide: table.ct_wide,
                ct_dispatch: table.ct_dispatch.clone(),
                dispatched: RuleTally::default(),
            },
            decision: Decision::new(emc_entries, megaflow_entries, table),
            injected: Arc::default(),
        }
    }

    /// The connection table (dumps, flushes, expiry and counters go
    /// through the PMD that owns it).
    pub fn conntrack(&mut self) -> &mut ConnTable {
        &mut self.fwd.conntrack
    }

    /// Milliseconds of the clock `ct` runs on (see [`Element::set_now`]).
    pub fn now_ms(&self) -> u64 {
        self.fwd.now_ms
    }

    /// Where `controller` actions send packets.
    pub fn set_controller(&mut self, path: Arc<ControllerPath>) {
        self.fwd.controller = Some(path);
    }

    /// Runs a controller's packet (`PACKET_OUT`): its actions, or a
    /// lookup as if received on its in_port (`output:TABLE`). Counted on
    /// the element's own rx counters for such packets, not a port's.
    pub fn inject(
        &mut self,
        po: &PacketOut,
        pkt: Packet,
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
        self.fwd
            .interpreter(
                po.in_port,
                &rx,
                pool,
                OriginOf::Known(Origin::default()),
                None,
            )
            .run(&po.actions, pkt);
        self.fwd.tally.flush();
        self.fwd.budget.settle();
        self.recirculate(po.in_port, &rx, pool, c);
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
        self.fwd.groups = table.groups.clone();
        self.fwd.meters = table.meters.clone();
        self.fwd.ct_wide = table.ct_wide;
        self.fwd.ct_dispatch = table.ct_dispatch.clone();
        self.decision.set_table(table);
    }

    /// Advances MAC learning's clock (seconds, any epoch), the TSC the
    /// rules' last-hit times are stamped with and the connection table's
    /// millisecond clock (read at housekeeping, not per batch: `rdtsc`
    /// costs ~50 cycles in a VM, timeouts are seconds).
    pub fn set_now(&mut self, secs: u32, tsc: u64) {
        self.fwd.now_secs = secs;
        self.fwd.now_tsc = tsc;
        self.fwd.now_ms = (u128::from(tsc) * 1000 / u128::from(nfv_tsc::hz().max(1))) as u64;
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
        self.fwd.fabric.add_tx(no, txq, stats, qid);
    }

    /// Forgets port `no`'s tx queue, freeing what was pending for it.
    pub fn remove_output(&mut self, no: PortNo, pool: &mut PoolCache) {
        self.fwd.fabric.del_tx(no, Some(pool));
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
        let (_, rx_bytes) = self.decision.classify(in_port, batch, c);
        rx.add(batch.len() as u64, rx_bytes);
        let (verdicts, keys) = self.decision.last();
        self.fwd.act(in_port, rx, verdicts, keys, batch, pool);
        self.decision.settle(self.fwd.now_tsc);
        self.fwd.count_dispatched(c);
        if !self.fwd.recirc.batch.is_empty() {
            self.recirculate(in_port, rx, pool, c);
        }
    }

    /// Runs the packets `ct(table=N)` queued back through the decision,
    /// round after round (a round's packets may queue more), at most
    /// [`MAX_RECIRC_DEPTH`] rounds; what is still queued then is dropped.
    #[cold]
    fn recirculate(
        &mut self,
        in_port: PortNo,
        rx: &QueueCounters,
        pool: &mut PoolCache,
        c: &mut PmdCounters,
    ) {
        for _ in 0..MAX_RECIRC_DEPTH {
            let mut batch = std::mem::take(&mut self.fwd.recirc.batch);
            if batch.is_empty() {
                return;
            }
            let n = batch.len();
            c.ct_recirculations += n as u64;
            self.decision
                .classify_keyed(&batch, &mut self.fwd.recirc.keys, c);
            let (verdicts, keys) = self.decision.last();
            self.fwd.act(in_port, rx, verdicts, keys, &mut batch, pool);
            self.decision.settle(self.fwd.now_tsc);
            self.fwd.count_dispatched(c);
        }
        let left = &mut self.fwd.recirc.batch;
        if !left.is_empty() {
            c.ct_recirc_too_deep += left.len() as u64;
            rx.drop(DropReason::RecircLimit, left.len() as u64);
            for p in left.drain(..) {
                pool.free(p);
            }
        }
    }

    /// Sends every output's pending batch (one tx burst per port).
    #[inline]
    pub fn flush(&mut self, pool: &mut PoolCache) {
        self.fwd.fabric.flush(pool);
    }

    /// Once a poll iteration, after its last [`Element::flush`]: what the
    /// output queues left for later ([`Fabric::settle`]).
    #[inline]
    pub fn settle_outputs(&mut self) {
        self.fwd.fabric.settle();
    }

    /// Every output queue's leftovers finished (the PMD is stopping).
    pub fn settle_all_outputs(&mut self) {
        self.fwd.fabric.settle_all();
    }
}

impl Forwarding {
    /// An interpreter for one packet of `in_port`.
    fn interpreter<'a>(
        &'a mut self,
        in_port: PortNo,
        rx: &'a QueueCounters,
        pool: &'a mut PoolCache,
        origin: OriginOf<'a>,
        key: Option<&'a FlowKey>,
    ) -> Interpreter<'a> {
        Interpreter {
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
            origin,
            conntrack: &mut self.conntrack,
            now_ms: self.now_ms,
            recirc: &mut self.recirc,
            ct_wide: self.ct_wide,
            key,
        }
    }

    /// Acts on every verdict of `batch` (whose flow keys are `keys`, as
    /// looked up; a port-wide batch has none), leaving it empty: the
    /// single output fast path straight into the fabric, else the
    /// interpreter.
    #[inline(always)]
    fn act(
        &mut self,
        in_port: PortNo,
        rx: &QueueCounters,
        verdicts: &Verdicts,
        keys: Option<&[FlowKey]>,
        batch: &mut Batch,
        pool: &mut PoolCache,
    ) {
        // A batch that one plain `output:N` rule takes whole (a service
        // chain's hop) goes to the fabric in one move.
        if let Some(out) = verdicts.sole_output(batch.len(), in_port)
            && self.fabric.output_batch(out, batch, verdicts.shape())
        {
            return;
        }
        // Only while some rule runs ct: a stateless table pays nothing.
        let staged = self.ct_wide.used
            && match keys {
                Some(keys) => self.stage_conns(verdicts, keys, batch),
                None => false,
            };
        // Held for the batch, so its rules can be run on `self`.
        let dispatch = staged.then(|| Arc::clone(&self.ct_dispatch));
        for (i, mut pkt) in batch.drain(..).enumerate() {
            match verdicts.get(i) {
                Verdict::Runt => {
                    rx.drop(DropReason::Runt, 1);
                    pool.free(pkt);
                }
                Verdict::NoMatch => {
                    rx.drop(DropReason::NoMatch, 1);
                    pool.free(pkt);
                }
                // The tracked packet's turn without an interpreter: what
                // `ct(table=T)` alone does (see `Interpreter`).
                Verdict::Rule(rule)
                    if staged && let Some((ct, t)) = ct_alone(&rule.spec.actions) =>
                {
                    let f =
                        self.conntrack
                            .execute_staged(i, &mut pkt, ct, self.ct_wide, self.now_ms);
                    let key = keys.map(|k| &k[i]);
                    // Table t's rule from the ct verdict alone, when one of
                    // its first rules takes the packet. A translation
                    // changes no field they read (in_port and EtherType
                    // stay), so a NAT'd packet is decided alike.
                    if let Some(k) = key
                        && let Some(next) = dispatch
                            .as_deref()
                            .and_then(|d| d.prefix(t)?.find(k.w[0], ct.recirc_metadata, f.word()))
                    {
                        self.dispatched.add(next, pkt.frame_len(), self.now_tsc);
                        self.run_rule(next, in_port, rx, pool, None, pkt);
                        continue;
                    }
                    let looked_up = key.filter(|_| !f.translated);
                    let queued = self
                        .recirc
                        .queue_tracked(pkt, looked_up, in_port, ct, t, &f);
                    Recirculation::drop_refused(queued, rx, pool);
                }
                Verdict::Rule(rule) => {
                    self.run_rule(rule, in_port, rx, pool, keys.map(|k| &k[i]), pkt);
                }
            }
        }
        self.tally.flush();
        self.budget.settle();
    }

    /// Runs `rule` on `pkt` (looked up with `key`, if it was): its direct
    /// output ([`Rule::direct_output`]) straight into the fabric, else the
    /// interpreter.
    #[inline(always)]
    fn run_rule(
        &mut self,
        rule: &Rule,
        in_port: PortNo,
        rx: &QueueCounters,
        pool: &mut PoolCache,
        key: Option<&FlowKey>,
        pkt: Packet,
    ) {
        // A hairpin too (`in_port` alone): through the interpreter its
        // set-up and walk cost ~5 % of a PMD that hairpins every packet.
        match rule.direct_output(in_port) {
            Some(out) => self.fabric.output(out, pkt, rx, pool),
            None => self
                .interpreter(in_port, rx, pool, OriginOf::Rule(rule), key)
                .run(&rule.spec.actions, pkt),
        }
    }

    /// Credits the rules [`CtDispatch`] answered since the last call and
    /// counts their packets: recirculations (table t decided them), of
    /// which dispatched.
    #[inline(always)]
    fn count_dispatched(&mut self, c: &mut PmdCounters) {
        let n = self.dispatched.flush(self.now_tsc);
        c.ct_recirculations += n;
        c.ct_dispatched += n;
    }
}

/// The `ct` of a rule whose only action is `ct(…, table=T)`, and T.
#[inline(always)]
fn ct_alone(actions: &[nfv_flow::Action]) -> Option<(&nfv_flow::action::CtAction, u8)> {
    match actions {
        [nfv_flow::Action::Ct(ct)] => ct.table.map(|t| (&**ct, t)),
        _ => None,
    }
}

impl Forwarding {
    /// Before the first packet of the batch is tracked: the packets whose
    /// rule is `ct(…, table=T)` alone are staged ([`ConnTable::stage`]:
    /// headers read, connection key hashed, index bucket asked for); the
    /// other packets whose rule starts with `ct` only have their bucket
    /// asked for (nothing before the `ct` edits the packet, so its flow
    /// key gives the tracker's key). Either way the batch's misses overlap
    /// instead of each packet paying its own in turn. True if some packet
    /// was staged.
    #[inline(always)]
    fn stage_conns(&mut self, verdicts: &Verdicts, keys: &[FlowKey], batch: &Batch) -> bool {
        let mut staged = false;
        for (i, (key, pkt)) in keys.iter().zip(batch.iter()).enumerate() {
            let Verdict::Rule(rule) = verdicts.get(i) else {
                continue;
            };
            if let Some((ct, _)) = ct_alone(&rule.spec.actions) {
                self.conntrack.stage(i, pkt, ct.zone);
                staged = true;
            } else if let Some(nfv_flow::Action::Ct(ct)) = rule.spec.actions.first() {
                self.conntrack.prefetch(key, ct.zone);
            }
        }
        if staged {
            self.conntrack.staged_all();
        }
        staged
    }
}
