//! Frame sizes (IMIX) and rates (packets per second or a share of a line
//! rate).
//!
//! # IMIX
//!
//! [`SIMPLE_IMIX`] is the "simple IMIX" of traffic testers: 7 : 4 : 1
//! frames of 64, 594 and 1518 bytes (58.3 %, 33.3 %, 8.3 % of frames;
//! the classic 40/576/1500-byte IP packets in Ethernet frames), mean
//! 361.8 bytes. Sizes are frame lengths as this switch counts them (no
//! FCS). The mix is sent as a fixed 12-frame pattern interleaved by smooth
//! weighted round-robin, so every 12 consecutive frames hold exactly the
//! mix — [`pattern`].
//!
//! # Line rate
//!
//! On an Ethernet wire every frame also takes 4 bytes of FCS (which this
//! switch's frame lengths exclude), 8 of preamble and start delimiter and
//! 12 of inter-frame gap: [`WIRE_OVERHEAD`] = 24 bytes. So 100 % of
//! 10 Gbit/s is 10e9 / ((64 + 24) × 8) = 14.20 Mpps of 64-byte frames (the
//! familiar 14.88 Mpps counts the FCS inside the 64 bytes).

/// (frame size in bytes without FCS, weight)
pub type Mix = [(usize, u32)];

/// The simple IMIX: 7 × 64, 4 × 594, 1 × 1518 bytes.
pub const SIMPLE_IMIX: [(usize, u32); 3] = [(64, 7), (594, 4), (1518, 1)];

/// Bytes a frame takes on the wire besides its length as counted here:
/// FCS 4 + preamble/SFD 8 + inter-frame gap 12.
pub const WIRE_OVERHEAD: usize = 24;

/// One round of the mix, interleaved (smooth weighted round-robin): each
/// entry is an index into `mix`; the length is the sum of the weights.
pub fn pattern(mix: &Mix) -> Vec<usize> {
    let total: i64 = mix.iter().map(|&(_, w)| i64::from(w)).sum();
    let mut current = vec![0i64; mix.len()];
    (0..total)
        .map(|_| {
            for (c, &(_, w)) in current.iter_mut().zip(mix) {
                *c += i64::from(w);
            }
            let (best, _) = current
                .iter()
                .enumerate()
                .max_by_key(|&(i, c)| (*c, std::cmp::Reverse(i)))
                .expect("non-empty mix");
            current[best] -= total;
            best
        })
        .collect()
}

/// Mean frame size of a mix (bytes, without FCS).
pub fn mean_size(mix: &Mix) -> f64 {
    let w: f64 = mix.iter().map(|&(_, w)| f64::from(w)).sum();
    mix.iter()
        .map(|&(s, n)| s as f64 * f64::from(n))
        .sum::<f64>()
        / w
}

/// Packets per second that fill `gbps` of line with frames of mean size
/// `mean_frame` (bytes without FCS).
pub fn line_rate_pps(gbps: f64, mean_frame: f64) -> f64 {
    gbps * 1e9 / ((mean_frame + WIRE_OVERHEAD as f64) * 8.0)
}

/// (Gbit/s of frames as the switch counts them, Gbit/s on the wire) at
/// `pps` frames per second of mean size `mean_frame`.
pub fn gbps(pps: f64, mean_frame: f64) -> (f64, f64) {
    (
        pps * mean_frame * 8.0 / 1e9,
        pps * (mean_frame + WIRE_OVERHEAD as f64) * 8.0 / 1e9,
    )
}

/// A rate as configured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    Pps(u64),
    /// `percent` of a `line_gbps` line.
    LinePercent {
        percent: f64,
        line_gbps: f64,
    },
}

impl Rate {
    /// Packets per second for frames of mean size `mean_frame`.
    pub fn pps(&self, mean_frame: f64) -> f64 {
        match *self {
            Rate::Pps(p) => p as f64,
            Rate::LinePercent { percent, line_gbps } => {
                line_rate_pps(line_gbps, mean_frame) * percent / 100.0
            }
        }
    }
}

/// Paces a sender at `pps` from `start` on a clock ticking at `hz`: how
/// many packets are due by a given time. Integer arithmetic, so over any
/// window the count is exact to one packet.
#[derive(Clone, Copy, Debug)]
pub struct Pacer {
    pub pps: u64,
    pub hz: u64,
    pub start: u64,
}

impl Pacer {
    #[inline]
    pub fn due(&self, now: u64) -> u64 {
        let elapsed = u128::from(now.saturating_sub(self.start));
        (elapsed * u128::from(self.pps) / u128::from(self.hz.max(1))) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_pattern_holds_the_mix_in_every_window() {
        let p = pattern(&SIMPLE_IMIX);
        assert_eq!(p.len(), 12);
        // Interleaved, not 7 small frames in a row.
        assert_eq!(p, [0, 1, 0, 0, 1, 0, 2, 0, 1, 0, 1, 0]);
        let sizes: Vec<usize> = p
            .iter()
            .cycle()
            .take(1200)
            .map(|&i| SIMPLE_IMIX[i].0)
            .collect();
        for w in sizes.windows(12) {
            let count = |s| w.iter().filter(|&&x| x == s).count();
            assert_eq!((count(64), count(594), count(1518)), (7, 4, 1));
        }
        assert!((mean_size(&SIMPLE_IMIX) - 4342.0 / 12.0).abs() < 1e-9);
        assert_eq!(pattern(&[(128, 1)]), [0]);
    }

    #[test]
    fn line_rates() {
        let cases = [
            // (Gbps, mean frame, expected pps)
            (10.0, 64.0, 14_204_545.45),
            (10.0, 1518.0, 810_635.54),
            (100.0, 64.0, 142_045_454.5),
            (10.0, mean_size(&SIMPLE_IMIX), 3_239_740.82),
        ];
        for (g, size, want) in cases {
            let got = line_rate_pps(g, size);
            assert!((got - want).abs() / want < 1e-6, "{g} Gbps {size} B: {got}");
            let (_, wire) = gbps(got, size);
            assert!((wire - g).abs() < 1e-9);
        }
        let half = Rate::LinePercent {
            percent: 50.0,
            line_gbps: 10.0,
        };
        assert!((half.pps(64.0) - 7_102_272.7).abs() < 1.0);
        assert_eq!(Rate::Pps(1000).pps(1518.0), 1000.0);
    }

    #[test]
    fn pacer_is_exact_over_any_window() {
        let p = Pacer {
            pps: 1000,
            hz: 3_000_000_000,
            start: 500,
        };
        assert_eq!(p.due(0), 0);
        assert_eq!(p.due(500), 0);
        assert_eq!(p.due(500 + 3_000_000), 1);
        assert_eq!(p.due(500 + 3_000_000_000), 1000);
        assert_eq!(p.due(500 + 7_500_000_000), 2500);
    }
}
