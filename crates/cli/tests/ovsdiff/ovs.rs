//! A private Open vSwitch (ovsdb-server + ovs-vswitchd, no kernel
//! module, no DPDK) and the reading of its `ofproto/trace`.
//!
//! Everything lives under one temp dir (database, sockets, logs); the
//! daemons run in the foreground as children of the test, are stopped
//! by PID on drop (SIGTERM, then SIGKILL) and die with the test thread
//! if it is killed (PR_SET_PDEATHSIG). `--enable-dummy=override` makes
//! every port a `dummy` netdev (the bridge's internal port too: no tap
//! device appears on the host); the bridge is `datapath_type=netdev`
//! with ports `p<N>` at `ofport_request=N`. The bridge's LOCAL port is
//! set `no-forward`, so `flood`/`all` reach the same ports as in
//! nfvswitch (which has no LOCAL port), and its fragment handling is
//! `nx-match` (see the module doc of `ovs_differential.rs`). Traces go over the daemon's
//! unixctl socket as JSON-RPC (what `ovs-appctl` sends), one connection
//! for the whole run: no process per trace.

use super::key::*;
use nfv_testutil::wait_until;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The OVS programs the test needs.
pub const PROGRAMS: &[&str] = &[
    "ovsdb-tool",
    "ovsdb-server",
    "ovs-vswitchd",
    "ovs-vsctl",
    "ovs-ofctl",
];
pub const SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

pub struct Ovs {
    dir: PathBuf,
    daemons: Vec<Child>,
    rpc: Option<Rpc>,
    /// Datapath port number -> OpenFlow port number.
    pub odp_to_of: BTreeMap<u32, u16>,
    pub version: String,
}

/// A child that dies when the thread that started it does.
fn child_cmd(program: &str) -> Command {
    let mut c = Command::new(program);
    // SAFETY: prctl is async-signal-safe; nothing else runs in the hook.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    c
}

