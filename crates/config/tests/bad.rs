//! Rejected configs (no flow rules involved): each names the line, the
//! field and what is wrong.

mod common;
use common::{Bad, check_all};

const GEN_SINK: &str = r#"[[port]]
name = "gen0"
id = 1
type = "generator"
"#;

#[test]
fn unknown_keys_are_rejected_everywhere() {
    check_all(&[
        Bad {
            name: "top",
            text: "foo = 1\n",
            line: 1,
            field: "foo",
            msg: "unknown field `foo`",
        },
        Bad {
            name: "top table",
            text: "[nodes]\nname = \"x\"\n",
            line: 1,
            field: "nodes",
            msg: "unknown field `nodes`",
        },
        Bad {
            name: "ports typo",
            text: "[[ports]]\nname = \"x\"\n",
            line: 1,
            field: "ports",
            msg: "unknown field `ports`",
        },
        Bad {
            name: "node",
            text: "[node]\nname = \"a\"\ncolour = \"red\"\n",
            line: 3,
            field: "node.colour",
            msg: "unknown field `colour`",
        },
        Bad {
            name: "memory",
            text: "[memory]\n\nframesize = 2048\n",
            line: 3,
            field: "memory.framesize",
            msg: "unknown field",
        },
        Bad {
            name: "pmd",
            text: "[pmd]\ncores = [1]\nstats_interval_ms = 5\n",
            line: 3,
            field: "pmd.stats_interval_ms",
            msg: "unknown field",
        },
        Bad {
            name: "port",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"sink\"\n\n[[port]]\nname = \"b\"\nid = 2\ntype = \"sink\"\nspeed = 10\n",
            line: 10,
            field: "port[1].speed",
            msg: "unknown field `speed`",
        },
        Bad {
            name: "flow table",
            text: "[[flow]]\nrule = \"actions=drop\"\nprio = 1\n",
            line: 3,
            field: "flow[0].prio",
            msg: "unknown field",
        },
        Bad {
            name: "inline table",
            text: "node = { name = \"a\", x = 1 }\n",
            line: 1,
            field: "node.x",
            msg: "unknown field",
        },
    ]);
}

#[test]
fn wrong_types_are_rejected() {
    check_all(&[
        Bad {
            name: "string for int",
            text: "[memory]\nframe_size = \"2048\"\n",
            line: 2,
            field: "memory.frame_size",
            msg: "invalid type: string \"2048\", expected an integer",
        },
        Bad {
            name: "float for int",
            text: "[memory]\nframes = 1e4\n",
            line: 2,
            field: "memory.frames",
            msg: "invalid type",
        },
        Bad {
            name: "int for list",
            text: "[pmd]\ncores = 1\n",
            line: 2,
            field: "pmd.cores",
            msg: "invalid type",
        },
        Bad {
            name: "list item",
            text: "[pmd]\ncores = [0,\n  \"1\"]\n",
            line: 3,
            field: "pmd.cores[1]",
            msg: "invalid type",
        },
        Bad {
            name: "int for name",
            text: "[[port]]\nname = 5\nid = 1\ntype = \"sink\"\n",
            line: 2,
            field: "port[0].name",
            msg: "invalid type",
        },
        Bad {
            name: "hugepages",
            text: "[memory]\nhugepages = \"sometimes\"\n",
            line: 2,
            field: "memory.hugepages",
            msg: "unknown variant `sometimes`",
        },
        Bad {
            name: "port type",
            text: "[[port]]\nname = \"t\"\nid = 1\ntype = \"tun\"\n",
            line: 4,
            field: "port[0].type",
            msg: "unknown variant `tun`",
        },
        Bad {
            name: "node is a table",
            text: "node = \"x\"\n",
            line: 1,
            field: "node",
            msg: "invalid type: string \"x\", expected a table",
        },
        Bad {
            name: "flows not strings",
            text: "flows = [1]\n",
            line: 1,
            field: "flows[0]",
            msg: "invalid type",
        },
        Bad {
            name: "bool for int",
            text: "[[port]]\nname = \"t\"\nid = true\ntype = \"sink\"\n",
            line: 3,
            field: "port[0].id",
            msg: "invalid type",
        },
    ]);
}

