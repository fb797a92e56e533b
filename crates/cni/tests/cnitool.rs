//! The plugin driven by the CNI project's own `cnitool` (its `libcni`, as
//! runtimes use it): network config lists from `NETCONFPATH`, plugins
//! from `CNI_PATH`, capability arguments from `CAP_ARGS`, results cached
//! by libcni and handed back as `prevResult` to CHECK and DEL. Two pods
//! (network namespaces) get ports and addresses (host-local); DPDK
//! testpmd on the returned sockets gets traffic through the switch; CHECK;
//! the switch restarts and CHECK and DEL still work; DEL twice, DEL of a
//! pod never added, GC; a config the plugin refuses.

mod common;

use common::{TempDir, Testpmd, port_rx, ports, start_on};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// libcni's result cache (cnitool has no way to move it); the files of
/// this test's network are removed on drop.
struct CniCache(String);

impl Drop for CniCache {
    fn drop(&mut self) {
        let Ok(dir) = std::fs::read_dir("/var/lib/cni/results") else {
            return;
        };
        for e in dir.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{}-", self.0))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

struct Tool {
    cnitool: PathBuf,
    netconf: PathBuf,
    cni_path: String,
}

impl Tool {
    /// `cnitool <verb> <net> <netns>`: (exit success, stdout, stderr).
    fn run(&self, verb: &str, net: &str, netns: &str, cap_args: &Value) -> (bool, String, String) {
        let out = Command::new(&self.cnitool)
            .args([verb, net, netns])
            .env("NETCONFPATH", &self.netconf)
            .env("CNI_PATH", &self.cni_path)
            .env("CNI_IFNAME", "net1")
            .env("CAP_ARGS", cap_args.to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// Why this test cannot run here, or the tools it needs.
fn needs() -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let cnitool = common::cnitool().ok_or(
        "cnitool is not installed (scripts/test installs it with go install into \
         target/cni-tools, or set NFVSWITCH_CNITOOL)",
    )?;
    let plugins = common::reference_plugins().ok_or(
        "the reference host-local IPAM plugin is not installed (scripts/test installs it, \
         or set NFVSWITCH_CNI_PLUGINS)",
    )?;
    let testpmd = nfv_testutil::which("dpdk-testpmd")
        .ok_or("dpdk-testpmd is not installed (Debian package dpdk-dev)")?;
    if let Some(why) = nfv_testutil::netns::unavailable() {
        return Err(why);
    }
    Ok((cnitool, plugins, testpmd))
}

/// A free loopback TCP address for the node's API, kept across its
/// restart (the network config names it).
fn free_api_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

fn write_conflist(dir: &Path, net: &str, api: &str, extra: Value) -> PathBuf {
    let netconf = dir.join("net.d");
    std::fs::create_dir_all(&netconf).unwrap();
    let mut plugin = json!({
        "type": "nfvswitch-cni", "api": format!("http://{api}"), "interface": "vhost-user",
        "switchRole": "server", "socketDir": dir.join("pods"),
        "apiTokenFile": dir.join("api-token"),
        "capabilities": { "CNIDeviceInfoFile": true },
        "ipam": { "type": "host-local", "dataDir": dir.join("ipam"),
                  "ranges": [[{ "subnet": "10.250.8.0/24" }]] },
    });
    for (k, v) in extra.as_object().unwrap() {
        plugin[k] = v.clone();
    }
    let list = json!({ "cniVersion": "1.1.0", "name": net, "plugins": [plugin] });
    std::fs::write(netconf.join(format!("{net}.conflist")), list.to_string()).unwrap();
    netconf
}

#[test]
fn cnitool_add_traffic_check_restart_del_gc() {
    let test = "cnitool::cnitool_add_traffic_check_restart_del_gc";
    let (cnitool, plugins, testpmd) = match needs() {
        Ok(t) => t,
        Err(why) => return nfv_testutil::skip(test, &why),
    };
    let tmp = TempDir::new("cni", "cnitool");
    let dir = &tmp.0;
    let net = format!("nfvtest{}", std::process::id());
    let _cache = CniCache(net.clone());
    let api = free_api_addr();
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(common::PLUGIN, bin.join("nfvswitch-cni")).unwrap();
    let tool = Tool {
        cnitool,
        netconf: write_conflist(dir, &net, &api, json!({})),
        cni_path: format!("{}:{}", bin.display(), plugins.display()),
    };
    let pods = [
        nfv_testutil::netns::Netns::new("cnia").unwrap(),
        nfv_testutil::netns::Netns::new("cnib").unwrap(),
    ];
    let netns = |i: usize| format!("/var/run/netns/{}", pods[i].name());
    let devinfo = |i: usize| dir.join(format!("devinfo/pod{i}.json"));
    let caps = |i: usize| json!({ "CNIDeviceInfoFile": devinfo(i) });

    let mut node = start_on(dir, &api);
    let mut sockets = Vec::new();
    let mut addresses = Vec::new();
    for i in 0..2 {
        let (ok, out, err) = tool.run("add", &net, &netns(i), &caps(i));
        assert!(ok, "cnitool add: {out} {err}");
        let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        let socket = r["interfaces"][0]["socketPath"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(r["interfaces"][0]["sandbox"], json!(netns(i)), "{r}");
        assert_eq!(r["ips"][0]["interface"], 0, "{r}");
        addresses.push(r["ips"][0]["address"].as_str().unwrap().to_string());
        let info: Value = serde_json::from_slice(&std::fs::read(devinfo(i)).unwrap()).unwrap();
        assert_eq!(info["vhost-user"]["path"], json!(socket), "{info}");
        sockets.push(socket);
    }
    assert_ne!(addresses[0], addresses[1]);
    let ids: Vec<_> = node.node.list_attachments().iter().map(|a| a.id).collect();
    assert_eq!(ids.len(), 2);
    node.node
        .add_flows(&[
            format!("in_port={},actions=output:{}", ids[0], ids[1]),
            format!("in_port={},actions=output:{}", ids[1], ids[0]),
        ])
        .unwrap();
    // Port names in pod order (the node lists attachments by key).
    let attachments = node.node.list_attachments();
    let names: Vec<String> = sockets
        .iter()
        .map(|s| {
            attachments
                .iter()
                .find(|a| a.request.socket == Path::new(s))
                .map(|a| a.port.clone())
                .unwrap_or_else(|| panic!("no attachment on {s}"))
        })
        .collect();

    // Traffic: testpmd on both sockets, looping through the switch.
    let prefix = format!("cnitool{}", std::process::id());
    let socks: Vec<&str> = sockets.iter().map(String::as_str).collect();
    let app = Testpmd::start(&testpmd, &prefix, &socks);
    let flowing = nfv_testutil::wait_until(Duration::from_secs(30), || {
        port_rx(&node, &names[0]) > 1000 && port_rx(&node, &names[1]) > 1000
    });
    assert!(
        flowing,
        "traffic through both pods' ports: rx {} and {}",
        port_rx(&node, &names[0]),
        port_rx(&node, &names[1])
    );
    for i in 0..2 {
        let (ok, out, err) = tool.run("check", &net, &netns(i), &caps(i));
        assert!(ok, "cnitool check: {out} {err}");
    }
    drop(app);

    // The switch restarts on its state file: the ports come back, CHECK
    // (with libcni's cached prevResult) passes, DEL removes them.
    drop(node);
    node = start_on(dir, &api);
    for n in &names {
        assert!(ports(&node).contains(n), "{n} after the restart");
    }
    let (ok, out, err) = tool.run("check", &net, &netns(0), &caps(0));
    assert!(ok, "cnitool check after the restart: {out} {err}");
    for _ in 0..2 {
        let (ok, out, err) = tool.run("del", &net, &netns(0), &caps(0));
        assert!(ok, "cnitool del: {out} {err}");
    }
    assert!(!ports(&node).contains(&names[0]));
    assert!(!devinfo(0).exists());
    let (ok, out, err) = tool.run("del", &net, "/var/run/netns/nfv-never-added", &json!({}));
    assert!(ok, "cnitool del of a pod never added: {out} {err}");

    // GC with no attachment valid: libcni DELs the cached pod B, the
    // plugin's GC finds nothing left; host-local holds no address.
    let (ok, out, err) = tool.run("gc", &net, &netns(1), &json!({}));
    assert!(ok, "cnitool gc: {out} {err}");
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
    let held = std::fs::read_dir(dir.join("ipam").join(&net))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("10."))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(held, 0, "addresses still reserved");
    let (ok, out, err) = tool.run("status", &net, &netns(1), &json!({}));
    assert!(ok, "cnitool status: {out} {err}");

    // A config the plugin refuses: cnitool fails with the plugin's
    // message, and no port is made.
    write_conflist(dir, &net, &api, json!({ "interface": "tap" }));
    let (ok, out, err) = tool.run("add", &net, &netns(0), &json!({}));
    assert!(!ok, "{out}");
    assert!(err.contains("interface \"tap\""), "{err}");
    assert!(!ports(&node).iter().any(|p| p.starts_with("c-")));
    drop(node);
    // STATUS with the node down fails.
    write_conflist(dir, &net, &api, json!({}));
    let (ok, out, err) = tool.run("status", &net, &netns(1), &json!({}));
    assert!(!ok, "cnitool status with the node down: {out} {err}");
}
