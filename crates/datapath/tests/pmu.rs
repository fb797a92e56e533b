//! PMU counters in a running PMD: opened by the PMD thread itself, read
//! every ~100 ms from housekeeping, published with the packet count of the
//! same moment; switched off and on at run time; restarted by clear-stats.
//! Hardware counters may be unsupported (VMs without a PMU): then they
//! must say so with a reason while the software counters still count.

use nfv_datapath::{Datapath, DatapathConfig};
use nfv_flow::parse_flow;
use nfv_flow::table::SharedFlowTable;
use nfv_mem::{HugepageMode, MemoryConfig, PacketPool};
use nfv_pmu::{Event, PmuSnapshot, Reading, Unsupported};
use nfv_ports::PortFactory;
use nfv_ports::config::{GeneratorConfig, PortConfig, PortKind};
use nfv_testutil::wait_until;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(20);

/// One spinning datapath at a time (2-core machines).
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// gen(1) → sink(2) on one PMD.
fn start(name: &str, pmu: bool) -> (Datapath, PortFactory) {
    let pool = PacketPool::new(
        name,
        &MemoryConfig {
            frame_size: 2048,
            frames: 4096,
            hugepages: HugepageMode::Never,
        },
    )
    .expect("packet pool");
    let table = Arc::new(SharedFlowTable::new());
    table.add_flows([parse_flow("in_port=1,actions=output:2").unwrap()]);
    let dp = Datapath::start(
        &DatapathConfig {
            pmd_cores: vec![None],
            emc_entries: 1024,
            megaflow_entries: 1024,
            pmu,
            packet_in_rate: 1000,
            packet_in_burst: 100,
            conntrack: Default::default(),
        },
        pool,
        table,
    )
    .expect("datapath");
    let factory = PortFactory::new();
    let ports = [
        PortConfig {
            name: "sink".into(),
            id: 2,
            rxqs: 1,
            kind: PortKind::Sink,
        },
        PortConfig {
            name: "gen".into(),
            id: 1,
            rxqs: 1,
            kind: PortKind::Generator(GeneratorConfig {
                rate_pps: Some(2_000_000),
                ..Default::default()
            }),
        },
    ];
    for c in &ports {
        dp.add_port(c.id, factory.open(c).expect("open port"))
            .expect("add port");
    }
    (dp, factory)
}

fn pmu(dp: &Datapath) -> PmuSnapshot {
    dp.pmd_views()[0].pmu
}

/// Waits for a published snapshot satisfying `cond`.
fn wait_pmu(dp: &Datapath, what: &str, cond: impl Fn(&PmuSnapshot) -> bool) -> PmuSnapshot {
    assert!(
        wait_until(DEADLINE, || cond(&pmu(dp))),
        "{what}: last snapshot {:?}",
        pmu(dp)
    );
    pmu(dp)
}

#[test]
fn pmd_publishes_counters_and_packets_of_one_moment() {
    let _g = serial();
    let (dp, _f) = start("pmu-on", true);
    let first = wait_pmu(&dp, "first reading", |s| s.generation > 0);
    if let Reading::Unsupported(u) = first.get(Event::TaskClock) {
        nfv_testutil::skip(
            "pmd_publishes_counters_and_packets_of_one_moment",
            &format!(
                "perf_event_open unusable here: {}",
                u.reason(Event::TaskClock)
            ),
        );
        return;
    }
    // A later reading, with traffic in between.
    let later = wait_pmu(&dp, "packets and CPU time", |s| {
        s.time_ns > first.time_ns + 200_000_000 && s.packets > first.packets
    });
    let d = later.since(&first);
    assert!(d.secs > 0.1, "{d:?}");
    // The PMD's CPU time moved, and one thread cannot run longer than the
    // wall time between the readings. (How much of it the PMD got depends
    // on what else the machine runs: no share is asserted.)
    let cpu = d.get(Event::TaskClock).value().unwrap() as f64 / 1e9;
    assert!(
        cpu > 0.0 && cpu <= d.secs * 1.05,
        "task-clock {cpu} s over {} s",
        d.secs
    );
    assert!(
        later.packets <= dp.pmd_views()[0].stats.rx_packets,
        "published packets are the PMD's count at the reading"
    );
    for e in Event::ALL {
        match d.get(e) {
            Reading::Value(_) => {}
            Reading::Unsupported(u) => {
                assert!(e.is_hardware(), "{} unsupported: {}", e.name(), u.reason(e));
                eprintln!("{}: {}", e.name(), u.reason(e));
            }
        }
    }
    let m = d.derived();
    assert!(m.context_switches_per_s.value().is_some(), "{m:?}");
    if d.get(Event::Instructions).value().is_some() && d.get(Event::Cycles).value().is_some() {
        let ipc = m.ipc.value().expect("ipc");
        assert!(ipc > 0.05 && ipc < 10.0, "ipc {ipc}");
    } else {
        assert!(m.ipc.reason().is_some());
    }

    // Switched off: every counter says so, at no cost to the PMD.
    dp.set_pmu(false);
    let off = wait_pmu(&dp, "switched off", |s| {
        s.readings
            .iter()
            .all(|r| *r == Reading::Unsupported(Unsupported::Disabled))
    });
    assert!(off.generation > later.generation);
    assert!(
        off.since(&later)
            .derived()
            .ipc
            .reason()
            .unwrap()
            .contains("switched off")
    );

    // On again: fresh counters, a new generation counting from zero.
    dp.set_pmu(true);
    let on = wait_pmu(&dp, "switched on", |s| {
        s.generation > off.generation && s.get(Event::TaskClock).value().is_some()
    });
    assert!(on.time_ns >= on.epoch_ns);

    // clear-stats restarts totals and packets together.
    dp.clear_pmd_stats();
    let cleared = wait_pmu(&dp, "cleared", |s| s.generation > on.generation);
    let since_clear = cleared.since(&on);
    assert_eq!(since_clear.packets, cleared.packets);
    assert!(since_clear.secs <= (cleared.time_ns - on.time_ns) as f64 / 1e9);
    dp.shutdown();
}

#[test]
fn pmu_off_opens_nothing() {
    let _g = serial();
    let (dp, _f) = start("pmu-off", false);
    let s = wait_pmu(&dp, "first reading", |s| s.generation > 0);
    assert!(
        s.readings
            .iter()
            .all(|r| *r == Reading::Unsupported(Unsupported::Disabled)),
        "{s:?}"
    );
    dp.shutdown();
}
