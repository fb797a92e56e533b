//! Connection tracking end to end through real kernels: two network
//! namespaces behind AF_PACKET ports of one node whose flow table is a
//! security group in front of the right host (the "VNF"): everything IP
//! goes through `ct(zone=7,table=1)`; table 1 lets through established
//! and related packets, new TCP connections to one port from the left,
//! anything new the right host starts, and drops the rest. The hosts'
//! kernels decide: streams with every byte checked, a SYN to another port
//! that never arrives, an ICMP port unreachable that reaches the socket
//! whose datagram caused it. `dump-conntrack` shows the connections,
//! `flush-conntrack` removes them, `/metrics`-backed PMD figures count.
//!
//! Needs root, `ip netns` and `ethtool` (otherwise SKIPPED with the
//! reason). Every namespace, veth, process and temp dir is removed on
//! drop, also when an assertion fails.

mod kernel_host;

use kernel_host::*;
use nfv_testutil::netns::{Netns, Veth};
use nfv_testutil::{skip, which};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::time::Duration;

const LEFT_IP: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
const RIGHT_IP: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);
/// The one TCP port the security group opens to new connections from the
/// left.
const PORT: u16 = 22;
/// A port with a listener behind it that the group does not open.
const BLOCKED_PORT: u16 = 5002;
/// A UDP port nothing listens on at the left: the kernel answers
/// datagrams to it with ICMP port unreachable.
const CLOSED_UDP_PORT: u16 = 5999;
const ZONE: u16 = 7;

fn missing() -> Option<String> {
    if let Some(why) = unavailable() {
        return Some(why);
    }
    ["ethtool"]
        .into_iter()
        .find(|t| which(t).is_none())
        .map(|t| format!("`{t}` is not installed"))
}

/// The security group in front of the right host (port 2).
fn security_group() -> Vec<Rule> {
    vec![
        rule(0x01, 0, "priority=300,arp,in_port=1,actions=output:2"),
        rule(0x02, 0, "priority=300,arp,in_port=2,actions=output:1"),
        rule(
            0x10,
            10,
            format!("priority=100,ip,actions=ct(zone={ZONE},table=1)"),
        ),
        rule(
            0x20,
            10,
            "table=1,priority=100,ct_state=+trk+est,ip,in_port=1,actions=output:2",
        ),
        rule(
            0x21,
            10,
            "table=1,priority=100,ct_state=+trk+est,ip,in_port=2,actions=output:1",
        ),
        rule(
            0x22,
            1,
            "table=1,priority=100,ct_state=+trk+rel,ip,in_port=1,actions=output:2",
        ),
        rule(
            0x23,
            1,
            format!(
                "table=1,priority=90,ct_state=+trk+new,tcp,tp_dst={PORT},in_port=1,\
                 actions=ct(commit,zone={ZONE}),output:2"
            ),
        ),
        rule(
            0x24,
            2,
            format!(
                "table=1,priority=90,ct_state=+trk+new,ip,in_port=2,\
                 actions=ct(commit,zone={ZONE}),output:1"
            ),
        ),
        rule(0x98, 1, "table=1,priority=0,actions=drop"),
        rule(0x99, 0, "priority=0,actions=drop"),
    ]
}

struct Setup {
    node: Node,
    v1: Veth,
    v2: Veth,
    ns1: Netns,
    ns2: Netns,
    _dir: TempDir,
}

impl Setup {
    fn new(test: &str, table: &[Rule]) -> Setup {
        let dir = TempDir::new("kct", test);
        let (ns1, v1) = host(LEFT_IP).unwrap();
        let (ns2, v2) = host(RIGHT_IP).unwrap();
        let texts = with_cookies(table);
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
        Setup {
            node,
            v1,
            v2,
            ns1,
            ns2,
            _dir: dir,
        }
    }

