//! The network config on stdin, typed and checked before the plugin calls
//! anything: the version, the port's kind, the paths it names, and where
//! the node's API is (the plugin runs as root in the host's namespaces,
//! so an `api` it would call anywhere is a request forgery waiting to
//! happen).

use crate::error::{CniError, DECODE, INCOMPATIBLE_VERSION, INVALID_CONFIG, err};
use nfv_vnf_interface::VnfInterface;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub const SUPPORTED: [&str; 5] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];
pub const DEFAULT_API: &str = "http://127.0.0.1:9180";
/// Where the node keeps the bearer token mutating calls carry, unless the
/// config's `apiTokenFile` says otherwise (the deployment's node writes it
/// here: `[node] api_token_file`).
pub const DEFAULT_TOKEN_FILE: &str = "/var/run/nfvswitch/api-token";
/// The most stdin the plugin reads: a config with a `prevResult` is a few
/// kilobytes; anything near this is not a network config.
pub const MAX_INPUT: usize = 4 << 20;

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    pub cni_version: String,
    /// The network's name: the node keeps it with each attachment and
    /// scopes GC by it.
    pub name: String,
    #[serde(default = "default_api")]
    pub api: String,
    /// Whether `api` may be something other than this host's loopback.
    #[serde(default)]
    pub allow_remote_api: bool,
    /// The node's bearer token; [`DEFAULT_TOKEN_FILE`] when absent.
    #[serde(default)]
    pub api_token_file: Option<PathBuf>,
    /// `interface` as the config spells it, read into
    /// [`NetConf::interface`] by [`NetConf::parse`] after the version is
    /// checked: a bad value is then the spec's invalid-config error, not a
    /// decode error, and an unsupported version is reported first.
    #[serde(default, rename = "interface")]
    interface_name: Option<String>,
    /// How the pod reaches the switch: `"vhost-user"` (the default; also
    /// spelled `"vhost"`) or `"memif"`. Set by [`NetConf::parse`].
    #[serde(skip)]
    pub interface: VnfInterface,
    #[serde(default = "default_role")]
    pub switch_role: String,
    /// What the pods mount: when given, it must be the node's
    /// `socket_dir` (the node alone decides where sockets go).
    #[serde(default)]
    pub socket_dir: Option<PathBuf>,
    #[serde(default)]
    pub runtime_config: RuntimeConfig,
    /// Delegated IP address management: `{"type": PLUGIN, ...}`.
    #[serde(default)]
    pub ipam: Option<Value>,
    /// What the runtime had from ADD (CHECK, DEL; ADD when chained);
    /// parsed by the command that reads it.
    #[serde(default)]
    pub prev_result: Option<Value>,
    #[serde(default, rename = "cni.dev/valid-attachments")]
    pub valid_attachments: Option<Vec<ValidAttachment>>,
    /// The key's name before spec 1.1.0 was corrected; read when the right
    /// one is absent.
    #[serde(default, rename = "cni.dev/attachments")]
    pub attachments: Option<Vec<ValidAttachment>>,
}

#[derive(Deserialize, Debug, Default)]
pub struct RuntimeConfig {
    #[serde(rename = "CNIDeviceInfoFile")]
    pub device_info_file: Option<PathBuf>,
}

#[derive(Deserialize, Debug)]
pub struct ValidAttachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

fn default_api() -> String {
    DEFAULT_API.into()
}
fn default_role() -> String {
    "server".into()
}

impl NetConf {
    /// Decodes and checks the config (stdin's bytes).
    pub fn parse(input: &[u8]) -> Result<NetConf, CniError> {
        let mut c: NetConf = serde_json::from_slice(input)
            .map_err(|e| err(DECODE, "cannot decode the network config", e.to_string()))?;
        c.check()?;
        Ok(c)
    }

    fn check(&mut self) -> Result<(), CniError> {
        if !SUPPORTED.contains(&self.cni_version.as_str()) {
            return Err(err(
                INCOMPATIBLE_VERSION,
                format!("cniVersion {:?} is not supported", self.cni_version),
                format!("supported: {}", SUPPORTED.join(", ")),
            ));
        }
        if let Some(name) = &self.interface_name {
            self.interface = name.parse().map_err(|_| {
                err(
                    INVALID_CONFIG,
                    format!("interface {name:?}: {}", VnfInterface::EXPECTED),
                    "",
                )
            })?;
        }
        if !matches!(self.switch_role.as_str(), "server" | "client")
            || (self.interface == VnfInterface::Memif && self.switch_role == "client")
        {
            return Err(err(
                INVALID_CONFIG,
                format!(
                    "switchRole {:?}: server or client (memif: server)",
                    self.switch_role
                ),
                "",
            ));
        }
        // A relative path would be relative to wherever the runtime
        // started the plugin: never what was meant.
        for (key, path) in [
            ("socketDir", self.socket_dir.as_deref()),
            ("apiTokenFile", self.api_token_file.as_deref()),
            (
                "runtimeConfig.CNIDeviceInfoFile",
                self.runtime_config.device_info_file.as_deref(),
            ),
        ] {
            if let Some(p) = path
                && !p.is_absolute()
            {
                return Err(err(
                    INVALID_CONFIG,
                    format!("{key} must be an absolute path"),
                    p.display().to_string(),
                ));
            }
        }
        check_api(&self.api, self.allow_remote_api)
    }

