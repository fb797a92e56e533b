//! IPv6 and the newer match fields and header rewrites, end to end through
//! real kernels: two network namespaces behind AF_PACKET ports of one
//! node, whose flow table lets through only what its rules name (each
//! table ends in `priority=0,actions=drop`). What the hosts' kernels
//! accept is the verdict: neighbour discovery, ping -6, TCP streams with
//! every byte checked, connections translated to a virtual IP and port
//! (the kernel drops a segment whose checksum is wrong, so a completed
//! stream proves the switch's incremental checksums), and `dec_ttl` on
//! the IPv6 hop limit. Each rule carries a cookie, and its `dump-flows`
//! counter shows the traffic went through it.
//!
//! Needs root, `ip netns`, `ping` and `ethtool` (otherwise SKIPPED with
//! the reason). Every namespace, veth, process and temp dir is removed on
//! drop, also when an assertion fails.

mod kernel_host;

use kernel_host::*;
use nfv_testutil::netns::{Netns, Veth};
use nfv_testutil::{skip, wait_until, which};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

const LEFT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const RIGHT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const VIP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 100);
const LEFT6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 1);
const RIGHT6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 2);
const VIP6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 0x100);
/// The MAC the left host's static neighbour entry gives the virtual IP:
/// nobody owns it, the switch rewrites it to the right host's.
const VIP_MAC: [u8; 6] = [0x02, 0x77, 0, 0, 1, 0];
/// The one TCP port the IPv6 rules of the first test let through.
const PORT: u16 = 5001;
/// A port with a listener behind it that no rule lets through.
const BLOCKED_PORT: u16 = 5002;
/// The virtual service, and the real one it is translated to.
const VIP_PORT: u16 = 8080;
const REAL_PORT: u16 = 9090;
/// The catch-all drop's cookie.
const CATCH_ALL: u64 = 0x99;

/// Why this test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if let Some(why) = unavailable() {
        return Some(why);
    }
    ["ping", "ethtool"]
        .into_iter()
        .find(|t| which(t).is_none())
        .map(|t| format!("`{t}` is not installed"))
}

/// Two hosts (dual stack, `LEFT_IP`/`LEFT6` and `RIGHT_IP`/`RIGHT6`) on
/// ports 1 and 2 (AF_PACKET) of a node whose flow table is `rules` and a
/// catch-all drop. Fields drop in the order written: the node first
/// (its sockets on the veths closed), then the veths and namespaces.
struct Setup {
    node: Node,
    v1: Veth,
    v2: Veth,
    ns1: Netns,
    ns2: Netns,
    _dir: TempDir,
}

impl Setup {
    /// `rules(left_mac, right_mac)` gives the table (the hosts' MACs are
    /// known once their veths exist).
    fn new(test: &str, rules: impl FnOnce([u8; 6], [u8; 6]) -> Vec<Rule>) -> (Setup, Vec<Rule>) {
        let dir = TempDir::new("kv6", test);
        let (ns1, v1) = dual_host(LEFT_IP, LEFT6).unwrap();
        let (ns2, v2) = dual_host(RIGHT_IP, RIGHT6).unwrap();
        let mut table = rules(v1.inner_mac, v2.inner_mac);
        table.push(rule(CATCH_ALL, 0, "priority=0,actions=drop"));
        let texts = with_cookies(&table);
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let body = format!(
            "{}{}{}",
            kernel_port("left", 1, "afpacket", &v1.host),
            kernel_port("right", 2, "afpacket", &v2.host),
            flows(&texts),
        );
        let node = Node::start(&dir.0, test, &body);
        for p in ["left", "right"] {
            let r = node.port(p);
            assert!(r.get("error").is_none(), "port {p} failed: {}", r["error"]);
        }
        let s = Setup {
            node,
            v1,
            v2,
            ns1,
            ns2,
            _dir: dir,
        };
        (s, table)
    }

    /// The flow table with its counters, the ports and what both kernels
    /// say: for failure messages.
    fn state(&self) -> String {
        format!(
            "--- dump-flows\n{}\n--- ports\nleft {}\nright {}\n{}",
            self.node.ctl(&["dump-flows"]).unwrap_or_else(|e| e),
            self.node.port("left"),
            self.node.port("right"),
            net_state(&[&self.ns1, &self.ns2], &[&self.v1.host, &self.v2.host])
        )
    }

