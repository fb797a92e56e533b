//! The action interpreter: runs a rule's action list on one packet.
//! Edits come from `actions.rs`, outputs go to the fabric, `normal` learns
//! and looks up MACs. Rules with one plain output never get here (the
//! element sends those straight to the fabric).
//!
//! Accounting: every packet ends up queued on some output or counted as a
//! drop on the in port's rx counters: `action_drop` when no output took
//! it, the edit's reason (`runt`, `no_headroom`) when an edit failed,
//! `no_buffers` when a copy for an extra output could not be had.

use crate::actions;
use crate::controller::{ControllerPath, OriginOf};
use crate::ct::ConnTable;
use crate::fabric::Fabric;
use crate::group_choice::{Choice, choose};
use crate::mac_learning::MacTable;
use crate::recirculation::Recirculation;
use nfv_flow::meter::{MeterBudget, Meters};
use nfv_flow::table::Groups;
use nfv_flow::{Action, Group, PortNo};
use nfv_mem::{Packet, PoolCache};
use nfv_ports::{DropReason, QueueCounters};
use nfv_wire::EthernetFrame;
use std::sync::Arc;

/// Most ports one flood reaches.
const FLOOD_MAX: usize = 64;

/// How one action of a list went.
enum Step {
    /// Go on with the next action.
    Next,
    /// A copy of the packet was handed to an output; go on.
    Carried,
    /// Stop: drop the packet for this reason.
    Failed(DropReason),
}

impl From<Result<(), DropReason>> for Step {
    fn from(r: Result<(), DropReason>) -> Step {
        match r {
            Ok(()) => Step::Next,
            Err(reason) => Step::Failed(reason),
        }
    }
}

/// Everything an action list may touch while it runs on one packet.
pub(crate) struct Interpreter<'a> {
    pub fabric: &'a mut Fabric,
    pub mac: &'a MacTable,
    /// Seconds since the PMD started (MAC learning's clock).
    pub now_secs: u32,
    pub in_port: PortNo,
    /// The in port's rx counters (drops are counted there).
    pub rx: &'a QueueCounters,
    pub pool: &'a mut PoolCache,
    /// The table generation's groups (`group:N`).
    pub groups: &'a Groups,
    /// Bucket counts of this batch, added to the buckets once at its end.
    pub tally: &'a mut GroupTally,
    /// The table generation's meters (`meter:N`), the PMD's tokens in
    /// hand for them, and its coarse TSC clock.
    pub meters: &'a Meters,
    pub budget: &'a mut MeterBudget,
    pub now_tsc: u64,
    /// Where `controller` sends packets (none: they are not sent), and
    /// the rule's table and cookie they carry.
    pub controller: Option<&'a ControllerPath>,
    pub origin: OriginOf<'a>,
    /// The PMD's connection table and its clock (`ct`), and where
    /// `ct(table=N)` queues the packets it sends back to table N.
    pub conntrack: &'a mut ConnTable,
    pub now_ms: u64,
    pub recirc: &'a mut Recirculation,
    /// The wide ct fields (label, original tuple) some rule matches: a
    /// recirculated key carries only those.
    pub ct_wide: nfv_flow::table::CtWide,
    /// The packet's flow key as the decision looked it up, while nothing
    /// has edited the packet: `ct(table=N)` then starts the recirculated
    /// key from it instead of extracting the headers again (a tenth of a
    /// tracked packet's cycles). Dropped at the first edit.
    pub key: Option<&'a nfv_flow::FlowKey>,
}

/// Per-batch packet and byte counts of the group buckets used: one
/// `fetch_add` per bucket per batch instead of per packet.
#[derive(Default)]
pub(crate) struct GroupTally {
    entries: arrayvec::ArrayVec<(Arc<Group>, usize, u64, u64), 16>,
}

impl GroupTally {
    fn add(&mut self, group: &Arc<Group>, bucket: usize, bytes: u64) {
        if let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.1 == bucket && Arc::ptr_eq(&e.0, group))
        {
            e.2 += 1;
            e.3 += bytes;
            return;
        }
        if self.entries.is_full() {
            self.flush();
        }
        self.entries.push((group.clone(), bucket, 1, bytes));
    }

    /// Adds the batch's counts to the buckets.
    pub fn flush(&mut self) {
        for (g, b, packets, bytes) in self.entries.drain(..) {
            g.buckets[b].count(packets, bytes);
        }
    }
}

