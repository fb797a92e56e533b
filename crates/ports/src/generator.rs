//! `generator`: synthetic Ethernet/IPv4/UDP or Ethernet/IPv6/UDP frames
//! as a port's rx.
//!
//! Each frame is a copy of a template with the flow's fields stamped in:
//! flow `f` has UDP source port `src_port + f % 1024` and source address
//! `src_ip + f / 1024` (IPv6: `src_ip6 + f / 1024`, counting in the low
//! bits), so `flows` distinct 5-tuples cycle round-robin. IPv4 frames
//! carry no UDP checksum (0, which IPv4 allows), so a flow patches the IP
//! header's; IPv6 has no header checksum but a mandatory UDP one over a
//! pseudo-header holding the addresses, so a flow patches that.
//! Rate limiting uses the TSC (no syscalls). Bursts are capped at the
//! batch size, so a slow switch back-pressures the generator instead of
//! making it drop (it catches up later, a burst at a time).
//!
//! Options: IMIX frame sizes (a fixed interleaved 12-frame pattern, see
//! `nfv_traffic::mix`), a rate in pps or percent of a line rate, and a
//! test stamp per frame (`nfv_traffic::stamp`: stream = port id << 8 |
//! rx queue, a sequence per queue, the burst's TSC) for a `receiver`
//! port. Rate and packet budget can be changed while running through
//! [`GeneratorControl`]. Per frame the fast path copies the template and
//! writes a few fields; it never allocates.

use crate::config::{FlowOrder, GeneratorConfig, IpFamily};
pub use crate::shared::GeneratorControl;
use crate::{Clock, Gauge, Port, PortGauges, QueueCounters, RxQueue, TxQueue};
use nfv_mem::{Batch, PoolCache};
use nfv_traffic::mix::Pacer;
use nfv_traffic::stamp::{STAMP_LEN, STAMP_OFFSET, Stamp, stream_id};
use nfv_wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpProtocol, Ipv4Packet, Ipv4Repr,
    Ipv6Packet, Ipv6Repr, UdpPacket, UdpRepr, checksum, ethernet, ipv4, ipv6, udp,
};
use std::sync::Arc;
use std::sync::atomic::{
    AtomicU64,
    Ordering::{Acquire, Relaxed},
};

/// Flow `f` uses UDP source port `src_port + f % FLOW_PORTS`.
const FLOW_PORTS: u32 = 1024;
/// Ethernet, IPv4 (no options) and UDP headers of a generated frame.
const HEADERS_LEN: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;
/// Ethernet, IPv6 (no extension headers) and UDP headers.
const HEADERS6_LEN: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN + udp::HEADER_LEN;
/// Where an IPv6 frame's UDP header starts.
const UDP6_OFFSET: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN;

/// Builds the template frame of `cfg.frame_size` bytes (flow 0).
pub fn template(cfg: &GeneratorConfig) -> Vec<u8> {
    template_of_size(cfg, cfg.frame_size)
}

/// Builds the template frame of `size` bytes (flow 0; at least the
/// headers). Its payload counts up from 0 (a stamp, if any, is written over
/// the start per frame). IPv4: the UDP checksum is 0 ("none", which IPv4
/// allows), so flows only need the IP checksum fixed. IPv6: the UDP
/// checksum is computed (IPv6 requires it), and flows patch it.
pub fn template_of_size(cfg: &GeneratorConfig, size: usize) -> Vec<u8> {
    match cfg.family {
        IpFamily::Ipv4 => template4(cfg, size),
        IpFamily::Ipv6 => template6(cfg, size),
    }
}

fn template4(cfg: &GeneratorConfig, size: usize) -> Vec<u8> {
    let payload_len = size.saturating_sub(HEADERS_LEN);
    let mut frame = vec![0u8; HEADERS_LEN + payload_len];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src: EthernetAddress(cfg.src_mac),
        dst: EthernetAddress(cfg.dst_mac),
        ethertype: EtherType::IPV4,
    }
    .emit(&mut eth);
    let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
    Ipv4Repr {
        src: cfg.src_ip,
        dst: cfg.dst_ip,
        protocol: IpProtocol::UDP,
        payload_len: udp::HEADER_LEN + payload_len,
        ttl: 64,
    }
    .emit(&mut ip);
    let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
    UdpRepr {
        src_port: cfg.src_port,
        dst_port: cfg.dst_port,
        payload_len,
    }
    .emit_header(&mut udp);
    for (i, b) in udp.payload_mut().iter_mut().enumerate() {
        *b = i as u8;
    }
    frame
}

