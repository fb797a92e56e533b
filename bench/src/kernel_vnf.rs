//! The AF_XDP → VNF hop of `nfv-bench kernel-port` (`--type
//! afxdp-vnf,afxdp-vnf-zc`): frames blasted from a namespace at an AF_XDP
//! port on a veth are received and sent into a vhost-user port whose VNF
//! is DPDK testpmd (`rxonly`, virtio-user), by one pinned thread that does
//! what a PMD does for this hop: `rx_burst` on the AF_XDP queue, then
//! `tx_burst` of the same batch into the vhost-user port. The switch's
//! flow decision is left out: it is the same in both modes.
//!
//! `afxdp-vnf` copies as the switch always did (kernel → UMEM frame →
//! pool packet → guest buffer: two switch copies); `afxdp-vnf-zc` sets
//! `zero_copy` on the AF_XDP port, so the kernel writes each frame
//! straight into testpmd's receive buffer and the switch writes only the
//! virtio-net header and the used entry. The figure to compare is the
//! switch's TSC cycles per delivered packet (inside both bursts); Mpps is
//! what reached the guest, usually bounded by the namespace sender on veth.
//!
//! The other way (`--type vnf-afxdp,vnf-afxdp-zc`): testpmd `txonly` sends
//! frames of `--size` bytes; the thread does `rx_burst` on the vhost-user
//! port (one-copy: frames over 256 B come split, the tail in testpmd's
//! buffer), `tx_burst` on the AF_XDP port, then ends the rx burst.
//! `vnf-afxdp` copies head and tail into an own UMEM frame; `vnf-afxdp-zc`
//! (the AF_XDP port's `zero_copy` names the VNF) copies the 128-byte head
//! and lets the kernel read the tail from testpmd's buffer. Mpps is what
//! the AF_XDP port sent.

use crate::kernel_traffic::{Sender, Wire};
use crate::kernel_trial::{KernelPortArgs, Poller, Trial, measure, moved, pool};

use crate::{host, proc};
use nfv_afxdp::{AfXdpConfig, XdpBindMode};
use nfv_mem::Batch;
use nfv_ports::{Port, PortConfig, PortKind};
use nfv_vhost::{VhostUserConfig, VhostUserMode, VhostUserPort};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// The name the AF_XDP port's `zero_copy` refers to.
const VNF_PORT: &str = "bench-zc-vnf";

pub fn vnf_trial(
    zero_copy: bool,
    from_vnf: bool,
    a: &KernelPortArgs,
    cores: (usize, usize),
) -> Result<Trial, String> {
    let Some(testpmd) = host::which("dpdk-testpmd") else {
        return Err("dpdk-testpmd is not installed (apt-get install dpdk-dev)".into());
    };
    let dir = host::run_dir()?;
    let sock = dir.join("zc-vnf.sock");
    let _ = std::fs::remove_file(&sock);
    let wire = Wire::new()?;
    let vhost: Arc<VhostUserPort> = VhostUserPort::open(
        VNF_PORT,
        &VhostUserConfig::new(&sock, VhostUserMode::Client),
    )
    .map_err(|e| e.to_string())?;
    let port = afxdp_port(wire.host(), zero_copy, &vhost)?;
    let mut vnf = spawn_vnf(&testpmd, &sock, &dir, from_vnf, a.size, cores.1)?;
    wait_ready(&vhost, port.as_ref(), &mut vnf, &dir)?;
    let pool = pool()?;
    let poller = start_poller(from_vnf, &vhost, &port, &pool, a, cores.0);
    let sender = if from_vnf {
        None
    } else {
        Some(Sender::start_paced(
            wire.ns.name(),
            &wire.veth.inner,
            crate::kernel_trial::frame(a.size),
            Some(cores.1),
            a.rate_kpps.map(|k| k * 1e3),
        )?)
    };
    let before = port.gauges();
    let vnf_before = vhost.gauges();
    let [delivered, busy, offered] = measure(a.seconds, || {
        let sent = sender.as_ref().map_or(0, |s| s.sent());
        Ok([poller.count(), poller.busy(), sent])
    })?;
    let after = port.gauges();
    let vnf_after = vhost.gauges();
    if let Some(s) = sender {
        s.stop()?;
    }
    drop(poller);
    let mode = after.text("rx_mode").unwrap_or_else(|| "copy".into());
    vnf.stop();
    let offered = if from_vnf {
        "testpmd txonly".to_string()
    } else {
        format!("sender offered {:.3} Mpps", offered / 1e6)
    };
    Ok(Trial {
        mpps: delivered / 1e6,
        cycles: busy / delivered,
        // Both ports' counters that moved: what the AF_XDP queue did,
        // and where frames that did not reach the VNF went (a full ring).
        detail: format!(
            "{offered}, {mode}{}{}",
            moved(&before, &after),
            moved(&vnf_before, &vnf_after).replace("; port counters", "; VNF port counters")
        ),
        c2c_ns: None,
    })
}