impl Interpreter<'_> {
    /// Runs `acts` in order; an output sends the packet as modified so far
    /// (a copy, unless it is the last output of the list).
    pub fn run(&mut self, acts: &[Action], pkt: Packet) {
        let took = self.apply(acts, pkt);
        self.done(took);
    }

    /// Runs `acts` on `pkt`; true if the packet was accounted for (taken
    /// by an output, or counted as dropped for an edit's reason), false if
    /// nothing took it (the caller counts one `action_drop`).
    fn apply(&mut self, acts: &[Action], mut pkt: Packet) -> bool {
        let last_out = acts.iter().rposition(Action::is_output);
        let Some(last_out) = last_out else {
            self.pool.free(pkt);
            return false;
        };
        // Whether some output took charge of (a copy of) the packet; if
        // none did, the packet is an `action_drop`.
        let mut accounted = false;
        for (i, a) in acts.iter().enumerate().take(last_out + 1) {
            let last = i == last_out;
            if a.modifies_packet() {
                self.key = None;
            }
            let step = match a {
                Action::SetDlSrc(m) => actions::set_dl_src(&mut pkt, m).into(),
                Action::SetDlDst(m) => actions::set_dl_dst(&mut pkt, m).into(),
                Action::SetVlanVid(v) => actions::set_vlan_vid(&mut pkt, *v).into(),
                Action::PushVlan(t) => actions::push_vlan(&mut pkt, *t).into(),
                Action::StripVlan => actions::strip_vlan(&mut pkt).into(),
                Action::SetNwSrc(a) => actions::set_nw_addr(&mut pkt, true, *a).into(),
                Action::SetNwDst(a) => actions::set_nw_addr(&mut pkt, false, *a).into(),
                Action::SetTpSrc(p) => actions::set_tp_port(&mut pkt, true, *p).into(),
                Action::SetTpDst(p) => actions::set_tp_port(&mut pkt, false, *p).into(),
                Action::SetNwTos(t) => actions::set_nw_tos(&mut pkt, *t).into(),
                Action::SetNwEcn(e) => actions::set_nw_ecn(&mut pkt, *e).into(),
                Action::SetNwTtl(t) => actions::set_nw_ttl(&mut pkt, *t).into(),
                Action::SetIpv6Src(a) => actions::set_ipv6_addr(&mut pkt, true, *a).into(),
                Action::SetIpv6Dst(a) => actions::set_ipv6_addr(&mut pkt, false, *a).into(),
                Action::SetIpv6Label(l) => actions::set_ipv6_label(&mut pkt, *l).into(),
                Action::DecTtl => actions::dec_ttl(&mut pkt).into(),
                // Checked at install; the tunnel port writes its own VNI.
                // A resolved pipeline's rule holds none of these (see
                // `nfv_flow::pipeline`); nothing to do to the packet.
                Action::Meter(m) => self.meter(*m, &pkt),
                Action::SetTunnel(_)
                | Action::GotoTable(_)
                | Action::Resubmit(_)
                | Action::WriteMetadata { .. } => Step::Next,
                // ct_clear zeroes the key's ct fields (`nfv_flow::pipeline::
                // edit_key`), which no packet has set before the tracker is
                // wired in; nothing in the bytes changes. ct() is refused
                // at install (`nfv_flow::tunnel::resolve`) until the tracker
                // runs here; a rule that got in another way passes the
                // packet on untracked, as the continuing fork of ct() is.
                // Clears the ct fields of the key a later lookup sees
                // (pipeline resolution did that); nothing in the bytes.
                Action::CtClear => Step::Next,
                Action::Ct(ct) => match ct.table {
                    // Tracked (and translated, with nat) in place; the
                    // packet goes on, its ct fields not visible to these
                    // actions (OVS: they are only in the copy table=
                    // looks up).
                    None => {
                        let f = self
                            .conntrack
                            .execute(&mut pkt, ct, self.ct_wide, self.now_ms);
                        if f.translated {
                            self.key = None;
                        }
                        Step::Next
                    }
                    Some(t) if last => {
                        self.recirculate(ct, t, pkt);
                        return true;
                    }
                    Some(t) => self.copy_to(&pkt, |s, c| {
                        s.recirculate(ct, t, c);
                        true
                    }),
                },
                // OpenFlow: never back out of the in_port.
                Action::Output(out) if *out == self.in_port => Step::Next,
                Action::Output(out) if last => {
                    self.fabric.output(*out, pkt, self.rx, self.pool);
                    return true;
                }
                Action::Output(out) => self.copy_to(&pkt, |s, c| {
                    s.fabric.output(*out, c, s.rx, s.pool);
                    true
                }),
                Action::Normal if last => return self.normal(pkt) || accounted,
                Action::Normal => self.copy_to(&pkt, |s, c| s.normal(c)),
                Action::InPort if last => {
                    self.fabric.output(self.in_port, pkt, self.rx, self.pool);
                    return true;
                }
                Action::InPort => self.copy_to(&pkt, |s, c| {
                    s.fabric.output(s.in_port, c, s.rx, s.pool);
                    true
                }),
                Action::Flood | Action::All if last => return self.flood(pkt) || accounted,
                Action::Flood | Action::All => self.copy_to(&pkt, |s, c| s.flood(c)),
                Action::Group(g) if last => return self.group(*g, pkt) || accounted,
                Action::Group(g) => self.copy_to(&pkt, |s, c| s.group(*g, c)),
                // A copy goes up; the packet is accounted for (and freed
                // after the loop when this was the last output).
                Action::Controller(max_len) => self.send_to_controller(&mut pkt, *max_len),
            };
            match step {
                Step::Next => {}
                Step::Carried => accounted = true,
                Step::Failed(reason) => {
                    self.rx.drop(reason, 1);
                    self.pool.free(pkt);
                    return true;
                }
            }
        }
        // The last output was to the in_port (nothing carries the packet)
        // or to the controller (a copy went up): the packet itself is done.
        self.pool.free(pkt);
        accounted
    }

    /// `ct(table=T)`: tracks `pkt` (translating it if `ct` asks) and
    /// queues it with the key it goes back to table `t` with: its headers
    /// as they are now, the pipeline's metadata at the `ct`, its ct
    /// fields. Runs at the end of the batch ([`crate::element`]).
    fn recirculate(&mut self, ct: &nfv_flow::action::CtAction, t: u8, mut pkt: Packet) {
        let f = self
            .conntrack
            .execute(&mut pkt, ct, self.ct_wide, self.now_ms);
        let looked_up = self.key.filter(|_| !f.translated);
        let queued = self
            .recirc
            .queue_tracked(pkt, looked_up, self.in_port, ct, t, &f);
        Recirculation::drop_refused(queued, self.rx, self.pool);
    }

    /// Hands a copy of `pkt` to `send`, which says whether something took
    /// it. Without a buffer for the copy the whole packet is dropped.
    fn copy_to(&mut self, pkt: &Packet, send: impl FnOnce(&mut Self, Packet) -> bool) -> Step {
        let Some(c) = self.pool.copy(pkt) else {
            return Step::Failed(DropReason::NoBuffers);
        };
        if send(self, c) {
            Step::Carried
        } else {
            Step::Next
        }
    }

    /// `meter:N`: on if the meter's rate allows the packet, else a
    /// `meter_drop` (a meter the table lacks lets everything pass: rules
    /// naming one are refused, and deleting one deletes its rules).
    fn meter(&mut self, id: u32, pkt: &Packet) -> Step {
        match self.meters.get(&id) {
            Some(m) if !self.budget.admit(m, pkt.frame_len() as u64, self.now_tsc) => {
                Step::Failed(DropReason::MeterDrop)
            }
            _ => Step::Next,
        }
    }

    /// `controller`: the packet's first `max_len` bytes to the agent's
    /// queue for its in_port (the rate is applied where the queues are
    /// drained); the packet itself stays here.
    /// Whatever the controller path refuses is counted there, not as a
    /// drop of the packet (a copy it is, not the packet).
    fn send_to_controller(&mut self, pkt: &mut Packet, max_len: u16) -> Step {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(c) = self.controller else {
            return Step::Carried;
        };
        if !c.is_listening() {
            c.dropped_off.fetch_add(1, Relaxed);
        } else if pkt.is_split() && !pkt.join_tail() {
            c.dropped_queue.fetch_add(1, Relaxed);
        } else {
            c.queue(pkt.data(), self.in_port, max_len, self.origin.resolve());
        }
        Step::Carried
    }

    #[inline]
    fn done(&self, accounted: bool) {
        if !accounted {
            self.rx.drop(DropReason::Action, 1);
        }
    }

    /// The `normal` action: learn the source, forward to the learned port
    /// of the destination, or flood to every other port. Returns false if
    /// nothing took the packet (destination behind the in port, or no other
    /// port): the caller counts that as an `action_drop`.
    fn normal(&mut self, pkt: Packet) -> bool {
        let Ok(eth) = EthernetFrame::new_checked(pkt.data()) else {
            // Runts never reach actions (the decision drops them first).
            self.pool.free(pkt);
            return false;
        };
        let (dst, src) = (eth.dst_addr(), eth.src_addr());
        self.mac.learn(&src.0, self.in_port, self.now_secs);
        match self.mac.lookup(&dst.0, self.now_secs) {
            Some(out) if out == self.in_port => {
                self.pool.free(pkt);
                false
            }
            Some(out) => {
                self.fabric.output(out, pkt, self.rx, self.pool);
                true
            }
            None => self.flood(pkt),
        }
    }

    /// The `group:N` action: the group's type picks the buckets whose
    /// actions run (`crate::group_choice`, as `ctl trace` shows it). A group missing from the table (a
    /// config rule naming none) takes nothing.
    fn group(&mut self, id: u32, pkt: Packet) -> bool {
        let groups = self.groups;
        let Some(group) = groups.get(&id) else {
            self.pool.free(pkt);
            return false;
        };
        let in_port = self.in_port;
        let (fabric, now) = (&*self.fabric, self.now_tsc);
        let choice = choose(
            group,
            || nfv_flow::extract(in_port, pkt.data()),
            |p| fabric.is_live(p, now),
        );
        match choice {
            Choice::Every => self.all_buckets(group, pkt),
            Choice::One(b) => self.bucket(group, b, pkt),
            Choice::Nothing => {
                self.pool.free(pkt);
                false
            }
        }
    }

    /// An `all` group: every bucket on its own copy (the last on `pkt`).
    fn all_buckets(&mut self, group: &Arc<Group>, pkt: Packet) -> bool {
        let Some(last) = group.buckets.len().checked_sub(1) else {
            self.pool.free(pkt);
            return false;
        };
        let mut took = false;
        for b in 0..last {
            match self.pool.copy(&pkt) {
                Some(c) => took |= self.bucket(group, b, c),
                None => self.rx.drop(DropReason::NoBuffers, 1),
            }
        }
        self.bucket(group, last, pkt) || took
    }

    fn bucket(&mut self, group: &Arc<Group>, b: usize, pkt: Packet) -> bool {
        self.tally.add(group, b, pkt.frame_len() as u64);
        self.apply(&group.buckets[b].run, pkt)
    }

    /// Sends `pkt` (and copies) to every output but the in port.
    fn flood(&mut self, pkt: Packet) -> bool {
        let in_port = self.in_port;
        let targets: arrayvec::ArrayVec<PortNo, FLOOD_MAX> = self
            .fabric
            .outputs()
            .filter(|&p| p != in_port)
            .take(FLOOD_MAX)
            .collect();
        let Some((&last, rest)) = targets.split_last() else {
            self.pool.free(pkt);
            return false;
        };
        for &p in rest {
            match self.pool.copy(&pkt) {
                Some(c) => self.fabric.output(p, c, self.rx, self.pool),
                None => self.rx.drop(DropReason::NoBuffers, 1),
            }
        }
        self.fabric.output(last, pkt, self.rx, self.pool);
        true
    }
}
