//! A shared memif socket against clients that hoard handshakes, over real
//! sockets: silent connections (renewed, more than the socket's slots)
//! do not keep a client out, a silent connection is dropped after the
//! first-message deadline, and clients of one uid that talk and stall
//! hold at most that uid's share (another uid still gets in).
//!
//! Every wait is for an event with a generous deadline, never a sleep of
//! an exact time: the tests must pass on a loaded machine.

use nfv_memif::client::{Client, ClientConfig, ClientError};
use nfv_memif::socket::{Conn, Received, SocketPath};
use nfv_memif::{
    FIRST_MESSAGE_TIMEOUT, MAX_HANDSHAKES, MAX_HANDSHAKES_PER_UID, MemifConfig, MemifPort,
};
use nfv_ports::Port;
use nfv_wire::memif::{MsgRepr, Name, Secret, VERSION};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);
const ID: u32 = 1;
/// The helper process's environment: the socket it talks to.
const TALKER_ENV: &str = "NFV_MEMIF_TALKER_SOCKET";
/// How many talking connections the helper opens.
const TALKERS: usize = MAX_HANDSHAKES_PER_UID + 2;

/// A server port (interface [`ID`], no secret) on an abstract socket,
/// which any uid may reach.
fn port(tag: &str) -> (Arc<MemifPort>, SocketPath) {
    let name = format!("@nfv-memif-hoard-{tag}-{}", std::process::id());
    let cfg = MemifConfig {
        id: ID,
        ..MemifConfig::new(&name)
    };
    let port = MemifPort::open(&format!("hoard-{tag}"), &cfg, 2048 - nfv_mem::HEADROOM).unwrap();
    (port, SocketPath::parse(&name))
}

/// The server's next message within [`WAIT`]; `None` when it closed.
fn next(c: &Conn) -> Option<MsgRepr> {
    let deadline = Instant::now() + WAIT;
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "the server said nothing within {WAIT:?}");
        match c.recv(&mut buf, left) {
            Ok(Received::Msg { len, .. }) => return MsgRepr::parse(&buf[..len]).ok(),
            Ok(Received::Eof) | Err(_) => return None,
            Ok(Received::Nothing) => {}
        }
    }
}

fn reason(m: &Option<MsgRepr>) -> String {
    match m {
        Some(MsgRepr::Disconnect { reason, .. }) => {
            String::from_utf8_lossy(reason.as_bytes()).into_owned()
        }
        other => format!("{other:?}"),
    }
}

/// Connects and waits for HELLO (the server gave it a slot); `Err` with
/// the DISCONNECT reason when it was refused instead.
fn connect(path: &SocketPath) -> Result<Conn, String> {
    let c = Conn::connect(path).unwrap();
    match next(&c) {
        Some(MsgRepr::Hello { .. }) => Ok(c),
        other => Err(reason(&other)),
    }
}

/// A client that talks: HELLO, a valid INIT (answered ACK), then nothing.
fn talker(path: &SocketPath) -> Result<Conn, String> {
    let c = connect(path)?;
    c.send(
        &MsgRepr::Init {
            version: VERSION,
            id: ID,
            mode: 0,
            secret: Secret::EMPTY,
            name: Name::new(b"talker"),
        },
        None,
    )
    .unwrap();
    match next(&c) {
        Some(MsgRepr::Ack) => Ok(c),
        other => Err(reason(&other)),
    }
}

fn client(path: &SocketPath) -> Result<Client, ClientError> {
    Client::connect(
        &ClientConfig {
            id: ID,
            ..ClientConfig::new(path.clone())
        },
        WAIT,
    )
}

#[test]
fn silent_connections_renewed_do_not_lock_a_client_out() {
    let (port, path) = port("silent");
    for round in 0..5 {
        // More silent connections than the socket has slots, all of one
        // uid (this process), each given its HELLO before the next.
        let silent: Vec<Conn> = (0..MAX_HANDSHAKES + 4)
            .filter_map(|_| connect(&path).ok())
            .collect();
        assert!(
            !silent.is_empty(),
            "round {round}: no silent connection got in"
        );
        let c = client(&path).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(
            nfv_testutil::wait_until(WAIT, || port.is_connected()),
            "round {round}"
        );
        drop(c);
        assert!(nfv_testutil::wait_until(WAIT, || !port.is_connected()));
        drop(silent);
    }
    // The newcomers displaced silent connections; nobody was refused.
    assert!(port.counter("socket_silent_displaced") >= 5);
    assert_eq!(port.counter("socket_refused_busy"), 0);
    assert_eq!(port.counter("socket_refused_uid"), 0);
}

