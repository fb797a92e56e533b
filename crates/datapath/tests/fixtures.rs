//! Element fixtures (STYLE lesson 9, layer 2): packet in, expected packets
//! and ports out, fed straight into the forwarding [`Element`] a PMD runs
//! (no thread, no channel, no waiting). The whole-graph layer, with real
//! PMD threads, is `graph.rs`.
//!
//! Every output is a [`CaptureTx`] queue that records each transmitted
//! frame as `(port, bytes)` in a log shared with the test, then frees the
//! packet. Each fixture is data: rules in `ovs-ofctl` syntax and steps of
//! (in_port, frame) → exact output frames per port + the drop counters that
//! must move. Every fixture runs with and without an exact-match cache,
//! and with frames longer than `SPLIT_HEAD` fed whole and split (as the
//! vhost-user port's one-copy mode hands them over: the head in a pool
//! buffer, the tail borrowed) to outputs that take split packets and to
//! outputs that must get them whole; each run ends by checking that the
//! packet pool got every frame back.

use nfv_datapath::Element;
use nfv_datapath::mac_learning::MacTable;
use nfv_datapath::stats::PmdCounters;
use nfv_flow::table::SharedFlowTable;
use nfv_flow::{PortNo, parse_flow};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool, PoolCache, SPLIT_HEAD};
use nfv_ports::{DropReason, PortStats, QueueSnapshot, TxQueue};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

/// Megaflow cache entries of the harness's element.
const MEGAFLOWS: usize = 1024;

#[path = "fixtures/conntrack.rs"]
mod conntrack;
#[path = "fixtures/decision.rs"]
mod decision;
#[path = "fixtures/frames.rs"]
mod frames;
#[path = "fixtures/ipv6.rs"]
mod ipv6;
#[path = "fixtures/outputs.rs"]
mod outputs;
#[path = "fixtures/pipeline.rs"]
mod pipeline;
use frames::*;

type Log = Arc<Mutex<Vec<(PortNo, Vec<u8>)>>>;

/// A tx queue that records what it is given.
struct CaptureTx {
    no: PortNo,
    log: Log,
    max_frame: usize,
    takes_split: bool,
}

impl TxQueue for CaptureTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        for p in batch.drain(..) {
            assert!(
                self.takes_split || !p.is_split(),
                "port {}: a split packet reached a queue that does not take them",
                self.no
            );
            let mut bytes = p.data().to_vec();
            let (tail, tail_len) = p.tail();
            if tail_len != 0 {
                // SAFETY: the feeding harness keeps every tail alive until
                // the flush that ends the burst returns.
                bytes.extend_from_slice(unsafe { std::slice::from_raw_parts(tail, tail_len) });
            }
            log.push((self.no, bytes));
            pool.free(p);
        }
        n
    }
    fn max_frame(&self) -> usize {
        self.max_frame
    }
    fn takes_split(&self) -> bool {
        self.takes_split
    }
}

/// How long frames are fed and what the outputs take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Whole,
    /// Frames longer than `SPLIT_HEAD` split; outputs take split packets.
    SplitToSplitOutputs,
    /// Split as well; outputs take only whole packets (kernel ports).
    SplitToWholeOutputs,
}

// ---------------------------------------------------------------------------
// Fixture rows.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Dir {
    Rx,
    Tx,
}

/// One frame in and everything it must cause.
struct Step {
    in_port: PortNo,
    frame: Vec<u8>,
    /// Exact frames per output port (order across ports is not checked,
    /// order within one port is).
    out: Vec<(PortNo, Vec<u8>)>,
    /// Drop counters that must move by one each (all others stay put).
    drops: Vec<(PortNo, Dir, DropReason)>,
}

fn step(in_port: PortNo, frame: Vec<u8>, out: Vec<(PortNo, Vec<u8>)>) -> Step {
    Step {
        in_port,
        frame,
        out,
        drops: Vec::new(),
    }
}

