//! An nfvswitch node (`nfvswitch run`, a child process) with a sink port
//! per number, driven over its control socket (one connection for the
//! whole run, the requests `nfvswitch ctl` sends), and the reading of its
//! `trace` answer.

use super::key::*;
use nfv_testutil::wait_until;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Node {
    child: Child,
    w: UnixStream,
    r: BufReader<UnixStream>,
    ports: Vec<u16>,
}

impl Node {
    /// Starts `bin run` with sink ports `ports` in `dir`. Its PMD polls
    /// nothing (sinks have no rx queues) but spins: it is moved to
    /// SCHED_IDLE, so that it only takes CPU time nothing else wants
    /// (the control threads, which answer the traces, keep theirs).
    pub fn start(bin: &str, dir: &Path, ports: &[u16]) -> Result<Node, String> {
        let socket = dir.join("nfvswitch.sock");
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut cfg = format!(
            "[node]\nname = \"ovsdiff\"\ncontrol_socket = \"{}\"\napi = \"off\"\n\
             [memory]\nframes = 1024\nhugepages = \"never\"\n\
             [pmd]\ncores = [{}]\npmu = false\n",
            socket.display(),
            cpus - 1
        );
        for p in ports {
            cfg += &format!("[[port]]\nname = \"p{p}\"\nid = {p}\ntype = \"sink\"\n");
        }
        let path = dir.join("node.toml");
        std::fs::write(&path, cfg).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("nfvswitch.log")).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(bin);
        cmd.args(["--log", "warn", "run"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(log);
        // SAFETY: prctl is async-signal-safe; nothing else runs in the hook.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| format!("{bin}: {e}"))?;
        let up = wait_until(Duration::from_secs(30), || {
            UnixStream::connect(&socket).is_ok()
        });
        if !up {
            let _ = child.kill();
            let _ = child.wait();
            let log = std::fs::read_to_string(dir.join("nfvswitch.log")).unwrap_or_default();
            return Err(format!("nfvswitch: control socket never appeared\n{log}"));
        }
        // The PMD threads start with the node; a slow start may lag.
        wait_until(Duration::from_secs(5), || idle_pmds(child.id()) > 0);
        let s = UnixStream::connect(&socket).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        Ok(Node {
            child,
            w: s,
            r,
            ports: ports.to_vec(),
        })
    }

    /// One request; its `data`, or the switch's error message.
    fn request(&mut self, req: Value) -> Result<Value, String> {
        let mut text = req.to_string();
        text.push('\n');
        self.w
            .write_all(text.as_bytes())
            .map_err(|e| format!("control socket: {e}"))?;
        let mut line = String::new();
        self.r
            .read_line(&mut line)
            .map_err(|e| format!("control socket: {e}"))?;
        let resp: Value =
            serde_json::from_str(&line).map_err(|e| format!("control socket: {e}: {line}"))?;
        match resp["status"].as_str() {
            Some("ok") => Ok(resp["data"].clone()),
            _ => Err(resp["message"].as_str().unwrap_or(&line).trim().to_string()),
        }
    }

    pub fn del_flows(&mut self) -> Result<(), String> {
        self.request(json!({"cmd": "del-flows", "filter": ""}))
            .map(drop)
    }

    /// All or nothing, as `ctl add-flow` with several rules.
    pub fn add_flows(&mut self, flows: &[String]) -> Result<(), String> {
        self.request(json!({"cmd": "add-flows", "flows": flows}))
            .map(drop)
    }

    /// Removes every group and meter (and the rules naming them).
    pub fn del_groups_and_meters(&mut self) -> Result<(), String> {
        self.request(json!({"cmd": "del-groups"}))?;
        self.request(json!({"cmd": "del-meters"})).map(drop)
    }

    /// `ctl add-group TEXT`.
    pub fn add_group(&mut self, text: &str) -> Result<(), String> {
        self.request(json!({"cmd": "add-group", "group": text}))
            .map(drop)
    }

    /// `ctl add-meter TEXT`.
    pub fn add_meter(&mut self, text: &str) -> Result<(), String> {
        self.request(json!({"cmd": "add-meter", "meter": text}))
            .map(drop)
    }

    /// Every rule as dump-flows shows it.
    pub fn dump_flows(&mut self) -> Result<Value, String> {
        self.request(json!({"cmd": "dump-flows", "filter": ""}))
    }

    /// `ctl trace FLOW [--ct-next FLAGS]...`, read back.
    pub fn trace(&mut self, flow: &str, ct_next: &[String]) -> Result<Trace, String> {
        let t = self.request(json!({"cmd": "trace", "flow": flow, "ct_next": ct_next}))?;
        parse_trace(&t, &self.ports).map_err(|e| format!("{e}\n{t:#}"))
    }
}

/// Moves the PMD threads (`pmd-*`) of process `pid` to SCHED_IDLE;
/// returns how many it found.
fn idle_pmds(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    let mut n = 0;
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let Ok(tid) = t.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if comm.starts_with("pmd") {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: a plain syscall on a thread of our own child.
            unsafe {
                libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param);
            }
            n += 1;
        }
    }
    n
}

