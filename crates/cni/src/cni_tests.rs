//! The whole plugin (`run`) on hostile input: stdin, the node's answers
//! (from [`FakeNode`]), the files the runtime names. Every failure must
//! be an error result on stdout with a code and a non-zero exit; nothing
//! may panic.

use crate::error::*;
use crate::fake_node::{FakeNode, Seen};
use crate::run;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("nfv-cni-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("pods")).unwrap();
    std::fs::write(d.join("token"), "s3cret\n").unwrap();
    Scratch(d)
}

const ID: &str = "0123456789abcdef";

/// Runs the plugin: (exit status, stdout as JSON or Null).
fn plugin(command: &str, stdin: &[u8]) -> (i32, Value) {
    plugin_in(command, stdin, "/nonexistent")
}

/// The same with IPAM plugins in `cni_path`.
fn plugin_in(command: &str, stdin: &[u8], cni_path: &str) -> (i32, Value) {
    let env: HashMap<String, String> = [
        ("CNI_COMMAND", command),
        ("CNI_CONTAINERID", ID),
        ("CNI_IFNAME", "net1"),
        ("CNI_NETNS", "/var/run/netns/x"),
        ("CNI_PATH", cni_path),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut out = Vec::new();
    let status = run(env, &mut &stdin[..], &mut out);
    let text = String::from_utf8(out).expect("stdout is UTF-8");
    assert!(text.lines().count() <= 1, "one line at most: {text}");
    let v = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
    };
    (status, v)
}

/// An error result with `code`, as the spec shapes it.
fn assert_error(name: &str, (status, v): &(i32, Value), code: u32) {
    assert_ne!(*status, 0, "{name}: {v}");
    assert_eq!(v["code"], code, "{name}: {v}");
    assert!(
        v["msg"].as_str().is_some_and(|m| !m.is_empty()),
        "{name}: {v}"
    );
    assert!(
        v["cniVersion"].is_string() && v["details"].is_string(),
        "{name}: {v}"
    );
}

fn conf(dir: &Path, api: &str) -> Value {
    json!({ "cniVersion": "1.1.0", "name": "nfv", "type": "nfvswitch-cni", "api": api,
            "apiTokenFile": dir.join("token") })
}

fn attachment(dir: &Path, addresses: Value) -> Value {
    json!({ "container_id": ID, "ifname": "net1", "type": "vhost-user", "mode": "server",
            "network": "nfv", "port": "c-0123456789ab-net1", "id": 1000,
            "socket": dir.join("pods/0123456789ab-net1.sock"), "addresses": addresses })
}

/// A node whose answers are `list` (GET attachments), `put` (PUT, 201
/// with the attachment when None), `info` (GET node); DELETE and GC 200.
fn node(dir: &Path, list: Value, put: Option<(u16, Value)>, info: Value) -> FakeNode {
    let made = attachment(dir, Value::Null);
    FakeNode::start(move |r: &Seen| {
        let (status, body) = match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/api/v1/attachments") => (200, list.clone()),
            ("GET", "/api/v1/node") => (200, info.clone()),
            ("PUT", _) => put.clone().unwrap_or((201, made.clone())),
            ("DELETE", _) => (200, json!({"deleted": true})),
            ("POST", _) => (200, json!({"removed": []})),
            _ => (404, json!({"error": "no such route"})),
        };
        (status, body.to_string())
    })
}

fn methods(n: &FakeNode) -> Vec<String> {
    n.requests().iter().map(|r| r.method.clone()).collect()
}