    fn state(&self) -> String {
        format!(
            "--- dump-flows\n{}\n--- dump-conntrack\n{}\n--- ports\nleft {}\nright {}\n{}",
            self.node.ctl(&["dump-flows"]).unwrap_or_else(|e| e),
            self.node.ctl(&["dump-conntrack"]).unwrap_or_else(|e| e),
            self.node.port("left"),
            self.node.port("right"),
            net_state(&[&self.ns1, &self.ns2], &[&self.v1.host, &self.v2.host])
        )
    }

    fn check_counters(&self, table: &[Rule]) {
        check_counters(&self.node, table, || self.state());
    }

    /// The sum of one ct figure over the PMDs (`show pmd --json`).
    fn pmd_figure(&self, name: &str) -> u64 {
        let v: serde_json::Value =
            serde_json::from_str(&self.node.ctl(&["--json", "show", "pmd"]).unwrap()).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| p[name].as_u64().unwrap_or(0))
            .sum()
    }
}

/// The security group lets a connection to the open port through both
/// ways, keeps a SYN to another port out, lets everything the protected
/// host starts out and its answers back, and passes the ICMP error a
/// datagram of a tracked flow caused.
#[test]
fn a_security_group_lets_through_what_it_allows_and_the_answers() {
    let test = "a_security_group_lets_through_what_it_allows_and_the_answers";
    if let Some(why) = missing() {
        return skip(test, &why);
    }
    let table = security_group();
    let s = Setup::new(test, &table);

    // New TCP to the open port: 256 KiB up, 64 KiB down, every byte checked.
    let listen = SocketAddr::from((RIGHT_IP, PORT));
    if let Err(e) = tcp_exchange_at(&s.ns1, &s.ns2, listen, None, 256 << 10, 64 << 10) {
        panic!("TCP to the open port {PORT}: {e}\n{}", s.state());
    }

    // A listener on a port the group does not open: the SYNs end in table
    // 1's drop.
    let to = SocketAddr::from((RIGHT_IP, BLOCKED_PORT));
    assert_blocked(&s.node, &s.ns1, &s.ns2, to, 0x98, || s.state());

    // The protected host starts a connection (any port): out, and its
    // answers back as established.
    let listen = SocketAddr::from((LEFT_IP, 0));
    if let Err(e) = tcp_exchange_at(&s.ns2, &s.ns1, listen, None, 64 << 10, 256 << 10) {
        panic!("TCP from the protected host: {e}\n{}", s.state());
    }

    // A datagram from the protected host to a closed port: the left
    // kernel's port unreachable is related to the tracked UDP flow, gets
    // through, and the connected socket reports the refusal.
    let related_before = s.node.flow_packets(0x22);
    let refused = s.ns2.run_in(|| -> Result<(), String> {
        let sock = UdpSocket::bind((RIGHT_IP, 0)).map_err(|e| e.to_string())?;
        sock.connect((LEFT_IP, CLOSED_UDP_PORT))
            .map_err(|e| e.to_string())?;
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut buf = [0u8; 64];
        // A few tries: the first datagram may wait for ARP.
        for _ in 0..20 {
            sock.send(b"anyone?").map_err(|e| e.to_string())?;
            match sock.recv(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(()),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                other => return Err(format!("recv: {other:?}")),
            }
        }
        Err("no port unreachable came back".into())
    });
    if let Err(e) = refused {
        panic!("ICMP error of a tracked flow: {e}\n{}", s.state());
    }
    assert!(
        s.node.flow_packets(0x22) > related_before,
        "the port unreachable did not go through the +rel rule\n{}",
        s.state()
    );
    s.check_counters(&table);

    // The table: the two TCP connections (the blocked SYNs committed
    // nothing) and the UDP flow, in zone 7.
    let dump = s.node.ctl(&["dump-conntrack", "zone=7"]).unwrap();
    let tcp = dump.lines().filter(|l| l.starts_with("tcp,")).count();
    let udp = dump.lines().filter(|l| l.starts_with("udp,")).count();
    assert!(tcp == 2 && udp >= 1, "dump-conntrack zone=7:\n{dump}");
    assert!(
        dump.contains(&format!(
            "reply=(src={RIGHT_IP},dst={LEFT_IP},sport={PORT},"
        )),
        "{dump}"
    );
    assert!(s.pmd_figure("ct_committed") >= 3, "{}", s.state());
    assert!(s.pmd_figure("ct_related") >= 1, "{}", s.state());
    assert!(s.pmd_figure("ct_established") >= 10, "{}", s.state());
    assert!(s.pmd_figure("ct_recirculations") >= 10, "{}", s.state());

    let flushed = s.node.ctl(&["flush-conntrack", "zone=7"]).unwrap();
    assert!(flushed.contains("flushed"), "{flushed}");
    let after = s.node.ctl(&["dump-conntrack"]).unwrap();
    assert!(
        !after.lines().any(|l| l.contains("zone=7")),
        "after a flush:\n{after}"
    );
}

