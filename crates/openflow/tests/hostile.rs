//! Whatever a peer sends, the session answers or closes; it never panics
//! and never changes the table for a message it refused. Messages are
//! random bytes behind a valid header, and a valid flow_mod cut short or
//! with a byte changed.

use nfv_flow::FlowSpec;
use nfv_flow::table::SharedFlowTable;
use nfv_openflow::session::Session;
use nfv_openflow::wire::{self, OfError};
use nfv_openflow::{Agent, Description, PortInfo, Switch};
use proptest::prelude::*;
use std::sync::Arc;

struct AnyPorts;

impl Switch for AnyPorts {
    fn datapath_id(&self) -> u64 {
        1
    }
    fn description(&self) -> Description {
        Description::default()
    }
    fn ports(&self) -> Vec<PortInfo> {
        vec![PortInfo {
            no: 1,
            name: "p1".into(),
            ..Default::default()
        }]
    }
    fn resolve(&self, spec: FlowSpec) -> Result<Vec<FlowSpec>, OfError> {
        Ok(vec![spec])
    }
}

fn session() -> (Session, Arc<SharedFlowTable>) {
    let table = Arc::new(SharedFlowTable::new());
    let agent = Agent::new(Arc::new(AnyPorts), table.clone());
    let (tx, _rx) = std::sync::mpsc::sync_channel(16);
    let mut s = Session::new(agent, "test".into(), tx);
    let mut out = Vec::new();
    assert!(s.handle(&Session::hello(), &mut out));
    (s, table)
}

fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![wire::VERSION, kind, 0, 0, 0, 0, 0, 7];
    m.extend_from_slice(body);
    let len = m.len() as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    m
}

/// A flow_mod adding `priority=7,tcp,tp_dst=80,actions=output:1`,
/// encoded by hand from the OpenFlow 1.3 layout (fixed part; OXM
/// eth_type, ip_proto, tcp_dst; apply-actions with one output).
fn a_flow_mod() -> Vec<u8> {
    let hex = "0000000000000000 0000000000000000 00 00 0000 0000 0007 ffffffff ffffffff ffffffff 0000 0000\
               0001 0015 80000a02 0800 80001401 06 80001c02 0050 000000\
               0004 0018 00000000 0000 0010 00000001 0000 000000000000";
    let bytes: Vec<u8> = hex
        .split_whitespace()
        .collect::<String>()
        .as_bytes()
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
        .collect();
    message(wire::msg::FLOW_MOD, &bytes)
}

#[test]
fn the_recorded_flow_mod_installs_its_rule() {
    let (mut s, table) = session();
    let mut out = Vec::new();
    assert!(s.handle(&a_flow_mod(), &mut out));
    assert!(out.is_empty(), "refused: {out:?}");
    let rules = table.snapshot().classifier.rules();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].spec.to_string(),
        "priority=7,tcp,tp_dst=80,actions=output:1"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Random bodies behind every message type.
    #[test]
    fn random_bodies_are_answered_or_refused(kind in 0u8..40, body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let (mut s, _) = session();
        let mut out = Vec::new();
        let _ = s.handle(&message(kind, &body), &mut out);
        for m in &out {
            let h = wire::Header::parse(m).unwrap();
            prop_assert_eq!(usize::from(h.length), m.len());
        }
    }

    /// A real flow_mod cut short or with a byte changed: installed
    /// as a whole, or refused with an error and the table untouched.
    #[test]
    fn damaged_flow_mods_install_whole_rules_or_nothing(cut in 0usize..200, at in 8usize..96, byte in any::<u8>()) {
        let (mut s, table) = session();
        let mut m = a_flow_mod();
        if at < m.len() {
            m[at] = byte;
        }
        let cut = cut.min(m.len()).max(8);
        m.truncate(cut);
        let len = m.len() as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        let mut out = Vec::new();
        let _ = s.handle(&m, &mut out);
        let rules = table.snapshot().classifier.rules();
        if out.iter().any(|r| r[1] == wire::msg::ERROR) {
            prop_assert!(rules.is_empty(), "refused but installed {:?}", rules);
        }
        prop_assert!(rules.len() <= 1);
    }
}
