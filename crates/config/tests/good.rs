//! Accepted configs (no flow rules involved): values and defaults.

mod common;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use nfv_afpacket::AfPacketConfig;
use nfv_afxdp::{AfXdpConfig, SendInPlace, XdpBindMode};
use nfv_config::{NodeConfig, PmdConfig, parse_port_table, parse_str};
use nfv_mem::{HugepageMode, MemoryConfig};
use nfv_memif::MemifConfig;
use nfv_ports::config::{GeneratorConfig, IpFamily, PcapConfig, PortConfig, PortKind, RingConfig};
use nfv_tap::TapConfig;
use nfv_vhost::{VhostUserConfig, VhostUserMode};

fn parse(text: &str) -> NodeConfig {
    common::parse(text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn an_empty_file_gets_every_default() {
    let c = parse("");
    assert_eq!(
        c,
        NodeConfig {
            source: PathBuf::from("conf/node.toml"),
            name: "node".into(),
            control_socket: None,
            api: Some(nfv_config::DEFAULT_API),
            state_file: None,
            access: Default::default(),
            memory: MemoryConfig::default(),
            pmd: PmdConfig::default_for(2),
            ports: vec![],
            flows: vec![],
            groups: vec![],
            meters: vec![],
            chains: vec![],
            // No listener; the id the name "node" gives (FNV-1a, 48 bits).
            openflow: nfv_config::OpenFlowConfig {
                listen: vec![],
                datapath_id: c.openflow.datapath_id,
                packet_in_rate: 1000,
                packet_in_burst: 100,
                controllers: vec![],
                fail_mode: Default::default(),
                tls: None,
            },
            conntrack: nfv_conntrack::Config {
                capacity: 262_144,
                ..Default::default()
            },
        }
    );
    assert_ne!(c.openflow.datapath_id, 0);
    assert_eq!(c.openflow.datapath_id >> 48, 0);
    // The default PMD core is the last CPU.
    let c = parse_str("", Path::new("n.toml"), 8).unwrap();
    assert_eq!(c.pmd.cores, [7]);
    let c = parse_str("", Path::new("n.toml"), 1).unwrap();
    assert_eq!(c.pmd.cores, [0]);
    // No file stem: a fixed name.
    let c = parse_str("", Path::new(""), 1).unwrap();
    assert_eq!(c.name, "nfvswitch");
}

#[test]
fn node_api_takes_addresses_localhost_port_zero_and_off() {
    let api = |v: &str| parse(&format!("[node]\napi = {v:?}\n")).api;
    let addr = |s: &str| Some(s.parse::<std::net::SocketAddr>().unwrap());
    assert_eq!(parse("").api, addr("127.0.0.1:9180"));
    assert_eq!(api("[::1]:9180"), addr("[::1]:9180"));
    assert_eq!(api("127.0.0.1:0"), addr("127.0.0.1:0"));
    assert_eq!(api("localhost:9100"), addr("127.0.0.1:9100"));
    assert_eq!(api("off"), None);
    // The same syntax as `nfvswitch run --api`.
    assert_eq!(nfv_config::parse_api_addr("off"), Ok(None));
    // Loopback only (no TLS): refused, saying why.
    for outside in ["10.1.2.3:80", "0.0.0.0:9180", "[::]:9180"] {
        let e = nfv_config::parse_api_addr(outside).unwrap_err();
        assert!(e.contains("loopback"), "{outside}: {e}");
    }
}

#[test]
fn every_section_and_key_is_read() {
    let c = parse(
        r#"
[node]
name = "edge-1"
control_socket = "/run/nfv.sock"

[memory]
frame_size = 4096
frames = 1024
hugepages = "require"

[pmd]
cores = [1, 0]
emc_entries = 0
pmu = false

[[port]]
name = "gen0"
id = 1
type = "generator"
rxqs = 2
frame_size = 3968
flows = 1000
rate_pps = 1000000
count = 5000
src_mac = "02:aa:bb:cc:dd:01"
dst_mac = "ff:ff:ff:ff:ff:ff"
src_ip = "192.168.1.1"
dst_ip = "192.168.1.2"
src_port = 0
dst_port = 65535

[[port]]
name = "sink.0"
id = 65279
type = "sink"

[[port]]
name = "pcap_0"
id = 3
type = "pcap"
replay = "in.pcap"
capture = "/tmp/out.pcap"
loops = 0
rate_pps = 10

[[port]]
name = "ring-a"
id = 4
type = "ring"
peer = "ring-b"
size = 32

[[port]]
name = "ring-b"
id = 5
type = "ring"
peer = "ring-a"
size = 32
"#,
    );
    assert_eq!(c.name, "edge-1");
    assert_eq!(
        c.control_socket.as_deref(),
        Some(Path::new("/run/nfv.sock"))
    );
    assert_eq!(
        c.memory,
        MemoryConfig {
            frame_size: 4096,
            frames: 1024,
            hugepages: HugepageMode::Require
        }
    );
    assert_eq!(
        c.pmd,
        PmdConfig {
            cores: vec![1, 0],
            emc_entries: 0,
            pmu: false,
            ..PmdConfig::default_for(2)
        }
    );
    assert_eq!(
        c.ports,
        [
            PortConfig {
                name: "gen0".into(),
                id: 1,
                rxqs: 2,
                kind: PortKind::Generator(GeneratorConfig {
                    frame_size: 3968,
                    imix: false,
                    flows: 1000,
                    flow_order: Default::default(),
                    rate_pps: Some(1_000_000),
                    rate_percent: None,
                    line_rate_gbps: 10.0,
                    stamp: false,
                    count: Some(5000),
                    src_mac: [0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0x01],
                    dst_mac: [0xff; 6],
                    src_ip: Ipv4Addr::new(192, 168, 1, 1),
                    dst_ip: Ipv4Addr::new(192, 168, 1, 2),
                    family: IpFamily::Ipv4,
                    src_ip6: GeneratorConfig::default().src_ip6,
                    dst_ip6: GeneratorConfig::default().dst_ip6,
                    src_port: 0,
                    dst_port: 65535,
                }),
            },
            PortConfig {
                name: "sink.0".into(),
                id: 65279,
                rxqs: 1,
                kind: PortKind::Sink
            },
            PortConfig {
                name: "pcap_0".into(),
                id: 3,
                rxqs: 1,
                kind: PortKind::Pcap(PcapConfig {
                    // Relative to the config file's directory.
                    replay: Some(PathBuf::from("conf/in.pcap")),
                    capture: Some(PathBuf::from("/tmp/out.pcap")),
                    loops: 0,
                    rate_pps: Some(10),
                }),
            },
            PortConfig {
                name: "ring-a".into(),
                id: 4,
                rxqs: 1,
                kind: PortKind::Ring(RingConfig {
                    peer: "ring-b".into(),
                    size: 32
                }),
            },
            PortConfig {
                name: "ring-b".into(),
                id: 5,
                rxqs: 1,
                kind: PortKind::Ring(RingConfig {
                    peer: "ring-a".into(),
                    size: 32
                }),
            },
        ]
    );
}

#[test]
fn port_defaults() {
    let c = parse(
        r#"
[[port]]
name = "g"
id = 1
type = "generator"

[[port]]
name = "cap"
id = 2
type = "pcap"
capture = "out.pcap"

[[port]]
name = "ra"
id = 3
type = "ring"
peer = "rb"

[[port]]
name = "rb"
id = 4
type = "ring"
peer = "ra"
"#,
    );
    assert_eq!(
        c.ports[0].kind,
        PortKind::Generator(GeneratorConfig::default())
    );
    assert_eq!(
        c.ports[1].kind,
        PortKind::Pcap(PcapConfig {
            replay: None,
            capture: Some("conf/out.pcap".into()),
            loops: 1,
            rate_pps: None
        })
    );
    assert_eq!(
        c.ports[2].kind,
        PortKind::Ring(RingConfig {
            peer: "rb".into(),
            size: 1024
        })
    );
    assert!(c.ports.iter().all(|p| p.rxqs == 1));
}

#[test]
fn generator_family_ipv6_takes_its_own_addresses() {
    let c = parse(
        "[[port]]\nname = \"g\"\nid = 1\ntype = \"generator\"\nfamily = \"ipv6\"\n\
         src_ip6 = \"2001:db8::10\"\ndst_ip6 = \"2001:db8::20\"\nflows = 100\n\
         [[port]]\nname = \"h\"\nid = 2\ntype = \"generator\"\nfamily = \"ipv6\"\n",
    );
    let PortKind::Generator(g) = &c.ports[0].kind else {
        panic!()
    };
    assert_eq!(
        (g.family, g.src_ip6, g.dst_ip6, g.flows),
        (
            IpFamily::Ipv6,
            "2001:db8::10".parse().unwrap(),
            "2001:db8::20".parse().unwrap(),
            100
        )
    );
    // The defaults, fd00::1 -> fd00::2.
    assert_eq!(
        c.ports[1].kind,
        PortKind::Generator(GeneratorConfig {
            family: IpFamily::Ipv6,
            ..Default::default()
        })
    );
    let PortKind::Generator(g) = &c.ports[1].kind else {
        panic!()
    };
    assert_eq!(g.src_ip6.to_string(), "fd00::1");
    assert_eq!(g.dst_ip6.to_string(), "fd00::2");
}

#[test]
fn limits_are_inclusive() {
    let c = parse(
        "[memory]\nframe_size = 65536\nframes = 4194304\nhugepages = \"never\"\n\
         [pmd]\nemc_entries = 1048576\ncores = [0, 1]\n\
         [[port]]\nname = \"abcdefghijklmnopqrstuvwxyz012345\"\nid = 1\ntype = \"generator\"\n\
         frame_size = 9000\nflows = 1000000\nrxqs = 64\n",
    );
    assert_eq!(c.memory.frame_size, 65536);
    assert_eq!(c.memory.frames, 4_194_304);
    assert_eq!(c.memory.hugepages, HugepageMode::Never);
    assert_eq!(c.pmd.emc_entries, 1 << 20);
    let PortKind::Generator(g) = &c.ports[0].kind else {
        panic!()
    };
    assert_eq!(
        (g.frame_size, g.flows, c.ports[0].rxqs),
        (9000, 1_000_000, 64)
    );
    // The largest generator frame that fits a 2048-byte buffer.
    let c = parse("[[port]]\nname = \"g\"\nid = 1\ntype = \"generator\"\nframe_size = 1920\n");
    let PortKind::Generator(g) = &c.ports[0].kind else {
        panic!()
    };
    assert_eq!(g.frame_size, 1920);
}

#[test]
fn inline_tables_and_dotted_keys_are_plain_toml() {
    let c = parse(
        "node = { name = \"n1\" }\nmemory.frames = 2048\nport = [{ name = \"s\", id = 7, type = \"sink\" }]\n",
    );
    assert_eq!(c.name, "n1");
    assert_eq!(c.memory.frames, 2048);
    assert_eq!(c.ports[0].id, 7);
}

#[test]
fn load_reads_a_file() {
    let dir = std::env::temp_dir().join(format!("nfv-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("edge.toml");
    let mine = nfv_config::CpuSet::of_this_process();
    std::fs::write(
        &file,
        format!(
            "[[port]]\nname = \"s\"\nid = 1\ntype = \"sink\"\n[pmd]\ncores = [{}]\n",
            mine.ids()[0]
        ),
    )
    .unwrap();
    let c = nfv_config::load(&file).unwrap();
    assert_eq!(c.name, "edge");
    assert_eq!(c.source, file);
    std::fs::write(&file, "[pmd]\ncores = [100000]\n").unwrap();
    let e = nfv_config::load(&file).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!(
            "{}:2: pmd.cores[0]: CPU 100000 is not one this process may run on: \
             its affinity mask allows CPUs {mine}",
            file.display()
        )),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn port_tables_for_add_port() {
    let mem = MemoryConfig::default();
    let sink = PortConfig {
        name: "s2".into(),
        id: 3,
        rxqs: 1,
        kind: PortKind::Sink,
    };
    for text in [
        r#"name="s2",id=3,type="sink""#,
        r#"{ name = "s2", id = 3, type = "sink" }"#,
        "  {name=\"s2\", id=3, type=\"sink\"}  ",
        "name = \"s2\",\n id = 3,\n type = \"sink\",",
    ] {
        assert_eq!(
            parse_port_table(text, &mem).unwrap_or_else(|e| panic!("{text}: {e}")),
            sink,
            "{text}"
        );
    }
    let g = parse_port_table(
        r#"name="g",id=9,type="generator",frame_size=128,rate_pps=1000"#,
        &mem,
    )
    .unwrap();
    let PortKind::Generator(g) = g.kind else {
        panic!()
    };
    assert_eq!((g.frame_size, g.rate_pps), (128, Some(1000)));
    // Relative paths become absolute.
    let p = parse_port_table(r#"name="p",id=9,type="pcap",capture="x.pcap""#, &mem).unwrap();
    let PortKind::Pcap(p) = p.kind else { panic!() };
    assert_eq!(
        p.capture,
        Some(std::env::current_dir().unwrap().join("x.pcap"))
    );
    // A ring end on its own is accepted; its peer is the caller's to check.
    let r = parse_port_table(r#"name="ra",id=9,type="ring",peer="rb""#, &mem).unwrap();
    assert_eq!(
        r.kind,
        PortKind::Ring(RingConfig {
            peer: "rb".into(),
            size: 1024
        })
    );
}

#[test]
fn port_table_errors_name_the_bare_key() {
    let mem = MemoryConfig::default();
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            r#"name="s2",id=3,type="sink",rate_pps=5"#,
            1,
            "rate_pps",
            "not valid for a port of type \"sink\"",
        ),
        (
            r#"name="s2",id=3,type="sink",speed=5"#,
            1,
            "speed",
            "unknown field `speed`",
        ),
        (r#"name="s2",id=3"#, 1, "", "missing field `type`"),
        (
            r#"name="s2",id=0,type="sink""#,
            1,
            "id",
            "0 is out of range 1..=65279",
        ),
        (
            "name=\"g\",\nid=3,\ntype=\"generator\",\nframe_size=2000",
            4,
            "frame_size",
            "does not fit a memory frame",
        ),
        (r#"name="s2",id=3,type="sink"} x = {"#, 1, "", ""),
        (r#"name="s2" id=3"#, 1, "", ""),
    ];
    for &(text, line, field, msg) in cases {
        let e = parse_port_table(text, &mem).expect_err(text);
        let shown = e.to_string();
        assert_eq!(
            (e.line(), e.field()),
            (Some(line), Some(field)),
            "{text}: {shown}"
        );
        assert!(e.message().unwrap().contains(msg), "{text}: {shown}");
        assert!(shown.starts_with("<inline port>:"), "{shown}");
    }
    // Generator frames are checked against the memory given.
    let big = MemoryConfig {
        frame_size: 4096,
        ..MemoryConfig::default()
    };
    assert!(parse_port_table("name=\"g\",id=3,type=\"generator\",frame_size=2000", &big).is_ok());
}

#[test]
fn vhost_user_ports() {
    let c = parse(
        r#"
[[port]]
name = "vm1"
id = 1
type = "vhost-user"
socket = "/tmp/vm1.sock"

[[port]]
name = "vm2"
id = 2
type = "vhost-user"
socket = "vm2.sock"
mode = "server"
queues = 16
mrg_rxbuf = false
packed_ring = false
tso = false
uso = false
max_guest_memory_gib = 64
mtu = 1500
"#,
    );
    assert_eq!(
        c.ports[0],
        PortConfig {
            name: "vm1".into(),
            id: 1,
            rxqs: 1,
            kind: PortKind::typed(VhostUserConfig {
                socket: "/tmp/vm1.sock".into(),
                mode: VhostUserMode::Client,
                queues: 1,
                mrg_rxbuf: true,
                tx_retries: VhostUserConfig::DEFAULT_TX_RETRIES,
                one_copy: true,
                packed_ring: true,
                offloads: nfv_vhost::Offloads::ALL,
                max_guest_memory: nfv_vhost::DEFAULT_MAX_GUEST_MEMORY,
                mtu: None,
            }),
        }
    );
    // Relative to the config file; rx queues follow `queues`.
    assert_eq!(
        c.ports[1],
        PortConfig {
            name: "vm2".into(),
            id: 2,
            rxqs: 16,
            kind: PortKind::typed(VhostUserConfig {
                socket: "conf/vm2.sock".into(),
                mode: VhostUserMode::Server,
                queues: 16,
                mrg_rxbuf: false,
                tx_retries: VhostUserConfig::DEFAULT_TX_RETRIES,
                one_copy: true,
                packed_ring: false,
                offloads: nfv_vhost::Offloads {
                    tso: false,
                    uso: false,
                    ..nfv_vhost::Offloads::ALL
                },
                max_guest_memory: 64 << 30,
                mtu: Some(1500),
            }),
        }
    );
    assert_eq!(c.ports[1].kind.type_name(), "vhost-user");
    let mem = MemoryConfig::default();
    let p = parse_port_table(
        r#"name="v",id=9,type="vhost-user",socket="/tmp/v.sock",queues=2"#,
        &mem,
    )
    .unwrap();
    assert_eq!(p.rxqs, 2);
    let e = parse_port_table(r#"name="v",id=9,type="vhost-user",mode="client""#, &mem).unwrap_err();
    assert_eq!(e.field(), Some("socket"), "{e}");
}

#[test]
fn memif_ports() {
    let c = parse(
        r#"
[[port]]
name = "m1"
id = 1
type = "memif"
socket = "/run/m1.sock"

[[port]]
name = "m2"
id = 2
type = "memif"
socket = "@/run/memif.sock"
role = "server"
interface_id = 7
secret = "s3cr3t"
queues = 2

[[port]]
name = "m3"
id = 3
type = "memif"
socket = "/run/vnf3/memif.sock"
role = "client"
ring_size = 256
buffer_size = 9216
"#,
    );
    let m = |p: &PortConfig| p.kind.settings::<MemifConfig>().cloned();
    assert_eq!(m(&c.ports[0]), Some(MemifConfig::new("/run/m1.sock")));
    assert_eq!(c.ports[0].kind.type_name(), "memif");
    assert_eq!(
        m(&c.ports[1]),
        Some(MemifConfig {
            socket: "@/run/memif.sock".into(),
            id: 7,
            secret: Some("s3cr3t".into()),
            queues: 2,
            ..MemifConfig::new("")
        })
    );
    assert_eq!(c.ports[1].rxqs, 2);
    assert_eq!(
        m(&c.ports[2]),
        Some(MemifConfig {
            role: nfv_memif::MemifRole::Client,
            ring_size: 256,
            buffer_size: 9216,
            ..MemifConfig::new("/run/vnf3/memif.sock")
        })
    );
}

#[test]
fn memif_servers_share_a_socket_by_interface_id() {
    let c = parse(
        r#"
[[port]]
name = "m1"
id = 1
type = "memif"
socket = "/run/memif.sock"
interface_id = 1

[[port]]
name = "m2"
id = 2
type = "memif"
socket = "/run/memif.sock"
interface_id = 2
"#,
    );
    assert_eq!(c.ports.len(), 2);
}

#[test]
fn kernel_ports() {
    let c = parse(
        r#"
[[port]]
name = "nic0"
id = 1
type = "afxdp"
iface = "eth0"
rxqs = 2

[[port]]
name = "nic1"
id = 2
type = "afxdp"
iface = "eth1"
xdp_mode = "zero-copy"
ring_size = 4096
zero_copy = "auto"
send_in_place = "off"
zero_copy_min_frame = 0

[[port]]
name = "raw"
id = 3
type = "afpacket"
iface = "veth-a.10"
ring_size = 1024

[[port]]
name = "host"
id = 4
type = "tap"
iface = "nfvtap0"
"#,
    );
    let kinds: Vec<(usize, &PortKind)> = c.ports.iter().map(|p| (p.rxqs, &p.kind)).collect();
    assert_eq!(
        kinds,
        [
            (
                2,
                &PortKind::typed(AfXdpConfig {
                    iface: "eth0".into(),
                    mode: XdpBindMode::Auto,
                    ring_size: 2048,
                    zero_copy: nfv_afxdp::ZeroCopy::Off,
                    send_in_place: SendInPlace::Auto,
                    zero_copy_min_frame: 224,
                })
            ),
            (
                1,
                &PortKind::typed(AfXdpConfig {
                    iface: "eth1".into(),
                    mode: XdpBindMode::ZeroCopy,
                    ring_size: 4096,
                    zero_copy: nfv_afxdp::ZeroCopy::Auto,
                    send_in_place: SendInPlace::Off,
                    zero_copy_min_frame: 0,
                })
            ),
            (
                1,
                &PortKind::typed(AfPacketConfig {
                    iface: "veth-a.10".into(),
                    ring_size: 1024,
                })
            ),
            (
                1,
                &PortKind::typed(TapConfig {
                    iface: "nfvtap0".into(),
                })
            ),
        ]
    );
    let names: Vec<&str> = c.ports.iter().map(|p| p.kind.type_name()).collect();
    assert_eq!(names, ["afxdp", "afxdp", "afpacket", "tap"]);
}

#[test]
fn access_keys_are_read_and_checked() {
    let c = parse(
        r#"
[node]
api_token_file = "secret/token"
api_hosts = ["Node1.Example", "10.0.0.5"]
api_open_reads = false
socket_dir = "/run/nfvswitch/pods"
pcap_dir = "pcap"
runtime_kernel_ports = true
group = "nfvswitch"
"#,
    );
    assert_eq!(
        c.access,
        nfv_config::AccessConfig {
            api_token_file: Some(PathBuf::from("conf/secret/token")),
            api_hosts: vec!["node1.example".into(), "10.0.0.5".into()],
            api_open_reads: Some(false),
            socket_dir: Some(PathBuf::from("/run/nfvswitch/pods")),
            pcap_dir: Some(PathBuf::from("conf/pcap")),
            runtime_kernel_ports: true,
            group: Some("nfvswitch".into()),
        }
    );
    let bad = |text: &str, field: &str| {
        let e = common::parse(text).expect_err(text).to_string();
        assert!(e.contains(field), "{text}: {e}");
    };
    bad(
        "[node]\napi_hosts = [\"evil.example:80\"]\n",
        "node.api_hosts[0]",
    );
    bad("[node]\napi_hosts = [\"\"]\n", "node.api_hosts[0]");
    bad("[node]\ngroup = \"a b\"\n", "node.group");
    bad(
        &format!("[node]\nsocket_dir = \"/{}\"\n", "d".repeat(100)),
        "node.socket_dir",
    );
    bad("[node]\napi = \"0.0.0.0:9180\"\n", "loopback");
    bad("[node]\napi_tls_cert = \"c.pem\"\n", "api_tls_cert");
}
