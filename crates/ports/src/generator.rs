//! `generator`: synthetic Ethernet/IPv4/UDP frames as a port's rx.
//!
//! Each frame is a copy of a template with the flow's fields stamped in:
//! flow `f` has UDP source port `src_port + f % 1024` and IPv4 source
//! `src_ip + f / 1024`, so `flows` distinct 5-tuples cycle round-robin.
//! Rate limiting uses the TSC (no syscalls). Bursts are capped at the
//! batch size, so a slow switch back-pressures the generator instead of
//! making it drop.

use crate::config::GeneratorConfig;
use crate::{Port, RxQueue, TxQueue};
use nfv_mem::{Batch, PoolCache};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
const FLOW_PORTS: u32 = 1024;

/// Builds the template frame of `cfg.frame_size` bytes (flow 0).
pub fn template(cfg: &GeneratorConfig) -> Vec<u8> {
    let payload_len = cfg.frame_size.saturating_sub(ETH_LEN + IP_LEN + UDP_LEN);
    let payload: Vec<u8> = (0..payload_len).map(|i| i as u8).collect();
    let builder = etherparse::PacketBuilder::ethernet2(cfg.src_mac, cfg.dst_mac)
        .ipv4(cfg.src_ip.octets(), cfg.dst_ip.octets(), 64)
        .udp(cfg.src_port, cfg.dst_port);
    let mut frame = Vec::with_capacity(cfg.frame_size);
    builder
        .write(&mut frame, &payload)
        .expect("writing to a Vec cannot fail");
    // IPv4 allows "no UDP checksum"; flows then only need the IP checksum fixed.
    frame[ETH_LEN + IP_LEN + 6] = 0;
    frame[ETH_LEN + IP_LEN + 7] = 0;
    frame
}

fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum = 0u32;
    for (i, c) in h[..IP_LEN].chunks_exact(2).enumerate() {
        if i != 5 {
            sum += u16::from_be_bytes([c[0], c[1]]) as u32;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Writes flow `f`'s fields into a frame made from [`template`].
#[inline]
pub fn stamp_flow(frame: &mut [u8], cfg: &GeneratorConfig, f: u32) {
    let sport = cfg.src_port.wrapping_add((f % FLOW_PORTS) as u16);
    let sip = u32::from(cfg.src_ip).wrapping_add(f / FLOW_PORTS);
    let ip = &mut frame[ETH_LEN..ETH_LEN + IP_LEN];
    ip[12..16].copy_from_slice(&sip.to_be_bytes());
    let c = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    frame[ETH_LEN + IP_LEN..ETH_LEN + IP_LEN + 2].copy_from_slice(&sport.to_be_bytes());
}

pub struct GeneratorPort {
    name: String,
    cfg: GeneratorConfig,
    rxqs: usize,
    template: Arc<[u8]>,
    generated: Arc<AtomicU64>,
}

impl GeneratorPort {
    pub fn new(name: &str, rxqs: usize, cfg: GeneratorConfig) -> GeneratorPort {
        GeneratorPort {
            name: name.to_string(),
            template: template(&cfg).into(),
            cfg,
            rxqs,
            generated: Arc::new(AtomicU64::new(0)),
        }
    }
}

struct GenRxq {
    cfg: GeneratorConfig,
    template: Arc<[u8]>,
    next_flow: u32,
    sent: u64,
    /// Packets this queue may send in total (`u64::MAX` = unlimited).
    budget: u64,
    /// Rate limit per queue, if any: (pps, TSC at start, TSC hz).
    rate: Option<(u64, u64, u64)>,
    generated: Arc<AtomicU64>,
}

impl GenRxq {
    #[inline]
    fn allowed(&mut self, cap: usize) -> usize {
        let mut n = cap as u64;
        if let Some((pps, start, hz)) = self.rate {
            let elapsed = nfv_tsc::now().saturating_sub(start) as u128;
            let due = (elapsed * pps as u128 / hz as u128) as u64;
            n = n.min(due.saturating_sub(self.sent));
        }
        n.min(self.budget - self.sent) as usize
    }
}

impl RxQueue for GenRxq {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let want = self.allowed(batch.remaining_capacity());
        let len = self.template.len();
        let mut got = 0;
        while got < want {
            let Some(mut pkt) = pool.alloc() else { break };
            if pkt.set_len(len).is_err() {
                // Frame larger than the pool's buffers (config validation
                // prevents this); give the buffer back and stop.
                pool.free(pkt);
                break;
            }
            let d = pkt.data_mut();
            d.copy_from_slice(&self.template);
            if self.cfg.flows > 1 {
                stamp_flow(d, &self.cfg, self.next_flow);
                self.next_flow += 1;
                if self.next_flow == self.cfg.flows {
                    self.next_flow = 0;
                }
            }
            batch.push(pkt);
            got += 1;
        }
        self.sent += got as u64;
        if got > 0 {
            let g = &self.generated;
            g.store(g.load(Relaxed) + got as u64, Relaxed);
        }
        got
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
        let n = self.rxqs as u64;
        let share = |total: u64| total / n + u64::from((q as u64) < total % n);
        Box::new(GenRxq {
            cfg: self.cfg.clone(),
            template: self.template.clone(),
            // Queues start on different flows so they do not send in lockstep.
            next_flow: (q as u32 * 7919) % self.cfg.flows,
            sent: 0,
            budget: self.cfg.count.map_or(u64::MAX, share),
            rate: self
                .cfg
                .rate_pps
                .map(|r| (share(r).max(1), nfv_tsc::now(), nfv_tsc::hz())),
            generated: self.generated.clone(),
        })
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(DiscardTx)
    }
    fn info(&self) -> Vec<(&'static str, String)> {
        vec![
            ("frame_size", self.cfg.frame_size.to_string()),
            ("flows", self.cfg.flows.to_string()),
            (
                "rate_pps",
                self.cfg.rate_pps.map_or("max".into(), |r| r.to_string()),
            ),
            ("generated", self.generated.load(Relaxed).to_string()),
        ]
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

    #[test]
    fn stamped_flows_are_distinct_and_checksums_stay_valid() {
        let cfg = GeneratorConfig {
            flows: 3000,
            ..Default::default()
        };
        let mut seen = std::collections::HashSet::new();
        for f in [0u32, 1, 1023, 1024, 2999] {
            let mut frame = template(&cfg);
            stamp_flow(&mut frame, &cfg, f);
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
            let mut frame = template(&cfg);
            stamp_flow(&mut frame, &cfg, 2048);
            std::net::Ipv4Addr::new(frame[26], frame[27], frame[28], frame[29])
        });
    }
}
