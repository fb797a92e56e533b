//! The port: queues that wrap the underlay's AF_PACKET queues, taking off
//! the outer headers on receive and putting them on for transmit, and the
//! ARP the tunnel's next hop needs.
//!
//! Receive, per burst: the underlay's burst lands in the caller's batch;
//! each new frame is classified by its outer headers ([`classify`]), a
//! tunnel frame has them trimmed off in place (no copy: the inner frame
//! keeps its buffer), ARP goes to [`Neighbour::on_arp`] (answers leave on
//! the queue's own underlay socket) and anything else is freed and
//! counted by reason.
//!
//! Transmit, per burst: one lookup of the next hop's MAC; on a miss the
//! frames stay unsent (counted as `tx_arp_miss` here and as transmit
//! drops by the datapath) and one ARP request goes out per `arp_retry_ms`
//! across the port's queues. Each frame gets the 50 bytes of outer headers
//! written into its headroom from a per-queue [`Template`]; a frame
//! without the headroom is copied into a fresh buffer first. Frames that
//! would exceed the underlay's MTU once encapsulated never reach the
//! queue: its `max_frame` is the underlay's minus the outer headers, so
//! the datapath drops them as `too_big`, counted per port.

use crate::header::{
    Class, Expect, OUTER_LEN, Refusal, Template, TunnelHeader, classify, fast_tunnel, flow_hash,
};
use crate::neigh::{Neighbour, State};
use crate::settings::{self, VxlanConfig};
use nfv_afpacket::AfPacketConfig;
use nfv_mem::{Batch, Packet, PoolCache};
use nfv_ports::config::{PortConfig, PortKind};
use nfv_ports::{Clock, OpenContext, Port, PortGauges, PortOpenError, PortType, RxQueue, TxQueue};
use nfv_settings::{PortTable, SettingError};
use nfv_wire::arp::ArpPacket;
use nfv_wire::ethernet::{self, EtherType, EthernetFrame};
use nfv_wire::vxlan::Strictness;
use nfv_wire::{ArpOperation, ArpRepr, EthernetAddress, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// The `vxlan` port type, listed in `nfv-port-types`. Its open errors
/// are [`PortOpenError::Unavailable`] (the underlay may be missing).
pub static VXLAN: VxlanType = VxlanType;

pub struct VxlanType;

impl PortType for VxlanType {
    fn name(&self) -> &'static str {
        "vxlan"
    }
    fn keys(&self) -> &'static [&'static str] {
        settings::KEYS
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        Ok(PortKind::typed(settings::parse(t)?))
    }
    fn open(&self, cfg: &PortConfig, cx: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        open(cfg, cx.max_frame()).map_err(PortOpenError::unavailable)
    }
}

/// Why a VXLAN port did not open.
#[derive(Debug, thiserror::Error)]
pub enum VxlanOpenError {
    #[error("port {port}: {what}")]
    Config { port: String, what: String },
    #[error("port {port}: underlay: {err}")]
    Underlay { port: String, err: String },
}

/// Opens a VXLAN port for a switch whose packet buffers hold frames of
/// up to `max_frame` bytes.
pub fn open(cfg: &PortConfig, max_frame: usize) -> Result<Arc<dyn Port>, VxlanOpenError> {
    let Some(v) = cfg.kind.settings::<VxlanConfig>() else {
        return Err(VxlanOpenError::Config {
            port: cfg.name.clone(),
            what: format!("type {:?} is not vxlan", cfg.kind.type_name()),
        });
    };
    Ok(Arc::new(VxlanPort::open(
        cfg,
        v.clone(),
        max_frame,
        Clock::tsc(),
    )?))
}

/// Per-queue receive counters (one allocation per queue).
#[derive(Default)]
struct RxCounters {
    refused: [AtomicU64; Refusal::ALL.len()],
    arp_learnt: AtomicU64,
    arp_replies_sent: AtomicU64,
    arp_ignored: AtomicU64,
    ctl_send_failed: AtomicU64,
}

/// Per-queue transmit counters.
#[derive(Default)]
struct TxCounters {
    arp_miss: AtomicU64,
    arp_requests_sent: AtomicU64,
    headroom_copies: AtomicU64,
    no_buffers: AtomicU64,
}

