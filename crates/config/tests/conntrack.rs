//! `[conntrack]`: settings reach the tracker's config; bad ones name the
//! line, the field and what is wrong.

mod common;
use common::{Bad, check_all, parse};

#[test]
fn conntrack_settings_are_read() {
    let c = parse(
        "[conntrack]\ncapacity = 1000\nzone_limit = 10\ntcp_pickup = false\n\
         established = \"on-reply\"\n\
         timeouts = { tcp_established = 3600, udp_multiple = 5 }\n",
    )
    .unwrap();
    let want = nfv_conntrack::Config {
        capacity: 1000,
        default_zone_limit: Some(10),
        tcp_pickup: false,
        established: nfv_conntrack::Established::OnReply,
        timeouts: nfv_conntrack::Timeouts {
            tcp_established: 3600,
            udp_multiple: 5,
            ..Default::default()
        },
    };
    assert_eq!(c.conntrack, want);
    let none = parse("").unwrap();
    assert_eq!(none.conntrack.default_zone_limit, None);
    assert_eq!(none.conntrack.timeouts, nfv_conntrack::Timeouts::default());
    assert!(none.conntrack.tcp_pickup);
}

#[test]
fn conntrack_section() {
    check_all(&[
        Bad {
            name: "capacity zero",
            text: "[conntrack]\ncapacity = 0\n",
            line: 2,
            field: "conntrack.capacity",
            msg: "0 is out of range 1..=16777216",
        },
        Bad {
            name: "zone limit negative",
            text: "[conntrack]\nzone_limit = -1\n",
            line: 2,
            field: "conntrack.zone_limit",
            msg: "-1 is out of range 1..=16777216",
        },
        Bad {
            name: "established spelled otherwise",
            text: "[conntrack]\nestablished = \"reply\"\n",
            line: 2,
            field: "conntrack.established",
            msg: "\"reply\" is not \"on-commit\" or \"on-reply\"",
        },
        Bad {
            name: "a zero timeout",
            text: "[conntrack]\ntimeouts = { udp_first = 0 }\n",
            line: 2,
            field: "conntrack.timeouts.udp_first",
            msg: "0 is out of range 1..=604800",
        },
    ]);
    // Unknown keys are refused by the reader (serde), with the key named.
    for text in [
        "[conntrack]\ncapacty = 5\n",
        "[conntrack]\ntimeouts = { tcp_establish = 5 }\n",
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains("unknown field"), "{text:?}: {e}");
    }
}