#[test]
fn garbage_on_stdin_is_an_error_result() {
    let cases: Vec<(&str, &str, Vec<u8>, u32)> = vec![
        ("empty", "ADD", vec![], DECODE),
        ("not JSON", "ADD", b"not a config".to_vec(), DECODE),
        ("binary", "DEL", vec![0xff, 0x00, 0x9c], DECODE),
        ("an array", "CHECK", b"[1, 2]".to_vec(), DECODE),
        ("a number", "GC", b"42".to_vec(), DECODE),
        ("null", "STATUS", b"null".to_vec(), DECODE),
        (
            "truncated",
            "ADD",
            br#"{"cniVersion": "1.1.0", "name": "#.to_vec(),
            DECODE,
        ),
        (
            "deep nesting",
            "ADD",
            [b"[".repeat(100_000), b"]".repeat(100_000)].concat(),
            DECODE,
        ),
        (
            "too large",
            "ADD",
            vec![b' '; crate::netconf::MAX_INPUT + 1],
            DECODE,
        ),
        (
            "hostile version",
            "ADD",
            br#"{"cniVersion": "<script>", "name": "n"}"#.to_vec(),
            INCOMPATIBLE_VERSION,
        ),
        ("no command", "", b"{}".to_vec(), INVALID_ENV),
        ("unknown command", "EXPLODE", b"{}".to_vec(), INVALID_ENV),
    ];
    for (name, command, stdin, code) in cases {
        let out = plugin(command, &stdin);
        assert_error(name, &out, code);
        if name == "hostile version" {
            assert_eq!(out.1["cniVersion"], "1.1.0", "not echoed: {}", out.1);
        }
    }
    let (status, v) = plugin("VERSION", b"\xff garbage");
    assert_eq!(status, 0);
    assert!(v["supportedVersions"].is_array(), "{v}");
}

#[test]
fn a_panic_is_an_error_result_too() {
    struct Exploding;
    impl Read for Exploding {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            panic!("a bug while reading stdin");
        }
    }
    let env = HashMap::from([("CNI_COMMAND".to_string(), "ADD".to_string())]);
    let mut out = Vec::new();
    let status = run(env, &mut Exploding, &mut out);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((status, v["code"].clone()), (1, json!(INTERNAL)), "{v}");
    assert!(v["details"].as_str().unwrap().contains("a bug"), "{v}");
}

#[test]
fn apis_off_the_loopback_are_refused_before_any_call() {
    let tmp = scratch("remote");
    let n = node(&tmp.0, json!({"attachments": []}), None, json!({}));
    let port = n.url.rsplit(':').next().unwrap().to_string();
    for api in [
        "http://10.255.255.1:9180".to_string(),
        "http://169.254.169.254".to_string(),
        format!("http://127.0.0.1:{port}/api/v1/attachments/x/y?"),
        format!("http://127.0.0.1:{port}@10.255.255.1"),
        format!("http://127.0.0.1.nip.io:{port}"),
    ] {
        for command in ["ADD", "DEL", "CHECK", "GC", "STATUS"] {
            let out = plugin(command, conf(&tmp.0, &api).to_string().as_bytes());
            assert_error(&format!("{command} {api}"), &out, INVALID_CONFIG);
        }
    }
    assert!(n.requests().is_empty(), "{:?}", n.requests());
    // allowRemoteApi lets the config name another address (here the fake
    // node under another spelling, so the call is seen).
    let mut c = conf(&tmp.0, &format!("http://127.0.0.2:{port}"));
    assert_error(
        "127.0.0.2",
        &plugin("DEL", c.to_string().as_bytes()),
        INVALID_CONFIG,
    );
    c["allowRemoteApi"] = json!(true);
    let (status, v) = plugin("DEL", c.to_string().as_bytes());
    // 127.0.0.2 reaches the listener on 127.0.0.1 only where the kernel
    // routes all of 127/8 to lo (Linux does): then the DEL succeeds.
    assert!(status == 0 || v["code"] == TRY_AGAIN, "{v}");
}