const CLIENT1: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
const CLIENT2: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 3);
/// The address both clients are translated to.
const NAT_IP: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 100);
/// The MAC the server's static neighbour entry gives `NAT_IP`: nobody
/// owns it; table 1 writes the client's back on the answers.
const NAT_MAC: [u8; 6] = [0x02, 0x79, 0, 0, 1, 0];
/// The source port both clients bind.
const CLIENT_PORT: u16 = 40000;
const SERVER_PORT: u16 = 8080;

/// A TCP connection from `port` (bound first, as two clients behind one
/// NAT may both do) to `to`, that gives up after `WAIT`.
fn connect_from(port: u16, to: std::net::SocketAddrV4) -> std::io::Result<std::net::TcpStream> {
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, setsockopt, socket, sockopt,
    };
    use nix::sys::time::TimeVal;
    use std::os::fd::AsRawFd;
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    // Bounds connect(2) as well as writes.
    setsockopt(
        &fd,
        sockopt::SendTimeout,
        &TimeVal::new(WAIT.as_secs() as i64, 0),
    )?;
    let any = std::net::SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port);
    bind(fd.as_raw_fd(), &SockaddrIn::from(any))?;
    connect(fd.as_raw_fd(), &SockaddrIn::from(to))?;
    Ok(std::net::TcpStream::from(fd))
}