    /// Every rule of `table` counted at least its `min` packets.
    fn check_counters(&self, table: &[Rule]) {
        check_counters(&self.node, table, || self.state());
    }

    /// TCP checksum errors the hosts' kernels counted (IPv4 and IPv6
    /// share the counter), and IPv4 header errors (a bad header
    /// checksum is one).
    fn checksum_errors(&self) -> [u64; 4] {
        [
            self.ns1.snmp("Tcp", "InCsumErrors"),
            self.ns2.snmp("Tcp", "InCsumErrors"),
            self.ns1.snmp("Ip", "InHdrErrors"),
            self.ns2.snmp("Ip", "InHdrErrors"),
        ]
    }
}

/// IPv6 ping and TCP through rules that match IPv6 fields only: neighbour
/// discovery by `icmp_type` and `nd_target` (and `nd_sll`/`nd_tll` on the
/// first solicitation and its answer), echo by `icmp_type` and addresses
/// (one as a prefix), TCP by addresses, port, `ip_frag` and — for the
/// SYN, which a higher-priority rule counts apart — `tcp_flags`. A TCP
/// connection to a port no rule allows does not get through (its SYNs
/// end in the catch-all drop), nor does IPv4 ping.
#[test]
fn ipv6_ping_and_tcp_pass_only_through_the_ipv6_rules() {
    let test = "ipv6_ping_and_tcp_pass_only_through_the_ipv6_rules";
    if let Some(why) = missing() {
        return skip(test, &why);
    }
    let (s, table) = Setup::new(test, |lmac, rmac| {
        let (lmac, rmac) = (mac_text(lmac), mac_text(rmac));
        vec![
            // Left resolves right: its first solicitation is multicast and
            // carries its MAC (nd_sll); the answer carries right's (nd_tll).
            rule(
                0x11,
                1,
                format!(
                    "priority=210,icmp6,icmp_type=135,nd_target={RIGHT6},nd_sll={lmac},\
                     in_port=1,actions=output:2"
                ),
            ),
            rule(
                0x12,
                1,
                format!(
                    "priority=210,icmp6,icmp_type=136,nd_target={RIGHT6},nd_tll={rmac},\
                     in_port=2,actions=output:1"
                ),
            ),
            // Reachability probes (unicast, their answers without nd_tll),
            // and right resolving left: the kernels may or may not send
            // them (right learns left's MAC from its solicitation).
            rule(
                0x13,
                0,
                format!(
                    "priority=200,icmp6,icmp_type=135,nd_target={RIGHT6},in_port=1,actions=output:2"
                ),
            ),
            rule(
                0x14,
                0,
                format!(
                    "priority=200,icmp6,icmp_type=136,nd_target={RIGHT6},in_port=2,actions=output:1"
                ),
            ),
            rule(
                0x15,
                0,
                format!(
                    "priority=200,icmp6,icmp_type=135,nd_target={LEFT6},in_port=2,actions=output:1"
                ),
            ),
            rule(
                0x16,
                0,
                format!(
                    "priority=200,icmp6,icmp_type=136,nd_target={LEFT6},in_port=1,actions=output:2"
                ),
            ),
            // Echo: 1 + 20 requests, as many replies (a few may be lost).
            rule(
                0x21,
                21,
                format!(
                    "priority=100,icmp6,icmpv6_type=128,ipv6_src={LEFT6},ipv6_dst={RIGHT6},\
                     in_port=1,actions=output:2"
                ),
            ),
            rule(
                0x22,
                19,
                format!(
                    "priority=100,icmp6,icmp_type=129,ipv6_src={RIGHT6}/128,ipv6_dst=fd77::/64,\
                     in_port=2,actions=output:1"
                ),
            ),
            // TCP to PORT and back: 1 MiB up, 256 KiB down.
            rule(
                0x31,
                300,
                format!(
                    "priority=100,tcp6,ipv6_src={LEFT6},ipv6_dst={RIGHT6},tp_dst={PORT},\
                     ip_frag=no,in_port=1,actions=output:2"
                ),
            ),
            rule(
                0x32,
                100,
                format!(
                    "priority=100,tcp6,ipv6_src={RIGHT6},ipv6_dst={LEFT6},tp_src={PORT},\
                     ip_frag=no,in_port=2,actions=output:1"
                ),
            ),
            // The connection's SYN (SYN set, ACK clear), counted apart.
            rule(
                0x33,
                1,
                format!(
                    "priority=150,tcp6,tcp_flags=+syn-ack,ipv6_src={LEFT6},ipv6_dst={RIGHT6},\
                     tp_dst={PORT},in_port=1,actions=output:2"
                ),
            ),
        ]
    });

    let replies = ping(&s.ns1, RIGHT6, 20).unwrap_or_else(|e| panic!("{e}\n{}", s.state()));
    assert!(
        replies >= 18,
        "{replies} of 20 pings answered\n{}",
        s.state()
    );

    let errors = s.checksum_errors();
    let listen = SocketAddr::from((RIGHT6, PORT));
    if let Err(e) = tcp_exchange_at(&s.ns1, &s.ns2, listen, None, 1 << 20, 256 << 10) {
        panic!("TCP over IPv6 to port {PORT}: {e}\n{}", s.state());
    }
    assert_eq!(
        s.checksum_errors(),
        errors,
        "checksum errors (tcp ns1, ns2; ip ns1, ns2)"
    );
    let syns = s.node.flow_packets(0x33);

    // A port with a listener no rule allows: the SYNs end in the catch-all
    // drop and the connect times out. (Had one got through, the listener
    // would accept; a refusal would also mean a SYN arrived.) A busy
    // machine only makes a timeout likelier: the 3 s are no race.
    let tcp_before = s.node.flow_packets(0x31);
    let to = SocketAddr::from((RIGHT6, BLOCKED_PORT));
    assert_blocked(&s.node, &s.ns1, &s.ns2, to, CATCH_ALL, || s.state());
    assert_eq!(
        s.node.flow_packets(0x31),
        tcp_before,
        "the tp_dst={PORT} rule took a SYN to {BLOCKED_PORT}"
    );
    assert_eq!(
        s.node.flow_packets(0x33),
        syns,
        "the SYN rule took a SYN to {BLOCKED_PORT}"
    );

    // IPv4 has no rule: not even ARP gets through.
    let v4 = s
        .ns1
        .run(&["ping", "-c", "2", "-W", "1", &RIGHT_IP.to_string()]);
    assert!(v4.is_err(), "IPv4 ping got through: {v4:?}");

    s.check_counters(&table);
}