#[test]
fn malformed_addresses_from_the_node_are_an_error_not_a_panic() {
    let tmp = scratch("addresses");
    let mut c = conf(&tmp.0, "");
    c["ipam"] = json!({"type": "host-local"});
    for addresses in [
        json!("garbage"),
        json!([1, 2]),
        json!(7),
        json!(true),
        json!({"ips": "x"}),
        json!({"ips": [1, 2]}),
        json!({"ips": [{"gateway": "10.0.0.1"}]}),
        json!({"ips": [{"address": ["10.0.0.2/24"]}]}),
        json!({"routes": [1]}),
        json!({"routes": {"dst": "0.0.0.0/0"}}),
        json!({"dns": ["10.0.0.1"]}),
    ] {
        // Kept by the node from an earlier ADD (GET attachments).
        let list = json!({"attachments": [attachment(&tmp.0, addresses.clone())]});
        let n = node(&tmp.0, list, None, json!({}));
        c["api"] = json!(n.url);
        let out = plugin("ADD", c.to_string().as_bytes());
        assert_error(&format!("kept {addresses}"), &out, NODE_ANSWER);
        assert_eq!(methods(&n), ["GET"], "no port asked for, no IPAM run");
        // Answered by the PUT (the node changed between the two calls).
        let n = node(
            &tmp.0,
            json!({"attachments": []}),
            Some((200, attachment(&tmp.0, addresses.clone()))),
            json!({}),
        );
        c["api"] = json!(n.url);
        let mut no_ipam = c.clone();
        no_ipam.as_object_mut().unwrap().remove("ipam");
        let (status, v) = plugin("ADD", no_ipam.to_string().as_bytes());
        assert_eq!(status, 0, "without IPAM the addresses are not read: {v}");
    }
    // Without IPAM in the config, kept addresses are not read at all.
    let list = json!({"attachments": [attachment(&tmp.0, json!("garbage"))]});
    let n = node(&tmp.0, list, None, json!({}));
    let (status, v) = plugin("ADD", conf(&tmp.0, &n.url).to_string().as_bytes());
    assert_eq!(status, 0, "{v}");
}

/// An IPAM plugin (a shell script in `dir/bin`) that prints `result`
/// for ADD and logs every command to `dir/ipam.log`.
fn fake_ipam(dir: &Path, result: &Value) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("fake-ipam");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > /dev/null\necho \"$CNI_COMMAND\" >> {}\n[ \"$CNI_COMMAND\" = ADD ] && echo '{result}'\nexit 0\n",
            dir.join("ipam.log").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin.display().to_string()
}

fn ipam_log(dir: &Path) -> Vec<String> {
    let log = std::fs::read_to_string(dir.join("ipam.log")).unwrap_or_default();
    let _ = std::fs::remove_file(dir.join("ipam.log"));
    log.lines().map(str::to_string).collect()
}

#[test]
fn malformed_addresses_from_ipam_or_the_put_release_what_was_taken() {
    let tmp = scratch("ipam-shape");
    let mut c = conf(&tmp.0, "");
    c["ipam"] = json!({"type": "fake-ipam"});
    // The IPAM plugin answers garbage: error, its addresses released, no
    // port asked for.
    let cni_path = fake_ipam(&tmp.0, &json!({"ips": [1, 2]}));
    let n = node(&tmp.0, json!({"attachments": []}), None, json!({}));
    c["api"] = json!(n.url);
    let out = plugin_in("ADD", c.to_string().as_bytes(), &cni_path);
    assert_error("IPAM garbage", &out, IPAM_FAILED);
    assert_eq!(ipam_log(&tmp.0), ["ADD", "DEL"]);
    assert_eq!(methods(&n), ["GET"]);
    // A good IPAM result, but the node's PUT answers garbage addresses:
    // the port just made is removed, the addresses released.
    let cni_path = fake_ipam(&tmp.0, &json!({"ips": [{"address": "10.0.0.2/24"}]}));
    let n = node(
        &tmp.0,
        json!({"attachments": []}),
        Some((201, attachment(&tmp.0, json!({"ips": "garbage"})))),
        json!({}),
    );
    c["api"] = json!(n.url);
    let out = plugin_in("ADD", c.to_string().as_bytes(), &cni_path);
    assert_error("PUT garbage", &out, NODE_ANSWER);
    assert_eq!(ipam_log(&tmp.0), ["ADD", "DEL"]);
    assert_eq!(methods(&n), ["GET", "PUT", "DELETE"]);
    // Both well formed: the address is on our interface.
    let n = node(
        &tmp.0,
        json!({"attachments": []}),
        Some((
            201,
            attachment(&tmp.0, json!({"ips": [{"address": "10.0.0.2/24"}]})),
        )),
        json!({}),
    );
    c["api"] = json!(n.url);
    let (status, v) = plugin_in("ADD", c.to_string().as_bytes(), &cni_path);
    assert_eq!(status, 0, "{v}");
    assert_eq!(
        v["ips"],
        json!([{"address": "10.0.0.2/24", "interface": 0}]),
        "{v}"
    );
    assert_eq!(ipam_log(&tmp.0), ["ADD"]);
}

