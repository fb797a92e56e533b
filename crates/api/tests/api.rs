//! The REST API against a running node (generator → receiver, a chain
//! through an unconnected vhost-user port, a ring pair): every endpoint's
//! JSON shape, rates and time series filling in, changes through the API,
//! and refusals that leave the node as it was.
//!
//! Waits poll against generous deadlines; nothing asserts how long
//! anything takes.

mod common;

use common::*;
use serde_json::Value;

fn direction() -> Ty {
    obj(&[
        ("packets", Ty::U64),
        ("bytes", Ty::U64),
        ("drops", map(Ty::U64)),
        ("mpps", Ty::F64),
        ("gbps", Ty::F64),
    ])
}

fn queue() -> Ty {
    obj(&[
        ("queue", Ty::U64),
        ("pmd", opt(Ty::U64)),
        ("packets", Ty::U64),
        ("bytes", Ty::U64),
        ("cycles", Ty::U64),
        ("drops", Ty::U64),
    ])
}

fn port() -> Ty {
    obj(&[
        ("no", Ty::U64),
        ("name", Ty::Str),
        ("type", Ty::Str),
        ("rx", direction()),
        ("tx", direction()),
        ("rx_queues", list(queue())),
        ("tx_queues", list(queue())),
        ("info", map(Ty::Str)),
    ])
}

fn pmd() -> Ty {
    obj(&[
        ("index", Ty::U64),
        ("core", opt(Ty::U64)),
        ("mpps", Ty::F64),
        ("busy_percent", Ty::F64),
        ("cycles_per_packet", opt(Ty::F64)),
        ("switch_cycles_per_packet", opt(Ty::F64)),
        ("packets_per_batch", Ty::F64),
        ("rx_packets", Ty::U64),
        ("emc_hits", Ty::U64),
        ("emc_probes", Ty::U64),
        ("cache_bytes", Ty::U64),
        ("megaflow_hits", Ty::U64),
        ("port_wide_hits", Ty::U64),
        ("megaflows", Ty::U64),
        ("megaflow_refused", Ty::U64),
        ("classifier_hits", Ty::U64),
        ("table_misses", Ty::U64),
        ("busy_cycles", Ty::U64),
        ("idle_cycles", Ty::U64),
        ("rx_queues", list(Ty::Str)),
        ("tsc_hz", Ty::U64),
    ])
}

fn vnf() -> Ty {
    obj(&[
        ("name", Ty::Str),
        ("port", Ty::U64),
        ("rx_mpps", Ty::F64),
        ("rx_gbps", Ty::F64),
        ("tx_mpps", Ty::F64),
        ("tx_gbps", Ty::F64),
        ("rx_packets", Ty::U64),
        ("tx_packets", Ty::U64),
        ("drops", Ty::U64),
        ("connected", Ty::Bool),
    ])
}

fn chain() -> Ty {
    obj(&[
        ("name", Ty::Str),
        ("hops", list(Ty::Str)),
        ("ingress_mpps", Ty::F64),
        ("egress_mpps", Ty::F64),
        ("egress_gbps", Ty::F64),
        ("loss_percent", Ty::F64),
        ("vnfs", list(vnf())),
    ])
}

fn traffic() -> Ty {
    let latency = obj(&[
        ("samples", Ty::U64),
        ("min_ns", Ty::U64),
        ("mean_ns", Ty::F64),
        ("p50_ns", Ty::U64),
        ("p99_ns", Ty::U64),
        ("p999_ns", Ty::U64),
        ("max_ns", Ty::U64),
    ]);
    let stream = obj(&[
        ("stream", Ty::U64),
        ("src_port", Ty::U64),
        ("src_queue", Ty::U64),
        ("received", Ty::U64),
        ("lost", Ty::U64),
        ("reordered", Ty::U64),
        ("duplicates", Ty::U64),
        ("late", Ty::U64),
        ("latency", opt(latency)),
    ]);
    obj(&[
        ("no", Ty::U64),
        ("name", Ty::Str),
        ("unstamped", Ty::U64),
        ("untracked", Ty::U64),
        ("streams", list(stream)),
    ])
}

