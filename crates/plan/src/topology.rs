//! The topology file: a node and the service to run on it (TOML).
//!
//! ```toml
//! name = "east-west on a 40G Gen3 x8 NIC"   # optional
//!
//! [node]
//! switch_cores = 2        # cores for nfvswitch PMD threads (0: none)
//! vnf_cores = 8           # cores the VNFs run on
//! tsc_ghz = 2.3           # optional: the planned node's clock (default: the profile's)
//!
//! [node.nic]
//! kind = "pci"            # "pci" (default) | "testbed": nfvswitch sweep's in-process
//!                         #   generator and sink stand in for the NIC (no wire, no PCIe)
//! ports = 1               # pci: ports 1..=8
//! port_gbps = 40          # pci: line rate of each port
//! pcie_gen = 3            # pci: 1..=5
//! pcie_lanes = 8          # pci: 1, 2, 4, 8 or 16
//! vfs = 16                # pci: SR-IOV virtual functions available (default 0)
//! nic_model = "xl710"     # pci, optional: a NIC class whose controller limits are known
//!                         #   (crate::nic::MODELS); or give them:
//! packet_rate_mpps = 37   # pci, optional: frames/s the controller receives, millions
//! hairpin_mpps = 18       # pci, optional: VF-to-VF switching rate, millions of frames/s
//!
//! [service]
//! vnfs = [1, 2, 4, 8]     # N (or one number); every N is planned
//! shape = "east-west"     # "north-south" (N VNFs in parallel) | "east-west" (one chain
//!                         #   of N) | "mixed" (chains of `chain_length` in parallel)
//! chain_length = 2        # mixed only
//! frames = [64, 1518]     # frame sizes 64..=1518 B (FCS included), or "imix"
//! offered_gbps = 40       # or offered_mpps; default: line rate of every port
//! interface = "vhost"     # how VNFs reach the switch: "vhost" (default; also spelled
//!                         #   "vhost-user") | "memif"
//! vnf_poll = "busy"       # "busy" (default: poll-mode VNFs, a core each) | "adaptive"
//! ```
//!
//! Unknown keys are refused; every refusal names file, line and field
//! ([`TopologyError`]).

use crate::error::{Doc, TopologyError};
use crate::nic::{self, Engine};
use crate::pcie::Pcie;
use nfv_vnf_interface::VnfInterface;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

type S<T> = Spanned<T>;

// Values inside untagged enums lose their spans (serde buffers them), so
// an error about one element of a list points at the list's line.

