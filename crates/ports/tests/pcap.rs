//! The pcap port: what is transmitted to it lands in a classic pcap file
//! that our reader, and tshark when installed, read back byte-exact; a
//! replayed file comes back out as the same frames.

use nfv_mem::{Batch, HugepageMode, MemoryConfig, PacketPool};
use nfv_ports::PortFactory;
use nfv_ports::config::{GeneratorConfig, PcapConfig, PortConfig, PortKind};
use std::process::Command;

fn frames() -> Vec<Vec<u8>> {
    [60usize, 64, 333, 1514]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let cfg = GeneratorConfig {
                frame_size: n.max(64),
                flows: 4,
                ..Default::default()
            };
            let t = nfv_ports::generator::template(&cfg);
            let mut f = t.clone();
            nfv_ports::generator::stamp_flow(&mut f, &t, &cfg, i as u32);
            f.truncate(n);
            f
        })
        .collect()
}

fn capture_then_replay(dir: &std::path::Path) -> (std::path::PathBuf, Vec<Vec<u8>>) {
    let pool = PacketPool::new(
        "pcap-test",
        &MemoryConfig {
            frame_size: 2048,
            frames: 256,
            hugepages: HugepageMode::Never,
        },
    )
    .unwrap();
    let mut cache = pool.cache();
    let path = dir.join("out.pcap");
    let factory = PortFactory::new();
    let cap = factory
        .open(&PortConfig {
            name: "cap".into(),
            id: 1,
            rxqs: 1,
            kind: PortKind::Pcap(PcapConfig {
                capture: Some(path.clone()),
                loops: 1,
                ..Default::default()
            }),
        })
        .unwrap();
    let mut txq = cap.open_txq(0);
    let mut batch = Batch::new();
    for f in frames() {
        let mut p = cache.alloc().unwrap();
        p.set_len(f.len()).unwrap();
        p.data_mut().copy_from_slice(&f);
        batch.push(p);
    }
    assert_eq!(txq.tx_burst(&mut batch, &mut cache), 4);
    drop(txq);
    drop(cap); // flushes

    // Replay what was captured, twice.
    let rep = factory
        .open(&PortConfig {
            name: "rep".into(),
            id: 2,
            rxqs: 1,
            kind: PortKind::Pcap(PcapConfig {
                replay: Some(path.clone()),
                loops: 2,
                ..Default::default()
            }),
        })
        .unwrap();
    let mut rxq = rep.open_rxq(0);
    let mut got = Vec::new();
    loop {
        let mut b = Batch::new();
        if rxq.rx_burst(&mut b, &mut cache) == 0 {
            break;
        }
        for p in b.drain(..) {
            got.push(p.data().to_vec());
            cache.free(p);
        }
    }
    (path, got)
}

#[test]
fn capture_is_read_back_by_our_reader_and_replays_exactly() {
    let dir = std::env::temp_dir().join(format!("nfv-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (path, replayed) = capture_then_replay(&dir);
    let expected = frames();
    assert_eq!(nfv_ports::pcap::read_frames(&path).unwrap(), expected);
    assert_eq!(
        replayed,
        [expected.clone(), expected].concat(),
        "2 loops of the 4 frames"
    );

    // tshark, the tool operators use, must read the capture too.
    match nfv_testutil::which("tshark") {
        None => nfv_testutil::skip(
            "capture_is_read_back_by_tshark",
            "tshark not installed (scripts/test installs it as root with apt)",
        ),
        Some(tshark) => {
            let out = Command::new(tshark)
                .args(["-r"])
                .arg(&path)
                .args([
                    "-T",
                    "fields",
                    "-e",
                    "frame.len",
                    "-e",
                    "ip.src",
                    "-e",
                    "udp.srcport",
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "tshark: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let lens: Vec<&str> = text
                .lines()
                .map(|l| l.split('\t').next().unwrap_or(""))
                .collect();
            assert_eq!(lens, ["60", "64", "333", "1514"], "{text}");
            assert!(text.lines().all(|l| l.contains("10.0.0.1")), "{text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_replay_file_is_a_clear_error() {
    let err = PortFactory::new()
        .open(&PortConfig {
            name: "rep".into(),
            id: 2,
            rxqs: 1,
            kind: PortKind::Pcap(PcapConfig {
                replay: Some("/nonexistent/x.pcap".into()),
                loops: 1,
                ..Default::default()
            }),
        })
        .err()
        .expect("opened a missing file");
    let msg = err.to_string();
    assert!(
        msg.contains("rep") && msg.contains("/nonexistent/x.pcap"),
        "{msg}"
    );
}
