//! `add-port` refuses what loading a file refuses: the cross-port checks
//! (names, ids, sockets, kernel interfaces, ring peers) are one validator,
//! `nfv_config::check_port_set`, used at both places.

use std::path::Path;

fn sock(tag: &str) -> String {
    format!("/tmp/nfv-control-ports-{}-{tag}.sock", std::process::id())
}

/// The ports every case starts from. `k1` is a kernel-facing port on an
/// interface that does not exist: it fails to open and the node runs
/// without it, but it still holds its interface.
fn base(v1: &str) -> String {
    format!(
        "[memory]\nframes = 1024\n[pmd]\ncores = [0]\nemc_entries = 0\n\
         [[port]]\nname = \"s1\"\nid = 1\ntype = \"sink\"\n\
         [[port]]\nname = \"v1\"\nid = 2\ntype = \"vhost-user\"\nsocket = \"{v1}\"\nmode = \"server\"\n\
         [[port]]\nname = \"k1\"\nid = 3\ntype = \"afpacket\"\niface = \"nfvnone0\"\n\
         [[port]]\nname = \"ra\"\nid = 4\ntype = \"ring\"\npeer = \"rb\"\n\
         [[port]]\nname = \"rb\"\nid = 5\ntype = \"ring\"\npeer = \"ra\"\n"
    )
}

/// An inline port table (`add-port`) as a `[[port]]` table of a file.
fn as_table(inline: &str) -> String {
    let keys: Vec<&str> = inline.split(',').collect();
    format!("[[port]]\n{}\n", keys.join("\n"))
}

struct Case {
    name: &'static str,
    /// Added in order: all but the last are accepted, the last refused.
    adds: Vec<String>,
    /// The key both refusals name.
    field: &'static str,
}

fn case(name: &'static str, adds: &[&str], field: &'static str) -> Case {
    Case {
        name,
        adds: adds.iter().map(|a| a.to_string()).collect(),
        field,
    }
}

fn cases(v1_socket: &str) -> Vec<Case> {
    let dup_socket =
        format!(r#"name="v2",id=9,type="vhost-user",socket="{v1_socket}",mode="server""#);
    vec![
        case("duplicate name", &[r#"name="s1",id=9,type="sink""#], "name"),
        case("duplicate id", &[r#"name="s9",id=1,type="sink""#], "id"),
        case("duplicate vhost-user socket", &[&dup_socket], "socket"),
        case(
            "one kernel interface, two ports (the runtime copy lacked this)",
            &[r#"name="k2",id=9,type="tap",iface="nfvnone0""#],
            "iface",
        ),
        case(
            "peer is not a ring",
            &[r#"name="rx",id=9,type="ring",peer="s1""#],
            "peer",
        ),
        case(
            "peer names another port",
            &[r#"name="rx",id=9,type="ring",peer="ra""#],
            "peer",
        ),
        case(
            "a ring's missing peer is added as a sink",
            &[
                r#"name="rc",id=9,type="ring",peer="s10""#,
                r#"name="s10",id=10,type="sink""#,
            ],
            "peer",
        ),
        case(
            "ring ends of different sizes",
            &[
                r#"name="rc",id=9,type="ring",peer="rd",size=64"#,
                r#"name="rd",id=10,type="ring",peer="rc""#,
            ],
            "size",
        ),
    ]
}

#[test]
fn add_port_refuses_what_load_refuses() {
    let v1 = sock("v1");
    let base = base(&v1);
    for case in cases(&v1) {
        // Loading the whole set is refused at that key...
        let file: String = case.adds.iter().map(|a| as_table(a)).collect();
        let err = nfv_config::parse_str(&format!("{base}{file}"), Path::new("t.toml"), 1)
            .expect_err(case.name);
        let field = err.field().unwrap_or_default().to_string();
        assert!(
            field.ends_with(&format!(".{}", case.field)),
            "{}: load refused at {field:?}: {err}",
            case.name
        );

        // ...and so is adding the ports one by one to a running node.
        let cfg = nfv_config::parse_str(&base, Path::new("t.toml"), 1).unwrap();
        let node = nfv_control::Node::start(&cfg).unwrap();
        let (last, first) = case.adds.split_last().unwrap();
        for add in first {
            node.add_port(add)
                .unwrap_or_else(|e| panic!("{}: {add}: {e}", case.name));
        }
        let before = node.show_ports().len();
        let e = node.add_port(last).expect_err(case.name).to_string();
        assert!(
            e.starts_with(&format!("{}: ", case.field)),
            "{}: add-port refused with {e:?}",
            case.name
        );
        assert_eq!(
            node.show_ports().len(),
            before,
            "{}: switch changed",
            case.name
        );
        node.shutdown();
    }
}
