//! Message-order conformance: the sequences real vhost-user frontends
//! send, replayed byte by byte (with memfds and eventfds as SCM_RIGHTS)
//! against a server-mode port, each followed by traffic through the rings
//! it set up. A new frontend quirk is a new row.
//!
//! Where each sequence comes from is noted on its row: recorded from the
//! peer with the port's debug log (`RUST_LOG=nfv_vhost=debug`, one line per
//! message) or read from the frontend's source.

mod common;

use std::io::{IoSlice, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use common::*;
use nfv_mem::Batch;
use nfv_vhost::VhostUserMode::Server;
use nfv_vhost::features;
use nfv_vhost::message::{HEADER_LEN, code, encode};
use nfv_virtio::layout::{VHOST_USER_F_PROTOCOL_FEATURES, VIRTIO_NET_F_MRG_RXBUF};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use vmm_sys_util::eventfd::EventFd;

/// Which features SET_FEATURES acks.
#[derive(Clone, Copy, Debug)]
enum Ack {
    /// Everything offered the test driver knows.
    All,
    /// All but MRG_RXBUF.
    NoMrg,
    /// A frontend that does not speak PROTOCOL_FEATURES.
    Legacy,
}

/// One step of a row: a message the frontend sends (and the reply it
/// reads), or a check.
#[derive(Clone, Copy, Debug)]
enum Step {
    GetFeatures,
    GetProtocolFeatures,
    SetProtocolFeatures,
    GetQueueNum,
    SetOwner,
    ResetOwner,
    SetFeatures(Ack),
    MemTable,
    Call(usize),
    Err(usize),
    Kick(usize),
    Num(usize),
    /// SET_VRING_BASE with the position the last GET_VRING_BASE of this
    /// vring returned (0 before any).
    Base(usize),
    Addr(usize),
    Enable(usize, bool),
    GetBase(usize),
    /// Check: this many queue pairs run.
    Pairs(usize),
    /// Check: a frame goes guest → switch → guest on pair 0 (and on every
    /// running pair with `Pairs`).
    Traffic(usize),
}

use Step::*;

/// When the frontend sets NEED_REPLY (after REPLY_ACK is negotiated).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Acks {
    Never,
    /// QEMU: on SET_MEM_TABLE.
    MemTable,
    /// rust-vmm frontends (cloud-hypervisor): on every message.
    Always,
}

struct Row {
    name: &'static str,
    source: &'static str,
    pairs: usize,
    acks: Acks,
    steps: Vec<Step>,
}

/// Ring set-up of vring `i` in QEMU's order (vhost_virtqueue_start).
fn qemu_vring(i: usize) -> [Step; 5] {
    [Num(i), Base(i), Addr(i), Kick(i), Call(i)]
}

fn qemu_driver_start(pairs: usize) -> Vec<Step> {
    let mut v = vec![SetFeatures(Ack::All), MemTable];
    for i in 0..2 * pairs {
        v.extend(qemu_vring(i));
    }
    for i in 0..2 * pairs {
        v.push(Enable(i, true));
    }
    v
}

/// What QEMU sends when its vhost-user netdev starts (before the guest
/// driver runs): note SET_VRING_ENABLE before any SET_FEATURES.
fn qemu_netdev_start(pairs: usize) -> Vec<Step> {
    let mut v = vec![
        GetFeatures,
        GetProtocolFeatures,
        SetProtocolFeatures,
        GetQueueNum,
        SetOwner,
        GetFeatures,
    ];
    for i in 0..2 * pairs {
        v.extend([Call(i), Err(i)]);
    }
    for i in 0..2 * pairs {
        v.push(Enable(i, i < 2));
    }
    v
}