/// Two clients in their own namespaces, the same source port, SNAT to one
/// address in front of a server: both connections get through at once,
/// each with its own translated port, every byte checked both ways; the
/// answers are translated back and reach the right client.
#[test]
fn snat_keeps_two_clients_with_the_same_port_apart() {
    use std::io::{Read, Write};
    let test = "snat_keeps_two_clients_with_the_same_port_apart";
    if let Some(why) = missing() {
        return skip(test, &why);
    }
    let dir = TempDir::new("kct", test);
    let (ns1, v1) = host(CLIENT1).unwrap();
    let (ns2, v2) = host(CLIENT2).unwrap();
    let (ns3, v3) = host(SERVER).unwrap();
    static_neighbour(&ns3, &v3.inner, NAT_IP, NAT_MAC).unwrap();
    let (m1, m2) = (mac_text(v1.inner_mac), mac_text(v2.inner_mac));
    let rules = [
        "priority=300,arp,actions=flood".to_string(),
        format!("priority=100,ip,in_port=1,actions=ct(commit,zone=9,nat(src={NAT_IP})),output:3"),
        format!("priority=100,ip,in_port=2,actions=ct(commit,zone=9,nat(src={NAT_IP})),output:3"),
        "priority=100,ip,in_port=3,actions=ct(zone=9,nat,table=1)".to_string(),
        format!(
            "table=1,ct_state=+trk+est+dnat,ip,nw_dst={CLIENT1},actions=mod_dl_dst:{m1},output:1"
        ),
        format!(
            "table=1,ct_state=+trk+est+dnat,ip,nw_dst={CLIENT2},actions=mod_dl_dst:{m2},output:2"
        ),
        "table=1,priority=0,actions=drop".to_string(),
        "priority=0,actions=drop".to_string(),
    ];
    let rules: Vec<&str> = rules.iter().map(String::as_str).collect();
    let body = format!(
        "{}{}{}{}",
        kernel_port("c1", 1, "afpacket", &v1.host),
        kernel_port("c2", 2, "afpacket", &v2.host),
        kernel_port("srv", 3, "afpacket", &v3.host),
        flows(&rules),
    );
    let node = Node::start(&dir.0, test, &body);
    let state = |node: &Node| {
        format!(
            "--- dump-flows\n{}\n--- dump-conntrack\n{}\n{}",
            node.ctl(&["dump-flows"]).unwrap_or_else(|e| e),
            node.ctl(&["dump-conntrack"]).unwrap_or_else(|e| e),
            net_state(&[&ns1, &ns2, &ns3], &[&v1.host, &v2.host, &v3.host])
        )
    };

    // The server: two connections, each echoing what it got reversed, and
    // the peers it saw.
    let (tx, rx) = std::sync::mpsc::channel();
    let server = ns3.spawn_in(move || -> Result<Vec<std::net::SocketAddr>, String> {
        let l = TcpListener::bind((SERVER, SERVER_PORT)).map_err(|e| e.to_string())?;
        tx.send(()).unwrap();
        l.set_nonblocking(true).unwrap();
        let end = std::time::Instant::now() + 2 * WAIT;
        let mut peers = Vec::new();
        let mut conns = Vec::new();
        while conns.len() < 2 {
            match l.accept() {
                Ok((s, peer)) => {
                    peers.push(peer);
                    conns.push(s);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() > end {
                        return Err(format!("accepted {} of 2 connections", conns.len()));
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(format!("accept: {e}")),
            }
        }
        for mut s in conns {
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(WAIT)).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got)
                .map_err(|e| format!("server read: {e}"))?;
            got.reverse();
            s.write_all(&got)
                .map_err(|e| format!("server write: {e}"))?;
        }
        Ok(peers)
    });
    rx.recv_timeout(WAIT).expect("the server listens");
    let to = std::net::SocketAddrV4::new(SERVER, SERVER_PORT);
    let client = |ns: &Netns, seed: u64| {
        ns.spawn_in(move || -> Result<(), String> {
            let mut s = connect_from(CLIENT_PORT, to).map_err(|e| format!("connect: {e}"))?;
            s.set_read_timeout(Some(WAIT)).unwrap();
            let sent = pattern(seed, 100_000);
            s.write_all(&sent).map_err(|e| format!("write: {e}"))?;
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut got = Vec::new();
            s.read_to_end(&mut got).map_err(|e| format!("read: {e}"))?;
            let mut want = sent;
            want.reverse();
            if got != want {
                return Err(format!(
                    "got {} bytes back, not its own reversed",
                    got.len()
                ));
            }
            Ok(())
        })
    };
    let c1 = client(&ns1, 11);
    let c2 = client(&ns2, 22);
    let r1 = c1.join().expect("client 1").and_then(|r| r);
    let r2 = c2.join().expect("client 2").and_then(|r| r);
    let peers = server.join().expect("server").and_then(|r| r);
    if r1.is_err() || r2.is_err() {
        panic!(
            "clients: {r1:?} {r2:?}; server: {peers:?}\n{}",
            state(&node)
        );
    }
    let peers = peers.unwrap_or_else(|e| panic!("server: {e}\n{}", state(&node)));
    assert!(
        peers.iter().all(|p| p.ip() == std::net::IpAddr::V4(NAT_IP)),
        "the server saw {peers:?}, not {NAT_IP} twice"
    );
    assert_ne!(
        peers[0].port(),
        peers[1].port(),
        "two connections behind one address need two ports: {peers:?}"
    );
    let dump = node.ctl(&["dump-conntrack", "zone=9"]).unwrap();
    assert_eq!(
        dump.lines()
            .filter(|l| l.contains(&format!("sport={CLIENT_PORT},dport={SERVER_PORT}")))
            .count(),
        2,
        "{dump}"
    );
}
