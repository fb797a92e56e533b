//! The plugin driven as a container runtime drives it: `CNI_*` variables
//! and the network config on stdin, the result or error JSON on stdout,
//! against a node serving its REST API in this process.

mod common;

use common::{TempDir, netconf, plugin, plugin_in, port_rx, ports, rest, start};
use serde_json::{Value, json};
use std::path::Path;

#[test]
fn add_check_del_gc_status_version() {
    let tmp = TempDir::new("cni", "plugin");
    let dir = &tmp.0;
    let node = start(dir);
    let devinfo = dir.join("devinfo/net1.json");
    let conf = netconf(
        &node,
        "nfv",
        json!({ "interface": "vhost-user", "runtimeConfig": { "CNIDeviceInfoFile": devinfo } }),
    );

    let (ok, v) = plugin("VERSION", "", "", &json!({}));
    assert!(ok);
    assert!(
        v["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("1.1.0")),
        "{v}"
    );

    // ADD: the result names the socket (in the node's socket_dir); the
    // node has the port; the device-info file says the application is the
    // vhost-user client, and carries the plugin's marker.
    let (ok, added) = plugin("ADD", "0123456789abcdef", "net1", &conf);
    assert!(ok, "{added}");
    let socket = dir.join("pods/0123456789ab-net1.sock");
    assert_eq!(
        added["interfaces"][0]["socketPath"],
        json!(socket),
        "{added}"
    );
    assert_eq!(added["interfaces"][0]["name"], "net1");
    assert_eq!(added["cniVersion"], "1.1.0");
    assert!(ports(&node).contains(&"c-0123456789ab-net1".to_string()));
    assert!(
        socket.exists(),
        "the switch listens on {}",
        socket.display()
    );
    let info: Value = serde_json::from_slice(&std::fs::read(&devinfo).unwrap()).unwrap();
    assert_eq!(
        info,
        json!({"type": "vhost-user", "version": "1.1.0", "vhost-user": {"mode": "client", "path": socket},
               "nfvswitch": {"container_id": "0123456789abcdef", "ifname": "net1"}})
    );
    // ADD again (a retried runtime call): the same answer.
    let (ok, again) = plugin("ADD", "0123456789abcdef", "net1", &conf);
    assert!(ok && again == added, "{again}");
    let (ok, v) = plugin("CHECK", "0123456789abcdef", "net1", &conf);
    assert!(ok && v.is_null(), "{v}");
    // CHECK with the prevResult ADD gave passes; one naming another socket
    // does not.
    let mut prev = conf.clone();
    prev["prevResult"] = added.clone();
    assert!(plugin("CHECK", "0123456789abcdef", "net1", &prev).0);
    prev["prevResult"]["interfaces"][0]["socketPath"] = json!("/elsewhere.sock");
    let (ok, v) = plugin("CHECK", "0123456789abcdef", "net1", &prev);
    assert!(!ok && v["code"] == 100, "{v}");

    // DEL, DEL again, DEL of something never added: all succeed.
    for c in ["0123456789abcdef", "0123456789abcdef", "neveradded"] {
        let (ok, v) = plugin("DEL", c, "net1", &conf);
        assert!(ok, "DEL {c}: {v}");
    }
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
    assert!(!devinfo.exists(), "device-info removed by DEL");
    let (ok, v) = plugin("CHECK", "0123456789abcdef", "net1", &conf);
    assert!(!ok && v["code"] == 100, "{v}");

    // GC: of this network, only the valid attachment stays; another
    // network's attachment is not this GC's business.
    for c in ["aaaa", "bbbb"] {
        assert!(plugin("ADD", c, "net1", &conf).0);
    }
    let mut other = conf.clone();
    other["name"] = json!("other");
    other["runtimeConfig"] = json!({});
    assert!(plugin("ADD", "oooo", "net1", &other).0);
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([{ "containerID": "bbbb", "ifname": "net1" }]);
    let (ok, v) = plugin("GC", "", "", &gc);
    assert!(ok, "{v}");
    let names = ports(&node);
    assert!(
        !names.contains(&"c-aaaa-net1".to_string())
            && names.contains(&"c-bbbb-net1".to_string())
            && names.contains(&"c-oooo-net1".to_string()),
        "{names:?}"
    );

    // Refusals, each with the spec's code.
    let cases: [(&str, Value, u64); 5] = [
        ("garbage", json!("not a config"), 6),
        (
            "old version",
            json!({"cniVersion": "0.2.0", "name": "nfv", "type": "x"}),
            1,
        ),
        (
            "tap",
            json!({"cniVersion": "1.1.0", "name": "nfv", "type": "x", "interface": "tap"}),
            7,
        ),
        (
            "socket dir not the node's",
            json!({"cniVersion": "1.1.0", "name": "nfv", "type": "x", "api": node.url,
            "socketDir": format!("/{}", "d".repeat(100))}),
            7,
        ),
        (
            "memif as client",
            json!({"cniVersion": "1.1.0", "name": "nfv", "type": "x", "interface": "memif",
            "switchRole": "client"}),
            7,
        ),
    ];
    for (name, c, code) in cases {
        let (ok, v) = plugin("ADD", "cccc", "net1", &c);
        assert!(!ok && v["code"] == code, "{name}: {v}");
        assert!(
            v["msg"].as_str().is_some_and(|m| !m.is_empty()),
            "{name}: {v}"
        );
    }

    // STATUS: up while the node answers; 50 once it does not.
    assert!(plugin("STATUS", "", "", &conf).0);
    let url = node.url.clone();
    drop(node);
    let mut gone = conf.clone();
    gone["api"] = json!(url);
    let (ok, v) = plugin("STATUS", "", "", &gone);
    assert!(!ok && v["code"] == 50, "{v}");
    let (ok, v) = plugin("ADD", "dddd", "net1", &gone);
    assert!(
        !ok && v["code"] == 11,
        "ADD with the node down: try again later; {v}"
    );
}

/// Two "pods" get ports by ADD; DPDK testpmd opens a virtio-user device on
/// each returned socket and forwards between them (`--tx-first` starts a
/// burst looping pod A → switch → pod B → testpmd → pod A …): traffic
/// crosses both ports. Then DEL removes them with testpmd still attached.
#[test]
fn a_dpdk_app_connects_to_the_sockets_add_returns() {
    let test = "plugin::a_dpdk_app_connects_to_the_sockets_add_returns";
    let Some(testpmd) = nfv_testutil::which("dpdk-testpmd") else {
        return nfv_testutil::skip(
            test,
            "dpdk-testpmd is not installed (Debian package dpdk-dev)",
        );
    };
    let tmp = TempDir::new("cni", "dpdk");
    let dir = &tmp.0;
    let node = start(dir);
    let conf = netconf(&node, "nfv", json!({ "interface": "vhost-user" }));
    let mut sockets = Vec::new();
    for pod in ["podaaaa", "podbbbb"] {
        let (ok, r) = plugin("ADD", pod, "net1", &conf);
        assert!(ok, "{r}");
        sockets.push(
            r["interfaces"][0]["socketPath"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    node.node
        .add_flows(&[
            "in_port=1000,actions=output:1001".into(),
            "in_port=1001,actions=output:1000".into(),
        ])
        .unwrap();
    let prefix = format!("cni{}", std::process::id());
    let socks: Vec<&str> = sockets.iter().map(String::as_str).collect();
    let run = common::Testpmd::start(&testpmd, &prefix, &socks);
    let flowing = nfv_testutil::wait_until(std::time::Duration::from_secs(30), || {
        port_rx(&node, "c-podaaaa-net1") > 1000 && port_rx(&node, "c-podbbbb-net1") > 1000
    });
    assert!(
        flowing,
        "traffic through both pods' ports: rx {} and {}",
        port_rx(&node, "c-podaaaa-net1"),
        port_rx(&node, "c-podbbbb-net1")
    );
    // DEL while the app is still attached.
    for pod in ["podaaaa", "podbbbb"] {
        let (ok, v) = plugin("DEL", pod, "net1", &conf);
        assert!(ok, "{v}");
    }
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
    drop(run);
    drop(node);
}

/// The IP files host-local keeps for `network` in `data_dir` (one per
/// reserved address, named by it).
fn reserved(data_dir: &Path, network: &str) -> Vec<String> {
    let mut ips: Vec<String> = std::fs::read_dir(data_dir.join(network))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.parse::<std::net::IpAddr>().is_ok())
                .collect()
        })
        .unwrap_or_default();
    ips.sort();
    ips
}

/// IPAM delegated to the reference host-local plugin: the address lands
/// on our interface, ADD twice keeps it, CHECK passes prevResult on, a
/// failure after IPAM ADD releases, the IPAM's own errors come up with
/// their code, DEL releases also when the port is gone, GC is forwarded.
#[test]
fn ipam_is_delegated_to_host_local() {
    let test = "plugin::ipam_is_delegated_to_host_local";
    let Some(plugins) = common::reference_plugins() else {
        return nfv_testutil::skip(
            test,
            "the reference host-local IPAM plugin is not installed (scripts/test installs it \
             with go install into target/cni-tools, or set NFVSWITCH_CNI_PLUGINS)",
        );
    };
    let cni_path = format!("/nonexistent:{}", plugins.display());
    let tmp = TempDir::new("cni", "ipam");
    let dir = &tmp.0;
    let data = dir.join("ipam");
    let node = start(dir);
    let conf = netconf(
        &node,
        "nfv-ipam",
        json!({
            "ipam": { "type": "host-local", "dataDir": data,
                      "ranges": [[{ "subnet": "10.250.7.0/29", "rangeStart": "10.250.7.2",
                                    "rangeEnd": "10.250.7.4", "gateway": "10.250.7.1" }]],
                      "routes": [{ "dst": "0.0.0.0/0" }] },
        }),
    );
    let run = |cmd: &str, c: &str, conf: &Value| plugin_in(cmd, c, "net1", conf, &cni_path);

    let (ok, first) = run("ADD", "ipam1", &conf);
    assert!(ok, "{first}");
    assert_eq!(
        first["ips"],
        json!([{ "address": "10.250.7.2/29", "gateway": "10.250.7.1", "interface": 0 }]),
        "{first}"
    );
    assert_eq!(first["routes"], json!([{ "dst": "0.0.0.0/0" }]), "{first}");
    assert_eq!(first["interfaces"][0]["name"], "net1");
    assert_eq!(reserved(&data, "nfv-ipam"), ["10.250.7.2"]);
    let (ok, again) = run("ADD", "ipam1", &conf);
    assert!(ok && again == first, "ADD twice: the same address; {again}");
    let mut with_prev = conf.clone();
    with_prev["prevResult"] = first.clone();
    let (ok, v) = run("CHECK", "ipam1", &with_prev);
    assert!(ok, "{v}");

    // The last addresses, then none left: host-local's error comes up
    // with its code, and no port is made.
    assert!(run("ADD", "ipam2", &conf).0);
    assert!(run("ADD", "samesamesame1", &conf).0);
    let (ok, v) = run("ADD", "ipam3", &conf);
    assert!(!ok && v["code"].as_u64().is_some_and(|c| c != 0), "{v}");
    assert!(
        v["msg"]
            .as_str()
            .is_some_and(|m| m.contains("host-local ADD")),
        "{v}"
    );
    assert!(!ports(&node).contains(&"c-ipam3-net1".to_string()));
    let all = ["10.250.7.2", "10.250.7.3", "10.250.7.4"];
    assert_eq!(reserved(&data, "nfv-ipam"), all);

    // The node refuses the port (its socket would be samesamesame1's: the
    // same first 12 characters of the id): the address just taken for it
    // is released.
    assert!(run("DEL", "ipam2", &conf).0);
    let (ok, v) = run("ADD", "samesamesame2", &conf);
    assert!(!ok && v["code"] == 7, "{v}");
    assert_eq!(reserved(&data, "nfv-ipam"), ["10.250.7.2", "10.250.7.4"]);
    assert!(run("DEL", "samesamesame1", &conf).0);
    assert_eq!(reserved(&data, "nfv-ipam"), ["10.250.7.2"]);

    // The port already gone (removed on the node's side): DEL still
    // releases the address; DEL again is fine.
    let key = nfv_control::attachments::AttachmentKey {
        container_id: "ipam1".into(),
        ifname: "net1".into(),
    };
    assert!(node.node.detach(&key).unwrap().is_some());
    let mut del = conf.clone();
    del["prevResult"] = first.clone();
    for _ in 0..2 {
        let (ok, v) = run("DEL", "ipam1", &del);
        assert!(ok, "{v}");
    }
    assert!(reserved(&data, "nfv-ipam").is_empty());

    // An IPAM plugin that is not in CNI_PATH: invalid config, no port.
    let (ok, v) = plugin_in("ADD", "ipam4", "net1", &conf, "/nonexistent");
    assert!(!ok && v["code"] == 7, "{v}");
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));

    // GC reaches host-local too: an attachment not listed loses its port
    // and its address; STATUS asks host-local as well.
    assert!(run("ADD", "ipam5", &conf).0);
    assert_eq!(reserved(&data, "nfv-ipam").len(), 1);
    let mut gc = conf.clone();
    gc["cni.dev/valid-attachments"] = json!([]);
    let (ok, v) = plugin_in("GC", "", "", &gc, &cni_path);
    assert!(ok, "{v}");
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
    assert!(reserved(&data, "nfv-ipam").is_empty());
    let (ok, v) = plugin_in("STATUS", "", "", &conf, &cni_path);
    assert!(ok, "{v}");

    // Chained after another plugin: its result stays, our interface is
    // appended and our address points at it.
    let mut chained = conf.clone();
    chained["prevResult"] = json!({
        "cniVersion": "1.1.0",
        "interfaces": [{ "name": "eth0", "sandbox": "/var/run/netns/chain1" }],
        "ips": [{ "address": "192.0.2.10/24", "interface": 0 }],
    });
    let (ok, r) = run("ADD", "chain1", &chained);
    assert!(ok, "{r}");
    assert_eq!(r["interfaces"][0]["name"], "eth0", "{r}");
    assert_eq!(r["interfaces"][1]["name"], "net1", "{r}");
    assert_eq!(
        r["ips"][0],
        json!({ "address": "192.0.2.10/24", "interface": 0 })
    );
    assert_eq!(r["ips"][1]["interface"], 1, "{r}");
    assert!(run("DEL", "chain1", &chained).0);
    assert!(reserved(&data, "nfv-ipam").is_empty());
}

