//! `/metrics` against a running node: the families a dashboard or alert
//! needs are there with Prometheus names and labels, packet counters
//! count, and `promtool check metrics` accepts the text.

mod common;

use common::*;
use std::io::Write;
use std::process::{Command, Stdio};

/// Scrapes until the generator's packets show up in the counters and the
/// rates of a second with traffic are in.
fn scrape_with_traffic(f: &Fixture) -> (Reply, Metrics) {
    let mut last = None;
    let ok = nfv_testutil::wait_until(DEADLINE, || {
        let r = f.get("/metrics");
        assert_eq!(r.status, 200, "{}", r.body);
        let m = parse_metrics(&r.body);
        let ready = m
            .value("nfvswitch_port_tx_packets_total", &[("port", "rx")])
            .is_some_and(|v| v > 0.0)
            && m.value("nfvswitch_pmd_rx_packets_per_second", &[])
                .is_some_and(|v| v > 0.0);
        last = Some((r, m));
        ready
    });
    let (r, m) = last.unwrap();
    assert!(ok, "no traffic in the metrics:\n{}", r.body);
    (r, m)
}

#[test]
fn metrics_have_the_expected_families_and_count_packets() {
    let f = start("metrics");
    let (r, m) = scrape_with_traffic(&f);
    assert!(
        r.content_type.starts_with("text/plain; version=0.0.4"),
        "{}",
        r.content_type
    );
    let families = [
        ("nfvswitch_build_info", "gauge"),
        ("nfvswitch_uptime_seconds", "gauge"),
        ("nfvswitch_start_time_seconds", "gauge"),
        ("nfvswitch_tsc_hertz", "gauge"),
        ("nfvswitch_flow_rules", "gauge"),
        ("nfvswitch_port_rx_packets_total", "counter"),
        ("nfvswitch_port_tx_packets_total", "counter"),
        ("nfvswitch_port_rx_bytes_total", "counter"),
        ("nfvswitch_port_tx_bytes_total", "counter"),
        ("nfvswitch_port_rx_dropped_packets_total", "counter"),
        ("nfvswitch_port_tx_dropped_packets_total", "counter"),
        ("nfvswitch_port_queue_rx_packets_total", "counter"),
        ("nfvswitch_port_queue_tx_packets_total", "counter"),
        ("nfvswitch_port_queue_rx_bytes_total", "counter"),
        ("nfvswitch_port_queue_tx_bytes_total", "counter"),
        ("nfvswitch_port_queue_rx_cycles_total", "counter"),
        ("nfvswitch_port_ring_queued_packets", "gauge"),
        ("nfvswitch_port_guest_rx_buffers", "gauge"),
        ("nfvswitch_port_connected", "gauge"),
        ("nfvswitch_port_one_copy_packets_total", "counter"),
        ("nfvswitch_pmd_busy_cycles_total", "counter"),
        ("nfvswitch_pmd_idle_cycles_total", "counter"),
        ("nfvswitch_pmd_iterations_total", "counter"),
        ("nfvswitch_pmd_rx_packets_total", "counter"),
        ("nfvswitch_pmd_emc_hits_total", "counter"),
        ("nfvswitch_pmd_classifier_hits_total", "counter"),
        ("nfvswitch_pmd_port_wide_hits_total", "counter"),
        ("nfvswitch_pmd_cycles_per_packet", "gauge"),
        ("nfvswitch_pmd_busy_ratio", "gauge"),
        ("nfvswitch_vnf_rx_packets_total", "counter"),
        ("nfvswitch_vnf_tx_packets_total", "counter"),
        ("nfvswitch_vnf_rx_packets_per_second", "gauge"),
        ("nfvswitch_vnf_connected", "gauge"),
        ("nfvswitch_chain_ingress_packets_total", "counter"),
        ("nfvswitch_chain_egress_packets_total", "counter"),
        ("nfvswitch_chain_ingress_packets_per_second", "gauge"),
        ("nfvswitch_chain_egress_bytes_per_second", "gauge"),
        ("nfvswitch_chain_loss_ratio", "gauge"),
        ("nfvswitch_stream_received_packets_total", "counter"),
        ("nfvswitch_pmu_enabled", "gauge"),
        ("nfvswitch_openflow_errors_sent_total", "counter"),
        ("nfvswitch_openflow_async_messages_total", "counter"),
        ("nfvswitch_openflow_packet_ins_total", "counter"),
        ("nfvswitch_openflow_packet_outs_total", "counter"),
        ("nfvswitch_pmu_event_supported", "gauge"),
    ];
    let missing: Vec<String> = families
        .iter()
        .filter(|(name, ty)| {
            m.types.get(*name).map(String::as_str) != Some(*ty) || !m.samples.contains_key(*name)
        })
        .map(|(n, t)| format!("{n} ({t})"))
        .collect();
    assert!(missing.is_empty(), "missing or mistyped: {missing:?}");
    // Every name is prefixed, counters end in _total and nothing else does.
    for (name, ty) in &m.types {
        assert!(name.starts_with("nfvswitch_"), "{name}");
        assert_eq!(
            name.ends_with("_total"),
            ty == "counter",
            "{name} is a {ty}"
        );
    }

    let pos = |name: &str, labels: &[(&str, &str)]| {
        let v = m.value(name, labels);
        assert!(v.is_some_and(|v| v > 0.0), "{name}{labels:?} = {v:?}");
    };
    pos(
        "nfvswitch_port_rx_packets_total",
        &[("port", "gen"), ("port_no", "1"), ("type", "generator")],
    );
    pos("nfvswitch_port_tx_packets_total", &[("port", "rx")]);
    pos("nfvswitch_port_tx_bytes_total", &[("port", "rx")]);
    pos(
        "nfvswitch_port_queue_rx_packets_total",
        &[("port", "gen"), ("queue", "0")],
    );
    pos(
        "nfvswitch_port_queue_rx_cycles_total",
        &[("port", "gen"), ("queue", "0")],
    );
    pos("nfvswitch_pmd_rx_packets_total", &[("pmd", "0")]);
    pos("nfvswitch_pmd_busy_cycles_total", &[("pmd", "0")]);
    pos("nfvswitch_pmd_iterations_total", &[("pmd", "0")]);
    pos("nfvswitch_pmd_busy_ratio", &[("pmd", "0")]);
    pos("nfvswitch_pmd_cycles_per_packet", &[("pmd", "0")]);
    pos(
        "nfvswitch_chain_ingress_packets_total",
        &[("chain", "direct")],
    );
    pos(
        "nfvswitch_chain_egress_packets_total",
        &[("chain", "direct")],
    );
    pos("nfvswitch_stream_received_packets_total", &[("port", "rx")]);
    pos("nfvswitch_tsc_hertz", &[]);
    assert!(m.value("nfvswitch_pmd_busy_ratio", &[]).unwrap() <= 1.0);
    // Drops: one series per reason, zeros included.
    let reasons: std::collections::BTreeSet<&str> =
        m.samples["nfvswitch_port_tx_dropped_packets_total"]
            .iter()
            .filter(|(l, _)| l["port"] == "rx")
            .map(|(l, _)| l["reason"].as_str())
            .collect();
    assert_eq!(reasons.len(), nfv_ports::DropReason::COUNT, "{reasons:?}");
    assert!(reasons.contains("tx_full") && reasons.contains("no_match"));
    // The unconnected VNF: present, down, nothing through it.
    let vnf = [("chain", "via-vnf"), ("vnf", "vnf1"), ("port_no", "3")];
    assert_eq!(m.value("nfvswitch_vnf_connected", &vnf), Some(0.0));
    assert_eq!(m.value("nfvswitch_vnf_rx_packets_total", &vnf), Some(0.0));
    assert_eq!(
        m.value("nfvswitch_port_connected", &[("port", "vnf1")]),
        Some(0.0)
    );
    // One-copy forwarding is counted per vhost-user port (nothing yet).
    assert_eq!(
        m.value("nfvswitch_port_one_copy_packets_total", &[("port", "vnf1")]),
        Some(0.0)
    );
    // Ring fill: only ring and vhost-user ports expose it (the unconnected
    // guest has queued nothing and posted no rx buffers).
    assert!(
        m.value("nfvswitch_port_ring_queued_packets", &[("port", "ra")])
            .is_some()
    );
    assert!(
        m.value("nfvswitch_port_ring_queued_packets", &[("port", "gen")])
            .is_none()
    );
    assert_eq!(
        m.value("nfvswitch_port_ring_queued_packets", &[("port", "vnf1")]),
        Some(0.0)
    );
    assert_eq!(
        m.value("nfvswitch_port_guest_rx_buffers", &[("port", "vnf1")]),
        Some(0.0)
    );
    assert!(
        m.value("nfvswitch_port_guest_rx_buffers", &[("port", "ra")])
            .is_none()
    );
    assert_eq!(
        m.value("nfvswitch_build_info", &[]),
        Some(1.0),
        "build_info"
    );

    // PMU: every event says whether it is supported; supported ones
    // have values, unsupported ones none (VMs often have no hardware
    // events).
    let supported = &m.samples["nfvswitch_pmu_event_supported"];
    assert!(!supported.is_empty());
    for (l, v) in supported {
        let c = [("pmd", l["pmd"].as_str()), ("event", l["event"].as_str())];
        let has = m.value("nfvswitch_pmu_events_total", &c).is_some()
            || m.value("nfvswitch_pmu_time_seconds_total", &c).is_some();
        assert_eq!(
            has,
            *v == 1.0,
            "{l:?} supported={v} but values present={has}"
        );
    }

    // OpenMetrics for scrapers that ask for it.
    let om = f.get_with(
        "/metrics",
        (
            "accept",
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5",
        ),
    );
    assert!(om.content_type.starts_with("application/openmetrics-text"));
    assert!(om.body.ends_with("# EOF\n"));
    assert!(
        om.body
            .contains("# TYPE nfvswitch_port_rx_packets counter\n")
    );
    assert!(om.body.contains("# UNIT nfvswitch_port_rx_bytes bytes\n"));
}

#[test]
fn promtool_accepts_the_metrics() {
    let name = "promtool_accepts_the_metrics";
    let Some(promtool) = promtool() else {
        nfv_testutil::skip(name, "promtool not installed (Debian package `prometheus`)");
        return;
    };
    let f = start("promtool");
    let (r, _) = scrape_with_traffic(&f);
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(r.body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed ({}):\n{}{}\n--- metrics ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        r.body
    );
    // promtool reports lint findings on stdout even when it succeeds.
    let findings = String::from_utf8_lossy(&out.stdout);
    assert!(findings.trim().is_empty(), "promtool lint: {findings}");
}