fn dropped(in_port: PortNo, frame: Vec<u8>, reason: DropReason) -> Step {
    Step {
        in_port,
        frame,
        out: Vec::new(),
        drops: vec![(in_port, Dir::Rx, reason)],
    }
}

#[derive(Default)]
struct Fixture {
    name: &'static str,
    /// Groups (`add-group` text), added before the rules.
    groups: &'static [&'static str],
    rules: &'static [&'static str],
    /// Port numbers to create (default 1..=4).
    ports: &'static [PortNo],
    /// Ports whose tx queues accept only frames up to this size.
    max_frame: &'static [(PortNo, usize)],
    steps: Vec<Step>,
}

/// Bytes printed as hex in assertion messages.
#[derive(Clone, PartialEq, Eq)]
struct Hex(Vec<u8>);

impl fmt::Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{} B:", self.0.len())?;
        for (i, b) in self.0.iter().enumerate() {
            if i % 2 == 0 {
                write!(f, " ")?;
            }
            write!(f, "{b:02x}")?;
        }
        write!(f, "]")
    }
}

fn sorted_by_port(v: Vec<(PortNo, Vec<u8>)>) -> Vec<(PortNo, Hex)> {
    let mut v: Vec<(PortNo, Hex)> = v.into_iter().map(|(p, b)| (p, Hex(b))).collect();
    v.sort_by_key(|(p, _)| *p); // stable: per-port order is kept
    v
}

// ---------------------------------------------------------------------------
// The harness: a pool, one element, a capture queue and counters per port.

struct Harness {
    mode: Mode,
    /// Tails of the split packets fed in the current burst.
    tails: Vec<Box<[u8]>>,
    pool: Arc<PacketPool>,
    cache: PoolCache,
    element: Element,
    ports: BTreeMap<PortNo, Arc<PortStats>>,
    log: Log,
    counters: PmdCounters,
    table: SharedFlowTable,
}

type Counters = BTreeMap<(PortNo, Dir), QueueSnapshot>;

impl Harness {
    fn new(f: &Fixture, emc_entries: usize, mode: Mode) -> Harness {
        let pool = PacketPool::new(
            &format!("fixture-{}-{emc_entries}-{mode:?}", f.name),
            &MemoryConfig {
                frame_size: 2048,
                frames: 1024,
                hugepages: HugepageMode::Never,
            },
        )
        .expect("packet pool");
        let table = SharedFlowTable::new();
        for g in f.groups {
            let group = nfv_flow::parse_group(g).unwrap_or_else(|e| panic!("{}: {g}: {e}", f.name));
            table.add_group(group).unwrap();
        }
        table.add_flows(
            f.rules
                .iter()
                .map(|r| parse_flow(r).unwrap_or_else(|e| panic!("{}: {r}: {e}", f.name))),
        );
        let mut element = Element::new(
            emc_entries,
            MEGAFLOWS,
            table.snapshot(),
            Arc::new(MacTable::new(64)),
        );
        let log: Log = Arc::default();
        let mut ports = BTreeMap::new();
        let numbers = if f.ports.is_empty() {
            &[1, 2, 3, 4][..]
        } else {
            f.ports
        };
        for &no in numbers {
            let max_frame = f
                .max_frame
                .iter()
                .find(|(p, _)| *p == no)
                .map_or(usize::MAX, |(_, m)| *m);
            let stats = Arc::new(PortStats::new(1, 1));
            let txq = CaptureTx {
                no,
                log: log.clone(),
                max_frame,
                takes_split: mode == Mode::SplitToSplitOutputs,
            };
            element.add_output(no, Box::new(txq), stats.clone(), 0);
            ports.insert(no, stats);
        }
        Harness {
            mode,
            tails: Vec::new(),
            cache: pool.cache(),
            pool,
            element,
            ports,
            log,
            counters: PmdCounters::default(),
            table,
        }
    }