fn template6(cfg: &GeneratorConfig, size: usize) -> Vec<u8> {
    let payload_len = size.saturating_sub(HEADERS6_LEN);
    let udp_len = udp::HEADER_LEN + payload_len;
    let mut frame = vec![0u8; HEADERS6_LEN + payload_len];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    EthernetRepr {
        src: EthernetAddress(cfg.src_mac),
        dst: EthernetAddress(cfg.dst_mac),
        ethertype: EtherType::IPV6,
    }
    .emit(&mut eth);
    let mut ip = Ipv6Packet::new_unchecked(eth.payload_mut());
    Ipv6Repr {
        src_addr: cfg.src_ip6,
        dst_addr: cfg.dst_ip6,
        next_header: IpProtocol::UDP,
        payload_len: udp_len as u16,
        hop_limit: 64,
        traffic_class: 0,
        flow_label: 0,
    }
    .emit(&mut ip);
    let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
    UdpRepr {
        src_port: cfg.src_port,
        dst_port: cfg.dst_port,
        payload_len,
    }
    .emit_header(&mut udp);
    for (i, b) in udp.payload_mut().iter_mut().enumerate() {
        *b = i as u8;
    }
    let sum = checksum::combine(&[
        checksum::pseudo_header_v6(
            u128::from(cfg.src_ip6),
            u128::from(cfg.dst_ip6),
            IpProtocol::UDP,
            udp_len as u32,
        ),
        checksum::data(&frame[UDP6_OFFSET..]),
    ]);
    UdpPacket::new_unchecked(&mut frame[UDP6_OFFSET..]).set_checksum(udp6_checksum(!sum));
    frame
}

/// A computed UDP checksum as IPv6 sends it: 0 means "none", which IPv6
/// forbids, so it goes out as 0xffff, the same value in one's complement
/// (RFC 8200 section 8.1).
#[inline(always)]
fn udp6_checksum(c: u16) -> u16 {
    if c == 0 { 0xffff } else { c }
}

/// Flows from one frame to the next: 1 in round-robin order; scattered,
/// the integer nearest `flows` / golden ratio that is coprime with `flows`
/// (so the walk visits every flow once per cycle, and consecutive frames
/// are far apart in flow number, hence in source address).
pub fn flow_stride(flows: u32, order: FlowOrder) -> u32 {
    if order == FlowOrder::RoundRobin || flows < 3 {
        return 1;
    }
    let gcd = |mut a: u32, mut b: u32| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut stride = ((f64::from(flows) * 0.618_034).round() as u32).clamp(1, flows - 1);
    while gcd(stride, flows) != 1 {
        stride += 1;
    }
    stride
}

/// Writes flow `f`'s fields (IPv4 source and its header checksum, UDP
/// source port) into `frame`, a copy of `template` (made by
/// [`template`]). The checksum is patched for the address change (RFC
/// 1624), not recomputed, and the old address and checksum are read from
/// `template`, not from `frame`: the frame was just written by a block
/// copy, which a narrow load cannot take its data from until the copy's
/// stores drain (a stall that cost more than the checksum itself). This
/// runs per frame on the PMD that also runs the switch, so `nfv-bench
/// scale` charges every cycle of it to the many-flow figures.
#[inline]
pub fn stamp_flow(frame: &mut [u8], template: &[u8], cfg: &GeneratorConfig, f: u32) {
    let sport = cfg.src_port.wrapping_add((f % FLOW_PORTS) as u16);
    let sip = u32::from(cfg.src_ip).wrapping_add(f / FLOW_PORTS);
    let was = Ipv4Packet::new_unchecked(&template[ethernet::HEADER_LEN..]);
    let csum = nfv_wire::checksum::update32(was.checksum(), u32::from(was.src_addr()), sip);
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]);
    ip.set_src_addr(sip.into());
    ip.set_checksum(csum);
    // At the template's fixed offset (no IP options): finding it through
    // the header's IHL would read the frame back (the same stall).
    UdpPacket::new_unchecked(&mut frame[ethernet::HEADER_LEN + ipv4::HEADER_LEN..])
        .set_src_port(sport);
}