/// A connection to a virtual IP and port, translated by the switch to the
/// real host and port and back (`mod_dl_dst`, `mod_nw_dst`/`set_field
/// ->ipv6_dst`, `mod_tp_dst` towards the server; `mod_dl_src`,
/// `mod_nw_src`/`set_field->ipv6_src`, `mod_tp_src` back), completes with
/// every byte checked. The kernels verify every checksum here: the
/// namespaces' veths send with tx checksum offload off (`host`), so each
/// segment leaves with its checksums filled in, an AF_PACKET port
/// receives it as it is, and the switch sends it on with no offload
/// metadata (`CHECKSUM_NONE`), which the receiving kernel checks in full
/// (`crates/afpacket/tests/port.rs` shows a bad one counted as an
/// `InCsumErrors`). So the switch's incremental updates of the IPv4
/// header checksum and of the TCP checksum over the pseudo-header and
/// ports must be right for the stream to complete; the hosts' checksum
/// error counters are asserted unchanged too. The address resolution the
/// server needs passes through ARP rules (`arp_op`, `arp_spa`, `arp_tpa`,
/// `arp_sha`, `arp_tha`) or ND rules (`nd_target`, `nd_sll`, `nd_tll`).
fn nat(test: &str, v6: bool) {
    if let Some(why) = missing() {
        return skip(test, &why);
    }
    let (left, right, vip): (IpAddr, IpAddr, IpAddr) = if v6 {
        (LEFT6.into(), RIGHT6.into(), VIP6.into())
    } else {
        (LEFT_IP.into(), RIGHT_IP.into(), VIP.into())
    };
    let (s, table) = Setup::new(test, |lmac, rmac| {
        let (lmac, rmac, vmac) = (mac_text(lmac), mac_text(rmac), mac_text(VIP_MAC));
        let (proto, src, dst, set_src, set_dst) = if v6 {
            (
                "tcp6",
                "ipv6_src",
                "ipv6_dst",
                format!("set_field:{vip}->ipv6_src"),
                format!("set_field:{right}->ipv6_dst"),
            )
        } else {
            (
                "tcp",
                "nw_src",
                "nw_dst",
                format!("mod_nw_src:{vip}"),
                format!("mod_nw_dst:{right}"),
            )
        };
        let mut t = vec![
            rule(
                0x51,
                300,
                format!(
                    "priority=100,{proto},in_port=1,{src}={left},{dst}={vip},tp_dst={VIP_PORT},\
                     actions=mod_dl_dst:{rmac},{set_dst},mod_tp_dst:{REAL_PORT},output:2"
                ),
            ),
            rule(
                0x52,
                100,
                format!(
                    "priority=100,{proto},in_port=2,{src}={right},{dst}={left},tp_src={REAL_PORT},\
                     actions=mod_dl_src:{vmac},{set_src},mod_tp_src:{VIP_PORT},output:1"
                ),
            ),
        ];
        // The left host knows the VIP statically; the server resolves the
        // client (it learns nothing from the SYN): its first request is
        // broadcast (multicast) and carries its MAC, the answer the
        // client's.
        t.extend(if v6 {
            [
                rule(
                    0x53,
                    1,
                    format!(
                        "priority=110,icmp6,icmp_type=135,nd_target={left},nd_sll={rmac},\
                         in_port=2,actions=output:1"
                    ),
                ),
                rule(
                    0x54,
                    1,
                    format!(
                        "priority=110,icmp6,icmp_type=136,nd_target={left},nd_tll={lmac},\
                         in_port=1,actions=output:2"
                    ),
                ),
                // Later unicast probes and answers (no nd_tll then).
                rule(
                    0x55,
                    0,
                    format!("priority=100,icmp6,icmp_type=135,nd_target={left},in_port=2,actions=output:1"),
                ),
                rule(
                    0x56,
                    0,
                    format!("priority=100,icmp6,icmp_type=136,nd_target={left},in_port=1,actions=output:2"),
                ),
            ]
        } else {
            [
                rule(
                    0x53,
                    1,
                    format!(
                        "priority=110,arp,arp_op=1,arp_spa={right},arp_tpa={left},arp_sha={rmac},\
                         in_port=2,actions=output:1"
                    ),
                ),
                rule(
                    0x54,
                    1,
                    format!(
                        "priority=110,arp,arp_op=2,arp_spa={left},arp_tpa={right},arp_sha={lmac},\
                         arp_tha={rmac},in_port=1,actions=output:2"
                    ),
                ),
                // Nothing else of ARP is needed; these would show it.
                rule(0x55, 0, "priority=100,arp,in_port=2,actions=output:1"),
                rule(0x56, 0, "priority=100,arp,in_port=1,actions=output:2"),
            ]
        });
        t
    });
    static_neighbour(&s.ns1, &s.v1.inner, vip, VIP_MAC).unwrap();

    let errors = s.checksum_errors();
    let listen = SocketAddr::new(right, REAL_PORT);
    let connect = SocketAddr::new(vip, VIP_PORT);
    for (up, down) in [(1 << 20, 256 << 10), (64 << 10, 1 << 20)] {
        if let Err(e) = tcp_exchange_at(&s.ns1, &s.ns2, listen, Some(connect), up, down) {
            panic!(
                "TCP to {connect}, translated to {listen}: {e}\nchecksum errors before \
                 (tcp ns1, ns2; ip ns1, ns2) {errors:?}, now {:?}\n{}",
                s.checksum_errors(),
                s.state()
            );
        }
    }
    assert_eq!(
        s.checksum_errors(),
        errors,
        "checksum errors (tcp ns1, ns2; ip ns1, ns2)\n{}",
        s.state()
    );
    s.check_counters(&table);
}

