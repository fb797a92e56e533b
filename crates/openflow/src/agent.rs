//! The state every connection of one switch shares: the node, its flow
//! table, the controllers' roles (OpenFlow 1.3 §6.3.6) and the queues
//! asynchronous messages (flow removed) go out on, and the counters
//! `show controllers` reports.
//!
//! Asynchronous messages never wait for a controller: each session has
//! a bounded queue, and a message that finds it full is dropped and
//! counted (`async_dropped`). So a controller that stops reading slows
//! nobody: not the thread expiring rules, not the other controllers.

use crate::switch::Switch;
use nfv_flow::table::SharedFlowTable;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

/// A controller's role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Equal,
    Master,
    Slave,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Equal => "equal",
            Role::Master => "master",
            Role::Slave => "slave",
        }
    }

    pub(crate) fn wire(self) -> u32 {
        match self {
            Role::Equal => 1,
            Role::Master => 2,
            Role::Slave => 3,
        }
    }
}

/// One connected controller as reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionReport {
    pub id: u64,
    pub peer: String,
    pub role: Role,
    pub negotiated: bool,
    /// Messages received, by OpenFlow type name.
    pub received: BTreeMap<&'static str, u64>,
    pub errors_sent: u64,
    pub async_sent: u64,
    pub async_dropped: u64,
}

pub(crate) struct SessionSlot {
    pub report: SessionReport,
    /// Where asynchronous messages for this controller go.
    pub tx: SyncSender<Vec<u8>>,
    /// `SET_ASYNC`'s masks: per [`Async`] kind, for a master or equal
    /// and for a slave, a bit per reason.
    pub async_masks: [u32; 6],
}

/// The kinds of asynchronous message, in `SET_ASYNC`'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Async {
    PacketIn = 0,
    PortStatus = 1,
    FlowRemoved = 2,
}

/// OpenFlow 1.3's defaults (§A.3.10): a master or equal gets packet-ins
/// (no match, action), every port status and every flow removed; a
/// slave only port status.
pub(crate) const DEFAULT_ASYNC: [u32; 6] = [0b11, 0, 0b111, 0b111, 0b1111, 0];

pub struct Agent {
    pub(crate) switch: Arc<dyn Switch>,
    pub(crate) table: Arc<SharedFlowTable>,
    pub(crate) sessions: Mutex<BTreeMap<u64, SessionSlot>>,
    next_id: AtomicU64,
    /// The largest generation id a master or slave request carried.
    pub(crate) generation: Mutex<Option<u64>>,
    /// Rules (by table, priority and match) added with
    /// `OFPFF_SEND_FLOW_REM`: their removal is announced.
    pub(crate) flow_removed_wanted: Mutex<std::collections::HashSet<RuleKey>>,
    /// Messages dropped because a session's queue was full.
    pub async_dropped: AtomicU64,
}

use crate::messages::RuleKey;

/// The cookie of the rule standalone fail mode adds (and removes).
pub const FAIL_OPEN_COOKIE: u64 = 0xfa11_0be7;

impl Agent {
    pub fn new(switch: Arc<dyn Switch>, table: Arc<SharedFlowTable>) -> Arc<Agent> {
        Arc::new(Agent {
            switch,
            table,
            sessions: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
            generation: Mutex::new(None),
            flow_removed_wanted: Mutex::new(Default::default()),
            async_dropped: AtomicU64::new(0),
        })
    }

    /// Registers a connection; its asynchronous messages go to `tx`.
    pub(crate) fn open(&self, peer: String, tx: SyncSender<Vec<u8>>) -> u64 {
        let id = self.next_id.fetch_add(1, Relaxed);
        let report = SessionReport {
            id,
            peer,
            role: Role::Equal,
            negotiated: false,
            received: BTreeMap::new(),
            errors_sent: 0,
            async_sent: 0,
            async_dropped: 0,
        };
        lock(&self.sessions).insert(
            id,
            SessionSlot {
                report,
                tx,
                async_masks: DEFAULT_ASYNC,
            },
        );
        id
    }

    pub(crate) fn close(&self, id: u64) {
        lock(&self.sessions).remove(&id);
        self.refresh_listening();
    }

    /// Packet-ins go up while some controller (master or equal) is
    /// connected, and are not even copied while none is.
    pub(crate) fn refresh_listening(&self) {
        let any = lock(&self.sessions)
            .values()
            .any(|s| s.report.negotiated && s.report.role != Role::Slave);
        self.switch.set_packet_in_listening(any);
    }