/// What the port's queues share.
struct Shared {
    name: String,
    cfg: VxlanConfig,
    local_mac: [u8; 6],
    expect: Expect,
    neigh: Neighbour,
    clock: Clock,
    /// The underlay's MTU when the port opened: the outer IP packet's limit.
    underlay_mtu: usize,
    rx_counters: Mutex<Vec<Arc<RxCounters>>>,
    tx_counters: Mutex<Vec<Arc<TxCounters>>>,
}

impl Shared {
    #[inline]
    fn now_ms(&self) -> u64 {
        let per_ms = (self.clock.hz / 1000).max(1);
        (self.clock.now)() / per_ms
    }

    /// The largest inner frame whose outer IP packet fits the underlay's
    /// MTU (the outer Ethernet header is not part of the MTU).
    fn max_inner_frame(&self) -> usize {
        (self.underlay_mtu + ethernet::HEADER_LEN).saturating_sub(OUTER_LEN)
    }

    fn header(&self, dst_mac: [u8; 6]) -> TunnelHeader {
        TunnelHeader {
            src_mac: self.local_mac,
            dst_mac,
            local_ip: self.cfg.local_ip,
            remote_ip: self.cfg.remote_ip,
            vni: self.cfg.vni,
            dst_port: self.cfg.dst_port,
            ttl: self.cfg.ttl,
            dont_fragment: self.cfg.dont_fragment,
            src_ports: (self.cfg.src_port_min, self.cfg.src_port_max),
        }
    }
}

/// What a tunnel runs over: a port, the MAC its frames come from and
/// the MTU its outer IP packets must fit.
pub struct Underlay {
    pub port: Arc<dyn Port>,
    pub mac: [u8; 6],
    pub mtu: usize,
}

pub struct VxlanPort {
    shared: Arc<Shared>,
    underlay: Arc<dyn Port>,
    /// Underlay transmit queues beyond the PMDs' are the receive queues'
    /// own, for ARP answers: numbered from here.
    ctl_txq_base: usize,
}

impl VxlanPort {
    /// Opens the tunnel with an AF_PACKET underlay on `v.underlay`.
    pub fn open(
        cfg: &PortConfig,
        v: VxlanConfig,
        max_frame: usize,
        clock: Clock,
    ) -> Result<VxlanPort, VxlanOpenError> {
        let port = cfg.name.clone();
        let os_err = |e: nfv_netdev::IfaceError| VxlanOpenError::Underlay {
            port: port.clone(),
            err: e.to_string(),
        };
        let local_mac = match v.local_mac {
            Some(m) => m,
            None => nfv_netdev::mac(&v.underlay).map_err(os_err)?,
        };
        let underlay_mtu = nfv_netdev::mtu(&v.underlay).map_err(os_err)?;
        let under_cfg = PortConfig {
            name: format!("{port} (underlay {})", v.underlay),
            id: cfg.id,
            rxqs: cfg.rxqs,
            kind: PortKind::typed(AfPacketConfig {
                iface: v.underlay.clone(),
                ring_size: v.ring_size,
            }),
        };
        let underlay = nfv_afpacket::open_with(&under_cfg, max_frame).map_err(|e| {
            VxlanOpenError::Underlay {
                port: port.clone(),
                err: e.to_string(),
            }
        })?;
        tracing::info!(
            "port {port}: VXLAN vni {} {} -> {} (next hop {}) over {}, UDP {}",
            v.vni,
            v.local_ip,
            v.remote_ip,
            v.next_hop(),
            v.underlay,
            v.dst_port
        );
        Ok(VxlanPort::over(
            &port,
            v,
            Underlay {
                port: underlay,
                mac: local_mac,
                mtu: underlay_mtu,
            },
            clock,
        ))
    }

