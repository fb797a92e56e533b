//! A guest talking TCP to a host stack in a network namespace through a
//! kernel-facing port added at run time: AF_PACKET on a veth pair, or a
//! TAP interface moved into the namespace. With offloads negotiated, the
//! guest's large TCP segments reach the port whole and go to the kernel
//! behind their virtio-net header (`PACKET_VNET_HDR`, `IFF_VNET_HDR`): the
//! kernel segments them (its GSO) or passes them on, and the port counts
//! them (`tx_gso_frames`).
//!
//! The namespace's side sends with its checksum offload off (`ethtool -K
//! tx off`): its replies must reach the switch with complete checksums,
//! since the AF_PACKET rx ring carries no virtio-net header to say a
//! checksum is partial.

use crate::guest::{Guest, iperf};
use crate::node::Node;
use nfv_testutil::netns::{Netns, Veth, unique_name};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PORT: u16 = 5202;
const SECS: u32 = 3;
const CMD: Duration = Duration::from_secs(30);

/// An iperf3 server for one test in a namespace; killed on drop.
struct Server(Child);

impl Server {
    fn start(ns: &Netns) -> Result<Server, String> {
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name(), "iperf3", "-s", "-1"])
            .args(["-p", &PORT.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("iperf3 server in {}: {e}", ns.name()))?;
        let server = Server(child);
        let listening = nfv_testutil::wait_until(Duration::from_secs(10), || {
            ns.run(&["ss", "-ltnH"])
                .is_ok_and(|s| s.contains(&format!(":{PORT} ")))
        });
        if !listening {
            return Err(format!("iperf3 never listened in {}", ns.name()));
        }
        Ok(server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The host behind one kernel port: its namespace, and the veth pair
/// when there is one (dropped after the port is removed).
struct Host {
    ns: Netns,
    _veth: Option<Veth>,
}

/// Adds port `name` of `kind` ("afpacket" or "tap") with id `id`, whose
/// far side is a namespace at `addr` (CIDR).
fn add_host(node: &Node, kind: &str, name: &str, id: u32, addr: &str) -> Result<Host, String> {
    let ns = Netns::new("nqk")?;
    let (iface, veth) = match kind {
        "afpacket" => {
            let v = Veth::into_ns(&ns, addr)?;
            (v.host.clone(), Some(v))
        }
        _ => (unique_name("nqt"), None),
    };
    node.ctl(&[
        "add-port",
        &format!("name=\"{name}\",id={id},type=\"{kind}\",iface=\"{iface}\""),
    ])?;
    let inner = match &veth {
        Some(v) => v.inner.clone(),
        None => {
            nfv_testutil::netns::run("ip", &["link", "set", &iface, "netns", ns.name()])?;
            ns.run(&["ip", "addr", "add", addr, "dev", &iface])?;
            ns.run(&["ip", "link", "set", &iface, "up"])?;
            iface
        }
    };
    ns.run(&["ethtool", "-K", &inner, "tx", "off"])?;
    Ok(Host { ns, _veth: veth })
}

/// iperf3 TCP from `guest` to a namespace behind a new `kind` port;
/// checked; one line.
pub fn guest_to_host(
    node: &Node,
    guest: &mut Guest,
    kind: &str,
    id: u32,
    addr: &str,
) -> Result<String, String> {
    let name = format!("host-{kind}");
    let host = add_host(node, kind, &name, id, &format!("{addr}/24"))?;
    let result = (|| {
        let _server = Server::start(&host.ns)?;
        let what = format!("iperf3 {} -> {kind} port -> namespace", guest.spec.name);
        let cmd = format!("iperf3 -c {addr} -p {PORT} -t {SECS} -i 0 -J");
        let out = guest.ok(&cmd, CMD + Duration::from_secs(u64::from(SECS)))?;
        let o =
            iperf::parse(&out, &iperf::Run::tcp(1, SECS)).map_err(|e| format!("{what}: {e}"))?;
        o.check_tcp(&what)?;
        let gso = node.info_count(&name, "tx_gso_frames")?;
        let refused = node.info_count(&name, "tx_refused")?;
        if gso == 0 || refused > 0 {
            return Err(format!(
                "{what}: {gso} large segments given to the kernel, {refused} refused: {}",
                node.port(&name)
                    .map(|p| p["info"].to_string())
                    .unwrap_or_else(|e| e)
            ));
        }
        let line = format!(
            "{what}: {}; {gso} large segments to the kernel",
            o.summary()
        );
        println!("    {line}");
        Ok(line)
    })();
    let removed = node.ctl(&["del-port", &name]);
    drop(host);
    let line = result?;
    removed?;
    Ok(line)
}
