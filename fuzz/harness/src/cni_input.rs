//! Target `cni_input`: everything the CNI plugin (`nfvswitch-cni`) reads
//! from outside, on hostile bytes. The same input goes
//!
//! * to the whole plugin (`nfvswitch_cni::run`) as stdin, for the commands
//!   that stop before calling the node (VERSION, and ADD, DEL and CHECK
//!   without `CNI_CONTAINERID`: the key is checked before any call, so
//!   nothing leaves the process);
//! * to the parsers of the node's answers (attachment list, one
//!   attachment, `GET /api/v1/node`, a refusal), of an IPAM plugin's
//!   output and result, and of `prevResult`, and through the result ADD
//!   builds from them;
//! * split at its first newline, to the attachment key's checks.
//!
//! Checks: no panic (the plugin catches panics and answers code 999, so
//! that code is a failure too); every answer of `run` is one JSON line, an
//! error result exactly when the exit status is not 0; a key accepted
//! gives a socket name without a path separator.

use nfvswitch_cni::error::INTERNAL;
use nfvswitch_cni::ipam::{IpamResult, parse_output};
use nfvswitch_cni::key::Key;
use nfvswitch_cni::netconf::NetConf;
use nfvswitch_cni::node::{find_attachment, parse_attachment, parse_node_info, refused};
use nfvswitch_cni::result::CniResult;
use serde_json::{Map, Value};
use std::collections::HashMap;

pub fn run(data: &[u8]) {
    for command in ["VERSION", "ADD", "DEL", "CHECK"] {
        whole_plugin(command, data);
    }
    if let Ok(c) = NetConf::parse(data)
        && let Ok(prev) = CniResult::from_prev(c.prev_result.as_ref())
    {
        let _ = prev.finish(&c.cni_version);
    }
    if let Ok(v) = serde_json::from_slice::<Value>(data) {
        node_answers(&v);
        results(&v);
    }
    for success in [true, false] {
        let _ = parse_output("fuzz-ipam", "ADD", success, data);
    }
    let text = String::from_utf8_lossy(data);
    let (id, ifname) = text.split_once('\n').unwrap_or((&text, "net1"));
    if let Ok(k) = Key::new(id, ifname) {
        assert!(!k.socket_name().contains('/'), "{k:?}");
        assert!(k.path().starts_with("/api/v1/attachments/"), "{k:?}");
    }
}

fn whole_plugin(command: &str, data: &[u8]) {
    let env = HashMap::from([
        ("CNI_COMMAND".to_string(), command.to_string()),
        ("CNI_IFNAME".to_string(), "net1".to_string()),
    ]);
    let mut out = Vec::new();
    let status = nfvswitch_cni::run(env, &mut &data[..], &mut out);
    let text = String::from_utf8(out).expect("stdout is UTF-8");
    assert_eq!(text.lines().count(), 1, "{command}: one line: {text}");
    let v: Value = serde_json::from_str(&text).expect("stdout is JSON");
    let code = v.get("code").and_then(Value::as_u64);
    assert_ne!(code, Some(u64::from(INTERNAL)), "{command}: a panic: {v}");
    assert_eq!(status != 0, code.is_some(), "{command}: {status} {v}");
    if command == "VERSION" {
        assert_eq!(status, 0, "{v}");
    }
}

fn node_answers(v: &Value) {
    let key = Key::new("0123456789abcdef", "net1").expect("a valid key");
    if let Ok(Some(a)) = find_attachment(v, &key)
        && let Some(kept) = &a.addresses
    {
        let _ = IpamResult::parse(kept);
    }
    let _ = parse_attachment(v, "fuzz");
    let _ = parse_node_info(v);
    for status in [400, 401, 500] {
        let e = refused(status, v);
        assert!(!e.msg.is_empty());
    }
}

fn results(v: &Value) {
    let Ok(mut result) = CniResult::from_prev(Some(v)) else {
        return;
    };
    let _ = result.socket_of("net1");
    let index = result.push_interface(Map::new());
    if let Ok(ipam) = IpamResult::parse(v) {
        result.merge(&ipam, index);
    }
    let out = result.finish("1.1.0");
    assert!(out.get("ips").is_some_and(Value::is_array), "{out}");
}