/// An attachment pre-seeded over REST (with the node's token) whose kept
/// `addresses` are not an IPAM result: a later ADD of the same key with
/// IPAM in its config answers an error result with a code (not a panic,
/// exit 101 and nothing on stdout); DEL still removes the port.
#[test]
fn malformed_addresses_kept_by_the_node_are_an_error_result() {
    let tmp = TempDir::new("cni", "addresses");
    let node = start(&tmp.0);
    let conf = netconf(&node, "nfv", json!({ "ipam": { "type": "host-local" } }));
    for (i, garbage) in [json!("garbage"), json!([1, 2]), json!({ "ips": [1] })]
        .into_iter()
        .enumerate()
    {
        let id = format!("seeded{i}");
        let path = format!("/api/v1/attachments/{id}/net1");
        let seed = json!({ "type": "vhost-user", "mode": "server", "network": "nfv",
                           "socket": format!("{id}-net1.sock"), "addresses": garbage });
        let (status, v) = rest(&node, "PUT", &path, Some(&seed), true);
        assert_eq!(status, 201, "seeding {garbage}: {v}");
        // CNI_PATH has no host-local: the plugin must stop at the kept
        // addresses, before it would look for the IPAM plugin.
        let (ok, v) = plugin_in("ADD", &id, "net1", &conf, "/nonexistent");
        assert!(!ok, "{garbage}: {v}");
        assert_eq!(v["code"], 103, "{garbage}: {v}");
        assert!(
            v["msg"].as_str().is_some_and(|m| m.contains("addresses")),
            "{v}"
        );
        let mut del = conf.clone();
        del.as_object_mut().unwrap().remove("ipam");
        let (ok, v) = plugin("DEL", &id, "net1", &del);
        assert!(ok, "DEL {garbage}: {v}");
    }
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
}