    /// (packets, bytes) credited to the rule whose text starts with `spec`.
    fn rule_stats(&self, spec: &str) -> (u64, u64) {
        let rules = self.table.snapshot().classifier.rules();
        let r = rules
            .iter()
            .find(|r| r.spec.to_string().contains(spec))
            .unwrap_or_else(|| panic!("no rule like {spec:?}"));
        (r.stats.packets.load(Relaxed), r.stats.bytes.load(Relaxed))
    }

    /// Feeds `frames` (all received on `in_port`) as one batch, then
    /// flushes the outputs.
    fn feed(&mut self, in_port: PortNo, frames: &[&[u8]]) {
        let mut batch = Batch::new();
        for frame in frames {
            let mut p = self.cache.alloc().expect("test pool exhausted");
            let head = match self.mode {
                Mode::Whole => frame.len(),
                _ => frame.len().min(SPLIT_HEAD),
            };
            p.set_len(head).expect("frame larger than a pool buffer");
            p.data_mut().copy_from_slice(&frame[..head]);
            if head < frame.len() {
                let tail: Box<[u8]> = frame[head..].into();
                // SAFETY: `tails` keeps the bytes until after the flush
                // below, which ends every use of the packets fed here; the
                // head holds SPLIT_HEAD bytes and the frame fits a buffer.
                unsafe { p.set_tail(tail.as_ptr(), tail.len() as u32) };
                self.tails.push(tail);
            }
            batch.push(p);
        }
        let rx = &self
            .ports
            .get(&in_port)
            .unwrap_or_else(|| panic!("no test port {in_port}"))
            .rx[0];
        self.element
            .process(in_port, rx, &mut batch, &mut self.cache, &mut self.counters);
        assert!(batch.is_empty(), "process leaves the batch empty");
        self.element.flush(&mut self.cache);
        self.tails.clear();
    }

    fn counters(&self) -> Counters {
        let mut m = BTreeMap::new();
        for (&no, stats) in &self.ports {
            m.insert((no, Dir::Rx), stats.rx_total());
            m.insert((no, Dir::Tx), stats.tx_total());
        }
        m
    }

    fn take_log(&self) -> Vec<(PortNo, Vec<u8>)> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Drops the element and the cache and checks that every frame is back.
    fn finish(self, name: &str) {
        let Harness {
            pool,
            cache,
            element,
            ..
        } = self;
        drop(element);
        drop(cache);
        assert_eq!(
            pool.shared_free(),
            pool.frames(),
            "{name}: frames not returned to the pool"
        );
    }
}

/// Drop counters that changed between two snapshots: (port, dir, reason) → n.
fn drop_deltas(before: &Counters, after: &Counters) -> BTreeMap<(PortNo, Dir, &'static str), u64> {
    let mut d = BTreeMap::new();
    for (k, a) in after {
        let b = before.get(k).copied().unwrap_or_default();
        for r in DropReason::ALL {
            let n = a.drops[r as usize] - b.drops[r as usize];
            if n != 0 {
                d.insert((k.0, k.1, r.as_str()), n);
            }
        }
    }
    d
}

fn tx_deltas(before: &Counters, after: &Counters) -> BTreeMap<PortNo, u64> {
    after
        .iter()
        .filter(|((_, dir), _)| *dir == Dir::Tx)
        .map(|((p, _), a)| {
            (
                *p,
                a.packets - before.get(&(*p, Dir::Tx)).map_or(0, |b| b.packets),
            )
        })
        .filter(|(_, n)| *n != 0)
        .collect()
}

/// Runs the fixture with an exact-match cache and without one.
fn run(f: Fixture) {
    for emc_entries in [1024, 0] {
        for mode in [
            Mode::Whole,
            Mode::SplitToSplitOutputs,
            Mode::SplitToWholeOutputs,
        ] {
            run_with(&f, emc_entries, mode);
        }
    }
}

