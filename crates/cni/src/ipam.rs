//! IP address management delegated to a standard IPAM plugin (CNI spec
//! 1.1.0, section 4): the plugin named by `ipam.type` is looked up in
//! `CNI_PATH` and run with the environment and the whole network config
//! this plugin received (only `CNI_COMMAND` may differ); its stderr is
//! ours; its error result is passed up with its own code.

use crate::cni::{CniError, INVALID_CONFIG, IO_ERROR, err};
use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Plugin-specific: the IPAM plugin failed without an error result.
pub const IPAM_FAILED: u32 = 101;

/// The IPAM plugin a network config names, if any.
pub struct Ipam<'a> {
    pub kind: &'a str,
    env: &'a HashMap<String, String>,
    input: &'a str,
}

impl<'a> Ipam<'a> {
    /// `ipam` from the parsed config: `None` without one; refused when
    /// `type` is missing or is not a plain file name.
    pub fn from(
        ipam: Option<&'a Value>,
        env: &'a HashMap<String, String>,
        input: &'a str,
    ) -> Result<Option<Ipam<'a>>, CniError> {
        let Some(ipam) = ipam else {
            return Ok(None);
        };
        let kind = ipam["type"].as_str().unwrap_or_default();
        if kind.is_empty() || kind.contains('/') || kind == "." || kind == ".." {
            return Err(err(
                INVALID_CONFIG,
                "ipam.type must name an IPAM plugin in CNI_PATH",
                ipam.to_string(),
            ));
        }
        Ok(Some(Ipam { kind, env, input }))
    }

    fn binary(&self) -> Result<PathBuf, CniError> {
        let path = self.env.get("CNI_PATH").map(String::as_str).unwrap_or("");
        path.split(':')
            .filter(|d| !d.is_empty())
            .map(|d| PathBuf::from(d).join(self.kind))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                err(
                    INVALID_CONFIG,
                    format!("IPAM plugin {:?} is not in CNI_PATH", self.kind),
                    format!("CNI_PATH={path}"),
                )
            })
    }

    /// Runs the IPAM plugin with `command`; its result (`Null` when it
    /// prints nothing, as DEL, CHECK, GC and STATUS do).
    pub fn exec(&self, command: &str) -> Result<Value, CniError> {
        let bin = self.binary()?;
        let io = |what: &str, e: std::io::Error| {
            err(
                IO_ERROR,
                format!("IPAM plugin {}: {what}", bin.display()),
                e.to_string(),
            )
        };
        let mut child = Command::new(&bin)
            .env_clear()
            .envs(self.env)
            .env("CNI_COMMAND", command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| io("cannot start", e))?;
        let written = child
            .stdin
            .take()
            .map(|mut s| s.write_all(self.input.as_bytes()));
        let out = child.wait_with_output().map_err(|e| io("cannot wait", e))?;
        if let Some(Err(e)) = written
            && out.status.success()
        {
            return Err(io("cannot write its stdin", e));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let parsed: Option<Value> = serde_json::from_str(text.trim()).ok();
        if out.status.success() {
            return match parsed {
                Some(v) => Ok(v),
                None if text.trim().is_empty() => Ok(Value::Null),
                None => Err(err(
                    IPAM_FAILED,
                    format!(
                        "IPAM plugin {} {command}: its result is not JSON",
                        self.kind
                    ),
                    text.into_owned(),
                )),
            };
        }
        Err(match parsed {
            Some(v) if v["code"].as_u64().is_some() => err(
                v["code"].as_u64().unwrap_or(0) as u32,
                format!(
                    "IPAM plugin {} {command}: {}",
                    self.kind,
                    v["msg"].as_str().unwrap_or("failed")
                ),
                v["details"].as_str().unwrap_or_default(),
            ),
            _ => err(
                IPAM_FAILED,
                format!(
                    "IPAM plugin {} {command} failed ({})",
                    self.kind, out.status
                ),
                text.into_owned(),
            ),
        })
    }
}

/// Puts an IPAM result's `ips`, `routes` and `dns` into `result`, the IPs
/// on interface `index` (the IPAM result has no interfaces).
pub fn merge(result: &mut Value, ipam: &Value, index: usize) {
    let ips = ipam["ips"].as_array().cloned().unwrap_or_default();
    for mut ip in ips {
        ip["interface"] = Value::from(index);
        push(result, "ips", ip);
    }
    for r in ipam["routes"].as_array().cloned().unwrap_or_default() {
        push(result, "routes", r);
    }
    if ipam["dns"].as_object().is_some_and(|d| !d.is_empty()) {
        result["dns"] = ipam["dns"].clone();
    }
}

fn push(result: &mut Value, key: &str, v: Value) {
    match result[key].as_array_mut() {
        Some(a) => a.push(v),
        None => result[key] = Value::Array(vec![v]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ipam_results_land_on_our_interface() {
        let mut result = json!({
            "cniVersion": "1.1.0",
            "interfaces": [{"name": "eth0"}, {"name": "net1", "socketPath": "/run/a.sock"}],
            "ips": [{"address": "10.0.0.2/24", "interface": 0}],
        });
        let ipam = json!({
            "cniVersion": "1.1.0",
            "ips": [{"address": "10.9.0.5/24", "gateway": "10.9.0.1"}],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {"nameservers": ["10.9.0.1"]},
        });
        merge(&mut result, &ipam, 1);
        assert_eq!(
            result["ips"],
            json!([{"address": "10.0.0.2/24", "interface": 0},
                   {"address": "10.9.0.5/24", "gateway": "10.9.0.1", "interface": 1}])
        );
        assert_eq!(result["routes"], json!([{"dst": "0.0.0.0/0"}]));
        assert_eq!(result["dns"], json!({"nameservers": ["10.9.0.1"]}));
        // An IPAM result without DNS leaves the result's.
        merge(&mut result, &json!({"ips": [], "dns": {}}), 1);
        assert_eq!(result["dns"], json!({"nameservers": ["10.9.0.1"]}));
    }

    #[test]
    fn ipam_type_must_be_a_plugin_name() {
        let env = HashMap::new();
        for bad in [
            json!({}),
            json!({"type": ""}),
            json!({"type": "../x"}),
            json!({"type": 3}),
        ] {
            let e = Ipam::from(Some(&bad), &env, "").err().expect("refused");
            assert_eq!(e.code, INVALID_CONFIG, "{bad}");
        }
        assert!(Ipam::from(None, &env, "").unwrap().is_none());
        let e = Ipam::from(Some(&json!({"type": "host-local"})), &env, "")
            .unwrap()
            .unwrap()
            .exec("ADD")
            .expect_err("no CNI_PATH");
        assert_eq!(e.code, INVALID_CONFIG);
    }
}
