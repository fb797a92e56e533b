//! The vCPUs' placement a trial saw: whether the cache-line round trip
//! between the endpoint's and the switch's CPU says they share an L3
//! (near) or not (far). `paired.rs` says why it matters; `trial.rs` waits
//! for one (`compare --placement`) and `paired.rs` pairs trials by it.

use serde::Serialize;

/// Round trips below this are a shared-L3 placement.
pub const NEAR_BELOW_NS: f64 = 150.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Near,
    Far,
}

impl Placement {
    pub fn of(c2c_ns: Option<f64>) -> Option<Placement> {
        let ns = c2c_ns.filter(|n| n.is_finite())?;
        Some(if ns < NEAR_BELOW_NS {
            Placement::Near
        } else {
            Placement::Far
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Placement::Near => "near",
            Placement::Far => "far",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_threshold() {
        assert_eq!(Placement::of(Some(74.0)), Some(Placement::Near));
        assert_eq!(Placement::of(Some(NEAR_BELOW_NS)), Some(Placement::Far));
        assert_eq!(Placement::of(Some(f64::NAN)), None);
        assert_eq!(Placement::of(None), None);
    }
}