impl Drop for Node {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its PID.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let gone = wait_until(Duration::from_secs(10), || {
            matches!(self.child.try_wait(), Ok(Some(_)))
        });
        if !gone {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `k` in the syntax `ctl trace` takes (a match with every field exact).
pub fn packet_text(k: &Key) -> String {
    let mut s = format!(
        "in_port={},dl_src={},dl_dst={}",
        k.in_port,
        mac(k.dl_src),
        mac(k.dl_dst)
    );
    if k.vlan_tci & VLAN_PRESENT != 0 {
        s += &format!(
            ",dl_vlan={},dl_vlan_pcp={}",
            k.vlan_tci & 0xfff,
            k.vlan_tci >> 13
        );
    }
    s += &format!(",dl_type=0x{:04x}", k.dl_type);
    if k.dl_type == ETH_ARP {
        s += &format!(
            ",arp_op={},arp_spa={},arp_tpa={},arp_sha={},arp_tha={}",
            k.nw_proto,
            ip4(k.nw_src),
            ip4(k.nw_dst),
            mac(k.arp_sha),
            mac(k.arp_tha)
        );
    }
    if k.is_ip() {
        s += &format!(",nw_proto={}", k.nw_proto);
        if k.is_ipv4() {
            s += &format!(",nw_src={},nw_dst={}", ip4(k.nw_src), ip4(k.nw_dst));
        } else {
            s += &format!(
                ",ipv6_src={},ipv6_dst={},ipv6_label=0x{:05x}",
                ip6(k.ipv6_src),
                ip6(k.ipv6_dst),
                k.ipv6_label
            );
        }
        s += &format!(
            ",nw_tos={},nw_ecn={},nw_ttl={},ip_frag={}",
            k.nw_tos & 0xfc,
            k.nw_tos & 3,
            k.nw_ttl,
            super::ovs::frag_word(k.ip_frag)
        );
        if k.has_ports() {
            s += &format!(",tp_src={},tp_dst={}", k.tp_src, k.tp_dst);
            if k.nw_proto == TCP {
                s += &format!(",tcp_flags=0x{:03x}", k.tcp_flags);
            }
        }
        if k.has_icmp() {
            let p = if k.is_ipv6() { "icmpv6" } else { "icmp" };
            s += &format!(",{p}_type={},{p}_code={}", k.tp_src, k.tp_dst);
        }
        if k.is_nd() {
            s += &format!(",nd_target={}", ip6(k.nd_target));
            if k.tp_src == 135 {
                s += &format!(",nd_sll={}", mac(k.arp_sha));
            } else {
                s += &format!(",nd_tll={}", mac(k.arp_tha));
            }
        }
    }
    s
}

/// One `trace` answer read back.
#[derive(Debug)]
pub struct Trace {
    pub packet: Key,
    pub priority: Option<u16>,
    /// The rule as dump-flows shows it.
    pub rule: Option<String>,
    /// (port, the packet's fields there), in action order; `flood`/`all`
    /// as every port but the in_port; the packet's own, then each tracked
    /// copy's in the order of `recirculations`.
    pub outputs: Vec<(u16, Key)>,
    /// The tracked copies (`ct(table=T)`) the trace followed, in the order
    /// it looked them up.
    pub recirculations: Vec<Recirc>,
    /// A step's note says the TTL ran out.
    pub ttl_expired: bool,
    /// Every action the pipeline ran, from every table it went through
    /// (`goto_table`/`resubmit` resolved) and every group bucket, as
    /// nfvswitch prints them.
    pub pipeline_actions: Vec<String>,
    /// Group steps met.
    pub groups: usize,
    pub json: Value,
}

fn parse_trace(t: &Value, ports: &[u16]) -> Result<Trace, String> {
    let packet = parse_key(t["packet"].as_str().ok_or("no packet")?)?;
    let rule = t["rule"].as_str().map(str::to_string);
    let priority = match &rule {
        None => None,
        Some(r) => Some(rule_priority(r)?),
    };
    let mut read = Read::default();
    read_steps(
        &mut read,
        t["steps"].as_array().ok_or("no steps")?,
        &packet,
        ports,
    )?;
    // The tracked copies in the order they were looked up (each numbered;
    // those a copy forks come later than it), their outputs after the
    // packet's own, as the trace lists them.
    while let Some((n, copy)) = read.forked.pop_first() {
        let got = read.recirculations.len() as u64 + 1;
        if n != got {
            return Err(format!("recirculation {n} where {got} was due"));
        }
        let key = parse_key(copy["packet"].as_str().ok_or("copy without packet")?)?;
        let priority = match copy["rule"].as_str() {
            None => None,
            Some(r) => Some(rule_priority(r)?),
        };
        read.recirculations.push(Recirc {
            table: copy["tables"][0]["table"]
                .as_u64()
                .ok_or("copy without table")? as u8,
            packet: key.without_ct(),
            ct_state: key.ct_state,
            ct_zone: key.ct_zone,
            ct_mark: key.ct_mark,
            ct_label: key.ct_label,
            priority,
        });
        read_steps(
            &mut read,
            copy["steps"].as_array().ok_or("copy without steps")?,
            &packet,
            ports,
        )?;
    }
    let listed = t["outputs"].as_array().ok_or("no outputs")?.len();
    if listed != read.named {
        return Err(format!(
            "{listed} outputs listed, {} output steps that send",
            read.named
        ));
    }
    let Read {
        outputs,
        ttl_expired,
        actions: pipeline_actions,
        groups,
        recirculations,
        ..
    } = read;
    Ok(Trace {
        packet,
        priority,
        rule,
        outputs,
        recirculations,
        ttl_expired,
        pipeline_actions,
        groups,
        json: t.clone(),
    })
}

/// A rule's priority as dump-flows prints the rule (none written: the
/// default, 32768).
fn rule_priority(r: &str) -> Result<u16, String> {
    r.split(',')
        .find_map(|i| i.strip_prefix("priority="))
        .map_or(Ok(32768), |p| p.parse::<u16>())
        .map_err(|_| format!("priority in {r:?}"))
}

/// What the steps of a trace (its groups' buckets' steps and its tracked
/// copies' included) say.
#[derive(Default)]
struct Read {
    /// Tracked copies met and not read yet, by their number.
    forked: std::collections::BTreeMap<u64, Value>,
    recirculations: Vec<Recirc>,
    outputs: Vec<(u16, Key)>,
    /// Output steps that send something (each an entry of the trace's
    /// `outputs`).
    named: usize,
    ttl_expired: bool,
    actions: Vec<String>,
    groups: usize,
}

/// Reads `steps` (recursively into the buckets a group step ran, in
/// order: each ran on its own copy, and their outputs come where the
/// group's step is).
fn read_steps(r: &mut Read, steps: &[Value], packet: &Key, ports: &[u16]) -> Result<(), String> {
    for s in steps {
        let action = s["action"].as_str().ok_or("step without action")?;
        r.actions.push(action.to_string());
        let note = s["note"].as_str();
        r.ttl_expired |= note.is_some_and(|n| n.contains("ttl_expired"));
        let k = parse_key(s["packet"].as_str().ok_or("step without packet")?)?.without_ct();
        if let Some(copy) = s.get("recirculation") {
            let n = copy["recirculation"]
                .as_u64()
                .ok_or("recirculation without its number")?;
            r.forked.insert(n, copy.clone());
        }
        if let Some(p) = action.strip_prefix("output:") {
            let p: u16 = p.parse().map_err(|_| format!("step {action:?}"))?;
            if note.is_some_and(|n| n.starts_with("skipped")) {
                continue;
            }
            r.outputs.push((p, k));
            r.named += 1;
        } else if action == "in_port" {
            r.outputs.push((packet.in_port, k));
            r.named += 1;
        } else if action == "flood" || action == "all" {
            for &p in ports.iter().filter(|&&p| p != packet.in_port) {
                r.outputs.push((p, k));
            }
            r.named += 1;
        } else if action.starts_with("group:") {
            r.groups += 1;
            let buckets = s["buckets"].as_array().map_or(&[][..], Vec::as_slice);
            // A select group runs one bucket (its weights are never all 0
            // here); the test's select buckets all do the same, so which
            // one does not matter, but one must run.
            if note.is_some_and(|n| n.starts_with("select")) && buckets.len() != 1 {
                return Err(format!("select group ran {} buckets", buckets.len()));
            }
            for b in buckets {
                read_steps(
                    r,
                    b["steps"].as_array().ok_or("bucket without steps")?,
                    packet,
                    ports,
                )?;
            }
        } else if action == "normal" {
            return Err(format!("output {action:?}: not compared yet"));
        }
    }
    Ok(())
}

/// Reads nfvswitch's key text (`in_port=1 dl_src=... nw_tos=...`).
pub fn parse_key(s: &str) -> Result<Key, String> {
    let mut k = Key::default();
    for item in s.split_whitespace() {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?} in {s:?}"))?;
        let bad = || format!("{item:?} in {s:?}");
        let uint = |v: &str| parse_uint(v).ok_or_else(bad);
        let macv = |v: &str| parse_mac(v).ok_or_else(bad);
        let v4 = |v: &str| {
            v.parse::<std::net::Ipv4Addr>()
                .map(u32::from)
                .map_err(|_| bad())
        };
        let v6 = |v: &str| {
            v.parse::<std::net::Ipv6Addr>()
                .map(u128::from)
                .map_err(|_| bad())
        };
        match name {
            "in_port" => k.in_port = uint(value)? as u16,
            "dl_src" => k.dl_src = macv(value)?,
            "dl_dst" => k.dl_dst = macv(value)?,
            "dl_type" => k.dl_type = uint(value)? as u16,
            "vlan_tci" => k.vlan_tci = uint(value)? as u16,
            "nw_src" => k.nw_src = v4(value)?,
            "nw_dst" => k.nw_dst = v4(value)?,
            "nw_proto" => k.nw_proto = uint(value)? as u8,
            "tp_src" => k.tp_src = uint(value)? as u16,
            "tp_dst" => k.tp_dst = uint(value)? as u16,
            "nw_tos" => k.nw_tos = uint(value)? as u8,
            "nw_ttl" => k.nw_ttl = uint(value)? as u8,
            "ip_frag" => k.ip_frag = uint(value)? as u8,
            "tcp_flags" => k.tcp_flags = uint(value)? as u16,
            "ipv6_label" => k.ipv6_label = uint(value)? as u32,
            // The pipeline stage (every packet enters in table 0) and the
            // register the later tables match: neither is a packet field.
            "metadata" | "table" => {}
            // What the tracker said of a tracked copy (the original
            // tuple, which OVS's trace leaves as it was, is not generated).
            "ct_state" => k.ct_state = uint(value)? as u8,
            "ct_zone" => k.ct_zone = uint(value)? as u16,
            "ct_mark" => k.ct_mark = uint(value)? as u32,
            "ct_label" => k.ct_label = uint(value)?,
            "ct_nw_src" | "ct_nw_dst" | "ct_ipv6_src" | "ct_ipv6_dst" | "ct_nw_proto"
            | "ct_tp_src" | "ct_tp_dst" => {}
            "ipv6_src" => k.ipv6_src = v6(value)?,
            "ipv6_dst" => k.ipv6_dst = v6(value)?,
            "nd_target" => k.nd_target = v6(value)?,
            "arp_sha" => k.arp_sha = macv(value)?,
            "arp_tha" => k.arp_tha = macv(value)?,
            _ => return Err(format!("key field {name:?} in {s:?}")),
        }
    }
    Ok(k)
}
