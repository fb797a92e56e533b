//! The result ADD answers (spec 1.1.0, section "Success"): the result of
//! the plugins before this one in a chain (`prevResult`), with this
//! plugin's interface appended and the IPAM plugin's addresses on it.
//! Parsed into a type first, so a `prevResult` of the wrong shape is a
//! decode error, not a panic or a result with parts silently replaced.

use crate::error::{CniError, DECODE, err};
use crate::ipam::IpamResult;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

type Object = Map<String, Value>;

/// A CNI result: the lists this plugin adds to, typed; everything else
/// (`cniVersion`, keys of later spec versions) carried as it came.
#[derive(Serialize, Deserialize, Debug, Default, Clone, PartialEq)]
pub struct CniResult {
    #[serde(default)]
    pub interfaces: Option<Vec<Object>>,
    #[serde(default)]
    pub ips: Option<Vec<Object>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<Object>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Object>,
    #[serde(flatten)]
    pub rest: Object,
}

impl CniResult {
    /// `prevResult` as the runtime gave it (none: an empty result).
    pub fn from_prev(prev: Option<&Value>) -> Result<CniResult, CniError> {
        match prev {
            None | Some(Value::Null) => Ok(CniResult::default()),
            Some(v) => CniResult::deserialize(v).map_err(|e| {
                err(
                    DECODE,
                    "cannot decode prevResult (interfaces, ips and routes must be lists of \
                     objects, dns an object)",
                    e.to_string(),
                )
            }),
        }
    }

    /// The `socketPath` this result gives interface `ifname`, if any.
    pub fn socket_of(&self, ifname: &str) -> Option<&str> {
        self.interfaces
            .iter()
            .flatten()
            .find(|i| i.get("name").and_then(Value::as_str) == Some(ifname))?
            .get("socketPath")?
            .as_str()
    }

    /// Appends an interface; its index in `interfaces`.
    pub fn push_interface(&mut self, iface: Object) -> usize {
        let all = self.interfaces.get_or_insert_with(Vec::new);
        all.push(iface);
        all.len() - 1
    }

    /// An IPAM result's `ips` (on interface `index`: the IPAM result has
    /// no interfaces), `routes` and `dns` (when it has any).
    pub fn merge(&mut self, ipam: &IpamResult, index: usize) {
        let ips = self.ips.get_or_insert_with(Vec::new);
        for ip in &ipam.ips {
            let mut ip = ip.clone();
            ip.insert("interface".into(), Value::from(index));
            ips.push(ip);
        }
        if !ipam.routes.is_empty() {
            self.routes
                .get_or_insert_with(Vec::new)
                .extend(ipam.routes.iter().cloned());
        }
        if let Some(dns) = ipam.dns.as_ref().filter(|d| !d.is_empty()) {
            self.dns = Some(dns.clone());
        }
    }

    /// The answer: `cniVersion` set, `ips` present (empty when none).
    pub fn finish(mut self, cni_version: &str) -> Value {
        self.rest
            .insert("cniVersion".into(), Value::from(cni_version));
        self.ips.get_or_insert_with(Vec::new);
        self.interfaces.get_or_insert_with(Vec::new);
        serde_json::to_value(self).unwrap_or_else(|e| Value::String(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(v: Value) -> Object {
        match v {
            Value::Object(o) => o,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn ipam_results_land_on_our_interface() {
        let mut result = CniResult::from_prev(Some(&json!({
            "cniVersion": "1.1.0",
            "interfaces": [{"name": "eth0"}],
            "ips": [{"address": "10.0.0.2/24", "interface": 0}],
            "future": {"kept": true},
        })))
        .unwrap();
        let index =
            result.push_interface(object(json!({"name": "net1", "socketPath": "/run/a.sock"})));
        assert_eq!(index, 1);
        let ipam = IpamResult::parse(&json!({
            "cniVersion": "1.1.0",
            "ips": [{"address": "10.9.0.5/24", "gateway": "10.9.0.1"}],
            "routes": [{"dst": "0.0.0.0/0"}],
            "dns": {"nameservers": ["10.9.0.1"]},
        }))
        .unwrap();
        result.merge(&ipam, index);
        // An IPAM result without DNS leaves the result's.
        result.merge(
            &IpamResult::parse(&json!({"ips": [], "dns": {}})).unwrap(),
            index,
        );
        assert_eq!(result.socket_of("net1"), Some("/run/a.sock"));
        assert_eq!(result.socket_of("eth0"), None);
        let v = result.finish("1.0.0");
        assert_eq!(
            v,
            json!({
                "cniVersion": "1.0.0",
                "interfaces": [{"name": "eth0"}, {"name": "net1", "socketPath": "/run/a.sock"}],
                "ips": [{"address": "10.0.0.2/24", "interface": 0},
                        {"address": "10.9.0.5/24", "gateway": "10.9.0.1", "interface": 1}],
                "routes": [{"dst": "0.0.0.0/0"}],
                "dns": {"nameservers": ["10.9.0.1"]},
                "future": {"kept": true},
            })
        );
    }

    #[test]
    fn prev_results_of_the_wrong_shape_are_decode_errors() {
        for bad in [
            json!("x"),
            json!([1, 2]),
            json!(7),
            json!({"interfaces": "x"}),
            json!({"interfaces": [1, 2]}),
            json!({"interfaces": [{"name": "a"}, "b"]}),
            json!({"ips": {"address": "x"}}),
            json!({"ips": [[]]}),
            json!({"routes": ["0.0.0.0/0"]}),
            json!({"dns": ["10.0.0.1"]}),
        ] {
            let e = CniResult::from_prev(Some(&bad)).expect_err(&bad.to_string());
            assert_eq!(e.code, DECODE, "{bad}");
        }
        for fine in [
            json!(null),
            json!({}),
            json!({"interfaces": null, "ips": null}),
        ] {
            let r = CniResult::from_prev(Some(&fine)).unwrap();
            assert_eq!(
                r.finish("1.1.0"),
                json!({"cniVersion": "1.1.0", "interfaces": [], "ips": []})
            );
        }
        // A name or socketPath of another type is simply not a match.
        let r = CniResult::from_prev(Some(&json!({"interfaces": [
            {"name": 1, "socketPath": "/a"}, {"name": "net1", "socketPath": 2}]})))
        .unwrap();
        assert_eq!(r.socket_of("net1"), None);
    }
}