    /// The tunnel over any port as its underlay (benchmarks and tests use
    /// an in-process ring).
    pub fn over(name: &str, v: VxlanConfig, underlay: Underlay, clock: Clock) -> VxlanPort {
        let expect = Expect {
            local_ip: v.local_ip,
            remote_ip: v.remote_ip,
            dst_port: v.dst_port,
            vni: v.vni,
            strictness: if v.strict {
                Strictness::Exact
            } else {
                Strictness::Rfc
            },
        };
        let neigh = Neighbour::new(v.next_hop(), v.arp_ageing_ms, v.arp_retry_ms);
        VxlanPort {
            shared: Arc::new(Shared {
                name: name.to_string(),
                cfg: v,
                local_mac: underlay.mac,
                expect,
                neigh,
                clock,
                underlay_mtu: underlay.mtu,
                rx_counters: Mutex::default(),
                tx_counters: Mutex::default(),
            }),
            underlay: underlay.port,
            ctl_txq_base: 1 << 16,
        }
    }

    /// The time the port's clock says, in its neighbour entry's unit.
    pub fn now_ms(&self) -> u64 {
        self.shared.now_ms()
    }

    /// The next hop's entry (tests, `show ports`).
    pub fn neighbour(&self) -> &Neighbour {
        &self.shared.neigh
    }
}

impl Port for VxlanPort {
    fn name(&self) -> &str {
        &self.shared.name
    }
    fn type_name(&self) -> &'static str {
        "vxlan"
    }
    fn n_rxq(&self) -> usize {
        self.underlay.n_rxq()
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        let counters = Arc::new(RxCounters::default());
        lock(&self.shared.rx_counters).push(counters.clone());
        Box::new(VxlanRx {
            under: self.underlay.open_rxq(q),
            ctl: self.underlay.open_txq(self.ctl_txq_base + q),
            ctl_batch: Batch::new(),
            expect: self.shared.expect,
            shared: self.shared.clone(),
            counters,
        })
    }
    fn open_txq(&self, q: usize) -> Box<dyn TxQueue> {
        let counters = Arc::new(TxCounters::default());
        lock(&self.shared.tx_counters).push(counters.clone());
        let under = self.underlay.open_txq(q);
        let max_frame = self
            .shared
            .max_inner_frame()
            .min(under.max_frame().saturating_sub(OUTER_LEN));
        Box::new(VxlanTx {
            under,
            template: Template::new(&self.shared.header([0; 6])),
            max_frame,
            shared: self.shared.clone(),
            counters,
        })
    }
    fn gauges(&self) -> PortGauges {
        let s = &self.shared;
        let rx = lock(&s.rx_counters);
        let rx_sum = |f: &dyn Fn(&RxCounters) -> &AtomicU64| -> u64 {
            rx.iter().map(|c| f(c).load(Relaxed)).sum()
        };
        let tx = lock(&s.tx_counters);
        let tx_sum = |f: &dyn Fn(&TxCounters) -> &AtomicU64| -> u64 {
            tx.iter().map(|c| f(c).load(Relaxed)).sum()
        };
        let next_hop = match s.neigh.state(s.now_ms()) {
            State::Incomplete => format!("{} incomplete (waiting for ARP)", s.neigh.ip),
            State::Reachable { mac, age_ms } => {
                format!(
                    "{} at {} (confirmed {} s ago)",
                    s.neigh.ip,
                    EthernetAddress(mac),
                    age_ms / 1000
                )
            }
        };
        let mut g = PortGauges::default()
            .with("underlay", s.cfg.underlay.as_str())
            .with("vni", u64::from(s.cfg.vni))
            .with(
                "local",
                format!("{} ({})", s.cfg.local_ip, EthernetAddress(s.local_mac)),
            )
            .with("remote", format!("{}:{}", s.cfg.remote_ip, s.cfg.dst_port))
            .with("next_hop", next_hop)
            .with("underlay_mtu", s.underlay_mtu)
            .with("max_frame", s.max_inner_frame());
        for (i, r) in Refusal::ALL.iter().enumerate() {
            g = g.with(r.name(), rx_sum(&|c| &c.refused[i]));
        }
        g.with("arp_learnt", rx_sum(&|c| &c.arp_learnt))
            .with("arp_replies_sent", rx_sum(&|c| &c.arp_replies_sent))
            .with("arp_ignored", rx_sum(&|c| &c.arp_ignored))
            .with("arp_send_failed", rx_sum(&|c| &c.ctl_send_failed))
            .with("tx_arp_miss", tx_sum(&|c| &c.arp_miss))
            .with("arp_requests_sent", tx_sum(&|c| &c.arp_requests_sent))
            .with("tx_headroom_copies", tx_sum(&|c| &c.headroom_copies))
            .with("tx_no_buffers", tx_sum(&|c| &c.no_buffers))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed) + n, Relaxed);
}