/// DEL removes the device-info file ADD wrote, and leaves alone a file
/// someone else put at that path (other content, or a symlink to a file
/// the plugin must not touch); ADD does not write over them either.
#[test]
fn del_leaves_a_foreign_device_info_file_alone() {
    let tmp = TempDir::new("cni", "devinfo");
    let dir = &tmp.0;
    let node = start(dir);
    let devinfo = dir.join("devinfo/net1.json");
    let conf = netconf(
        &node,
        "nfv",
        json!({ "runtimeConfig": { "CNIDeviceInfoFile": devinfo } }),
    );
    let victim = dir.join("victim");
    std::fs::write(&victim, "not the plugin's").unwrap();
    let plant_text = |p: &Path| std::fs::write(p, "{\"type\": \"vhost-user\"}").unwrap();
    let plant_link = |p: &Path| std::os::unix::fs::symlink(&victim, p).unwrap();
    for (what, plant) in [
        ("a file with other content", &plant_text as &dyn Fn(&Path)),
        ("a symlink", &plant_link),
    ] {
        let (ok, v) = plugin("ADD", "devinfo1", "net1", &conf);
        assert!(ok, "{v}");
        std::fs::remove_file(&devinfo).unwrap();
        plant(&devinfo);
        let (ok, v) = plugin("DEL", "devinfo1", "net1", &conf);
        assert!(ok && v.is_null(), "{what}: {v}");
        assert!(
            std::fs::symlink_metadata(&devinfo).is_ok(),
            "{what}: left alone"
        );
        assert!(
            !ports(&node).contains(&"c-devinfo1-net1".to_string()),
            "{what}"
        );
        let (ok, v) = plugin("ADD", "devinfo1", "net1", &conf);
        assert!(
            !ok && v["code"] == 104,
            "{what}: ADD does not replace it: {v}"
        );
        assert!(
            !ports(&node).contains(&"c-devinfo1-net1".to_string()),
            "{what}"
        );
        std::fs::remove_file(&devinfo).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "not the plugin's"
    );
    // Its own file: removed.
    assert!(plugin("ADD", "devinfo1", "net1", &conf).0);
    assert!(devinfo.exists());
    assert!(plugin("DEL", "devinfo1", "net1", &conf).0);
    assert!(!devinfo.exists());
}

