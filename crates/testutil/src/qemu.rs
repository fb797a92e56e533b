//! A QEMU guest with one virtio-net NIC (vhost-user, or a tap), driven
//! through a shell on its second serial port: the guests of the QEMU
//! tests (`crates/cli/tests/qemu*.rs`) and of `nfv-bench vm-tcp`. The
//! image (kernel + initramfs with busybox, ethtool and iperf3) comes from
//! `scripts/qemu-guest`. The kernel console (first serial port) goes to a
//! file kept for diagnostics. The QEMU process is killed and reaped on
//! drop. A QEMU may also be started with a QMP socket and as the
//! destination of a live migration ([`Extras`], [`Guest::incoming`]).
//!
//! Guests run under TCG unless [`Image::probe_accel`] found that a KVM
//! guest boots on this machine (on some hosts `/dev/kvm` opens but a KVM
//! guest hangs before its first console line).

mod console;
pub mod iperf;

pub use console::Console;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How QEMU runs the guest's CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// Emulated (TCG): works everywhere, ~10-50x slower than the host.
    Tcg,
    Kvm,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        }
    }
}

/// What `scripts/qemu-guest` prepared: the QEMU binary, kernel and initrd,
/// and the accelerator guests are started with.
#[derive(Clone, Debug)]
pub struct Image {
    pub qemu: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// TCG as found; [`Image::probe_accel`] may make it KVM.
    pub accel: Accel,
}

/// How long a KVM probe guest may take to say it is up (it takes ~1 s
/// where KVM works).
const KVM_PROBE: Duration = Duration::from_secs(10);

impl Image {
    /// Asks `scripts/qemu-guest --cached` for the cached guest; the error
    /// is the script's reason (turned into SKIPPED by the caller).
    pub fn find() -> Result<Image, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/qemu-guest");
        let out = Command::new("bash")
            .arg(&script)
            .arg("--cached")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .map(PathBuf::from)
                .ok_or_else(|| format!("scripts/qemu-guest printed no {k}=: {text}"))
        };
        Ok(Image {
            qemu: field("qemu")?,
            kernel: field("kernel")?,
            initrd: field("initrd")?,
            accel: Accel::Tcg,
        })
    }

    /// KVM if a probe guest (no NIC) boots with it to its init within
    /// [`KVM_PROBE`], else TCG; with the reason, for the log. The answer
    /// is kept next to the kernel for this boot of the host
    /// (`/proc/sys/kernel/random/boot_id`), so only the first test or
    /// bench after a reboot pays for the probe.
    pub fn probe_accel(mut self, dir: &Path) -> (Image, String) {
        let (accel, why) = self.probe(dir);
        self.accel = accel;
        (self, why)
    }

    fn probe(&self, dir: &Path) -> (Accel, String) {
        if let Err(e) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
        {
            return (Accel::Tcg, format!("TCG: /dev/kvm: {e}"));
        }
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .unwrap_or_default()
            .trim()
            .to_string();
        let record = self.kernel.with_file_name("accel-probe");
        let key = format!("{boot_id} {}", self.qemu.display());
        if let Ok(s) = std::fs::read_to_string(&record)
            && let Some((k, rest)) = s.split_once('\n')
            && k == key
        {
            let accel = if rest.starts_with("KVM") {
                Accel::Kvm
            } else {
                Accel::Tcg
            };
            return (accel, format!("{} (probed earlier this boot)", rest.trim()));
        }
        let (accel, why) = self.probe_boot(dir);
        let _ = std::fs::write(&record, format!("{key}\n{why}\n"));
        (accel, why)
    }

    fn probe_boot(&self, dir: &Path) -> (Accel, String) {
        let log = dir.join("kvm-probe-console.log");
        let _ = std::fs::remove_file(&log);
        let mut args = machine_args(Accel::Kvm);
        args.extend([
            "-kernel".into(),
            self.kernel.display().to_string(),
            "-initrd".into(),
            self.initrd.display().to_string(),
            "-append".into(),
            "console=ttyS0 panic=-1 quiet no_timer_check".into(),
            "-serial".into(),
            format!("file:{}", log.display()),
        ]);
        let child = Command::new(&self.qemu)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => return (Accel::Tcg, format!("TCG: cannot start the KVM probe: {e}")),
        };
        let t = Instant::now();
        let up = crate::wait_until(KVM_PROBE, || {
            std::fs::read_to_string(&log).is_ok_and(|s| s.contains("NFV-GUEST-UP"))
                || matches!(child.try_wait(), Ok(Some(_)))
        });
        let booted = std::fs::read_to_string(&log).is_ok_and(|s| s.contains("NFV-GUEST-UP"));
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_file(&log);
        match (up, booted) {
            (_, true) => (
                Accel::Kvm,
                format!(
                    "KVM: a probe guest booted in {:.1} s",
                    t.elapsed().as_secs_f64()
                ),
            ),
            (true, false) => (Accel::Tcg, "TCG: the KVM probe QEMU exited".into()),
            (false, false) => (
                Accel::Tcg,
                format!("TCG: a KVM probe guest did not boot within {KVM_PROBE:?}"),
            ),
        }
    }
}

