//! vhost-user port keys refused with the file, line and key named
//! (split from `bad.rs`).

mod common;
use common::{Bad, check_all};

#[test]
fn vhost_user_ports() {
    let vhost = |extra: &str| -> &'static str {
        Box::leak(
            format!("[[port]]\nname = \"v\"\nid = 1\ntype = \"vhost-user\"\n{extra}")
                .into_boxed_str(),
        )
    };
    let long: &'static str =
        Box::leak(format!("socket = \"/tmp/{}.sock\"\n", "v".repeat(100)).into_boxed_str());
    check_all(&[
        Bad {
            name: "no socket",
            text: vhost("queues = 2\n"),
            line: 1,
            field: "port[0].socket",
            msg: "a vhost-user port needs `socket`",
        },
        Bad {
            name: "empty socket",
            text: vhost("socket = \"\"\n"),
            line: 5,
            field: "port[0].socket",
            msg: "the path is empty",
        },
        Bad {
            name: "long socket",
            text: vhost(long),
            line: 5,
            field: "port[0].socket",
            msg: "a Unix socket path holds at most 107",
        },
        Bad {
            name: "queues 0",
            text: vhost("socket = \"/tmp/v.sock\"\nqueues = 0\n"),
            line: 6,
            field: "port[0].queues",
            msg: "0 is out of range 1..=16",
        },
        Bad {
            name: "queues 17",
            text: vhost("socket = \"/tmp/v.sock\"\nqueues = 17\n"),
            line: 6,
            field: "port[0].queues",
            msg: "17 is out of range 1..=16",
        },
        Bad {
            name: "tx_retries 33",
            text: vhost("socket = \"/tmp/v.sock\"\ntx_retries = 33\n"),
            line: 6,
            field: "port[0].tx_retries",
            msg: "33 is out of range 0..=32",
        },
        Bad {
            name: "mode",
            text: vhost("socket = \"/tmp/v.sock\"\nmode = \"both\"\n"),
            line: 6,
            field: "port[0].mode",
            msg: "unknown variant `both`, expected `server` or `client`",
        },
        Bad {
            name: "mrg_rxbuf type",
            text: vhost("socket = \"/tmp/v.sock\"\nmrg_rxbuf = 1\n"),
            line: 6,
            field: "port[0].mrg_rxbuf",
            msg: "invalid type: integer `1`, expected a boolean",
        },
        Bad {
            name: "packed_ring type",
            text: vhost("socket = \"/tmp/v.sock\"\npacked_ring = \"yes\"\n"),
            line: 6,
            field: "port[0].packed_ring",
            msg: "invalid type: string \"yes\", expected a boolean",
        },
        Bad {
            name: "tso type",
            text: vhost("socket = \"/tmp/v.sock\"\ntso = \"on\"\n"),
            line: 6,
            field: "port[0].tso",
            msg: "invalid type: string \"on\", expected a boolean",
        },
        Bad {
            name: "max_guest_memory_gib 0",
            text: vhost("socket = \"/tmp/v.sock\"\nmax_guest_memory_gib = 0\n"),
            line: 6,
            field: "port[0].max_guest_memory_gib",
            msg: "65536",
        },
        Bad {
            name: "mtu over the frames a guest without MRG_RXBUF takes",
            text: vhost("socket = \"/tmp/v.sock\"\nmrg_rxbuf = false\nmtu = 1600\n"),
            line: 7,
            field: "port[0].mtu",
            msg: "68..=1500",
        },
        Bad {
            name: "mtu under 68",
            text: vhost("socket = \"/tmp/v.sock\"\nmtu = 60\n"),
            line: 6,
            field: "port[0].mtu",
            msg: "68..=8982",
        },
        Bad {
            name: "rxqs",
            text: vhost("socket = \"/tmp/v.sock\"\nrxqs = 2\n"),
            line: 6,
            field: "port[0].rxqs",
            msg: "set `queues`",
        },
        Bad {
            name: "duplicate socket",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"vhost-user\"\nsocket = \"/tmp/a.sock\"\n\
                   [[port]]\nname = \"b\"\nid = 2\ntype = \"vhost-user\"\nsocket = \"/tmp/a.sock\"\nmode = \"server\"\n",
            line: 10,
            field: "port[1].socket",
            msg: "/tmp/a.sock is already the socket of port[0] \"a\"",
        },
    ]);
}
