//! Network namespaces and veth pairs for tests that need real kernel
//! traffic. Everything made here is removed on drop, also when the test
//! fails (panics unwind through the guards).

use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A short name unique to this process and call, for namespaces and
/// interfaces (interface names hold at most 15 bytes).
pub fn unique_name(prefix: &str) -> String {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = format!("{prefix}{}x{n}", std::process::id() % 100_000);
    assert!(name.len() <= 15, "{name} is too long for an interface name");
    name
}

/// Why namespace tests cannot run here, or `None` if they can.
pub fn unavailable() -> Option<String> {
    if !crate::is_root() {
        return Some("needs root to create network namespaces and veth pairs".into());
    }
    if crate::which("ip").is_none() {
        return Some("`ip` (iproute2) is not installed".into());
    }
    let probe = unique_name("nvp");
    match run("ip", &["netns", "add", &probe]) {
        Ok(_) => {
            let _ = run("ip", &["netns", "del", &probe]);
            None
        }
        Err(e) => Some(format!("cannot create a network namespace: {e}")),
    }
}

/// Runs a command; `Err` carries its stderr (or the spawn error).
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out: Output = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`{cmd} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A network namespace, deleted on drop.
pub struct Netns {
    name: String,
}

impl Netns {
    pub fn new(prefix: &str) -> Result<Netns, String> {
        let name = unique_name(prefix);
        run("ip", &["netns", "add", &name])?;
        let ns = Netns { name };
        ns.run(&["ip", "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs inside the namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `f` on a new thread that has entered the namespace (sockets it
    /// opens live there). Only that thread moves; the caller stays put.
    pub fn spawn_in<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<Result<T, String>> {
        spawn_in_named(&self.name, f)
    }

    /// Runs `f` on a thread inside the namespace and returns its result;
    /// panics (failing the test) if the thread cannot enter or panics.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        run_in_named(&self.name, f)
    }

    /// Runs `args[0] args[1..]` inside the namespace.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["netns", "exec", &self.name];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// A counter of the namespace's `/proc/net/snmp` (`proto` "Udp",
    /// "Tcp", ...; `name` "InCsumErrors", ...); panics when missing.
    pub fn snmp(&self, proto: &str, name: &str) -> u64 {
        let text = self.run(&["cat", "/proc/net/snmp"]).unwrap();
        let mut lines = text.lines().filter(|l| l.starts_with(&format!("{proto}:")));
        let (keys, values) = (lines.next().unwrap(), lines.next().unwrap());
        let i = keys
            .split_whitespace()
            .position(|k| k == name)
            .unwrap_or_else(|| panic!("no {proto} {name} in /proc/net/snmp"));
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run("ip", &["netns", "del", &self.name]);
    }
}

/// A veth pair: `host` stays in the test's namespace (for the switch), the
/// other end is moved into `ns`, given `addr` (CIDR) and brought up. The
/// pair is deleted on drop (deleting one end removes both).
pub struct Veth {
    pub host: String,
    pub inner: String,
    pub inner_mac: [u8; 6],
}

impl Veth {
    pub fn into_ns(ns: &Netns, addr: &str) -> Result<Veth, String> {
        let host = unique_name("nvh");
        let inner = unique_name("nvi");
        run(
            "ip",
            &[
                "link",
                "add",
                &host,
                "type",
                "veth",
                "peer",
                "name",
                &inner,
                "netns",
                ns.name(),
            ],
        )?;
        // From here on the guard removes the pair if a step fails.
        let mut veth = Veth {
            host,
            inner,
            inner_mac: [0; 6],
        };
        ns.run(&["ip", "addr", "add", addr, "dev", &veth.inner])?;
        ns.run(&["ip", "link", "set", &veth.inner, "up"])?;
        run("ip", &["link", "set", &veth.host, "up"])?;
        let link = ns.run(&["cat", &format!("/sys/class/net/{}/address", veth.inner)])?;
        veth.inner_mac = parse_mac(link.trim()).ok_or(format!("bad MAC {link:?}"))?;
        Ok(veth)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = run("ip", &["link", "del", &self.host]);
    }
}

/// [`Netns::spawn_in`] for a namespace known by name (`ip netns add NAME`).
pub fn spawn_in_named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<Result<T, String>> {
    let path = format!("/run/netns/{name}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: `file` is an open namespace file for the call's
        // duration; setns only changes this thread's network namespace.
        let r = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
        if r != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        Ok(f())
    })
}

/// Runs `f` on a thread inside namespace `name` and returns its result;
/// panics (failing the test) if the thread cannot enter or panics.
pub fn run_in_named<T: Send + 'static>(name: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    spawn_in_named(name, f)
        .join()
        .expect("thread in namespace panicked")
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Drops every capability of the calling thread: it stays uid 0 but can
/// no longer open raw sockets, load BPF or configure interfaces — for
/// tests of the "no permission" errors. Run it on a thread of its own.
pub fn drop_all_capabilities() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let d = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset with a valid v3 header and two data words; affects
    // only the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_capset, &h as *const Header, d.as_ptr()) };
    assert_eq!(r, 0, "capset: {}", std::io::Error::last_os_error());
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    s.parse::<nfv_wire::EthernetAddress>().ok().map(|a| a.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse() {
        assert_eq!(
            parse_mac("02:00:0a:ff:00:01"),
            Some([2, 0, 0x0a, 0xff, 0, 1])
        );
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:02"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:00:01"), None);
    }

    #[test]
    fn namespace_and_veth_come_and_go() {
        if let Some(why) = unavailable() {
            crate::skip("netns::namespace_and_veth_come_and_go", &why);
            return;
        }
        let ns = Netns::new("nvt").unwrap();
        let nsname = ns.name().to_string();
        let veth = Veth::into_ns(&ns, "10.99.0.2/24").unwrap();
        let host = veth.host.clone();
        assert!(run("ip", &["link", "show", &host]).is_ok());
        assert!(
            ns.run(&["ip", "addr", "show", &veth.inner])
                .unwrap()
                .contains("10.99.0.2")
        );
        drop(veth);
        assert!(run("ip", &["link", "show", &host]).is_err());
        drop(ns);
        assert!(!run("ip", &["netns", "list"]).unwrap().contains(&nsname));
    }
}
