//! Every shipped example config validates, and the example pcap holds the
//! frames its generator script promises.

use std::path::{Path, PathBuf};

use nfv_ports::config::PortKind;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn example(name: &str) -> nfv_config::NodeConfig {
    let path = examples_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    nfv_config::parse_str(&text, &path, 2).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn every_example_validates() {
    let mut names: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        // `plan-*.toml` describe nodes and services for `nfvswitch plan`,
        // not node configs (crates/cli/tests/plan.rs checks them).
        .filter(|p| {
            !p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("plan-"))
        })
        .collect();
    names.sort();
    assert!(names.len() >= 4, "{names:?}");
    for path in &names {
        let text = std::fs::read_to_string(path).unwrap();
        let c = nfv_config::parse_str(&text, path, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            Some(c.name.as_str()),
            path.file_stem().and_then(|s| s.to_str()),
            "{}",
            path.display()
        );
        assert!(
            !c.ports.is_empty() && (!c.flows.is_empty() || !c.chains.is_empty()),
            "{}",
            path.display()
        );
    }
}

#[test]
fn gen_sink_examples() {
    let c = example("gen-sink.toml");
    assert_eq!(c.pmd.cores, [1]);
    assert_eq!(
        c.control_socket.as_deref(),
        Some(Path::new("/tmp/nfvswitch-gen-sink.sock"))
    );
    let PortKind::Generator(g) = &c.ports[0].kind else {
        panic!()
    };
    assert_eq!((c.ports[0].id, g.frame_size), (1, 64));
    assert_eq!((c.ports[1].id, &c.ports[1].kind), (2, &PortKind::Sink));
    assert_eq!(c.flows.len(), 1);
    assert_eq!(c.flows[0].single_output(), Some(2));

    let big = example("gen-sink-1000-rules.toml");
    assert_eq!(big.flows.len(), 1000);
    assert_eq!(big.ports, c.ports);
    // The 999 extra rules outrank the real one and all differ.
    let real = big.flows.last().unwrap();
    assert_eq!(real, &c.flows[0]);
    assert!(big.flows[..999].iter().all(|f| f.priority > real.priority));
    let mut keys: Vec<_> = big.flows.iter().map(|f| f.matches.key.w).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 1000);
    // None of them matches the generator's traffic.
    let mut k = nfv_flow::FlowKey::ZERO;
    k.set_in_port(1);
    k.set_dl_type(0x0800);
    k.set_nw_proto(17);
    k.set_dl_src(g.src_mac);
    k.set_dl_dst(g.dst_mac);
    k.set_nw_src(g.src_ip.into());
    k.set_nw_dst(g.dst_ip.into());
    k.set_tp_src(g.src_port);
    k.set_tp_dst(g.dst_port);
    assert!(big.flows[..999].iter().all(|f| !f.matches.matches(&k)));
    assert!(real.matches.matches(&k));
}

#[test]
fn ring_and_pcap_examples() {
    let c = example("ring-loopback.toml");
    let rings: Vec<_> = c
        .ports
        .iter()
        .filter(|p| matches!(p.kind, PortKind::Ring(_)))
        .collect();
    assert_eq!(rings.len(), 2);
    let c = example("pcap-replay.toml");
    let PortKind::Pcap(replay) = &c.ports[0].kind else {
        panic!()
    };
    let replay = replay.replay.as_ref().unwrap();
    assert!(
        replay.ends_with("examples/data/udp64.pcap"),
        "{}",
        replay.display()
    );
    assert!(replay.is_file(), "{}", replay.display());
    let PortKind::Pcap(cap) = &c.ports[1].kind else {
        panic!()
    };
    assert_eq!(
        cap.capture.as_deref(),
        Some(Path::new("/tmp/nfvswitch-capture.pcap"))
    );
}

#[test]
fn udp64_pcap_holds_valid_udp_frames() {
    use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
    let file = std::fs::File::open(examples_dir().join("data/udp64.pcap")).unwrap();
    let mut reader = pcap_file::pcap::PcapReader::new(file).unwrap();
    assert_eq!(reader.header().datalink, pcap_file::DataLink::ETHERNET);
    let mut n = 0;
    while let Some(pkt) = reader.next_packet() {
        let pkt = pkt.unwrap();
        assert_eq!(pkt.data.len(), 64);
        let h = PacketHeaders::from_ethernet_slice(&pkt.data).unwrap();
        let Some(NetHeaders::Ipv4(ip, _)) = &h.net else {
            panic!("not IPv4")
        };
        let Some(TransportHeader::Udp(udp)) = &h.transport else {
            panic!("not UDP")
        };
        assert_eq!(ip.header_checksum, ip.calc_header_checksum());
        assert_eq!(
            udp.checksum,
            udp.calc_checksum_ipv4(ip, h.payload.slice()).unwrap()
        );
        assert_eq!((ip.source, ip.destination), ([10, 0, 0, 1], [10, 0, 0, 2]));
        assert_eq!(udp.destination_port, 5001);
        n += 1;
    }
    assert_eq!(n, 4);
}

#[test]
fn vhost_pvp_example() {
    use nfv_vhost::{VhostUserConfig, VhostUserMode};
    let c = example("vhost-pvp.toml");
    let socks: Vec<_> = c
        .ports
        .iter()
        .map(|p| match p.kind.settings::<VhostUserConfig>() {
            Some(v) => {
                assert_eq!(
                    (v.mode, v.queues, v.mrg_rxbuf),
                    (VhostUserMode::Client, 1, true)
                );
                (p.id, v.socket.clone())
            }
            None => panic!("{:?}", p.kind),
        })
        .collect();
    assert_eq!(
        socks,
        [
            (1, PathBuf::from("/tmp/nfvswitch-p1.sock")),
            (2, PathBuf::from("/tmp/nfvswitch-p2.sock"))
        ]
    );
    assert_eq!(c.flows[0].single_output(), Some(2));
    assert_eq!(c.flows[1].single_output(), Some(1));
}
