//! DPDK testpmd as the endpoint (generator + VNFs + sink in one process)
//! and as the "wire" (a lookup-free vhost-user forwarder standing in for
//! the switch), and the parser of its `--stats-period 1` output.
//!
//! The endpoint ("combined" layout, see ../../shared/peers/NOTES.md pitfalls
//! 10, 14-16): one forwarding lcore on `ep_cpu` runs every stream of a
//! chained topology over the ports
//!
//! ```text
//!   0 = net_pcap (replays one frame for ever)   generator: 0 -> 1
//!   1..=n = virtio-user p1..pn (server=1)        VNF j: p(2j) -> p(2j+1), io forwarding
//!   n+1 = net_null (no-rx)                       sink: pn -> n+1
//! ```
//!
//! and the switch forwards p(2j-1) -> p(2j). The sink rate is port n's
//! `Rx-pps` (frames the switch delivered on the last hop). The main lcore
//! (asleep in the stats loop) shares the switch's CPU.

use std::path::Path;

/// Memory for testpmd's EAL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mem {
    /// 2 MiB hugepages, nothing left in /var/run/dpdk.
    Huge,
    /// 4 KiB pages (`--no-huge`); leaves /var/run/dpdk/<prefix> to remove.
    NoHuge,
}

fn eal(prefix: &str, mem: Mem, main_cpu: usize, fwd_cpu: usize) -> Vec<String> {
    let mut a: Vec<String> = vec!["--no-pci".into()];
    match mem {
        // --single-file-segments: vhost-user carries at most 8 memory regions.
        Mem::Huge => {
            a.extend(["--in-memory", "--single-file-segments", "-m", "256"].map(String::from))
        }
        // --in-memory is refused together with --no-huge.
        Mem::NoHuge => a.extend(["--no-huge", "-m", "512"].map(String::from)),
    }
    a.push(format!("--file-prefix={prefix}"));
    // lcore 0 = main lcore, lcore 1 = the forwarding lcore.
    a.push(format!("--lcores=0@{main_cpu},1@{fwd_cpu}"));
    a
}

fn fwd(topology: &str) -> Vec<String> {
    [
        "--",
        "--forward-mode=io",
        &format!("--port-topology={topology}"),
        "--nb-cores=1",
        "--stats-period=1",
        "--total-num-mbufs=16384",
        "--no-lsc-interrupt",
    ]
    .map(String::from)
    .to_vec()
}

/// The socket of switch port `p<i>` in `sock_dir`.
pub fn sock(sock_dir: &Path, i: usize) -> String {
    format!("{}/p{i}.sock", sock_dir.display())
}

/// How the endpoint's ports p1..pn reach the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vnif {
    /// virtio-user `server=1`: the switch connects as vhost-user client.
    Vhost,
    /// The same with `packed_vq=1`: packed virtqueues.
    VhostPacked,
    /// net_memif `role=server` on a socket file: the switch connects as
    /// memif client (and owns the memory).
    Memif,
}

/// Arguments of the endpoint with `nports` virtio-user (or memif) ports.
#[allow(clippy::too_many_arguments)]
pub fn endpoint_args(
    prefix: &str,
    mem: Mem,
    pcap: &Path,
    sock_dir: &Path,
    nports: usize,
    ep_cpu: usize,
    main_cpu: usize,
    vnif: Vnif,
) -> Vec<String> {
    let mut a = eal(prefix, mem, main_cpu, ep_cpu);
    a.push(format!(
        "--vdev=net_pcap0,rx_pcap={},infinite_rx=1",
        pcap.display()
    ));
    for i in 1..=nports {
        a.push(match vnif {
            Vnif::Vhost => format!(
                "--vdev=net_virtio_user{i},path={},server=1,queues=1",
                sock(sock_dir, i)
            ),
            Vnif::VhostPacked => format!(
                "--vdev=net_virtio_user{i},path={},server=1,queues=1,packed_vq=1",
                sock(sock_dir, i)
            ),
            Vnif::Memif => format!(
                "--vdev=net_memif{i},role=server,socket={},socket-abstract=no,id=0",
                sock(sock_dir, i)
            ),
        });
    }
    a.push("--vdev=net_null0,no-rx=1".into());
    a.extend(fwd("chained"));
    a
}

