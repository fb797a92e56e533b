//! Live migration of a QEMU guest whose virtio-net NIC is a vhost-user
//! port of nfvswitch, between two nodes (two `nfvswitch run` processes)
//! linked by memif:
//!
//! ```text
//!   guest B ── vm-b ┐                      ┌ vm-a2 ── (guest A, migrated)
//!                   node 1 ══ memif link ══ node 2
//!   guest A ── vm-a ┘  (server role)  (client role)
//! ```
//!
//! Both nodes run `actions=normal`, so once guest A runs behind node 2,
//! node 1 must learn A's MAC on the link for B's frames to follow it (the
//! destination QEMU announces the guest with VHOST_USER_SEND_RARP, or the
//! guest with GUEST_ANNOUNCE). Every QEMU has a QMP socket; a destination
//! QEMU has the source's command line (same memfd memory, device, MAC),
//! its vhost-user socket on the other node and `-incoming unix:PATH`.
//!
//! Cases, in order, sharing one boot of the two guests: ping through node
//! 1; A migrated to node 2 while B sends it a paced TCP transfer, a flood
//! of zeros and a 20/s ping stream (md5 of the data, QEMU's downtime, the
//! longest ping gap and the loss; the source port's dirty log on, RARP
//! sent by the destination port, no checksum errors or duplicate replies
//! in A); a migration back cancelled half way (bandwidth throttled); a
//! migration to a destination whose switch is not running; a new A with
//! packed virtqueues migrated back to node 1 under the same traffic; the
//! switches' error counters. The source guest must keep working after
//! each failed migration.
//!
//! Without the guest image or QEMU the test prints SKIPPED. A migration
//! case prints SKIPPED only when QEMU refuses to migrate because the
//! switch cannot log dirty pages (its exact refusal, `migration_qmp::NO_DIRTY_LOG`);
//! any other failure fails. Every QEMU and both switches are killed on
//! drop, also when a case fails; the temp dir goes with them.

mod common;
#[path = "qemu/guest.rs"]
mod guest;
#[path = "qemu/migration_qmp.rs"]
mod migration_qmp;
#[path = "qemu/migration_traffic.rs"]
mod migration_traffic;
#[path = "qemu/node.rs"]
#[allow(dead_code)] // `start` (a lone node), `ctl`, `info_count`: for qemu.rs
mod node;
#[path = "qemu/qmp.rs"]
mod qmp;
#[path = "qemu/traffic.rs"]
#[allow(dead_code)] // its TCP helpers are qemu.rs's; this test paces its own transfer
mod traffic;

use guest::{Extras, Guest, Image, Spec};
use migration_qmp::*;
use migration_traffic::*;
use nfv_testutil::{TempDir, skip, wait_until};
use node::{MemifSpec, Node, NodeOpts, PortSpec, packets, wait_info};
use qmp::Qmp;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TEST: &str = "qemu_migration::live_migration_between_two_nodes";
/// Two TCG boots at once on a two-core machine that also runs two PMDs.
const BOOT: Duration = Duration::from_secs(180);
const CONNECT: Duration = Duration::from_secs(30);
const CMD: Duration = Duration::from_secs(30);
/// From `migrate` to `completed`.
const MIGRATE: Duration = Duration::from_secs(120);
/// The migration's bandwidth when it should be quick (bytes/s): QEMU's
/// default of 32 MiB/s would make the 256 MiB guest take seconds more.
const FAST: u64 = 1 << 30;
/// The bandwidth of the migration that is cancelled half way (bytes/s):
/// the guest's tens of MiB of non-zero RAM take most of a minute.
const CRAWL: u64 = 1 << 20;

const MAC_A: &str = "52:54:00:00:00:0a";
const MAC_B: &str = "52:54:00:00:00:0b";
const LINK: &str = "link";

/// Where guest A runs: on node 1 (port `vm-a`) or node 2 (port `vm-a2`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Site {
    Node1,
    Node2,
}

impl Site {
    fn other(self) -> Site {
        match self {
            Site::Node1 => Site::Node2,
            Site::Node2 => Site::Node1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Site::Node1 => "node 1",
            Site::Node2 => "node 2",
        }
    }

    /// The vhost-user port guest A uses on this node.
    fn port(self) -> &'static str {
        match self {
            Site::Node1 => "vm-a",
            Site::Node2 => "vm-a2",
        }
    }
}

/// A QEMU and its QMP connection.
struct Vm {
    qmp: Qmp,
    guest: Guest,
}

enum Outcome {
    Done(String),
    Skipped(String),
}