/// How one guest is started.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: &'static str,
    pub mac: &'static str,
    /// Address with prefix, e.g. "198.18.0.1/24".
    pub ip: &'static str,
    /// The vhost-user socket.
    pub socket: PathBuf,
    /// QEMU serves the vhost-user socket (`server=on`) and the switch
    /// connects; otherwise QEMU connects to the switch.
    pub qemu_server: bool,
    pub queues: u16,
    /// `mrg_rxbuf=off` on the device when false.
    pub mrg_rxbuf: bool,
    /// `packed=on`: the guest driver uses packed virtqueues.
    pub packed: bool,
}

impl Spec {
    /// The address without the prefix length.
    pub fn addr(&self) -> &'static str {
        self.ip.split('/').next().unwrap_or(self.ip)
    }
}

/// What a QEMU is started with beyond its [`Spec`]; nothing by default
/// (as `qemu.rs` starts its guests).
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// `-qmp unix:PATH,server=on,wait=off`.
    pub qmp: Option<PathBuf>,
    /// `-incoming URI` (e.g. `unix:PATH`): the QEMU waits, stopped, for a
    /// migration stream instead of booting, and stays paused after it
    /// (`-S`, as libvirt starts destinations) until told `cont`: the
    /// migrated memory can be looked at before the guest changes it.
    pub incoming: Option<String>,
}

/// The NIC's backend and the QEMU process's placement, beyond [`Spec`]
/// and [`Extras`]; by default a vhost-user NIC as the device's defaults
/// make it, QEMU on any CPU.
#[derive(Clone, Debug, Default)]
pub struct Launch {
    /// More `virtio-net-pci` options, e.g. [`NO_OFFLOADS`].
    pub device: Option<String>,
    /// A tap instead of vhost-user ([`Spec::socket`], `qemu_server` and
    /// `queues` are then unused).
    pub tap: Option<Tap>,
    /// The CPU the guest's vCPU thread runs on (QEMU's other threads —
    /// main loop, I/O — run anywhere).
    pub vcpu_cpu: Option<usize>,
}

/// `-netdev tap`: an existing tap interface (made `vnet_hdr`), with the
/// kernel's vhost-net doing the data path when `vhost`.
#[derive(Clone, Debug)]
pub struct Tap {
    pub ifname: String,
    pub vhost: bool,
}

/// virtio-net-pci options that take every checksum and segmentation
/// offload away from the device, in both directions: the guest computes
/// every checksum and segments every TCP stream itself, and receives only
/// frames that fit its MTU with checksums filled in.
pub const NO_OFFLOADS: &str = "csum=off,guest_csum=off,gso=off,host_tso4=off,host_tso6=off,\
host_ecn=off,host_ufo=off,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off";

