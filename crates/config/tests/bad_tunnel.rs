//! Rejected `vxlan` port tables: each error names the line, the field and
//! what is wrong.

mod common;
use common::{Bad, check_all, parse};

/// A vxlan port table: line 1 is `[[port]]`, the keys from line 5 on.
macro_rules! vxlan {
    ($keys:expr) => {
        concat!("[[port]]\nname = \"vx\"\nid = 1\ntype = \"vxlan\"\n", $keys)
    };
}

const GOOD: &str =
    "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 100\n";

#[test]
fn a_minimal_tunnel_validates() {
    let text = format!("{}{GOOD}", vxlan!(""));
    let c = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let v = c.ports[0]
        .kind
        .settings::<nfv_vxlan::VxlanConfig>()
        .unwrap();
    assert_eq!(
        (v.vni, v.dst_port, v.ttl, v.dont_fragment),
        (100, 4789, 64, true)
    );
    assert_eq!((v.src_port_min, v.src_port_max), (32768, 61000));
    assert_eq!(v.next_hop(), v.remote_ip);
}

#[test]
fn bad_tunnels_are_rejected() {
    check_all(&[
        Bad {
            name: "no underlay",
            text: vxlan!("local_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 1\n"),
            line: 1,
            field: "port[0].underlay",
            msg: "needs `underlay`",
        },
        Bad {
            name: "underlay name too long",
            text: vxlan!("underlay = \"a-very-long-interface\"\n"),
            line: 5,
            field: "port[0].underlay",
            msg: "is not an interface name",
        },
        Bad {
            name: "no remote",
            text: vxlan!("underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nvni = 1\n"),
            line: 1,
            field: "port[0].remote_ip",
            msg: "needs `remote_ip`",
        },
        Bad {
            name: "remote not an address",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2\"\nvni = 1\n"
            ),
            line: 7,
            field: "port[0].remote_ip",
            msg: "not an IPv4 address",
        },
        Bad {
            name: "multicast remote",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"239.1.1.1\"\nvni = 1\n"
            ),
            line: 7,
            field: "port[0].remote_ip",
            msg: "not a unicast address",
        },
        Bad {
            name: "remote is local",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.1\"\nvni = 1\n"
            ),
            line: 7,
            field: "port[0].remote_ip",
            msg: "is also local_ip",
        },
        Bad {
            name: "no VNI",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\n"
            ),
            line: 1,
            field: "port[0].vni",
            msg: "needs `vni`",
        },
        Bad {
            name: "VNI over 24 bits",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 16777216\n"
            ),
            line: 8,
            field: "port[0].vni",
            msg: "16777216",
        },
        Bad {
            name: "source ports reversed",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 1\nsrc_port_min = 50000\nsrc_port_max = 40000\n"
            ),
            line: 10,
            field: "port[0].src_port_max",
            msg: "below src_port_min",
        },
        Bad {
            name: "TTL zero",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 1\nttl = 0\n"
            ),
            line: 9,
            field: "port[0].ttl",
            msg: "0",
        },
        Bad {
            name: "gateway is us",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"198.51.100.2\"\nvni = 1\ngateway = \"192.0.2.1\"\n"
            ),
            line: 9,
            field: "port[0].gateway",
            msg: "is local_ip",
        },
        Bad {
            name: "multicast source MAC",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 1\nlocal_mac = \"01:00:5e:00:00:01\"\n"
            ),
            line: 9,
            field: "port[0].local_mac",
            msg: "must be unicast",
        },
        Bad {
            name: "ARP ageing over an hour",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 1\narp_ageing_s = 7200\n"
            ),
            line: 9,
            field: "port[0].arp_ageing_s",
            msg: "7200",
        },
        Bad {
            name: "an afpacket key",
            text: vxlan!(
                "underlay = \"eth1\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.2\"\nvni = 1\niface = \"eth1\"\n"
            ),
            line: 9,
            field: "port[0].iface",
            msg: "",
        },
    ]);
}

/// Two tunnels (VNI 100 on eth1, VNI 200 on eth2) and a VNF-side sink;
/// the `flows` line goes first (line 1).
fn tunnels_and(flows: &str) -> &'static str {
    let text = format!(
        "flows = [{flows}]\n\
         [[port]]\nname = \"vx100\"\nid = 5\ntype = \"vxlan\"\n{GOOD}\
         [[port]]\nname = \"vx200\"\nid = 6\ntype = \"vxlan\"\n\
         underlay = \"eth2\"\nlocal_ip = \"192.0.2.1\"\nremote_ip = \"192.0.2.3\"\nvni = 200\n\
         [[port]]\nname = \"vnf\"\nid = 1\ntype = \"sink\"\n"
    );
    Box::leak(text.into_boxed_str())
}

#[test]
fn tun_id_rules_resolve_to_the_tunnel_ports_carrying_the_vni() {
    let c = parse(tunnels_and(
        "\"tun_id=200,actions=output:1\", \"in_port=1,actions=set_field:100->tun_id,output:5\"",
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let rules: Vec<String> = c.flows.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        rules,
        [
            "priority=32768,tun_id=0xc8,in_port=6,actions=output:1",
            "priority=32768,in_port=1,actions=set_field:0x64->tun_id,output:5",
        ]
    );
}

#[test]
fn tun_id_rules_that_cannot_work_are_rejected() {
    check_all(&[
        Bad {
            name: "no tunnel carries the VNI",
            text: tunnels_and("\"tun_id=300,actions=output:1\""),
            line: 1,
            field: "flows[0]",
            msg: "tun_id=300: no tunnel port carries VNI 300 (tunnel ports: port 5 VNI 100, port 6 VNI 200)",
        },
        Bad {
            name: "in_port carries another VNI",
            text: tunnels_and("\"tun_id=100,in_port=6,actions=output:1\""),
            line: 1,
            field: "flows[0]",
            msg: "port 6 is not a tunnel port carrying VNI 100, so the rule could never match",
        },
        Bad {
            name: "output sends with another VNI",
            text: tunnels_and("\"in_port=1,actions=set_tunnel:200,output:5\""),
            line: 1,
            field: "flows[0]",
            msg: "set_field:200->tun_id then output:5: tunnel port 5 sends with VNI 100",
        },
    ]);
}