#[test]
fn syntax_errors_and_missing_keys() {
    check_all(&[
        Bad {
            name: "unclosed header",
            text: "[node]\nname = \"a\"\n[memory\nframes = 1024\n",
            line: 3,
            field: "",
            msg: "",
        },
        Bad {
            name: "duplicate key",
            text: "[node]\nname = \"a\"\nname = \"b\"\n",
            line: 3,
            field: "",
            msg: "duplicate key",
        },
        Bad {
            name: "missing name",
            text: "[[port]]\nid = 1\ntype = \"sink\"\n",
            line: 1,
            field: "port[0]",
            msg: "missing field `name`",
        },
        Bad {
            name: "missing id",
            text: "[[port]]\nname = \"a\"\ntype = \"sink\"\n",
            line: 1,
            field: "port[0]",
            msg: "missing field `id`",
        },
        Bad {
            name: "missing type",
            text: "[[port]]\nname = \"a\"\nid = 1\n",
            line: 1,
            field: "port[0]",
            msg: "missing field `type`",
        },
        Bad {
            name: "missing rule",
            text: "[[flow]]\n",
            line: 1,
            field: "flow[0]",
            msg: "missing field `rule`",
        },
        Bad {
            name: "flows below a port",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"generator\"\nflows = [\"actions=drop\"]\n",
            line: 5,
            field: "port[0].flows",
            msg: "must come before the first [table]",
        },
    ]);
}

#[test]
fn keys_of_another_port_type_are_rejected() {
    let case = |name, key_line: &'static str, ty: &'static str, field, msg| Bad {
        name,
        text: Box::leak(
            format!("{GEN_SINK}\n[[port]]\nname = \"p\"\nid = 2\ntype = \"{ty}\"\n{key_line}\n")
                .into_boxed_str(),
        ),
        line: 10,
        field,
        msg,
    };
    check_all(&[
        case(
            "rate_pps on sink",
            "rate_pps = 10",
            "sink",
            "port[1].rate_pps",
            "not valid for a port of type \"sink\" (only for type \"generator\" or \"pcap\")",
        ),
        case(
            "frame_size on sink",
            "frame_size = 64",
            "sink",
            "port[1].frame_size",
            "not valid for a port of type \"sink\"",
        ),
        case(
            "peer on pcap",
            "peer = \"gen0\"",
            "pcap",
            "port[1].peer",
            "not valid for a port of type \"pcap\" (only for type \"ring\")",
        ),
        case(
            "replay on ring",
            "replay = \"x.pcap\"",
            "ring",
            "port[1].replay",
            "not valid for a port of type \"ring\"",
        ),
        case(
            "size on generator",
            "size = 1024",
            "generator",
            "port[1].size",
            "type \"generator\"",
        ),
        case(
            "loops on generator",
            "loops = 1",
            "generator",
            "port[1].loops",
            "type \"generator\"",
        ),
        case(
            "src_mac on pcap",
            "src_mac = \"02:00:00:00:00:01\"",
            "pcap",
            "port[1].src_mac",
            "type \"pcap\"",
        ),
        case(
            "count on ring",
            "count = 1",
            "ring",
            "port[1].count",
            "type \"ring\"",
        ),
        case(
            "socket on sink",
            "socket = \"/tmp/x.sock\"",
            "sink",
            "port[1].socket",
            "not valid for a port of type \"sink\" (only for type \"vhost-user\" or \"memif\")",
        ),
        case(
            "queues on ring",
            "queues = 2",
            "ring",
            "port[1].queues",
            "(only for type \"vhost-user\" or \"memif\")",
        ),
        case(
            "mode on generator",
            "mode = \"server\"",
            "generator",
            "port[1].mode",
            "type \"generator\"",
        ),
        case(
            "mrg_rxbuf on pcap",
            "mrg_rxbuf = false",
            "pcap",
            "port[1].mrg_rxbuf",
            "type \"pcap\"",
        ),
        case(
            "peer on vhost-user",
            "peer = \"gen0\"",
            "vhost-user",
            "port[1].peer",
            "not valid for a port of type \"vhost-user\" (only for type \"ring\")",
        ),
        case(
            "rate_pps on vhost-user",
            "rate_pps = 5",
            "vhost-user",
            "port[1].rate_pps",
            "type \"vhost-user\"",
        ),
    ]);
}