/// The test bed shared by every case. Fields drop in order: the QEMUs
/// first, then the switches, then the directory.
struct Bed {
    /// Guest A, wherever it runs now.
    a: Option<Vm>,
    b: Option<Guest>,
    /// The destination QEMU of the migration under way.
    dest: Option<Vm>,
    node1: Node,
    node2: Node,
    image: Image,
    a_site: Site,
    /// Guest A's NIC runs packed virtqueues (`packed=on`).
    a_packed: bool,
    /// What every QEMU that has ended wrote to stderr, in order.
    qemu_messages: Vec<String>,
    dir: TempDir,
}

impl Bed {
    fn start(image: Image) -> Result<Bed, String> {
        let dir = common::tempdir("qemu-migration");
        let tmp = TempDir(dir.clone());
        let (dir1, dir2) = (dir.join("node1"), dir.join("node2"));
        for d in [&dir1, &dir2] {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
        let vhost = |name, id| PortSpec {
            name,
            id,
            socket: dir.join(format!("{name}.sock")),
            switch_server: true,
            queues: 2,
            mrg_rxbuf: true,
        };
        let link = |server| MemifSpec {
            name: LINK,
            id: 10,
            socket: dir.join("link.sock"),
            server,
        };
        // Each node its own PMD core (the two PMDs poll without pause).
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let node1 = Node::start_with(
            &dir1,
            &[vhost(Site::Node1.port(), 1), vhost("vm-b", 2)],
            &NodeOpts {
                tag: "n1",
                core: cpus - 1,
                memif: vec![link(true)],
            },
        )
        .map_err(|e| format!("node 1: {e}"))?;
        let node2 = Node::start_with(
            &dir2,
            &[vhost(Site::Node2.port(), 1)],
            &NodeOpts {
                tag: "n2",
                core: 0,
                memif: vec![link(false)],
            },
        )
        .map_err(|e| format!("node 2: {e}"))?;
        Ok(Bed {
            a: None,
            b: None,
            dest: None,
            node1,
            node2,
            image,
            a_site: Site::Node1,
            a_packed: false,
            qemu_messages: Vec::new(),
            dir: tmp,
        })
    }

    fn node(&self, site: Site) -> &Node {
        match site {
            Site::Node1 => &self.node1,
            Site::Node2 => &self.node2,
        }
    }

    /// Guest A's QEMU as `name`, its NIC on `site`'s port.
    fn spec_a(&self, name: &'static str, site: Site) -> Spec {
        Spec {
            name,
            mac: MAC_A,
            ip: "198.18.0.1/24",
            socket: self.dir.0.join(format!("{}.sock", site.port())),
            qemu_server: false,
            queues: 2,
            mrg_rxbuf: true,
            packed: self.a_packed,
        }
    }

    fn spec_b(&self) -> Spec {
        Spec {
            name: "vm-b",
            mac: MAC_B,
            ip: "198.18.0.2/24",
            socket: self.dir.0.join("vm-b.sock"),
            qemu_server: false,
            queues: 2,
            mrg_rxbuf: true,
            packed: false,
        }
    }

    fn qmp_path(&self, name: &str) -> PathBuf {
        self.dir.0.join(format!("{name}-qmp.sock"))
    }

    fn guests(&mut self) -> Result<(&mut Guest, &mut Guest), String> {
        match (self.a.as_mut(), self.b.as_mut()) {
            (Some(a), Some(b)) => Ok((&mut a.guest, b)),
            _ => Err("a guest is not running".into()),
        }
    }

    fn source_qmp(&mut self) -> Result<&mut Qmp, String> {
        self.a
            .as_mut()
            .map(|a| &mut a.qmp)
            .ok_or_else(|| "guest A is not running".into())
    }

    /// Keeps what `g`'s QEMU said, then kills it.
    fn retire(&mut self, g: Guest) {
        let said = g.qemu_stderr();
        if !said.trim().is_empty() {
            self.qemu_messages
                .push(format!("{}: {}", g.spec.name, said.trim()));
        }
        g.kill();
    }

    /// Starts a destination QEMU for guest A as `name` with its NIC on
    /// `site`, waits until that node's port has it connected; returns the
    /// URI to migrate to.
    fn start_destination(&mut self, name: &'static str, site: Site) -> Result<String, String> {
        // A previous QEMU on that port is gone before a new one connects.
        wait_info(self.node(site), site.port(), "connected", "false", CONNECT)?;
        let spec = self.spec_a(name, site);
        let incoming = self.dir.0.join(format!("{name}.migrate"));
        let uri = format!("unix:{}", incoming.display());
        let extras = Extras {
            qmp: Some(self.qmp_path(name)),
            incoming: Some(uri.clone()),
        };
        let guest = Guest::incoming(&self.image, spec, &self.dir.0, extras, CONNECT)?;
        let qmp = match Qmp::connect(&self.qmp_path(name), CONNECT) {
            Ok(q) => q,
            Err(e) => return Err(format!("{name}: {e}\n{}", guest.diagnostics())),
        };
        self.dest = Some(Vm { qmp, guest });
        wait_info(self.node(site), site.port(), "connected", "true", CONNECT)?;
        Ok(uri)
    }

    /// After a completed migration: the destination runs the guest (its
    /// shell answers on the destination's serial port); the source QEMU,
    /// paused, is ended as a management layer would; A is now at `site`.
    fn switch_to_destination(&mut self, site: Site) -> Result<String, String> {
        let mut dest = self.dest.take().ok_or("no destination QEMU")?;
        // The destination (`-S`) holds the guest paused after the stream:
        // its memory must be the source's, page for page, before it runs.
        if let Err(status) = wait_status(&mut dest.qmp, "paused", CONNECT) {
            let d = dest.guest.diagnostics();
            self.dest = Some(dest);
            return Err(format!(
                "the destination did not load the migrated guest: {status}\n{d}"
            ));
        }
        let source = &mut self.a.as_mut().ok_or("no guest A")?.qmp;
        let same = match same_memory(source, &mut dest.qmp, &self.dir.0) {
            Ok(s) => s,
            Err(e) => {
                self.dest = Some(dest);
                return Err(e);
            }
        };
        dest.qmp.run("cont", json!({}))?;
        if let Err(status) = wait_status(&mut dest.qmp, "running", CONNECT) {
            let d = dest.guest.diagnostics();
            self.dest = Some(dest);
            return Err(format!(
                "the destination does not run the guest: {status}\n{d}"
            ));
        }
        let shell = dest.guest.wait_shell(CMD).map_err(|e| {
            // Where a guest that QEMU runs but that answers nothing is:
            // its registers twice, a second apart (a panic loop, an idle
            // loop or a spin), and its status.
            let mut regs = String::new();
            for _ in 0..2 {
                let r = dest.qmp.run(
                    "human-monitor-command",
                    json!({ "command-line": "info registers" }),
                );
                let text = r.map_or_else(|e| e, |v| v.as_str().unwrap_or_default().to_string());
                regs.push_str(&text.lines().take(4).collect::<Vec<_>>().join("\n"));
                regs.push_str("\n--\n");
                std::thread::sleep(Duration::from_secs(1));
            }
            let status = dest
                .qmp
                .run("query-status", json!({}))
                .unwrap_or_else(|e| json!(e));
            format!("{e}\nQEMU says {status}; guest registers:\n{regs}")
        });
        let old = self.a.replace(dest);
        self.a_site = site;
        if let Some(old) = old {
            self.retire(old.guest);
        }
        shell.map(|()| same)
    }

    /// Ends the destination QEMU of a migration that did not happen.
    fn drop_destination(&mut self) {
        if let Some(d) = self.dest.take() {
            self.retire(d.guest);
        }
    }

    fn diagnostics(&self) -> String {
        let mut s = String::new();
        let guests = [
            self.a.as_ref().map(|v| &v.guest),
            self.b.as_ref(),
            self.dest.as_ref().map(|v| &v.guest),
        ];
        for g in guests.into_iter().flatten() {
            s.push_str(&g.diagnostics());
            s.push('\n');
        }
        s.push_str("--- QEMUs that ended ---\n");
        s.push_str(&self.qemu_messages.join("\n"));
        // Ring positions first: the output may be cut after a few KiB.
        for (name, node) in [("node 1", &self.node1), ("node 2", &self.node2)] {
            s.push_str(&format!("\n--- {name}: vhost-user ring events ---\n"));
            s.push_str(&node.ring_events());
        }
        for (name, node) in [("node 1", &self.node1), ("node 2", &self.node2)] {
            s.push_str(&format!("\n--- {name}: show ports ---\n"));
            s.push_str(&node.ports().map(|p| p.to_string()).unwrap_or_else(|e| e));
            s.push_str(&format!("\n--- {name}: switch log (tail) ---\n"));
            s.push_str(&node.log_tail());
        }
        s
    }
}

type Case = fn(&mut Bed) -> Result<Outcome, String>;

/// In order: later cases build on the state earlier ones leave (where
/// guest A runs).
const CASES: &[(&str, Case)] = &[
    ("boot A and B on node 1, ping both ways", boot_and_ping),
    (
        "live migration of A to node 2 under TCP and ping traffic",
        migrate_under_traffic,
    ),
    (
        "migration back to node 1 cancelled half way",
        migrate_cancelled,
    ),
    (
        "migration to a destination whose switch is not running",
        destination_switch_down,
    ),
    (
        "A restarted with packed virtqueues, migrated back under traffic",
        packed_migration,
    ),
    ("switch counters: no errors on either node", switch_health),
];

#[test]
fn live_migration_between_two_nodes() {
    let image = match Image::find() {
        Ok(i) => i,
        Err(why) => return skip(TEST, &why),
    };
    let started = Instant::now();
    let mut bed = Bed::start(image).unwrap_or_else(|e| panic!("the switches did not start: {e}"));
    for (case, run) in CASES {
        let t = Instant::now();
        let secs = || t.elapsed().as_secs_f64();
        match run(&mut bed) {
            Ok(Outcome::Done(what)) => println!("case {case}: ok in {:.1} s: {what}", secs()),
            Ok(Outcome::Skipped(why)) => {
                println!("case {case}: SKIPPED after {:.1} s: {why}", secs());
                skip(&format!("{TEST} ({case})"), &why);
            }
            Err(e) => panic!(
                "case {case}: FAILED after {:.1} s: {e}\n{}",
                secs(),
                bed.diagnostics()
            ),
        }
    }
    if !bed.qemu_messages.is_empty() {
        println!(
            "what the QEMUs that ended said:\n  {}",
            bed.qemu_messages.join("\n  ")
        );
    }
    println!(
        "qemu_migration: {} cases in {:.1} s",
        CASES.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Boots A (with QMP) and B on node 1 at once, waits for the memif link,
/// pings both ways. Also tells whether QEMU would let A migrate.
fn boot_and_ping(bed: &mut Bed) -> Result<Outcome, String> {
    let (image, dir) = (&bed.image, bed.dir.0.as_path());
    let (sa, sb) = (bed.spec_a("vm-a", Site::Node1), bed.spec_b());
    let extras = Extras {
        qmp: Some(bed.qmp_path("vm-a")),
        incoming: None,
    };
    let (ra, rb) = std::thread::scope(|s| {
        let ta = s.spawn(|| Guest::boot_with(image, sa, dir, BOOT, extras));
        let tb = s.spawn(|| Guest::boot(image, sb, dir, BOOT));
        (join(ta), join(tb))
    });
    let b = bed.b.insert(rb?);
    let tb = b.boot_secs;
    let a = ra?;
    let qmp = Qmp::connect(a.qmp.as_deref().unwrap_or(Path::new("")), CONNECT)
        .map_err(|e| format!("vm-a: {e}"))?;
    let a = bed.a.insert(Vm { qmp, guest: a });
    let ta = a.guest.boot_secs;
    let blocked = a.qmp.run("query-migrate", json!({}))?["blocked-reasons"].clone();
    for p in ["vm-a", "vm-b"] {
        bed.node1.wait_connected(p, 1, CONNECT)?;
    }
    wait_info(&bed.node1, LINK, "connected", "true", CONNECT)?;
    wait_info(&bed.node2, LINK, "connected", "true", CONNECT)?;
    let (a, b) = bed.guests()?;
    let ab = traffic::ping(a, b)?;
    let ba = traffic::ping(b, a)?;
    let blocked = match blocked.as_array() {
        Some(r) if !r.is_empty() => format!("QEMU blocks migrating A: {blocked}"),
        _ => "QEMU allows migrating A".into(),
    };
    Ok(Outcome::Done(format!(
        "boot to shell vm-a {ta:.1} s, vm-b {tb:.1} s (together); memif link up; \
         ping RTT a->b {ab:.2} ms, b->a {ba:.2} ms; {blocked}"
    )))
}

fn join<T>(h: std::thread::ScopedJoinHandle<'_, Result<T, String>>) -> Result<T, String> {
    h.join()
        .unwrap_or_else(|_| Err("boot thread panicked".into()))
}

/// A migrates to node 2 while B sends it a paced TCP transfer, a flood
/// of zeros and pings 20 times a second. The migration must complete;
/// the transfer must finish with the same md5 behind node 2 (through the
/// memif link); the ping stream must be answered again at its end, with
/// no duplicate replies and no new checksum errors in A; the source port
/// must have had its dirty log on, the destination port must have sent
/// the RARP announcement.
fn migrate_under_traffic(bed: &mut Bed) -> Result<Outcome, String> {
    migrate_a_under_traffic(bed, "vm-a-at-node2")
}

/// Guest A, wherever it is, migrated under traffic to a destination QEMU
/// named `dest_name` on the other node.
fn migrate_a_under_traffic(bed: &mut Bed, dest_name: &'static str) -> Result<Outcome, String> {
    let (from, to) = (bed.a_site, bed.a_site.other());
    let uri = bed.start_destination(dest_name, to)?;
    // Where node 1 sends B's frames for A once it has learned A's new
    // place: the link, or A's port on node 1.
    let toward_a = match to {
        Site::Node1 => to.port(),
        Site::Node2 => LINK,
    };
    let toward_a_before = packets(&bed.node1, toward_a)?;
    let dest_before = packets(bed.node(to), to.port())?;
    let (a, b) = bed.guests()?;
    let csum_before = checksum_errors(a)?;
    let md5 = start_traffic(a, b)?;
    // The transfer is under way before the migration starts.
    a.ok(
        "for i in $(seq 100); do [ -s /tmp/mig.rx ] && exit 0; sleep 0.1; done; exit 1",
        CMD,
    )
    .map_err(|e| format!("no data reached A before the migration: {e}"))?;
    let t = Instant::now();
    if let Some(refusal) = start_migration(bed.source_qmp()?, &uri, FAST)? {
        stop_traffic(bed);
        bed.drop_destination();
        return Ok(Outcome::Skipped(format!(
            "QEMU refused to migrate: {refusal}"
        )));
    }
    // What the source port says of its dirty log, sampled while QEMU
    // migrates (borrowing the node and A's QMP, two fields of the bed).
    let source_node = match from {
        Site::Node1 => &bed.node1,
        Site::Node2 => &bed.node2,
    };
    let qmp = &mut bed.a.as_mut().ok_or("no guest A")?.qmp;
    let over = std::sync::atomic::AtomicBool::new(false);
    let (end, log_states) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut seen: Vec<String> = Vec::new();
            while !over.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(v) = source_node.info(from.port(), "dirty_log")
                    && seen.last() != Some(&v)
                {
                    seen.push(v);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            seen
        });
        let end = wait_migration_end(qmp, MIGRATE);
        over.store(true, std::sync::atomic::Ordering::Relaxed);
        (end, sampler.join().unwrap_or_default())
    });
    let end = end?;
    let migrate_secs = t.elapsed().as_secs_f64();
    if end["status"] != "completed" {
        return Err(format!("the migration ended {end}"));
    }
    let b = bed.b.as_mut().ok_or("no guest B")?;
    let sending = b.ok("[ -e /tmp/mig.sent ] && echo SENT || echo SENDING", CMD)?;
    if !sending.contains("SENDING") {
        return Err(format!(
            "the transfer ended before the migration did ({migrate_secs:.1} s): \
             make it longer (BLOCKS, PACE)"
        ));
    }
    let same_memory = bed.switch_to_destination(to)?;
    // The flood's connection outlived the migration (its nc still runs).
    stop_flood(bed.b.as_mut().ok_or("no guest B")?)?;
    let got = received_md5(&mut bed.a.as_mut().ok_or("no guest A")?.guest)?;
    let b = bed.b.as_mut().ok_or("no guest B")?;
    let sent = b.ok("cat /tmp/mig.sent; rm -f /tmp/mig.tx", CMD)?;
    let pings = stop_ping(b)?;
    let a = &mut bed.a.as_mut().ok_or("no guest A")?.guest;
    a.ok("killall sleep; true", CMD)?;
    let csum_after = checksum_errors(a)?;
    if got != md5 {
        return Err(format!(
            "B -> A across the migration: sent md5 {md5}, A received {got:?} (sender: {sent:?})"
        ));
    }
    if csum_after.0 != csum_before.0 {
        return Err(format!(
            "A's checksum errors across the migration: {} -> {}",
            csum_before.1, csum_after.1
        ));
    }
    // The stream is answered again: its last pings came back, but for
    // those still in flight when it was stopped — up to 2 s of them: under
    // TCG on a busy machine a round trip took over half a second (the
    // stream stops seconds after the migration ended, so an answer within
    // 2 s of its end is an answer from A's new place).
    let in_flight = 2000 / PING_MS;
    if pings.last_answered + in_flight < pings.sent || pings.answered == 0 {
        return Err(format!(
            "B's pings to A not answered after the migration: {} sent, {} answered, \
             the last answered #{}",
            pings.sent, pings.answered, pings.last_answered
        ));
    }
    if pings.duplicates > 0 {
        return Err(format!(
            "{} duplicate ping replies from A across the migration",
            pings.duplicates
        ));
    }
    if !log_states.iter().any(|s| s.starts_with("on (")) {
        return Err(format!(
            "{} on node 1 never showed its dirty log on during the migration: {log_states:?}",
            from.port()
        ));
    }
    let (src, dst) = (bed.node(from), bed.node(to));
    for (node, port) in [(src, from.port()), (dst, to.port())] {
        for counter in ["log_errors", "log_marks_dropped"] {
            let n = node.info(port, counter)?;
            if n != "0" {
                return Err(format!("{port}: {counter} {n}"));
            }
        }
    }
    let rarp = dst.info(to.port(), "rarp_sent")?;
    if rarp.parse::<u64>().unwrap_or(0) == 0 {
        return Err(format!(
            "{} on {} sent no RARP announcement for A (rarp_sent {rarp:?})",
            to.port(),
            to.name()
        ));
    }
    let port = dst.port(to.port())?;
    let dest_after = packets(dst, to.port())?;
    let (rx, tx) = (dest_after.0 - dest_before.0, dest_after.1 - dest_before.1);
    if port["info"]["connected"] != "true" || rx == 0 || tx == 0 {
        return Err(format!(
            "{} on {} after the migration: rx {rx}, tx {tx}: {}",
            to.port(),
            to.name(),
            port["info"]
        ));
    }
    // B's frames to A follow it: node 1 learned A's MAC at its new place
    // (an unlearned MAC would still go where A was, whose QEMU is gone).
    let toward_a_after = packets(&bed.node1, toward_a)?;
    let followed = toward_a_after.1 - toward_a_before.1;
    if followed < pings.answered.min(100) / 2 {
        return Err(format!(
            "node 1 sent only {followed} frames to {toward_a} during and after the migration"
        ));
    }
    let downtime = end["downtime"].as_u64().unwrap_or(0);
    let ram = &end["ram"];
    Ok(Outcome::Done(format!(
        "completed in {migrate_secs:.1} s (QEMU: total {} ms, downtime {downtime} ms, \
         {} MiB sent, {} dirty syncs); {same_memory}; {} dirty log: {}; \
         TCP {} KiB B->A md5-equal across it{}; \
         pings every {PING_MS} ms: {} sent, {} lost, longest gap {} ms, no duplicates; \
         A's checksum errors unchanged ({}); {} on {}: rx {rx}, tx {tx}, rarp_sent {rarp}; \
         node 1 -> A through {toward_a}: {followed} frames",
        end["total-time"],
        ram["transferred"].as_u64().unwrap_or(0) >> 20,
        ram["dirty-sync-count"],
        from.port(),
        log_states.join(" -> "),
        BLOCKS * 64,
        if flood() {
            " (with a flood of zeros alongside)"
        } else {
            ""
        },
        pings.sent,
        pings.sent - pings.answered,
        pings.gap_ms(),
        csum_after.1,
        to.port(),
        to.name(),
    )))
}

