//! The VNF processes of the soak: built-in VNFs (`nfvswitch vnf`, a
//! vhost-user client of the switch's server socket) and DPDK testpmd (io
//! forwarding between a `server=1` socket the switch connects to and a
//! client port on the switch's server socket). Each is a [`Proc`] guard,
//! killed and restarted by PID.

use crate::proc::Proc;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[derive(Clone, Debug)]
pub enum Kind {
    /// `nfvswitch vnf --socket S --app APP` (client mode).
    Builtin { socket: PathBuf, app: &'static str },
    /// testpmd: port 0 serves `server` (the switch's client port), port 1
    /// connects to `client` (the switch's server port); io forwarding
    /// 0 -> 1 (paired), forwarding lcore on `cpu`.
    TestPmd {
        server: PathBuf,
        client: PathBuf,
        cpu: usize,
        main_cpu: usize,
    },
}

/// One VNF: how to start it, and the process while it runs.
pub struct Peer {
    pub name: String,
    kind: Kind,
    nfvswitch: PathBuf,
    log: PathBuf,
    proc: Option<Proc>,
    /// DPDK --file-prefix of the running testpmd.
    prefix: Option<String>,
    starts: u64,
}

impl Peer {
    pub fn new(name: &str, kind: Kind, nfvswitch: &Path, dir: &Path) -> Peer {
        Peer {
            name: name.to_string(),
            kind,
            nfvswitch: nfvswitch.to_path_buf(),
            log: dir.join(format!("{name}.log")),
            proc: None,
            prefix: None,
            starts: 0,
        }
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Starts it (no-op if it runs).
    pub fn start(&mut self) -> Result<(), String> {
        if self.running() {
            return Ok(());
        }
        self.starts += 1;
        let cmd = match &self.kind {
            Kind::Builtin { socket, app } => {
                let mut c = Command::new(&self.nfvswitch);
                c.args(["--log", "info", "vnf", "--mode", "client", "--app", app])
                    .args(["--stats-every", "0", "--poll", "adaptive", "--socket"])
                    .arg(socket);
                c
            }
            Kind::TestPmd {
                server,
                client,
                cpu,
                main_cpu,
            } => {
                // A SIGKILLed testpmd leaves its socket file: a fresh start
                // listens anew, as QEMU does with its own server sockets.
                let _ = std::fs::remove_file(server);
                let prefix = format!("soak{}_{}", std::process::id(), self.starts);
                let mut c = Command::new("dpdk-testpmd");
                c.args(testpmd_args(&prefix, server, client, *cpu, *main_cpu));
                self.prefix = Some(prefix);
                c
            }
        };
        self.proc = Some(Proc::spawn(&self.name, cmd, &self.log, Signal::SIGINT)?);
        Ok(())
    }

    /// Still running? (An exit is reaped and forgotten.)
    pub fn running(&mut self) -> bool {
        let alive = self.proc.as_mut().is_some_and(|p| p.alive());
        if !alive && self.proc.is_some() {
            self.forget();
        }
        alive
    }

    /// SIGKILL, by PID; waits until it is reaped.
    pub fn kill(&mut self) {
        if let Some(p) = self.proc.as_mut() {
            if let Some(pid) = p.pid() {
                let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
            p.wait_exit(Duration::from_secs(5));
        }
        self.forget();
    }

    /// Clean stop (SIGINT; SIGKILL after the guard's grace period).
    pub fn stop(&mut self) {
        if let Some(p) = self.proc.as_mut() {
            p.stop();
        }
        self.forget();
    }

    fn forget(&mut self) {
        self.proc = None;
        if let Some(prefix) = self.prefix.take() {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn testpmd_args(
    prefix: &str,
    server: &Path,
    client: &Path,
    cpu: usize,
    main: usize,
) -> Vec<String> {
    [
        "--no-pci".to_string(),
        "--no-huge".into(),
        "-m".into(),
        "256".into(),
        format!("--file-prefix={prefix}"),
        format!("--lcores=0@{main},1@{cpu}"),
        format!(
            "--vdev=net_virtio_user0,path={},server=1,queues=1,mrg_rxbuf=1",
            server.display()
        ),
        format!(
            "--vdev=net_virtio_user1,path={},queues=1,mrg_rxbuf=1",
            client.display()
        ),
        "--".into(),
        "--forward-mode=io".into(),
        "--port-topology=paired".into(),
        "--nb-cores=1".into(),
        // Without a stats period a non-interactive testpmd waits for a
        // key on stdin, which is /dev/null: it would exit at once.
        "--stats-period=30".into(),
        "--total-num-mbufs=8192".into(),
        "--no-lsc-interrupt".into(),
    ]
    .to_vec()
}