#[test]
fn duplicate_ports_and_bad_ring_peers() {
    let ring = |name: &str, id: u16, peer: &str| {
        format!("[[port]]\nname = \"{name}\"\nid = {id}\ntype = \"ring\"\npeer = \"{peer}\"\n")
    };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    check_all(&[
        Bad {
            name: "duplicate name",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"sink\"\n[[port]]\nname = \"a\"\nid = 2\ntype = \"sink\"\n",
            line: 6,
            field: "port[1].name",
            msg: "\"a\" is already the name of port[0] (line 2)",
        },
        Bad {
            name: "duplicate id",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"sink\"\n[[port]]\nname = \"b\"\nid = 1\ntype = \"sink\"\n",
            line: 7,
            field: "port[1].id",
            msg: "1 is already the id of port[0] \"a\" (line 3)",
        },
        Bad {
            name: "no peer",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"ring\"\n",
            line: 1,
            field: "port[0].peer",
            msg: "needs `peer`",
        },
        Bad {
            name: "own peer",
            text: leak(ring("a", 1, "a")),
            line: 5,
            field: "port[0].peer",
            msg: "its own peer",
        },
        Bad {
            name: "unknown peer",
            text: leak(ring("a", 1, "b")),
            line: 5,
            field: "port[0].peer",
            msg: "no port is named \"b\"",
        },
        Bad {
            name: "peer not a ring",
            text: leak(format!(
                "{}[[port]]\nname = \"b\"\nid = 2\ntype = \"sink\"\n",
                ring("a", 1, "b")
            )),
            line: 5,
            field: "port[0].peer",
            msg: "port \"b\" is of type \"sink\", not \"ring\"",
        },
        Bad {
            name: "not reciprocal",
            text: leak(format!(
                "{}{}{}",
                ring("a", 1, "b"),
                ring("b", 2, "c"),
                ring("c", 3, "b")
            )),
            line: 5,
            field: "port[0].peer",
            msg: "ring port \"b\" names \"c\" as its peer, not \"a\"",
        },
        Bad {
            name: "size mismatch",
            text: leak(format!(
                "{}{}size = 64\n",
                ring("a", 1, "b"),
                ring("b", 2, "a")
            )),
            line: 11,
            field: "port[1].size",
            msg: "64 differs from the size of its peer \"a\" (1024)",
        },
        Bad {
            name: "size not pow2",
            text: leak(format!("{}size = 1000\n", ring("a", 1, "b"))),
            line: 6,
            field: "port[0].size",
            msg: "1000 is not a power of two in 32..=65536",
        },
    ]);
}

#[test]
fn zero_copy_must_name_one_vhost_user_port_per_borrower() {
    let xdp = |name: &str, id: u16, iface: &str, target: &str| {
        format!(
            "[[port]]\nname = \"{name}\"\nid = {id}\ntype = \"afxdp\"\niface = \"{iface}\"\n\
             zero_copy = \"{target}\"\n"
        )
    };
    let vnf =
        "[[port]]\nname = \"vnf1\"\nid = 9\ntype = \"vhost-user\"\nsocket = \"/tmp/v.sock\"\n";
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    check_all(&[
        Bad {
            name: "no such port",
            text: leak(xdp("a", 1, "eth0", "vnf9")),
            line: 6,
            field: "port[0].zero_copy",
            msg: "no port is named \"vnf9\"",
        },
        Bad {
            name: "not a vhost-user port",
            text: leak(format!(
                "{}[[port]]\nname = \"s\"\nid = 2\ntype = \"sink\"\n",
                xdp("a", 1, "eth0", "s")
            )),
            line: 6,
            field: "port[0].zero_copy",
            msg: "port[1] \"s\" is of type \"sink\"; zero_copy needs a vhost-user port",
        },
        Bad {
            name: "two borrowers",
            text: leak(format!(
                "{vnf}{}{}",
                xdp("a", 1, "eth0", "vnf1"),
                xdp("b", 2, "eth1", "vnf1")
            )),
            line: 17,
            field: "port[2].zero_copy",
            msg: "port[1] \"a\" already receives into \"vnf1\"'s buffers; one borrower per VNF",
        },
        Bad {
            name: "not a name",
            text: leak(xdp("a", 1, "eth0", "no spaces")),
            line: 6,
            field: "port[0].zero_copy",
            msg: "",
        },
    ]);
}