/// [`stamp_flow`] for an IPv6 template: the source address's low bits
/// and the UDP source port, and the UDP checksum patched for both (RFC
/// 1624; the address is in the pseudo-header). As there, the old values
/// are read from `template`. Only the address's low half is rewritten and
/// summed (half the checksum work of the whole address: this runs per
/// frame on the switch's PMD), unless the count carries into the high
/// half.
#[inline]
pub fn stamp_flow6(frame: &mut [u8], template: &[u8], cfg: &GeneratorConfig, f: u32) {
    const SRC_LOW: usize = ethernet::HEADER_LEN + ipv6::field::SRC_ADDR.start + 8;
    let sport = cfg.src_port.wrapping_add((f % FLOW_PORTS) as u16);
    let was_src = Ipv6Packet::new_unchecked(&template[ethernet::HEADER_LEN..]).src_u128();
    let was_udp = UdpPacket::new_unchecked(&template[UDP6_OFFSET..]);
    let (lo, carried) = (was_src as u64).overflowing_add(u64::from(f / FLOW_PORTS));
    let csum = if carried {
        stamp_src6_carried(frame, was_src, was_udp.checksum(), f)
    } else {
        frame[SRC_LOW..SRC_LOW + 8].copy_from_slice(&lo.to_be_bytes());
        checksum::update64(was_udp.checksum(), was_src as u64, lo)
    };
    let csum = checksum::update16(csum, was_udp.src_port(), sport);
    let mut udp = UdpPacket::new_unchecked(&mut frame[UDP6_OFFSET..]);
    udp.set_src_port(sport);
    udp.set_checksum(udp6_checksum(csum));
}

/// [`stamp_flow6`]'s source address when adding the flow's count to the
/// low half carries into the high half: the whole address, and the
/// checksum patched for it.
#[cold]
fn stamp_src6_carried(frame: &mut [u8], was_src: u128, csum: u16, f: u32) -> u16 {
    let sip = was_src.wrapping_add(u128::from(f / FLOW_PORTS));
    Ipv6Packet::new_unchecked(&mut frame[ethernet::HEADER_LEN..]).set_src_addr(sip.into());
    checksum::update128(csum, was_src, sip)
}

/// Queue `q`'s part of `total` spread over `n` queues.
fn share(total: u64, q: usize, n: usize) -> u64 {
    let n = n.max(1) as u64;
    total / n + u64::from((q as u64) < total % n)
}

pub struct GeneratorPort {
    name: String,
    cfg: GeneratorConfig,
    rxqs: usize,
    templates: Arc<[Box<[u8]>]>,
    /// Template index of each frame of one round of the size mix.
    pattern: Arc<[u8]>,
    control: Arc<GeneratorControl>,
    clock: Clock,
}

impl GeneratorPort {
    /// A generator for port number `id` (the stream id of its stamps).
    pub fn new(name: &str, id: u16, rxqs: usize, cfg: GeneratorConfig) -> GeneratorPort {
        let mix = cfg.mix();
        let templates: Vec<Box<[u8]>> = mix
            .iter()
            .map(|&(size, _)| template_of_size(&cfg, size).into())
            .collect();
        let pattern: Vec<u8> = nfv_traffic::mix::pattern(&mix)
            .into_iter()
            .map(|i| i as u8)
            .collect();
        let control = GeneratorControl {
            port_id: id,
            stamp: cfg.stamp,
            mean_frame: cfg.mean_frame_size(),
            epoch: AtomicU64::new(0),
            rate_pps: AtomicU64::new(cfg.effective_rate_pps().unwrap_or(0)),
            count: AtomicU64::new(cfg.count.unwrap_or(u64::MAX)),
            backlog_limit: AtomicU64::new(0),
            generated: (0..rxqs).map(|_| QueueCounters::default()).collect(),
            missed: (0..rxqs).map(|_| QueueCounters::default()).collect(),
        };
        GeneratorPort {
            name: name.to_string(),
            templates: templates.into(),
            pattern: pattern.into(),
            control: Arc::new(control),
            cfg,
            rxqs,
            clock: Clock::tsc(),
        }
    }

    /// Uses `clock` for pacing and stamps instead of the TSC (tests).
    pub fn with_clock(mut self, clock: Clock) -> GeneratorPort {
        self.clock = clock;
        self
    }

