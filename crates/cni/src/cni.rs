//! The plugin's logic over its inputs (environment, stdin) and output
//! (stdout): one function per CNI command, every failure an error result
//! with the spec's code, even a bug (a panic is caught and answered).

use crate::device_info;
use crate::error::{
    ATTACHMENT_MISSING, CniError, DECODE, INTERNAL, INVALID_CONFIG, INVALID_ENV, IO_ERROR,
    IPAM_FAILED, NODE_ANSWER, UNAVAILABLE, err,
};
use crate::ipam::{Ipam, IpamResult};
use crate::key::{Key, need};
use crate::netconf::{MAX_INPUT, NetConf, SUPPORTED};
use crate::node::{Method, Node, NodeAttachment, refused};
use crate::result::CniResult;
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// Runs one command; returns the exit status (0, or 1 with an error
/// result on stdout).
pub fn run(env: HashMap<String, String>, stdin: &mut dyn Read, stdout: &mut dyn Write) -> i32 {
    let mut input = Vec::new();
    // A panic is a bug; the runtime still gets an error result rather
    // than an exit status and nothing to read.
    let out = catch_unwind(AssertUnwindSafe(|| {
        let read = read_input(stdin, &mut input);
        respond(&env, read.map(|()| input.as_slice()))
    }))
    .unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(err(INTERNAL, "nfvswitch-cni failed (a bug)", what))
    });
    match out {
        Ok(Value::Null) => 0,
        Ok(v) => {
            let _ = writeln!(stdout, "{v}");
            0
        }
        Err(e) => {
            let v = json!({ "cniVersion": version_of(&input), "code": e.code, "msg": e.msg,
                            "details": e.details });
            let _ = writeln!(stdout, "{v}");
            1
        }
    }
}

fn read_input(stdin: &mut dyn Read, input: &mut Vec<u8>) -> Result<(), CniError> {
    stdin
        .take(MAX_INPUT as u64 + 1)
        .read_to_end(input)
        .map_err(|e| {
            err(
                IO_ERROR,
                "cannot read the network config from stdin",
                e.to_string(),
            )
        })?;
    if input.len() > MAX_INPUT {
        return Err(err(
            DECODE,
            format!("the network config is larger than {MAX_INPUT} bytes"),
            "",
        ));
    }
    Ok(())
}

/// The version an error result names: the config's when it looks like a
/// version (the runtime decodes the answer by it), else the newest.
fn version_of(input: &[u8]) -> String {
    serde_json::from_slice::<Value>(input)
        .ok()
        .and_then(|v| v.get("cniVersion")?.as_str().map(str::to_string))
        .filter(|v| v.len() <= 16 && v.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "1.1.0".into())
}

fn respond(
    env: &HashMap<String, String>,
    input: Result<&[u8], CniError>,
) -> Result<Value, CniError> {
    let command = env.get("CNI_COMMAND").map(String::as_str).unwrap_or("");
    match command {
        "VERSION" => Ok(json!({ "cniVersion": "1.1.0", "supportedVersions": SUPPORTED })),
        "ADD" | "DEL" | "CHECK" | "GC" | "STATUS" => {
            let input = input?;
            let c = NetConf::parse(input)?;
            let ipam = Ipam::from(c.ipam.as_ref(), env, input)?;
            let ipam = ipam.as_ref();
            match command {
                "ADD" => add(&c, env, ipam),
                "DEL" => del(&c, env, ipam),
                "CHECK" => check(&c, env, ipam),
                "GC" => gc(&c, ipam),
                _ => status(&c, ipam),
            }
        }
        other => Err(err(
            INVALID_ENV,
            format!("CNI_COMMAND {other:?} is not one of ADD, DEL, CHECK, GC, STATUS, VERSION"),
            "",
        )),
    }
}

/// A kept or new IPAM result of the wrong shape.
fn bad_addresses(from: &str, why: String, code: u32) -> CniError {
    err(
        code,
        format!(
            "the addresses {from} are not an IPAM result; DEL this attachment and ADD it again"
        ),
        why,
    )
}