#[test]
fn out_of_range_values() {
    let gen_key = |name, key: &'static str, field, msg| Bad {
        name,
        text: Box::leak(format!("{GEN_SINK}{key}\n").into_boxed_str()),
        line: 5,
        field,
        msg,
    };
    check_all(&[
        Bad {
            name: "frame_size pow2",
            text: "[memory]\nframe_size = 3000\n",
            line: 2,
            field: "memory.frame_size",
            msg: "3000 is not a power of two in 2048..=65536",
        },
        Bad {
            name: "frame_size small",
            text: "[memory]\nframe_size = 1024\n",
            line: 2,
            field: "memory.frame_size",
            msg: "not a power of two in 2048..=65536",
        },
        Bad {
            name: "frame_size big",
            text: "[memory]\nframe_size = 131072\n",
            line: 2,
            field: "memory.frame_size",
            msg: "in 2048..=65536",
        },
        Bad {
            name: "frames small",
            text: "[memory]\nframes = 1023\n",
            line: 2,
            field: "memory.frames",
            msg: "1023 is out of range 1024..=4194304",
        },
        Bad {
            name: "frames big",
            text: "[memory]\nframes = 4194305\n",
            line: 2,
            field: "memory.frames",
            msg: "out of range",
        },
        Bad {
            name: "emc not pow2",
            text: "[pmd]\nemc_entries = 1000\n",
            line: 2,
            field: "pmd.emc_entries",
            msg: "1000 is not 0 or a power of two in 1..=1048576",
        },
        Bad {
            name: "emc big",
            text: "[pmd]\nemc_entries = 2097152\n",
            line: 2,
            field: "pmd.emc_entries",
            msg: "not 0 or a power of two",
        },
        Bad {
            name: "port id 0",
            text: "[[port]]\nname = \"a\"\nid = 0\ntype = \"sink\"\n",
            line: 3,
            field: "port[0].id",
            msg: "0 is out of range 1..=65279",
        },
        Bad {
            name: "port id reserved",
            text: "[[port]]\nname = \"a\"\nid = 65280\ntype = \"sink\"\n",
            line: 3,
            field: "port[0].id",
            msg: "out of range 1..=65279",
        },
        Bad {
            name: "rxqs 0",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"sink\"\nrxqs = 0\n",
            line: 5,
            field: "port[0].rxqs",
            msg: "0 is out of range 1..=64",
        },
        Bad {
            name: "rxqs 65",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"sink\"\nrxqs = 65\n",
            line: 5,
            field: "port[0].rxqs",
            msg: "out of range 1..=64",
        },
        gen_key(
            "gen frame_size small",
            "frame_size = 63",
            "port[0].frame_size",
            "63 is out of range 64..=9000",
        ),
        gen_key(
            "gen frame_size big",
            "frame_size = 9001",
            "port[0].frame_size",
            "out of range 64..=9000",
        ),
        gen_key(
            "gen frame_size vs memory",
            "frame_size = 1921",
            "port[0].frame_size",
            "1921 does not fit a memory frame of 2048 bytes (128 bytes of headroom leave 1920)",
        ),
        gen_key(
            "gen flows 0",
            "flows = 0",
            "port[0].flows",
            "0 is out of range 1..=1000000",
        ),
        gen_key(
            "gen flows big",
            "flows = 1000001",
            "port[0].flows",
            "out of range",
        ),
        gen_key(
            "gen rate 0",
            "rate_pps = 0",
            "port[0].rate_pps",
            "0 is out of range: must be at least 1",
        ),
        gen_key(
            "gen count 0",
            "count = 0",
            "port[0].count",
            "leave `count` out to send forever",
        ),
        gen_key(
            "gen src_port",
            "src_port = 70000",
            "port[0].src_port",
            "70000 is out of range 0..=65535",
        ),
        gen_key(
            "gen dst_port",
            "dst_port = -1",
            "port[0].dst_port",
            "-1 is out of range",
        ),
        gen_key(
            "gen bad mac",
            "dst_mac = \"02:00:00:00:00\"",
            "port[0].dst_mac",
            "not a MAC address",
        ),
        gen_key(
            "gen multicast src",
            "src_mac = \"01:00:5e:00:00:01\"",
            "port[0].src_mac",
            "multicast",
        ),
        gen_key(
            "gen bad ip",
            "src_ip = \"10.0.0.256\"",
            "port[0].src_ip",
            "not an IPv4 address",
        ),
        gen_key(
            "gen ip is v6",
            "dst_ip = \"::1\"",
            "port[0].dst_ip",
            "not an IPv4 address",
        ),
        gen_key(
            "gen family",
            "family = \"ipv5\"",
            "port[0].family",
            "unknown variant `ipv5`, expected `ipv4` or `ipv6`",
        ),
        gen_key(
            "gen ip6 with ipv4",
            "dst_ip6 = \"fd00::2\"",
            "port[0].dst_ip6",
            "not used with family = \"ipv4\" (its frames take `dst_ip`)",
        ),
        gen_key(
            "gen ip6 is v4",
            "src_ip6 = \"10.0.0.1\"\nfamily = \"ipv6\"",
            "port[0].src_ip6",
            "\"10.0.0.1\" is not an IPv6 address",
        ),
        gen_key(
            "gen ip with ipv6",
            "src_ip = \"10.0.0.1\"\nfamily = \"ipv6\"",
            "port[0].src_ip",
            "not used with family = \"ipv6\" (its frames take `src_ip6`)",
        ),
        gen_key(
            "gen stamp with ipv6",
            "stamp = true\nfamily = \"ipv6\"",
            "port[0].stamp",
            "only written into IPv4 frames",
        ),
        Bad {
            name: "pcap loops",
            text: "[[port]]\nname = \"p\"\nid = 1\ntype = \"pcap\"\nreplay = \"a.pcap\"\nloops = -1\n",
            line: 6,
            field: "port[0].loops",
            msg: "-1 is out of range: must be at least 0",
        },
    ]);
}

