//! How a VNF (or a pod's application) reaches the switch: a vhost-user
//! port or a memif port. One type for every place that names this choice,
//! so that they all accept the same spellings and refuse a bad one the
//! same way:
//!
//! * the attach API's `"type"` (`nfv_control::attachments`): what the CNI
//!   plugin sends, what state files keep and `GET /api/v1/attachments`
//!   answers;
//! * the CNI network config's `"interface"` (`nfvswitch-cni`), and the
//!   device-info file the plugin writes from it;
//! * `nfvswitch demo`/`sweep`/`calibrate`'s test bed (`--interface`) and
//!   the `parameters.interface` of `sweep.json`;
//! * the planner's `[service] interface` (`nfv-plan`) and `service.interface`
//!   of `nfvswitch plan --json`.
//!
//! **Spellings.** `vhost-user` and `memif` are the names: [`Display`],
//! [`VnfInterface::as_str`] and `Serialize` write them. `vhost-user` is
//! what the attach API has always read, so a CNI plugin built from this
//! tree keeps working against an older node. `vhost` is read as
//! `vhost-user` everywhere, since the command line and topology files
//! have always taken it. The two files that have always written `vhost`
//! (sweep.json, plan JSON) keep doing so through [`serialize_short`], so
//! that their old and new files compare equal.
//!
//! Not this type: the port types of a node config (`type = "vhost-user"`,
//! `"afxdp"`, …), a wider set that `nfv-port-types` owns; and the built-in
//! VNF's `nfv_vnf::Interface`, which carries the memif interface id and is
//! chosen by which flag (`--socket` or `--memif`) is given, not spelled.
//!
//! [`Display`]: std::fmt::Display

use serde::{Deserialize, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// vhost-user or memif. The default is vhost-user: what every user of
/// the type meant when nothing was said (and what sweeps from before
/// memif existed ran).
///
/// `FromStr` and `Deserialize` take the same spellings (a test holds
/// them together): `vhost-user`, `vhost`, `memif`, exactly (case and
/// spaces count).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum VnfInterface {
    /// A vhost-user port: the VNF's side is the virtio-net driver, the
    /// switch's the device.
    #[default]
    #[serde(rename = "vhost-user", alias = "vhost")]
    VhostUser,
    /// A memif port: the switch is the server, the VNF the client.
    #[serde(rename = "memif")]
    Memif,
}

impl VnfInterface {
    /// What a refusal lists as accepted.
    pub const EXPECTED: &'static str = "vhost-user (or vhost) or memif";

    /// The name: `vhost-user` or `memif`.
    pub fn as_str(self) -> &'static str {
        match self {
            VnfInterface::VhostUser => "vhost-user",
            VnfInterface::Memif => "memif",
        }
    }

    /// `vhost` or `memif`: the spelling sweep.json and plan JSON have
    /// always written ([`serialize_short`]).
    pub fn short_name(self) -> &'static str {
        match self {
            VnfInterface::VhostUser => "vhost",
            VnfInterface::Memif => "memif",
        }
    }
}

impl fmt::Display for VnfInterface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for VnfInterface {
    type Err = UnknownInterface;
    fn from_str(s: &str) -> Result<VnfInterface, UnknownInterface> {
        match s {
            "vhost-user" | "vhost" => Ok(VnfInterface::VhostUser),
            "memif" => Ok(VnfInterface::Memif),
            other => Err(UnknownInterface(other.to_string())),
        }
    }
}

/// A value that is not a [`VnfInterface`]: `"tap" is not vhost-user (or
/// vhost) or memif`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownInterface(pub String);

impl fmt::Display for UnknownInterface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not {}", self.0, VnfInterface::EXPECTED)
    }
}

impl std::error::Error for UnknownInterface {}

/// Writes [`VnfInterface::short_name`]; for
/// `#[serde(serialize_with = "nfv_vnf_interface::serialize_short")]` on a
/// field of a file that has always said `vhost` (reading it back needs
/// nothing: `vhost` is an accepted spelling).
pub fn serialize_short<S: Serializer>(v: &VnfInterface, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.short_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [VnfInterface; 2] = [VnfInterface::VhostUser, VnfInterface::Memif];

    fn from_json(s: &str) -> Result<VnfInterface, String> {
        serde_json::from_value(serde_json::Value::from(s)).map_err(|e| e.to_string())
    }

    #[test]
    fn from_str_and_serde_take_the_same_spellings() {
        for (s, want) in [
            ("vhost-user", Some(VnfInterface::VhostUser)),
            ("vhost", Some(VnfInterface::VhostUser)),
            ("memif", Some(VnfInterface::Memif)),
            ("tap", None),
            ("", None),
            ("Memif", None),
            ("vhost_user", None),
            (" memif", None),
        ] {
            assert_eq!(s.parse::<VnfInterface>().ok(), want, "FromStr {s:?}");
            assert_eq!(from_json(s).ok(), want, "Deserialize {s:?}");
        }
    }

    #[test]
    fn names_are_written_and_read_back() {
        for i in ALL {
            assert_eq!(i.to_string(), i.as_str());
            assert_eq!(i.as_str().parse::<VnfInterface>(), Ok(i));
            assert_eq!(i.short_name().parse::<VnfInterface>(), Ok(i));
            let json = serde_json::to_string(&i).unwrap();
            assert_eq!(json, format!("\"{}\"", i.as_str()));
            assert_eq!(serde_json::from_str::<VnfInterface>(&json).unwrap(), i);
        }
        assert_eq!(VnfInterface::default(), VnfInterface::VhostUser);
    }

    #[test]
    fn short_form_is_written_where_asked_and_read_back() {
        #[derive(Serialize, Deserialize)]
        struct File {
            #[serde(serialize_with = "serialize_short")]
            interface: VnfInterface,
        }
        for (i, want) in [
            (VnfInterface::VhostUser, r#"{"interface":"vhost"}"#),
            (VnfInterface::Memif, r#"{"interface":"memif"}"#),
        ] {
            let json = serde_json::to_string(&File { interface: i }).unwrap();
            assert_eq!(json, want);
            assert_eq!(serde_json::from_str::<File>(&json).unwrap().interface, i);
        }
    }

    #[test]
    fn refusals_say_what_is_accepted() {
        let e = "pipe".parse::<VnfInterface>().unwrap_err();
        assert_eq!(
            e.to_string(),
            r#""pipe" is not vhost-user (or vhost) or memif"#
        );
        let e = from_json("pipe").unwrap_err();
        for name in ["pipe", "vhost-user", "memif"] {
            assert!(e.contains(name), "{e}");
        }
    }
}