/// The AF_XDP port on the veth's host end (copy-mode bind); with
/// `zero_copy`, receiving into the VNF's buffers and sending in place.
fn afxdp_port(
    iface: &str,
    zero_copy: bool,
    vhost: &nfv_vhost::VhostUserPort,
) -> Result<Arc<dyn Port>, String> {
    let mut x = AfXdpConfig::new(iface);
    x.mode = XdpBindMode::Copy;
    if zero_copy {
        x.zero_copy = nfv_afxdp::ZeroCopy::Into(VNF_PORT.to_string());
        // veth binds in copy mode, where `auto` would not send in place.
        x.send_in_place = nfv_afxdp::SendInPlace::On;
    }
    let cfg = PortConfig {
        name: "bench-afxdp".into(),
        id: 1,
        rxqs: 1,
        kind: PortKind::typed(x),
    };
    // The AF_XDP port finds the VNF port it borrows from where a node
    // would put it: in the lenders it is opened with.
    let lenders: Arc<nfv_ports::Lenders> = Arc::default();
    lenders.add(&vhost.lender());
    nfv_afxdp::open_with(&cfg, Arc::new(nfv_ports::NoRoutes), &lenders).map_err(|e| e.to_string())
}

/// The VNF: testpmd on virtio-user, serving `sock`, pinned to `cpu`;
/// `txonly` frames of `size` bytes (`from_vnf`) or `rxonly`.
fn spawn_vnf(
    testpmd: &Path,
    sock: &Path,
    dir: &Path,
    from_vnf: bool,
    size: usize,
    cpu: usize,
) -> Result<proc::Proc, String> {
    let mut cmd = Command::new(testpmd);
    cmd.args([
        "--no-pci",
        "--no-huge",
        "-m",
        "512",
        &format!("--file-prefix=nfvzc{}", std::process::id()),
        &format!("--lcores=0@{c},1@{c}", c = cpu),
        &format!(
            "--vdev=net_virtio_user0,path={},server=1,queues=1,mrg_rxbuf=1,queue_size=1024",
            sock.display()
        ),
        "--",
        if from_vnf {
            "--forward-mode=txonly"
        } else {
            "--forward-mode=rxonly"
        },
        &format!("--txpkts={size}"),
        "--nb-cores=1",
        "--total-num-mbufs=16384",
        "--no-lsc-interrupt",
        "--stats-period",
        "10",
    ]);
    proc::Proc::spawn(
        "testpmd",
        cmd,
        &dir.join("zc-vnf.log"),
        nix::sys::signal::Signal::SIGINT,
    )
}

/// Waits (30 s at most) until the VNF is connected and the AF_XDP port
/// receives as asked (in zero-copy mode when it lends).
fn wait_ready(
    vhost: &VhostUserPort,
    port: &dyn Port,
    vnf: &mut proc::Proc,
    dir: &Path,
) -> Result<(), String> {
    let ready = |p: &dyn Port| -> bool {
        let g = p.gauges();
        g.text("rx_mode").is_none_or(|m| m.starts_with("zero-copy"))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !(vhost.gauges().connected == Some(true) && ready(port)) {
        vnf.ensure_alive()?;
        if std::time::Instant::now() > deadline {
            return Err(format!(
                "the VNF never became ready (connected {:?}, rx_mode {:?}); see {}",
                vhost.gauges().connected,
                port.gauges().text("rx_mode"),
                dir.join("zc-vnf.log").display()
            ));
        }
        proc::sleep(Duration::from_millis(100))?;
    }
    Ok(())
}

/// The pinned thread on `cpu` that does the hop: `rx_burst` on one port,
/// `tx_burst` of the batch on the other (VNF → AF_XDP when `from_vnf`).
fn start_poller(
    from_vnf: bool,
    vhost: &Arc<VhostUserPort>,
    port: &Arc<dyn Port>,
    pool: &Arc<nfv_mem::PacketPool>,
    a: &KernelPortArgs,
    cpu: usize,
) -> Poller {
    let (mut rxq, mut txq) = if from_vnf {
        (vhost.open_rxq(0), port.open_txq(0))
    } else {
        (port.open_rxq(0), vhost.open_txq(0))
    };
    let mut cache = pool.cache();
    let gap = a.poll_gap_us.map(Duration::from_micros);
    Poller::start_with_gap(cpu, gap, move || {
        let mut b = Batch::new();
        let t0 = nfv_tsc::now();
        let n = rxq.rx_burst(&mut b, &mut cache);
        if n == 0 {
            // With a gap every poll counts (see `--poll-gap-us`).
            return (
                0,
                if gap.is_some() {
                    nfv_tsc::now() - t0
                } else {
                    0
                },
            );
        }
        let sent = txq.tx_burst(&mut b, &mut cache);
        cache.free_batch(&mut b);
        // Split packets' chains go back (or stay kept for sends in place).
        rxq.burst_done();
        (sent, nfv_tsc::now() - t0)
    })
}