fn flow() -> Ty {
    obj(&[
        ("priority", Ty::U64),
        ("cookie", Ty::U64),
        ("n_packets", Ty::U64),
        ("n_bytes", Ty::U64),
        ("duration_secs", Ty::F64),
        ("rule", Ty::Str),
    ])
}

fn node() -> Ty {
    obj(&[
        ("name", Ty::Str),
        ("version", Ty::Str),
        ("started", Ty::F64),
        ("uptime_secs", Ty::F64),
        ("pmds", Ty::U64),
        ("pmd_cores", list(opt(Ty::U64))),
        ("ports", Ty::U64),
        ("flows", Ty::U64),
        ("chains", Ty::U64),
        (
            "memory",
            obj(&[
                ("frames", Ty::U64),
                ("frame_size", Ty::U64),
                ("hugepages", Ty::Str),
                ("backing", Ty::Str),
            ]),
        ),
        ("api", opt(Ty::Str)),
    ])
}

fn timeseries() -> Ty {
    let port = obj(&[
        ("no", Ty::U64),
        ("name", Ty::Str),
        ("rx_mpps", Ty::F64),
        ("rx_gbps", Ty::F64),
        ("tx_mpps", Ty::F64),
        ("tx_gbps", Ty::F64),
        ("rx_drops_per_sec", Ty::F64),
        ("tx_drops_per_sec", Ty::F64),
    ]);
    let pmd = obj(&[
        ("index", Ty::U64),
        ("mpps", Ty::F64),
        ("busy_percent", Ty::F64),
        ("cycles_per_packet", opt(Ty::F64)),
    ]);
    let vnf = obj(&[
        ("name", Ty::Str),
        ("port", Ty::U64),
        ("rx_mpps", Ty::F64),
        ("rx_gbps", Ty::F64),
        ("tx_mpps", Ty::F64),
        ("tx_gbps", Ty::F64),
        ("drops_per_sec", Ty::F64),
    ]);
    let chain = obj(&[
        ("name", Ty::Str),
        ("ingress_mpps", Ty::F64),
        ("egress_mpps", Ty::F64),
        ("egress_gbps", Ty::F64),
        ("loss_percent", Ty::F64),
        ("vnfs", list(vnf)),
    ]);
    let sample = obj(&[
        ("time", Ty::F64),
        ("secs", Ty::F64),
        ("ports", list(port)),
        ("pmds", list(pmd)),
        ("chains", list(chain)),
    ]);
    obj(&[
        ("interval_secs", Ty::F64),
        ("capacity", Ty::U64),
        ("samples", list(sample)),
    ])
}

fn len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

fn by_name<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == name))
        .unwrap_or_else(|| panic!("no {name:?} in {list}"))
}

fn received(f: &Fixture) -> u64 {
    let t = f.get_json("/api/v1/traffic");
    t[0]["streams"].as_array().map_or(0, |s| {
        s.iter().map(|s| s["received"].as_u64().unwrap()).sum()
    })
}

/// Waits until a one-second sample with traffic in it is reported.
fn wait_for_rates(f: &Fixture) {
    assert!(
        nfv_testutil::wait_until(DEADLINE, || {
            let ports = f.get_json("/api/v1/ports");
            by_name(&ports, "gen")["rx"]["mpps"].as_f64().unwrap() > 0.0
                && by_name(&ports, "rx")["tx"]["mpps"].as_f64().unwrap() > 0.0
        }),
        "rates never became non-zero"
    );
}

