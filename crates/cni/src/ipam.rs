//! IP address management delegated to a standard IPAM plugin (CNI spec
//! 1.1.0, section 4): the plugin named by `ipam.type` is looked up in
//! `CNI_PATH` and run with the environment and the whole network config
//! this plugin received (only `CNI_COMMAND` may differ); its stderr is
//! ours; its error result is passed up with its own code.

use crate::error::{CniError, INVALID_CONFIG, IO_ERROR, IPAM_FAILED, err};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

type Object = Map<String, Value>;

/// An IPAM result (spec 1.1.0, section "Success": `ips`, `routes`, `dns`;
/// no interfaces), typed: every IP an object with an `address`, every
/// route an object, `dns` an object. What an IPAM plugin answers and what
/// the node kept of it are both read through this before use.
#[derive(Deserialize, Debug, Clone, PartialEq, Default)]
pub struct IpamResult {
    #[serde(default, deserialize_with = "null_is_empty")]
    pub ips: Vec<Object>,
    #[serde(default, deserialize_with = "null_is_empty")]
    pub routes: Vec<Object>,
    #[serde(default)]
    pub dns: Option<Object>,
}

fn null_is_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Object>, D::Error> {
    Ok(Option::<Vec<Object>>::deserialize(d)?.unwrap_or_default())
}

impl IpamResult {
    /// Checks a result's shape (`Err`: what is wrong with it).
    pub fn parse(v: &Value) -> Result<IpamResult, String> {
        let r = IpamResult::deserialize(v).map_err(|e| e.to_string())?;
        if let Some(i) = r
            .ips
            .iter()
            .position(|ip| !ip.get("address").is_some_and(Value::is_string))
        {
            return Err(format!("ips[{i}] has no \"address\" string"));
        }
        Ok(r)
    }
}

/// The IPAM plugin a network config names, if any.
pub struct Ipam<'a> {
    pub kind: &'a str,
    env: &'a HashMap<String, String>,
    input: &'a [u8],
}

impl<'a> Ipam<'a> {
    /// `ipam` from the parsed config: `None` without one; refused when
    /// `type` is missing or is not a plain file name.
    pub fn from(
        ipam: Option<&'a Value>,
        env: &'a HashMap<String, String>,
        input: &'a [u8],
    ) -> Result<Option<Ipam<'a>>, CniError> {
        let Some(ipam) = ipam else {
            return Ok(None);
        };
        let kind = ipam.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind.is_empty() || kind.contains(['/', '\0']) || kind == "." || kind == ".." {
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
        let written = child.stdin.take().map(|mut s| s.write_all(self.input));
        let out = child.wait_with_output().map_err(|e| io("cannot wait", e))?;
        if let Some(Err(e)) = written
            && out.status.success()
        {
            return Err(io("cannot write its stdin", e));
        }
        parse_output(self.kind, command, out.status.success(), &out.stdout).map_err(|mut e| {
            if !out.status.success() && e.code == IPAM_FAILED {
                e.msg = format!("{} ({})", e.msg, out.status);
            }
            e
        })
    }
}