    /// Sends every queued packet-in to the controllers; returns how many.
    pub fn pump_packet_ins(&self) -> usize {
        self.switch.poll_packet_ins(&mut |p| {
            self.broadcast(Async::PacketIn, p.reason, &crate::messages::packet_in(p))
        })
    }

    pub(crate) fn update(&self, id: u64, f: impl FnOnce(&mut SessionReport)) {
        if let Some(s) = lock(&self.sessions).get_mut(&id) {
            f(&mut s.report);
        }
    }

    /// The connected controllers.
    pub fn sessions(&self) -> Vec<SessionReport> {
        lock(&self.sessions)
            .values()
            .map(|s| s.report.clone())
            .collect()
    }

    /// Sends `msg`, an asynchronous message of `kind` for `reason`, to
    /// every negotiated controller whose async config (by its role) asks
    /// for it, never waiting: a full queue drops it.
    pub(crate) fn broadcast(&self, kind: Async, reason: u8, msg: &[u8]) {
        let mut sessions = lock(&self.sessions);
        for s in sessions.values_mut() {
            let slave = usize::from(s.report.role == Role::Slave);
            let mask = s.async_masks[kind as usize * 2 + slave];
            if !s.report.negotiated || mask & (1 << reason) == 0 {
                continue;
            }
            match s.tx.try_send(msg.to_vec()) {
                Ok(()) => s.report.async_sent += 1,
                Err(TrySendError::Full(_)) => {
                    s.report.async_dropped += 1;
                    self.async_dropped.fetch_add(1, Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
    }

    /// Tells the controllers that asked (`OFPFF_SEND_FLOW_REM`) that
    /// these rules are gone, and why: for rules removed by the node
    /// itself (timeouts, `ctl del-flows`) as much as by OpenFlow.
    pub fn rules_removed(&self, rules: &[(Arc<nfv_flow::Rule>, crate::messages::RemovedReason)]) {
        if rules.is_empty() {
            return;
        }
        let mut wanted = lock(&self.flow_removed_wanted);
        for (rule, why) in rules {
            let key = crate::messages::rule_key(rule);
            if wanted.remove(&key) {
                self.broadcast(
                    Async::FlowRemoved,
                    *why as u8,
                    &crate::messages::flow_removed(rule, *why),
                );
            }
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Agent {
    /// `FEATURES_REPLY`'s datapath id.
    pub fn datapath_id(&self) -> u64 {
        self.switch.datapath_id()
    }

    /// Announces ports whose liveness changed since `last` (a VNF
    /// connected or went away: `PORT_STATUS` MODIFY), and records the
    /// states now. Ports added or removed are announced by
    /// [`Self::port_changed`], when they are.
    pub fn watch_ports(&self, last: &mut std::collections::BTreeMap<u16, bool>) {
        let ports = self.switch.ports();
        for p in &ports {
            if let Some(was) = last.get(&p.no)
                && *was != p.live
            {
                self.broadcast(Async::PortStatus, 2, &crate::messages::port_status(2, p));
            }
        }
        *last = ports.iter().map(|p| (p.no, p.live)).collect();
    }

    /// Announces a port added or removed (`PORT_STATUS`).
    pub fn port_changed(&self, port: &crate::switch::PortInfo, added: bool) {
        let reason = if added { 0 } else { 1 };
        self.broadcast(
            Async::PortStatus,
            reason,
            &crate::messages::port_status(reason, port),
        );
    }
}

impl Agent {
    /// Standalone fail mode: `on` adds a table-miss rule doing `normal`
    /// (cookie [`FAIL_OPEN_COOKIE`]), `off` removes it.
    pub(crate) fn fail_open(&self, on: bool) {
        let cookie = FAIL_OPEN_COOKIE;
        let is_ours = |r: &nfv_flow::Rule| {
            r.spec.cookie == cookie && r.spec.priority == 0 && r.spec.matches.key.table() == 0
        };
        if on {
            let mut m = nfv_flow::Match::ANY;
            m.mask.set_table(0xff);
            self.table.add_flows([nfv_flow::FlowSpec {
                priority: 0,
                cookie,
                timeouts: nfv_flow::Timeouts::NONE,
                matches: m,
                tun_id: None,
                actions: vec![nfv_flow::Action::Normal],
            }]);
            tracing::info!(
                "OpenFlow: no controller connected; standalone: forwarding as a learning switch"
            );
        } else {
            self.table.del_flows_where(is_ours);
            tracing::info!("OpenFlow: a controller connected; standalone mode's rule removed");
        }
    }
}