    pub fn control(&self) -> &Arc<GeneratorControl> {
        &self.control
    }
}

struct GenRxq {
    cfg: GeneratorConfig,
    templates: Arc<[Box<[u8]>]>,
    pattern: Arc<[u8]>,
    next_size: usize,
    next_flow: u32,
    /// Flows from one frame to the next ([`flow_stride`]).
    stride: u32,
    /// Stream id when stamping.
    stream: Option<u32>,
    /// Next sequence number (never reset).
    seq: u64,
    /// Sent (or missed) since the current run began.
    sent: u64,
    /// Backlog limit of this run (`u64::MAX` = none).
    backlog_limit: u64,
    /// Packets this queue may send in this run (`u64::MAX` = unlimited).
    budget: u64,
    pacer: Option<Pacer>,
    epoch: u64,
    q: usize,
    n_queues: usize,
    control: Arc<GeneratorControl>,
    clock: Clock,
}

impl GenRxq {
    /// Starts a run with the control's current settings.
    #[cold]
    fn restart(&mut self, epoch: u64) {
        self.epoch = epoch;
        let c = &self.control;
        let rate = c.rate_pps.load(Relaxed);
        let count = c.count.load(Relaxed);
        self.sent = 0;
        self.backlog_limit = match c.backlog_limit.load(Relaxed) {
            0 => u64::MAX,
            n => share(n, self.q, self.n_queues).max(1),
        };
        self.budget = if count == u64::MAX {
            u64::MAX
        } else {
            share(count, self.q, self.n_queues)
        };
        self.pacer = (rate > 0).then(|| Pacer {
            pps: share(rate, self.q, self.n_queues).max(1),
            hz: self.clock.hz,
            start: (self.clock.now)(),
        });
    }

    /// Drops `n` packets that fell beyond the backlog limit (their
    /// sequence numbers are skipped, so a receiver sees the gap).
    #[cold]
    fn miss(&mut self, n: u64) {
        self.sent += n;
        self.seq += n;
        self.control.missed[self.q].add(n, 0);
    }

    /// Fills `batch` with up to `want` frames, `stamp` writing each flow's
    /// fields; returns the frames and their bytes.
    #[inline(always)]
    fn fill(
        &mut self,
        batch: &mut Batch,
        pool: &mut PoolCache,
        want: u64,
        now: u64,
        stamp: impl Fn(&mut [u8], &[u8], &GeneratorConfig, u32),
    ) -> (u64, u64) {
        let mut got = 0;
        let mut bytes = 0;
        while got < want {
            let Some(mut pkt) = pool.alloc() else { break };
            let template = &self.templates[usize::from(self.pattern[self.next_size])];
            if pkt.set_len(template.len()).is_err() {
                // Frame larger than the pool's buffers (config validation
                // prevents this); give the buffer back and stop.
                pool.free(pkt);
                break;
            }
            let d = pkt.data_mut();
            d.copy_from_slice(template);
            if self.cfg.flows > 1 {
                stamp(d, template, &self.cfg, self.next_flow);
                // stride < flows: one subtraction, no division.
                self.next_flow += self.stride;
                if self.next_flow >= self.cfg.flows {
                    self.next_flow -= self.cfg.flows;
                }
            }
            if let Some(stream) = self.stream
                && let Some(b) = d[STAMP_OFFSET..].first_chunk_mut::<STAMP_LEN>()
            {
                Stamp {
                    stream,
                    seq: self.seq,
                    tsc: now,
                }
                .emit(b);
                self.seq += 1;
            }
            bytes += template.len() as u64;
            self.next_size += 1;
            if self.next_size == self.pattern.len() {
                self.next_size = 0;
            }
            batch.push(pkt);
            got += 1;
        }
        (got, bytes)
    }
}

impl RxQueue for GenRxq {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let epoch = self.control.epoch.load(Acquire);
        if epoch != self.epoch {
            self.restart(epoch);
        }
        let now = if self.pacer.is_some() || self.stream.is_some() {
            (self.clock.now)()
        } else {
            0
        };
        let mut want = (batch.remaining_capacity() as u64).min(self.budget - self.sent);
        if let Some(p) = &self.pacer {
            let mut behind = p.due(now).min(self.budget).saturating_sub(self.sent);
            if behind > self.backlog_limit {
                self.miss(behind - self.backlog_limit);
                behind = self.backlog_limit;
            }
            want = want.min(behind);
        }
        // One loop per family, each with its stamp inlined: the IPv4 one
        // is the loop there was before IPv6 (no per-frame branch on it).
        let (got, bytes) = match self.cfg.family {
            IpFamily::Ipv4 => self.fill(batch, pool, want, now, stamp_flow),
            IpFamily::Ipv6 => self.fill(batch, pool, want, now, stamp_flow6),
        };
        self.sent += got;
        if got > 0 {
            self.control.generated[self.q].add(got, bytes);
        }
        got as usize
    }
}

