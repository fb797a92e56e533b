//! What a plan should say about its cost profile: figures it took from
//! other sizes because calibration failed at the size the plan needs, and
//! a profile taken on a machine unlike the node.
//!
//! [`notes`] gives three kinds, in this order:
//! 1. per hop type and frame size the plan reads, a calibration point
//!    recorded missing ([`MissingPoint`]) that would have been used: which
//!    measured sizes the figures came from instead (held flat from the
//!    nearest, or interpolated between two);
//! 2. the node has *far more* cores than the profile's machine: its
//!    `switch_cores + vnf_cores` exceed [`FAR_MORE`] × the machine's
//!    cores. On a small machine the switch and the VNFs compete for cores
//!    and the per-hop cycle figures carry that waiting;
//! 3. the VNFs shared cores during calibration ([`Placement`]).
//!
//! The built-in profile gets none of 2 and 3: the plan already says it is
//! not of this node. Hop types a profile marks unavailable get none of 1:
//! the plan uses the built-in figures for them and says so.

use crate::profile::{
    Figure, HopKind, HopProfile, MissingPoint, Placement, Profile, sources_among,
};
use crate::topology::{Nic, Node, Topology};
use nfv_vnf_interface::VnfInterface;

/// A node has far more cores than the profile's machine when its switch
/// and VNF cores together exceed this many times the machine's cores.
pub const FAR_MORE: usize = 2;

/// The figures of a VNF hop a plan reads, with their names in notes.
const FIGURES: [(Figure, &str); 3] = [
    (Figure::Edge, "edge"),
    (Figure::Inner, "inner"),
    (Figure::Vnf, "VNF"),
];

/// Every note on `profile` for planning `topology` (see the module doc).
pub fn notes(profile: &Profile, topology: &Topology) -> Vec<String> {
    let mut notes = missing_notes(profile, &used_points(topology));
    notes.extend(core_count_note(profile, &topology.node));
    notes.extend(profile.placement.and_then(shared_cores_note));
    notes
}

/// The (hop type, frame size) pairs a plan of `t` reads figures of: both
/// copy modes of the service's interface, the NIC port (AF_XDP) and the
/// VF on a PCI NIC (the VF only when it has some), at every size of every
/// frame mix.
pub fn used_points(t: &Topology) -> Vec<(HopKind, usize)> {
    let mut kinds = match t.service.interface {
        VnfInterface::VhostUser => vec![HopKind::VhostCopy, HopKind::VhostOneCopy],
        VnfInterface::Memif => vec![HopKind::MemifCopy, HopKind::MemifOneCopy],
    };
    if let Nic::Pci { vfs, .. } = t.node.nic {
        kinds.push(HopKind::Afxdp);
        if vfs > 0 {
            kinds.push(HopKind::Vf);
        }
    }
    let mut sizes: Vec<usize> = t
        .service
        .frames
        .iter()
        .flat_map(|f| f.mix())
        .map(|(size, _)| size)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    kinds.sort();
    kinds
        .iter()
        .flat_map(|&k| sizes.iter().map(move |&s| (k, s)))
        .collect()
}

/// Note 1 for every used point that a missing point would have served.
fn missing_notes(profile: &Profile, used: &[(HopKind, usize)]) -> Vec<String> {
    let mut notes = Vec::new();
    for &(kind, size) in used {
        let Some(hop) = profile.hops.get(&kind).filter(|h| h.unavailable.is_none()) else {
            continue;
        };
        for m in profile.missing.iter().filter(|m| m.hop == kind) {
            if let Some(instead) = substitutes(hop, size, m.size) {
                notes.push(missing_note(kind, size, m, &instead));
            }
        }
    }
    notes
}

fn missing_note(kind: HopKind, size: usize, m: &MissingPoint, instead: &str) -> String {
    if m.size == size {
        format!("{kind} {size} B: calibration failed ({}); {instead}", m.why)
    } else {
        format!(
            "{kind} {size} B: the {} B calibration point failed ({}); {instead}",
            m.size, m.why
        )
    }
}

/// Which sizes `hop`'s figures at `size` came from, for the figures the
/// missing point at `missing` would have changed (`None`: it changed none).
fn substitutes(hop: &HopProfile, size: usize, missing: usize) -> Option<String> {
    // (where the figure came from, the figures that came from there)
    let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
    for (fig, name) in FIGURES {
        let measured = hop.measured_sizes(fig);
        let used = sources_among(&measured, size);
        let mut with_missing = measured.clone();
        with_missing.push(missing);
        with_missing.sort_unstable();
        with_missing.dedup();
        if used.is_empty() || used == sources_among(&with_missing, size) {
            continue;
        }
        let from = describe_sources(&used);
        match groups.iter_mut().find(|g| g.0 == from) {
            Some(g) => g.1.push(name),
            None => groups.push((from, vec![name])),
        }
    }
    if groups.is_empty() {
        return None;
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(from, names)| format!("the {} figures are {from}", and_list(names)))
        .collect();
    Some(parts.join("; "))
}

/// Where a figure came from, given [`sources_among`]'s answer (one or
/// two sizes, neither the size asked for).
fn describe_sources(sources: &[usize]) -> String {
    match sources {
        [a, b] => format!("interpolated between {a} B and {b} B"),
        [a] => format!("the {a} B ones (the nearest measured size, held flat)"),
        _ => format!("from {sources:?} B"),
    }
}

/// "a", "a and b", "a, b and c".
fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Note 2: the node has far more cores than the profile's machine.
fn core_count_note(profile: &Profile, node: &Node) -> Option<String> {
    let machine = profile.machine.cores;
    let node_cores = (node.switch_cores + node.vnf_cores) as usize;
    if profile.source == Profile::BUILTIN || machine == 0 || node_cores <= FAR_MORE * machine {
        return None;
    }
    let evidence = inner_to_edge(profile)
        .filter(|&r| r >= 2.0)
        .map_or(String::new(), |r| {
            format!(
                " (in this profile an inner hop costs {r:.1}x an edge hop, though both move \
                 a packet from one port to another)"
            )
        });
    Some(format!(
        "the profile was calibrated on a machine with {machine} cores; this node has \
         {node_cores} ({} switch + {} VNF): on a machine that small the switch and the VNFs \
         wait for each other's cores, which inflates the per-hop cycle figures{evidence}, so \
         the predicted rates for this node are likely too low (and the cores needed too \
         high); calibrate on a machine with cores like the node's",
        node.switch_cores, node.vnf_cores
    ))
}

/// The mean of inner / edge cycles over the points that have both.
fn inner_to_edge(profile: &Profile) -> Option<f64> {
    let ratios: Vec<f64> = profile
        .hops
        .values()
        .flat_map(|h| &h.points)
        .filter_map(|p| match (p.inner_cycles, p.edge_cycles) {
            (Some(i), Some(e)) if e > 0.0 => Some(i / e),
            _ => None,
        })
        .collect();
    (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64)
}

/// Note 3: the VNFs shared cores during calibration.
fn shared_cores_note(p: Placement) -> Option<String> {
    if !p.vnfs_shared_cores() {
        return None;
    }
    let cores = if p.vnf_cores == 0 {
        format!("on the switch's {} PMD core(s)", p.pmd_cores)
    } else {
        format!("on {} core(s) of their own", p.vnf_cores)
    };
    Some(format!(
        "VNFs shared cores during calibration (up to {} VNFs ran {cores}): the inner-hop and \
         VNF figures include waiting for the shared core and overstate what a hop costs on a \
         node with a core per VNF",
        p.vnfs
    ))
}

#[cfg(test)]
#[path = "profile_notes_tests.rs"]
mod tests;
