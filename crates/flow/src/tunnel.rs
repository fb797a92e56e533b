//! `tun_id` in rules, resolved against the tunnel ports when a rule is
//! installed.
//!
//! A tunnel port (`type = "vxlan"`) carries exactly one VNI: it receives
//! only frames with that VNI and sends with it. So a packet's `tun_id` is
//! a function of its `in_port`, and the flow key needs no tunnel field.
//! [`resolve`] rewrites:
//! - `tun_id=V` in a match into `in_port=P` for each tunnel port `P`
//!   carrying `V` (one rule each; a rule that names an `in_port` keeps it
//!   when that port carries `V`);
//! - `set_field:V->tun_id` before an `output:P` into a check that tunnel
//!   port `P` carries `V` (a non-tunnel output ignores it, as in OVS).
//!
//! What cannot match or cannot send as written is refused with the ports
//! that would fit, so nothing is installed that silently does nothing.
//!

use crate::action::Action;
use crate::key::PortNo;
use crate::rule::FlowSpec;

/// A tunnel port and the VNI it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TunnelPort {
    pub no: PortNo,
    pub vni: u32,
}

/// Why a rule cannot be installed as [`resolve`] finds it: its `tun_id`,
/// or an action the datapath does not run yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunnelError {
    #[error("tun_id={vni}: no tunnel port carries VNI {vni}{}", known(.tunnels))]
    NoPort { vni: u32, tunnels: Vec<TunnelPort> },
    #[error(
        "tun_id={vni} with in_port={in_port}: port {in_port} is not a tunnel port \
         carrying VNI {vni}, so the rule could never match{}",
        known(.tunnels)
    )]
    NotOnInPort {
        vni: u32,
        in_port: PortNo,
        tunnels: Vec<TunnelPort>,
    },
    #[error(
        "set_field:{vni}->tun_id then output:{port}: tunnel port {port} sends with \
         VNI {carries} (each tunnel port has one VNI){}",
        known(.tunnels)
    )]
    OtherVni {
        vni: u32,
        port: PortNo,
        carries: u32,
        tunnels: Vec<TunnelPort>,
    },
}

fn known(tunnels: &[TunnelPort]) -> String {
    if tunnels.is_empty() {
        return " (there are no tunnel ports)".into();
    }
    let list: Vec<String> = tunnels
        .iter()
        .take(8)
        .map(|t| format!("port {} VNI {}", t.no, t.vni))
        .collect();
    let more = if tunnels.len() > 8 { ", ..." } else { "" };
    format!(" (tunnel ports: {}{more})", list.join(", "))
}

/// The rules to install for `spec`, given the node's tunnel ports: `spec`
/// itself when it has no `tun_id` match, else one rule per tunnel port
/// carrying that VNI (see the module doc). Every `set_field:V->tun_id`
/// is checked against the tunnel outputs after it.
pub fn resolve(spec: FlowSpec, tunnels: &[TunnelPort]) -> Result<Vec<FlowSpec>, TunnelError> {
    check_outputs(&spec.actions, tunnels)?;
    let Some(vni) = spec.tun_id else {
        return Ok(vec![spec]);
    };
    let err_tunnels = || tunnels.to_vec();
    let carrying = || tunnels.iter().filter(move |t| t.vni == vni);
    if spec.matches.mask.in_port() != 0 {
        let in_port = spec.matches.key.in_port();
        if carrying().any(|t| t.no == in_port) {
            return Ok(vec![spec]);
        }
        return Err(TunnelError::NotOnInPort {
            vni,
            in_port,
            tunnels: err_tunnels(),
        });
    }
    let rules: Vec<FlowSpec> = carrying()
        .map(|t| {
            let mut s = spec.clone();
            s.matches.key.set_in_port(t.no);
            s.matches.mask.set_in_port(PortNo::MAX);
            s
        })
        .collect();
    if rules.is_empty() {
        return Err(TunnelError::NoPort {
            vni,
            tunnels: err_tunnels(),
        });
    }
    Ok(rules)
}

