//! A QEMU guest (TCG) with one vhost-user virtio-net NIC, driven through
//! a shell on its second serial port. The kernel console (first serial
//! port) goes to a file kept for diagnostics. The QEMU process is killed
//! and reaped on drop. A QEMU may also be started with a QMP socket and as
//! the destination of a live migration ([`Extras`], [`Guest::incoming`]).

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What `scripts/qemu-guest` prepared: the QEMU binary, kernel and initrd.
#[derive(Clone, Debug)]
pub struct Image {
    pub qemu: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
}

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
        })
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
#[allow(dead_code)] // only the migration test sets these
pub struct Extras {
    /// `-qmp unix:PATH,server=on,wait=off`.
    pub qmp: Option<PathBuf>,
    /// `-incoming URI` (e.g. `unix:PATH`): the QEMU waits, stopped, for a
    /// migration stream instead of booting.
    pub incoming: Option<String>,
}

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
    #[allow(dead_code)] // only the migration test uses QMP
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
        Guest::boot_with(image, spec, dir, boot, Extras::default())
    }

    /// [`Guest::boot`] with `extras` on QEMU's command line.
    pub fn boot_with(
        image: &Image,
        spec: Spec,
        dir: &Path,
        boot: Duration,
        extras: Extras,
    ) -> Result<Guest, String> {
        let started = Instant::now();
        let mut guest = Guest::spawn(image, spec, dir, extras)?;
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
    #[allow(dead_code)] // only the migration test migrates
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
        let mut guest = Guest::spawn(image, spec, dir, extras)?;
        if let Err(e) = guest.connect_console(Instant::now() + timeout) {
            return Err(guest.failed(e));
        }
        Ok(guest)
    }

    fn spawn(image: &Image, spec: Spec, dir: &Path, extras: Extras) -> Result<Guest, String> {
        let console_log = dir.join(format!("{}-console.log", spec.name));
        let qemu_log = qemu_log(dir, spec.name);
        let serial = dir.join(format!("{}-serial.sock", spec.name));
        let _ = std::fs::remove_file(&serial);
        if let Some(q) = &extras.qmp {
            let _ = std::fs::remove_file(q);
        }
        let qemu_err = std::fs::File::create(&qemu_log).map_err(|e| e.to_string())?;
        let child = Command::new(&image.qemu)
            .args(qemu_args(image, &spec, &console_log, &serial, &extras))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(qemu_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", image.qemu.display()))?;
        Ok(Guest {
            spec,
            child,
            console: Console::unconnected(),
            console_log,
            qemu_log,
            serial,
            boot_secs: 0.0,
            qmp: extras.qmp,
        })
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
    #[allow(dead_code)] // only the migration test migrates
    pub fn wait_shell(&mut self, timeout: Duration) -> Result<(), String> {
        let name = self.spec.name;
        self.console
            .wait_ready(Instant::now() + timeout)
            .map_err(|e| format!("{name}: {e}"))
    }

    /// QEMU's exit status, if it has exited (reaped here).
    #[allow(dead_code)] // only the migration test waits for a QEMU to end
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Everything QEMU wrote to stderr so far.
    #[allow(dead_code)] // only the migration test reads QEMU's errors
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

    /// The last lines of the kernel console and QEMU's stderr.
    pub fn diagnostics(&self) -> String {
        let tail = |p: &Path| {
            let s = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(15)..].join("\n")
        };
        format!(
            "--- {} console (tail) ---\n{}\n--- {} qemu stderr ---\n{}",
            self.spec.name,
            tail(&self.console_log),
            self.spec.name,
            tail(&self.qemu_log)
        )
    }
}

/// Where the QEMU named `name` (its [`Spec`]'s) writes its stderr.
pub fn qemu_log(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}-qemu.log"))
}

