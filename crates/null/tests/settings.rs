//! `[[port]]` tables of type `null`, good and bad, through
//! `nfv_config::parse_port_table` (what `add-port` and the config loader
//! run): the type is found in `nfv_port_types::PORT_TYPES` and reads its
//! own keys.

use nfv_config::parse_port_table;
use nfv_mem::MemoryConfig;
use nfv_null::NullConfig;
use nfv_ports::{PortConfig, PortKind};

fn null(rxqs: usize, max_frame: Option<usize>) -> PortConfig {
    PortConfig {
        name: "n".into(),
        id: 7,
        rxqs,
        kind: PortKind::typed(NullConfig { max_frame }),
    }
}

#[test]
fn good_tables() {
    let mem = MemoryConfig::default();
    let cases = [
        (r#"name="n",id=7,type="null""#, null(1, None)),
        (
            r#"name="n",id=7,type="null",max_frame=1518"#,
            null(1, Some(1518)),
        ),
        (
            r#"{ name = "n", id = 7, type = "null", max_frame = 60, rxqs = 2 }"#,
            null(2, Some(60)),
        ),
        (
            r#"name="n",id=7,type="null",max_frame=65535"#,
            null(1, Some(65535)),
        ),
    ];
    for (text, want) in cases {
        let got = parse_port_table(text, &mem).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got, want, "{text}");
        assert_eq!(got.kind.type_name(), "null");
    }
}

#[test]
fn bad_tables_name_the_line_the_key_and_the_fault() {
    let mem = MemoryConfig::default();
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            r#"name="n",id=7,type="null",max_frame=59"#,
            1,
            "max_frame",
            "59 is out of range 60..=65535",
        ),
        (
            "name=\"n\",\nid=7,\ntype=\"null\",\nmax_frame=65536",
            4,
            "max_frame",
            "65536 is out of range 60..=65535",
        ),
        (
            r#"name="n",id=7,type="null",max_frame="jumbo""#,
            1,
            "max_frame",
            "invalid type: string \"jumbo\", expected an integer",
        ),
        (
            r#"name="n",id=7,type="null",iface="eth0""#,
            1,
            "iface",
            "not valid for a port of type \"null\" (only for type",
        ),
        (
            r#"name="n",id=7,type="null",speed=5"#,
            1,
            "speed",
            "unknown field `speed`, expected one of `name`, `id`, `type`, `rxqs`, `max_frame`",
        ),
        (r#"name="n",id=7,type="nul""#, 1, "type", "`null`"),
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
}