fn check_outputs(actions: &[Action], tunnels: &[TunnelPort]) -> Result<(), TunnelError> {
    let mut set = None;
    for a in actions {
        match *a {
            Action::SetTunnel(v) => set = Some(v),
            Action::Output(p) => {
                let (Some(vni), Some(t)) = (set, tunnels.iter().find(|t| t.no == p)) else {
                    continue;
                };
                if t.vni != vni {
                    return Err(TunnelError::OtherVni {
                        vni,
                        port: p,
                        carries: t.vni,
                        tunnels: tunnels.to_vec(),
                    });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_flow;

    const TUNNELS: &[TunnelPort] = &[
        TunnelPort { no: 7, vni: 100 },
        TunnelPort { no: 8, vni: 200 },
        TunnelPort { no: 9, vni: 100 },
    ];

    /// Rule text → the rules installed (canonical text) or the error's text.
    const CASES: &[(&str, Result<&[&str], &str>)] = &[
        (
            "in_port=1,actions=output:2",
            Ok(&["priority=32768,in_port=1,actions=output:2"]),
        ),
        (
            "tun_id=100,actions=output:1",
            Ok(&[
                "priority=32768,tun_id=0x64,in_port=7,actions=output:1",
                "priority=32768,tun_id=0x64,in_port=9,actions=output:1",
            ]),
        ),
        (
            "tun_id=200,in_port=8,tcp,actions=output:1",
            Ok(&["priority=32768,tun_id=0xc8,tcp,in_port=8,actions=output:1"]),
        ),
        (
            "tun_id=200,in_port=7,actions=output:1",
            Err(
                "tun_id=200 with in_port=7: port 7 is not a tunnel port carrying VNI 200, \
                 so the rule could never match (tunnel ports: port 7 VNI 100, port 8 VNI 200, \
                 port 9 VNI 100)",
            ),
        ),
        (
            "tun_id=200,in_port=1,actions=output:2",
            Err("port 1 is not a tunnel port carrying VNI 200"),
        ),
        (
            "tun_id=300,actions=drop",
            Err("tun_id=300: no tunnel port carries VNI 300 (tunnel ports: port 7 VNI 100"),
        ),
        (
            "in_port=1,actions=set_field:200->tun_id,output:8",
            Ok(&["priority=32768,in_port=1,actions=set_field:0xc8->tun_id,output:8"]),
        ),
        (
            // A non-tunnel output ignores tun_id, as in OVS.
            "in_port=1,actions=set_tunnel:5,output:2",
            Ok(&["priority=32768,in_port=1,actions=set_field:0x5->tun_id,output:2"]),
        ),
        (
            "in_port=1,actions=set_field:200->tun_id,output:8,set_tunnel:100,output:7,output:9",
            Ok(&[
                "priority=32768,in_port=1,actions=set_field:0xc8->tun_id,output:8,\
                  set_field:0x64->tun_id,output:7,output:9",
            ]),
        ),
        (
            "in_port=1,actions=set_field:100->tun_id,output:8",
            Err("set_field:100->tun_id then output:8: tunnel port 8 sends with VNI 200"),
        ),
        (
            "in_port=1,actions=set_tunnel:100,output:7,output:8",
            Err("output:8: tunnel port 8 sends with VNI 200"),
        ),
        (
            // An output before any set_field sends with the port's VNI.
            "in_port=1,actions=output:8,set_tunnel:100,output:7",
            Ok(&["priority=32768,in_port=1,actions=output:8,set_field:0x64->tun_id,output:7"]),
        ),
        // ct() and ct_clear resolve like any action.
        (
            "ip,actions=ct(commit),output:7",
            Ok(&["priority=32768,ip,actions=ct(commit),output:7"]),
        ),
        (
            "in_port=1,actions=ct_clear,output:8",
            Ok(&["priority=32768,in_port=1,actions=ct_clear,output:8"]),
        ),
    ];

    #[test]
    fn rules_resolve_against_the_tunnel_ports() {
        for (text, want) in CASES {
            let spec = parse_flow(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            match (resolve(spec, TUNNELS), want) {
                (Ok(rules), Ok(want)) => {
                    let got: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
                    assert_eq!(got, *want, "{text}");
                }
                (Err(e), Err(want)) => {
                    assert!(e.to_string().contains(want), "{text}: {e}")
                }
                (got, _) => panic!("{text}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn without_tunnel_ports_the_error_says_so() {
        let spec = parse_flow("tun_id=1,actions=drop").unwrap();
        let e = resolve(spec, &[]).unwrap_err().to_string();
        assert_eq!(
            e,
            "tun_id=1: no tunnel port carries VNI 1 (there are no tunnel ports)"
        );
    }

    #[test]
    fn set_tunnel_does_not_hide_a_single_output() {
        let spec = parse_flow("in_port=1,actions=set_tunnel:100,output:7").unwrap();
        assert_eq!(spec.single_output(), Some(7));
        let two = parse_flow("in_port=1,actions=set_tunnel:100,output:7,output:9").unwrap();
        assert_eq!(two.single_output(), None);
    }

    /// A hairpin (`in_port` alone) is told apart the same way: whatever
    /// `set_tunnel` stands beside it, and never with a second action.
    #[test]
    fn only_in_port_is_a_hairpin() {
        let cases = [
            ("in_port=1,actions=in_port", true),
            ("in_port=1,actions=set_tunnel:100,in_port", true),
            ("in_port=1,actions=in_port,output:2", false),
            (
                "in_port=1,actions=mod_dl_src:aa:bb:cc:dd:ee:01,in_port",
                false,
            ),
            ("in_port=1,actions=output:1", false),
            ("in_port=1,actions=drop", false),
        ];
        for (flow, hairpin) in cases {
            let spec = parse_flow(flow).unwrap();
            assert_eq!(spec.only_in_port(), hairpin, "{flow}");
            let rule = crate::Rule::new(spec, 0);
            assert_eq!(rule.hairpin, hairpin, "{flow}");
            // Received on port 1: a hairpin goes back out of it; `output:1`
            // sends nothing and is left to the interpreter.
            assert_eq!(rule.direct_output(1), hairpin.then_some(1), "{flow}");
        }
    }
}