#[test]
fn every_endpoint_answers_with_its_schema() {
    let f = start("schema");
    wait_for_rates(&f);

    let n = f.get_json("/api/v1/node");
    assert_schema(&n, &node(), "node");
    assert_eq!(n["name"], "api-schema");
    assert_eq!(n["ports"], 7);
    assert_eq!(n["chains"], 2);
    // The real address, not the :0 of the config.
    assert_eq!(
        n["api"].as_str().unwrap(),
        f.api.as_ref().unwrap().addr().to_string()
    );

    let ports = f.get_json("/api/v1/ports");
    assert_schema(&ports, &list(port()), "ports");
    assert_eq!(len(&ports), 7);

    let pmds = f.get_json("/api/v1/pmd");
    assert_schema(&pmds, &list(pmd()), "pmd");
    assert!(len(&pmds) >= 1);

    let chains = f.get_json("/api/v1/chains");
    assert_schema(&chains, &list(chain()), "chains");
    assert_eq!(len(&chains), 2);
    let via = by_name(&chains, "via-vnf");
    assert_eq!(via["hops"], serde_json::json!(["idle", "vnf1", "sink"]));
    assert_eq!(via["vnfs"][0]["connected"], false);

    let t = f.get_json("/api/v1/traffic");
    assert_schema(&t, &list(traffic()), "traffic");
    assert_eq!(len(&t), 1);
    assert!(len(&t[0]["streams"]) >= 1);

    let flows = f.get_json("/api/v1/flows");
    assert_schema(&flows, &list(flow()), "flows");
    // The config's rule and the steering rules of both chains.
    assert_eq!(len(&flows), 4);

    let ts = f.get_json("/api/v1/timeseries");
    assert_schema(&ts, &timeseries(), "timeseries");
    assert_eq!(ts["capacity"], 300);
    assert!(len(&ts["samples"]) >= 1);

    let idx = f.get_json("/api/v1");
    assert_schema(&idx, &obj(&[("endpoints", list(Ty::Str))]), "index");
    assert!(len(&idx["endpoints"]) >= 12);
}

