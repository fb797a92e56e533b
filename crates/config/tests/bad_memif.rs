//! Rejected memif ports: each names the line, the field and what is
//! wrong (the other port types' cases are in `bad.rs`).

mod common;
use common::{Bad, check_all};

#[test]
fn memif_ports() {
    let port = |extra: &str| -> &'static str {
        Box::leak(
            format!("[[port]]\nname = \"m\"\nid = 1\ntype = \"memif\"\n{extra}").into_boxed_str(),
        )
    };
    check_all(&[
        Bad {
            name: "memif without socket",
            text: port(""),
            line: 1,
            field: "port[0].socket",
            msg: "a memif port needs `socket`",
        },
        Bad {
            name: "memif role",
            text: port("socket = \"/tmp/m.sock\"\nrole = \"peer\"\n"),
            line: 6,
            field: "port[0].role",
            msg: "unknown variant `peer`, expected `server` or `client`",
        },
        Bad {
            name: "memif ring_size in the server role",
            text: port("socket = \"/tmp/m.sock\"\nring_size = 512\n"),
            line: 6,
            field: "port[0].ring_size",
            msg: "only for role = \"client\"",
        },
        Bad {
            name: "memif ring_size not a power of two",
            text: port("socket = \"/tmp/m.sock\"\nrole = \"client\"\nring_size = 1000\n"),
            line: 7,
            field: "port[0].ring_size",
            msg: "1000 is not a power of two in 2..=16384",
        },
        Bad {
            name: "memif secret too long",
            text: port("socket = \"/tmp/m.sock\"\nsecret = \"0123456789012345678901234\"\n"),
            line: 6,
            field: "port[0].secret",
            msg: "a memif secret is 1..=24 bytes, this one is 25",
        },
        Bad {
            name: "memif empty abstract name",
            text: port("socket = \"@\"\n"),
            line: 5,
            field: "port[0].socket",
            msg: "an abstract socket name needs 1..106 bytes after the @",
        },
        Bad {
            name: "memif id out of range",
            text: port("socket = \"/tmp/m.sock\"\ninterface_id = 4294967296\n"),
            line: 6,
            field: "port[0].interface_id",
            msg: "4294967296 is out of range 0..=4294967295",
        },
        Bad {
            name: "memif queues",
            text: port("socket = \"/tmp/m.sock\"\nqueues = 17\n"),
            line: 6,
            field: "port[0].queues",
            msg: "17 is out of range 1..=16",
        },
        Bad {
            name: "memif rxqs",
            text: port("socket = \"/tmp/m.sock\"\nrxqs = 2\n"),
            line: 6,
            field: "port[0].rxqs",
            msg: "its rx queues are the client's rings; set `queues`",
        },
        Bad {
            name: "mrg_rxbuf on memif",
            text: port("socket = \"/tmp/m.sock\"\nmrg_rxbuf = true\n"),
            line: 6,
            field: "port[0].mrg_rxbuf",
            msg: "not valid for a port of type \"memif\" (only for type \"vhost-user\")",
        },
        Bad {
            name: "memif servers with the same id on one socket",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"memif\"\nsocket = \"/tmp/x.sock\"\n\
                   [[port]]\nname = \"b\"\nid = 2\ntype = \"memif\"\nsocket = \"/tmp/x.sock\"\n",
            line: 10,
            field: "port[1].socket",
            msg: "/tmp/x.sock already serves interface_id 0 for port[0] \"a\"; ports sharing a socket need different ones",
        },
        Bad {
            name: "a memif client on a server's socket",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"memif\"\nsocket = \"/tmp/x.sock\"\n\
                   [[port]]\nname = \"b\"\nid = 2\ntype = \"memif\"\nsocket = \"/tmp/x.sock\"\nrole = \"client\"\ninterface_id = 1\n",
            line: 10,
            field: "port[1].socket",
            msg: "/tmp/x.sock is already the socket of port[0] \"a\"",
        },
        Bad {
            name: "memif socket shared with vhost",
            text: "[[port]]\nname = \"a\"\nid = 1\ntype = \"memif\"\nsocket = \"/tmp/x.sock\"\n\
                   [[port]]\nname = \"b\"\nid = 2\ntype = \"vhost-user\"\nsocket = \"/tmp/x.sock\"\n",
            line: 10,
            field: "port[1].socket",
            msg: "/tmp/x.sock is already the socket of port[0] \"a\"",
        },
    ]);
}