#[test]
fn ipv4_nat_rewrites_keep_tcp_checksums_right() {
    nat("ipv4_nat_rewrites_keep_tcp_checksums_right", false);
}

#[test]
fn ipv6_nat_rewrites_keep_tcp_checksums_right() {
    nat("ipv6_nat_rewrites_keep_tcp_checksums_right", true);
}

/// `dec_ttl` on IPv6 both ways: replies arrive with hop limit 63 (64 less
/// one), a ping sent with hop limit 2 is answered (it reaches the server
/// with 1), one with hop limit 1 is not — the switch drops it, counted as
/// `ttl_expired` on the port it came in on (and the `nw_ttl=1` rule that
/// matched it counted it) — and ping and TCP still work after. Neighbour
/// discovery has rules of its own without `dec_ttl`: a host ignores ND
/// whose hop limit is not 255.
#[test]
fn ipv6_dec_ttl_drops_hop_limit_one_and_decrements_the_rest() {
    let test = "ipv6_dec_ttl_drops_hop_limit_one_and_decrements_the_rest";
    if let Some(why) = missing() {
        return skip(test, &why);
    }
    let (s, table) = Setup::new(test, |_, _| {
        vec![
            rule(
                0x41,
                1,
                "priority=200,icmp6,icmp_type=135,in_port=1,actions=output:2",
            ),
            rule(
                0x42,
                1,
                "priority=200,icmp6,icmp_type=136,in_port=2,actions=output:1",
            ),
            rule(
                0x43,
                0,
                "priority=200,icmp6,icmp_type=135,in_port=2,actions=output:1",
            ),
            rule(
                0x44,
                0,
                "priority=200,icmp6,icmp_type=136,in_port=1,actions=output:2",
            ),
            // The echo requests sent with hop limit 1, counted apart.
            rule(
                0x45,
                5,
                format!(
                    "priority=150,icmp6,icmp_type=128,nw_ttl=1,ipv6_dst={RIGHT6},in_port=1,\
                     actions=dec_ttl,output:2"
                ),
            ),
            rule(
                0x46,
                1,
                "priority=100,ipv6,in_port=1,actions=dec_ttl,output:2",
            ),
            rule(
                0x47,
                1,
                "priority=100,ipv6,in_port=2,actions=dec_ttl,output:1",
            ),
        ]
    });

    let (replies, text) =
        ping_output(&s.ns1, RIGHT6, 10, 56, &[]).unwrap_or_else(|e| panic!("{e}\n{}", s.state()));
    assert!(replies >= 9, "{replies} of 10 pings answered\n{text}");
    let ttls: Vec<&str> = text
        .split_whitespace()
        .filter(|w| w.starts_with("ttl="))
        .collect();
    assert!(
        ttls.len() as u32 == replies && ttls.iter().all(|t| *t == "ttl=63"),
        "replies should arrive with hop limit 63 (64, one dec_ttl):\n{text}"
    );

    let (replies, text) = ping_output(&s.ns1, RIGHT6, 5, 56, &["-t", "2"]).unwrap();
    assert!(
        replies >= 4,
        "hop limit 2: {replies} of 5 pings answered\n{text}"
    );

    let expired = s.node.rx_drops("left", "ttl_expired");
    let (replies, text) = ping_output(&s.ns1, RIGHT6, 5, 56, &["-t", "1"]).unwrap();
    assert_eq!(replies, 0, "hop limit 1 was answered:\n{text}");
    // At least the five requests (MLD reports, sent with hop limit 1 and
    // taken by the `ipv6` rule, may add more).
    assert!(
        wait_until(WAIT, || s.node.rx_drops("left", "ttl_expired")
            >= expired + 5),
        "ttl_expired on left went {expired} -> {}\n{}",
        s.node.rx_drops("left", "ttl_expired"),
        s.state()
    );

    let replies = ping(&s.ns1, RIGHT6, 10).unwrap();
    assert!(
        replies >= 9,
        "after the expired ones: {replies} of 10 pings answered"
    );
    let listen = SocketAddr::from((RIGHT6, 0));
    if let Err(e) = tcp_exchange_at(&s.ns1, &s.ns2, listen, None, 256 << 10, 256 << 10) {
        panic!("TCP through dec_ttl: {e}\n{}", s.state());
    }
    s.check_counters(&table);
}