#[test]
fn a_silent_connection_is_dropped_after_the_first_message_deadline() {
    let (port, path) = port("deadline");
    // The server's clock starts after it accepts: later than this.
    let t0 = Instant::now();
    let c = connect(&path).unwrap();
    let bye = next(&c);
    let took = t0.elapsed();
    assert_eq!(reason(&bye), "Timeout");
    assert!(
        took >= FIRST_MESSAGE_TIMEOUT,
        "dropped after {took:?}, before the deadline"
    );
    // Counted before the client heard it, and as silence, not as a
    // handshake that ran out of time.
    assert_eq!(port.counter("socket_silent_dropped"), 1);
    assert_eq!(port.counter("socket_handshake_timeouts"), 0);
    assert_eq!(next(&c), None, "the server did not close the connection");
    // A client that talks is served.
    let _c = client(&path).unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || port.is_connected()));
}

#[test]
fn talkers_of_one_uid_hold_only_its_share() {
    let (port, path) = port("share");
    let held: Vec<Conn> = (0..MAX_HANDSHAKES_PER_UID)
        .map(|i| talker(&path).unwrap_or_else(|e| panic!("talker {i}: {e}")))
        .collect();
    // The share is full of clients that talk: the next one of this uid
    // is refused, and counted before it hears so.
    assert_eq!(talker(&path).err().as_deref(), Some("Too many connections"));
    assert_eq!(port.counter("socket_refused_uid"), 1);
    match client(&path) {
        Err(ClientError::Refused(why)) => assert_eq!(why, "Too many connections"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a fifth handshake of one uid got in"),
    }
    assert_eq!(port.counter("socket_refused_uid"), 2);
    assert_eq!(port.counter("socket_refused_busy"), 0);
    // Closed, they leave their slots (then count as refused on the port).
    drop(held);
    assert!(nfv_testutil::wait_until(WAIT, || port
        .gauges()
        .count("refused")
        == Some(MAX_HANDSHAKES_PER_UID as u64)));

    // Another uid's talkers fill their own share, not the socket: this
    // uid's client still connects while they hold it.
    if !nfv_testutil::is_root() {
        nfv_testutil::skip(
            "talkers_of_one_uid_hold_only_its_share (another uid)",
            "needs root to run a helper as another uid",
        );
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "talker_helper",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TALKER_ENV, path.to_string())
        .uid(65534)
        .gid(65534)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(helper.stdout.take().unwrap());
    let line = out
        .by_ref()
        .lines()
        .map_while(Result::ok)
        // libtest may have written the test's name on the same line.
        .find_map(|l| l.find("talkers:").map(|i| l[i..].to_string()))
        .expect("the helper reported nothing");
    assert_eq!(
        line,
        format!(
            "talkers: {MAX_HANDSHAKES_PER_UID} held, {} refused",
            TALKERS - MAX_HANDSHAKES_PER_UID
        )
    );
    let refused_before = port.counter("socket_refused_uid");
    let c = client(&path);
    // Let the helper go (it waits for its stdin to close).
    let _ = helper.stdin.take().unwrap().write_all(b"\n");
    let _ = std::io::copy(&mut out, &mut std::io::sink());
    let _ = helper.wait();
    let _c = c.unwrap();
    assert!(nfv_testutil::wait_until(WAIT, || port.is_connected()));
    assert_eq!(port.counter("socket_refused_uid"), refused_before);
}

/// Run by [`talkers_of_one_uid_hold_only_its_share`] as another uid: opens
/// [`TALKERS`] talking connections, reports how many got in, holds them
/// until its stdin closes.
#[test]
#[ignore = "a helper process: run by talkers_of_one_uid_hold_only_its_share"]
fn talker_helper() {
    let Ok(sock) = std::env::var(TALKER_ENV) else {
        return;
    };
    let path = SocketPath::parse(&sock);
    let (held, refused): (Vec<_>, Vec<_>) =
        (0..TALKERS).map(|_| talker(&path)).partition(Result::is_ok);
    println!("talkers: {} held, {} refused", held.len(), refused.len());
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}