/// A TOML number (integers are accepted where a float is meant).
#[derive(Deserialize, Clone, Copy)]
#[serde(untagged)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn f(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(i64),
    Many(Vec<i64>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawFrames {
    Named(String),
    One(i64),
    Many(Vec<RawFrame>),
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawFrame {
    Size(i64),
    Named(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    name: Option<String>,
    node: S<RawNode>,
    service: S<RawService>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    switch_cores: S<i64>,
    vnf_cores: S<i64>,
    tsc_ghz: Option<S<Num>>,
    nic: S<RawNic>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNic {
    kind: Option<S<String>>,
    ports: Option<S<i64>>,
    port_gbps: Option<S<Num>>,
    pcie_gen: Option<S<i64>>,
    pcie_lanes: Option<S<i64>>,
    vfs: Option<S<i64>>,
    nic_model: Option<S<String>>,
    packet_rate_mpps: Option<S<Num>>,
    hairpin_mpps: Option<S<Num>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawService {
    vnfs: S<OneOrMany>,
    shape: S<String>,
    chain_length: Option<S<i64>>,
    frames: S<RawFrames>,
    offered_gbps: Option<S<Num>>,
    offered_mpps: Option<S<Num>>,
    interface: Option<S<String>>,
    vnf_poll: Option<S<String>>,
}

/// The validated file.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Topology {
    pub name: String,
    pub node: Node,
    pub service: Service,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Node {
    pub switch_cores: u32,
    pub vnf_cores: u32,
    pub tsc_ghz: Option<f64>,
    pub nic: Nic,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Nic {
    Pci {
        ports: u32,
        port_gbps: f64,
        pcie: Pcie,
        vfs: u32,
        /// The controller's own limits ([`crate::nic`]).
        engine: Engine,
    },
    /// `nfvswitch sweep`'s in-process generator and sink.
    Testbed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    NorthSouth,
    EastWest,
    Mixed { chain_length: u32 },
}

impl Shape {
    /// Chain lengths for `n` VNFs (mixed: the last chain takes the rest).
    pub fn chains(self, n: u32) -> Vec<u32> {
        match self {
            Shape::NorthSouth => vec![1; n as usize],
            Shape::EastWest => vec![n],
            Shape::Mixed { chain_length: l } => {
                let mut v = vec![l; (n / l) as usize];
                if !n.is_multiple_of(l) {
                    v.push(n % l);
                }
                v
            }
        }
    }
    pub fn describe(self) -> String {
        match self {
            Shape::NorthSouth => "north-south".into(),
            Shape::EastWest => "east-west".into(),
            Shape::Mixed { chain_length } => format!("mixed (chains of {chain_length})"),
        }
    }
}

/// How the VNFs wait for packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VnfPoll {
    /// Poll-mode (DPDK's testpmd in a VM, the usual NFV VNF): a VNF spins
    /// on its queues, so it takes a whole core whatever its load, and
    /// VNFs sharing a core take turns by time slice.
    #[default]
    Busy,
    /// The VNF sleeps when idle: VNFs on shared cores share them by load.
    Adaptive,
}

/// Frame sizes of one plan point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Frames {
    Size(usize),
    /// Simple IMIX: 7 × 64 B, 4 × 594 B, 1 × 1518 B.
    Imix,
}

impl Frames {
    /// (frame size, share of packets).
    pub fn mix(self) -> Vec<(usize, f64)> {
        match self {
            Frames::Size(s) => vec![(s, 1.0)],
            Frames::Imix => vec![(64, 7.0 / 12.0), (594, 4.0 / 12.0), (1518, 1.0 / 12.0)],
        }
    }
    pub fn mean_size(self) -> f64 {
        self.mix().iter().map(|(s, w)| *s as f64 * w).sum()
    }
    pub fn label(self) -> String {
        match self {
            Frames::Size(s) => format!("{s} B"),
            Frames::Imix => "IMIX".into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Offered {
    /// Line rate of every port (the test bed: unlimited).
    Line,
    Gbps(f64),
    Mpps(f64),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Service {
    pub vnfs: Vec<u32>,
    pub shape: Shape,
    pub frames: Vec<Frames>,
    pub offered: Offered,
    /// Written `"vhost"` or `"memif"`, as plan JSON always said.
    #[serde(serialize_with = "nfv_vnf_interface::serialize_short")]
    pub interface: VnfInterface,
    pub vnf_poll: VnfPoll,
}

/// One key of the topology file, for `nfvswitch plan --explain-topology`.
pub struct FieldDoc {
    pub path: &'static str,
    /// Unit or accepted values.
    pub unit: &'static str,
    pub default: &'static str,
    pub meaning: &'static str,
}

/// Every key the file takes (a test checks it against the parser's).
pub const FIELDS: &[FieldDoc] = &[
    FieldDoc {
        path: "name",
        unit: "text",
        default: "the file's name",
        meaning: "what the plan is called",
    },
    FieldDoc {
        path: "node.switch_cores",
        unit: "cores, 0..=256",
        default: "required",
        meaning: "cores for nfvswitch's PMD threads (0: no switch modes)",
    },
    FieldDoc {
        path: "node.vnf_cores",
        unit: "cores, 1..=1024",
        default: "required",
        meaning: "cores the VNFs run on",
    },
    FieldDoc {
        path: "node.tsc_ghz",
        unit: "GHz, (0.2, 10]",
        default: "the profile's",
        meaning: "the planned node's clock; cycle figures are applied at it",
    },
    FieldDoc {
        path: "node.nic.kind",
        unit: "\"pci\" | \"testbed\"",
        default: "\"pci\"",
        meaning: "a PCI NIC, or nfvswitch sweep's in-process generator and sink (no wire, no PCIe, no VFs)",
    },
    FieldDoc {
        path: "node.nic.ports",
        unit: "ports, 1..=8",
        default: "required (pci)",
        meaning: "NIC ports used, all alike",
    },
    FieldDoc {
        path: "node.nic.port_gbps",
        unit: "Gbit/s, (0, 800]",
        default: "required (pci)",
        meaning: "line rate of each port",
    },
    FieldDoc {
        path: "node.nic.pcie_gen",
        unit: "generation, 1..=5",
        default: "required (pci)",
        meaning: "the NIC's PCIe link generation",
    },
    FieldDoc {
        path: "node.nic.pcie_lanes",
        unit: "lanes: 1, 2, 4, 8 or 16",
        default: "required (pci)",
        meaning: "the NIC's PCIe link width",
    },
    FieldDoc {
        path: "node.nic.vfs",
        unit: "VFs, 0..=4096",
        default: "0",
        meaning: "SR-IOV virtual functions available (SR-IOV needs one per VNF)",
    },
    FieldDoc {
        path: "node.nic.nic_model",
        unit: "a NIC class (crates/plan/src/nic.rs)",
        default: "none",
        meaning: "takes the controller's packet rate and VF-to-VF rate from published figures",
    },
    FieldDoc {
        path: "node.nic.packet_rate_mpps",
        unit: "million frames/s, (0, 10000]",
        default: "the model's, else unknown",
        meaning: "frames the NIC controller receives per second at most",
    },
    FieldDoc {
        path: "node.nic.hairpin_mpps",
        unit: "million frames/s, (0, 10000]",
        default: "the model's, else unknown",
        meaning: "frames the NIC's internal switch delivers to VFs per second once they forward to each other",
    },
    FieldDoc {
        path: "service.vnfs",
        unit: "N, 1..=64, or a list",
        default: "required",
        meaning: "VNF counts to plan, each a point",
    },
    FieldDoc {
        path: "service.shape",
        unit: "\"north-south\" | \"east-west\" | \"mixed\"",
        default: "required",
        meaning: "N VNFs in parallel, one chain of N, or chains of chain_length",
    },
    FieldDoc {
        path: "service.chain_length",
        unit: "VNFs, 1..=64",
        default: "required with mixed",
        meaning: "the length of each mixed chain (the last takes the rest)",
    },
    FieldDoc {
        path: "service.frames",
        unit: "bytes, 64..=1518 (FCS included), a list, or \"imix\"",
        default: "required",
        meaning: "frame sizes to plan; imix is 7:4:1 of 64, 594, 1518 B",
    },
    FieldDoc {
        path: "service.offered_gbps",
        unit: "Gbit/s, (0, 10000]",
        default: "line rate",
        meaning: "offered load (or offered_mpps, not both)",
    },
    FieldDoc {
        path: "service.offered_mpps",
        unit: "million packets/s, (0, 10000]",
        default: "line rate",
        meaning: "offered load (or offered_gbps, not both)",
    },
    FieldDoc {
        path: "service.interface",
        unit: "\"vhost\" (\"vhost-user\") | \"memif\"",
        default: "\"vhost\"",
        meaning: "how VNFs reach the switch",
    },
    FieldDoc {
        path: "service.vnf_poll",
        unit: "\"busy\" | \"adaptive\"",
        default: "\"busy\"",
        meaning: "busy: poll-mode VNFs (DPDK), a core each; adaptive: VNFs that sleep when idle share cores by load",
    },
];

/// The file's keys, one per line: path, unit, default, meaning.
pub fn explain() -> String {
    let mut out = String::from(
        "A topology file (TOML) describes a node and a service; unknown keys are refused.\n\n",
    );
    for f in FIELDS {
        out += &format!(
            "{}\n    {}; default: {}\n    {}\n",
            f.path, f.unit, f.default, f.meaning
        );
    }
    out += &format!(
        "\nnic_model names: {}\nExamples: examples/plan-*.toml\n",
        nic::model_names()
    );
    out
}

/// Reads and validates a topology file.
pub fn load(path: &Path) -> Result<Topology, TopologyError> {
    let text = std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

/// Validates `text` (the contents of `file`).
pub fn parse(file: &Path, text: &str) -> Result<Topology, TopologyError> {
    let doc = Doc { file, text };
    let raw: RawTopology = toml::from_str(text).map_err(|e| doc.toml_error(&e))?;
    let node = node(&doc, raw.node.into_inner())?;
    let service = service(&doc, raw.service.into_inner())?;
    let name = raw.name.unwrap_or_else(|| {
        file.file_stem()
            .map_or("topology".into(), |s| s.to_string_lossy().into_owned())
    });
    Ok(Topology {
        name,
        node,
        service,
    })
}

fn int(doc: &Doc, v: &S<i64>, field: &str, lo: i64, hi: i64) -> Result<u32, TopologyError> {
    let x = *v.get_ref();
    if (lo..=hi).contains(&x) {
        Ok(x as u32)
    } else {
        Err(doc.err(v.span(), field, format!("{x} is not in {lo}..={hi}")))
    }
}

fn num(doc: &Doc, v: &S<Num>, field: &str, lo: f64, hi: f64) -> Result<f64, TopologyError> {
    let x = v.get_ref().f();
    if x > lo && x <= hi && x.is_finite() {
        Ok(x)
    } else {
        Err(doc.err(v.span(), field, format!("{x} is not in ({lo}, {hi}]")))
    }
}

fn node(doc: &Doc, r: RawNode) -> Result<Node, TopologyError> {
    let switch_cores = int(doc, &r.switch_cores, "node.switch_cores", 0, 256)?;
    let vnf_cores = int(doc, &r.vnf_cores, "node.vnf_cores", 1, 1024)?;
    let tsc_ghz = r
        .tsc_ghz
        .map(|v| num(doc, &v, "node.tsc_ghz", 0.2, 10.0))
        .transpose()?;
    let nic = nic(doc, r.nic)?;
    Ok(Node {
        switch_cores,
        vnf_cores,
        tsc_ghz,
        nic,
    })
}

/// `[node.nic]`, by its `kind`.
fn nic(doc: &Doc, r: S<RawNic>) -> Result<Nic, TopologyError> {
    let nic_span = r.span();
    let n = r.into_inner();
    let kind = n.kind.as_ref().map_or("pci", |k| k.get_ref().as_str());
    match kind {
        "pci" => pci_nic(doc, &n, nic_span),
        "testbed" => testbed_nic(doc, &n),
        other => {
            let span = n.kind.as_ref().map_or(nic_span, |k| k.span());
            Err(doc.err(
                span,
                "node.nic.kind",
                format!("{other:?} is not \"pci\" or \"testbed\""),
            ))
        }
    }
}

/// `kind = "pci"`: ports, speed and PCIe link are required.
fn pci_nic(doc: &Doc, n: &RawNic, nic_span: Range<usize>) -> Result<Nic, TopologyError> {
    let need = |v: &Option<S<i64>>, f: &str| {
        v.clone()
            .ok_or_else(|| doc.err(nic_span.clone(), f, "missing (needed with kind = \"pci\")"))
    };
    let ports = int(
        doc,
        &need(&n.ports, "node.nic.ports")?,
        "node.nic.ports",
        1,
        8,
    )?;
    let port_gbps = n.port_gbps.clone().ok_or_else(|| {
        doc.err(
            nic_span.clone(),
            "node.nic.port_gbps",
            "missing (needed with kind = \"pci\")",
        )
    })?;
    let port_gbps = num(doc, &port_gbps, "node.nic.port_gbps", 0.0, 800.0)?;
    let generation = int(
        doc,
        &need(&n.pcie_gen, "node.nic.pcie_gen")?,
        "node.nic.pcie_gen",
        1,
        5,
    )?;
    let lanes_v = need(&n.pcie_lanes, "node.nic.pcie_lanes")?;
    let lanes = *lanes_v.get_ref();
    if ![1, 2, 4, 8, 16].contains(&lanes) {
        return Err(doc.err(
            lanes_v.span(),
            "node.nic.pcie_lanes",
            format!("{lanes} is not 1, 2, 4, 8 or 16"),
        ));
    }
    let vfs = n
        .vfs
        .as_ref()
        .map(|v| int(doc, v, "node.nic.vfs", 0, 4096))
        .transpose()?
        .unwrap_or(0);
    Ok(Nic::Pci {
        ports,
        port_gbps,
        pcie: Pcie::new(generation as u8, lanes as u8),
        vfs,
        engine: engine(doc, n)?,
    })
}

/// `nic_model` and the limits given beside it (which override the
/// model's).
fn engine(doc: &Doc, n: &RawNic) -> Result<Engine, TopologyError> {
    let model = match &n.nic_model {
        None => None,
        Some(v) => Some(nic::model(v.get_ref()).ok_or_else(|| {
            doc.err(
                v.span(),
                "node.nic.nic_model",
                format!(
                    "{:?} is not a known NIC class ({}); give packet_rate_mpps and \
                     hairpin_mpps instead",
                    v.get_ref(),
                    nic::model_names()
                ),
            )
        })?),
    };
    let rate = |v: &Option<S<Num>>, field: &str| {
        v.as_ref()
            .map(|v| num(doc, v, field, 0.0, 10_000.0))
            .transpose()
    };
    let packet_rate = rate(&n.packet_rate_mpps, "node.nic.packet_rate_mpps")?;
    let hairpin = rate(&n.hairpin_mpps, "node.nic.hairpin_mpps")?;
    Ok(Engine {
        model: model.map(|m| m.name.to_string()),
        packet_rate_mpps: packet_rate.or(model.and_then(|m| m.packet_rate_mpps)),
        hairpin_mpps: hairpin.or(model.and_then(|m| m.hairpin_mpps)),
    })
}

/// `kind = "testbed"`: no wire and no PCIe, so none of their keys.
fn testbed_nic(doc: &Doc, n: &RawNic) -> Result<Nic, TopologyError> {
    let stray = [
        ("ports", n.ports.as_ref().map(|v| v.span())),
        ("port_gbps", n.port_gbps.as_ref().map(|v| v.span())),
        ("pcie_gen", n.pcie_gen.as_ref().map(|v| v.span())),
        ("pcie_lanes", n.pcie_lanes.as_ref().map(|v| v.span())),
        ("vfs", n.vfs.as_ref().map(|v| v.span())),
        ("nic_model", n.nic_model.as_ref().map(|v| v.span())),
        (
            "packet_rate_mpps",
            n.packet_rate_mpps.as_ref().map(|v| v.span()),
        ),
        ("hairpin_mpps", n.hairpin_mpps.as_ref().map(|v| v.span())),
    ];
    if let Some((k, Some(span))) = stray.into_iter().find(|(_, s)| s.is_some()) {
        return Err(doc.err(
            span,
            &format!("node.nic.{k}"),
            "not used with kind = \"testbed\" (the test bed has no wire and no PCIe)",
        ));
    }
    Ok(Nic::Testbed)
}

fn service(doc: &Doc, r: RawService) -> Result<Service, TopologyError> {
    let vnfs = vnfs(doc, &r.vnfs)?;
    let shape = shape(doc, &r)?;
    let frames = frames(doc, &r.frames)?;
    let offered = offered(doc, &r)?;
    let interface = match &r.interface {
        None => VnfInterface::default(),
        Some(v) => v
            .get_ref()
            .parse::<VnfInterface>()
            .map_err(|e| doc.err(v.span(), "service.interface", e.to_string()))?,
    };
    let vnf_poll = match &r.vnf_poll {
        None => VnfPoll::default(),
        Some(v) => match v.get_ref().as_str() {
            "busy" => VnfPoll::Busy,
            "adaptive" => VnfPoll::Adaptive,
            other => {
                return Err(doc.err(
                    v.span(),
                    "service.vnf_poll",
                    format!("{other:?} is not \"busy\" or \"adaptive\""),
                ));
            }
        },
    };
    Ok(Service {
        vnfs,
        shape,
        frames,
        offered,
        interface,
        vnf_poll,
    })
}

/// `service.vnfs`: one N or a list of them.
fn vnfs(doc: &Doc, v: &S<OneOrMany>) -> Result<Vec<u32>, TopologyError> {
    let span = v.span();
    Ok(match v.get_ref() {
        OneOrMany::One(x) => vec![int(doc, &S::new(span, *x), "service.vnfs", 1, 64)?],
        OneOrMany::Many(list) if list.is_empty() => {
            return Err(doc.err(span, "service.vnfs", "needs at least one N"));
        }
        OneOrMany::Many(list) => list
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let field = format!("service.vnfs[{i}]");
                int(doc, &S::new(span.clone(), x), &field, 1, 64)
            })
            .collect::<Result<Vec<_>, _>>()?,
    })
}

/// `service.shape`, with `chain_length` where (and only where) it is mixed.
fn shape(doc: &Doc, r: &RawService) -> Result<Shape, TopologyError> {
    let chain_length = r
        .chain_length
        .as_ref()
        .map(|v| int(doc, v, "service.chain_length", 1, 64))
        .transpose()?;
    match (r.shape.get_ref().as_str(), chain_length) {
        ("north-south" | "ns", None) => Ok(Shape::NorthSouth),
        ("east-west" | "ew", None) => Ok(Shape::EastWest),
        ("mixed", Some(chain_length)) => Ok(Shape::Mixed { chain_length }),
        ("mixed", None) => Err(doc.err(
            r.shape.span(),
            "service.chain_length",
            "missing (needed with shape = \"mixed\")",
        )),
        ("north-south" | "ns" | "east-west" | "ew", Some(_)) => {
            let span = r.chain_length.as_ref().map_or(r.shape.span(), |v| v.span());
            Err(doc.err(span, "service.chain_length", "only with shape = \"mixed\""))
        }
        (other, _) => Err(doc.err(
            r.shape.span(),
            "service.shape",
            format!("{other:?} is not \"north-south\", \"east-west\" or \"mixed\""),
        )),
    }
}

/// `service.offered_gbps` or `service.offered_mpps` (not both); neither:
/// line rate.
fn offered(doc: &Doc, r: &RawService) -> Result<Offered, TopologyError> {
    Ok(match (&r.offered_gbps, &r.offered_mpps) {
        (Some(g), Some(m)) => {
            let span = if g.span().start > m.span().start {
                g.span()
            } else {
                m.span()
            };
            return Err(doc.err(
                span,
                "service.offered_mpps",
                "give offered_gbps or offered_mpps, not both",
            ));
        }
        (Some(g), None) => Offered::Gbps(num(doc, g, "service.offered_gbps", 0.0, 10_000.0)?),
        (None, Some(m)) => Offered::Mpps(num(doc, m, "service.offered_mpps", 0.0, 10_000.0)?),
        (None, None) => Offered::Line,
    })
}

fn frame_size(doc: &Doc, v: S<i64>, field: &str) -> Result<Frames, TopologyError> {
    int(doc, &v, field, 64, 1518).map(|s| Frames::Size(s as usize))
}

fn named(
    doc: &Doc,
    s: &str,
    span: std::ops::Range<usize>,
    field: &str,
) -> Result<Frames, TopologyError> {
    match s {
        "imix" | "IMIX" => Ok(Frames::Imix),
        other => Err(doc.err(
            span,
            field,
            format!("{other:?} is not a frame size or \"imix\""),
        )),
    }
}

fn frames(doc: &Doc, v: &S<RawFrames>) -> Result<Vec<Frames>, TopologyError> {
    let f = "service.frames";
    match v.get_ref() {
        RawFrames::Named(s) => Ok(vec![named(doc, s, v.span(), f)?]),
        RawFrames::One(x) => Ok(vec![frame_size(doc, S::new(v.span(), *x), f)?]),
        RawFrames::Many(list) if list.is_empty() => {
            Err(doc.err(v.span(), f, "needs at least one frame size"))
        }
        RawFrames::Many(list) => list
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let field = format!("{f}[{i}]");
                match item {
                    RawFrame::Size(x) => frame_size(doc, S::new(v.span(), *x), &field),
                    RawFrame::Named(s) => named(doc, s, v.span(), &field),
                }
            })
            .collect(),
    }
}