#[test]
fn malformed_node_answers_are_an_error_not_a_panic() {
    let tmp = scratch("answers");
    let ours = attachment(&tmp.0, Value::Null);
    let mut relative = ours.clone();
    relative["socket"] = json!("0123456789ab-net1.sock");
    let mut no_socket = ours.clone();
    no_socket.as_object_mut().unwrap().remove("socket");
    let empty = json!({"attachments": []});
    // (name, GET attachments, PUT answer, code, the calls made)
    type Case<'a> = (&'a str, Value, Option<(u16, Value)>, u32, &'a [&'a str]);
    let cases: Vec<Case> = vec![
        ("list a string", json!("x"), None, NODE_ANSWER, &["GET"]),
        (
            "list of the wrong type",
            json!({"attachments": 1}),
            None,
            NODE_ANSWER,
            &["GET"],
        ),
        (
            "list an array",
            json!([ours.clone()]),
            None,
            NODE_ANSWER,
            &["GET"],
        ),
        (
            "ours without a socket",
            json!({"attachments": [no_socket.clone()]}),
            None,
            NODE_ANSWER,
            &["GET"],
        ),
        (
            "put not JSON",
            empty.clone(),
            Some((201, json!("<html>"))),
            NODE_ANSWER,
            &["GET", "PUT", "DELETE"],
        ),
        (
            "put relative socket",
            empty.clone(),
            Some((201, relative)),
            NODE_ANSWER,
            &["GET", "PUT", "DELETE"],
        ),
        // 200: the port was there before this call; it is not removed.
        (
            "put without socket",
            empty.clone(),
            Some((200, no_socket)),
            NODE_ANSWER,
            &["GET", "PUT"],
        ),
        (
            "put refused",
            empty.clone(),
            Some((400, json!({"error": "socket: not a name"}))),
            INVALID_CONFIG,
            &["GET", "PUT"],
        ),
        (
            "put conflict",
            empty.clone(),
            Some((409, json!(null))),
            INVALID_CONFIG,
            &["GET", "PUT"],
        ),
        (
            "put unauthorized",
            empty.clone(),
            Some((401, json!({"error": "no token"}))),
            NOT_AUTHORIZED,
            &["GET", "PUT"],
        ),
        (
            "put forbidden",
            empty.clone(),
            Some((403, json!({"error": "bad token"}))),
            NOT_AUTHORIZED,
            &["GET", "PUT"],
        ),
        (
            "node failed",
            empty,
            Some((500, json!({"error": "state file"}))),
            TRY_AGAIN,
            &["GET", "PUT"],
        ),
    ];
    for (name, list, put, code, calls) in cases {
        let n = node(&tmp.0, list, put, json!({}));
        let out = plugin("ADD", conf(&tmp.0, &n.url).to_string().as_bytes());
        assert_error(name, &out, code);
        assert_eq!(methods(&n), calls, "{name}");
        if code == NOT_AUTHORIZED {
            assert!(
                out.1["details"].as_str().unwrap().contains("token"),
                "{}",
                out.1
            );
        }
    }
    // A node that is not there: try again later.
    let n = node(&tmp.0, json!({}), None, json!({}));
    let url = n.url.clone();
    drop(n);
    assert_error(
        "no node",
        &plugin("ADD", conf(&tmp.0, &url).to_string().as_bytes()),
        TRY_AGAIN,
    );
}

