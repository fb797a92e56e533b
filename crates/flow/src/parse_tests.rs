//! Tests of [`super`] (the parser) and of round trips through
//! [`crate::format`].

use super::*;
use crate::action::Action::{self, *};
use crate::fields::PROTOCOLS;
use crate::key::{VLAN_PRESENT, mac_from_u64, mac_to_u64};
use crate::rule::Timeouts;
use crate::values::prefix_mask;
use proptest::prelude::*;

/// Builds an expected match field by field (full masks unless given).
#[derive(Clone, Copy)]
struct M(Match);

impl M {
    fn any() -> M {
        M(Match::ANY)
    }
    fn in_port(mut self, p: u16) -> M {
        self.0.key.set_in_port(p);
        self.0.mask.set_in_port(0xffff);
        self
    }
    fn dl_type(mut self, t: u16) -> M {
        self.0.key.set_dl_type(t);
        self.0.mask.set_dl_type(0xffff);
        self
    }
    fn nw_proto(mut self, p: u8) -> M {
        self.0.key.set_nw_proto(p);
        self.0.mask.set_nw_proto(0xff);
        self
    }
    fn ip(self) -> M {
        self.dl_type(0x0800)
    }
    fn dl_src(mut self, v: [u8; 6], m: [u8; 6]) -> M {
        self.0.key.set_dl_src(v);
        self.0.mask.set_dl_src(m);
        self
    }
    fn dl_dst(mut self, v: [u8; 6], m: [u8; 6]) -> M {
        self.0.key.set_dl_dst(v);
        self.0.mask.set_dl_dst(m);
        self
    }
    fn vlan(mut self, v: u16, m: u16) -> M {
        self.0.key.set_vlan_tci(v);
        self.0.mask.set_vlan_tci(m);
        self
    }
    fn nw_src(mut self, a: [u8; 4], m: u32) -> M {
        self.0.key.set_nw_src(u32::from_be_bytes(a));
        self.0.mask.set_nw_src(m);
        self
    }
    fn nw_dst(mut self, a: [u8; 4], m: u32) -> M {
        self.0.key.set_nw_dst(u32::from_be_bytes(a));
        self.0.mask.set_nw_dst(m);
        self
    }
    fn tp_src(mut self, v: u16, m: u16) -> M {
        self.0.key.set_tp_src(v);
        self.0.mask.set_tp_src(m);
        self
    }
    fn tp_dst(mut self, v: u16, m: u16) -> M {
        self.0.key.set_tp_dst(v);
        self.0.mask.set_tp_dst(m);
        self
    }
    fn done(self) -> Match {
        Match {
            key: self.0.key.masked(&self.0.mask),
            mask: self.0.mask,
        }
    }
}

/// A rule's spec: its match in table 0 (every rule matches its table).
fn spec(priority: u16, cookie: u64, m: M, actions: &[Action]) -> FlowSpec {
    let mut m = m;
    m.0.mask.set_table(0xff);
    FlowSpec {
        priority,
        cookie,
        timeouts: Default::default(),
        matches: m.done(),
        tun_id: None,
        actions: actions.to_vec(),
    }
}

const D: u16 = DEFAULT_PRIORITY;
const ALL: u16 = 0xffff;
const MAC_ALL: [u8; 6] = [0xff; 6];
const VP: u16 = VLAN_PRESENT;