impl Ovs {
    /// Starts the daemons and a bridge `br0` with a dummy port per number.
    pub fn start(dir: &Path, ports: &[u16]) -> Result<Ovs, String> {
        for d in ["run", "db", "log"] {
            std::fs::create_dir_all(dir.join(d)).map_err(|e| e.to_string())?;
        }
        let mut ovs = Ovs {
            dir: dir.to_path_buf(),
            daemons: Vec::new(),
            rpc: None,
            odp_to_of: BTreeMap::new(),
            version: String::new(),
        };
        ovs.version = ovs
            .run("ovs-vswitchd", &["--version"])?
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        let db = dir.join("db/conf.db");
        ovs.run("ovsdb-tool", &["create", db.to_str().unwrap(), SCHEMA])?;
        let run = dir.join("run");
        let log = |name: &str| {
            std::fs::File::create(dir.join("log").join(name)).map_err(|e| e.to_string())
        };
        let db_sock = run.join("db.sock");
        let server = ovs
            .cmd("ovsdb-server")
            .arg(&db)
            .arg(format!("--remote=punix:{}", db_sock.display()))
            .arg(format!(
                "--unixctl={}",
                run.join("ovsdb-server.ctl").display()
            ))
            .arg(format!(
                "--log-file={}",
                dir.join("log/ovsdb-server.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(log("ovsdb-server.stderr")?)
            .spawn()
            .map_err(|e| format!("ovsdb-server: {e}"))?;
        ovs.daemons.push(server);
        if !wait_until(Duration::from_secs(20), || db_sock.exists()) {
            return Err(format!("ovsdb-server: no {}", db_sock.display()));
        }
        ovs.vsctl(&["--no-wait", "init"])?;
        let ctl = run.join("ovs-vswitchd.ctl");
        let vswitchd = ovs
            .cmd("ovs-vswitchd")
            .arg(format!("unix:{}", db_sock.display()))
            .args(["--enable-dummy=override", "--disable-system"])
            .arg(format!("--unixctl={}", ctl.display()))
            .arg(format!(
                "--log-file={}",
                dir.join("log/ovs-vswitchd.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(log("ovs-vswitchd.stderr")?)
            .spawn()
            .map_err(|e| format!("ovs-vswitchd: {e}"))?;
        ovs.daemons.push(vswitchd);
        if !wait_until(Duration::from_secs(20), || ctl.exists()) {
            return Err(format!("ovs-vswitchd: no {}", ctl.display()));
        }
        let mut args: Vec<String> = vec![
            "add-br".into(),
            "br0".into(),
            "--".into(),
            "set".into(),
            "bridge".into(),
            "br0".into(),
            "datapath_type=netdev".into(),
        ];
        for p in ports {
            args.extend(
                [
                    "--",
                    "add-port",
                    "br0",
                    &format!("p{p}"),
                    "--",
                    "set",
                    "Interface",
                    &format!("p{p}"),
                    "type=dummy",
                    &format!("ofport_request={p}"),
                ]
                .map(String::from),
            );
        }
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        ovs.vsctl(&a)?;
        // flood/all: not to the LOCAL port, which nfvswitch does not have.
        ovs.ofctl(&["mod-port", &ovs.bridge(), "br0", "no-forward"], None)?;
        // Fragments as nfvswitch handles them: a first fragment keeps its
        // L4 ports (OVS's default "normal" zeroes them for every fragment).
        ovs.ofctl(&["set-frags", &ovs.bridge(), "nx-match"], None)?;
        ovs.rpc = Some(Rpc::connect(&ctl)?);
        let show = ovs.appctl("dpif/show", &[])?;
        // "    p1 1/1: (dummy)": name, OpenFlow port / datapath port.
        for line in show.lines() {
            let t = line.trim();
            if let Some((name, rest)) = t.split_once(' ')
                && let Some(of) = name.strip_prefix('p').and_then(|n| n.parse::<u16>().ok())
                && let Some((ofp, odp)) = rest.split(':').next().and_then(|s| s.split_once('/'))
                && ofp.parse::<u16>() == Ok(of)
            {
                ovs.odp_to_of
                    .insert(odp.parse().map_err(|_| t.to_string())?, of);
            }
        }
        if ovs.odp_to_of.len() != ports.len() {
            return Err(format!("dpif/show lacks ports {ports:?}:\n{show}"));
        }
        Ok(ovs)
    }

    fn cmd(&self, program: &str) -> Command {
        let mut c = child_cmd(program);
        // Defaults (pid files, sockets, logs) go to our dirs, never to
        // /var/run/openvswitch.
        c.env("OVS_RUNDIR", self.dir.join("run"))
            .env("OVS_LOGDIR", self.dir.join("log"))
            .env("OVS_DBDIR", self.dir.join("db"))
            .env("OVS_SYSCONFDIR", self.dir.join("db"));
        c
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        self.run_input(program, args, None)
    }

    fn run_input(
        &self,
        program: &str,
        args: &[&str],
        input: Option<&str>,
    ) -> Result<String, String> {
        let mut c = self.cmd(program);
        c.args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().map_err(|e| format!("{program}: {e}"))?;
        if let Some(text) = input {
            let mut stdin = child.stdin.take().unwrap();
            stdin
                .write_all(text.as_bytes())
                .map_err(|e| format!("{program} stdin: {e}"))?;
        }
        let out = child
            .wait_with_output()
            .map_err(|e| format!("{program}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "{program} {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn vsctl(&self, args: &[&str]) -> Result<String, String> {
        let db = format!("--db=unix:{}", self.dir.join("run/db.sock").display());
        let mut a = vec![db.as_str(), "--timeout=20"];
        a.extend_from_slice(args);
        self.run("ovs-vsctl", &a)
    }

    /// The bridge's OpenFlow management socket, as `ovs-ofctl` names it.
    fn bridge(&self) -> String {
        format!("unix:{}", self.dir.join("run/br0.mgmt").display())
    }

    fn ofctl(&self, args: &[&str], input: Option<&str>) -> Result<String, String> {
        self.run_input("ovs-ofctl", args, input)
    }

    /// Removes every rule.
    pub fn del_flows(&self) -> Result<(), String> {
        self.ofctl(&["del-flows", &self.bridge()], None).map(drop)
    }

    /// Adds rules (one `ovs-ofctl add-flows` for all), speaking OpenFlow
    /// 1.3 when `of13` (for `push_vlan`), else OpenFlow 1.0 with Nicira
    /// extensions (`ovs-ofctl`'s default).
    pub fn add_flows(&self, flows: &[String], of13: bool) -> Result<(), String> {
        if flows.is_empty() {
            return Ok(());
        }
        let text = flows.join("\n") + "\n";
        let bridge = self.bridge();
        let mut args = vec!["add-flows", &bridge, "-"];
        if of13 {
            args.insert(0, "-OOpenFlow13");
        }
        self.ofctl(&args, Some(&text)).map(drop)
    }

    /// Removes every group and meter (and the rules naming them).
    pub fn del_groups_and_meters(&self) -> Result<(), String> {
        let bridge = self.bridge();
        self.ofctl(&["-OOpenFlow13", "del-groups", &bridge], None)?;
        self.ofctl(&["-OOpenFlow13", "del-meters", &bridge], None)
            .map(drop)
    }

    /// `ovs-ofctl add-group`, in OpenFlow 1.3, or 1.5 where the text sets
    /// a selection method (a group property).
    pub fn add_group(&self, text: &str) -> Result<(), String> {
        let of = if text.contains("selection_method") {
            "-OOpenFlow15"
        } else {
            "-OOpenFlow13"
        };
        self.ofctl(&[of, "add-group", &self.bridge(), text], None)
            .map(drop)
    }

    /// `ovs-ofctl -O OpenFlow13 add-meter`.
    pub fn add_meter(&self, text: &str) -> Result<(), String> {
        self.ofctl(&["-OOpenFlow13", "add-meter", &self.bridge(), text], None)
            .map(drop)
    }

    /// Every rule as `ovs-ofctl dump-flows` shows it, in OpenFlow 1.0
    /// with Nicira extensions: every match fits there (not in OpenFlow
    /// 1.3), while actions OpenFlow 1.0 lacks (`push_vlan`) are left out
    /// of the text — only the matches are read.
    pub fn dump_flows(&self) -> Result<String, String> {
        self.ofctl(&["dump-flows", "--no-stats", &self.bridge()], None)
    }

    fn appctl(&mut self, method: &str, params: &[&str]) -> Result<String, String> {
        self.rpc.as_mut().unwrap().call(method, params)
    }

    /// `ofproto/trace br0 FLOW [--ct-next FLAGS]...`: the raw text.
    pub fn trace(&mut self, flow: &str, ct_next: &[String]) -> Result<String, String> {
        let mut params = vec!["br0", flow];
        for s in ct_next {
            params.extend(["--ct-next", s.as_str()]);
        }
        self.appctl("ofproto/trace", &params)
    }
}

impl Drop for Ovs {
    fn drop(&mut self) {
        self.rpc = None;
        // ovs-vswitchd first (it holds the database connection).
        for c in self.daemons.iter_mut().rev() {
            // SAFETY: signalling our own child by its PID.
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let gone = wait_until(Duration::from_secs(5), || {
                matches!(c.try_wait(), Ok(Some(_)))
            });
            if !gone {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// JSON-RPC over the daemon's unixctl socket, as `ovs-appctl` speaks it.
struct Rpc {
    w: UnixStream,
    r: serde_json::StreamDeserializer<'static, serde_json::de::IoRead<UnixStream>, Value>,
    id: u64,
}

impl Rpc {
    fn connect(path: &Path) -> Result<Rpc, String> {
        let s = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
        s.set_read_timeout(Some(Duration::from_secs(60)))
            .map_err(|e| e.to_string())?;
        let r = s.try_clone().map_err(|e| e.to_string())?;
        Ok(Rpc {
            w: s,
            r: serde_json::Deserializer::from_reader(r).into_iter(),
            id: 0,
        })
    }

    fn call(&mut self, method: &str, params: &[&str]) -> Result<String, String> {
        self.id += 1;
        let req = serde_json::json!({ "method": method, "params": params, "id": self.id });
        self.w
            .write_all(req.to_string().as_bytes())
            .map_err(|e| format!("unixctl {method}: {e}"))?;
        let resp = self
            .r
            .next()
            .ok_or_else(|| format!("unixctl {method}: connection closed"))?
            .map_err(|e| format!("unixctl {method}: {e}"))?;
        if resp["id"] != self.id {
            return Err(format!(
                "unixctl {method}: answer to another request: {resp}"
            ));
        }
        match (&resp["result"], &resp["error"]) {
            (Value::String(s), Value::Null) => Ok(s.clone()),
            (_, Value::String(e)) => Err(e.clone()),
            _ => Err(format!("unixctl {method}: {resp}")),
        }
    }
}

// ---- packets as OVS's trace reads them ----

/// `k` in `ofproto/trace` flow syntax.
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
            ",nw_tos={},nw_ecn={},nw_ttl={},nw_frag={}",
            k.nw_tos & 0xfc,
            k.nw_tos & 3,
            k.nw_ttl,
            frag_word(k.ip_frag)
        );
        if k.has_ports() {
            let p = match k.nw_proto {
                TCP => "tcp",
                UDP => "udp",
                _ => "sctp",
            };
            s += &format!(",{p}_src={},{p}_dst={}", k.tp_src, k.tp_dst);
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

pub fn frag_word(f: u8) -> &'static str {
    match f {
        0 => "no",
        FRAG_ANY => "first",
        _ => "later",
    }
}

/// One `ofproto/trace` read back.
#[derive(Debug)]
pub struct Trace {
    /// The packet as OVS took it (its `Flow:` line).
    pub packet: Key,
    /// The priority of the rule that decided (None: no match).
    pub priority: Option<u16>,
    /// The rule's match as OVS prints it.
    pub rule: Option<String>,
    /// (OpenFlow port, the packet's fields there), in datapath order: the
    /// packet's own, then each tracked copy's, in the order of
    /// `recirculations`.
    pub outputs: Vec<(u16, Key)>,
    /// The tracked copies (`ct(table=T)`) OVS's trace followed, in the
    /// order it looked them up (its `recirc(0xN)` sections).
    pub recirculations: Vec<Recirc>,
    /// How many of `outputs` are the packet's own (the rest, its copies').
    pub own_outputs: usize,
    /// `dec_ttl` met a TTL of 0 or 1 (OVS sends it to a controller).
    pub ttl_exception: bool,
    /// The raw text, for reports.
    pub text: String,
}

/// Reads `ofproto/trace` output: the packet's own section, then one per
/// tracked copy OVS followed ("recirc(0xN) - resume conntrack with
/// ct_state=..."), each with its `Flow:` (the copy's fields) and its
/// `Datapath actions:` (applied to that flow for its outputs).
pub fn parse_trace(text: &str, odp_to_of: &BTreeMap<u32, u16>) -> Result<Trace, String> {
    let mut starts: Vec<usize> = text.match_indices("\nrecirc(0x").map(|(i, _)| i).collect();
    starts.insert(0, 0);
    let sections: Vec<&str> = starts
        .iter()
        .zip(starts.iter().skip(1).chain([&text.len()]))
        .map(|(&a, &b)| &text[a..b])
        .collect();
    let line = |section: &str, prefix: &str| -> Result<String, String> {
        section
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(str::to_string)
            .ok_or_else(|| format!("no \"{prefix}\" line in {section:?}"))
    };
    let mut packet = Key::default();
    let (mut priority, mut rule) = (None, None);
    let mut outputs = Vec::new();
    let mut recirculations = Vec::new();
    let mut own_outputs = 0;
    for (i, section) in sections.iter().enumerate() {
        let (key, inner) = parse_flow_tags(&line(section, "Flow: ")?)?;
        let (p, r) = first_table(section)?;
        if i == 0 {
            if inner.is_some() {
                return Err(format!("an inner VLAN tag in the packet: {section}"));
            }
            (packet, priority, rule) = (key, p, r);
        } else {
            let table = line(section, "        Resuming from table ")?;
            recirculations.push(Recirc {
                table: table
                    .trim()
                    .parse()
                    .map_err(|_| format!("table {table:?}"))?,
                packet: key.without_ct(),
                ct_state: key.ct_state,
                ct_zone: key.ct_zone,
                ct_mark: key.ct_mark,
                ct_label: key.ct_label,
                priority: p,
            });
        }
        let actions = line(section, "Datapath actions: ")?;
        outputs.extend(apply_datapath_actions(key, inner, &actions, odp_to_of)?);
        if i == 0 {
            own_outputs = outputs.len();
        }
    }
    let ttl_exception = text.contains("decrement TTL exception");
    Ok(Trace {
        packet,
        priority,
        rule,
        outputs,
        recirculations,
        own_outputs,
        ttl_exception,
        text: text.to_string(),
    })
}

/// The first table lookup of a section: " 0. tcp,in_port=1,nw_dst=10.0.0.0/8,
/// priority 10[, cookie 0x5]" or " 0. No match." (a copy's starts at its
/// table: " 1. ..."): the rule's priority and match, or none.
fn first_table(section: &str) -> Result<(Option<u16>, Option<String>), String> {
    let first = section
        .lines()
        .find(|l| {
            let t = l.trim_start();
            let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            digits > 0 && t[digits..].starts_with(". ") && l.len() - t.len() <= 1
        })
        .ok_or_else(|| format!("no table line in {section:?}"))?;
    let body = first.trim_start().split_once(". ").map_or("", |(_, b)| b);
    if body.starts_with("No match") {
        return Ok((None, None));
    }
    let (m, rest) = body
        .rsplit_once("priority ")
        .ok_or_else(|| format!("no priority in {first:?}"))?;
    let p = rest.split(',').next().unwrap_or("");
    let priority = p.parse().map_err(|_| format!("priority in {first:?}"))?;
    Ok((
        Some(priority),
        Some(m.trim_end_matches([',', ' ']).to_string()),
    ))
}

/// Splits `s` at commas outside parentheses.
fn top_level(s: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0i32, 0, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

/// `name(inner)` -> (name, inner).
fn call(s: &str) -> Option<(&str, &str)> {
    let open = s.find('(')?;
    let inner = s[open + 1..].strip_suffix(')')?;
    Some((&s[..open], inner))
}

/// Runs the datapath actions on `packet` (its VLAN tags as a stack, with
/// `inner_tag` below its own) and returns each output with the packet's
/// fields at that point (its ct fields not among them).
fn apply_datapath_actions(
    packet: Key,
    inner_tag: Option<u16>,
    actions: &str,
    odp_to_of: &BTreeMap<u32, u16>,
) -> Result<Vec<(u16, Key)>, String> {
    let mut k = packet.without_ct();
    let mut tags: Vec<u16> = inner_tag.into_iter().collect();
    if k.vlan_tci & VLAN_PRESENT != 0 {
        tags.push(k.vlan_tci);
    }
    let mut out = Vec::new();
    if actions.trim() == "drop" {
        return Ok(out);
    }
    for a in top_level(actions.trim()) {
        if let Ok(odp) = a.parse::<u32>() {
            let of = *odp_to_of
                .get(&odp)
                .ok_or_else(|| format!("datapath port {odp} is none of ours"))?;
            let mut at = k;
            at.vlan_tci = tags.last().copied().unwrap_or(0);
            out.push((of, at));
            continue;
        }
        if a == "pop_vlan" {
            tags.pop();
            continue;
        }
        // The tracker (a copy it forks is a section of its own); without
        // nat it changes no header.
        if a == "ct" || a == "ct_clear" {
            continue;
        }
        let (name, inner) = call(a).ok_or_else(|| format!("datapath action {a:?}"))?;
        match name {
            // The trace's controller copy (an expired TTL), and a meter:
            // neither changes the packet or where it goes (a trace
            // passes every meter).
            "userspace" | "meter" => {}
            // A tracked copy forked (followed in its own section) and the
            // tracker itself: nat aside (not generated), no header edit.
            "recirc" => {}
            "ct" if !inner.contains("nat") => {}
            "push_vlan" => {
                let kv = pairs(inner);
                let vid = kv.get("vid").and_then(|v| parse_uint(v)).unwrap_or(0) as u16;
                let pcp = kv.get("pcp").and_then(|v| parse_uint(v)).unwrap_or(0) as u16;
                tags.push(VLAN_PRESENT | vid & 0xfff | pcp << 13);
            }
            "set" => {
                let (proto, fields) =
                    call(inner).ok_or_else(|| format!("datapath action {a:?}"))?;
                apply_set(&mut k, proto, fields).map_err(|e| format!("{a}: {e}"))?;
            }
            _ => return Err(format!("datapath action {a:?} not understood")),
        }
    }
    Ok(out)
}

fn pairs(s: &str) -> BTreeMap<&str, &str> {
    top_level(s)
        .into_iter()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

/// `set(proto(field=value[/mask],...))` on `k`.
fn apply_set(k: &mut Key, proto: &str, fields: &str) -> Result<(), String> {
    for (name, value) in pairs(fields) {
        let (v, m) = match value.split_once('/') {
            Some((v, m)) => (v, Some(m)),
            None => (value, None),
        };
        let f = match (proto, name) {
            // Written along with the others by some datapaths; neither
            // action here changes them.
            ("ipv4" | "ipv6", "proto" | "frag") => continue,
            ("eth", "src") => F::DlSrc,
            ("eth", "dst") => F::DlDst,
            ("ipv4", "src") => F::NwSrc,
            ("ipv4", "dst") => F::NwDst,
            ("ipv4" | "ipv6", "tos" | "tclass") => F::NwTos,
            ("ipv4", "ttl") | ("ipv6", "hlimit") => F::NwTtl,
            ("ipv6", "src") => F::Ipv6Src,
            ("ipv6", "dst") => F::Ipv6Dst,
            ("ipv6", "label") => F::Ipv6Label,
            ("tcp" | "udp" | "sctp", "src") | ("icmp" | "icmpv6", "type") => F::TpSrc,
            ("tcp" | "udp" | "sctp", "dst") | ("icmp" | "icmpv6", "code") => F::TpDst,
            _ => return Err(format!("field {proto}.{name} not understood")),
        };
        let num = |s: &str| -> Result<u128, String> {
            match f {
                F::DlSrc | F::DlDst => parse_mac(s).map(u128::from),
                F::NwSrc | F::NwDst => s
                    .parse::<std::net::Ipv4Addr>()
                    .ok()
                    .map(|a| u32::from(a).into()),
                F::Ipv6Src | F::Ipv6Dst => s.parse::<std::net::Ipv6Addr>().ok().map(u128::from),
                _ => parse_uint(s),
            }
            .ok_or_else(|| format!("value {s:?} of {proto}.{name}"))
        };
        let v = num(v)?;
        let m = match m {
            Some(m) => num(m)?,
            None => f.all_ones(),
        };
        k.set(f, (v & m) | (k.get(f) & !m));
    }
    Ok(())
}

/// Reads OVS's flow text (a trace's `Flow:` line) into a key.
pub fn parse_flow(s: &str) -> Result<Key, String> {
    match parse_flow_tags(s)? {
        (k, None) => Ok(k),
        (_, Some(_)) => Err(format!("an inner VLAN tag in {s:?}")),
    }
}

/// [`parse_flow`], and the inner VLAN tag's TCI if the flow has one (a
/// tracked copy of a packet a tag was pushed on).
pub fn parse_flow_tags(s: &str) -> Result<(Key, Option<u16>), String> {
    let mut k = Key::default();
    let mut inner: u16 = 0;
    let mut tos_dscp = 0u8;
    let mut ecn = 0u8;
    for item in s.split(',') {
        let (name, value) = match item.split_once('=') {
            Some((n, v)) => (n, v),
            None => {
                let (t, p) = match item {
                    // A tracked copy's flow names its L2 type.
                    "eth" => continue,
                    "ip" => (ETH_IPV4, None),
                    "ipv6" => (ETH_IPV6, None),
                    "arp" => (ETH_ARP, None),
                    "tcp" => (ETH_IPV4, Some(TCP)),
                    "udp" => (ETH_IPV4, Some(UDP)),
                    "sctp" => (ETH_IPV4, Some(SCTP)),
                    "icmp" => (ETH_IPV4, Some(ICMP)),
                    "tcp6" => (ETH_IPV6, Some(TCP)),
                    "udp6" => (ETH_IPV6, Some(UDP)),
                    "sctp6" => (ETH_IPV6, Some(SCTP)),
                    "icmp6" => (ETH_IPV6, Some(ICMPV6)),
                    _ => return Err(format!("flow keyword {item:?} in {s:?}")),
                };
                k.dl_type = t;
                if let Some(p) = p {
                    k.nw_proto = p;
                }
                continue;
            }
        };
        let bad = || format!("{name}={value} in {s:?}");
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
            "vlan_tci" => k.vlan_tci = uint(value)? as u16,
            "dl_vlan" => k.vlan_tci = k.vlan_tci & 0xe000 | VLAN_PRESENT | uint(value)? as u16,
            "dl_vlan_pcp" => {
                k.vlan_tci = k.vlan_tci & 0x0fff | VLAN_PRESENT | (uint(value)? as u16) << 13
            }
            // The tag below the outer one (a packet of ours has none, a
            // copy of one a tag was pushed on may).
            "vlan_tci1" => inner = uint(value)? as u16,
            "dl_vlan1" => inner = inner & 0xe000 | VLAN_PRESENT | uint(value)? as u16,
            "dl_vlan_pcp1" => inner = inner & 0x0fff | VLAN_PRESENT | (uint(value)? as u16) << 13,
            // A tracked copy's: the recirculation it is, what the tracker
            // said of it.
            "recirc_id" => {}
            "ct_label" => k.ct_label = uint(value)?,
            "ct_state" => k.ct_state = parse_ct_state(value).ok_or_else(bad)?,
            "ct_zone" => k.ct_zone = uint(value)? as u16,
            "ct_mark" => k.ct_mark = uint(value)? as u32,
            "dl_src" => k.dl_src = macv(value)?,
            "dl_dst" => k.dl_dst = macv(value)?,
            "dl_type" => k.dl_type = uint(value)? as u16,
            "nw_src" | "arp_spa" => k.nw_src = v4(value)?,
            "nw_dst" | "arp_tpa" => k.nw_dst = v4(value)?,
            "nw_proto" | "arp_op" => k.nw_proto = uint(value)? as u8,
            "arp_sha" | "nd_sll" => k.arp_sha = macv(value)?,
            "arp_tha" | "nd_tll" => k.arp_tha = macv(value)?,
            "nw_tos" => tos_dscp = uint(value)? as u8,
            "nw_ecn" => ecn = uint(value)? as u8,
            "nw_ttl" => k.nw_ttl = uint(value)? as u8,
            "nw_frag" => {
                k.ip_frag = match value {
                    "no" => 0,
                    "first" => FRAG_ANY,
                    "later" => FRAG_ANY | FRAG_LATER,
                    _ => return Err(bad()),
                }
            }
            "tp_src" | "icmp_type" => k.tp_src = uint(value)? as u16,
            "tp_dst" | "icmp_code" => k.tp_dst = uint(value)? as u16,
            "tcp_flags" => k.tcp_flags = tcp_flags(value).ok_or_else(bad)?,
            "ipv6_src" => k.ipv6_src = v6(value)?,
            "ipv6_dst" => k.ipv6_dst = v6(value)?,
            "ipv6_label" => k.ipv6_label = uint(value)? as u32,
            "nd_target" => k.nd_target = v6(value)?,
            _ => return Err(format!("flow field {name:?} in {s:?}")),
        }
    }
    k.nw_tos = tos_dscp | ecn;
    let inner = (inner & VLAN_PRESENT != 0).then_some(inner);
    Ok((k, inner))
}

/// `syn|ack|[200]` or a number.
fn tcp_flags(s: &str) -> Option<u16> {
    if let Some(n) = parse_uint(s) {
        return Some(n as u16);
    }
    let mut v = 0u16;
    for f in s.split('|') {
        v |= match f {
            "fin" => 0x001,
            "syn" => 0x002,
            "rst" => 0x004,
            "psh" => 0x008,
            "ack" => 0x010,
            "urg" => 0x020,
            "ece" => 0x040,
            "cwr" => 0x080,
            "ns" => 0x100,
            _ => u16::from_str_radix(f.strip_prefix('[')?.strip_suffix(']')?, 16).ok()?,
        };
    }
    Some(v)
}