    /// The token file, and whether the config named it.
    pub fn token_file(&self) -> (&Path, bool) {
        match &self.api_token_file {
            Some(p) => (p, true),
            None => (Path::new(DEFAULT_TOKEN_FILE), false),
        }
    }
}

/// `api` must be `http://` or `https://` and, unless `allow_remote`,
/// name this host's loopback (`127.0.0.1`, `[::1]` or `localhost`) with
/// an optional port and nothing after it but `/`. Anything looser
/// (`127.0.0.1@elsewhere`, `127.0.0.1.example.com`, `127.1`, a path, a
/// query) is refused rather than interpreted.
pub fn check_api(api: &str, allow_remote: bool) -> Result<(), CniError> {
    let refuse = |why: &str| {
        Err(err(
            INVALID_CONFIG,
            format!("api {api:?}: {why}"),
            "the plugin calls the node as root from the host's network namespace, so it \
             calls only this host's loopback unless the config says \"allowRemoteApi\": true",
        ))
    };
    let Some((scheme, rest)) = api.split_once("://") else {
        return refuse("not an http:// or https:// URL");
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return refuse("not an http:// or https:// URL");
    }
    if allow_remote {
        return Ok(());
    }
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    if !tail.is_empty() && tail != "/" {
        return refuse("the node's address only (scheme, host, port), no path or query");
    }
    let loopback = ["127.0.0.1", "[::1]", "localhost"].iter().any(|host| {
        authority
            .get(..host.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(host))
            && is_port_or_nothing(&authority[host.len()..])
    });
    if loopback {
        Ok(())
    } else {
        refuse("not 127.0.0.1, [::1] or localhost (with an optional port)")
    }
}