/// A running QEMU with its serial console connected.
pub struct Guest {
    pub spec: Spec,
    child: Child,
    pub console: Console,
    pub console_log: PathBuf,
    qemu_log: PathBuf,
    serial: PathBuf,
    /// Seconds from QEMU's start to the guest's shell answering.
    pub boot_secs: f64,
    /// The QMP socket, when started with one.
    pub qmp: Option<PathBuf>,
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Guest {
    /// Starts QEMU and waits (at most `boot`) until the guest's shell
    /// answers on the serial port.
    pub fn boot(image: &Image, spec: Spec, dir: &Path, boot: Duration) -> Result<Guest, String> {
        Guest::launch(
            image,
            spec,
            dir,
            boot,
            Extras::default(),
            &Launch::default(),
        )
    }

    /// [`Guest::boot`] with `extras` on QEMU's command line.
    pub fn boot_with(
        image: &Image,
        spec: Spec,
        dir: &Path,
        boot: Duration,
        extras: Extras,
    ) -> Result<Guest, String> {
        Guest::launch(image, spec, dir, boot, extras, &Launch::default())
    }

    /// [`Guest::boot_with`] with the NIC and placement of `launch`.
    pub fn launch(
        image: &Image,
        spec: Spec,
        dir: &Path,
        boot: Duration,
        extras: Extras,
        launch: &Launch,
    ) -> Result<Guest, String> {
        let started = Instant::now();
        let mut guest = Guest::spawn(image, spec, dir, extras, launch)?;
        let deadline = started + boot;
        // A guest that never answers takes its QEMU down with it (drop), so
        // its console and QEMU's words go into the error.
        if let Err(e) = guest.connect_console(deadline) {
            return Err(guest.failed(e));
        }
        if let Err(e) = guest.console.wait_ready(deadline) {
            return Err(guest.failed(e));
        }
        guest.boot_secs = started.elapsed().as_secs_f64();
        Ok(guest)
    }

    /// Starts QEMU as a migration destination (`extras.incoming` must be
    /// set) and connects its serial console, without waiting for a shell:
    /// there is none until the migrated guest runs here
    /// ([`Guest::wait_shell`]). Fails when QEMU exits at start (e.g. its
    /// vhost-user socket has no switch behind it), with QEMU's words.
    pub fn incoming(
        image: &Image,
        spec: Spec,
        dir: &Path,
        extras: Extras,
        timeout: Duration,
    ) -> Result<Guest, String> {
        if extras.incoming.is_none() {
            return Err("Guest::incoming without an incoming URI".into());
        }
        let mut guest = Guest::spawn(image, spec, dir, extras, &Launch::default())?;
        if let Err(e) = guest.connect_console(Instant::now() + timeout) {
            return Err(guest.failed(e));
        }
        Ok(guest)
    }

    fn spawn(
        image: &Image,
        spec: Spec,
        dir: &Path,
        extras: Extras,
        launch: &Launch,
    ) -> Result<Guest, String> {
        let console_log = dir.join(format!("{}-console.log", spec.name));
        let qemu_log = qemu_log(dir, spec.name);
        let serial = dir.join(format!("{}-serial.sock", spec.name));
        let _ = std::fs::remove_file(&serial);
        if let Some(q) = &extras.qmp {
            let _ = std::fs::remove_file(q);
        }
        let qemu_err = std::fs::File::create(&qemu_log).map_err(|e| e.to_string())?;
        let child = Command::new(&image.qemu)
            .args(qemu_args(
                image,
                &spec,
                &console_log,
                &serial,
                &extras,
                launch,
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(qemu_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", image.qemu.display()))?;
        let guest = Guest {
            spec,
            child,
            console: Console::unconnected(),
            console_log,
            qemu_log,
            serial,
            boot_secs: 0.0,
            qmp: extras.qmp,
        };
        if let Some(cpu) = launch.vcpu_cpu
            && let Err(e) = pin_vcpu(guest.child.id(), cpu)
        {
            return Err(guest.failed(e));
        }
        Ok(guest)
    }

    fn connect_console(&mut self, deadline: Instant) -> Result<(), String> {
        self.console = Console::connect(&self.serial, deadline, &mut self.child)?;
        Ok(())
    }

    fn failed(&self, e: String) -> String {
        format!("{}: {e}\n{}", self.spec.name, self.diagnostics())
    }

    /// Waits (at most `timeout`) until the guest's shell answers, as at
    /// boot: for a guest that has just arrived by migration.
    pub fn wait_shell(&mut self, timeout: Duration) -> Result<(), String> {
        let name = self.spec.name;
        self.console
            .wait_ready(Instant::now() + timeout)
            .map_err(|e| format!("{name}: {e}"))
    }

    /// QEMU's exit status, if it has exited (reaped here).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// QEMU's process id (its threads: `/proc/PID/task`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything QEMU wrote to stderr so far.
    pub fn qemu_stderr(&self) -> String {
        std::fs::read_to_string(&self.qemu_log).unwrap_or_default()
    }

    /// Runs a shell command in the guest; a non-zero status is an error.
    pub fn ok(&mut self, cmd: &str, timeout: Duration) -> Result<String, String> {
        let name = self.spec.name;
        self.console
            .ok(cmd, timeout)
            .map_err(|e| format!("{name}: {e}"))
    }

    /// SIGKILL, as a crash would: no orderly vhost-user shutdown.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The last lines of the kernel console and QEMU's stderr; when the
    /// guest kernel oopsed, the console from the first oops line on (its
    /// call trace names the code that failed; the tail alone shows only
    /// the registers of the final panic).
    pub fn diagnostics(&self) -> String {
        let tail = |p: &Path| {
            let s = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(15)..].join("\n")
        };
        let console = std::fs::read_to_string(&self.console_log).unwrap_or_default();
        let console = match oops_report(&console) {
            Some(report) => format!("--- {} console (kernel oops) ---\n{report}", self.spec.name),
            None => format!(
                "--- {} console (tail) ---\n{}",
                self.spec.name,
                tail(&self.console_log)
            ),
        };
        format!(
            "{console}\n--- {} qemu stderr ---\n{}",
            self.spec.name,
            tail(&self.qemu_log)
        )
    }
}

/// Pins the vCPU thread of QEMU `pid` ("CPU 0/TCG" or "CPU 0/KVM", named
/// so by `-name ...,debug-threads=on`) to `cpu`, once QEMU has made it.
fn pin_vcpu(pid: u32, cpu: usize) -> Result<(), String> {
    use nix::sched::{CpuSet, sched_setaffinity};
    let find = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
            .find_map(|t| {
                let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
                comm.starts_with("CPU ")
                    .then(|| t.file_name().to_str()?.parse::<i32>().ok())
                    .flatten()
            })
    };
    let mut tid = None;
    crate::wait_until(Duration::from_secs(10), || {
        tid = find();
        tid.is_some()
    });
    let tid = tid.ok_or_else(|| format!("QEMU {pid}: no vCPU thread within 10 s"))?;
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    sched_setaffinity(nix::unistd::Pid::from_raw(tid), &set)
        .map_err(|e| format!("pinning QEMU's vCPU thread {tid} to CPU {cpu}: {e}"))
}

/// The guest kernel's first oops on `console` and what follows it (at
/// most 80 lines), if it oopsed.
fn oops_report(console: &str) -> Option<String> {
    const MARKERS: [&str; 6] = [
        "BUG: ",
        "kernel BUG at",
        "Oops: ",
        "general protection fault",
        "WARNING: CPU:",
        "Kernel panic",
    ];
    let lines: Vec<&str> = console.lines().collect();
    let first = lines
        .iter()
        .position(|l| MARKERS.iter().any(|m| l.contains(m)))?;
    let from = first.saturating_sub(3);
    Some(lines[from..lines.len().min(from + 80)].join("\n"))
}

/// Where the QEMU named `name` (its [`Spec`]'s) writes its stderr.
pub fn qemu_log(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}-qemu.log"))
}

/// Guest RAM: 256 MiB and 8 KiB. Not a multiple of 256 KiB on purpose:
/// QEMU before 9.0 (Debian 12 ships 7.2) syncs the migration bitmap of a
/// RAM block whose length is a multiple of 64 pages by a fast path that
/// forgets to re-arm TCG's write tracking, so a TCG guest's own stores
/// after the first sync are lost in a live migration ("system/physmem:
/// Fix migration dirty bitmap coherency with TCG memory access", QEMU
/// 9.0). Reproduced here without any vhost-user device: 2 of 12
/// migrations of a busy guest under load left 10-35 guest pages older at
/// the destination, and the guest then crashed. With this length QEMU
/// takes its per-page path, which is right.
pub const GUEST_RAM: u64 = (256 << 20) + (8 << 10);

/// Machine, [`GUEST_RAM`] of shared memfd memory (vhost-user maps it),
/// one vCPU; QEMU's threads named after what they do ("CPU 0/TCG").
fn machine_args(accel: Accel) -> Vec<String> {
    let ram = format!("{}K", GUEST_RAM >> 10);
    let args = [
        "-name",
        "nfv-guest,debug-threads=on",
        "-machine",
        &format!("pc,accel={}", accel.name()),
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-m",
        &ram,
        "-smp",
        "1",
        "-object",
        &format!("memory-backend-memfd,id=mem,size={ram},share=on"),
        "-numa",
        "node,memdev=mem",
    ]
    .map(str::to_string);
    args.to_vec()
}

/// The QEMU command line: `vectors=0` on the NIC because Debian's QEMU
/// 7.2 under TCG crashes with MSI-X on a vhost-user virtio-net-pci device;
/// `no_timer_check` on the kernel's because under TCG on a loaded host the
/// boot-time IO-APIC timer check can fail, and the kernel then panics
/// ("IO-APIC + timer doesn't work!").
/// A migration destination gets the same line (QEMU requires the same
/// machine and devices on both ends) plus `-incoming`.
fn qemu_args(
    image: &Image,
    spec: &Spec,
    console_log: &Path,
    serial: &Path,
    extras: &Extras,
    launch: &Launch,
) -> Vec<String> {
    let (netdev, queues) = match &launch.tap {
        Some(t) => (
            format!(
                "tap,id=n0,ifname={},script=no,downscript=no,vhost={}",
                t.ifname,
                if t.vhost { "on" } else { "off" }
            ),
            1,
        ),
        None => (
            format!("vhost-user,id=n0,chardev=vu,queues={}", spec.queues),
            spec.queues,
        ),
    };
    let mut device = format!(
        "virtio-net-pci,netdev=n0,mac={},vectors=0,mq={}",
        spec.mac,
        if queues > 1 { "on" } else { "off" }
    );
    if !spec.mrg_rxbuf {
        device.push_str(",mrg_rxbuf=off");
    }
    if spec.packed {
        device.push_str(",packed=on");
    }
    if let Some(d) = &launch.device {
        device.push(',');
        device.push_str(d);
    }
    let mut v = machine_args(image.accel);
    v.extend([
        "-kernel".into(),
        image.kernel.display().to_string(),
        "-initrd".into(),
        image.initrd.display().to_string(),
        "-append".into(),
        format!(
            "console=ttyS0 panic=-1 quiet no_timer_check nfv_ip={}",
            spec.ip
        ),
        "-serial".into(),
        format!("file:{}", console_log.display()),
        "-serial".into(),
        format!("unix:{},server=on,wait=off", serial.display()),
    ]);
    if launch.tap.is_none() {
        let chardev = if spec.qemu_server {
            format!(
                "socket,id=vu,path={},server=on,wait=off",
                spec.socket.display()
            )
        } else {
            format!("socket,id=vu,path={}", spec.socket.display())
        };
        v.extend(["-chardev".into(), chardev]);
    }
    v.extend(["-netdev".into(), netdev, "-device".into(), device]);
    if let Some(q) = &extras.qmp {
        v.extend([
            "-qmp".into(),
            format!("unix:{},server=on,wait=off", q.display()),
        ]);
    }
    if let Some(uri) = &extras.incoming {
        v.extend(["-S".into(), "-incoming".into(), uri.clone()]);
    }
    v
}

/// The offload lines of the guest's `ethtool -k eth0` that say whether
/// checksums and segmentation are left to the device, one line
/// ("tx-checksumming: on, tcp-segmentation-offload: off, ...").
pub fn offload_summary(g: &mut Guest, timeout: Duration) -> Result<String, String> {
    let out = g.ok("ethtool -k eth0", timeout)?;
    let keep = [
        "rx-checksumming",
        "tx-checksumming",
        "tcp-segmentation-offload",
        "generic-segmentation-offload",
        "generic-receive-offload",
    ];
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|l| keep.iter().any(|k| l.starts_with(&format!("{k}:"))))
        .collect::<Vec<_>>()
        .join(", "))
}