/// testpmd commands (for `--cmdline-file`, run after the ports started
/// and before forwarding starts) that turn on checksum and TSO offloads on
/// the endpoint's virtio-user ports `1..=nports`: restarted, each then
/// negotiates CSUM and HOST_TSO4/6 (tx) and GUEST_CSUM and GUEST_TSO4/6
/// (rx: checksums and LRO) with the switch. Only those ports: the pcap
/// generator and the null sink have no such offloads, and a global
/// `--tx-offloads` would make their configuration fail.
pub fn offload_commands(nports: usize) -> String {
    let mut c = String::new();
    for p in 1..=nports {
        c.push_str(&format!("port stop {p}\n"));
        for o in ["udp_cksum", "tcp_cksum", "tcp_tso"] {
            c.push_str(&format!("port config {p} tx_offload {o} on\n"));
        }
        for o in ["udp_cksum", "tcp_cksum", "tcp_lro"] {
            c.push_str(&format!("port config {p} rx_offload {o} on\n"));
        }
        c.push_str(&format!("port start {p}\n"));
    }
    c
}

/// Arguments of a many-flow endpoint (`compare-ct`): one virtio-user port
/// p1 (`server=1`, port 0) and testpmd's `flowgen` engine on `ep_cpu`,
/// looping on that port (`--port-topology=loop`): it sends IPv4/UDP
/// frames of `size` bytes (flowgen takes 4 off `--txpkts` for the FCS)
/// over `flows` flows, which differ only in the destination address
/// (10.253.0.0 + flow number, one packet per flow in turn; source
/// 10.254.0.0, UDP ports 1000 -> 1001), and counts and drops what comes
/// back on the port.
pub fn flowgen_args(
    prefix: &str,
    mem: Mem,
    sock_dir: &Path,
    size: usize,
    flows: u32,
    ep_cpu: usize,
    main_cpu: usize,
) -> Vec<String> {
    let mut a = eal(prefix, mem, main_cpu, ep_cpu);
    a.push(format!(
        "--vdev=net_virtio_user1,path={},server=1,queues=1",
        sock(sock_dir, 1)
    ));
    a.extend([
        "--".into(),
        "--forward-mode=flowgen".into(),
        format!("--flowgen-flows={flows}"),
        format!("--txpkts={}", size + 4),
        "--port-topology=loop".into(),
        "--nb-cores=1".into(),
        "--stats-period=1".into(),
        "--total-num-mbufs=16384".into(),
        "--no-lsc-interrupt".into(),
    ]);
    a
}

/// The testpmd port whose Rx-pps is the sink rate.
pub fn sink_port(nports: usize) -> usize {
    nports
}

/// Arguments of the "wire": net_vhost ports p1..pn as vhost-user clients
/// (they reconnect until the endpoint's sockets exist), io forwarding
/// p(2j-1) <-> p(2j) ("paired"), forwarding lcore on `cpu`.
pub fn wire_args(
    prefix: &str,
    mem: Mem,
    sock_dir: &Path,
    nports: usize,
    cpu: usize,
    main_cpu: usize,
) -> Vec<String> {
    let mut a = eal(prefix, mem, main_cpu, cpu);
    for i in 1..=nports {
        a.push(format!(
            "--vdev=net_vhost{i},iface={},client=1,queues=1",
            sock(sock_dir, i)
        ));
    }
    a.extend(fwd("paired"));
    a
}

