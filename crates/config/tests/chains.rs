//! `[[chain]]` tables: steering derived from data, errors naming the field.

use nfv_config::parse_str;
use std::path::Path;

const PORTS: &str = r#"
[[port]]
name = "gen0"
id = 1
type = "generator"
[[port]]
name = "sink0"
id = 2
type = "sink"
[[port]]
name = "vnf1"
id = 11
type = "vhost-user"
socket = "/tmp/v1.sock"
mode = "server"
[[port]]
name = "vnf2"
id = 12
type = "vhost-user"
socket = "/tmp/v2.sock"
mode = "server"
[[port]]
name = "vnf3"
id = 13
type = "vhost-user"
socket = "/tmp/v3.sock"
mode = "server"
[[port]]
name = "vnf4"
id = 14
type = "vhost-user"
socket = "/tmp/v4.sock"
mode = "server"
"#;

fn parse(chains: &str) -> Result<nfv_config::NodeConfig, nfv_config::ConfigError> {
    parse_str(&format!("{PORTS}{chains}"), Path::new("c.toml"), 2)
}

#[test]
fn a_chain_becomes_one_steering_rule_per_hop() {
    let c = parse(
        "[[chain]]\nname = \"ns\"\ningress = \"gen0\"\nvnfs = [\"vnf1\", \"vnf2\"]\negress = \"sink0\"\n",
    )
    .unwrap();
    let ch = &c.chains[0];
    assert_eq!(ch.name, "ns");
    assert_eq!(
        ch.vnfs(),
        &[("vnf1".to_string(), 11), ("vnf2".to_string(), 12)]
    );
    assert_eq!(
        ch.steering_rules(),
        [
            "priority=1000,in_port=1,actions=output:11",
            "priority=1000,in_port=11,actions=output:12",
            "priority=1000,in_port=12,actions=output:2",
        ]
    );
    // East-west: a VNF as ingress, no VNF in between, custom priority.
    let c =
        parse("[[chain]]\nname = \"ew\"\ningress = \"vnf1\"\negress = \"vnf2\"\npriority = 7\n")
            .unwrap();
    assert_eq!(
        c.chains[0].steering_rules(),
        ["priority=7,in_port=11,actions=output:12"]
    );
}

#[test]
fn bad_chains_name_line_and_field() {
    // (chain tables, expected line within them, field, message substring).
    let base = PORTS.lines().count() + 1;
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            "[[chain]]\nname = \"a\"\ningress = \"nope\"\negress = \"sink0\"\n",
            3,
            "chain[0].ingress",
            "no port named \"nope\"",
        ),
        (
            "[[chain]]\nname = \"a\"\ningress = \"gen0\"\nvnfs = [\"sink0\"]\negress = \"sink0\"\n",
            4,
            "chain[0].vnfs[0]",
            "not a vhost-user port",
        ),
        (
            "[[chain]]\nname = \"a\"\ningress = \"gen0\"\nvnfs = [\"vnf1\", \"vnf1\"]\negress = \"sink0\"\n",
            4,
            "chain[0].vnfs[1]",
            "appears twice",
        ),
        (
            "[[chain]]\nname = \"a\"\ningress = \"gen0\"\negress = \"vnf1\"\n[[chain]]\nname = \"b\"\ningress = \"gen0\"\negress = \"sink0\"\n",
            7,
            "chain[1].ingress",
            "already feeds chain \"a\"",
        ),
        (
            "[[chain]]\nname = \"a\"\ningress = \"gen0\"\negress = \"sink0\"\n[[chain]]\nname = \"a\"\ningress = \"vnf1\"\negress = \"sink0\"\n",
            6,
            "chain[1].name",
            "duplicate chain name",
        ),
        (
            "[[chain]]\nname = \"a\"\ningress = \"gen0\"\negress = \"sink0\"\npriority = 70000\n",
            5,
            "chain[0].priority",
            "out of range",
        ),
        (
            "[[chain]]\nname = \"a\"\ningress = \"gen0\"\negress = \"sink0\"\nhops = 3\n",
            5,
            "chain[0]",
            "unknown field",
        ),
    ];
    for (text, line, field, msg) in cases {
        let err = parse(text).expect_err(text);
        let s = err.to_string();
        assert_eq!(err.line(), Some(base + line - 1), "{text}: {s}");
        assert!(err.field().unwrap_or("").starts_with(field), "{text}: {s}");
        assert!(s.contains(msg), "{text}: {s}");
    }
}

/// A hop naming several instances is a select group; a primary and a
/// backup, a fast_failover group. The switch adds the groups; every
/// instance sends on to the next hop.
#[test]
fn scaled_out_and_standby_hops_become_groups() {
    let c = parse(
        "[[chain]]\nname = \"ns\"\ningress = \"gen0\"\n\
         vnfs = [{ select = [\"vnf1\", \"vnf2\"] }, { primary = \"vnf3\", backup = \"vnf4\" }]\n\
         egress = \"sink0\"\n",
    )
    .unwrap();
    let ch = &c.chains[0];
    let g1 = nfv_config::chain_group_id(0, 1);
    let g2 = nfv_config::chain_group_id(0, 2);
    assert_eq!(
        ch.steering_rules_of(0),
        [
            format!("priority=1000,in_port=1,actions=group:{g1}"),
            format!("priority=1000,in_port=11,actions=group:{g2}"),
            format!("priority=1000,in_port=12,actions=group:{g2}"),
            "priority=1000,in_port=13,actions=output:2".to_string(),
            "priority=1000,in_port=14,actions=output:2".to_string(),
        ]
    );
    assert_eq!(
        ch.groups_of(0),
        [
            format!(
                "group_id={g1},type=select,bucket=watch_port:11,output:11,\
                 bucket=watch_port:12,output:12"
            ),
            format!(
                "group_id={g2},type=fast_failover,bucket=watch_port:13,output:13,\
                 bucket=watch_port:14,output:14"
            ),
        ]
    );
    // Every instance is a VNF of the chain, in the reports.
    assert_eq!(ch.vnfs().len(), 4);
    // Each group text is one add-group accepts.
    for g in ch.groups_of(0) {
        nfv_flow::parse_group(&g).unwrap();
    }
    // One instance is not a scale-out; a sink is no VNF.
    for (hop, msg) in [
        ("{ select = [\"vnf1\"] }", "select names 1 instances"),
        (
            "{ primary = \"vnf1\", backup = \"sink0\" }",
            "is not a vhost-user port",
        ),
    ] {
        let e = parse(&format!(
            "[[chain]]\nname = \"x\"\ningress = \"gen0\"\nvnfs = [{hop}]\negress = \"sink0\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains(msg), "{hop}: {e}");
    }
}