/// What an IPAM plugin printed for `command`: its result (`Null` when it
/// printed nothing, as DEL, CHECK, GC and STATUS do) when it succeeded,
/// else its error result with its own code (one outside the spec's and
/// plugins' range, or none, becomes [`IPAM_FAILED`]).
pub fn parse_output(
    kind: &str,
    command: &str,
    success: bool,
    stdout: &[u8],
) -> Result<Value, CniError> {
    let text = String::from_utf8_lossy(stdout);
    let parsed: Option<Value> = serde_json::from_str(text.trim()).ok();
    if success {
        return match parsed {
            Some(v) => Ok(v),
            None if text.trim().is_empty() => Ok(Value::Null),
            None => Err(err(
                IPAM_FAILED,
                format!("IPAM plugin {kind} {command}: its result is not JSON"),
                text.into_owned(),
            )),
        };
    }
    let field = |k: &str| parsed.as_ref().and_then(|v| v.get(k));
    let code = field("code")
        .and_then(Value::as_u64)
        .and_then(|c| u32::try_from(c).ok())
        .filter(|c| *c != 0);
    match code {
        Some(code) => Err(err(
            code,
            format!(
                "IPAM plugin {kind} {command}: {}",
                field("msg").and_then(Value::as_str).unwrap_or("failed")
            ),
            field("details").and_then(Value::as_str).unwrap_or_default(),
        )),
        None => Err(err(
            IPAM_FAILED,
            format!("IPAM plugin {kind} {command} failed"),
            text.into_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ipam_results_of_the_wrong_shape_are_refused() {
        let good = [
            json!({}),
            json!({"cniVersion": "1.1.0", "ips": null, "routes": null, "dns": null}),
            json!({"ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1"}],
                   "routes": [{"dst": "0.0.0.0/0"}], "dns": {"nameservers": []}}),
        ];
        for v in good {
            assert!(IpamResult::parse(&v).is_ok(), "{v}");
        }
        let bad = [
            json!("garbage"),
            json!([1, 2]),
            json!(3),
            json!(null),
            json!({"ips": "x"}),
            json!({"ips": [1, 2]}),
            json!({"ips": [{"gateway": "10.0.0.1"}]}),
            json!({"ips": [{"address": 7}]}),
            json!({"routes": {"dst": "x"}}),
            json!({"routes": ["0.0.0.0/0"]}),
            json!({"dns": "10.0.0.1"}),
        ];
        for v in bad {
            let why = IpamResult::parse(&v).expect_err(&v.to_string());
            assert!(!why.is_empty(), "{v}");
        }
    }

    #[test]
    fn ipam_output_of_any_shape_is_a_result_or_an_error() {
        type Case<'a> = (&'a str, bool, &'a [u8], Result<Value, u32>);
        let cases: &[Case] = &[
            ("result", true, br#"{"ips": []}"#, Ok(json!({"ips": []}))),
            ("nothing", true, b"  \n", Ok(Value::Null)),
            ("not JSON", true, b"ok!", Err(IPAM_FAILED)),
            ("not UTF-8", true, b"\xff\xfe", Err(IPAM_FAILED)),
            (
                "error result",
                false,
                br#"{"code": 11, "msg": "busy"}"#,
                Err(11),
            ),
            (
                "code 0",
                false,
                br#"{"code": 0, "msg": "x"}"#,
                Err(IPAM_FAILED),
            ),
            (
                "code too big",
                false,
                br#"{"code": 4294967296}"#,
                Err(IPAM_FAILED),
            ),
            ("code negative", false, br#"{"code": -1}"#, Err(IPAM_FAILED)),
            (
                "code a string",
                false,
                br#"{"code": "7"}"#,
                Err(IPAM_FAILED),
            ),
            (
                "msg a number",
                false,
                br#"{"code": 7, "msg": 1, "details": []}"#,
                Err(7),
            ),
            ("array", false, b"[1]", Err(IPAM_FAILED)),
            ("silent failure", false, b"", Err(IPAM_FAILED)),
        ];
        for (name, success, out, want) in cases {
            match (parse_output("host-local", "ADD", *success, out), want) {
                (Ok(v), Ok(w)) => assert_eq!(&v, w, "{name}"),
                (Err(e), Err(code)) => {
                    assert_eq!(e.code, *code, "{name}: {e:?}");
                    assert!(e.msg.contains("host-local ADD"), "{name}: {e:?}");
                }
                (got, want) => panic!("{name}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn ipam_type_must_be_a_plugin_name() {
        let env = HashMap::new();
        for bad in [
            json!({}),
            json!({"type": ""}),
            json!({"type": "../x"}),
            json!({"type": 3}),
            json!({"type": "a\0b"}),
            json!("host-local"),
            json!(["host-local"]),
        ] {
            let e = Ipam::from(Some(&bad), &env, b"").err().expect("refused");
            assert_eq!(e.code, INVALID_CONFIG, "{bad}");
        }
        assert!(Ipam::from(None, &env, b"").unwrap().is_none());
        let e = Ipam::from(Some(&json!({"type": "host-local"})), &env, b"")
            .unwrap()
            .unwrap()
            .exec("ADD")
            .expect_err("no CNI_PATH");
        assert_eq!(e.code, INVALID_CONFIG);
    }
}
