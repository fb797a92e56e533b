//! `nfv-bench`: benchmarks that print figures and ratios.
//!
//! * `switch` — in-process generator → switch → sink (see [`switch`]).
//! * `hop` — the cost of one vhost-user → vhost-user hop through nfvswitch
//!   with a DPDK testpmd endpoint (see [`hop`]).
//! * `compare` — the same endpoint and topology through nfvswitch, OVS-DPDK
//!   and a testpmd "wire", interleaved, with ratios against the targets
//!   (see [`compare`]; `bench/compare` builds and runs it).
//! * `compare-ct` — nfvswitch and OVS-DPDK with the same stateful
//!   firewall (ct, commit, +est) over N connections from testpmd's
//!   flowgen: Mpps, setup rate, x stateless (see [`compare_ct`]).
//! * `starve` — does a VNF posting maximal legal chains starve the other
//!   port of its PMD? In process, on the real device queues (see
//!   [`starve`]).
//! * `kernel-port` — rx and tx Mpps of kernel-interface ports (AF_XDP,
//!   AF_PACKET) over a veth pair into a namespace (see [`kernel_port`];
//!   the namespace traffic is in [`kernel_traffic`]).
//! * `vxlan` — the cycles a VXLAN port adds per packet (encapsulation and
//!   decapsulation), in process over a ring underlay (see [`vxlan`]).
//! * `cni` — CNI ADD time and ADD → first frame forwarded from the new
//!   port, with DPDK testpmd as the pod's application (see [`cni`]).
//! * `vm-tcp` — iperf3 between two QEMU guests through nfvswitch, OVS-DPDK
//!   with userspace TSO and a Linux bridge (see [`vm_tcp`]).
//! * `soak` — minutes of traffic through vhost-user VNFs under VNF kills,
//!   port and rule churn, then leak and panic checks (see [`soak`]);
//!   with `--attacks`, hostile tenants ([`attackers`]) beside them.
//!
//! Layout of `hop`/`compare` (2 CPUs, two busy pollers):
//!
//! ```text
//!  CPU 0: testpmd endpoint, one forwarding lcore
//!         pcap gen ─▶ p1 ┐                 ┌▶ p2 ─io─▶ p3 ┐   ┌▶ p4 ─▶ null sink
//!  CPU 1:                └─ switch PMD ────┘   (VNF 1)    └───┘
//!                           p1→p2, p3→p4, … (vhost-user, switch is the client)
//! ```
//!
//! Everything started is stopped by PID, also on error and Ctrl-C;
//! hugepages set up for OVS are put back; private files live in
//! `/tmp/nfv-bench/<pid>/`.

