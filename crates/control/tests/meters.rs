//! Meters through a real datapath: a 1 Mbit/s meter on a rule holds a
//! generator's ~10x flood to 1 Mbit/s (within 5 %, measured at the
//! receiver after the bucket's initial burst has drained), counts what it
//! dropped on its band and as `meter_drop`, and deleting the meter
//! deletes the rule naming it. The rate is enforced against the TSC, so
//! the figure holds on a loaded machine too: only the offered load must
//! stay above the meter's rate, which 10x leaves room for.

use nfv_control::Node;
use nfv_control::protocol::{MeterReport, Request, Response, TrafficReport};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn node() -> Arc<Node> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = "[memory]\nframes = 8192\nhugepages = \"never\"\n\
         [[port]]\nname = \"gen\"\nid = 1\ntype = \"generator\"\nstamp = true\nrate_pps = 20000\n\
         [[port]]\nname = \"rx\"\nid = 2\ntype = \"receiver\"\n";
    let cfg = nfv_config::parse_str(text, Path::new("meters.toml"), cpus)
        .unwrap_or_else(|e| panic!("{e}"));
    Node::start(&cfg).expect("node starts")
}

fn ok(node: &Node, req: Request) -> serde_json::Value {
    match node.handle(&req) {
        Response::Ok { data } => data,
        other => panic!("{req:?}: {other:?}"),
    }
}

fn received(node: &Node) -> u64 {
    let data = ok(node, Request::ShowTraffic);
    let reports: Vec<TrafficReport> = serde_json::from_value(data).unwrap();
    reports
        .iter()
        .flat_map(|r| r.streams.iter())
        .map(|s| s.received)
        .sum()
}

fn meters(node: &Node) -> Vec<MeterReport> {
    serde_json::from_value(ok(node, Request::DumpMeters)).unwrap()
}

#[test]
fn a_one_megabit_meter_holds_a_flood_to_its_rate() {
    let n = node();
    // A rule naming a meter that does not exist is refused.
    let refused = n.handle(&Request::AddFlows {
        flows: vec!["in_port=1,actions=meter:1,output:2".into()],
    });
    assert!(
        matches!(&refused, Response::Error { message } if message.contains("no meter 1")),
        "{refused:?}"
    );
    ok(
        &n,
        Request::AddMeter {
            meter: "meter=1,kbps,band=type=drop,rate=1000".into(),
        },
    );
    ok(
        &n,
        Request::AddFlows {
            flows: vec!["in_port=1,actions=meter:1,output:2".into()],
        },
    );
    // Let the initial burst (one second of the rate) drain.
    std::thread::sleep(Duration::from_millis(2500));
    let (p0, t0) = (received(&n), Instant::now());
    std::thread::sleep(Duration::from_secs(4));
    let (p1, t1) = (received(&n), Instant::now());
    let m = &meters(&n)[0];
    assert!(m.packets > 0 && m.band_packets > 0, "{m:?}");
    let bytes_per_packet = m.bytes as f64 / m.packets as f64;
    let mbps = (p1 - p0) as f64 * bytes_per_packet * 8.0 / (t1 - t0).as_secs_f64() / 1e6;
    eprintln!("meter: {mbps:.3} Mbit/s through a 1 Mbit/s meter; {m:?}");
    assert!(
        (0.95..=1.05).contains(&mbps),
        "{mbps:.3} Mbit/s through a 1 Mbit/s meter ({} packets of {bytes_per_packet} bytes in {:?}); {m:?}",
        p1 - p0,
        t1 - t0
    );
    assert_eq!(m.rules, 1);
    // Deleting the meter deletes the rule that named it.
    let d = ok(&n, Request::DelMeters { meter_id: Some(1) });
    assert_eq!(
        (d["deleted"].as_u64(), d["rules_deleted"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(meters(&n).is_empty());
    n.shutdown();
}