/// A migrates back towards node 1 at 1 MiB/s and is cancelled while RAM
/// is still being copied: the source runs on, the destination QEMU gives
/// up, and A answers pings from B behind the node it never left.
fn migrate_cancelled(bed: &mut Bed) -> Result<Outcome, String> {
    let (from, to) = (bed.a_site, bed.a_site.other());
    let uri = bed.start_destination("vm-a-cancelled", to)?;
    if let Some(refusal) = start_migration(bed.source_qmp()?, &uri, CRAWL)? {
        bed.drop_destination();
        return Ok(Outcome::Skipped(format!(
            "QEMU refused to migrate: {refusal}"
        )));
    }
    // A's QMP and the source node: two fields of the bed borrowed at once.
    let source_node = match from {
        Site::Node1 => &bed.node1,
        Site::Node2 => &bed.node2,
    };
    let qmp = &mut bed.a.as_mut().ok_or("no guest A")?.qmp;
    // Half way: RAM is being sent and much of it is left.
    let mut state;
    let deadline = Instant::now() + CMD;
    let half_way = loop {
        state = qmp.run("query-migrate", json!({}))?;
        let transferred = state["ram"]["transferred"].as_u64().unwrap_or(0);
        if state["status"] == "active" && transferred >= 2 << 20 {
            break true;
        }
        if state["status"] != "setup" && state["status"] != "active" || Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !half_way {
        return Err(format!("the throttled migration is not under way: {state}"));
    }
    let log_during = source_node.info(from.port(), "dirty_log")?;
    if !log_during.starts_with("on (") {
        return Err(format!(
            "{}: dirty_log {log_during:?} while QEMU migrates",
            from.port()
        ));
    }
    qmp.run("migrate_cancel", json!({}))?;
    let end = wait_migration_end(qmp, CONNECT)?;
    if end["status"] != "cancelled" {
        return Err(format!("after migrate_cancel the migration ended {end}"));
    }
    let status = qmp.run("query-status", json!({}))?;
    qmp.run("migrate-set-parameters", json!({ "max-bandwidth": FAST }))?;
    if status["status"] != "running" {
        return Err(format!("the source after the cancel: {status}"));
    }
    // QEMU stops the log when the migration is over.
    wait_info(source_node, from.port(), "dirty_log", "off", CONNECT)?;
    // The destination's incoming stream broke: it ends by itself.
    let dest = &mut bed.dest.as_mut().ok_or("no destination")?.guest;
    let mut exit = None;
    wait_until(CONNECT, || {
        exit = dest.exited();
        exit.is_some()
    });
    let dest_end = match exit {
        Some(st) => format!("the destination QEMU exited ({st})"),
        None => "the destination QEMU still waited (killed)".into(),
    };
    bed.drop_destination();
    let before = packets(bed.node(from), from.port())?;
    let (a, b) = bed.guests()?;
    let ab = traffic::ping(a, b)?;
    let ba = traffic::ping(b, a)?;
    let after = packets(bed.node(from), from.port())?;
    if after.0 <= before.0 || after.1 <= before.1 {
        return Err(format!(
            "{} counters did not move with the pings: {before:?} -> {after:?}",
            from.port()
        ));
    }
    Ok(Outcome::Done(format!(
        "cancelled with {} of {} MiB sent; source {}; {} dirty log {log_during:?} during, \
         \"off\" after; {dest_end}; ping RTT a->b {ab:.2} ms, b->a {ba:.2} ms, through {}",
        state["ram"]["transferred"].as_u64().unwrap_or(0) >> 20,
        state["ram"]["total"].as_u64().unwrap_or(0) >> 20,
        status["status"],
        from.port(),
        from.port()
    )))
}

/// The destination's vhost-user socket is a stale file (a switch that is
/// not running left it; nothing listens): the destination QEMU cannot
/// connect its NIC and exits at start, the migration to it fails, and the
/// source guest runs on.
fn destination_switch_down(bed: &mut Bed) -> Result<Outcome, String> {
    let stale = bed.dir.0.join("no-switch.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).map_err(|e| e.to_string())?);
    let name = "vm-a-no-switch";
    let mut spec = bed.spec_a(name, bed.a_site.other());
    spec.socket = stale;
    let incoming = bed.dir.0.join(format!("{name}.migrate"));
    let uri = format!("unix:{}", incoming.display());
    let extras = Extras {
        qmp: Some(bed.qmp_path(name)),
        incoming: Some(uri.clone()),
    };
    // QEMU makes its serial socket before its NIC: it may exit before or
    // after the console connects.
    let dest_start = match Guest::incoming(&bed.image, spec, &bed.dir.0, extras, CONNECT) {
        Ok(mut g) => {
            let mut exit = None;
            wait_until(CONNECT, || {
                exit = g.exited();
                exit.is_some()
            });
            let said = g.qemu_stderr();
            let exited = exit.is_some();
            bed.retire(g);
            if !exited {
                return Err(format!(
                    "a destination QEMU without a switch did not exit: {said}"
                ));
            }
            said
        }
        Err(e) => {
            let said = std::fs::read_to_string(guest::qemu_log(&bed.dir.0, name)).unwrap_or(e);
            bed.qemu_messages.push(format!("{name}: {}", said.trim()));
            said
        }
    };
    if !dest_start.contains("Connection refused") {
        return Err(format!(
            "the destination QEMU without a switch: expected a refused connection: {dest_start}"
        ));
    }
    let qmp = bed.source_qmp()?;
    let failure = match start_migration(qmp, &uri, FAST)? {
        Some(refusal) => {
            return Ok(Outcome::Skipped(format!(
                "QEMU refused to migrate: {refusal}"
            )));
        }
        None => wait_migration_end(qmp, CONNECT)?,
    };
    if failure["status"] != "failed" {
        return Err(format!("migrating to no destination ended {failure}"));
    }
    let status = qmp.run("query-status", json!({}))?;
    if status["status"] != "running" {
        return Err(format!("the source after the failed migration: {status}"));
    }
    let (a, b) = bed.guests()?;
    let ab = traffic::ping(a, b)?;
    let ba = traffic::ping(b, a)?;
    let said = dest_start
        .lines()
        .find(|l| l.contains("Connection refused"))
        .unwrap_or("")
        .trim();
    Ok(Outcome::Done(format!(
        "destination QEMU: {said:?}; migration failed: {:?}; source {}; \
         ping RTT a->b {ab:.2} ms, b->a {ba:.2} ms",
        failure["error-desc"].as_str().unwrap_or(""),
        status["status"]
    )))
}

/// A new guest A with `packed=on` (the switch logs packed-ring writes
/// apart from split-ring ones) where A is, then migrated to the other
/// node under the same traffic as the split-ring migration.
fn packed_migration(bed: &mut Bed) -> Result<Outcome, String> {
    let site = bed.a_site;
    if let Some(old) = bed.a.take() {
        bed.retire(old.guest);
    }
    wait_info(bed.node(site), site.port(), "connected", "false", CONNECT)?;
    bed.a_packed = true;
    let name = "vm-a-packed";
    let extras = Extras {
        qmp: Some(bed.qmp_path(name)),
        incoming: None,
    };
    let spec = bed.spec_a(name, site);
    let guest = Guest::boot_with(&bed.image, spec, &bed.dir.0, BOOT, extras)?;
    let boot = guest.boot_secs;
    let qmp = Qmp::connect(&bed.qmp_path(name), CONNECT).map_err(|e| format!("{name}: {e}"))?;
    bed.a = Some(Vm { qmp, guest });
    bed.node(site).wait_connected(site.port(), 1, CONNECT)?;
    let layout = bed.node(site).info(site.port(), "ring_layout")?;
    if layout != "packed" {
        return Err(format!(
            "{}: ring_layout {layout:?} for a packed=on guest",
            site.port()
        ));
    }
    let (a, b) = bed.guests()?;
    traffic::ping(b, a)?;
    match migrate_a_under_traffic(bed, "vm-a-packed-moved")? {
        Outcome::Done(what) => Ok(Outcome::Done(format!(
            "boot {boot:.1} s, {} ring_layout packed; {what}",
            site.port()
        ))),
        skipped => Ok(skipped),
    }
}

/// Every vhost-user port that carried A or B, on both nodes: no protocol,
/// negotiation, memory-table, ring, guest-memory or dirty-log errors, no
/// quarantined or stuck rings, no vring faults ([`node::VRING_FAULTS`]); the
/// memif link on both sides: no bad descriptors, chains or heads, no
/// oversized or empty frames, no faults.
fn switch_health(bed: &mut Bed) -> Result<Outcome, String> {
    let mut summary = Vec::new();
    for (node_name, node, port) in [
        ("node 1", &bed.node1, "vm-a"),
        ("node 1", &bed.node1, "vm-b"),
        ("node 2", &bed.node2, "vm-a2"),
    ] {
        let p = node.port(port)?;
        let info = &p["info"];
        for key in [
            "protocol_errors",
            "negotiation_errors",
            "mem_table_errors",
            "ring_errors",
            "ack_timeouts",
            "memory_faults",
            "log_errors",
        ] {
            if info[key] != "0" {
                return Err(format!("{node_name} {port}: {key} = {}: {info}", info[key]));
            }
        }
        for key in ["quarantined", "call_stuck"] {
            if info[key] != "[]" {
                return Err(format!("{node_name} {port}: {key} = {}: {info}", info[key]));
            }
        }
        if let Some(fault) = node::vring_fault(info) {
            return Err(format!("{node_name} {port}: {fault}"));
        }
        let last_error = info["last_error"]
            .as_str()
            .map(|e| format!(", last_error {e:?}"))
            .unwrap_or_default();
        summary.push(format!(
            "{node_name} {port}: rx {} tx {}{last_error}",
            p["rx"]["packets"], p["tx"]["packets"]
        ));
    }
    for (node_name, node) in [("node 1", &bed.node1), ("node 2", &bed.node2)] {
        let p = node.port(LINK)?;
        let info = &p["info"];
        for key in [
            "bad_desc",
            "bad_chain",
            "too_big",
            "empty",
            "bad_head",
            "memory_faults",
        ] {
            if info[key] != "0" {
                return Err(format!("{node_name} {LINK}: {key} = {}: {info}", info[key]));
            }
        }
        summary.push(format!(
            "{node_name} {LINK}: rx {} tx {}",
            p["rx"]["packets"], p["tx"]["packets"]
        ));
    }
    // Not errors of themselves (a QEMU killed mid-connection is worth a
    // warning), but worth reading.
    for (node_name, node) in [("node 1", &bed.node1), ("node 2", &bed.node2)] {
        let warnings = node.log_warnings();
        summary.push(format!(
            "{node_name} logged {} warning(s){}{}",
            warnings.len(),
            if warnings.is_empty() { "" } else { ":\n    " },
            warnings.join("\n    ")
        ));
    }
    Ok(Outcome::Done(summary.join("; ")))
}