fn run_with(f: &Fixture, emc_entries: usize, mode: Mode) {
    let mut h = Harness::new(f, emc_entries, mode);
    for (i, s) in f.steps.iter().enumerate() {
        let ctx = format!(
            "{} (emc {emc_entries}, {mode:?}) step {i} (in_port {})",
            f.name, s.in_port
        );
        let before = h.counters();
        h.feed(s.in_port, &[&s.frame]);
        let after = h.counters();
        let got = sorted_by_port(h.take_log());
        let want = sorted_by_port(s.out.clone());
        assert_eq!(got, want, "{ctx}: output frames");
        let mut want_drops = BTreeMap::new();
        for &(p, dir, r) in &s.drops {
            *want_drops.entry((p, dir, r.as_str())).or_insert(0) += 1;
        }
        assert_eq!(
            drop_deltas(&before, &after),
            want_drops,
            "{ctx}: drop counters"
        );
        let mut want_tx = BTreeMap::new();
        for (p, _) in &s.out {
            *want_tx.entry(*p).or_insert(0u64) += 1;
        }
        assert_eq!(
            tx_deltas(&before, &after),
            want_tx,
            "{ctx}: tx packet counters"
        );
        let rx = after[&(s.in_port, Dir::Rx)].packets - before[&(s.in_port, Dir::Rx)].packets;
        assert_eq!(rx, 1, "{ctx}: rx packet counter of the in_port");
    }
    if emc_entries == 0 {
        assert_eq!(h.counters.emc_hits, 0, "{}: no EMC, no EMC hits", f.name);
    }
    h.finish(f.name);
}

// ---------------------------------------------------------------------------
// The fixtures.

#[test]
fn single_output() {
    run(Fixture {
        name: "single_output",
        rules: &[
            "in_port=1,actions=output:2",
            "in_port=2,arp,actions=output:3",
        ],
        steps: vec![
            step(1, udp(), vec![(2, udp())]),
            step(2, ARP_REQUEST.to_vec(), vec![(3, ARP_REQUEST.to_vec())]),
            step(1, udp_to([10, 9, 9, 9]), vec![(2, udp_to([10, 9, 9, 9]))]),
        ],
        ..Fixture::default()
    });
}

/// `ct_clear` runs on the PMD as the no-op it is while no packet has ct
/// fields (a later table sees an untracked packet); `ct(table=N)` forks:
/// the packet goes on with the actions after it, untracked, and a tracked
/// copy is looked up again from table N.
#[test]
fn ct_clear_untracks_and_ct_table_forks_a_tracked_copy() {
    run(Fixture {
        name: "ct_clear",
        rules: &[
            "in_port=1,udp,actions=ct_clear,output:2",
            "in_port=3,ip,actions=ct_clear,goto_table:1",
            "table=1,ip,ct_state=-trk,actions=output:4",
            "table=1,ip,ct_state=+trk,actions=output:2",
            "in_port=4,ip,actions=ct(commit,table=1),output:3",
        ],
        steps: vec![
            step(1, udp(), vec![(2, udp())]),
            step(3, udp(), vec![(4, udp())]),
            step(4, udp(), vec![(3, udp()), (2, udp())]),
        ],
        ..Fixture::default()
    });
}

#[test]
fn several_outputs_get_one_copy_each() {
    run(Fixture {
        name: "several_outputs",
        // A bare port number is `output:N` too.
        rules: &[
            "in_port=1,actions=output:2,output:3",
            "in_port=4,actions=1,2,3",
        ],
        steps: vec![
            step(1, udp(), vec![(2, udp()), (3, udp())]),
            step(4, udp(), vec![(1, udp()), (2, udp()), (3, udp())]),
        ],
        ..Fixture::default()
    });
}

#[test]
fn output_to_in_port_is_skipped() {
    run(Fixture {
        name: "output_to_in_port",
        rules: &[
            "in_port=1,actions=output:1,output:2",
            // The in_port output is the last one: the copy to 1 still goes.
            "in_port=2,actions=output:1,output:2",
            // Nothing but the in_port: nothing carries the packet.
            "in_port=3,actions=output:3",
        ],
        steps: vec![
            step(1, udp(), vec![(2, udp())]),
            step(2, udp(), vec![(1, udp())]),
            dropped(3, udp(), DropReason::Action),
        ],
        ..Fixture::default()
    });
}

