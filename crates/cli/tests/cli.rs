//! End-to-end tests of the `nfvswitch` binary: a node runs as a child
//! process and is driven through `nfvswitch ctl`, as an operator would.

use nfv_testutil::wait_until;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::Duration;

mod common;
use common::{BIN, Daemon, start, tempdir};

fn ctl(d: &Daemon, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("ctl")
        .arg("--socket")
        .arg(&d.socket)
        .args(args)
        .output()
        .unwrap()
}

fn ctl_json(d: &Daemon, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = ctl(d, &a);
    assert!(
        out.status.success(),
        "ctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn port<'a>(ports: &'a Value, name: &str) -> Option<&'a Value> {
    ports.as_array()?.iter().find(|p| p["name"] == name)
}

fn tx_packets(d: &Daemon, name: &str) -> u64 {
    port(&ctl_json(d, &["show", "ports"]), name).map_or(0, |p| p["tx"]["packets"].as_u64().unwrap())
}

#[test]
fn run_forwards_and_show_pmd_reports_rate_and_cycles() {
    let d = start("fwd");
    assert!(wait_until(Duration::from_secs(20), || tx_packets(
        &d, "sink0"
    ) > 10_000));
    // Rates are per-second samples: wait for one with traffic in it.
    assert!(wait_until(Duration::from_secs(20), || {
        let pmd = ctl_json(&d, &["show", "pmd"]);
        pmd[0]["mpps"].as_f64().unwrap() > 0.0 && pmd[0]["cycles_per_packet"].as_f64().is_some()
    }));
    let human = ctl(&d, &["show", "pmd"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains("cyc/pkt") && text.contains("Mpps"), "{text}");
    let ports = String::from_utf8_lossy(&ctl(&d, &["show", "ports"]).stdout).to_string();
    assert!(ports.contains("gen0") && ports.contains("sink0"), "{ports}");
    let flows = String::from_utf8_lossy(&ctl(&d, &["dump-flows"]).stdout).to_string();
    assert!(
        flows.contains("priority=10,in_port=1,actions=output:2"),
        "{flows}"
    );
}

#[test]
fn bad_requests_fail_loudly_and_change_nothing() {
    let d = start("bad");
    let before = ctl_json(&d, &["dump-flows"]);
    let cases: &[(&[&str], &str)] = &[
        (&["add-flow", "in_port=1,actions=output:99"], "no such port"),
        (&["add-flow", "nw_dsst=10.0.0.1,actions=drop"], "nw_dsst"),
        (
            &[
                "add-flow",
                "priority=5,in_port=1,actions=output:2",
                "in_port=1,actions=bogus",
            ],
            "flow 2",
        ),
        (
            &["add-port", "name=\"gen0\",id=9,type=\"sink\""],
            "already in use",
        ),
        (
            &["add-port", "name=\"x\",id=2,type=\"sink\""],
            "already in use",
        ),
        (
            &["add-port", "name=\"x\",id=9,type=\"sink\",rate_pps=5"],
            "rate_pps",
        ),
        (&["add-port", "name=\"x\",id=9,type=\"warp\""], "type"),
        (&["del-port", "nosuch"], "no port"),
        (&["del-flows", "in_porrt=1"], "in_porrt"),
    ];
    for (args, want) in cases {
        let out = ctl(&d, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: expected {want:?} in {err:?}");
    }
    assert_eq!(
        ctl_json(&d, &["dump-flows"]).as_array().unwrap().len(),
        before.as_array().unwrap().len()
    );
    assert_eq!(
        ctl_json(&d, &["show", "ports"]).as_array().unwrap().len(),
        2
    );
    // And it still forwards.
    let n = tx_packets(&d, "sink0");
    assert!(wait_until(Duration::from_secs(20), || tx_packets(
        &d, "sink0"
    ) > n));
}

#[test]
fn ports_and_flows_change_at_run_time() {
    let d = start("live");
    assert!(
        ctl(&d, &["add-port", "name=\"sink1\",id=3,type=\"sink\""])
            .status
            .success()
    );
    assert!(
        ctl(&d, &["add-flow", "priority=20,in_port=1,actions=output:3"])
            .status
            .success()
    );
    assert!(
        wait_until(Duration::from_secs(20), || tx_packets(&d, "sink1") > 1000),
        "new rule not used"
    );
    let sink0 = tx_packets(&d, "sink0");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        tx_packets(&d, "sink0") - sink0 < 1000,
        "old rule still used"
    );

    // Deleting the output port: packets become counted no_port drops.
    assert!(ctl(&d, &["del-port", "sink1"]).status.success());
    assert!(port(&ctl_json(&d, &["show", "ports"]), "sink1").is_none());
    assert!(wait_until(Duration::from_secs(20), || {
        let ports = ctl_json(&d, &["show", "ports"]);
        port(&ports, "gen0").unwrap()["rx"]["drops"]["no_port"]
            .as_u64()
            .unwrap_or(0)
            > 100
    }));

    // Deleting all rules: table misses.
    let out = ctl_json(&d, &["del-flows"]);
    assert_eq!(out["deleted"], 2);
    assert!(wait_until(Duration::from_secs(20), || {
        let ports = ctl_json(&d, &["show", "ports"]);
        port(&ports, "gen0").unwrap()["rx"]["drops"]["no_match"]
            .as_u64()
            .unwrap_or(0)
            > 100
    }));
}

/// The rules of `dump-flows` whose cookie is `cookie`.
fn flows_with_cookie(d: &Daemon, cookie: u64) -> Vec<Value> {
    let flows = ctl_json(d, &["dump-flows"]);
    flows
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["cookie"] == cookie)
        .cloned()
        .collect()
}

/// `idle_timeout`/`hard_timeout` remove rules once their time has passed
/// (never before), counted in `show node`; `dump-flows` shows the
/// timeouts and each rule's idle age; `del-flows cookie=V/M` removes the
/// rules whose cookie matches under the mask. Waits are upper bounds for
/// a busy machine; only the lower bounds (not before the timeout) are
/// exact.
#[test]
fn flow_timeouts_and_cookie_filters() {
    let d = start("timeouts");
    let added = std::time::Instant::now();
    for flow in [
        // Never hit (the sink, port 2, sends nothing): idle after 1 s.
        "priority=30,cookie=0x501,idle_timeout=1,in_port=2,actions=output:2",
        // Hit by the generator all along: only its hard timeout ends it.
        "priority=30,cookie=0x502,hard_timeout=2,idle_timeout=1,in_port=1,actions=output:2",
        // Hit once the rule above is gone: stays.
        "priority=29,cookie=0x503,idle_timeout=3600,in_port=1,actions=output:2",
    ] {
        assert!(ctl(&d, &["add-flow", flow]).status.success(), "{flow}");
    }
    let shown = flows_with_cookie(&d, 0x502);
    assert_eq!(shown.len(), 1);
    assert!(
        shown[0]["rule"]
            .as_str()
            .unwrap()
            .contains("idle_timeout=1,hard_timeout=2"),
        "{shown:?}"
    );
    // (cookie, timeout in seconds, what removes it)
    let cases = [
        (0x501, 1, "flows_expired_idle"),
        (0x502, 2, "flows_expired_hard"),
    ];
    for (cookie, secs, counter) in cases {
        assert!(
            wait_until(Duration::from_secs(60), || flows_with_cookie(&d, cookie)
                .is_empty()),
            "rule {cookie:#x} still there after 60 s"
        );
        let after = added.elapsed().as_secs_f64();
        assert!(
            after >= f64::from(secs),
            "rule {cookie:#x} gone after {after:.2} s"
        );
        let node = ctl_json(&d, &["show", "node"]);
        assert!(node[counter].as_u64().unwrap() >= 1, "{node}");
    }
    // The generator's packets now hit 0x503: its idle age drops to 0.
    assert!(
        wait_until(Duration::from_secs(60), || {
            let f = flows_with_cookie(&d, 0x503);
            f.len() == 1
                && f[0]["n_packets"].as_u64().unwrap() > 0
                && f[0]["idle_age_secs"].as_f64().unwrap() < 10.0
        }),
        "{:?}",
        flows_with_cookie(&d, 0x503)
    );
    let before = ctl_json(&d, &["dump-flows"]).as_array().unwrap().len();
    // dump-flows lists what del-flows with the same filter deletes.
    let listed = ctl_json(&d, &["dump-flows", "cookie=0x500/0xf00"]);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert!(
        listed[0]["rule"].as_str().unwrap().contains("cookie=0x503"),
        "{listed}"
    );
    assert_eq!(
        ctl_json(&d, &["dump-flows", "in_port=1"])
            .as_array()
            .unwrap()
            .len(),
        2,
        "the priority=10 rule and 0x503"
    );
    // Selects no rule: a cookie bit 0x503 lacks.
    assert_eq!(
        ctl_json(&d, &["del-flows", "cookie=0x800/0x800"])["deleted"],
        0
    );
    assert_eq!(
        ctl_json(&d, &["del-flows", "cookie=0x500/0xf00"])["deleted"],
        1
    );
    let left = ctl_json(&d, &["dump-flows"]).as_array().unwrap().len();
    assert_eq!(left, before - 1);
    assert!(flows_with_cookie(&d, 0x503).is_empty());
}

#[test]
fn trace_names_the_tier_the_rule_the_actions_and_the_outputs() {
    let d = start("trace");
    for flow in [
        "priority=20,in_port=1,udp,tp_dst=53,actions=mod_dl_dst:02:00:00:00:00:09,output:2",
        "in_port=2,actions=drop",
    ] {
        assert!(ctl(&d, &["add-flow", flow]).status.success(), "{flow}");
    }
    // (packet, decided by, rule, outputs, first action)
    type Case = (
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static [&'static str],
        Option<&'static str>,
    );
    let cases: &[Case] = &[
        (
            "in_port=1,udp,tp_dst=53",
            "classifier",
            Some(
                "priority=20,udp,in_port=1,tp_dst=53,actions=mod_dl_dst:02:00:00:00:00:09,output:2",
            ),
            &["2 (sink0)"],
            Some("mod_dl_dst:02:00:00:00:00:09"),
        ),
        (
            "in_port=1,tcp,tp_dst=53",
            "classifier",
            Some("priority=10,in_port=1,actions=output:2"),
            &["2 (sink0)"],
            Some("output:2"),
        ),
        // Nothing above it can match port 2's packets: no lookup.
        (
            "in_port=2,tcp",
            "port-wide",
            Some("priority=32768,in_port=2,actions=drop"),
            &[],
            None,
        ),
        ("in_port=7,udp", "classifier", None, &[], None),
    ];
    for &(packet, tier, rule, outputs, first) in cases {
        let t = ctl_json(&d, &["trace", packet]);
        assert!(
            t["decided_by"].as_str().unwrap().starts_with(tier),
            "{packet}: {t}"
        );
        assert_eq!(t["rule"].as_str(), rule, "{packet}: {t}");
        let got = trace_outputs(&t);
        assert_eq!(got, outputs, "{packet}: {t}");
        assert_eq!(t["steps"][0]["action"].as_str(), first, "{packet}: {t}");
    }
    let human =
        String::from_utf8_lossy(&ctl(&d, &["trace", "in_port=1,udp,tp_dst=53"]).stdout).to_string();
    for want in [
        "decided by: classifier",
        "1. mod_dl_dst:02:00:00:00:00:09",
        "outputs:    2 (sink0)",
        "cache:",
    ] {
        assert!(human.contains(want), "{want:?} in:\n{human}");
    }
    // A pipeline: every table is listed with its rule, the actions add up.
    for flow in [
        "priority=30,in_port=1,icmp,actions=write_metadata:0x7/0xff,goto_table:3",
        "table=3,metadata=0x7/0xff,actions=mod_nw_tos:184,goto_table:4",
        "table=4,ip,nw_tos=184,actions=output:2",
    ] {
        assert!(ctl(&d, &["add-flow", flow]).status.success(), "{flow}");
    }
    let t = ctl_json(&d, &["trace", "in_port=1,icmp"]);
    let tables: Vec<u64> = t["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["table"].as_u64().unwrap())
        .collect();
    assert_eq!(tables, vec![0, 3, 4], "{t}");
    assert_eq!(
        t["tables"][2]["rule"].as_str(),
        Some("priority=32768,table=4,ip,nw_tos=184,actions=output:2"),
        "{t}"
    );
    assert_eq!(
        t["steps"][0]["action"].as_str(),
        Some("mod_nw_tos:184"),
        "{t}"
    );
    assert_eq!(t["outputs"][0].as_str(), Some("2 (sink0)"), "{t}");
    let human = String::from_utf8_lossy(&ctl(&d, &["trace", "in_port=1,icmp"]).stdout).to_string();
    assert!(
        human.contains("  table 3: priority=32768,table=3,"),
        "{human}"
    );
    // dump-flows with table= shows that table only.
    let t3 = ctl_json(&d, &["dump-flows", "table=3"]);
    assert_eq!(t3.as_array().unwrap().len(), 1, "{t3}");
    let tables = ctl_json(&d, &["dump-tables"]);
    let ids: Vec<u64> = tables
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, vec![0, 3, 4], "{tables}");
    assert_eq!(tables[1]["rules"], 1, "{tables}");
    // Descriptions that are not one packet are refused, naming why.
    for (packet, why) in [
        ("udp,tp_dst=53", "in_port"),
        ("in_port=1,ip,nw_dst=10.0.0.0/24", "exact"),
        ("priority=5,in_port=1", "priority"),
        ("in_port=1,bogus=1", "bogus"),
    ] {
        let out = ctl(&d, &["trace", packet]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(why),
            "{packet}: {err}"
        );
    }
}

/// `ctl trace` follows a `ct(table=T)` into table T: the tracked copy
/// comes back as a new connection's packet unless `--ct-next` says
/// otherwise; a copy can also be traced alone, its ct fields in the
/// packet.
#[test]
fn trace_follows_ct_into_its_table_as_ct_next_says() {
    let d = start("trace-ct");
    for flow in [
        "priority=50,in_port=1,tcp,actions=ct(table=1,zone=5)",
        "table=1,priority=10,ip,ct_state=+trk+new,actions=drop",
        "table=1,priority=20,ip,ct_state=+trk+est,ct_zone=5,actions=output:2",
    ] {
        assert!(ctl(&d, &["add-flow", flow]).status.success(), "{flow}");
    }
    let packet = "in_port=1,tcp,nw_dst=10.0.0.2,tp_dst=80";
    // (--ct-next arguments, outputs, the copy's ct_state, where it is from)
    type Case = (
        &'static [&'static str],
        &'static [&'static str],
        &'static str,
        &'static str,
    );
    let cases: &[Case] = &[
        (&[], &[], "new|trk", "the default"),
        (
            &["--ct-next", "trk,est"],
            &["2 (sink0)"],
            "est|trk",
            "--ct-next 1",
        ),
        (
            &["--ct-next", "+trk+est"],
            &["2 (sink0)"],
            "est|trk",
            "--ct-next 1",
        ),
        (
            &["--ct-next", "trk,new", "--ct-next", "trk,est"],
            &[],
            "new|trk",
            "--ct-next 1",
        ),
    ];
    for &(ct_next, outputs, state, from) in cases {
        let mut args = vec!["trace", packet];
        args.extend_from_slice(ct_next);
        let t = ctl_json(&d, &args);
        let got = trace_outputs(&t);
        assert_eq!(got, outputs, "{ct_next:?}: {t}");
        let copy = &t["steps"][0]["recirculation"];
        assert_eq!(copy["ct_state"].as_str(), Some(state), "{ct_next:?}: {t}");
        assert!(
            copy["ct_state_from"].as_str().unwrap().starts_with(from),
            "{ct_next:?}: {t}"
        );
        assert_eq!(copy["tables"][0]["table"], 1, "{t}");
        assert!(
            copy["packet"].as_str().unwrap().contains("ct_zone=5"),
            "{t}"
        );
    }
    let out = ctl(&d, &["trace", packet, "--ct-next", "trk,est"]);
    let human = String::from_utf8_lossy(&out.stdout).to_string();
    for want in [
        "recirculation 1 (round 1), ct_state=est|trk (--ct-next 1), from table 1:",
        "rule:   priority=20,table=1,ip,ct_state=+est+trk,ct_zone=5,actions=output:2",
        "outputs of this copy: 2 (sink0)",
        "outputs:    2 (sink0)",
    ] {
        assert!(human.contains(want), "{want:?} in:\n{human}");
    }
    // One tracked copy alone: the ct fields named in the packet.
    let t = ctl_json(
        &d,
        &[
            "trace",
            "in_port=1,tcp,ct_state=+trk+est,ct_zone=5,ct_mark=3,table=1",
        ],
    );
    assert_eq!(t["outputs"][0].as_str(), Some("2 (sink0)"), "{t}");
    let read = t["packet"].as_str().unwrap();
    assert!(
        read.contains("ct_state=0x22 ct_zone=5 ct_mark=0x3"),
        "{read}"
    );
    let t = ctl_json(
        &d,
        &["trace", "in_port=1,tcp,ct_state=+trk+est,ct_zone=6,table=1"],
    );
    assert_eq!(t["rule"], Value::Null, "another zone's copy: {t}");
    // Refused, naming why: states no tracker reports, a partial ct field.
    for (args, why) in [
        (&[packet, "--ct-next", "trk,bogus"][..], "ct states"),
        (&[packet, "--ct-next", "new"][..], "trk"),
        (&[packet, "--ct-next", "trk,new,est"][..], "new and est"),
        (&["in_port=1,tcp,ct_mark=3/0xff,table=1"][..], "exact"),
    ] {
        let mut a = vec!["trace"];
        a.extend_from_slice(args);
        let out = ctl(&d, &a);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(why),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn sigterm_stops_cleanly_with_final_counters() {
    let mut d = start("term");
    assert!(wait_until(Duration::from_secs(20), || tx_packets(
        &d, "sink0"
    ) > 1000));
    nix_kill(d.child.id(), "TERM");
    let out = wait_output(&mut d.child);
    assert!(out.status.success(), "exit status {:?}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("sink0") && stdout.contains("cyc/pkt"),
        "{stdout}"
    );
    assert!(!d.socket.exists(), "control socket left behind");
}

#[test]
fn bad_config_names_file_line_and_field() {
    let dir = tempdir("badcfg");
    let path = dir.join("bad.toml");
    std::fs::write(&path, "[memory]\nframe_size = 3000\n").unwrap();
    let out = Command::new(BIN).args(["run"]).arg(&path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.toml:2") && err.contains("memory.frame_size"),
        "{err}"
    );
    let out = Command::new(BIN)
        .args(["check"])
        .arg(Path::new("../../examples/gen-sink.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Under `taskset -c N` the switch sees one CPU, CPU N: a PMD on N is
/// accepted, one elsewhere refused naming the mask (the CPU count was
/// checked before, so `taskset -c 1` refused `cores = [1]`).
#[test]
fn pmd_cores_are_checked_against_the_affinity_mask() {
    let mine = nfv_config::CpuSet::of_this_process();
    let cpu = mine.last();
    let outside = if cpu == 0 { 1 } else { 0 };
    let dir = tempdir("affinity");
    let check = |core: usize| -> Option<Output> {
        let path = dir.join(format!("pmd-{core}.toml"));
        std::fs::write(
            &path,
            format!("[[port]]\nname = \"s\"\nid = 1\ntype = \"sink\"\n[pmd]\ncores = [{core}]\n"),
        )
        .unwrap();
        Command::new("taskset")
            .args(["-c", &cpu.to_string(), BIN, "check"])
            .arg(&path)
            .output()
            .ok()
    };
    let Some(inside) = check(cpu) else {
        println!(
            "SKIPPED pmd_cores_are_checked_against_the_affinity_mask: no taskset (util-linux)"
        );
        return;
    };
    assert!(
        inside.status.success(),
        "taskset -c {cpu}, cores = [{cpu}]: {}",
        String::from_utf8_lossy(&inside.stderr)
    );
    let out = check(outside).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains(&format!("CPU {outside}"))
            && err.contains(&format!("allows CPUs {cpu}")),
        "taskset -c {cpu}, cores = [{outside}]: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn nix_kill(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
}

fn wait_output(child: &mut Child) -> Output {
    assert!(
        wait_until(Duration::from_secs(20), || child
            .try_wait()
            .unwrap()
            .is_some()),
        "did not exit"
    );
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    use std::io::Read;
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status: child.wait().unwrap(),
        stdout,
        stderr,
    }
}

/// The outputs a `ctl trace --json` answer lists, in order.
fn trace_outputs(t: &serde_json::Value) -> Vec<&str> {
    t["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect()
}