struct VxlanRx {
    under: Box<dyn RxQueue>,
    /// This queue's own underlay socket, for ARP answers.
    ctl: Box<dyn TxQueue>,
    ctl_batch: Batch,
    /// The port's, copied next to the queue's other hot fields.
    expect: Expect,
    shared: Arc<Shared>,
    counters: Arc<RxCounters>,
}

impl RxQueue for VxlanRx {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let start = batch.len();
        if self.under.rx_burst(batch, pool) == 0 {
            return 0;
        }
        // Tunnel frames are decapsulated in place and kept in order at the
        // front; anything else moves behind them, in its own order, and is
        // handled after (a rotation, not a swap: a swap reordered the
        // frames it passed over — the vxlan_underlay fuzz target saw two
        // option-carrying tunnel frames come up swapped). Free when every
        // frame takes the fast path (`kept == i`).
        let mut kept = start;
        for i in start..batch.len() {
            let p = &mut batch[i];
            let Some(len) = fast_tunnel(p.data(), &self.expect) else {
                continue;
            };
            // Cannot fail: the frame holds the outer headers and `len`.
            let _ = p.trim_front(OUTER_LEN) && p.set_len(len).is_ok();
            if kept != i {
                batch[kept..=i].rotate_right(1);
            }
            kept += 1;
        }
        if kept < batch.len() {
            self.rest_of_burst(batch, kept, pool);
        }
        batch.len() - start
    }

    fn burst_done(&mut self) {
        self.under.burst_done();
    }
}

impl VxlanRx {
    /// The frames from `from` on that the fast path did not take: tunnel
    /// frames in a less common shape (IP options), ARP, and refusals.
    #[cold]
    fn rest_of_burst(&mut self, batch: &mut Batch, from: usize, pool: &mut PoolCache) {
        let rest: Batch = batch.drain(from..).collect();
        for mut p in rest {
            match classify(p.data(), &self.expect) {
                Class::Tunnel { offset, len } => {
                    let _ = p.trim_front(offset) && p.set_len(len).is_ok();
                    batch.push(p);
                }
                Class::Arp => self.on_arp(p, pool),
                Class::Refused(r) => {
                    bump(&self.counters.refused[r as usize], 1);
                    pool.free(p);
                }
            }
        }
        if !self.ctl_batch.is_empty() {
            self.flush_ctl(pool);
        }
    }

    #[cold]
    fn on_arp(&mut self, mut p: Packet, pool: &mut PoolCache) {
        let s = &self.shared;
        let parsed = EthernetFrame::new_checked(p.data()).ok().and_then(|eth| {
            ArpPacket::new_checked(eth.payload())
                .ok()
                .and_then(|a| ArpRepr::parse(&a).ok())
        });
        let Some(arp) = parsed else {
            bump(&self.counters.arp_ignored, 1);
            pool.free(p);
            return;
        };
        let out = s
            .neigh
            .on_arp(&arp, s.cfg.local_ip, s.local_mac, s.now_ms());
        if out.learnt {
            bump(&self.counters.arp_learnt, 1);
        }
        let Some(reply) = out.reply else {
            if !out.learnt {
                bump(&self.counters.arp_ignored, 1);
            }
            pool.free(p);
            return;
        };
        // The answer reuses the request's buffer.
        write_arp(&mut p, &reply, reply.tha.0, s.local_mac);
        if self.ctl_batch.try_push(p).is_err() {
            unreachable!("at most one answer per received frame, and a burst is at most a batch");
        }
    }

    #[cold]
    fn flush_ctl(&mut self, pool: &mut PoolCache) {
        let n = self.ctl_batch.len() as u64;
        let sent = self.ctl.tx_burst(&mut self.ctl_batch, pool) as u64;
        bump(&self.counters.arp_replies_sent, sent);
        if sent < n {
            bump(&self.counters.ctl_send_failed, n - sent);
            pool.free_batch(&mut self.ctl_batch);
        }
    }
}