fn rows() -> Vec<Row> {
    let qemu = |steps: Vec<Vec<Step>>| steps.concat();
    let stop = |n: usize| (0..n).map(GetBase).collect::<Vec<_>>();
    let disable_then_stop = |n: usize| {
        let mut v: Vec<Step> = (0..n).map(|i| Enable(i, false)).collect();
        v.push(Pairs(0));
        v.extend((0..n).map(GetBase));
        v
    };
    let ch_setup = |pairs: usize, reconnect: bool| {
        let mut v = vec![SetOwner, GetFeatures];
        if !reconnect {
            v.push(GetProtocolFeatures);
        }
        v.extend([SetProtocolFeatures, SetFeatures(Ack::All), MemTable]);
        v.extend((0..2 * pairs).map(Num));
        for i in 0..2 * pairs {
            v.extend([Addr(i), Base(i), Call(i), Kick(i)]);
        }
        v.extend((0..2 * pairs).map(|i| Enable(i, true)));
        v
    };
    vec![
        Row {
            name: "qemu netdev start, then guest driver",
            source: "recorded: Debian QEMU 7.2 netdev start (port debug log), enable before SET_FEATURES",
            pairs: 1,
            acks: Acks::MemTable,
            steps: qemu(vec![
                qemu_netdev_start(1),
                qemu_driver_start(1),
                vec![Pairs(1), Traffic(1)],
            ]),
        },
        Row {
            name: "qemu guest driver reload (rmmod/modprobe)",
            source: "QEMU: GET_VRING_BASE per vring, then the driver start again",
            pairs: 1,
            acks: Acks::MemTable,
            steps: qemu(vec![
                qemu_netdev_start(1),
                qemu_driver_start(1),
                vec![Traffic(1)],
                stop(2),
                vec![Pairs(0), GetFeatures],
                qemu_driver_start(1),
                vec![Pairs(1), Traffic(1)],
            ]),
        },
        Row {
            name: "disable before GET_VRING_BASE",
            source: "QEMU 8+ and DPDK: SET_VRING_ENABLE(0) then GET_VRING_BASE",
            pairs: 1,
            acks: Acks::MemTable,
            steps: qemu(vec![
                qemu_netdev_start(1),
                qemu_driver_start(1),
                vec![Traffic(1)],
                disable_then_stop(2),
                qemu_driver_start(1),
                vec![Pairs(1), Traffic(1)],
            ]),
        },
        Row {
            name: "qemu two queue pairs, second enabled later",
            source: "QEMU queues=2: pair 1 enabled when the guest runs ethtool -L combined 2",
            pairs: 2,
            acks: Acks::MemTable,
            steps: qemu(vec![
                qemu_netdev_start(2),
                vec![SetFeatures(Ack::All), MemTable],
                (0..4).flat_map(qemu_vring).collect(),
                vec![
                    Enable(0, true),
                    Enable(1, true),
                    Enable(2, false),
                    Enable(3, false),
                ],
                vec![
                    Pairs(1),
                    Traffic(1),
                    Enable(2, true),
                    Enable(3, true),
                    Pairs(2),
                    Traffic(2),
                ],
            ]),
        },
        Row {
            name: "features renegotiated (mrg off, then on)",
            source: "a guest driver that reloads with other features",
            pairs: 1,
            acks: Acks::MemTable,
            steps: qemu(vec![
                qemu_netdev_start(1),
                vec![SetFeatures(Ack::NoMrg), GetFeatures],
                qemu_driver_start(1),
                vec![Pairs(1), Traffic(1)],
            ]),
        },
        Row {
            name: "memory table re-sent while rings run",
            source: "QEMU sends a new table when the guest's memory layout changes",
            pairs: 1,
            acks: Acks::MemTable,
            steps: qemu(vec![
                qemu_netdev_start(1),
                qemu_driver_start(1),
                vec![Traffic(1), MemTable, Traffic(1)],
            ]),
        },
        Row {
            name: "cloud-hypervisor / rust-vmm frontend",
            source: "cloud-hypervisor vu_common_ctrl.rs: NUM for all vrings first, NEED_REPLY on all",
            pairs: 1,
            acks: Acks::Always,
            steps: qemu(vec![ch_setup(1, false), vec![Pairs(1), Traffic(1)]]),
        },
        Row {
            name: "cloud-hypervisor pause/resume",
            source: "cloud-hypervisor: SET_VRING_ENABLE(false) then (true), rings kept",
            pairs: 1,
            acks: Acks::Always,
            steps: qemu(vec![
                ch_setup(1, false),
                vec![Traffic(1), Enable(0, false), Enable(1, false), Pairs(0)],
                vec![Enable(0, true), Enable(1, true), Pairs(1), Traffic(1)],
            ]),
        },
        Row {
            name: "dpdk virtio-user",
            source: "recorded: DPDK 22.11 testpmd virtio-user (port debug log): every CALL first, \
                     NEED_REPLY on SET_MEM_TABLE, NUM/BASE/ADDR/KICK per vring, enables last",
            pairs: 1,
            acks: Acks::MemTable,
            steps: qemu(vec![
                vec![
                    SetOwner,
                    GetFeatures,
                    GetProtocolFeatures,
                    SetProtocolFeatures,
                ],
                vec![Call(0), Call(1), SetFeatures(Ack::All), MemTable],
                (0..2)
                    .flat_map(|i| [Num(i), Base(i), Addr(i), Kick(i)])
                    .collect(),
                vec![Enable(0, true), Enable(1, true), Pairs(1), Traffic(1)],
            ]),
        },
        Row {
            name: "legacy frontend without PROTOCOL_FEATURES",
            source: "vhost-user spec: rings start enabled when PROTOCOL_FEATURES is not acked",
            pairs: 1,
            acks: Acks::Never,
            steps: qemu(vec![
                vec![SetOwner, GetFeatures, SetFeatures(Ack::Legacy), MemTable],
                (0..2).flat_map(qemu_vring).collect(),
                vec![Pairs(1), Traffic(1)],
            ]),
        },
        Row {
            name: "RESET_OWNER, then a full set-up again",
            source: "older QEMU on device reset",
            pairs: 1,
            acks: Acks::MemTable,
            steps: qemu(vec![
                qemu_netdev_start(1),
                qemu_driver_start(1),
                vec![Traffic(1), GetBase(0), GetBase(1), ResetOwner, Pairs(0)],
                qemu_netdev_start(1),
                qemu_driver_start(1),
                vec![Pairs(1), Traffic(1)],
            ]),
        },
    ]
}