#[test]
fn higher_priority_wins() {
    run(Fixture {
        name: "priorities",
        rules: &[
            "priority=10,actions=output:2",
            "priority=30,in_port=1,udp,tp_dst=53,actions=output:4",
            "priority=20,in_port=1,actions=output:3",
        ],
        steps: vec![
            step(1, udp(), vec![(3, udp())]),
            step(
                1,
                Udp {
                    dport: 53,
                    ..Udp::default()
                }
                .build(),
                vec![(
                    4,
                    Udp {
                        dport: 53,
                        ..Udp::default()
                    }
                    .build(),
                )],
            ),
            // Only the catch-all matches on another port.
            step(3, udp(), vec![(2, udp())]),
        ],
        ..Fixture::default()
    });
}

#[test]
fn wildcards_and_nw_dst_prefixes() {
    run(Fixture {
        name: "nw_dst_prefixes",
        rules: &[
            "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2",
            "priority=20,ip,nw_dst=10.1.0.0/16,actions=output:3",
            "priority=30,ip,nw_dst=10.1.2.3,actions=output:4",
            "priority=5,dl_dst=02:00:00:00:00:0b,actions=output:4",
        ],
        steps: vec![
            step(1, udp_to([10, 1, 2, 3]), vec![(4, udp_to([10, 1, 2, 3]))]),
            step(
                1,
                udp_to([10, 1, 200, 7]),
                vec![(3, udp_to([10, 1, 200, 7]))],
            ),
            step(
                1,
                udp_to([10, 200, 0, 1]),
                vec![(2, udp_to([10, 200, 0, 1]))],
            ),
            // Outside every prefix: the dl_dst wildcard rule catches it.
            step(
                1,
                udp_to([192, 168, 0, 1]),
                vec![(4, udp_to([192, 168, 0, 1]))],
            ),
            // ...unless the destination MAC differs too.
            dropped(
                1,
                Udp {
                    dst_ip: [192, 168, 0, 1],
                    dst_mac: MAC_X,
                    ..Udp::default()
                }
                .build(),
                DropReason::NoMatch,
            ),
        ],
        ..Fixture::default()
    });
}

#[test]
fn dl_vlan_matches_tagged_and_untagged() {
    run(Fixture {
        name: "dl_vlan",
        rules: &[
            "dl_vlan=100,actions=output:2",
            "dl_vlan=0xffff,actions=output:3",
        ],
        steps: vec![
            step(
                1,
                tagged(&udp(), 0x8100, 100),
                vec![(2, tagged(&udp(), 0x8100, 100))],
            ),
            // PCP bits do not matter to dl_vlan.
            step(
                1,
                tagged(&udp(), 0x8100, 0xa000 | 100),
                vec![(2, tagged(&udp(), 0x8100, 0xa000 | 100))],
            ),
            step(1, udp(), vec![(3, udp())]),
            dropped(1, tagged(&udp(), 0x8100, 200), DropReason::NoMatch),
        ],
        ..Fixture::default()
    });
}

#[test]
fn no_match_is_counted_on_the_in_ports_rx() {
    run(Fixture {
        name: "no_match",
        rules: &["in_port=2,actions=output:3"],
        steps: vec![
            dropped(1, udp(), DropReason::NoMatch),
            dropped(4, ARP_REQUEST.to_vec(), DropReason::NoMatch),
            step(2, udp(), vec![(3, udp())]),
        ],
        ..Fixture::default()
    });
}

#[test]
fn drop_action_is_counted_as_action_drop() {
    run(Fixture {
        name: "drop_action",
        rules: &["in_port=1,actions=drop", "in_port=2,actions="],
        steps: vec![
            dropped(1, udp(), DropReason::Action),
            dropped(2, udp(), DropReason::Action),
        ],
        ..Fixture::default()
    });
}