/// The QEMU command line: TCG, 256 MiB shared memfd memory (vhost-user
/// maps it), and `vectors=0` on the NIC because Debian's QEMU 7.2 under
/// TCG crashes with MSI-X on a vhost-user virtio-net-pci device. A
/// migration destination gets the same line (QEMU requires the same
/// machine and devices on both ends) plus `-incoming`.
fn qemu_args(
    image: &Image,
    spec: &Spec,
    console_log: &Path,
    serial: &Path,
    extras: &Extras,
) -> Vec<String> {
    let chardev = if spec.qemu_server {
        format!(
            "socket,id=vu,path={},server=on,wait=off",
            spec.socket.display()
        )
    } else {
        format!("socket,id=vu,path={}", spec.socket.display())
    };
    let mut device = format!(
        "virtio-net-pci,netdev=n0,mac={},vectors=0,mq={}",
        spec.mac,
        if spec.queues > 1 { "on" } else { "off" }
    );
    if !spec.mrg_rxbuf {
        device.push_str(",mrg_rxbuf=off");
    }
    if spec.packed {
        device.push_str(",packed=on");
    }
    let args = [
        "-machine",
        "pc,accel=tcg",
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
        "-m",
        "256M",
        "-smp",
        "1",
        "-object",
        "memory-backend-memfd,id=mem,size=256M,share=on",
        "-numa",
        "node,memdev=mem",
    ];
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    v.extend([
        "-kernel".into(),
        image.kernel.display().to_string(),
        "-initrd".into(),
        image.initrd.display().to_string(),
        "-append".into(),
        format!("console=ttyS0 panic=-1 quiet nfv_ip={}", spec.ip),
        "-serial".into(),
        format!("file:{}", console_log.display()),
        "-serial".into(),
        format!("unix:{},server=on,wait=off", serial.display()),
        "-chardev".into(),
        chardev,
        "-netdev".into(),
        format!("vhost-user,id=n0,chardev=vu,queues={}", spec.queues),
        "-device".into(),
        device,
    ]);
    if let Some(q) = &extras.qmp {
        v.extend([
            "-qmp".into(),
            format!("unix:{},server=on,wait=off", q.display()),
        ]);
    }
    if let Some(uri) = &extras.incoming {
        v.extend(["-incoming".into(), uri.clone()]);
    }
    v
}

/// The readiness probe. No quotes, backslashes, parentheses or operators:
/// whatever prefix of it the guest loses (see [`Console::wait_ready`]),
/// the rest is a complete simple command, so the shell is never left
/// waiting for the end of a quoted string or a compound command. (The
/// earlier probe, `echo NFV''READY`, left the shell inside a quoted string
/// for good when the first byte it read was the second quote: every later
/// probe then added two quotes more.)
const PROBE: &str = "echo NFV  READY\n";
/// What `echo` makes of [`PROBE`]: its two words joined by one space. Not
/// in the probe itself (two spaces), so a tty echo of the probe does not
/// match, nor in "sh: NFV: not found" for a probe that lost its `echo `.
const PROBE_ANSWER: &str = "NFV READY";

/// The guest's shell on a serial port. Every command runs with stdin from
/// /dev/null (so nothing it starts eats the next command) and ends with a
/// numbered marker carrying its exit status; every read has a deadline.
/// Commands run in a subshell: state (variables, `cd`) does not carry
/// over, and background jobs must send their output to files.
pub struct Console {
    stream: Option<UnixStream>,
    buf: String,
    next_id: u64,
}

impl Console {
    fn unconnected() -> Console {
        Console {
            stream: None,
            buf: String::new(),
            next_id: 1,
        }
    }