/// Every change needs the node's token: the plugin sends it from
/// `apiTokenFile`; a wrong one is refused by the node (401, an error
/// result with the node's message); a missing file is "try again later".
#[test]
fn the_plugin_sends_the_nodes_token() {
    let tmp = TempDir::new("cni", "token");
    let node = start(&tmp.0);
    let conf = netconf(&node, "nfv", json!({}));
    let (ok, v) = plugin("ADD", "token1", "net1", &conf);
    assert!(ok, "{v}");
    let wrong = tmp.0.join("wrong-token");
    std::fs::write(&wrong, "not-the-nodes-token-at-all").unwrap();
    let mut c = conf.clone();
    c["apiTokenFile"] = json!(wrong);
    let (ok, v) = plugin("DEL", "token1", "net1", &c);
    assert!(!ok && v["code"] == 102, "{v}");
    assert!(v["details"].as_str().is_some_and(|d| !d.is_empty()), "{v}");
    assert!(ports(&node).contains(&"c-token1-net1".to_string()));
    c["apiTokenFile"] = json!(tmp.0.join("absent"));
    let (ok, v) = plugin("DEL", "token1", "net1", &c);
    assert!(!ok && v["code"] == 11, "{v}");
    assert!(plugin("DEL", "token1", "net1", &conf).0);
    assert!(!ports(&node).contains(&"c-token1-net1".to_string()));
    // Without a token the node refuses a change made over REST too.
    let (status, _) = rest(&node, "DELETE", "/api/v1/attachments/x/net1", None, false);
    assert_eq!(status, 401);
}