/// Started under `taskset -c 1` the process sees one CPU, and it is
/// CPU 1: a core inside the mask is accepted (and is the default), one
/// outside is refused naming the mask.
#[test]
fn pmd_cores_follow_the_affinity_mask_not_the_cpu_count() {
    let path = std::path::Path::new("conf/node.toml");
    let only_1 = || nfv_config::CpuSet::from_ids([1]).unwrap();
    let cfg = nfv_config::parse_str("[pmd]\ncores = [1]\n", path, only_1())
        .unwrap_or_else(|e| panic!("CPU 1 inside the mask was refused: {e}"));
    assert_eq!(cfg.pmd.cores, vec![1]);
    let cfg = nfv_config::parse_str("", path, only_1()).unwrap();
    assert_eq!(cfg.pmd.cores, vec![1], "the default PMD core");
    let split = nfv_config::CpuSet::from_ids([2, 3, 4, 7]).unwrap();
    let e = nfv_config::parse_str("[pmd]\ncores = [3, 5]\n", path, split)
        .expect_err("CPU 5 is outside the mask")
        .to_string();
    assert!(
        e.contains("pmd.cores[1]") && e.contains("CPU 5") && e.contains("allows CPUs 2-4,7"),
        "{e}"
    );
    let e = nfv_config::parse_str("[pmd]\ncores = [0]\n", path, only_1())
        .expect_err("CPU 0 is outside the mask")
        .to_string();
    assert!(e.contains("allows CPUs 1"), "{e}");
}

