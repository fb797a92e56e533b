//! Flow rules in configs: parsed with `nfv_flow::parse_flow`, checked
//! against the configured ports.

mod common;
use common::{Bad, check_all};
use nfv_flow::{Action, DEFAULT_PRIORITY};

const PORTS: &str = r#"
[[port]]
name = "gen0"
id = 1
type = "generator"

[[port]]
name = "sink0"
id = 2
type = "sink"
"#;

fn with_ports(head: &str) -> &'static str {
    Box::leak(format!("{head}{PORTS}").into_boxed_str())
}

#[test]
fn flows_list_then_flow_tables_in_file_order() {
    let text = format!(
        "flows = [\n  \"priority=10,in_port=1,actions=output:2\",\n  \"in_port=2,actions=drop\",\n]\n{PORTS}\n\
         [[flow]]\nrule = \"priority=5,actions=normal\"\n\n[[flow]]\nrule = \"priority=1,ip,nw_dst=10.0.0.0/8,actions=output:1,output:2\"\n"
    );
    let c = common::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.flows.len(), 4);
    assert_eq!(c.flows[0].priority, 10);
    assert_eq!(c.flows[0].matches.key.in_port(), 1);
    assert_eq!(c.flows[0].single_output(), Some(2));
    assert_eq!(c.flows[1].priority, DEFAULT_PRIORITY);
    assert!(c.flows[1].actions.is_empty());
    assert_eq!(c.flows[2].actions, [Action::Normal]);
    assert_eq!(c.flows[3].actions, [Action::Output(1), Action::Output(2)]);
    // The same text as parse_flow gives.
    assert_eq!(
        c.flows[0],
        nfv_flow::parse_flow("priority=10,in_port=1,actions=output:2").unwrap()
    );
}

#[test]
fn bad_flows_name_their_index_and_the_parser_message() {
    check_all(&[
        Bad {
            name: "unparsable",
            text: with_ports(
                "flows = [\n  \"in_port=1,actions=output:2\",\n  \"in_prot=1,actions=output:2\",\n]\n",
            ),
            line: 3,
            field: "flows[1]",
            msg: "cannot parse \"in_prot=1,actions=output:2\": unknown field \"in_prot\"",
        },
        Bad {
            name: "no actions",
            text: with_ports("flows = [\"priority=1\"]\n"),
            line: 1,
            field: "flows[0]",
            msg: "missing actions=",
        },
        Bad {
            name: "in_port unknown",
            text: with_ports("flows = [\n\"in_port=7,actions=output:2\"]\n"),
            line: 2,
            field: "flows[0]",
            msg: "in_port=7: no port has id 7 (ports: 1 (gen0), 2 (sink0))",
        },
        Bad {
            name: "output unknown",
            text: with_ports("flows = [\"in_port=1,actions=output:2,output:3\"]\n"),
            line: 1,
            field: "flows[0]",
            msg: "output:3: no port has id 3",
        },
        Bad {
            name: "bare output unknown",
            text: with_ports("flows = [\"actions=9\"]\n"),
            line: 1,
            field: "flows[0]",
            msg: "output:9: no port has id 9",
        },
        Bad {
            name: "no ports at all",
            text: "flows = [\"in_port=1,actions=drop\"]\n",
            line: 1,
            field: "flows[0]",
            msg: "no port has id 1 (no ports are configured)",
        },
        Bad {
            name: "flow table",
            text: with_ports(
                "[[flow]]\nrule = \"actions=output:2\"\n[[flow]]\n\nrule = \"in_port=3,actions=output:2\"\n",
            ),
            line: 5,
            field: "flow[1].rule",
            msg: "in_port=3: no port has id 3",
        },
        Bad {
            name: "flow table parse error",
            text: with_ports("[[flow]]\nrule = \"tp_dst=80,actions=drop\"\n"),
            line: 2,
            field: "flow[0].rule",
            msg: "cannot parse",
        },
        // ct() follows IP connections: a rule of other packets may not
        // send them to the tracker.
        Bad {
            name: "ct in a rule not matching ip",
            text: with_ports("flows = [\"in_port=1,actions=ct(commit),output:2\"]\n"),
            line: 1,
            field: "flows[0]",
            msg: "the rule must match ip or ipv6",
        },
    ]);
}

/// `groups` and `meters` are checked at load and rules may name them;
/// a rule naming one not defined, a duplicate id or text that does not
/// parse is refused at its line.
#[test]
fn groups_and_meters_are_defined_before_the_rules_name_them() {
    let text = with_ports(
        "groups = [\"group_id=1,type=all,bucket=output:2\"]\n\
         meters = [\"meter=3,pktps,band=type=drop,rate=1000\"]\n\
         flows = [\"in_port=1,actions=meter:3,group:1\"]\n",
    );
    let c = common::parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.groups, ["group_id=1,type=all,bucket=output:2"]);
    assert_eq!(c.meters, ["meter=3,pktps,band=type=drop,rate=1000"]);
    assert_eq!(c.flows[0].actions, [Action::Meter(3), Action::Group(1)]);
    check_all(&[
        Bad {
            name: "undefined meter",
            text: with_ports("flows = [\"in_port=1,actions=meter:9,output:2\"]\n"),
            line: 1,
            field: "flows[0]",
            msg: "meter 9 is not defined",
        },
        Bad {
            name: "undefined group",
            text: with_ports("meters = []\nflows = [\n  \"in_port=1,actions=group:4\",\n]\n"),
            line: 3,
            field: "flows[0]",
            msg: "group 4 is not defined",
        },
        Bad {
            name: "duplicate meter",
            text: with_ports(
                "meters = [\"meter=1,band=type=drop,rate=5\", \"meter=1,band=type=drop,rate=6\"]\n",
            ),
            line: 1,
            field: "meters[1]",
            msg: "meter 1 is defined twice",
        },
        Bad {
            name: "meter text",
            text: with_ports("meters = [\"meter=1,colour=red\"]\n"),
            line: 1,
            field: "meters[0]",
            msg: "unknown item",
        },
        Bad {
            name: "group text",
            text: with_ports("groups = [\"group_id=1,type=bogus\"]\n"),
            line: 1,
            field: "groups[0]",
            msg: "cannot parse",
        },
    ]);
}
