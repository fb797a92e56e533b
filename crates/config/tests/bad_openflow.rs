//! Rejected `[openflow]` sections: each names the line, the field and
//! what is wrong.

mod common;
use common::{Bad, check_all};

/// `[openflow]`: listeners and controllers parse or say why; plain TCP
/// stays on loopback; TLS needs its three files; the datapath id is 16
/// hex digits.
#[test]
fn openflow_section() {
    check_all(&[
        Bad {
            name: "ptcp off loopback",
            text: "[openflow]\nlisten = [\"ptcp:6653:0.0.0.0\"]\n",
            line: 2,
            field: "openflow.listen[0]",
            msg: "ptcp: listens on loopback only",
        },
        Bad {
            name: "unknown listener",
            text: "[openflow]\nlisten = [\"tcp:1.2.3.4:6653\"]\n",
            line: 2,
            field: "openflow.listen[0]",
            msg: "a listener is punix:PATH, ptcp:PORT[:IP] or pssl:PORT[:IP]",
        },
        Bad {
            name: "tcp controller off loopback",
            text: "[openflow]\ncontrollers = [\"tcp:192.0.2.1:6653\"]\n",
            line: 2,
            field: "openflow.controllers[0]",
            msg: "tcp: connects to loopback only",
        },
        Bad {
            name: "pssl without certificates",
            text: "[openflow]\nlisten = [\"pssl:6653\"]\n",
            line: 1,
            field: "openflow",
            msg: "pssl: and ssl: need ssl_private_key, ssl_certificate and ssl_ca_certificate",
        },
        Bad {
            name: "half the TLS files",
            text: "[openflow]\nssl_private_key = \"k.pem\"\n",
            line: 2,
            field: "openflow.ssl_private_key",
            msg: "go together",
        },
        Bad {
            name: "datapath id",
            text: "[openflow]\ndatapath_id = \"a1\"\n",
            line: 2,
            field: "openflow.datapath_id",
            msg: "is not 16 hex digits",
        },
        Bad {
            name: "fail mode",
            text: "[openflow]\nfail_mode = \"open\"\n",
            line: 2,
            field: "openflow.fail_mode",
            msg: "is not \"secure\" or \"standalone\"",
        },
        Bad {
            name: "listed twice",
            text: "[openflow]\nlisten = [\"ptcp:6653\", \"ptcp:6653:127.0.0.1\"]\n",
            line: 2,
            field: "openflow.listen[1]",
            msg: "listed twice",
        },
    ]);
}
