//! The null port with frames through it, in process: its queues on their
//! own, then in a real datapath (a generator's frames out through it,
//! counted on its tx counters; longer than `max_frame`, dropped as
//! `too_big`), and its open errors.
//!
//! There is no peer to test against: a null port reaches nothing outside
//! the switch, so these tests are the whole of it (no mock, no real-peer
//! test, nothing SKIPPED).

use nfv_datapath::{Datapath, DatapathConfig};
use nfv_flow::table::SharedFlowTable;
use nfv_flow::{PortNo, parse_flow};
use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool};
use nfv_null::{NULL, NullConfig, OpenError};
use nfv_ports::config::GeneratorConfig;
use nfv_ports::{
    DropReason, Lenders, NoRoutes, OpenContext, Port, PortConfig, PortFactory, PortKind, PortType,
    Routes,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn pool(name: &str) -> Arc<PacketPool> {
    PacketPool::new(
        name,
        &MemoryConfig {
            frame_size: 2048,
            frames: 4096,
            hugepages: HugepageMode::Never,
        },
    )
    .expect("packet pool")
}

fn null_config(id: PortNo, max_frame: Option<usize>) -> PortConfig {
    PortConfig {
        name: "null0".into(),
        id,
        rxqs: 1,
        kind: PortKind::typed(NullConfig { max_frame }),
    }
}

/// Opens `cfg` the way the node does: through the registered type.
fn open(cfg: &PortConfig, factory: &PortFactory) -> Arc<dyn Port> {
    let memory = MemoryConfig::default();
    let routes: Arc<dyn Routes> = Arc::new(NoRoutes);
    let lenders: Arc<Lenders> = Arc::default();
    let cx = OpenContext {
        memory: &memory,
        factory,
        routes: &routes,
        lenders: &lenders,
    };
    NULL.open(cfg, &cx).expect("open")
}

#[test]
fn queues_take_every_frame_and_receive_none() {
    let pool = pool("null-queues");
    let mut cache = pool.cache();
    let port = open(&null_config(1, None), &PortFactory::new());
    assert_eq!((port.name(), port.type_name()), ("null0", "null"));
    assert!(port.never_receives());
    assert_eq!(
        port.gauges().text("max_frame").as_deref(),
        Some("none (every frame is taken)")
    );
    let mut txq = port.open_txq(0);
    assert_eq!(txq.max_frame(), usize::MAX);
    assert!(txq.takes_split(), "it never reads a frame");
    for round in 0..100 {
        let mut batch = Batch::new();
        for i in 0..32 {
            let mut p = cache.alloc().expect("pool empty");
            p.set_len(60 + (round * 32 + i) % 1800).unwrap();
            batch.push(p);
        }
        assert_eq!(txq.tx_burst(&mut batch, &mut cache), 32);
        assert!(batch.is_empty(), "every frame taken");
    }
    let mut rxq = port.open_rxq(0);
    let mut batch = Batch::new();
    assert_eq!(rxq.rx_burst(&mut batch, &mut cache), 0);
    assert!(batch.is_empty());
    drop(cache);
    assert_eq!(pool.shared_free(), pool.frames(), "every frame back");
}

#[test]
fn max_frame_is_the_queues_limit_and_a_gauge() {
    let port = open(&null_config(1, Some(1518)), &PortFactory::new());
    assert_eq!(port.open_txq(0).max_frame(), 1518);
    assert_eq!(port.gauges().count("max_frame"), Some(1518));
}

#[test]
fn open_refuses_what_the_config_file_would() {
    let err = |cfg: &PortConfig| nfv_null::open(cfg).err().expect("refused");
    let e = err(&null_config(1, Some(10)));
    assert!(matches!(e, OpenError::Config { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "port null0: max_frame 10 is out of range 60..=65535"
    );
    let sink = PortConfig {
        kind: PortKind::Sink,
        ..null_config(1, None)
    };
    assert_eq!(
        err(&sink).to_string(),
        "port null0: not a null port (type sink)"
    );
}

/// Two generators (64-byte and 200-byte frames) into one null port with
/// `max_frame = 128`, one PMD: the short frames are its tx packets and
/// bytes, the long ones its `too_big` drops, nothing else is dropped and
/// the pool gets every frame back.
#[test]
fn datapath_counts_what_it_takes_and_drops_longer_frames_as_too_big() {
    const N: u64 = 3000;
    const M: u64 = 1000;
    const NULL_PORT: PortNo = 3;
    let pool = pool("null-datapath");
    let table = Arc::new(SharedFlowTable::new());
    table.add_flows(
        ["in_port=1,actions=output:3", "in_port=2,actions=output:3"]
            .iter()
            .map(|r| parse_flow(r).unwrap()),
    );
    let cfg = DatapathConfig {
        pmd_cores: vec![None],
        emc_entries: 1024,
        megaflow_entries: 1024,
        pmu: false,
        packet_in_rate: 1000,
        packet_in_burst: 100,
        conntrack: Default::default(),
    };
    let dp = Datapath::start(&cfg, pool.clone(), table).expect("datapath");
    let factory = PortFactory::new();
    let gen_cfg = |name: &str, id, frame_size, count| PortConfig {
        name: name.into(),
        id,
        rxqs: 1,
        kind: PortKind::Generator(GeneratorConfig {
            frame_size,
            count: Some(count),
            ..Default::default()
        }),
    };
    let null = open(&null_config(NULL_PORT, Some(128)), &factory);
    dp.add_port(NULL_PORT, null).expect("add null");
    for g in [gen_cfg("short", 1, 64, N), gen_cfg("long", 2, 200, M)] {
        let port = factory.open(&g).expect("open generator");
        dp.add_port(g.id, port).expect("add generator");
    }
    let stats = dp
        .port_views()
        .into_iter()
        .find(|v| v.no == NULL_PORT)
        .expect("null port")
        .stats;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let tx = stats.tx_total();
        if tx.packets >= N && tx.drops[DropReason::TooBig as usize] >= M {
            break;
        }
        assert!(Instant::now() < deadline, "timed out: {tx:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    dp.shutdown();
    let (tx, rx) = (stats.tx_total(), stats.rx_total());
    assert_eq!((tx.packets, tx.bytes), (N, N * 64), "taken");
    assert_eq!(tx.drops[DropReason::TooBig as usize], M, "too big");
    assert_eq!(tx.total_drops(), M, "no other drop: {tx:?}");
    assert_eq!(rx.packets, 0, "received nothing");
    assert_eq!(pool.shared_free(), pool.frames(), "every frame back");
}