#[test]
fn mod_dl_src_and_mod_dl_dst() {
    run(Fixture {
        name: "mod_dl",
        rules: &[
            "in_port=1,actions=mod_dl_src:aa:bb:cc:dd:ee:01,output:2",
            "in_port=2,actions=mod_dl_dst:aa:bb:cc:dd:ee:02,output:3",
            "in_port=3,actions=mod_dl_src:aa:bb:cc:dd:ee:01,mod_dl_dst:aa:bb:cc:dd:ee:02,output:4",
        ],
        steps: vec![
            step(1, udp(), vec![(2, with_src(&udp(), MAC_X))]),
            step(2, udp(), vec![(3, with_dst(&udp(), MAC_Y))]),
            step(
                3,
                udp(),
                vec![(4, with_dst(&with_src(&udp(), MAC_X), MAC_Y))],
            ),
        ],
        ..Fixture::default()
    });
}

/// IPv4 and UDP rewrites: the output equals a frame etherparse built with
/// the new values (so every checksum is the one a from-scratch
/// computation gives); frames the rewrites do not apply to pass unchanged;
/// `dec_ttl` drops a packet that arrives with TTL 1 as `ttl_expired`.
#[test]
fn ipv4_and_udp_rewrites_match_a_frame_built_with_the_new_values() {
    let rewritten = Udp {
        src_ip: [192, 0, 2, 1],
        dport: 53,
        ttl: 63,
        ..Udp::default()
    }
    .build();
    let ttl_one = Udp {
        ttl: 1,
        ..Udp::default()
    }
    .build();
    run(Fixture {
        name: "ipv4_udp_rewrites",
        rules: &[
            "in_port=1,udp,actions=mod_nw_src:192.0.2.1,mod_tp_dst:53,dec_ttl,output:2",
            "in_port=3,actions=dec_ttl,mod_nw_dst:10.9.9.9,output:4",
        ],
        steps: vec![
            step(1, udp(), vec![(2, rewritten)]),
            step(3, ARP_REQUEST.to_vec(), vec![(4, ARP_REQUEST.to_vec())]),
            dropped(3, ttl_one, DropReason::TtlExpired),
        ],
        ..Fixture::default()
    });
}

#[test]
fn mod_vlan_vid_pushes_a_tag_on_untagged_frames() {
    run(Fixture {
        name: "mod_vlan_vid",
        rules: &["in_port=1,actions=mod_vlan_vid:42,output:2"],
        steps: vec![
            step(1, udp(), vec![(2, tagged(&udp(), 0x8100, 42))]),
            // A tagged frame keeps its PCP; only the VID changes.
            step(
                1,
                tagged(&udp(), 0x8100, 0xa000 | 7),
                vec![(2, tagged(&udp(), 0x8100, 0xa000 | 42))],
            ),
        ],
        ..Fixture::default()
    });
}

#[test]
fn strip_vlan_removes_the_outer_tag() {
    run(Fixture {
        name: "strip_vlan",
        rules: &["in_port=1,actions=strip_vlan,output:2"],
        steps: vec![
            step(1, tagged(&udp(), 0x8100, 100), vec![(2, udp())]),
            step(1, udp(), vec![(2, udp())]),
            step(
                1,
                tagged(&tagged(&udp(), 0x8100, 100), 0x88a8, 5),
                vec![(2, tagged(&udp(), 0x8100, 100))],
            ),
        ],
        ..Fixture::default()
    });
}

#[test]
fn push_vlan_88a8() {
    run(Fixture {
        name: "push_vlan",
        rules: &["in_port=1,actions=push_vlan:0x88a8,output:2"],
        steps: vec![
            step(1, udp(), vec![(2, tagged(&udp(), 0x88a8, 0))]),
            step(
                1,
                tagged(&udp(), 0x8100, 100),
                vec![(2, tagged(&tagged(&udp(), 0x8100, 100), 0x88a8, 0))],
            ),
        ],
        ..Fixture::default()
    });
}