fn add(c: &NetConf, env: &HashMap<String, String>, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    let key = Key::from_env(env)?;
    let netns = need(env, "CNI_NETNS")?;
    // Everything from stdin is checked before the node is asked anything.
    let prev = CniResult::from_prev(c.prev_result.as_ref())?;
    let node = Node::of(c);
    if let Some(dir) = &c.socket_dir {
        same_socket_dir(&node, dir)?;
    }
    let known = node.attachment(&key)?;
    // Addresses: those the node kept from an earlier ADD of this key (an
    // IPAM plugin refuses to allocate twice), else the IPAM plugin's; a
    // failure after a new allocation releases it (spec section 4: a
    // delegated plugin that fails ADD is called with DEL).
    let kept = known.as_ref().and_then(|a| a.addresses.as_ref());
    let (addresses, allocated) = match (ipam, kept) {
        (Some(_), Some(v)) => {
            let parsed = IpamResult::parse(v)
                .map_err(|why| bad_addresses("the node kept for it", why, NODE_ANSWER))?;
            (Some((v.clone(), parsed)), false)
        }
        (Some(i), None) => match i.exec("ADD").and_then(|v| {
            let parsed = IpamResult::parse(&v)
                .map_err(|why| bad_addresses("the IPAM plugin answered", why, IPAM_FAILED))?;
            Ok((v, parsed))
        }) {
            Ok(a) => (Some(a), true),
            Err(e) => {
                if known.is_none() {
                    let _ = i.exec("DEL");
                }
                return Err(e);
            }
        },
        (None, _) => (None, false),
    };
    let answer = attach(c, &node, &key, addresses.as_ref().map(|(v, _)| v), |port| {
        answer(prev, c, &key, netns, port, ipam.is_some())
    });
    match (answer, ipam) {
        (Err(e), Some(i)) if allocated => {
            let _ = i.exec("DEL");
            Err(e)
        }
        (answer, _) => answer,
    }
}

/// The result: the chain's so far, with our interface (and the addresses
/// the node keeps for it, which are the first ADD's) added.
fn answer(
    mut result: CniResult,
    c: &NetConf,
    key: &Key,
    netns: &str,
    port: &NodeAttachment,
    with_ipam: bool,
) -> Result<Value, CniError> {
    let mut iface = Map::new();
    iface.insert("name".into(), json!(key.ifname));
    iface.insert("sandbox".into(), json!(netns));
    iface.insert("socketPath".into(), json!(port.socket));
    let index = result.push_interface(iface);
    if with_ipam && let Some(kept) = &port.addresses {
        let addresses = IpamResult::parse(kept)
            .map_err(|why| bad_addresses("the node answered", why, NODE_ANSWER))?;
        result.merge(&addresses, index);
    }
    Ok(result.finish(&c.cni_version))
}

/// The config's `socketDir` must be where the node makes sockets: the
/// pods mount it, and the node alone decides where a socket goes.
fn same_socket_dir(node: &Node, dir: &Path) -> Result<(), CniError> {
    let Some(theirs) = node.info()?.socket_dir else {
        return Err(err(
            INVALID_CONFIG,
            "the node has no socket directory ([node] socket_dir), so it makes no ports for \
             containers",
            "",
        ));
    };
    // Compared as the file system resolves them (a symlinked /var/run,
    // a trailing slash); a path that does not resolve is compared as
    // written.
    let resolve = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    if resolve(dir) != resolve(&theirs) {
        return Err(err(
            INVALID_CONFIG,
            format!(
                "socketDir {} is not the node's socket directory {}",
                dir.display(),
                theirs.display()
            ),
            "set socketDir to the node's [node] socket_dir, or leave it out",
        ));
    }
    Ok(())
}