    /// Connects to QEMU's serial socket once QEMU has made it.
    fn connect(path: &Path, deadline: Instant, qemu: &mut Child) -> Result<Console, String> {
        loop {
            if let Ok(s) = UnixStream::connect(path) {
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .map_err(|e| e.to_string())?;
                s.set_write_timeout(Some(Duration::from_secs(5)))
                    .map_err(|e| e.to_string())?;
                let mut c = Console::unconnected();
                c.stream = Some(s);
                return Ok(c);
            }
            if let Ok(Some(st)) = qemu.try_wait() {
                return Err(format!("QEMU exited at start ({st})"));
            }
            if Instant::now() >= deadline {
                return Err(format!("no serial socket {} from QEMU", path.display()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the shell: a probe every 2 s until one is answered, then
    /// one numbered command so that later reads start clean.
    ///
    /// The probes sent while the guest boots pile up in QEMU's socket and
    /// UART, and the guest drops an arbitrary part of them: every first
    /// open of ttyS1 (init's `stty`, then the shell) clears the UART's
    /// FIFO and reads its receive register, and closing the port after
    /// `stty` discards what the tty had buffered. So the shell starts
    /// reading at any byte of a probe, and [`PROBE`] must be such that any
    /// tail of it, followed by whole probes, still gets an answer (see the
    /// test `probe_survives_any_lost_prefix`).
    fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        let started = Instant::now();
        let mut probes = 0u32;
        let mut next_probe = started;
        loop {
            if Instant::now() >= next_probe {
                self.send(PROBE)?;
                probes += 1;
                next_probe = Instant::now() + Duration::from_secs(2);
            }
            self.fill(next_probe.min(deadline))?;
            if self.buf.contains(PROBE_ANSWER) {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the guest's shell answered none of {probes} probes in {:.0} s; serial said: {:?}",
                    started.elapsed().as_secs_f64(),
                    self.tail()
                ));
            }
        }
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(5));
        self.run("true", left).map(|_| ())
    }

    /// Runs `cmd` and returns (exit status, output) or an error on timeout.
    pub fn run(&mut self, cmd: &str, timeout: Duration) -> Result<(i32, String), String> {
        let id = self.next_id;
        self.next_id += 1;
        let marker = format!("NFVEND{id} ");
        // A subshell: `exit` ends the command, not the guest's shell.
        self.send(&format!(
            "( {cmd}\n) </dev/null 2>&1; echo NFV''END{id} $?\n"
        ))?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.buf.find(&marker) {
                let rest = &self.buf[at + marker.len()..];
                if let Some(nl) = rest.find('\n') {
                    let status = rest[..nl].trim().parse().unwrap_or(-1);
                    let out = self.buf[..at].replace('\r', "");
                    self.buf = rest[nl + 1..].to_string();
                    return Ok((status, out));
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "`{cmd}`: no answer within {timeout:?}; got {:?}",
                    self.tail()
                ));
            }
            self.fill(deadline)?;
        }
    }

    /// Runs `cmd`; a non-zero exit status is an error with the output.
    pub fn ok(&mut self, cmd: &str, timeout: Duration) -> Result<String, String> {
        match self.run(cmd, timeout)? {
            (0, out) => Ok(out),
            (st, out) => Err(format!("`{cmd}` exited {st}: {}", out.trim())),
        }
    }

    fn send(&mut self, s: &str) -> Result<(), String> {
        let stream = self.stream.as_mut().ok_or("console not connected")?;
        stream
            .write_all(s.as_bytes())
            .map_err(|e| format!("serial write: {e}"))
    }

    /// Reads what is there (up to ~100 ms, never past `until`).
    fn fill(&mut self, until: Instant) -> Result<(), String> {
        let stream = self.stream.as_mut().ok_or("console not connected")?;
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => return Err("the serial socket closed (QEMU gone?)".into()),
                Ok(n) => self.buf.push_str(&String::from_utf8_lossy(&chunk[..n])),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("serial read: {e}")),
            }
            if Instant::now() >= until {
                return Ok(());
            }
        }
    }

    fn tail(&self) -> &str {
        let start = self.buf.len().saturating_sub(400);
        let start = (start..self.buf.len())
            .find(|&i| self.buf.is_char_boundary(i))
            .unwrap_or(0);
        &self.buf[start..]
    }
}

/// Every tail of the probe, followed by whole probes, gets an answer from
/// a shell (the guest's busybox sh where the host has busybox): the
/// guest's shell may start reading at any byte of the probes sent while
/// it booted.
#[test]
fn probe_survives_any_lost_prefix() {
    let shell: &[&str] = if Path::new("/bin/busybox").exists() {
        &["/bin/busybox", "sh"]
    } else {
        &["sh"]
    };
    for cut in 0..PROBE.len() {
        let input = format!("{}{PROBE}{PROBE}", &PROBE[cut..]);
        let mut child = Command::new(shell[0])
            .args(&shell[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run sh");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write to sh");
        let out = child.wait_with_output().expect("sh output");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Only the echo's output carries the answer, never a "not found".
        let answers = text.lines().filter(|l| l.contains(PROBE_ANSWER));
        assert!(
            answers.clone().all(|l| l == PROBE_ANSWER),
            "probe input {input:?}: sh said {text:?}"
        );
        let want = if cut == 0 { 3 } else { 2 };
        assert_eq!(
            answers.count(),
            want,
            "probe input {input:?} (first {cut} bytes lost): sh said {text:?}"
        );
    }
}
