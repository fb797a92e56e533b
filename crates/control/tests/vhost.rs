//! vhost-user ports in a running node: opened through nfv-vhost from the
//! config and by `add-port`, shown with their facts, removed cleanly.

use std::path::Path;

fn sock(tag: &str) -> String {
    format!("/tmp/nfv-control-{}-{tag}.sock", std::process::id())
}

#[test]
fn vhost_user_ports_are_opened_shown_and_removed() {
    let (s1, s2) = (sock("v1"), sock("v2"));
    let text = format!(
        "[pmd]\ncores = [0]\nemc_entries = 0\n\
         [[port]]\nname = \"v1\"\nid = 1\ntype = \"vhost-user\"\nsocket = \"{s1}\"\nmode = \"server\"\nqueues = 2\n\
         [[port]]\nname = \"s\"\nid = 2\ntype = \"sink\"\n"
    );
    let cfg = nfv_config::parse_str(&text, Path::new("vhost.toml"), 1).unwrap();
    let node = nfv_control::Node::start(&cfg).unwrap();
    // Server mode: the socket exists as soon as the port is open.
    assert!(Path::new(&s1).exists());
    let ports = node.show_ports();
    let v1 = ports.iter().find(|p| p.name == "v1").unwrap();
    assert_eq!(v1.type_name, "vhost-user");
    assert_eq!(v1.rx_queues.len(), 2);
    assert_eq!(v1.info["mode"], "server");
    assert_eq!(v1.info["connected"], "false");
    assert_eq!(v1.info["queue_pairs"], "0 of 2 enabled");
    // The same socket twice is refused; a client-mode port is added (it
    // waits for its VNF in the background).
    let e = node
        .add_port(&format!(
            "name=\"v3\",id=3,type=\"vhost-user\",socket=\"{s1}\",mode=\"server\""
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("already the socket of port \"v1\""), "{e}");
    assert_eq!(
        node.add_port(&format!(
            "name=\"v2\",id=4,type=\"vhost-user\",socket=\"{s2}\""
        ))
        .map_err(|e| e.to_string()),
        Ok(4)
    );
    let v2 = node.show_ports().into_iter().find(|p| p.no == 4).unwrap();
    assert_eq!(v2.info["mode"], "client");
    // Removing a server-mode port removes its socket.
    node.del_port("v1").unwrap();
    nfv_testutil::wait_until(std::time::Duration::from_secs(5), || {
        !Path::new(&s1).exists()
    });
    assert!(!Path::new(&s1).exists());
    node.shutdown();
}