fn good_cases() -> Vec<(&'static str, FlowSpec)> {
    let any = M::any();
    let tcp = M::any().ip().nw_proto(6);
    let udp = M::any().ip().nw_proto(17);
    vec![
        ("actions=drop", spec(D, 0, any, &[])),
        ("actions=", spec(D, 0, any, &[])),
        (
            "priority=10,in_port=1,actions=output:2",
            spec(10, 0, any.in_port(1), &[Output(2)]),
        ),
        (
            "priority=0 in_port=65279 actions=1",
            spec(0, 0, any.in_port(65279), &[Output(1)]),
        ),
        (
            "priority=65535,in_port=0x10,actions=drop",
            spec(65535, 0, any.in_port(16), &[]),
        ),
        (
            "  priority = 7 , in_port = 3 , actions = output:1 , output:2 ",
            spec(7, 0, any.in_port(3), &[Output(1), Output(2)]),
        ),
        (
            "in_port=1\tactions=output:1 output:2",
            spec(D, 0, any.in_port(1), &[Output(1), Output(2)]),
        ),
        (
            "cookie=0xdeadbeef,actions=normal",
            spec(D, 0xdead_beef, any, &[Normal]),
        ),
        ("cookie=42,actions=NORMAL", spec(D, 42, any, &[Normal])),
        (
            "idle_timeout=10,hard_timeout=0x3c,actions=drop",
            FlowSpec {
                timeouts: Timeouts { idle: 10, hard: 60 },
                ..spec(D, 0, any, &[])
            },
        ),
        (
            "hard_timeout=65535,in_port=1,actions=output:2",
            FlowSpec {
                timeouts: Timeouts {
                    idle: 0,
                    hard: 65535,
                },
                ..spec(D, 0, any.in_port(1), &[Output(2)])
            },
        ),
        ("idle_timeout=0,actions=drop", spec(D, 0, any, &[])),
        ("table=0,actions=drop", spec(D, 0, any, &[])),
        (
            "dl_src=00:11:22:33:44:55,dl_dst=ff:ff:ff:ff:ff:ff,actions=drop",
            spec(
                D,
                0,
                any.dl_src([0, 0x11, 0x22, 0x33, 0x44, 0x55], MAC_ALL)
                    .dl_dst(MAC_ALL, MAC_ALL),
                &[],
            ),
        ),
        (
            "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,actions=drop",
            spec(
                D,
                0,
                any.dl_dst([1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]),
                &[],
            ),
        ),
        (
            "dl_src=aa:bb:cc:dd:ee:ff/ff:ff:ff:00:00:00,actions=drop",
            spec(
                D,
                0,
                any.dl_src([0xaa, 0xbb, 0xcc, 0, 0, 0], [0xff, 0xff, 0xff, 0, 0, 0]),
                &[],
            ),
        ),
        ("dl_type=0x0800,actions=drop", spec(D, 0, any.ip(), &[])),
        (
            "dl_type=2054,actions=drop",
            spec(D, 0, any.dl_type(0x0806), &[]),
        ),
        (
            "dl_type=0x88cc,actions=drop",
            spec(D, 0, any.dl_type(0x88cc), &[]),
        ),
        ("ip,actions=drop", spec(D, 0, any.ip(), &[])),
        ("arp,actions=drop", spec(D, 0, any.dl_type(0x0806), &[])),
        ("icmp,actions=drop", spec(D, 0, any.ip().nw_proto(1), &[])),
        ("tcp,actions=drop", spec(D, 0, tcp, &[])),
        ("udp,actions=drop", spec(D, 0, udp, &[])),
        ("sctp,actions=drop", spec(D, 0, any.ip().nw_proto(132), &[])),
        (
            "dl_vlan=100,actions=output:3",
            spec(D, 0, any.vlan(VP | 100, VP | 0xfff), &[Output(3)]),
        ),
        (
            "dl_vlan=0,actions=drop",
            spec(D, 0, any.vlan(VP, VP | 0xfff), &[]),
        ),
        (
            "dl_vlan=0xffff,actions=drop",
            spec(D, 0, any.vlan(0, VP), &[]),
        ),
        (
            "dl_vlan=5,dl_vlan_pcp=3,actions=drop",
            spec(D, 0, any.vlan(VP | 3 << 13 | 5, VP | 0xefff), &[]),
        ),
        (
            "dl_vlan_pcp=7,actions=drop",
            spec(D, 0, any.vlan(VP | 7 << 13, VP | 0xe000), &[]),
        ),
        (
            "vlan_tci=0x1000/0x1000,actions=drop",
            spec(D, 0, any.vlan(VP, VP), &[]),
        ),
        ("vlan_tci=0,actions=drop", spec(D, 0, any.vlan(0, ALL), &[])),
        (
            "ip,nw_src=10.0.0.1,nw_dst=192.168.0.0/16,actions=drop",
            spec(
                D,
                0,
                any.ip()
                    .nw_src([10, 0, 0, 1], !0)
                    .nw_dst([192, 168, 0, 0], 0xffff_0000),
                &[],
            ),
        ),
        (
            "ip,nw_dst=10.1.2.3/8,actions=drop",
            spec(D, 0, any.ip().nw_dst([10, 0, 0, 0], 0xff00_0000), &[]),
        ),
        (
            "ip,nw_dst=10.1.2.3/255.255.0.0,actions=drop",
            spec(D, 0, any.ip().nw_dst([10, 1, 0, 0], 0xffff_0000), &[]),
        ),
        (
            "ip,nw_src=1.2.3.4/0,actions=drop",
            spec(D, 0, any.ip(), &[]),
        ),
        (
            "ip,nw_src=1.2.3.4/32,actions=drop",
            spec(D, 0, any.ip().nw_src([1, 2, 3, 4], !0), &[]),
        ),
        (
            "arp,nw_dst=10.0.0.1,nw_proto=1,actions=normal",
            spec(
                D,
                0,
                any.dl_type(0x0806).nw_dst([10, 0, 0, 1], !0).nw_proto(1),
                &[Normal],
            ),
        ),
        (
            "ip,nw_proto=89,actions=drop",
            spec(D, 0, any.ip().nw_proto(89), &[]),
        ),
        (
            "tcp,tp_dst=80,actions=output:2",
            spec(D, 0, tcp.tp_dst(80, ALL), &[Output(2)]),
        ),
        (
            "udp,tp_src=53,tp_dst=0x35,actions=drop",
            spec(D, 0, udp.tp_src(53, ALL).tp_dst(53, ALL), &[]),
        ),
        (
            "sctp,tp_dst=9,actions=drop",
            spec(D, 0, any.ip().nw_proto(132).tp_dst(9, ALL), &[]),
        ),
        (
            "icmp,tp_src=8,tp_dst=0,actions=drop",
            spec(
                D,
                0,
                any.ip().nw_proto(1).tp_src(8, ALL).tp_dst(0, ALL),
                &[],
            ),
        ),
        (
            "tcp,tp_dst=0x1234/0xf000,actions=drop",
            spec(D, 0, tcp.tp_dst(0x1000, 0xf000), &[]),
        ),
        (
            "dl_type=0x0800,nw_proto=6,tp_dst=22,actions=drop",
            spec(D, 0, tcp.tp_dst(22, ALL), &[]),
        ),
        ("tcp,nw_proto=6,ip,actions=drop", spec(D, 0, tcp, &[])),
        (
            "nw_dst=10.0.0.0/8,ip,actions=drop",
            spec(D, 0, any.ip().nw_dst([10, 0, 0, 0], 0xff00_0000), &[]),
        ),
        (
            "actions=mod_dl_src:00:00:00:00:00:01,mod_dl_dst:2:0:0:0:0:2,output:3",
            spec(
                D,
                0,
                any,
                &[
                    SetDlSrc([0, 0, 0, 0, 0, 1]),
                    SetDlDst([2, 0, 0, 0, 0, 2]),
                    Output(3),
                ],
            ),
        ),
        (
            "actions=mod_vlan_vid:4095,push_vlan:0x88a8,push_vlan:33024,strip_vlan,normal",
            spec(
                D,
                0,
                any,
                &[
                    SetVlanVid(4095),
                    PushVlan(0x88a8),
                    PushVlan(0x8100),
                    StripVlan,
                    Normal,
                ],
            ),
        ),
        (
            "priority=100,cookie=0x1,in_port=2,dl_vlan=10,udp,nw_src=10.0.0.0/24,tp_dst=4789,\
             actions=strip_vlan,mod_dl_dst:02:00:00:00:00:09,output:4",
            spec(
                100,
                1,
                udp.in_port(2)
                    .vlan(VP | 10, VP | 0xfff)
                    .nw_src([10, 0, 0, 0], 0xffff_ff00)
                    .tp_dst(4789, ALL),
                &[StripVlan, SetDlDst([2, 0, 0, 0, 0, 9]), Output(4)],
            ),
        ),
        (
            "tun_id=100,tcp,actions=set_tunnel:0x65,output:3",
            FlowSpec {
                tun_id: Some(100),
                ..spec(
                    D,
                    0,
                    M::any().ip().nw_proto(6),
                    &[SetTunnel(0x65), Output(3)],
                )
            },
        ),
        (
            "tun_id=0xffffff actions=SET_FIELD:7->tun_id,output:2,set_field:0->tun_id,output:5",
            FlowSpec {
                tun_id: Some(0xff_ffff),
                ..spec(
                    D,
                    0,
                    M::any(),
                    &[SetTunnel(7), Output(2), SetTunnel(0), Output(5)],
                )
            },
        ),
        (
            "udp,actions=mod_nw_src:192.0.2.1,MOD_NW_DST:10.0.0.9,mod_tp_src:0,\
             mod_tp_dst:0xffff,mod_nw_tos:184,mod_nw_ecn:3,mod_nw_ttl:0,dec_ttl,output:2",
            spec(
                D,
                0,
                udp,
                &[
                    SetNwSrc(0xc000_0201),
                    SetNwDst(0x0a00_0009),
                    SetTpSrc(0),
                    SetTpDst(0xffff),
                    SetNwTos(184),
                    SetNwEcn(3),
                    SetNwTtl(0),
                    DecTtl,
                    Output(2),
                ],
            ),
        ),
        (
            "actions=in_port,output:IN_PORT,FLOOD,output:all,output:normal",
            spec(D, 0, any, &[InPort, InPort, Flood, All, Normal]),
        ),
        (
            "ip,actions=set_field:10.1.2.3->ip_src,set_field:10.1.2.4->nw_dst,\
             set_field:80->tcp_dst,set_field:81->udp_src,set_field:46->ip_dscp,\
             set_field:2->ip_ecn,set_field:9->nw_ttl,set_field:0x1005->vlan_vid,\
             set_field:02:00:00:00:00:01->eth_src,set_field:02:00:00:00:00:02->eth_dst,output:1",
            spec(
                D,
                0,
                any.ip(),
                &[
                    SetNwSrc(0x0a01_0203),
                    SetNwDst(0x0a01_0204),
                    SetTpDst(80),
                    SetTpSrc(81),
                    SetNwTos(184),
                    SetNwEcn(2),
                    SetNwTtl(9),
                    SetVlanVid(5),
                    SetDlSrc([2, 0, 0, 0, 0, 1]),
                    SetDlDst([2, 0, 0, 0, 0, 2]),
                    Output(1),
                ],
            ),
        ),
    ]
}