#[test]
fn prev_results_of_the_wrong_shape_are_decode_errors() {
    let tmp = scratch("prev");
    let n = node(&tmp.0, json!({"attachments": []}), None, json!({}));
    for prev in [
        json!("x"),
        json!({"interfaces": "eth0"}),
        json!({"interfaces": [1]}),
        json!({"ips": {"address": "10.0.0.1/24"}}),
        json!({"routes": [null]}),
    ] {
        let mut c = conf(&tmp.0, &n.url);
        c["prevResult"] = prev.clone();
        for command in ["ADD", "CHECK"] {
            assert_error(
                &format!("{command} {prev}"),
                &plugin(command, c.to_string().as_bytes()),
                DECODE,
            );
        }
    }
    assert!(n.requests().is_empty(), "nothing asked of the node");
}

#[test]
fn the_token_goes_with_every_call_and_the_socket_is_a_name() {
    let tmp = scratch("token");
    let n = node(&tmp.0, json!({"attachments": []}), None, json!({}));
    let c = conf(&tmp.0, &n.url);
    let (status, v) = plugin("ADD", c.to_string().as_bytes());
    assert_eq!(status, 0, "{v}");
    let socket = tmp.0.join("pods/0123456789ab-net1.sock");
    assert_eq!(v["interfaces"][0]["socketPath"], json!(socket), "{v}");
    for command in ["DEL", "GC"] {
        assert_eq!(plugin(command, c.to_string().as_bytes()).0, 0);
    }
    let seen = n.requests();
    assert_eq!(methods(&n), ["GET", "PUT", "DELETE", "POST"]);
    for r in &seen {
        assert_eq!(r.authorization.as_deref(), Some("Bearer s3cret"), "{r:?}");
    }
    let put: Value = serde_json::from_str(&seen[1].body).unwrap();
    assert_eq!(put["socket"], "0123456789ab-net1.sock", "{put}");
    assert_eq!(seen[1].path, "/api/v1/attachments/0123456789abcdef/net1");
    assert!(!tmp.0.join("pods/0123456789ab-net1.sock").exists());

    // No token file yet (the node has not started): try again later, and
    // nothing is changed; a GET still goes out, without a token.
    let mut missing = c.clone();
    missing["apiTokenFile"] = json!(tmp.0.join("not-yet"));
    let n = node(&tmp.0, json!({"attachments": []}), None, json!({}));
    missing["api"] = json!(n.url);
    for command in ["ADD", "DEL", "GC"] {
        assert_error(
            command,
            &plugin(command, missing.to_string().as_bytes()),
            TRY_AGAIN,
        );
    }
    assert_eq!(methods(&n), ["GET"]);
    assert_eq!(n.requests()[0].authorization, None);
    // STATUS: the node answers but ADD could not work yet.
    assert_error(
        "STATUS",
        &plugin("STATUS", missing.to_string().as_bytes()),
        UNAVAILABLE,
    );
    // A token file that is not usable: invalid config.
    std::fs::write(tmp.0.join("empty"), "\n").unwrap();
    missing["apiTokenFile"] = json!(tmp.0.join("empty"));
    assert_error(
        "empty token",
        &plugin("ADD", missing.to_string().as_bytes()),
        INVALID_CONFIG,
    );
}