impl Port for GeneratorPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "generator"
    }
    fn n_rxq(&self) -> usize {
        self.rxqs
    }
    fn open_rxq(&self, q: usize) -> Box<dyn RxQueue> {
        let mut rxq = GenRxq {
            cfg: self.cfg.clone(),
            templates: self.templates.clone(),
            pattern: self.pattern.clone(),
            // Queues start at different points so they do not send in lockstep.
            next_size: (q * 5) % self.pattern.len(),
            next_flow: (q as u32 * 7919) % self.cfg.flows,
            stride: flow_stride(self.cfg.flows, self.cfg.flow_order),
            // Stamps go where an IPv4 frame's UDP payload starts (the
            // config refuses them with IPv6).
            stream: (self.cfg.stamp && self.cfg.family == IpFamily::Ipv4)
                .then(|| stream_id(self.control.port_id, q as u8)),
            seq: 0,
            sent: 0,
            backlog_limit: u64::MAX,
            budget: 0,
            pacer: None,
            epoch: 0,
            q,
            n_queues: self.rxqs,
            control: self.control.clone(),
            clock: self.clock,
        };
        rxq.restart(self.control.epoch.load(Acquire));
        Box::new(rxq)
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(DiscardTx)
    }
    fn gauges(&self) -> PortGauges {
        let c = &self.control;
        let frame_size = if self.cfg.imix {
            "imix".into()
        } else {
            self.cfg.frame_size.to_string()
        };
        PortGauges::default()
            .with("frame_size", frame_size)
            .with("flows", u64::from(self.cfg.flows))
            .with(
                "family",
                match self.cfg.family {
                    IpFamily::Ipv4 => "ipv4",
                    IpFamily::Ipv6 => "ipv6",
                },
            )
            .with(
                "rate_pps",
                c.rate_pps().map_or(Gauge::from("max"), Gauge::from),
            )
            .with("stamp", self.cfg.stamp)
            .with("generated", c.generated())
            .with("missed", c.missed())
    }
    fn generator_control(&self) -> Option<Arc<GeneratorControl>> {
        Some(self.control.clone())
    }
}

