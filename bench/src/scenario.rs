//! The switches of the comparison and what each needs before it
//! can run (binaries, packages, hugepages). A scenario that cannot be set
//! up is SKIPPED with the reason; the others still run.

use crate::dut::{Dut, Layout, NfvSwitch, Wire};
use crate::proc;
use crate::testpmd::Vnif;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// nfvswitch (`nfvswitch run`, vhost-user client ports), as it runs
    /// by default: one copy per vhost-user hop.
    Nfvswitch,
    /// The same nfvswitch with every port's `one_copy = false`: frames
    /// copied into the switch's pool and out again (two copies per hop),
    /// for A/B against the default.
    NfvswitchCopy,
    /// nfvswitch as by default, the endpoint's virtio-user ports asking
    /// for packed virtqueues (`packed_vq=1`): the packed-ring hop.
    NfvswitchPacked,
    /// nfvswitch with memif ports (client role) to the endpoint's
    /// net_memif servers instead of vhost-user: the memif hop.
    NfvswitchMemif,
    /// The memif scenario with `one_copy = false` (every frame through
    /// the switch's pool), for A/B.
    NfvswitchMemifCopy,
    /// OVS-DPDK 3.1, netdev bridge, dpdkvhostuserclient ports.
    Ovs,
    /// testpmd io forwarding on net_vhost client ports (no switch).
    Wire,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Nfvswitch => "nfvswitch",
            Scenario::NfvswitchCopy => "nfvswitch (copy)",
            Scenario::NfvswitchPacked => "nfvswitch (packed)",
            Scenario::NfvswitchMemif => "nfvswitch (memif)",
            Scenario::NfvswitchMemifCopy => "nfvswitch (memif copy)",
            Scenario::Ovs => "ovs-dpdk",
            Scenario::Wire => "wire (testpmd)",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Scenario::Nfvswitch => "nfv",
            Scenario::NfvswitchCopy => "nfvc",
            Scenario::NfvswitchPacked => "nfvp",
            Scenario::NfvswitchMemif => "nfvm",
            Scenario::NfvswitchMemifCopy => "nfvmc",
            Scenario::Ovs => "ovs",
            Scenario::Wire => "wire",
        }
    }

    /// How the endpoint's ports reach this scenario's switch.
    pub fn vnif(self) -> Vnif {
        match self {
            Scenario::NfvswitchMemif | Scenario::NfvswitchMemifCopy => Vnif::Memif,
            Scenario::NfvswitchPacked => Vnif::VhostPacked,
            _ => Vnif::Vhost,
        }
    }

    /// Starts the switch of this scenario.
    pub fn start(self, nfvswitch: &Path, lay: &Layout) -> Result<Box<dyn Dut>, String> {
        Ok(match self {
            Scenario::Nfvswitch | Scenario::NfvswitchPacked => {
                let layout = if lay.packed { "packed" } else { "split" };
                Box::new(NfvSwitch::start(nfvswitch, lay, true)?.expecting_layout(layout))
            }
            Scenario::NfvswitchCopy => Box::new(NfvSwitch::start(nfvswitch, lay, false)?),
            Scenario::NfvswitchMemif => Box::new(NfvSwitch::start_memif(nfvswitch, lay, true)?),
            Scenario::NfvswitchMemifCopy => {
                Box::new(NfvSwitch::start_memif(nfvswitch, lay, false)?)
            }
            Scenario::Ovs => Box::new(crate::ovs::Ovs::start(lay)?),
            Scenario::Wire => Box::new(Wire::start(lay)?),
        })
    }
}

/// The endpoint (and the wire) need testpmd: Debian puts it in `dpdk-dev`.
pub fn ensure_testpmd() -> Result<(), String> {
    crate::host::ensure_packages(&[("dpdk-testpmd", "dpdk-dev")])
}

/// The release `nfvswitch` binary: `--nfvswitch`, else next to this
/// binary when it is a release build, else the workspace's
/// target/release; built with cargo when missing.
pub fn nfvswitch_binary(arg: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = arg {
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{}: no such file", p.display()))
        };
    }
    let workspace = crate::host::checkout();
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .filter(|d| d.file_name().is_some_and(|n| n == "release"));
    let target = sibling.unwrap_or_else(|| workspace.join("target/release"));
    let bin = target.join("nfvswitch");
    if bin.is_file() {
        return Ok(bin);
    }
    eprintln!(
        "nfv-bench: {} missing: cargo build --release -p nfvswitch",
        bin.display()
    );
    let mut c = Command::new("cargo");
    c.current_dir(&workspace)
        .args(["build", "--release", "-p", "nfvswitch"]);
    let o = proc::run(c, Duration::from_secs(1800))?;
    if !o.ok() || !bin.is_file() {
        return Err(format!(
            "cargo build --release -p nfvswitch failed:\n{}",
            o.stderr
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    Ok(bin)
}

/// Copies the binary under test into the run directory and describes
/// where it came from (path, build time, `git describe` of its tree).
pub fn snapshot(bin: &Path, run_dir: &Path) -> Result<(PathBuf, String), String> {
    let copy = run_dir.join("nfvswitch");
    std::fs::copy(bin, &copy).map_err(|e| format!("copy {}: {e}", bin.display()))?;
    let built = std::fs::metadata(bin)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .map_or("?".into(), |d| {
            format!("built {:.0} min ago", d.as_secs_f64() / 60.0)
        });
    let mut c = Command::new("git");
    c.arg("-C")
        .arg(crate::host::checkout())
        .args(["describe", "--always", "--dirty"]);
    let rev = proc::run(c, Duration::from_secs(10))
        .ok()
        .filter(|o| o.ok())
        .map_or("?".into(), |o| o.stdout.trim().to_string());
    Ok((copy, format!("{} ({built}, tree {rev})", bin.display())))
}