const BAD_CASES: &[(&str, &str)] = &[
    (
        "actions=mod_nw_src:10.0.0",
        "\"10.0.0\" is not an IPv4 address",
    ),
    ("actions=mod_nw_dst", "\"mod_nw_dst\" needs an IPv4 address"),
    (
        "actions=mod_tp_dst:65536",
        "is not a port number (0..65535)",
    ),
    ("actions=mod_nw_tos:185", "the TOS must be a multiple of 4"),
    ("actions=mod_nw_ecn:4", "is not an ECN value (0..3)"),
    ("actions=mod_nw_ttl:256", "is not a TTL (0..255)"),
    ("actions=dec_ttl:2", "\"dec_ttl\" takes no argument"),
    ("actions=flood:2", "\"flood\" takes no argument"),
    (
        "actions=set_field:64->ip_dscp",
        "is not a DSCP value (0..63)",
    ),
    (
        "actions=set_field:1->nw_proto",
        "field \"nw_proto\" is not supported",
    ),
    ("actions=output:everywhere", "\"everywhere\""),
    ("nw_dsst=1.2.3.4,actions=drop", "unknown field \"nw_dsst\""),
    (
        "tcp_dst=80,actions=drop",
        "tcp_dst: needs tcp or tcp6 first",
    ),
    ("tcp_port=80,actions=drop", "unknown field \"tcp_port\""),
    (
        "in_port=abc,actions=drop",
        "in_port: \"abc\" is not a port number (1..65279)",
    ),
    (
        "in_port=0,actions=drop",
        "in_port: \"0\" is not a port number (1..65279)",
    ),
    (
        "in_port=65280,actions=drop",
        "in_port: \"65280\" is not a port number",
    ),
    (
        "in_port=-1,actions=drop",
        "in_port: \"-1\" is not a port number",
    ),
    (
        "tcp,tp_dst=1,tp_dst=2,actions=drop",
        "duplicate field \"tp_dst\"",
    ),
    (
        "priority=1,priority=2,actions=drop",
        "duplicate field \"priority\"",
    ),
    (
        "cookie=1,cookie=2,actions=drop",
        "duplicate field \"cookie\"",
    ),
    ("ip,ip,actions=drop", "duplicate field \"ip\""),
    ("in_port=1", "missing actions="),
    ("", "missing actions="),
    ("actions drop", "actions: missing value"),
    ("in_port,actions=drop", "in_port: missing value"),
    ("in_port=,actions=drop", "in_port: missing value"),
    ("=5,actions=drop", "=5: expected a field name before \"=\""),
    ("ip=1,actions=drop", "ip: is a keyword and takes no value"),
    (
        "ip,nw_dst=10.0.0.0/33,actions=drop",
        "nw_dst: prefix length 33 out of range 0..32",
    ),
    (
        "ip,nw_src=10.0.0.0/99999999999,actions=drop",
        "nw_src: prefix length 99999999999 out of range",
    ),
    (
        "ip,nw_src=10.0.0,actions=drop",
        "nw_src: \"10.0.0\" is not an IPv4 address",
    ),
    (
        "ip,nw_src=10.0.0.0/abc,actions=drop",
        "nw_src: \"abc\" is not a prefix length or netmask",
    ),
    (
        "ip,nw_src=10.0.0.0/255.0.0,actions=drop",
        "nw_src: \"255.0.0\" is not a prefix length or netmask",
    ),
    (
        "actions=output:",
        "actions: \"output:\" needs a port number",
    ),
    ("actions=output", "actions: \"output\" needs a port number"),
    (
        "actions=output:0",
        "actions: output: \"0\" is not a port number (1..65279)",
    ),
    (
        "actions=70000",
        "actions: output: \"70000\" is not a port number",
    ),
    (
        "actions=output:x1",
        "actions: output: \"x1\" is not a port number",
    ),
    (
        "actions=drop,output:1",
        "actions: \"drop\" must be the only action",
    ),
    (
        "actions=output:1,drop",
        "actions: \"drop\" must be the only action",
    ),
    (
        "actions=drop,drop",
        "actions: \"drop\" must be the only action",
    ),
    ("actions=drop:1", "actions: \"drop\" takes no argument"),
    ("actions=flood_all", "actions: unknown action \"flood_all\""),
    ("actions=output(1)", "actions: unknown action \"output(1)\""),
    ("actions=normal:1", "actions: \"normal\" takes no argument"),
    (
        "actions=strip_vlan:1",
        "actions: \"strip_vlan\" takes no argument",
    ),
    (
        "actions=mod_dl_src:00:11",
        "actions: mod_dl_src: \"00:11\" is not a MAC address",
    ),
    (
        "actions=mod_dl_dst",
        "actions: \"mod_dl_dst\" needs a MAC address",
    ),
    (
        "actions=mod_vlan_vid:4096",
        "actions: mod_vlan_vid: \"4096\" is not a VLAN ID (0..4095)",
    ),
    (
        "actions=push_vlan:0x0800",
        "actions: push_vlan: \"0x0800\" is not 0x8100 or 0x88a8",
    ),
    (
        "actions=push_vlan",
        "actions: \"push_vlan\" needs an Ethertype",
    ),
    (
        "nw_dst=10.0.0.1,actions=drop",
        "nw_dst: needs ip or arp first",
    ),
    (
        "dl_type=0x86dd,nw_src=10.0.0.1,actions=drop",
        "nw_src: needs ip or arp first",
    ),
    ("nw_proto=6,actions=drop", "nw_proto: needs ip or arp first"),
    (
        "tp_dst=80,actions=drop",
        "tp_dst: needs tcp, udp, sctp or icmp first",
    ),
    (
        "ip,tp_src=80,actions=drop",
        "tp_src: needs tcp, udp, sctp or icmp first",
    ),
    (
        "arp,nw_proto=6,tp_dst=1,actions=drop",
        "tp_dst: needs tcp, udp, sctp or icmp first",
    ),
    (
        "ip,nw_proto=47,tp_dst=1,actions=drop",
        "tp_dst: needs tcp, udp, sctp or icmp first",
    ),
    (
        "priority=65536,actions=drop",
        "priority: \"65536\" is not a priority (0..65535)",
    ),
    (
        "priority=-1,actions=drop",
        "priority: \"-1\" is not a priority",
    ),
    (
        "priority=0x,actions=drop",
        "priority: \"0x\" is not a priority",
    ),
    (
        "dl_src=00:11:22:33:44:gg,actions=drop",
        "dl_src: \"00:11:22:33:44:gg\" is not a MAC address",
    ),
    (
        "dl_src=00:11:22:33:44:55:66,actions=drop",
        "dl_src: \"00:11:22:33:44:55:66\" is not a MAC",
    ),
    (
        "dl_dst=00:11:22:33:44:55/zz,actions=drop",
        "dl_dst: \"zz\" is not a MAC address",
    ),
    (
        "dl_vlan=4096,actions=drop",
        "dl_vlan: \"4096\" is not a VLAN ID (0..4095, or 0xffff for no tag)",
    ),
    (
        "dl_vlan_pcp=8,actions=drop",
        "dl_vlan_pcp: \"8\" is not a VLAN priority (0..7)",
    ),
    (
        "dl_vlan=0xffff,dl_vlan_pcp=1,actions=drop",
        "dl_vlan_pcp: conflicts with dl_vlan=0xffff",
    ),
    (
        "vlan_tci=0x1000,dl_vlan=1,actions=drop",
        "vlan_tci: cannot be combined with dl_vlan",
    ),
    (
        "vlan_tci=0x10000,actions=drop",
        "vlan_tci: \"0x10000\" is not a 16-bit TCI",
    ),
    (
        "tcp,udp,actions=drop",
        "udp: conflicts with earlier \"tcp\"",
    ),
    (
        "ip,dl_type=0x0806,actions=drop",
        "dl_type: conflicts with earlier \"ip\"",
    ),
    (
        "dl_type=0x10000,actions=drop",
        "dl_type: \"0x10000\" is not an Ethertype",
    ),
    (
        "ip,nw_proto=256,actions=drop",
        "nw_proto: \"256\" is not an IP protocol (0..255)",
    ),
    (
        "tcp,tp_dst=65536,actions=drop",
        "tp_dst: \"65536\" is not a port (0..65535)",
    ),
    (
        "tcp,tp_dst=1/0x10000,actions=drop",
        "tp_dst: \"0x10000\" is not a port",
    ),
    (
        "table=255,actions=drop",
        "table: \"255\" is not a table number (0..254)",
    ),
    (
        "cookie=0xg,actions=drop",
        "cookie: \"0xg\" is not a 64-bit number",
    ),
    (
        "tun_id=0x1000000,actions=drop",
        "tun_id: \"0x1000000\" is not a VNI (0..16777215)",
    ),
    (
        "tun_id=5/0xff,actions=drop",
        "tun_id: masks are not supported",
    ),
    (
        "tun_id=5,tun_id=5,actions=drop",
        "duplicate field \"tun_id\"",
    ),
    ("tun_id,actions=drop", "tun_id: missing value"),
    (
        "actions=set_field:5->nw_dst",
        "actions: set_field: \"5\" is not an IPv4 address",
    ),
    (
        "actions=set_field:5",
        "set_field: \"5\" is not VALUE->FIELD",
    ),
    (
        "actions=set_tunnel:16777216",
        "set_tunnel: \"16777216\" is not a VNI",
    ),
    ("actions=set_tunnel", "\"set_tunnel\" needs a VNI"),
    (
        "idle_timeout=65536,actions=drop",
        "idle_timeout: \"65536\" is not seconds (0..65535, 0: none)",
    ),
    (
        "hard_timeout=-1,actions=drop",
        "hard_timeout: \"-1\" is not seconds",
    ),
    (
        "idle_timeout=1,idle_timeout=2,actions=drop",
        "duplicate field \"idle_timeout\"",
    ),
    ("hard_timeout,actions=drop", "hard_timeout: missing value"),
    (
        "cookie=1/0xff,actions=drop",
        "cookie: a mask only selects rules (del-flows, dump-flows)",
    ),
];

