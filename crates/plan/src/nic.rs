//! What a NIC's controller itself can process, apart from its ports and
//! its PCIe link ([`crate::pcie`]): the packet rate of its packet engine,
//! and the rate of its VF-to-VF switching (an SR-IOV hairpin through the
//! NIC's internal switch).
//!
//! A topology names these with `[node.nic]`'s `packet_rate_mpps` and
//! `hairpin_mpps`, or with `nic_model`, which takes them from
//! [`MODELS`]; given fields override the model's. Without either, the
//! model knows only the link and the ports, so its small-frame SR-IOV
//! figures are upper bounds (the plan says so).
//!
//! How the model counts (see [`crate::model`]):
//! - **packet rate** `P`: the frames the controller receives (from the
//!   wire or, looped back, from another VF) per second. Each delivered
//!   packet is received once from the wire, plus once more per VF-to-VF
//!   hop of an SR-IOV chain: `T × mean L ≤ P` for SR-IOV, `T ≤ P` for the
//!   switch modes and hybrid (one receive, from the wire).
//! - **hairpin rate** `H`: once a chain's VFs forward to each other, the
//!   frames the NIC's switch delivers to those VFs per second (from the
//!   wire or from another VF alike): `T / P × Σ L_i ≤ H` over the SR-IOV
//!   chains of two or more VNFs (`P` chains in all). Chains of one VNF
//!   (north-south) do not hairpin.
//!
//! The built-in figures and where they come from are in [`MODELS`]; each
//! cites a public source, none is fitted to a measurement this project
//! checks the planner against.

use serde::Serialize;

/// A NIC class with published limits.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Model {
    /// The name a topology gives as `nic_model`.
    pub name: &'static str,
    pub describe: &'static str,
    /// Frames per second the packet engine processes (millions), where
    /// a source gives it.
    pub packet_rate_mpps: Option<f64>,
    /// VF-to-VF frames per second through the internal switch (millions).
    pub hairpin_mpps: Option<f64>,
    /// Where the figures come from.
    pub source: &'static str,
}

/// The NIC classes `nic_model` knows. Only figures a public source
/// states are given; a limit no source states is `None` (the plan then
/// treats it as unknown, as it would without a model).
pub const MODELS: &[Model] = &[
    Model {
        name: "xl710",
        describe: "Intel Ethernet Controller XL710 (700 series, 40GbE, PCIe Gen3 x8)",
        packet_rate_mpps: Some(37.0),
        hairpin_mpps: Some(18.5),
        source: "packet rate: Intel, FPGA PAC N3000 documentation, \"Intel Ethernet Controller \
                 XL710\" limitations (doc 683749): \"For packets below 160 bytes, there is a \
                 hardware packet processing limit for the entire device of ~37 Mpps\", citing the \
                 X710/XXV710/XL710 Specification Update, \"Throughput Limit\" (TRex's FAQ reports \
                 40 Mpps for both ports of an XL710-DA2 at 64 B). VF-to-VF: no datasheet states \
                 it; the one public measurement of this class is Intel's own (P. Kutch, B. \
                 Johnson, \"SR-IOV for NFV Solutions\", 2017, and the talk of it in the seeds): \
                 an east-west chain of 2 to 8 testpmd VNFs on VFs transmits 18-19 Mpps at 64 B in \
                 all, whatever the length. So the planner's east-west 64 B row agrees with that \
                 talk by construction; its other rows do not use it.",
    },
    Model {
        name: "x710",
        describe: "Intel Ethernet Controller X710/XXV710 (700 series, 10/25GbE)",
        packet_rate_mpps: Some(37.0),
        hairpin_mpps: None,
        source: "the 700 series' device limit as for xl710 (the Specification Update's \
                 \"Throughput Limit\" covers X710/XXV710/XL710; TRex's FAQ: an X710-DA4 reaches \
                 40 Mpps for its four ports at 64 B); no public VF-to-VF figure.",
    },
    Model {
        name: "82599",
        describe: "Intel 82599 (X520, 10GbE, PCIe Gen2 x8)",
        packet_rate_mpps: Some(30.0),
        hairpin_mpps: None,
        source: "TRex FAQ: an X520 (82599) NIC \"can reach ~30MPPS for two ports\" at 64 B; no \
                 public VF-to-VF figure (an Intel engineer on Intel's forum: VF to VF \"at PCIe \
                 speeds\", no number).",
    },
    Model {
        name: "cx4-lx",
        describe: "NVIDIA (Mellanox) ConnectX-4 Lx (10-50GbE)",
        packet_rate_mpps: Some(75.0),
        hairpin_mpps: None,
        source: "ConnectX-4 Lx EN product brief: \"a 75 million packets per second message \
                 rate\"; no public eSwitch VF-to-VF figure.",
    },
    Model {
        name: "cx5",
        describe: "NVIDIA (Mellanox) ConnectX-5 (100GbE)",
        packet_rate_mpps: Some(137.0),
        hairpin_mpps: None,
        source: "Mellanox community (DOC-1502): \"ConnectX-5 NIC reaches 137Mpps packet frame \
                 rate (64Byte frame size) on a single port of 100GbE\"; no public eSwitch \
                 VF-to-VF figure.",
    },
    Model {
        name: "cx6",
        describe: "NVIDIA (Mellanox) ConnectX-6 EN (200GbE)",
        packet_rate_mpps: Some(215.0),
        hairpin_mpps: None,
        source: "ConnectX-6 EN product brief and user manual: \"215 million messages per \
                 second\"; no public eSwitch VF-to-VF figure.",
    },
];

/// The controller limits a plan uses.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Engine {
    /// `nic_model`, if one was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packet_rate_mpps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hairpin_mpps: Option<f64>,
}

impl Engine {
    /// Neither limit is known: the link and the ports bound the NIC.
    pub fn unknown(&self) -> bool {
        self.packet_rate_mpps.is_none() && self.hairpin_mpps.is_none()
    }
}

/// The model called `name` (case-insensitive).
pub fn model(name: &str) -> Option<&'static Model> {
    MODELS.iter().find(|m| m.name.eq_ignore_ascii_case(name))
}

/// The names `nic_model` takes, for refusals and `--explain-topology`.
pub fn model_names() -> String {
    MODELS
        .iter()
        .map(|m| format!("\"{}\"", m.name))
        .collect::<Vec<_>>()
        .join(", ")
}