/// Packets sent to a generator are discarded (counted by the datapath).
struct DiscardTx;
impl TxQueue for DiscardTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        pool.free_batch(batch);
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_is_a_valid_udp_frame_of_the_requested_size() {
        for size in [64, 128, 1518, 9000] {
            let cfg = GeneratorConfig {
                frame_size: size,
                ..Default::default()
            };
            let f = template(&cfg);
            assert_eq!(f.len(), size);
            let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
            match p.net {
                Some(etherparse::NetSlice::Ipv4(ip)) => {
                    assert_eq!(ip.header().source_addr(), cfg.src_ip);
                    assert_eq!(
                        ip.header().header_checksum(),
                        ip.header().to_header().calc_header_checksum()
                    );
                }
                _ => panic!("not ipv4"),
            }
        }
    }

    /// The frames are byte for byte what etherparse builds for the same
    /// headers (with the UDP checksum left out).
    #[test]
    fn template_matches_etherparse_byte_for_byte() {
        for size in [42, 64, 65, 1518] {
            let cfg = GeneratorConfig {
                frame_size: size,
                src_port: 4000,
                ..Default::default()
            };
            let payload: Vec<u8> = (0..size - 42).map(|i| i as u8).collect();
            let mut want = Vec::new();
            etherparse::PacketBuilder::ethernet2(cfg.src_mac, cfg.dst_mac)
                .ipv4(cfg.src_ip.octets(), cfg.dst_ip.octets(), 64)
                .udp(cfg.src_port, cfg.dst_port)
                .write(&mut want, &payload)
                .unwrap();
            want[40..42].copy_from_slice(&[0, 0]);
            assert_eq!(template(&cfg), want, "{size} B");
        }
    }

    #[test]
    fn stamped_flows_are_distinct_and_checksums_stay_valid() {
        let cfg = GeneratorConfig {
            flows: 3000,
            ..Default::default()
        };
        let mut seen = std::collections::HashSet::new();
        // The checksum is patched, not recomputed: check it against a
        // full computation across many source addresses.
        let flows: std::collections::BTreeSet<u32> = [0u32, 1, 1023, 1024, 2999]
            .into_iter()
            .chain((0..3000).step_by(7))
            .collect();
        for f in flows {
            let t = template(&cfg);
            let mut frame = t.clone();
            stamp_flow(&mut frame, &t, &cfg, f);
            let p = etherparse::SlicedPacket::from_ethernet(&frame).unwrap();
            let Some(etherparse::NetSlice::Ipv4(ip)) = p.net else {
                panic!()
            };
            let h = ip.header().to_header();
            assert_eq!(h.header_checksum, h.calc_header_checksum(), "flow {f}");
            let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
                panic!()
            };
            assert!(seen.insert((h.source, u.source_port())), "flow {f} repeats");
        }
        assert_eq!(std::net::Ipv4Addr::from(u32::from(cfg.src_ip) + 2), {
            let t = template(&cfg);
            let mut frame = t.clone();
            stamp_flow(&mut frame, &t, &cfg, 2048);
            std::net::Ipv4Addr::new(frame[26], frame[27], frame[28], frame[29])
        });
    }

    fn ipv6_cfg(size: usize, flows: u32) -> GeneratorConfig {
        GeneratorConfig {
            family: IpFamily::Ipv6,
            frame_size: size,
            flows,
            ..Default::default()
        }
    }

    /// `frame`'s IPv6 source, UDP source port and checksum, after checking
    /// that etherparse reads an IPv6/UDP frame whose UDP checksum is the
    /// one it computes itself.
    fn parse_v6(frame: &[u8]) -> (u128, u16, u16) {
        let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
        let Some(etherparse::NetSlice::Ipv6(ip)) = p.net else {
            panic!("not ipv6")
        };
        let ip = ip.header().to_header();
        let Some(etherparse::TransportSlice::Udp(u)) = p.transport else {
            panic!("not udp")
        };
        let want = u.to_header().calc_checksum_ipv6(&ip, u.payload()).unwrap();
        assert_eq!(u.checksum(), want, "UDP checksum");
        assert_ne!(u.checksum(), 0, "IPv6 requires a UDP checksum");
        (
            u128::from_be_bytes(ip.source),
            u.source_port(),
            u.checksum(),
        )
    }

    /// IPv6 frames are byte for byte what etherparse builds for the same
    /// headers, UDP checksum included.
    #[test]
    fn ipv6_template_matches_etherparse_byte_for_byte() {
        for size in [62, 64, 65, 128, 1518, 9000] {
            let cfg = ipv6_cfg(size, 1);
            let payload: Vec<u8> = (0..size - 62).map(|i| i as u8).collect();
            let mut want = Vec::new();
            etherparse::PacketBuilder::ethernet2(cfg.src_mac, cfg.dst_mac)
                .ipv6(cfg.src_ip6.octets(), cfg.dst_ip6.octets(), 64)
                .udp(cfg.src_port, cfg.dst_port)
                .write(&mut want, &payload)
                .unwrap();
            let t = template(&cfg);
            assert_eq!(t, want, "{size} B");
            assert_eq!(t.len(), size);
            let (src, sport, _) = parse_v6(&t);
            assert_eq!((src, sport), (u128::from(cfg.src_ip6), cfg.src_port));
        }
    }

    #[test]
    fn ipv6_stamped_flows_are_distinct_and_checksums_stay_valid() {
        for size in [64, 594, 1518] {
            let cfg = ipv6_cfg(size, 3000);
            let t = template(&cfg);
            let mut seen = std::collections::HashSet::new();
            let flows: std::collections::BTreeSet<u32> = [0u32, 1, 1023, 1024, 2999]
                .into_iter()
                .chain((0..3000).step_by(7))
                .collect();
            for f in flows {
                let mut frame = t.clone();
                stamp_flow6(&mut frame, &t, &cfg, f);
                let (src, sport, _) = parse_v6(&frame);
                assert_eq!(src, u128::from(cfg.src_ip6) + u128::from(f / 1024));
                assert_eq!(sport, cfg.src_port + (f % 1024) as u16);
                assert!(seen.insert((src, sport)), "flow {f} repeats");
                // Only the source address, source port and checksum change.
                let changed: Vec<usize> = (0..t.len()).filter(|&i| t[i] != frame[i]).collect();
                assert!(
                    changed.iter().all(|&i| (22..38).contains(&i)
                        || (54..56).contains(&i)
                        || (60..62).contains(&i)),
                    "flow {f}: bytes {changed:?} changed"
                );
            }
        }
    }

    /// Counting on from a source whose low half is all ones carries into
    /// the high half (the whole address rewritten then).
    #[test]
    fn ipv6_source_counts_on_across_the_address_halves() {
        let mut cfg = ipv6_cfg(128, 4096);
        cfg.src_ip6 = "fd00::ffff:ffff:ffff:fffe".parse().unwrap();
        let t = template(&cfg);
        for f in [0, 1, 1024, 1025, 2048, 3072, 4095] {
            let mut frame = t.clone();
            stamp_flow6(&mut frame, &t, &cfg, f);
            let (src, sport, _) = parse_v6(&frame);
            assert_eq!(
                src,
                u128::from(cfg.src_ip6) + u128::from(f / 1024),
                "flow {f}"
            );
            assert_eq!(sport, cfg.src_port + (f % 1024) as u16);
        }
        let mut frame = t.clone();
        stamp_flow6(&mut frame, &t, &cfg, 2048);
        assert_eq!(
            Ipv6Packet::new_unchecked(&frame[14..])
                .src_addr()
                .to_string(),
            "fd00:0:0:1::"
        );
    }

    /// A checksum that comes to 0 goes out as 0xffff, in the template and
    /// when a flow's patch starts from one or arrives at one.
    #[test]
    fn ipv6_udp_checksum_zero_is_sent_as_ffff() {
        // The one's-complement sum grows by the destination port, so the
        // template's checksum for port 0 (the complement of its sum) is the
        // port that makes the sum 0xffff, whose checksum is 0.
        let mut cfg = ipv6_cfg(64, 2048);
        cfg.dst_port = 0;
        let c0 = UdpPacket::new_unchecked(&template(&cfg)[UDP6_OFFSET..]).checksum();
        assert!(c0 > 1);
        cfg.dst_port = c0;
        let t = template(&cfg);
        assert_eq!(parse_v6(&t).2, 0xffff, "the template's");
        for f in [1, 2, 1023, 1024, 1025, 2047] {
            let mut frame = t.clone();
            stamp_flow6(&mut frame, &t, &cfg, f);
            parse_v6(&frame);
        }
        // One less: flow 1 (source port + 1) and flow 1024 (address + 1)
        // bring the sum to 0xffff.
        cfg.dst_port = c0 - 1;
        let t = template(&cfg);
        assert_eq!(parse_v6(&t).2, 1);
        for f in [1, 1024] {
            let mut frame = t.clone();
            stamp_flow6(&mut frame, &t, &cfg, f);
            assert_eq!(parse_v6(&frame).2, 0xffff, "flow {f}");
        }
    }

    /// Scattered order visits every flow once per cycle, and consecutive
    /// frames are far apart (another source address at 100,000 flows);
    /// round-robin steps by one.
    #[test]
    fn a_scattered_walk_visits_every_flow_once_per_cycle() {
        for flows in [1u32, 2, 3, 4, 10, 1000, 1024, 4096, 100_000, 1_000_000] {
            assert_eq!(flow_stride(flows, FlowOrder::RoundRobin), 1);
            let stride = flow_stride(flows, FlowOrder::Scattered);
            assert!(
                stride >= 1 && (stride < flows || flows < 3),
                "{flows}: {stride}"
            );
            let mut seen = vec![false; flows as usize];
            let mut f = 0u32;
            for _ in 0..flows {
                assert!(!seen[f as usize], "{flows}: flow {f} twice");
                seen[f as usize] = true;
                f += stride;
                if f >= flows {
                    f -= flows;
                }
            }
            assert_eq!(f, 0, "{flows}: back to the start after a cycle");
            if flows >= 100_000 {
                let apart = stride.min(flows - stride);
                assert!(apart > 2 * FLOW_PORTS, "{flows}: stride {stride}");
            }
        }
    }
}
