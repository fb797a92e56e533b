//! Generator traffic options (IMIX, stamps, rate as % of a line rate) and
//! the `receiver` port type: accepted forms and rejections by line and
//! field.

mod common;
use common::{Bad, check_all, parse};
use nfv_ports::config::PortKind;

fn gen_with(lines: &str) -> String {
    format!("[[port]]\nname = \"g\"\nid = 1\ntype = \"generator\"\n{lines}\n")
}

#[test]
fn traffic_options_are_read() {
    let text = "\
[[port]]
name = \"g\"
id = 1
type = \"generator\"
frame_size = \"imix\"
stamp = true
rate_percent = 25
line_rate_gbps = 25.0

[[port]]
name = \"rx\"
id = 2
type = \"receiver\"
";
    let c = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let PortKind::Generator(g) = &c.ports[0].kind else {
        panic!()
    };
    assert!(g.imix && g.stamp);
    assert_eq!(
        (g.rate_pps, g.rate_percent, g.line_rate_gbps),
        (None, Some(25.0), 25.0)
    );
    assert_eq!(g.max_frame_size(), 1518);
    // 25 % of 25 Gbit/s of IMIX (mean 361.83 B + 24 B on the wire).
    let want: f64 = 0.25 * 25e9 / ((4342.0 / 12.0 + 24.0) * 8.0);
    assert_eq!(g.effective_rate_pps(), Some(want.round() as u64));
    assert_eq!(c.ports[1].kind, PortKind::Receiver);

    // Defaults: fixed size, no stamp, 10 Gbit/s line, rate from rate_pps.
    let c = parse(&gen_with("rate_pps = 1000")).unwrap();
    let PortKind::Generator(g) = &c.ports[0].kind else {
        panic!()
    };
    assert!(!g.imix && !g.stamp);
    assert_eq!((g.frame_size, g.line_rate_gbps), (64, 10.0));
    assert_eq!(g.effective_rate_pps(), Some(1000));
    let c = parse(&gen_with("rate_percent = 100")).unwrap();
    let PortKind::Generator(g) = &c.ports[0].kind else {
        panic!()
    };
    assert_eq!(g.effective_rate_pps(), Some(14_204_545));

    let p = nfv_config::parse_port_table(
        r#"name="r",id=4,type="receiver""#,
        &nfv_mem::MemoryConfig::default(),
    )
    .unwrap();
    assert_eq!(p.kind, PortKind::Receiver);
}

#[test]
fn bad_traffic_options() {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let gen_key = |name, line: &str, field, msg| Bad {
        name,
        text: leak(gen_with(line)),
        line: 5,
        field,
        msg,
    };
    check_all(&[
        gen_key(
            "unknown mix",
            "frame_size = \"jumbo\"",
            "port[0].frame_size",
            "\"jumbo\" is not a frame size: give bytes (64..=9000) or \"imix\"",
        ),
        gen_key(
            "frame size too small",
            "frame_size = 60",
            "port[0].frame_size",
            "60 is out of range 64..=9000",
        ),
        gen_key(
            "frame size of the wrong type",
            "frame_size = true",
            "port[0].frame_size",
            "a frame size in bytes or \"imix\"",
        ),
        gen_key(
            "stamp not a bool",
            "stamp = 1",
            "port[0].stamp",
            "invalid type",
        ),
        gen_key(
            "rate_percent 0",
            "rate_percent = 0",
            "port[0].rate_percent",
            "0 is out of range: must be above 0 and at most 100",
        ),
        gen_key(
            "rate_percent above 100",
            "rate_percent = 100.5",
            "port[0].rate_percent",
            "100.5 is out of range",
        ),
        gen_key(
            "rate_percent nan",
            "rate_percent = nan",
            "port[0].rate_percent",
            "out of range",
        ),
        gen_key(
            "line rate 0",
            "line_rate_gbps = 0",
            "port[0].line_rate_gbps",
            "must be above 0",
        ),
        Bad {
            name: "both rates",
            text: leak(gen_with("rate_pps = 10\nrate_percent = 5")),
            line: 6,
            field: "port[0].rate_percent",
            msg: "give either rate_pps or rate_percent, not both",
        },
        Bad {
            name: "stamp on a receiver",
            text: "[[port]]\nname = \"r\"\nid = 1\ntype = \"receiver\"\nstamp = true\n",
            line: 5,
            field: "port[0].stamp",
            msg: "not valid for a port of type \"receiver\" (only for type \"generator\")",
        },
        Bad {
            name: "rate_percent on a sink",
            text: "[[port]]\nname = \"s\"\nid = 1\ntype = \"sink\"\nrate_percent = 5\n",
            line: 5,
            field: "port[0].rate_percent",
            msg: "not valid for a port of type \"sink\"",
        },
    ]);
}
