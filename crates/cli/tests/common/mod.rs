//! Shared by the binary's integration tests: a gen → sink node running as
//! a child process (`nfvswitch run`), removed with its temp dir on drop.
#![allow(dead_code)]

use nfv_testutil::wait_until;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_nfvswitch");

pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    pub dir: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nfvswitch-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A gen(1, rate-limited) → sink(2) node with its socket in a temp dir.
pub fn start(tag: &str) -> Daemon {
    let dir = tempdir(tag);
    let socket = dir.join("ctl.sock");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cfg = format!(
        r#"
flows = ["priority=10,in_port=1,actions=output:2"]
[node]
name = "t{tag}"
control_socket = "{}"
[memory]
frames = 8192
[pmd]
cores = [{}]
[[port]]
name = "gen0"
id = 1
type = "generator"
rate_pps = 200000
[[port]]
name = "sink0"
id = 2
type = "sink"
"#,
        socket.display(),
        cpus - 1
    );
    let path = dir.join("node.toml");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new(BIN)
        .args(["--log", "warn", "run"])
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        }),
        "control socket never appeared"
    );
    Daemon { child, socket, dir }
}