#[test]
fn pmd_cores_are_checked_against_the_allowed_cpus() {
    check_all(&[
        Bad {
            name: "core = count",
            text: "[pmd]\ncores = [2]\n",
            line: 2,
            field: "pmd.cores[0]",
            msg: "CPU 2 is not one this process may run on: its affinity mask allows CPUs 0-1",
        },
        Bad {
            name: "negative",
            text: "[pmd]\ncores = [0, -1]\n",
            line: 2,
            field: "pmd.cores[1]",
            msg: "CPU -1 is not one this process may run on",
        },
        Bad {
            name: "duplicate",
            text: "[pmd]\ncores = [\n  1,\n  0,\n  1,\n]\n",
            line: 5,
            field: "pmd.cores[2]",
            msg: "CPU 1 is already listed as pmd.cores[0]",
        },
        Bad {
            name: "empty",
            text: "[pmd]\n\ncores = []\n",
            line: 3,
            field: "pmd.cores",
            msg: "lists 0 CPUs; list 1 to 64",
        },
    ]);
    // 65 cores on a machine that has them.
    let many: Vec<String> = (0..65).map(|i| i.to_string()).collect();
    let text = format!("[pmd]\ncores = [{}]\n", many.join(", "));
    let e = nfv_config::parse_str(&text, std::path::Path::new("n.toml"), 128).unwrap_err();
    assert_eq!(
        e.to_string(),
        "n.toml:2: pmd.cores: lists 65 CPUs; list 1 to 64"
    );
}

#[test]
fn node_api_must_be_an_address_or_off() {
    check_all(&[
        Bad {
            name: "api host name",
            text: "[node]\nname = \"n\"\napi = \"example.org:9180\"\n",
            line: 3,
            field: "node.api",
            msg: "\"example.org:9180\" is not an address: give IP:PORT",
        },
        Bad {
            name: "api no port",
            text: "[node]\napi = \"127.0.0.1\"\n",
            line: 2,
            field: "node.api",
            msg: "is not an address",
        },
        Bad {
            name: "api port range",
            text: "[node]\napi = \"127.0.0.1:65536\"\n",
            line: 2,
            field: "node.api",
            msg: "or \"off\"",
        },
        Bad {
            name: "api empty",
            text: "[node]\n\napi = \"\"\n",
            line: 3,
            field: "node.api",
            msg: "\"\" is not an address",
        },
        Bad {
            name: "api boolean",
            text: "[node]\napi = false\n",
            line: 2,
            field: "node.api",
            msg: "invalid type",
        },
    ]);
}

#[test]
fn names_paths_and_pcap_ports() {
    let long_socket: &'static str = Box::leak(
        format!(
            "[node]\ncontrol_socket = \"/tmp/{}.sock\"\n",
            "s".repeat(100)
        )
        .into_boxed_str(),
    );
    check_all(&[
        Bad {
            name: "port name space",
            text: "[[port]]\nname = \"a b\"\nid = 1\ntype = \"sink\"\n",
            line: 2,
            field: "port[0].name",
            msg: "\"a b\" is not a valid name",
        },
        Bad {
            name: "port name empty",
            text: "[[port]]\nname = \"\"\nid = 1\ntype = \"sink\"\n",
            line: 2,
            field: "port[0].name",
            msg: "not a valid name: use 1 to 32",
        },
        Bad {
            name: "port name long",
            text: "[[port]]\nname = \"abcdefghijklmnopqrstuvwxyz0123456\"\nid = 1\ntype = \"sink\"\n",
            line: 2,
            field: "port[0].name",
            msg: "not a valid name",
        },
        Bad {
            name: "node name",
            text: "[node]\nname = \"my node\"\n",
            line: 2,
            field: "node.name",
            msg: "not a valid name: use 1 to 64",
        },
        Bad {
            name: "socket long",
            text: long_socket,
            line: 2,
            field: "node.control_socket",
            msg: "a Unix socket path holds at most 107",
        },
        Bad {
            name: "socket empty",
            text: "[node]\ncontrol_socket = \"\"\n",
            line: 2,
            field: "node.control_socket",
            msg: "the path is empty",
        },
        Bad {
            name: "pcap nothing",
            text: "[[port]]\nname = \"p\"\nid = 1\ntype = \"pcap\"\n",
            line: 1,
            field: "port[0].replay",
            msg: "needs `replay`, `capture` or both",
        },
        Bad {
            name: "pcap loops without replay",
            text: "[[port]]\nname = \"p\"\nid = 1\ntype = \"pcap\"\ncapture = \"o.pcap\"\nloops = 2\n",
            line: 6,
            field: "port[0].loops",
            msg: "only meaningful with `replay`",
        },
        Bad {
            name: "pcap rate without replay",
            text: "[[port]]\nname = \"p\"\nid = 1\ntype = \"pcap\"\ncapture = \"o.pcap\"\nrate_pps = 2\n",
            line: 6,
            field: "port[0].rate_pps",
            msg: "only meaningful with `replay`",
        },
        Bad {
            name: "pcap empty path",
            text: "[[port]]\nname = \"p\"\nid = 1\ntype = \"pcap\"\nreplay = \"\"\n",
            line: 5,
            field: "port[0].replay",
            msg: "the path is empty",
        },
    ]);
}