/// `""` or `:PORT` with PORT in 1..=65535, digits only.
fn is_port_or_nothing(s: &str) -> bool {
    match s.strip_prefix(':') {
        None => s.is_empty(),
        Some(port) => {
            !port.is_empty()
                && port.len() <= 5
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u16>().is_ok_and(|p| p != 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_loopback_apis_unless_allowed() {
        let cases: &[(&str, bool)] = &[
            ("http://127.0.0.1:9180", true),
            ("http://127.0.0.1:9180/", true),
            ("http://127.0.0.1", true),
            ("HTTP://LOCALHOST:80", true),
            ("http://[::1]:9180", true),
            ("https://localhost:443", true),
            ("http://10.0.0.1:9180", false),
            ("http://169.254.169.254/latest/meta-data", false),
            ("http://127.0.0.1@evil.example:9180", false),
            ("http://127.0.0.1:9180@evil.example", false),
            ("http://127.0.0.1.nip.io:9180", false),
            ("http://localhost.evil.example", false),
            ("http://127.1:9180", false),
            ("http://0x7f000001:9180", false),
            ("http://[::ffff:10.0.0.1]:9180", false),
            ("http://127.0.0.1:9180/admin", false),
            ("http://127.0.0.1:9180?x=y", false),
            ("http://127.0.0.1:", false),
            ("http://127.0.0.1:0", false),
            ("http://127.0.0.1:65536", false),
            ("http://127.0.0.1:+80", false),
            ("http://127.0.0.1: 80", false),
            ("ftp://127.0.0.1", false),
            ("unix:///run/nfvswitch.sock", false),
            ("127.0.0.1:9180", false),
            ("", false),
            ("http://", false),
        ];
        for (api, ok) in cases {
            let got = check_api(api, false);
            assert_eq!(got.is_ok(), *ok, "{api:?}: {got:?}");
            if let Err(e) = got {
                assert_eq!(e.code, INVALID_CONFIG, "{api}");
                assert!(e.msg.contains("api"), "{e:?}");
            }
        }
        assert!(check_api("http://10.0.0.1:9180", true).is_ok());
        assert!(check_api("https://node.example:9180/x", true).is_ok());
        assert!(check_api("file:///etc/passwd", true).is_err());
    }

    #[test]
    fn hostile_configs_are_refused_with_their_codes() {
        let base = json!({"cniVersion": "1.1.0", "name": "n", "type": "nfvswitch-cni"});
        let with = |k: &str, v: Value| {
            let mut c = base.clone();
            c[k] = v;
            c.to_string().into_bytes()
        };
        let cases: Vec<(&str, Vec<u8>, u32)> = vec![
            ("not JSON", b"{".to_vec(), DECODE),
            ("not UTF-8", b"\xff\xfe".to_vec(), DECODE),
            ("a string", b"\"x\"".to_vec(), DECODE),
            ("an array", b"[1,2]".to_vec(), DECODE),
            ("no name", br#"{"cniVersion": "1.1.0"}"#.to_vec(), DECODE),
            ("version a number", with("cniVersion", json!(1)), DECODE),
            (
                "old version",
                with("cniVersion", json!("0.2.0")),
                INCOMPATIBLE_VERSION,
            ),
            ("tap", with("interface", json!("tap")), INVALID_CONFIG),
            ("interface a number", with("interface", json!(1)), DECODE),
            ("role", with("switchRole", json!("both")), INVALID_CONFIG),
            (
                "remote api",
                with("api", json!("http://10.1.1.1:9180")),
                INVALID_CONFIG,
            ),
            (
                "api not a string",
                with("api", json!({"host": "x"})),
                DECODE,
            ),
            (
                "relative socketDir",
                with("socketDir", json!("pods")),
                INVALID_CONFIG,
            ),
            (
                "relative token",
                with("apiTokenFile", json!("tok")),
                INVALID_CONFIG,
            ),
            (
                "runtimeConfig a string",
                with("runtimeConfig", json!("x")),
                DECODE,
            ),
            (
                "relative device-info",
                with("runtimeConfig", json!({"CNIDeviceInfoFile": "x.json"})),
                INVALID_CONFIG,
            ),
            (
                "valid list of numbers",
                with("cni.dev/valid-attachments", json!([1])),
                DECODE,
            ),
            (
                "remote allowed not a bool",
                with("allowRemoteApi", json!("yes")),
                DECODE,
            ),
        ];
        for (name, input, code) in cases {
            let e = NetConf::parse(&input).expect_err(name);
            assert_eq!(e.code, code, "{name}: {e:?}");
            assert!(!e.msg.is_empty(), "{name}");
        }
        let ok = NetConf::parse(&with("api", json!("http://localhost:9180"))).unwrap();
        assert_eq!(ok.token_file(), (Path::new(DEFAULT_TOKEN_FILE), false));
        let mut c = base.clone();
        c["api"] = json!("http://10.1.1.1:9180");
        c["allowRemoteApi"] = json!(true);
        c["apiTokenFile"] = json!("/etc/nfv/token");
        let ok = NetConf::parse(c.to_string().as_bytes()).unwrap();
        assert_eq!(ok.token_file(), (Path::new("/etc/nfv/token"), true));
    }

    /// Every spelling of `interface`, vhost-user when absent; a bad one is
    /// invalid config naming what is accepted, and an unsupported version
    /// is still what is reported first.
    #[test]
    fn interface_spellings() {
        let conf = |extra: Value| {
            let mut c = json!({"cniVersion": "1.1.0", "name": "n", "type": "nfvswitch-cni"});
            c.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            NetConf::parse(c.to_string().as_bytes())
        };
        for (extra, want) in [
            (json!({}), VnfInterface::VhostUser),
            (json!({"interface": "vhost-user"}), VnfInterface::VhostUser),
            (json!({"interface": "vhost"}), VnfInterface::VhostUser),
            (json!({"interface": "memif"}), VnfInterface::Memif),
        ] {
            assert_eq!(conf(extra.clone()).unwrap().interface, want, "{extra}");
        }
        let e = conf(json!({"interface": "tap"})).unwrap_err();
        assert_eq!(e.code, INVALID_CONFIG);
        assert_eq!(e.msg, r#"interface "tap": vhost-user (or vhost) or memif"#);
        let e = conf(json!({"interface": "memif", "switchRole": "client"})).unwrap_err();
        assert_eq!(e.code, INVALID_CONFIG, "{e:?}");
        let e = conf(json!({"interface": "tap", "cniVersion": "0.2.0"})).unwrap_err();
        assert_eq!(e.code, INCOMPATIBLE_VERSION, "{e:?}");
    }
}
