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
