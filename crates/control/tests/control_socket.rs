//! The control socket against real clients: its file (mode 0660, never
//! taking over a live socket, removed only while it is ours), who may use
//! it (a client running as `nobody` through `setpriv`, refused by the
//! file's mode and, with the mode loosened, by `SO_PEERCRED`; a member of
//! `[node] group` served) and what clients cannot do to it (64 idle
//! connections, a slow one, an oversized one: a legitimate client is still
//! served). Running as another user needs root, `setpriv` and `python3`;
//! without them those tests print SKIPPED.

use nfv_control::server::{ControlOptions, ControlServer, Handler};
use nfv_control::{Request, Response, request};
use nfv_testutil::TempDir;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(30);

/// Answers `show-node` with "pong".
fn pong() -> Arc<Handler> {
    Arc::new(|r: &Request| match r {
        Request::ShowNode => Response::Ok {
            data: serde_json::json!("pong"),
        },
        _ => Response::Error {
            message: "only show-node here".into(),
        },
    })
}

fn dir(tag: &str) -> TempDir {
    let d = TempDir::new("control-socket", tag);
    // Other users must reach the socket inside (its own mode decides).
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

fn start(path: &Path, opts: &ControlOptions) -> ControlServer {
    ControlServer::start_with(path, pong(), opts).unwrap_or_else(|e| panic!("start: {e}"))
}

fn is_pong(r: &Result<Response, String>) -> bool {
    matches!(r, Ok(Response::Ok { data }) if data == "pong")
}

/// A client as another user: `setpriv` running python3, which connects,
/// sends `show-node` and prints the answer line or what failed.
struct Setpriv {
    python: PathBuf,
}

const CLIENT: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("CONNECT-ERROR", e.errno, e.strerror)
    sys.exit(0)
try:
    s.sendall(b'{"cmd":"show-node"}\n')
except OSError:
    pass
data = b""
try:
    while not data.endswith(b"\n"):
        c = s.recv(4096)
        if not c:
            break
        data += c
except OSError as e:
    print("RECV-ERROR", e)
    sys.exit(0)
print(data.decode().strip())
"#;

impl Setpriv {
    /// Why a client cannot run as another user here, if it cannot.
    fn find() -> Result<Setpriv, String> {
        if !nfv_testutil::is_root() {
            return Err("needs root to run a client as another user".into());
        }
        nfv_testutil::which("setpriv").ok_or("no setpriv on PATH")?;
        // Not a shim under /root, which `nobody` cannot read.
        let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or("no python3 in /usr/bin, /usr/local/bin or /bin")?;
        let s = Setpriv { python };
        let probe = s.run(
            &["--reuid=nobody", "--regid=nogroup", "--clear-groups"],
            None,
        )?;
        if probe != "no socket" {
            return Err(format!("a client as nobody does not run: {probe}"));
        }
        Ok(s)
    }

    /// Runs the client with `creds`; its one line of output.
    fn run(&self, creds: &[&str], socket: Option<&Path>) -> Result<String, String> {
        let mut c = Command::new("setpriv");
        c.args(creds).arg(&self.python);
        match socket {
            Some(p) => c.arg("-c").arg(CLIENT).arg(p),
            None => c.arg("-c").arg("print('no socket')"),
        };
        let out = c.output().map_err(|e| format!("setpriv: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "setpriv {creds:?}: {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

fn setpriv_or_skip(test: &str) -> Option<Setpriv> {
    match Setpriv::find() {
        Ok(s) => Some(s),
        Err(why) => {
            nfv_testutil::skip(test, &why);
            None
        }
    }
}

const NOBODY: [&str; 3] = ["--reuid=nobody", "--regid=nogroup", "--clear-groups"];

#[test]
fn the_socket_is_0660_and_never_taken_from_a_live_one() {
    let d = dir("file");
    let p = d.0.join("ctl.sock");
    let s = start(&p, &ControlOptions::default());
    let m = std::fs::symlink_metadata(&p).unwrap();
    assert_eq!(m.mode() & 0o777, 0o660, "mode {:o}", m.mode());
    assert_eq!(m.uid(), nix::unistd::geteuid().as_raw());
    assert!(is_pong(&request(&p, &Request::ShowNode)));

    // A second server (another nfvswitch on the same path) is refused.
    let e = ControlServer::start_with(&p, pong(), &ControlOptions::default())
        .err()
        .expect("a live socket was taken over");
    assert!(e.to_string().contains("in use by another process"), "{e}");
    assert!(
        is_pong(&request(&p, &Request::ShowNode)),
        "the first still serves"
    );
    drop(s);
    assert!(std::fs::symlink_metadata(&p).is_err(), "removed at stop");

    // A stale one (a crash) is replaced; a regular file is not.
    drop(UnixListener::bind(&p).unwrap());
    let s = start(&p, &ControlOptions::default());
    assert!(is_pong(&request(&p, &Request::ShowNode)));
    // Someone else's socket bound there meanwhile outlives our stop.
    std::fs::remove_file(&p).unwrap();
    let theirs = UnixListener::bind(&p).unwrap();
    let ino = std::fs::symlink_metadata(&p).unwrap().ino();
    drop(s);
    assert_eq!(std::fs::symlink_metadata(&p).unwrap().ino(), ino);
    drop(theirs);
    std::fs::remove_file(&p).unwrap();
    std::fs::write(&p, b"keep").unwrap();
    let e = ControlServer::start_with(&p, pong(), &ControlOptions::default())
        .err()
        .expect("a file was replaced");
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"keep");
}

#[test]
fn an_unknown_group_fails_the_start() {
    let d = dir("nogroup");
    let opts = ControlOptions {
        group: Some("nfv-no-such-group-xyz".into()),
        ..ControlOptions::default()
    };
    let e = ControlServer::start_with(&d.0.join("ctl.sock"), pong(), &opts)
        .err()
        .expect("started");
    assert!(e.to_string().contains("no such group"), "{e}");
    assert!(std::fs::symlink_metadata(d.0.join("ctl.sock")).is_err());
}

#[test]
fn nobody_is_refused_by_the_mode_and_by_peer_credentials() {
    const NAME: &str = "nobody_is_refused_by_the_mode_and_by_peer_credentials";
    let Some(sp) = setpriv_or_skip(NAME) else {
        return;
    };
    let d = dir("nobody");
    let p = d.0.join("ctl.sock");
    let s = start(&p, &ControlOptions::default());
    let out = sp.run(&NOBODY, Some(&p)).unwrap();
    assert!(
        out.starts_with("CONNECT-ERROR 13"),
        "the mode lets nobody in: {out}"
    );
    // With the mode loosened, SO_PEERCRED still refuses.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = sp.run(&NOBODY, Some(&p)).unwrap();
    assert!(out.contains("permission denied: uid 65534"), "{out}");
    assert!(s.stats().refused_peer.load(Relaxed) >= 1);
    // Root still gets in.
    assert!(is_pong(&request(&p, &Request::ShowNode)));
}

#[test]
fn a_member_of_the_group_is_served() {
    const NAME: &str = "a_member_of_the_group_is_served";
    let Some(sp) = setpriv_or_skip(NAME) else {
        return;
    };
    let Ok(Some(g)) = nix::unistd::Group::from_name("nogroup") else {
        return nfv_testutil::skip(NAME, "no group named nogroup");
    };
    let d = dir("member");
    let p = d.0.join("ctl.sock");
    let opts = ControlOptions {
        group: Some("nogroup".into()),
        ..ControlOptions::default()
    };
    let s = start(&p, &opts);
    let m = std::fs::symlink_metadata(&p).unwrap();
    assert_eq!(m.mode() & 0o777, 0o660);
    assert_eq!(m.gid(), g.gid.as_raw(), "group-owned");
    let out = sp.run(&NOBODY, Some(&p)).unwrap();
    assert!(out.contains("pong"), "{out}");
    // Not in the group (primary gid elsewhere, no supplementary group):
    // the kernel refuses the connect.
    let out = sp
        .run(
            &["--reuid=nobody", "--regid=daemon", "--clear-groups"],
            Some(&p),
        )
        .unwrap();
    assert!(out.starts_with("CONNECT-ERROR 13"), "{out}");
    assert_eq!(s.stats().refused_peer.load(Relaxed), 0);
}

fn quick() -> ControlOptions {
    ControlOptions {
        idle_timeout: Duration::from_millis(500),
        write_timeout: Duration::from_millis(500),
        max_request: 1024,
        ..ControlOptions::default()
    }
}

#[test]
fn idle_connections_do_not_lock_out_a_client() {
    let d = dir("idle");
    let p = d.0.join("ctl.sock");
    let opts = quick();
    let s = start(&p, &opts);
    let idle: Vec<UnixStream> = (0..64).map(|_| UnixStream::connect(&p).unwrap()).collect();
    let t0 = Instant::now();
    let mut busy = 0;
    let served = loop {
        let r = request(&p, &Request::ShowNode);
        if is_pong(&r) {
            break true;
        }
        match &r {
            Ok(Response::Error { message }) if message.starts_with("busy") => busy += 1,
            Err(e) => eprintln!("request failed: {e}"),
            other => panic!("unexpected answer: {other:?}"),
        }
        if t0.elapsed() > DEADLINE {
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(served, "not served within {DEADLINE:?}");
    let st = s.stats();
    let refused = st.refused_busy.load(Relaxed);
    // 4 workers and 16 queue slots: most of the 64 were refused at once.
    assert!(refused >= 64 - 20, "refused {refused}");
    assert!(st.timed_out.load(Relaxed) >= 1);
    eprintln!(
        "served after {:?} ({busy} busy answers; {refused} refused, {} timed out)",
        t0.elapsed(),
        st.timed_out.load(Relaxed)
    );
    // The idle ones were closed, with an answer ("busy") or without.
    for mut c in idle {
        c.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        let text = String::from_utf8_lossy(&rest);
        assert!(text.is_empty() || text.contains("busy"), "{text}");
    }
}

#[test]
fn slow_and_oversized_clients_are_dropped() {
    let d = dir("slow");
    let p = d.0.join("ctl.sock");
    let s = start(&p, &quick());

    // A byte every 100 ms: the line is never complete within 500 ms.
    let mut slow = UnixStream::connect(&p).unwrap();
    slow.set_read_timeout(Some(DEADLINE)).unwrap();
    let t0 = Instant::now();
    slow.write_all(b"{\"cmd\":").unwrap();
    let mut reader = BufReader::new(slow.try_clone().unwrap());
    let writer = std::thread::spawn(move || {
        for _ in 0..100 {
            if slow.write_all(b" ").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("request not complete within"), "{line}");
    assert!(t0.elapsed() < DEADLINE);
    writer.join().unwrap();
    assert_eq!(s.stats().timed_out.load(Relaxed), 1);

    // Longer than max_request, no newline.
    let mut big = UnixStream::connect(&p).unwrap();
    big.set_read_timeout(Some(DEADLINE)).unwrap();
    let _ = big.write_all(&[b'x'; 4096]);
    let mut line = String::new();
    BufReader::new(&big).read_line(&mut line).unwrap();
    assert!(line.contains("request longer than 1024 bytes"), "{line}");
    let mut rest = Vec::new();
    let _ = big.read_to_end(&mut rest);
    assert_eq!(s.stats().oversized.load(Relaxed), 1);

    // A client that behaves is still served, several requests in a row.
    let c = UnixStream::connect(&p).unwrap();
    c.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut w = c.try_clone().unwrap();
    let mut r = BufReader::new(c);
    for _ in 0..3 {
        w.write_all(b"{\"cmd\":\"show-node\"}\n").unwrap();
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.contains("pong"), "{line}");
    }
}

#[test]
fn a_node_is_served_through_start() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = "[memory]\nframes = 1024\nhugepages = \"never\"\n\
                [[port]]\nname = \"s1\"\nid = 1\ntype = \"sink\"\n";
    let cfg = nfv_config::parse_str(text, Path::new("control-socket.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    let node = nfv_control::Node::start(&cfg).expect("node starts");
    let d = dir("node");
    let p = d.0.join("ctl.sock");
    let s = ControlServer::start(&p, node.clone(), None).unwrap();
    let r = request(&p, &Request::ShowNode);
    assert!(matches!(r, Ok(Response::Ok { .. })), "{r:?}");
    drop(s);
    node.shutdown();
}