mod attackers;
mod cni;
mod compare;
mod compare_ct;
mod dut;
mod frame;
mod hop;
mod host;
mod kernel_port;
mod kernel_traffic;
mod kernel_trial;
mod kernel_vnf;
mod openflow;
mod ovs;
mod paired;
mod placement;
mod proc;
mod report;
mod scale;
mod scenario;
mod soak;
mod starve;
mod switch;
mod testpmd;
mod trial;
mod vm_tcp;
mod vxlan;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "nfv-bench", about = "nfvswitch benchmarks: figures and ratios")]
struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// gen → switch → sink in process: 1 rule vs 1,000 rules (and many flows).
    Switch {
        /// Interleaved rounds.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Measured seconds per trial (after 0.5 s warm-up).
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// Frame size in bytes.
        #[arg(long, default_value_t = 64)]
        size: usize,
        /// CPU for the PMD thread (default: the last CPU).
        #[arg(long)]
        core: Option<usize>,
        /// Instead: the cost of PMU counting — 1 rule with the PMD's PMU
        /// counters on and off, interleaved A/B/A/B, medians and the
        /// difference in %.
        #[arg(long)]
        pmu_ab: bool,
    },
    /// The OpenFlow agent: packet-ins a controller receives per second
    /// (`--packet-in`), or what an idle controller connection costs the
    /// forwarding path (`--idle-ab`, interleaved with no OpenFlow).
    Openflow {
        #[arg(long)]
        packet_in: bool,
        #[arg(long)]
        idle_ab: bool,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// `--packet-in`: packets a second the generator offers.
        #[arg(long, default_value_t = 2_000_000)]
        offered: u64,
        #[arg(long)]
        core: Option<usize>,
    },
    /// One vhost→vhost hop through nfvswitch, testpmd endpoint: Mpps, Gbps,
    /// switch cycles/packet and busy %.
    Hop(hop::HopArgs),
    /// nfvswitch vs OVS-DPDK vs a testpmd wire, same endpoint and topology;
    /// medians, cycles/packet and ratios against the targets.
    Compare(compare::CompareArgs),
    /// nfvswitch vs OVS-DPDK with the same stateful firewall rules over N
    /// connections (testpmd flowgen): Mpps, setup rate, x stateless.
    CompareCt(compare_ct::CompareCtArgs),
    /// AF_XDP / AF_PACKET port rx and tx Mpps over veth (needs root).
    KernelPort(kernel_port::KernelPortArgs),
    /// A well-behaved port's throughput while its PMD neighbour posts
    /// maximal chains (in process); ratios against a quiet and a busy
    /// neighbour.
    Starve(starve::StarveArgs),
    /// Soak: traffic through vhost-user VNFs while VNFs are killed and
    /// restarted, ports added and removed and rules churned; then fds,
    /// mappings, RSS, pool fill and panics of the switch (not a CI test);
    /// `--attacks`: then each attack of issue 36 beside the VNFs.
    Soak(soak::SoakArgs),
    /// VXLAN encap and decap cycles/packet, in process over a ring.
    Vxlan(vxlan::VxlanArgs),
    /// CNI ADD wall time and ADD → first frame forwarded from the new port.
    Cni(cni::CniArgs),
    /// The forwarding decision at scale: flows x rules x mask shape, Mpps,
    /// cycles/packet and where decisions came from (EMC, classifier).
    Scale(scale::ScaleArgs),
    /// iperf3 between two QEMU guests through nfvswitch, OVS-DPDK (TSO)
    /// and a Linux bridge: TCP 1 and 4 streams, UDP 64 B pps; ratios.
    VmTcp(vm_tcp::VmTcpArgs),
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Before any thread exists: every thread inherits the blocked mask.
    proc::install_signal_thread();
    let r = match args.cmd {
        Cmd::Openflow {
            packet_in,
            idle_ab,
            rounds,
            seconds,
            offered,
            core,
        } => {
            let mut r = Ok(());
            if packet_in || !idle_ab {
                r = r.and(openflow::packet_in_rate(rounds, seconds, offered));
            }
            if idle_ab || !packet_in {
                r = r.and(openflow::idle_cost(rounds, seconds, core));
            }
            r
        }
        Cmd::Switch {
            rounds,
            seconds,
            size,
            core,
            pmu_ab,
        } => {
            if pmu_ab {
                switch::pmu_ab(rounds, seconds, size, core)
            } else {
                switch::switch(rounds, seconds, size, core)
            }
        }
        Cmd::Hop(a) => hop::hop(a),
        Cmd::Scale(a) => scale::scale(a),
        Cmd::Compare(a) => compare::compare(a),
        Cmd::CompareCt(a) => compare_ct::compare_ct(a),
        Cmd::KernelPort(a) => kernel_port::kernel_port(a),
        Cmd::Starve(a) => starve::starve(a),
        Cmd::Soak(a) => soak::soak(a),
        Cmd::Vxlan(a) => vxlan::vxlan(a),
        Cmd::Cni(a) => cni::cni(a),
        Cmd::VmTcp(a) => vm_tcp::vm_tcp(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nfv-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