#[test]
fn good_inputs_parse_to_expected_specs() {
    for (input, want) in good_cases() {
        match parse_flow(input) {
            Ok(got) => assert_eq!(got, want, "{input}"),
            Err(e) => panic!("{input:?}: unexpected error: {e}"),
        }
    }
}

#[test]
fn bad_inputs_give_errors_naming_the_token() {
    for (input, want) in BAD_CASES {
        match parse_flow(input) {
            Ok(spec) => panic!("{input:?}: accepted as {spec:?}"),
            Err(e) => assert!(
                e.to_string().contains(want),
                "{input:?}: got {:?}, want {want:?}",
                e.to_string()
            ),
        }
    }
}

#[test]
fn every_good_case_round_trips_through_format() {
    for (input, want) in good_cases() {
        let text = want.to_string();
        assert_eq!(parse_flow(&text), Ok(want), "{input} -> {text}");
    }
}

#[test]
fn from_str_matches_parse_flow() {
    let spec: FlowSpec = "tcp,tp_dst=80,actions=output:1".parse().unwrap();
    assert_eq!(spec, parse_flow("tcp,tp_dst=80,actions=output:1").unwrap());
}

#[test]
fn filters() {
    let cases: &[(&str, Result<FlowFilter, &str>)] = &[
        ("", Ok(FlowFilter::default())),
        ("  ,  ", Ok(FlowFilter::default())),
        (
            "priority=5,in_port=1",
            Ok(FlowFilter {
                matches: M::any().in_port(1).done(),
                priority: Some(5),
                cookie: None,
            }),
        ),
        (
            "tcp,tp_dst=80",
            Ok(FlowFilter {
                matches: M::any().ip().nw_proto(6).tp_dst(80, ALL).done(),
                priority: None,
                cookie: None,
            }),
        ),
        (
            "priority=0",
            Ok(FlowFilter {
                matches: Match::ANY,
                priority: Some(0),
                cookie: None,
            }),
        ),
        (
            "cookie=0x1234/0xff00,in_port=2",
            Ok(FlowFilter {
                matches: M::any().in_port(2).done(),
                priority: None,
                cookie: Some(CookieMatch {
                    value: 0x1200,
                    mask: 0xff00,
                }),
            }),
        ),
        (
            "cookie=7",
            Ok(FlowFilter {
                cookie: Some(CookieMatch {
                    value: 7,
                    mask: u64::MAX,
                }),
                ..FlowFilter::default()
            }),
        ),
        ("cookie=1/x", Err("cookie: \"x\" is not a 64-bit mask")),
        (
            "idle_timeout=5",
            Err("idle_timeout: not supported in a filter"),
        ),
        (
            "in_port=1,actions=drop",
            Err("actions= is not allowed in a filter"),
        ),
        ("actions", Err("actions= is not allowed in a filter")),
        ("tun_id=5", Err("tun_id: not supported in a filter")),
        ("tp_dst=80", Err("tp_dst: needs tcp")),
        ("nw_dsst=1", Err("unknown field \"nw_dsst\"")),
    ];
    for (input, want) in cases {
        match (parse_filter(input), want) {
            (Ok(got), Ok(want)) => assert_eq!(&got, want, "{input}"),
            (Err(e), Err(want)) => assert!(e.to_string().contains(want), "{input:?}: {e}"),
            (got, _) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn prefix_masks() {
    assert_eq!(prefix_mask(0), 0);
    assert_eq!(prefix_mask(1), 0x8000_0000);
    assert_eq!(prefix_mask(24), 0xffff_ff00);
    assert_eq!(prefix_mask(32), u32::MAX);
}

fn arb_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (1..=MAX_PORT).prop_map(Output),
        any::<[u8; 6]>().prop_map(SetDlSrc),
        any::<[u8; 6]>().prop_map(SetDlDst),
        (0..=VLAN_VID_MASK).prop_map(SetVlanVid),
        prop_oneof![Just(0x8100u16), Just(0x88a8u16)].prop_map(PushVlan),
        Just(StripVlan),
        Just(Normal),
        (0..=0xff_ffffu32).prop_map(SetTunnel),
        any::<u32>().prop_map(SetNwSrc),
        any::<u32>().prop_map(SetNwDst),
        any::<u16>().prop_map(SetTpSrc),
        any::<u16>().prop_map(SetTpDst),
        (0..64u8).prop_map(|d| SetNwTos(d << 2)),
        (0..4u8).prop_map(SetNwEcn),
        any::<u8>().prop_map(SetNwTtl),
        Just(DecTtl),
        Just(InPort),
        Just(Flood),
        Just(All),
        Just(CtClear),
    ]
}

/// dl_type and nw_proto: none, a shorthand, ip/arp with any nw_proto, or
/// any other Ethertype.
fn arb_proto() -> impl Strategy<Value = (Option<u16>, Option<u8>)> {
    prop_oneof![
        Just((None, None)),
        prop::sample::select(PROTOCOLS).prop_map(|p| (Some(p.1), p.2)),
        (prop_oneof![Just(0x0800u16), Just(0x0806u16)], any::<u8>())
            .prop_map(|(t, p)| (Some(t), Some(p))),
        any::<u16>().prop_map(|t| (Some(t), None)),
    ]
}

/// A value/mask pair where the mask is none, full, or arbitrary.
fn arb_masked(full: u64) -> impl Strategy<Value = (u64, u64)> {
    (any::<u64>(), prop_oneof![Just(0), Just(full), any::<u64>()])
        .prop_map(move |(v, m)| (v & full, m & full))
}

/// The connection tracker's fields of a match: `ct_state` under any
/// mask, maybe a zone, a mark and a label; the original-direction tuple
/// beside a state that names a valid connection (`+est`), as the parser
/// requires.
#[derive(Clone, Debug)]
struct CtFields {
    state: (u64, u64),
    zone: Option<u16>,
    mark: (u64, u64),
    label: (u128, u128),
    tuple: Option<(u32, u32, u128, u8, u16, u16)>,
}

fn arb_ct() -> impl Strategy<Value = CtFields> {
    let label = (
        any::<u128>(),
        prop_oneof![Just(0u128), Just(u128::MAX), any::<u128>()],
    );
    (
        arb_masked(0xff),
        prop::option::of(any::<u16>()),
        arb_masked(0xffff_ffff),
        label,
        prop::option::of(any::<(u32, u32, u128, u8, u16, u16)>()),
    )
        .prop_map(|(state, zone, mark, label, tuple)| CtFields {
            state,
            zone,
            mark,
            label,
            tuple,
        })
}

impl M {
    fn ct(mut self, c: &CtFields) -> M {
        let (k, mk) = (&mut self.0.key, &mut self.0.mask);
        k.set_ct_state(c.state.0 as u8);
        mk.set_ct_state(c.state.1 as u8);
        if let Some(z) = c.zone {
            k.set_ct_zone(z);
            mk.set_ct_zone(0xffff);
        }
        k.set_ct_mark(c.mark.0 as u32);
        mk.set_ct_mark(c.mark.1 as u32);
        k.set_ct_label(c.label.0);
        mk.set_ct_label(c.label.1);
        if let Some((src, dst, v6, proto, tp_src, tp_dst)) = c.tuple {
            // +est, whatever else the state matched.
            let est = crate::key::ct_state::EST;
            k.set_ct_state(k.ct_state() | est);
            mk.set_ct_state(mk.ct_state() | est);
            k.set_ct_nw_src(src);
            mk.set_ct_nw_src(dst);
            k.set_ct_ipv6_dst(v6);
            mk.set_ct_ipv6_dst(v6.rotate_left(7));
            k.set_ct_nw_proto(proto);
            mk.set_ct_nw_proto(0xff);
            k.set_ct_tp_src(tp_src);
            mk.set_ct_tp_src(tp_dst);
            k.set_ct_tp_dst(tp_dst);
            mk.set_ct_tp_dst(0xffff);
        }
        self
    }
}

prop_compose! {
    fn arb_spec()(
        priority in any::<u16>(),
        cookie in prop_oneof![Just(0u64), any::<u64>()],
        in_port in prop::option::of(1..=MAX_PORT),
        tun_id in prop::option::of(0..=0xff_ffffu32),
        (dl_type, nw_proto) in arb_proto(),
        vlan in arb_masked(0xffff),
        dl_src in arb_masked((1 << 48) - 1),
        dl_dst in arb_masked((1 << 48) - 1),
        nw_src in arb_masked(0xffff_ffff),
        nw_dst in arb_masked(0xffff_ffff),
        tp_src in arb_masked(0xffff),
        tp_dst in arb_masked(0xffff),
        ct in prop::option::of(arb_ct()),
        actions in prop::collection::vec(arb_action(), 0..4),
    ) -> FlowSpec {
        let mut m = M::any();
        if let Some(p) = in_port { m = m.in_port(p) }
        if let Some(t) = dl_type { m = m.dl_type(t) }
        if let Some(p) = nw_proto { m = m.nw_proto(p) }
        m = m.vlan(vlan.0 as u16, vlan.1 as u16);
        m = m.dl_src(mac_from_u64(dl_src.0), mac_from_u64(dl_src.1));
        m = m.dl_dst(mac_from_u64(dl_dst.0), mac_from_u64(dl_dst.1));
        if matches!(dl_type, Some(0x0800 | 0x0806)) {
            m = m.nw_src((nw_src.0 as u32).to_be_bytes(), nw_src.1 as u32);
            m = m.nw_dst((nw_dst.0 as u32).to_be_bytes(), nw_dst.1 as u32);
        }
        if dl_type == Some(0x0800) && matches!(nw_proto, Some(1 | 6 | 17 | 132)) {
            m = m.tp_src(tp_src.0 as u16, tp_src.1 as u16).tp_dst(tp_dst.0 as u16, tp_dst.1 as u16);
        }
        if let Some(c) = &ct {
            m = m.ct(c);
        }
        FlowSpec { tun_id, ..spec(priority, cookie, m, &actions) }
    }
}

proptest! {
    #[test]
    fn any_valid_spec_round_trips(spec in arb_spec()) {
        let text = spec.to_string();
        prop_assert_eq!(parse_flow(&text), Ok(spec), "{}", text);
    }

    #[test]
    fn any_filter_round_trips(spec in arb_spec(), strict in any::<bool>()) {
        let filter = FlowFilter { matches: spec.matches, priority: strict.then_some(spec.priority), cookie: None };
        let text = filter.to_string();
        prop_assert_eq!(parse_filter(&text), Ok(filter), "{}", text);
    }

    #[test]
    fn parser_never_panics(text in "[a-z_=,:./0-9x ]{0,60}") {
        let _ = parse_flow(&text);
        let _ = parse_filter(&text);
    }

    #[test]
    fn macs_parse_as_big_endian_numbers(mac in any::<[u8; 6]>()) {
        let text = format!("dl_src={},actions=drop", nfv_wire::EthernetAddress(mac));
        let spec = parse_flow(&text).unwrap();
        prop_assert_eq!(spec.matches.key.w[1] & ((1 << 48) - 1), mac_to_u64(mac));
    }
}