#[test]
fn rates_become_non_zero_and_the_time_series_grows() {
    let f = start("rates");
    wait_for_rates(&f);
    assert!(
        nfv_testutil::wait_until(DEADLINE, || {
            let p = &f.get_json("/api/v1/pmd")[0];
            p["mpps"].as_f64().unwrap() > 0.0
                && p["busy_percent"].as_f64().unwrap() > 0.0
                && p["cycles_per_packet"].as_f64().is_some()
        }),
        "PMD rates never became non-zero"
    );
    assert!(
        nfv_testutil::wait_until(DEADLINE, || {
            by_name(&f.get_json("/api/v1/chains"), "direct")["egress_mpps"]
                .as_f64()
                .unwrap()
                > 0.0
        }),
        "chain rate never became non-zero"
    );

    let samples = |q: &str| f.get_json(&format!("/api/v1/timeseries{q}"))["samples"].clone();
    let before = len(&samples(""));
    assert!(
        nfv_testutil::wait_until(DEADLINE, || len(&samples("")) >= before + 2),
        "the time series did not grow"
    );
    let all = samples("");
    let times: Vec<f64> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["time"].as_f64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    // ?seconds=N gives the newest N.
    let last2 = samples("?seconds=2");
    assert_eq!(len(&last2), 2);
    assert!(last2[1]["time"].as_f64().unwrap() >= times[times.len() - 1]);
    // More than is kept is cut to what is kept.
    assert!(len(&samples("?seconds=100000")) <= 300);
    // The newest sample carries the traffic, per port, PMD and chain.
    let newest = &samples("?seconds=1")[0];
    assert!(
        by_name(&newest["ports"], "gen")["rx_mpps"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(by_name(&newest["ports"], "rx")["tx_gbps"].as_f64().unwrap() > 0.0);
    assert!(newest["pmds"][0]["mpps"].as_f64().unwrap() > 0.0);
    assert!(
        by_name(&newest["chains"], "direct")["ingress_mpps"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(
        by_name(&newest["chains"], "via-vnf")["vnfs"][0]["name"],
        "vnf1"
    );
}

#[test]
fn flows_ports_and_counters_change_through_the_api() {
    let f = start("change");
    // Text: one rule per line, comments and blank lines skipped.
    let r = f.post(
        "/api/v1/flows",
        "text/plain",
        "# two rules\npriority=20,udp,tp_dst=53,actions=drop\n\npriority=21,tcp,tp_dst=80,actions=drop\n",
    );
    assert_eq!(
        (r.status, r.json()["added"].as_u64()),
        (200, Some(2)),
        "{}",
        r.body
    );
    // JSON, as a list and as an object.
    let r = f.post(
        "/api/v1/flows",
        "application/json",
        r#"["priority=22,udp,tp_dst=54,actions=drop"]"#,
    );
    assert_eq!(r.json()["added"], 1, "{}", r.body);
    let r = f.post(
        "/api/v1/flows",
        "application/json",
        r#"{"flows": ["priority=23,udp,tp_dst=55,actions=drop"]}"#,
    );
    assert_eq!(r.json()["added"], 1, "{}", r.body);
    let rules: Vec<String> = f
        .get_json("/api/v1/flows")
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(rules.len(), 8, "{rules:?}");
    assert!(rules.iter().any(|r| r.contains("tp_dst=80")), "{rules:?}");
    // Listed by filter (what the same filter deletes): the UDP rules.
    let udp = f.get_json("/api/v1/flows?filter=udp");
    let udp: Vec<&str> = udp
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert!(
        !udp.is_empty() && udp.iter().all(|r| r.contains("udp")),
        "{udp:?}"
    );
    assert_eq!(
        udp.len(),
        rules.iter().filter(|r| r.contains("udp")).count(),
        "{udp:?} of {rules:?}"
    );
    // A packet traced through them (`ctl trace`'s report): port 1's
    // packets all go the chain's way (port-wide), port 7's are looked up.
    let t = f.get_json("/api/v1/trace?flow=in_port%3D1%2Cudp%2Ctp_dst%3D55");
    let by = |t: &Value| t["decided_by"].as_str().unwrap().to_string();
    assert!(by(&t).starts_with("port-wide"), "{t}");
    let t = f.get_json("/api/v1/trace?flow=in_port%3D7%2Cudp%2Ctp_dst%3D55");
    assert!(
        t["rule"]
            .as_str()
            .unwrap()
            .contains("priority=23,udp,tp_dst=55"),
        "{t}"
    );
    assert!(by(&t).starts_with("classifier"), "{t}");
    refused(&f.get("/api/v1/trace?flow=udp"), 400, "in_port");
    refused(&f.get("/api/v1/trace"), 400, "flow");
    // Delete by filter (URL-encoded).
    let r = f.delete("/api/v1/flows?filter=udp%2Ctp_dst%3D53");
    assert_eq!(
        (r.status, r.json()["deleted"].as_u64()),
        (200, Some(1)),
        "{}",
        r.body
    );
    assert_eq!(len(&f.get_json("/api/v1/flows")), 7);

    // Ports: add by inline TOML and by JSON, delete by name and number.
    let r = f.post(
        "/api/v1/ports",
        "text/plain",
        r#"name="s9",id=9,type="sink""#,
    );
    assert_eq!(
        (r.status, r.json()["added"].as_u64()),
        (200, Some(9)),
        "{}",
        r.body
    );
    let r = f.post(
        "/api/v1/ports",
        "application/json",
        r#"{"port": "name=\"s10\",id=10,type=\"sink\""}"#,
    );
    assert_eq!(r.json()["added"], 10, "{}", r.body);
    assert_eq!(len(&f.get_json("/api/v1/ports")), 9);
    assert_eq!(f.get_json("/api/v1/node")["ports"], 9);
    let r = f.delete("/api/v1/ports/s9");
    assert_eq!(
        (r.status, r.json()["deleted"].as_u64()),
        (200, Some(9)),
        "{}",
        r.body
    );
    let r = f.delete("/api/v1/ports/10");
    assert_eq!(r.json()["deleted"], 10, "{}", r.body);
    let ports = f.get_json("/api/v1/ports");
    assert_eq!(len(&ports), 7);
    assert!(!ports.as_array().unwrap().iter().any(|p| p["name"] == "s9"));

    // Clear stats zeroes the receiver's streams and the PMD counters.
    assert!(nfv_testutil::wait_until(DEADLINE, || received(&f) > 20_000));
    let r = f.post("/api/v1/stats/clear", "text/plain", "");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(received(&f) < 20_000, "streams not cleared");
}

/// Asserts a refusal: `status` and a JSON error message containing `msg`.
#[track_caller]
/// `GET /trace` follows a ct(table=T) into table T, the tracker's answers
/// given as `ct_next` (`;` between the copies' states).
#[test]
fn trace_follows_ct_as_ct_next_says() {
    let f = start("trace-ct");
    let r = f.post(
        "/api/v1/flows",
        "application/json",
        r#"["priority=24,tcp,tp_dst=99,actions=ct(table=1,zone=2),ct(table=1)",
            "table=1,priority=5,ip,ct_state=+trk+new,actions=drop",
            "table=1,priority=6,ip,ct_state=+trk+est,actions=drop"]"#,
    );
    assert_eq!(r.json()["added"], 3, "{}", r.body);
    let flow = "flow=in_port%3D7%2Ctcp%2Ctp_dst%3D99";
    // (ct_next, the state each copy came back with, the rule it met)
    let cases: &[(&str, [&str; 2], [&str; 2])] = &[
        ("", ["new|trk", "new|trk"], ["priority=5", "priority=5"]),
        (
            "&ct_next=trk,est",
            ["est|trk", "new|trk"],
            ["priority=6", "priority=5"],
        ),
        (
            "&ct_next=trk,new;%2Btrk%2Best",
            ["new|trk", "est|trk"],
            ["priority=5", "priority=6"],
        ),
    ];
    for (ct_next, states, rules) in cases {
        let t = f.get_json(&format!("/api/v1/trace?{flow}{ct_next}"));
        for i in 0..2 {
            let copy = &t["steps"][i]["recirculation"];
            assert_eq!(copy["recirculation"], i + 1, "{ct_next}: {t}");
            assert_eq!(copy["ct_state"].as_str(), Some(states[i]), "{ct_next}: {t}");
            assert!(
                copy["rule"].as_str().unwrap().starts_with(rules[i]),
                "{ct_next}: {t}"
            );
        }
    }
    refused(
        &f.get(&format!("/api/v1/trace?{flow}&ct_next=trk,new,est")),
        400,
        "new and est",
    );
}

fn refused(r: &Reply, status: u16, msg: &str) {
    assert_eq!(r.status, status, "{}", r.body);
    let e = r.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(e.contains(msg), "error {e:?} does not mention {msg:?}");
}

#[test]
fn refusals_are_4xx_with_a_message_and_change_nothing() {
    let f = start("refuse");
    let state = |f: &Fixture| {
        let rules: Vec<Value> = f
            .get_json("/api/v1/flows")
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["rule"].clone())
            .collect();
        let ports: Vec<Value> = f
            .get_json("/api/v1/ports")
            .as_array()
            .unwrap()
            .iter()
            .map(|p| serde_json::json!([p["no"], p["name"], p["type"]]))
            .collect();
        (rules, ports)
    };
    let before = state(&f);
    let text = "text/plain";
    let json = "application/json";

    // Flows.
    refused(
        &f.post(
            "/api/v1/flows",
            text,
            "priority=5,in_port=99,actions=output:2",
        ),
        400,
        "in_port=99: no such port",
    );
    // All or nothing: the good first rule is not installed either.
    refused(
        &f.post(
            "/api/v1/flows",
            text,
            "priority=5,udp,actions=drop\npriority=6,actions=frobnicate",
        ),
        400,
        "flow 2",
    );
    refused(
        &f.post("/api/v1/flows", json, r#"{"nope": 1}"#),
        400,
        "JSON body",
    );
    refused(&f.post("/api/v1/flows", json, "[1, 2]"), 400, "JSON body");
    refused(
        &f.post("/api/v1/flows", text, "\n# nothing\n"),
        400,
        "no flows",
    );
    refused(&f.delete("/api/v1/flows"), 400, "?filter=");
    refused(
        &f.delete("/api/v1/flows?filter=colour%3Dred"),
        400,
        "colour",
    );

    // Ports.
    refused(
        &f.post("/api/v1/ports", text, r#"name="gen",id=9,type="sink""#),
        400,
        "already in use",
    );
    refused(
        &f.post("/api/v1/ports", text, r#"name="s9",id=1,type="sink""#),
        400,
        "port number 1 is already in use",
    );
    refused(
        &f.post("/api/v1/ports", text, r#"name="s9",id=9,type="warp""#),
        400,
        "type",
    );
    refused(
        &f.post("/api/v1/ports", json, r#"{"port": 5}"#),
        400,
        "JSON body",
    );
    refused(&f.post("/api/v1/ports", text, "  "), 400, "no port given");
    refused(&f.delete("/api/v1/ports/nosuch"), 404, "no port \"nosuch\"");
    refused(&f.delete("/api/v1/ports/99"), 404, "no port \"99\"");

    // Queries, paths and methods.
    refused(&f.get("/api/v1/timeseries?seconds=abc"), 400, "seconds");
    refused(&f.get("/api/v1/timeseries?seconds=0"), 400, "seconds");
    refused(&f.get("/api/v1/nothing"), 404, "no such endpoint");
    refused(&f.put("/api/v1/flows", ""), 405, "PUT is not allowed");

    assert_eq!(state(&f), before, "a refused request changed the node");
}

#[test]
fn dashboard_files_are_served_from_the_binary() {
    let f = start("assets");
    let r = f.get("/");
    assert_eq!(r.status, 200);
    assert!(
        r.content_type.starts_with("text/html"),
        "{}",
        r.content_type
    );
    assert!(r.body.contains("<html") && r.body.contains("app.js"));
    assert_eq!(f.get("/index.html").body, r.body);
    let js = f.get("/app.js");
    assert_eq!(js.status, 200);
    assert!(js.content_type.starts_with("text/javascript"));
    assert!(js.body.contains("api/v1"));
    let css = f.get("/style.css");
    assert!(css.content_type.starts_with("text/css"));
    assert_eq!(f.get("/nothing.js").status, 404);
}

#[test]
fn the_bound_address_is_reported_and_a_busy_one_is_refused() {
    let mut f = start("bind");
    let addr = f.api.as_ref().unwrap().addr();
    assert_ne!(addr.port(), 0);
    assert_eq!(f.node.api_addr(), Some(addr));
    // Through the control protocol as well.
    let nfv_control::Response::Ok { data } = f.node.handle(&nfv_control::Request::ShowNode) else {
        panic!("show node refused")
    };
    assert_eq!(data["api"], addr.to_string());

    // The same address again: an error, and the first server goes on.
    let e = nfv_api::ApiServer::start(addr, f.node.clone())
        .err()
        .expect("binding a busy address fails");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    assert_eq!(f.node.api_addr(), Some(addr));
    // Outside loopback: refused (the token would cross the network in clear).
    let e = nfv_api::ApiServer::start("0.0.0.0:0".parse().unwrap(), f.node.clone())
        .err()
        .expect("a wildcard bind is refused");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    assert!(e.to_string().contains("loopback"), "{e}");
    assert_eq!(f.node.api_addr(), Some(addr));
    assert_eq!(f.get("/api/v1/node").status, 200);

    // Stopping closes the port and clears the address.
    f.api.take().unwrap().stop();
    assert_eq!(f.node.api_addr(), None);
    assert!(std::net::TcpStream::connect(addr).is_err());
    assert!(f.node.show_node().api.is_none());
}

#[test]
fn a_replaced_node_is_served_at_the_same_address_with_the_demo_status() {
    let mut f = start("replace");
    let api = f.api.take().unwrap();
    refused(&f.get("/api/v1/demo"), 404, "no demo");

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = r#"[node]
name = "api-replacement"
[memory]
frames = 2048
hugepages = "never"
[[port]]
name = "g"
id = 1
type = "generator"
rate_pps = 1000
[[port]]
name = "s"
id = 2
type = "sink"
[[chain]]
name = "gs"
ingress = "g"
egress = "s"
"#;
    let cfg = nfv_config::parse_str(text, std::path::Path::new("replacement.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    let second = nfv_control::Node::start(&cfg).expect("second node starts");
    api.replace_node(second.clone());
    assert_eq!(f.get_json("/api/v1/node")["name"], "api-replacement");
    assert_eq!(second.api_addr(), Some(api.addr()));
    assert_eq!(f.node.api_addr(), None, "the old node still claims the API");
    let chains = f.get_json("/api/v1/chains");
    assert_eq!(len(&chains), 1);
    assert_eq!(chains[0]["name"], "gs");
    assert!(f.get("/metrics").body.contains("api-replacement"));

    let status = nfv_api::DemoStatus {
        run: 2,
        runs: 3,
        phase: nfv_api::DemoPhase::Measuring,
        seconds: 3,
        current: nfv_api::DemoRun {
            topology: "ew".into(),
            title: "east-west".into(),
            vnfs: 4,
            frame_size: 64,
        },
        ..Default::default()
    };
    api.set_demo(Some(status.clone()));
    let got: nfv_api::DemoStatus =
        serde_json::from_value(f.get_json("/api/v1/demo")).expect("demo status");
    assert_eq!(got, status);
    assert_eq!(f.get_json("/api/v1/demo")["phase"], "measuring");

    api.stop();
    assert_eq!(second.api_addr(), None);
    second.shutdown();
}

/// Groups over REST: added as text and as JSON, replaced with PUT, named
/// by a rule, shown with their buckets, traced, deleted with the rules
/// that name them; a rule naming a missing group, a bad group and a
/// change without the token are refused.
#[test]
fn groups_change_through_the_api() {
    let f = start("groups");
    let r = f.post(
        "/api/v1/groups",
        "text/plain",
        "group_id=7,type=select,bucket=output:4,bucket=output:5",
    );
    assert_eq!(
        (r.status, r.json()["added"].as_u64()),
        (200, Some(7)),
        "{}",
        r.body
    );
    let r = f.post(
        "/api/v1/groups",
        "application/json",
        r#"{"group": "group_id=8,type=indirect,bucket=output:4"}"#,
    );
    assert_eq!(r.json()["added"], 8, "{}", r.body);
    refused(
        &f.post("/api/v1/groups", "text/plain", "group_id=8,bucket=output:5"),
        400,
        "group 8 exists",
    );
    refused(
        &f.post("/api/v1/groups", "text/plain", "group_id=9,type=indirect"),
        400,
        "exactly one bucket",
    );
    refused(
        &f.post("/api/v1/flows", "text/plain", "in_port=6,actions=group:99"),
        400,
        "no group 99",
    );
    let r = f.post("/api/v1/flows", "text/plain", "in_port=6,actions=group:7");
    assert_eq!(r.status, 200, "{}", r.body);
    let r = f.put(
        "/api/v1/groups",
        "group_id=7,type=select,bucket=weight:3,output:4,bucket=output:5",
    );
    assert_eq!(r.json()["modified"], 7, "{}", r.body);
    let groups = f.get_json("/api/v1/groups");
    assert_eq!(len(&groups), 2, "{groups}");
    let g7 = &groups[0];
    assert_eq!(
        (g7["group_id"].as_u64(), g7["type"].as_str()),
        (Some(7), Some("select"))
    );
    assert_eq!(g7["rules"], 1, "{g7}");
    assert_eq!(g7["buckets"][0]["weight"], 3, "{g7}");
    assert_eq!(g7["buckets"][1]["actions"], "output:5", "{g7}");
    let t = f.get_json("/api/v1/trace?flow=in_port%3D6%2Cudp");
    // The trace expands the group into the bucket the PMD's select hash
    // picks, so the packet leaves by one of the buckets' ports.
    assert_eq!(t["steps"][0]["action"], "group:7", "{t}");
    assert_eq!(len(&t["steps"][0]["buckets"]), 1, "{t}");
    let out = t["outputs"][0].as_str().unwrap_or_default();
    assert!(
        out.starts_with("4 ") || out.starts_with("5 "),
        "a select group of output:4 and output:5 sent it to {out:?}: {t}"
    );
    let r = f.post_with(
        "/api/v1/groups",
        "text/plain",
        "group_id=10,bucket=output:4",
        &[],
    );
    assert_ne!(r.status, 200, "a change without the token: {}", r.body);
    let r = f.delete("/api/v1/groups/7");
    assert_eq!(
        (
            r.json()["deleted"].as_u64(),
            r.json()["rules_deleted"].as_u64()
        ),
        (Some(1), Some(1)),
        "{}",
        r.body
    );
    assert_eq!(len(&f.get_json("/api/v1/groups")), 1);
    refused(&f.delete("/api/v1/groups/x"), 400, "not a group id");
}

/// Connection tracking over REST: a `ct(commit)` rule on the generator's
/// traffic fills the table, `GET /conntrack` lists it (the total and each
/// connection as dump-conntrack writes it, by zone), `DELETE` flushes a
/// zone and needs the token; a zone that is not a number and a flush with
/// a limit are refused.
#[test]
fn conntrack_dump_and_flush_through_the_api() {
    let f = start("conntrack");
    let r = f.post(
        "/api/v1/flows",
        "text/plain",
        "priority=60000,ip,in_port=1,actions=ct(commit,zone=3),output:2",
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let mut dump = Value::Null;
    let listed = nfv_testutil::wait_until(std::time::Duration::from_secs(20), || {
        dump = f.get_json("/api/v1/conntrack?zone=3");
        dump["total"].as_u64().unwrap_or(0) >= 1
    });
    assert!(listed, "no connection in zone 3: {dump}");
    let c = &dump["connections"][0];
    assert_eq!(
        (c["zone"].as_u64(), c["proto"].as_str()),
        (Some(3), Some("udp")),
        "{c}"
    );
    assert!(
        c["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("udp,orig=(src="),
        "{c}"
    );
    assert_eq!(f.get_json("/api/v1/conntrack?zone=4")["total"], 0);

    let r = f.delete_with("/api/v1/conntrack?zone=3", &[]);
    assert_ne!(r.status, 200, "a flush without the token: {}", r.body);
    // A web page's request carries the token no more than its origin
    // allows: a cross-site flush is refused even with it.
    let auth = f.auth.clone();
    let r = f.delete_with(
        "/api/v1/conntrack?zone=3",
        &[("authorization", &auth), ("origin", "http://evil.example")],
    );
    assert_eq!(r.status, 403, "a cross-site flush: {}", r.body);
    let r = f.delete("/api/v1/conntrack?zone=3");
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.json()["flushed"].as_u64().unwrap_or(0) >= 1, "{}", r.body);
    refused(&f.get("/api/v1/conntrack?zone=x"), 400, "zone");
    refused(&f.delete("/api/v1/conntrack?limit=5"), 400, "zone=N only");
}