/// The virtio-net offload features the guest's driver negotiated, by name
/// (from the feature bits in sysfs); "none" when there are none.
pub fn guest_offloads(g: &mut Guest, timeout: Duration) -> Result<String, String> {
    let out = g.ok("cat /sys/class/net/eth0/device/features", timeout)?;
    let bits = out.trim().as_bytes();
    let names: Vec<&str> = OFFLOAD_BITS
        .iter()
        .filter(|(bit, _)| bits.get(*bit) == Some(&b'1'))
        .map(|(_, n)| *n)
        .collect();
    Ok(if names.is_empty() {
        "none".into()
    } else {
        names.join(" ")
    })
}

/// virtio-net feature bits (virtio spec 5.1.3) of the checksum and
/// segmentation offloads.
const OFFLOAD_BITS: [(usize, &str); 10] = [
    (0, "CSUM"),
    (1, "GUEST_CSUM"),
    (7, "GUEST_TSO4"),
    (8, "GUEST_TSO6"),
    (9, "GUEST_ECN"),
    (10, "GUEST_UFO"),
    (11, "HOST_TSO4"),
    (12, "HOST_TSO6"),
    (13, "HOST_ECN"),
    (14, "HOST_UFO"),
];

#[cfg(test)]
mod tests {
    use super::oops_report;

    #[test]
    fn an_oops_is_shown_from_its_first_line() {
        let boot: Vec<String> = (0..100).map(|i| format!("[ {i}.0] booting")).collect();
        let oops =
            "[ 22.3] kernel BUG at mm/slub.c:419!\n[ 22.4] Call Trace:\n[ 22.5]  skb_release_data";
        let panic = "[ 30.0] Kernel panic - not syncing: Fatal exception in interrupt";
        let with = |tail: &str| format!("{}\n{tail}", boot.join("\n"));
        let cases: [(String, Option<(&str, usize)>); 3] = [
            (boot.join("\n"), None),
            (
                with(&format!("{oops}\n{panic}")),
                Some(("[ 97.0] booting", 3 + 3 + 1)),
            ),
            (with(panic), Some(("[ 97.0] booting", 3 + 1))),
        ];
        for (console, want) in cases {
            let got = oops_report(&console);
            match (got, want) {
                (None, None) => {}
                (Some(r), Some((first, lines))) => {
                    assert_eq!(r.lines().next(), Some(first));
                    assert_eq!(r.lines().count(), lines);
                }
                (got, want) => panic!("{got:?} for {want:?}"),
            }
        }
    }
}