/// The `Rx-pps` samples of `port` in a `--stats-period` log, in Mpps,
/// from the first non-zero one on (before it traffic had not started).
pub fn rx_samples(log: &str, port: usize) -> Vec<f64> {
    let head = format!("NIC statistics for port {port} ");
    let mut out = Vec::new();
    for block in log.split("Port statistics ====").skip(1) {
        let Some(at) = block.find(&head) else {
            continue;
        };
        let rest = &block[at..];
        // The port's section ends at the next "NIC statistics" header.
        let end = rest[head.len()..]
            .find("NIC statistics for port")
            .map_or(rest.len(), |e| e + head.len());
        let Some(k) = rest[..end].find("Rx-pps:") else {
            continue;
        };
        // Only a complete line ("Rx-pps: N  Rx-bps: M"): the log may be
        // read while testpmd is still writing it.
        let mut words = rest[k + 7..end].split_whitespace();
        let (Some(v), Some("Rx-bps:")) = (
            words.next().and_then(|v| v.parse::<u64>().ok()),
            words.next(),
        ) else {
            continue;
        };
        out.push(v as f64 / 1e6);
    }
    let first = out.iter().position(|&v| v > 0.0).unwrap_or(out.len());
    out.split_off(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\x1b[2J\x1b[1;1H
Port statistics ====================================
  ######################## NIC statistics for port 0  ########################
  RX-packets: 356896     RX-missed: 0          RX-bytes:  22841344
  Throughput (since last show)
  Rx-pps:            5          Rx-bps:            0
  Tx-pps:            0          Tx-bps:            0
  ############################################################################

  ######################## NIC statistics for port 2  ########################
  RX-packets: 0          RX-missed: 0          RX-bytes:  0
  Throughput (since last show)
  Rx-pps:            0          Rx-bps:            0
  ############################################################################
\x1b[2J\x1b[1;1H
Port statistics ====================================
  ######################## NIC statistics for port 2  ########################
  Throughput (since last show)
  Rx-pps:      7344906          Rx-bps:   3760592016
\x1b[2J\x1b[1;1H
Port statistics ====================================
  ######################## NIC statistics for port 2  ########################
  Throughput (since last show)
  Rx-pps:      2000000          Rx-bps:   3760592016
  ######################## NIC statistics for port 3  ########################
  Rx-pps:      9          Rx-bps:   3760592016
\x1b[2J\x1b[1;1H
Port statistics ====================================
  ######################## NIC statistics for port 2  ####
  Rx-pps:      73";

    #[test]
    fn samples_of_one_port_from_the_first_nonzero_on() {
        assert_eq!(rx_samples(LOG, 2), vec![7.344906, 2.0]);
        assert_eq!(rx_samples(LOG, 0), vec![5e-6]);
        assert_eq!(rx_samples(LOG, 3), vec![9e-6]);
        assert!(rx_samples(LOG, 1).is_empty());
    }

    #[test]
    fn port_10_is_not_port_1() {
        let log = "Port statistics ====\n NIC statistics for port 10  ##\n Rx-pps: 5 Rx-bps: 1\n";
        assert!(rx_samples(log, 1).is_empty());
        assert_eq!(rx_samples(log, 10), vec![5e-6]);
    }

    #[test]
    fn offloads_only_on_the_virtio_user_ports() {
        let c = offload_commands(2);
        assert!(c.starts_with("port stop 1\n"));
        assert!(c.contains("port config 2 tx_offload tcp_tso on\n"));
        assert!(c.contains("port config 1 rx_offload tcp_lro on\n"));
        assert!(c.ends_with("port start 2\n"));
        // Port 0 (pcap) and 3 (null) are left alone.
        assert!(!c.contains(" 0 ") && !c.contains(" 3 "));
    }

    #[test]
    fn flowgen_endpoint_loops_on_one_port() {
        let s = flowgen_args("x", Mem::Huge, Path::new("/s"), 64, 1000, 0, 1).join(" ");
        assert!(s.contains("--lcores=0@1,1@0"));
        assert!(s.contains("--vdev=net_virtio_user1,path=/s/p1.sock,server=1,queues=1"));
        assert!(!s.contains("net_virtio_user2") && !s.contains("net_pcap"));
        for a in [
            "--forward-mode=flowgen",
            "--flowgen-flows=1000",
            "--txpkts=68",
            "--port-topology=loop",
        ] {
            assert!(s.contains(a), "{a}: {s}");
        }
    }

    #[test]
    fn endpoint_ports_and_cpus() {
        let a = endpoint_args(
            "x",
            Mem::NoHuge,
            Path::new("/f.pcap"),
            Path::new("/s"),
            2,
            0,
            1,
            Vnif::Vhost,
        );
        let s = a.join(" ");
        assert!(s.contains("--lcores=0@1,1@0"));
        assert!(s.contains("--vdev=net_virtio_user2,path=/s/p2.sock,server=1,queues=1"));
        assert!(s.contains("--port-topology=chained"));
        assert!(s.find("net_pcap0").unwrap() < s.find("net_virtio_user1").unwrap());
        assert!(s.find("net_virtio_user2").unwrap() < s.find("net_null0").unwrap());
        assert_eq!(sink_port(2), 2);
        let m = endpoint_args(
            "x",
            Mem::NoHuge,
            Path::new("/f.pcap"),
            Path::new("/s"),
            2,
            0,
            1,
            Vnif::Memif,
        )
        .join(" ");
        assert!(
            m.contains("--vdev=net_memif2,role=server,socket=/s/p2.sock,socket-abstract=no,id=0")
        );
    }
}