#[test]
fn socket_dir_must_be_the_nodes() {
    let tmp = scratch("socketdir");
    let pods = tmp.0.join("pods");
    std::os::unix::fs::symlink(&pods, tmp.0.join("pods-link")).unwrap();
    let info = json!({"name": "n", "socket_dir": pods});
    let cases: Vec<(&str, Value, PathBuf, Option<u32>)> = vec![
        ("same", info.clone(), pods.clone(), None),
        ("trailing slash", info.clone(), tmp.0.join("pods/"), None),
        (
            "through a symlink",
            info.clone(),
            tmp.0.join("pods-link"),
            None,
        ),
        (
            "another directory",
            info.clone(),
            tmp.0.join("elsewhere"),
            Some(INVALID_CONFIG),
        ),
        (
            "a parent",
            info.clone(),
            tmp.0.clone(),
            Some(INVALID_CONFIG),
        ),
        (
            "dot-dot",
            info.clone(),
            tmp.0.join("pods/../other"),
            Some(INVALID_CONFIG),
        ),
        (
            "node has none",
            json!({"name": "n", "socket_dir": null}),
            pods.clone(),
            Some(INVALID_CONFIG),
        ),
        (
            "node says nothing",
            json!({"name": "n"}),
            pods.clone(),
            Some(INVALID_CONFIG),
        ),
        (
            "node answers garbage",
            json!(["x"]),
            pods.clone(),
            Some(NODE_ANSWER),
        ),
        (
            "node relative",
            json!({"socket_dir": "pods"}),
            pods.clone(),
            Some(NODE_ANSWER),
        ),
    ];
    for (name, info, dir, code) in cases {
        let n = node(&tmp.0, json!({"attachments": []}), None, info);
        let mut c = conf(&tmp.0, &n.url);
        c["socketDir"] = json!(dir);
        let out = plugin("ADD", c.to_string().as_bytes());
        match code {
            None => assert_eq!(out.0, 0, "{name}: {}", out.1),
            Some(code) => {
                assert_error(name, &out, code);
                assert_eq!(methods(&n), ["GET"], "{name}: no port asked for");
            }
        }
    }
    assert!(
        !tmp.0.join("elsewhere").exists(),
        "the plugin makes no directory"
    );
}

#[test]
fn del_removes_its_own_device_info_file_and_nothing_else() {
    let tmp = scratch("del-devinfo");
    let n = node(&tmp.0, json!({"attachments": []}), None, json!({}));
    let mut c = conf(&tmp.0, &n.url);
    let devinfo = tmp.0.join("devinfo/net1.json");
    c["runtimeConfig"] = json!({"CNIDeviceInfoFile": devinfo});
    // ADD writes it, with the marker; DEL removes it.
    assert_eq!(plugin("ADD", c.to_string().as_bytes()).0, 0);
    let info: Value = serde_json::from_slice(&std::fs::read(&devinfo).unwrap()).unwrap();
    assert_eq!(
        info["nfvswitch"],
        json!({"container_id": ID, "ifname": "net1"})
    );
    assert_eq!(info["vhost-user"]["mode"], "client");
    assert_eq!(plugin("DEL", c.to_string().as_bytes()), (0, Value::Null));
    assert!(!devinfo.exists());

    // Files DEL must leave alone; DEL itself succeeds.
    let victim = tmp.0.join("victim");
    std::fs::write(&victim, "root's data").unwrap();
    let other =
        json!({"type": "vhost-user", "nfvswitch": {"container_id": "other", "ifname": "net1"}});
    type Make<'a> = Box<dyn Fn(&Path) + 'a>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "a file with other content",
            Box::new(|p| std::fs::write(p, "hello").unwrap()),
        ),
        (
            "another attachment's",
            Box::new(move |p| std::fs::write(p, other.to_string()).unwrap()),
        ),
        (
            "a symlink",
            Box::new(|p| std::os::unix::fs::symlink(&victim, p).unwrap()),
        ),
    ];
    for (name, make) in cases {
        let _ = std::fs::remove_file(&devinfo);
        make(&devinfo);
        let before = std::fs::symlink_metadata(&devinfo).unwrap();
        assert_eq!(
            plugin("DEL", c.to_string().as_bytes()),
            (0, Value::Null),
            "{name}"
        );
        let after = std::fs::symlink_metadata(&devinfo).expect(name);
        assert_eq!(before.len(), after.len(), "{name}");
        // ADD will not write over it either, unless it is a device-info
        // file the plugin wrote (for another attachment: the runtime
        // reuses a path).
        let added = plugin("ADD", c.to_string().as_bytes());
        if name == "another attachment's" {
            assert_eq!(added.0, 0, "{}", added.1);
            assert_eq!(plugin("DEL", c.to_string().as_bytes()).0, 0);
            assert!(!devinfo.exists(), "{name}: ours now, removed");
        } else {
            assert_error(name, &added, DEVICE_INFO_FOREIGN);
        }
    }
    assert_eq!(
        std::fs::read_to_string(tmp.0.join("victim")).unwrap(),
        "root's data"
    );
}