/// A frontend that writes messages itself.
struct RawFrontend {
    s: UnixStream,
    reply_ack: bool,
    acks: Acks,
    offered: u64,
    fds: Vec<EventFd>,
    bases: [u32; 8],
}

impl RawFrontend {
    fn send(&mut self, request: u32, payload: &[u8], fds: &[RawFd]) {
        let need = self.reply_ack
            && match self.acks {
                Acks::Never => false,
                Acks::MemTable => request == code::SET_MEM_TABLE,
                Acks::Always => true,
            };
        let bytes = encode(request, need, payload);
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &cmsg };
        let n = sendmsg::<()>(
            self.s.as_raw_fd(),
            &[IoSlice::new(&bytes)],
            cmsgs,
            MsgFlags::empty(),
            None,
        )
        .expect("sendmsg");
        assert_eq!(n, bytes.len());
        let own_reply = matches!(
            request,
            code::GET_FEATURES | code::GET_PROTOCOL_FEATURES | code::GET_QUEUE_NUM
        ) || request == code::GET_VRING_BASE;
        if need && !own_reply {
            let ack = self.reply(request);
            assert_eq!(ack, 0u64.to_le_bytes(), "{request}: NACK");
        }
    }

    fn reply(&mut self, request: u32) -> Vec<u8> {
        let mut h = [0u8; HEADER_LEN];
        self.s.read_exact(&mut h).expect("reply header");
        assert_eq!(&h[..4], &request.to_le_bytes(), "reply to another request");
        let size = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
        let mut p = vec![0u8; size];
        self.s.read_exact(&mut p).expect("reply payload");
        p
    }

    fn get_u64(&mut self, request: u32) -> u64 {
        self.send(request, &[], &[]);
        u64::from_le_bytes(self.reply(request)[..8].try_into().unwrap())
    }

    fn u64_msg(&mut self, request: u32, v: u64) {
        self.send(request, &v.to_le_bytes(), &[]);
    }

    fn state(&mut self, request: u32, index: usize, num: u32) {
        let mut p = [0u8; 8];
        p[..4].copy_from_slice(&(index as u32).to_le_bytes());
        p[4..].copy_from_slice(&num.to_le_bytes());
        self.send(request, &p, &[]);
    }

    fn vring_fd(&mut self, request: u32, index: usize) {
        let e = EventFd::new(libc::EFD_NONBLOCK).unwrap();
        self.send(request, &(index as u64).to_le_bytes(), &[e.as_raw_fd()]);
        self.fds.push(e);
    }
}

fn acked(offered: u64, ack: Ack) -> u64 {
    let all = guest_features(offered);
    match ack {
        Ack::All => all,
        Ack::NoMrg => all & !VIRTIO_NET_F_MRG_RXBUF,
        Ack::Legacy => all & !VHOST_USER_F_PROTOCOL_FEATURES,
    }
}

/// The features the row's driver rings run with: its last SET_FEATURES.
fn final_features(row: &Row, offered: u64) -> u64 {
    row.steps
        .iter()
        .rev()
        .find_map(|s| match s {
            SetFeatures(a) => Some(acked(offered, *a)),
            _ => None,
        })
        .unwrap_or(0)
}