/// Makes `p` the Ethernet frame of `arp`, sent from `src` to `dst`.
fn write_arp(p: &mut Packet, arp: &ArpRepr, dst: [u8; 6], src: [u8; 6]) {
    let len = ethernet::HEADER_LEN + arp.buffer_len();
    // Every pool buffer holds a minimum-size frame.
    p.set_len(len).expect("room for an ARP frame");
    let mut eth = EthernetFrame::new_unchecked(p.data_mut());
    eth.set_dst_addr(EthernetAddress(dst));
    eth.set_src_addr(EthernetAddress(src));
    eth.set_ethertype(EtherType::ARP);
    arp.emit(&mut ArpPacket::new_unchecked(eth.payload_mut()));
}

struct VxlanTx {
    under: Box<dyn TxQueue>,
    template: Template,
    max_frame: usize,
    shared: Arc<Shared>,
    counters: Arc<TxCounters>,
}

impl TxQueue for VxlanTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let now = self.shared.now_ms();
        let hop = self.shared.neigh.lookup(now);
        if hop.send_request {
            self.send_request(pool);
        }
        let Some(mac) = hop.mac else {
            bump(&self.counters.arp_miss, batch.len() as u64);
            return 0;
        };
        if self.template.dst_mac() != mac {
            self.template.set_dst_mac(mac);
        }
        for i in 0..batch.len() {
            let p = &mut batch[i];
            let inner_len = p.len();
            let hash = flow_hash(p.data());
            match p.prepend(OUTER_LEN) {
                Some(front) => self.template.write(front, inner_len, hash),
                None => {
                    if !self.encap_copy(batch, i, pool, inner_len, hash) {
                        // Leave this frame and the rest unsent (the caller
                        // frees them); send what was encapsulated.
                        let mut rest: Batch = batch.drain(i..).collect();
                        let sent = self.under.tx_burst(batch, pool);
                        batch.extend(rest.drain(..));
                        return sent;
                    }
                }
            }
        }
        self.under.tx_burst(batch, pool)
    }

    fn max_frame(&self) -> usize {
        self.max_frame
    }
}

impl VxlanTx {
    /// Encapsulates `batch[i]` into a fresh buffer (its own has no room in
    /// front). False when the pool is empty.
    #[cold]
    fn encap_copy(
        &mut self,
        batch: &mut Batch,
        i: usize,
        pool: &mut PoolCache,
        inner_len: usize,
        hash: u32,
    ) -> bool {
        let Some(mut fresh) = pool.alloc() else {
            bump(&self.counters.no_buffers, 1);
            return false;
        };
        if fresh.set_len(OUTER_LEN + inner_len).is_err() {
            bump(&self.counters.no_buffers, 1);
            pool.free(fresh);
            return false;
        }
        let out = fresh.data_mut();
        out[OUTER_LEN..].copy_from_slice(batch[i].data());
        self.template.write(out, inner_len, hash);
        bump(&self.counters.headroom_copies, 1);
        pool.free(std::mem::replace(&mut batch[i], fresh));
        true
    }

    #[cold]
    fn send_request(&mut self, pool: &mut PoolCache) {
        let s = &self.shared;
        let Some(mut p) = pool.alloc() else {
            bump(&self.counters.no_buffers, 1);
            return;
        };
        let request = ArpRepr {
            op: ArpOperation::REQUEST,
            sha: EthernetAddress(s.local_mac),
            spa: s.cfg.local_ip,
            tha: EthernetAddress([0; 6]),
            tpa: s.neigh.ip,
        };
        write_arp(&mut p, &request, [0xff; 6], s.local_mac);
        let mut one = Batch::new();
        one.push(p);
        if self.under.tx_burst(&mut one, pool) == 1 {
            bump(&self.counters.arp_requests_sent, 1);
            tracing::debug!("port {}: ARP request for {}", s.name, s.neigh.ip);
        }
        pool.free_batch(&mut one);
    }
}

/// The address of the next hop (tests).
pub fn next_hop(cfg: &VxlanConfig) -> Ipv4Addr {
    cfg.next_hop()
}