#[test]
fn actions_apply_in_order_between_outputs() {
    let t = tagged(&udp(), 0x8100, 100);
    run(Fixture {
        name: "in_order",
        rules: &[
            "in_port=1,actions=output:2,mod_dl_dst:aa:bb:cc:dd:ee:02,output:3",
            "in_port=4,actions=output:2,strip_vlan,output:3,push_vlan:0x88a8,output:1",
        ],
        steps: vec![
            step(1, udp(), vec![(2, udp()), (3, with_dst(&udp(), MAC_Y))]),
            step(
                4,
                t.clone(),
                vec![(2, t), (3, udp()), (1, tagged(&udp(), 0x88a8, 0))],
            ),
        ],
        ..Fixture::default()
    });
}

#[test]
fn output_to_a_missing_port_is_a_no_port_drop() {
    run(Fixture {
        name: "no_port",
        rules: &[
            "in_port=1,actions=output:9",
            "in_port=2,actions=output:9,output:3",
        ],
        steps: vec![
            dropped(1, udp(), DropReason::NoPort),
            // The copy to 9 is dropped, the packet still reaches 3.
            Step {
                in_port: 2,
                frame: udp(),
                out: vec![(3, udp())],
                drops: vec![(2, Dir::Rx, DropReason::NoPort)],
            },
        ],
        ..Fixture::default()
    });
}

#[test]
fn runt_frames_are_runt_drops() {
    run(Fixture {
        name: "runt",
        rules: &["actions=output:2"],
        steps: vec![
            dropped(1, vec![0x02; 10], DropReason::Runt),
            dropped(1, udp()[..13].to_vec(), DropReason::Runt),
            dropped(1, Vec::new(), DropReason::Runt),
            // Exactly an Ethernet header is not a runt.
            step(1, udp()[..14].to_vec(), vec![(2, udp()[..14].to_vec())]),
        ],
        ..Fixture::default()
    });
}

#[test]
fn frames_larger_than_the_output_accepts_are_too_big_drops() {
    // Port 2 accepts up to 62 B: the 60 B frame fits, the tagged 64 B one does not.
    run(Fixture {
        name: "too_big",
        rules: &["in_port=1,actions=output:2"],
        max_frame: &[(2, 62)],
        steps: vec![
            step(1, udp(), vec![(2, udp())]),
            Step {
                in_port: 1,
                frame: tagged(&udp(), 0x8100, 5),
                out: vec![],
                drops: vec![(2, Dir::Tx, DropReason::TooBig)],
            },
        ],
        ..Fixture::default()
    });
}

/// A packet whose last output fails (TooBig on the tx side, NoPort on the
/// rx side) must be counted once, as the single-output fast path does.
#[test]
fn a_failed_last_output_is_counted_once() {
    run(Fixture {
        name: "failed_last_output",
        rules: &[
            "in_port=1,actions=mod_vlan_vid:5,output:2",
            "in_port=3,actions=mod_dl_src:aa:bb:cc:dd:ee:01,output:9",
        ],
        max_frame: &[(2, 62)],
        steps: vec![
            Step {
                in_port: 1,
                frame: udp(),
                out: vec![],
                drops: vec![(2, Dir::Tx, DropReason::TooBig)],
            },
            dropped(3, udp(), DropReason::NoPort),
        ],
        ..Fixture::default()
    });
}