#[test]
fn a_bad_default_node_name_is_explained() {
    let e = nfv_config::parse_str("", std::path::Path::new("/etc/my node.toml"), 2).unwrap_err();
    assert_eq!(e.line(), Some(1));
    assert_eq!(e.field(), Some("node.name"));
    assert!(e.message().unwrap().contains("set [node] name"), "{e}");
}

#[test]
fn unreadable_files_are_io_errors() {
    let e = nfv_config::load(std::path::Path::new("/nonexistent/node.toml")).unwrap_err();
    assert!(matches!(e, nfv_config::ConfigError::Io { .. }), "{e:?}");
    assert!(e.to_string().starts_with("/nonexistent/node.toml: "), "{e}");
    assert_eq!(e.line(), None);
}

#[test]
fn kernel_ports() {
    let port = |kind: &str, extra: &str| -> &'static str {
        Box::leak(
            format!("[[port]]\nname = \"k\"\nid = 1\ntype = \"{kind}\"\n{extra}").into_boxed_str(),
        )
    };
    check_all(&[
        Bad {
            name: "afxdp without iface",
            text: port("afxdp", "ring_size = 1024\n"),
            line: 1,
            field: "port[0].iface",
            msg: "a port of type \"afxdp\" needs `iface`",
        },
        Bad {
            name: "tap without iface",
            text: port("tap", ""),
            line: 1,
            field: "port[0].iface",
            msg: "a port of type \"tap\" needs `iface`",
        },
        Bad {
            name: "iface too long",
            text: port("afpacket", "iface = \"0123456789abcdef\"\n"),
            line: 5,
            field: "port[0].iface",
            msg: "is not an interface name: 1 to 15 bytes",
        },
        Bad {
            name: "iface with slash",
            text: port("afxdp", "iface = \"eth/0\"\n"),
            line: 5,
            field: "port[0].iface",
            msg: "is not an interface name",
        },
        Bad {
            name: "ring_size not pow2",
            text: port("afxdp", "iface = \"eth0\"\nring_size = 1000\n"),
            line: 6,
            field: "port[0].ring_size",
            msg: "1000 is not a power of two in 64..=16384",
        },
        Bad {
            name: "afpacket ring_size too big",
            text: port("afpacket", "iface = \"eth0\"\nring_size = 131072\n"),
            line: 6,
            field: "port[0].ring_size",
            msg: "131072 is not a power of two in 64..=65536",
        },
        Bad {
            name: "xdp_mode",
            text: port("afxdp", "iface = \"eth0\"\nxdp_mode = \"native\"\n"),
            line: 6,
            field: "port[0].xdp_mode",
            msg: "unknown variant `native`, expected one of `auto`, `copy`, `zero-copy`",
        },
        Bad {
            name: "xdp_mode on afpacket",
            text: port("afpacket", "iface = \"eth0\"\nxdp_mode = \"copy\"\n"),
            line: 6,
            field: "port[0].xdp_mode",
            msg: "not valid for a port of type \"afpacket\" (only for type \"afxdp\")",
        },
        Bad {
            name: "ring_size on tap",
            text: port("tap", "iface = \"tap0\"\nring_size = 64\n"),
            line: 6,
            field: "port[0].ring_size",
            msg: "(only for type \"afxdp\" or \"afpacket\" or \"memif\" or \"vxlan\")",
        },
        Bad {
            name: "iface on sink",
            text: port("sink", "iface = \"eth0\"\n"),
            line: 5,
            field: "port[0].iface",
            msg: "not valid for a port of type \"sink\"",
        },
        Bad {
            name: "same iface twice",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"afxdp\"\niface = \"eth0\"\n\
                   [[port]]\nname = \"b\"\nid = 2\ntype = \"afpacket\"\niface = \"eth0\"\n",
            line: 10,
            field: "port[1].iface",
            msg: "interface \"eth0\" is already used by port[0] \"a\"",
        },
    ]);
}