/// Asks the node for the port (the attachment it answers: the addresses
/// it keeps are the first ADD's), makes the result from it and writes the
/// device-info file; a port made by this call is removed again if either
/// fails.
fn attach(
    c: &NetConf,
    node: &Node,
    key: &Key,
    addresses: Option<&Value>,
    result: impl FnOnce(&NodeAttachment) -> Result<Value, CniError>,
) -> Result<Value, CniError> {
    // `type` goes as "vhost-user" or "memif" whichever spelling the
    // config used: the names every node's attach API reads.
    let mut req = json!({ "type": c.interface, "mode": c.switch_role,
                          "socket": key.socket_name(), "network": c.name });
    if let Some(a) = addresses {
        req["addresses"] = a.clone();
    }
    let (made, port) = node.attach(key, &req)?;
    let done = result(&port).and_then(|answer| {
        if let Some(file) = &c.runtime_config.device_info_file {
            let info = device_info::describe(c.interface, &c.switch_role, &port.socket, key);
            device_info::write(file, &info, key)?;
        }
        Ok(answer)
    });
    if done.is_err() && made {
        let _ = node.detach(key);
    }
    done
}

/// Removes the port (success when there is none), the device-info file
/// (only the one ADD wrote) and the addresses: each is tried whatever the
/// others did (DEL is best effort); the first error is answered.
fn del(c: &NetConf, env: &HashMap<String, String>, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    let key = Key::from_env(env)?;
    let port = Node::of(c).detach(&key);
    let file = c
        .runtime_config
        .device_info_file
        .as_deref()
        .map_or(Ok(false), |f| device_info::remove_if_ours(f, &key));
    let addresses = ipam.map_or(Ok(Value::Null), |i| i.exec("DEL"));
    port.and(file).and(addresses).map(|_| Value::Null)
}

/// The node has the port, the socket is there (the switch as server), the
/// port is the one `prevResult` names, and the IPAM plugin agrees.
fn check(
    c: &NetConf,
    env: &HashMap<String, String>,
    ipam: Option<&Ipam>,
) -> Result<Value, CniError> {
    let key = Key::from_env(env)?;
    let prev = CniResult::from_prev(c.prev_result.as_ref())?;
    let Some(a) = Node::of(c).attachment(&key)? else {
        return Err(err(
            ATTACHMENT_MISSING,
            format!(
                "{}/{} has no port on the node",
                key.container_id, key.ifname
            ),
            "",
        ));
    };
    let socket = a.socket.display().to_string();
    if c.switch_role == "server" && !a.socket.exists() {
        return Err(err(
            ATTACHMENT_MISSING,
            format!("the port's socket {socket} is missing"),
            "",
        ));
    }
    if let Some(p) = prev.socket_of(&key.ifname)
        && p != socket
    {
        return Err(err(
            ATTACHMENT_MISSING,
            format!("prevResult gave socket {p}; the node's port is on {socket}"),
            "",
        ));
    }
    if let Some(i) = ipam {
        i.exec("CHECK")?;
    }
    Ok(Value::Null)
}

/// Removes this network's attachments not in the valid list, then
/// forwards GC to the IPAM plugin (spec: GC goes to delegated plugins).
fn gc(c: &NetConf, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    let valid: Vec<Value> = c
        .valid_attachments
        .as_ref()
        .or(c.attachments.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|a| json!({ "container_id": a.container_id, "ifname": a.ifname }))
        .collect();
    let ports = Node::of(c)
        .call(
            Method::Post,
            "/api/v1/attachments/gc",
            Some(&json!({ "network": c.name, "valid": valid })),
        )
        .and_then(|(status, v)| {
            if status == 200 {
                Ok(())
            } else {
                Err(refused(status, &v))
            }
        });
    let addresses = ipam.map_or(Ok(Value::Null), |i| i.exec("GC"));
    ports.and(addresses).map(|_| Value::Null)
}

/// Up when the node answers, its token is there for the ADDs to come, and
/// the IPAM plugin (if any) says it is up.
fn status(c: &NetConf, ipam: Option<&Ipam>) -> Result<Value, CniError> {
    let node = Node::of(c);
    match node.call(Method::Get, "/api/v1/node", None) {
        Ok((200, _)) => {}
        Ok((s, _)) => {
            return Err(err(
                UNAVAILABLE,
                format!("the nfvswitch node answers HTTP {s}"),
                "",
            ));
        }
        Err(e) => return Err(err(UNAVAILABLE, e.msg, e.details)),
    }
    if let Err(e) = node.has_token() {
        return Err(err(UNAVAILABLE, e.msg, e.details));
    }
    if let Some(i) = ipam {
        i.exec("STATUS")?;
    }
    Ok(Value::Null)
}