#[test]
fn normal_floods_then_forwards_to_the_learned_port() {
    let a_to_b = udp_mac(MAC_A, MAC_B);
    let b_to_a = udp_mac(MAC_B, MAC_A);
    let b_bcast = udp_mac(MAC_B, BROADCAST);
    let a_to_a = udp_mac(MAC_A, MAC_A);
    run(Fixture {
        name: "normal",
        rules: &["actions=normal"],
        steps: vec![
            // B unknown: flood to every port but the in_port.
            step(
                1,
                a_to_b.clone(),
                vec![
                    (2, a_to_b.clone()),
                    (3, a_to_b.clone()),
                    (4, a_to_b.clone()),
                ],
            ),
            // A was learned on 1: only there.
            step(2, b_to_a.clone(), vec![(1, b_to_a)]),
            // B was learned on 2: only there.
            step(1, a_to_b.clone(), vec![(2, a_to_b)]),
            // Broadcast always floods.
            step(
                2,
                b_bcast.clone(),
                vec![(1, b_bcast.clone()), (3, b_bcast.clone()), (4, b_bcast)],
            ),
            // Destination learned on the in_port itself: nothing to do.
            dropped(1, a_to_a, DropReason::Action),
        ],
        ..Fixture::default()
    });
}

/// Frames longer than a split packet's head (split in the split modes):
/// single output, several outputs sharing one tail, a tag pushed and
/// popped on the head, a flood, a drop and an output too small — every
/// output gets the whole frame, byte-exact, whatever it takes.
#[test]
fn long_frames_reach_every_output_whole() {
    let long = Udp::default().build_long(1400);
    let bcast = Udp {
        dst_mac: BROADCAST,
        ..Udp::default()
    }
    .build_long(1400);
    let tagged_long = tagged(&long, 0x8100, 7);
    run(Fixture {
        name: "long_frames",
        groups: &[],
        rules: &[
            "in_port=1,actions=output:2",
            "in_port=2,actions=output:1,output:3,output:5",
            "in_port=3,actions=mod_vlan_vid:7,output:4",
            "in_port=4,actions=strip_vlan,output:1",
            "in_port=5,dl_dst=ff:ff:ff:ff:ff:ff,actions=normal",
            "in_port=5,actions=drop",
        ],
        ports: &[1, 2, 3, 4, 5],
        max_frame: &[(5, 1000)],
        steps: vec![
            step(1, long.clone(), vec![(2, long.clone())]),
            Step {
                in_port: 2,
                frame: long.clone(),
                out: vec![(1, long.clone()), (3, long.clone())],
                drops: vec![(5, Dir::Tx, DropReason::TooBig)],
            },
            step(3, long.clone(), vec![(4, tagged_long.clone())]),
            step(4, tagged_long, vec![(1, long.clone())]),
            step(
                5,
                bcast.clone(),
                vec![
                    (1, bcast.clone()),
                    (2, bcast.clone()),
                    (3, bcast.clone()),
                    (4, bcast),
                ],
            ),
            dropped(5, long, DropReason::Action),
        ],
    });
}

// ---------------------------------------------------------------------------
// Whole batches: what one-frame steps cannot show.

/// More packets for one output than a tx batch holds: the fabric sends a
/// full batch early and keeps filling; nothing is lost or reordered.
#[test]
fn more_than_a_batch_for_one_output_arrives_in_order() {
    let f = Fixture {
        name: "overfull_output",
        rules: &["in_port=1,actions=output:2,output:2,output:2"],
        ..Fixture::default()
    };
    let frames: Vec<Vec<u8>> = (0..32u16)
        .map(|i| {
            Udp {
                sport: 1000 + i,
                ..Udp::default()
            }
            .build()
        })
        .collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    for emc in [1024, 0] {
        let mut h = Harness::new(&f, emc, Mode::Whole);
        h.feed(1, &refs);
        let got: Vec<Vec<u8>> = h.take_log().into_iter().map(|(_, b)| b).collect();
        let want: Vec<Vec<u8>> = frames
            .iter()
            .flat_map(|f| [f.clone(), f.clone(), f.clone()])
            .collect();
        assert_eq!(got.len(), 96, "emc {emc}");
        assert!(got == want, "emc {emc}: frames out of order or altered");
        assert_eq!(h.counters()[&(2, Dir::Tx)].packets, 96, "emc {emc}");
        assert_eq!(h.counters()[&(2, Dir::Tx)].total_drops(), 0, "emc {emc}");
        h.finish(f.name);
    }
}
