//! Shared by the tests that run a node against kernel network namespaces
//! (`kernel.rs`, `kernel_ipv6.rs`, `kernel_conntrack.rs`, `vxlan.rs`): the node as a child
//! process with its control socket, hosts (a namespace with a veth, IPv4
//! and optionally IPv6), static neighbour entries, ping (IPv4 or IPv6 by
//! the address) and a checked TCP exchange between namespaces.
//! Everything is removed on drop.
#![allow(dead_code)]

use nfv_testutil::netns::{Netns, Veth};
use nfv_testutil::wait_until;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_nfvswitch");
pub const WAIT: Duration = Duration::from_secs(20);

/// A child process stopped on drop: SIGTERM (so the switch flushes its
/// captures and detaches), then SIGKILL if it is still there after a
/// while; always reaped. Its stderr is read as it comes by a thread of
/// ours (into the second field): a pipe nobody drains fills at 64 KiB,
/// and then every thread of the child that logs blocks in `write`.
pub struct Proc(pub Child, Arc<Mutex<Vec<u8>>>);

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: signals our own child, which is not reaped yet.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGTERM) };
        if !wait_until(Duration::from_secs(5), || {
            matches!(self.0.try_wait(), Ok(Some(_)))
        }) {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

impl Proc {
    pub fn spawn(args: &[&str]) -> Proc {
        Proc::spawn_command(Command::new(BIN).args(args))
    }

    /// The switch run inside network namespace `netns` (`ip netns exec`
    /// execs it, so the child is the switch itself).
    pub fn spawn_in(netns: &str, args: &[&str]) -> Proc {
        Proc::spawn_command(
            Command::new("ip")
                .args(["netns", "exec", netns, BIN])
                .args(args),
        )
    }

    fn spawn_command(c: &mut Command) -> Proc {
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nfvswitch");
        let log = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut e) = child.stderr.take() {
            let sink = log.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = e.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .extend_from_slice(&buf[..n]);
                }
            });
        }
        Proc(child, log)
    }

    /// Everything it wrote to stderr (kills it first, and waits a little
    /// for the reader to see the end).
    pub fn stderr(mut self) -> String {
        let _ = self.0.kill();
        let _ = self.0.wait();
        std::thread::sleep(Duration::from_millis(100));
        let bytes = self.1.lock().unwrap_or_else(|p| p.into_inner()).clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

pub use nfv_testutil::TempDir;

/// Why these tests cannot run here.
pub fn unavailable() -> Option<String> {
    nfv_testutil::netns::unavailable()
}

/// A running node with its control socket.
pub struct Node {
    pub proc: Option<Proc>,
    pub socket: PathBuf,
}

impl Node {
    /// Starts `nfvswitch run` on a config made of `body` (ports, flows,
    /// chains) and waits for the control socket.
    pub fn start(dir: &Path, tag: &str, body: &str) -> Node {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Node::start_in(dir, tag, body, None, cpus - 1)
    }

    /// [`Node::start`] inside network namespace `netns` (if any), its PMD
    /// on `core`.
    pub fn start_in(dir: &Path, tag: &str, body: &str, netns: Option<&str>, core: usize) -> Node {
        let socket = dir.join("ctl.sock");
        let cfg = format!(
            "[node]\nname = \"k{tag}\"\ncontrol_socket = \"{}\"\napi = \"off\"\n\
             [memory]\nframes = 8192\nhugepages = \"never\"\n[pmd]\ncores = [{}]\n{body}",
            socket.display(),
            core
        );
        let path = dir.join("node.toml");
        std::fs::write(&path, cfg).unwrap();
        let args = ["--log", "info", "run", path.to_str().unwrap()];
        let proc = match netns {
            None => Proc::spawn(&args),
            Some(ns) => Proc::spawn_in(ns, &args),
        };
        let node = Node {
            proc: Some(proc),
            socket,
        };
        if !wait_until(WAIT, || {
            std::os::unix::net::UnixStream::connect(&node.socket).is_ok()
        }) {
            let err = node.into_stderr();
            panic!("control socket never appeared; node said:\n{err}");
        }
        node
    }

    pub fn into_stderr(mut self) -> String {
        self.proc.take().map(Proc::stderr).unwrap_or_default()
    }

    /// `nfvswitch ctl ARGS` against this node: stdout, or stderr when it
    /// fails.
    #[allow(dead_code)] // not every test binary that includes this uses it
    pub fn ctl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(BIN)
            .args(["ctl", "--socket"])
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        if out.status.success() {
            Ok(text(&out.stdout))
        } else {
            Err(text(&out.stderr))
        }
    }

    pub fn ports(&self) -> Value {
        let out = Command::new(BIN)
            .args(["ctl", "--json", "--socket"])
            .arg(&self.socket)
            .args(["show", "ports"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "show ports: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `dump-flows` as JSON: one object per rule (`cookie`, `priority`,
    /// `n_packets`, `n_bytes`, `rule`).
    pub fn flows(&self) -> Value {
        let out = Command::new(BIN)
            .args(["ctl", "--json", "--socket"])
            .arg(&self.socket)
            .arg("dump-flows")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "dump-flows: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The packet counter of the one rule whose cookie is `cookie`.
    pub fn flow_packets(&self, cookie: u64) -> u64 {
        let flows = self.flows();
        let hits: Vec<&Value> = flows
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["cookie"] == cookie)
            .collect();
        assert_eq!(hits.len(), 1, "cookie {cookie:#x} in {flows}");
        hits[0]["n_packets"].as_u64().unwrap()
    }

    /// The drops for `reason` on port `name`'s receive side (where the
    /// datapath counts the drops of the packets that port received);
    /// `show ports` lists only non-zero reasons.
    pub fn rx_drops(&self, name: &str, reason: &str) -> u64 {
        let p = self.port(name);
        assert!(p["rx"]["drops"].is_object(), "no rx.drops in {p}");
        p["rx"]["drops"][reason].as_u64().unwrap_or(0)
    }

    pub fn port(&self, name: &str) -> Value {
        self.ports()
            .as_array()
            .and_then(|a| a.iter().find(|p| p["name"] == name).cloned())
            .unwrap_or_else(|| panic!("no port {name}"))
    }
}

/// `[[flow]]` tables for `rules`.
pub fn flows(rules: &[&str]) -> String {
    rules
        .iter()
        .map(|r| format!("[[flow]]\nrule = \"{r}\"\n"))
        .collect()
}

/// The `[[port]]` table of a kernel-facing port on `iface`.
pub fn kernel_port(name: &str, id: u16, kind: &str, iface: &str) -> String {
    let extra = if kind == "afxdp" {
        "xdp_mode = \"copy\"\n"
    } else {
        ""
    };
    format!(
        "[[port]]\nname = \"{name}\"\nid = {id}\ntype = \"{kind}\"\niface = \"{iface}\"\n{extra}"
    )
}

/// A namespace with one veth into it, tx checksum offload off inside (a
/// veth hands partially checksummed TCP to the peer; a switch in between
/// forwards raw frames, so the sender must fill the checksum in — as with
/// OVS's AF_XDP and AF_PACKET ports).
pub fn host(ip: Ipv4Addr) -> Result<(Netns, Veth), String> {
    let ns = Netns::new("nvk")?;
    let veth = Veth::into_ns(&ns, &format!("{ip}/24"))?;
    ns.run(&["ethtool", "-K", &veth.inner, "tx", "off"])?;
    Ok((ns, veth))
}

/// [`host`] with IPv6 address `ip6/64` on the veth too, added `nodad`:
/// usable at once (a tentative address cannot be bound), and no DAD
/// probe has to cross the switch.
pub fn dual_host(ip4: Ipv4Addr, ip6: Ipv6Addr) -> Result<(Netns, Veth), String> {
    let (ns, veth) = host(ip4)?;
    ns.run(&[
        "ip",
        "-6",
        "addr",
        "add",
        &format!("{ip6}/64"),
        "dev",
        &veth.inner,
        "nodad",
    ])?;
    Ok((ns, veth))
}

/// `aa:bb:cc:dd:ee:ff`, as `ip` and rule text write a MAC.
pub fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// A permanent neighbour entry (ARP or NDP) in `ns`: `ip` is at `mac` on
/// the host's veth end `dev`, and the host never asks.
pub fn static_neighbour(
    ns: &Netns,
    dev: &str,
    ip: impl Into<IpAddr>,
    mac: [u8; 6],
) -> Result<(), String> {
    let ip = ip.into().to_string();
    let mac = mac_text(mac);
    ns.run(&[
        "ip",
        "neigh",
        "replace",
        &ip,
        "lladdr",
        &mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ])
    .map(|_| ())
}

/// Pings `to` from `ns` until one reply arrives or `WAIT` passes, then
/// sends `count` pings with a payload pattern; returns the replies got.
/// An IPv6 `to` pings over IPv6 (`ping` picks the family by the address).
pub fn ping(ns: &Netns, to: impl Into<IpAddr>, count: u32) -> Result<u32, String> {
    ping_sized(ns, to, count, 1000, &[])
}

/// [`ping`] with `size` bytes of payload and more `ping` options (the
/// first, waited-for ping goes without them).
pub fn ping_sized(
    ns: &Netns,
    to: impl Into<IpAddr>,
    count: u32,
    size: usize,
    more: &[&str],
) -> Result<u32, String> {
    Ok(ping_output(ns, to, count, size, more)?.0)
}

/// [`ping_sized`], also returning what `ping` printed (the replies'
/// `ttl=` values are there: for IPv6 the hop limit they arrived with).
pub fn ping_output(
    ns: &Netns,
    to: impl Into<IpAddr>,
    count: u32,
    size: usize,
    more: &[&str],
) -> Result<(u32, String), String> {
    let to = to.into().to_string();
    let first = wait_until(WAIT, || {
        ns.run(&["ping", "-c", "1", "-W", "1", &to]).is_ok()
    });
    if !first {
        return Err(format!("no reply from {to} within {WAIT:?}"));
    }
    let out = ns
        .command("ping")
        .args(["-c", &count.to_string(), "-i", "0.05", "-W", "2"])
        .args(["-p", "6e667673776974636821", "-s", &size.to_string()])
        .args(more)
        .arg(&to)
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "N packets transmitted, M received"
    let received = text
        .split(',')
        .find_map(|part| part.trim().strip_suffix(" received"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or(format!("cannot read ping output: {text}"))?;
    Ok((received, text.into_owned()))
}

/// Deterministic bytes for stream `seed` (checked by the other end).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A TCP stream from `client_ns` to `server_ip` in `server_ns`: `up`
/// bytes one way, `down` bytes back, every byte compared at the receiver.
pub fn tcp_exchange(
    client_ns: &Netns,
    server_ns: &Netns,
    server_ip: Ipv4Addr,
    up: usize,
    down: usize,
) -> Result<(), String> {
    tcp_exchange_at(
        client_ns,
        server_ns,
        SocketAddr::from((server_ip, 0)),
        None,
        up,
        down,
    )
}

/// [`tcp_exchange`] with the server listening on `listen` (IPv4 or IPv6;
/// port 0: one the kernel picks) and the client connecting to `connect`
/// — another address a switch in between translates to `listen` (a
/// virtual IP and port) — or, if `None`, to the address listened on.
pub fn tcp_exchange_at(
    client_ns: &Netns,
    server_ns: &Netns,
    listen: SocketAddr,
    connect: Option<SocketAddr>,
    up: usize,
    down: usize,
) -> Result<(), String> {
    let (tx, rx) = std::sync::mpsc::channel::<u16>();
    let server = server_ns.spawn_in(move || -> Result<(), String> {
        let l = TcpListener::bind(listen).map_err(|e| format!("bind {listen}: {e}"))?;
        tx.send(l.local_addr().unwrap().port()).unwrap();
        // Not forever: when the client never gets through (its connect
        // gives up after WAIT), this thread must end too.
        l.set_nonblocking(true).unwrap();
        let end = Instant::now() + 2 * WAIT;
        let mut s = loop {
            match l.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() >= end {
                        return Err(format!("accept: no connection within {:?}", 2 * WAIT));
                    }
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => return Err(format!("accept: {e}")),
            }
        };
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        let mut got = Vec::with_capacity(up);
        s.read_to_end(&mut got)
            .map_err(|e| format!("server read: {e}"))?;
        if got != pattern(1, up) {
            return Err(format!(
                "server got {} bytes, want {up}; first difference at {:?}",
                got.len(),
                got.iter().zip(pattern(1, up)).position(|(a, b)| *a != b)
            ));
        }
        s.write_all(&pattern(2, down))
            .map_err(|e| format!("server write: {e}"))
    });
    let port = rx
        .recv_timeout(WAIT)
        .map_err(|e| format!("server port: {e}"))?;
    let addr = connect.unwrap_or(SocketAddr::new(listen.ip(), port));
    let client = client_ns.spawn_in(move || -> Result<(), String> {
        let mut s =
            TcpStream::connect_timeout(&addr, WAIT).map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.write_all(&pattern(1, up))
            .map_err(|e| format!("client write: {e}"))?;
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = Vec::with_capacity(down);
        s.read_to_end(&mut got)
            .map_err(|e| format!("client read: {e}"))?;
        if got != pattern(2, down) {
            return Err(format!("client got {} bytes back, want {down}", got.len()));
        }
        Ok(())
    });
    let c = client.join().map_err(|_| "client panicked".to_string())??;
    let s = server.join().map_err(|_| "server panicked".to_string())??;
    // Both sides' errors: a client timing out on its read says nothing of
    // how far the server got.
    match (c, s) {
        (Err(c), Err(s)) => Err(format!("{c}; {s}")),
        (c, s) => c.and(s),
    }
}

/// A TCP connect from `ns` to `to` that gives up after `timeout`: its
/// result (for checks that a connection does not get through).
pub fn tcp_connect(ns: &Netns, to: SocketAddr, timeout: Duration) -> std::io::Result<()> {
    ns.run_in(move || TcpStream::connect_timeout(&to, timeout).map(drop))
}

/// What the kernel says about the TCP sockets, counters and links of
/// `nss` and about the interfaces `links` of this namespace (the outer
/// ends of veths), for a failure message: `ss` (retransmits, backoff,
/// RTO, unacked, socket memory), the counters `nstat` finds non-zero
/// (timeouts, out-of-order queueing, drops) and `ip -s link`.
pub fn net_state(nss: &[&Netns], links: &[&str]) -> String {
    let mut out = String::new();
    let mut add = |what: String, r: Result<String, String>| {
        out.push_str(&format!("--- {what}\n{}\n", r.unwrap_or_else(|e| e)));
    };
    for ns in nss {
        for cmd in [
            &["ss", "-tinmoe"][..],
            &["nstat", "-as"],
            &["ip", "-s", "link"],
        ] {
            add(format!("{}: {}", ns.name(), cmd.join(" ")), ns.run(cmd));
        }
    }
    for l in links {
        add(
            format!("ip -s link show {l}"),
            nfv_testutil::netns::run("ip", &["-s", "link", "show", l]),
        );
    }
    out
}

/// Runs `body` while a thread takes `snap()` every `every`; returns what
/// `body` returned and the last snapshot (empty if none was taken). For
/// a failure that ends a stall (a read timing out, when the sockets close
/// and the stalled state is gone): the last snapshot shows the stall.
pub fn with_snapshots<R>(
    every: Duration,
    snap: impl Fn() -> String + Sync,
    body: impl FnOnce() -> R,
) -> (R, String) {
    let last = Mutex::new(String::new());
    let done = std::sync::atomic::AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            let start = std::time::Instant::now();
            let mut next = start + every;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                if std::time::Instant::now() >= next {
                    let text = format!("at {:?}:\n{}", start.elapsed(), snap());
                    *last.lock().unwrap_or_else(|p| p.into_inner()) = text;
                    next = std::time::Instant::now() + every;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let r = body();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        r
    });
    (r, last.into_inner().unwrap_or_else(|p| p.into_inner()))
}

/// A rule of a test's flow table: its cookie, its text (without the
/// cookie) and how many packets it must have counted once the test's
/// traffic has run (0: not asserted — traffic the kernels may or may not
/// send, such as a neighbour's reachability probe).
pub struct Rule {
    pub cookie: u64,
    pub text: String,
    pub min: u64,
}

pub fn rule(cookie: u64, min: u64, text: impl Into<String>) -> Rule {
    Rule {
        cookie,
        text: text.into(),
        min,
    }
}

/// The rules as `flows` lines, each with its cookie.
pub fn with_cookies(table: &[Rule]) -> Vec<String> {
    table
        .iter()
        .map(|r| format!("cookie={:#x},{}", r.cookie, r.text))
        .collect()
}

/// Every rule of `table` counted at least its `min` packets on `node`;
/// `state` says what the switch and kernels looked like, for the message.
pub fn check_counters(node: &Node, table: &[Rule], state: impl Fn() -> String) {
    for r in table.iter().filter(|r| r.min > 0) {
        let got = node.flow_packets(r.cookie);
        assert!(
            got >= r.min,
            "rule {:#x} `{}` counted {got} packets, want at least {}\n{}",
            r.cookie,
            r.text,
            r.min,
            state()
        );
    }
}

/// A listener in `server_ns` at `to` that no rule lets a connection
/// reach: a connect from `client_ns` must time out (a refusal would mean
/// a SYN got through; the listener would accept one that did), the
/// listener must have nothing to accept, and the rule with cookie
/// `drop_cookie` must count the SYNs. A busy machine only makes a timeout
/// likelier: the 3 s are no race. `state` is for failure messages.
pub fn assert_blocked(
    node: &Node,
    client_ns: &Netns,
    server_ns: &Netns,
    to: SocketAddr,
    drop_cookie: u64,
    state: impl Fn() -> String,
) {
    let blocked = server_ns
        .run_in(move || TcpListener::bind(to))
        .expect("listen on the blocked port");
    let drops_before = node.flow_packets(drop_cookie);
    match tcp_connect(client_ns, to, Duration::from_secs(3)) {
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
        other => panic!(
            "connect to {to}, which no rule lets through: {other:?}\n{}",
            state()
        ),
    }
    blocked.set_nonblocking(true).unwrap();
    assert!(
        blocked
            .accept()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the blocked port's listener got a connection"
    );
    assert!(
        wait_until(WAIT, || node.flow_packets(drop_cookie) > drops_before),
        "the blocked SYNs did not reach the drop rule {drop_cookie:#x}\n{}",
        state()
    );
}