fn run_row(row: &Row, n: usize) {
    let tag = format!("conf{n}");
    let path = sock(&tag);
    // One PMD tx queue per pair: with every pair running, tx queue p
    // sends into pair p.
    let mut sw = SwitchSide::open(&tag, &cfg(&path, Server, row.pairs, true), row.pairs);
    let offered = features::offered(true, true, true, nfv_vhost::Offloads::ALL);
    let opts = GuestOpts {
        pairs: row.pairs,
        ..GuestOpts::default()
    };
    let mut g = GuestMem::new(&tag, &opts, final_features(row, offered));
    let s = raw_stream(&path);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut fe = RawFrontend {
        s,
        reply_ack: false,
        acks: row.acks,
        offered,
        fds: Vec::new(),
        bases: [0; 8],
    };
    let mut seq = 0u32;
    for (k, step) in row.steps.iter().enumerate() {
        let ctx = format!("row '{}' step {k} {step:?}", row.name);
        match *step {
            GetFeatures => assert_eq!(fe.get_u64(code::GET_FEATURES), fe.offered, "{ctx}"),
            GetProtocolFeatures => {
                let pf = fe.get_u64(code::GET_PROTOCOL_FEATURES);
                assert_eq!(pf, features::protocol_offered().bits(), "{ctx}");
            }
            SetProtocolFeatures => {
                fe.u64_msg(
                    code::SET_PROTOCOL_FEATURES,
                    features::protocol_offered().bits(),
                );
                fe.reply_ack = true;
            }
            GetQueueNum => assert_eq!(fe.get_u64(code::GET_QUEUE_NUM), row.pairs as u64),
            SetOwner => fe.send(code::SET_OWNER, &[], &[]),
            ResetOwner => fe.send(code::RESET_OWNER, &[], &[]),
            SetFeatures(a) => fe.u64_msg(code::SET_FEATURES, acked(offered, a)),
            MemTable => {
                let regions = g.regions();
                let mut p = vec![0u8; 8];
                p[0] = regions.len() as u8;
                for (addr, len, _) in regions {
                    for v in [addr, len, addr, 0] {
                        p.extend_from_slice(&v.to_le_bytes());
                    }
                }
                let fds: Vec<RawFd> = regions.iter().map(|r| r.2).collect();
                fe.send(code::SET_MEM_TABLE, &p, &fds);
            }
            Call(i) => fe.vring_fd(code::SET_VRING_CALL, i),
            Err(i) => fe.vring_fd(code::SET_VRING_ERR, i),
            Kick(i) => fe.vring_fd(code::SET_VRING_KICK, i),
            Num(i) => fe.state(code::SET_VRING_NUM, i, opts.size as u32),
            Base(i) => fe.state(code::SET_VRING_BASE, i, fe.bases[i]),
            Addr(i) => {
                let a = g.ring_addrs[i];
                let mut p = Vec::new();
                p.extend_from_slice(&(i as u32).to_le_bytes());
                p.extend_from_slice(&0u32.to_le_bytes());
                for v in [a.desc, a.used, a.avail, 0] {
                    p.extend_from_slice(&v.to_le_bytes());
                }
                fe.send(code::SET_VRING_ADDR, &p, &[]);
            }
            Enable(i, on) => fe.state(code::SET_VRING_ENABLE, i, on as u32),
            GetBase(i) => {
                fe.state(code::GET_VRING_BASE, i, 0);
                let r = fe.reply(code::GET_VRING_BASE);
                assert_eq!(r[..4], (i as u32).to_le_bytes(), "{ctx}");
                fe.bases[i] = u32::from_le_bytes(r[4..8].try_into().unwrap());
            }
            Pairs(n) => wait_status(&sw.port, &ctx, |s| s.pairs_enabled == n),
            Traffic(pairs) => {
                for p in 0..pairs {
                    seq += 1;
                    guest_round_trip(&mut g, &mut sw, p, &frame(200 + seq as usize, seq), &ctx);
                }
            }
        }
    }
    let st = sw.port.status();
    assert_eq!(st.protocol_errors, 0, "row '{}': {st:#?}", row.name);
    assert_eq!(st.negotiation_errors, 0, "row '{}'", row.name);
    assert_eq!(st.disconnects, 0, "row '{}'", row.name);
}

/// One frame from the guest's TX virtqueue of pair `p` to the switch, and
/// back through the switch's tx queue into the guest's RX virtqueue.
fn guest_round_trip(g: &mut GuestMem, sw: &mut SwitchSide, p: usize, f: &[u8], ctx: &str) {
    let mut b = fill(&mut g.cache, &[f.to_vec()]);
    assert_eq!(
        g.tx[p].transmit_burst(&mut b, &mut g.cache),
        1,
        "{ctx}: guest tx"
    );
    g.cache.free_batch(&mut b);
    let got = sw.recv(p, 1);
    assert_eq!(got, vec![f.to_vec()], "{ctx}: switch rx");
    g.rx[p].refill_rx(&mut g.cache);
    let mut back = Vec::new();
    let mut sent = 0;
    nfv_testutil::wait_until(WAIT, || {
        if sent == 0 {
            sent = sw.send(p, &got);
        }
        let mut rb = Batch::new();
        g.rx[p].receive_burst(&mut rb, &mut g.cache);
        back.extend(drain(&mut g.cache, &mut rb));
        g.rx[p].refill_rx(&mut g.cache);
        !back.is_empty()
    });
    assert_eq!(back, vec![f.to_vec()], "{ctx}: guest rx");
}

#[test]
fn frontend_message_orders() {
    let rows = rows();
    for (n, row) in rows.iter().enumerate() {
        eprintln!("row {n}: {} ({})", row.name, row.source);
        run_row(row, n);
    }
    eprintln!("{} frontend orders passed", rows.len());
}
