//! What a zero-copy queue should borrow, decided by its manager: whose
//! guest buffers ([`Target`]: a configured VNF port, or the one the flow
//! table sends all of the port's frames to) and whether its frames are
//! big enough for lending to pay ([`SizePolicy`]).

use nfv_ports::Routes;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Every how long the manager averages a queue's frame sizes.
const SIZE_WINDOW: Duration = Duration::from_secs(1);
/// Fewer frames than this in a window decide nothing (the mode stays).
const SIZE_MIN_FRAMES: u64 = 1000;
/// Hysteresis of the small-frame switch: zero copy again from
/// `min_frame` + this.
const SIZE_HYSTERESIS: u32 = 64;

/// Whether a queue's frames are too small for zero copy to pay
/// (`zero_copy_min_frame`): decided per [`SIZE_WINDOW`] from the frames
/// and bytes the queue received, with hysteresis.
#[derive(Debug)]
pub(crate) struct SizePolicy {
    min_frame: u32,
    since: Option<(Instant, u64, u64)>,
    /// The average that made the queue copy, while it does.
    small: Option<u32>,
}

impl SizePolicy {
    pub(crate) fn new(min_frame: u32) -> SizePolicy {
        SizePolicy {
            min_frame,
            since: None,
            small: None,
        }
    }

    /// The average frame size from which the queue lends again.
    pub(crate) fn lend_from(&self) -> u32 {
        self.min_frame + SIZE_HYSTERESIS
    }

    /// Takes the queue's running totals at `now`; `Some(average)` while
    /// the queue should copy.
    pub(crate) fn tick(&mut self, now: Instant, frames: u64, bytes: u64) -> Option<u32> {
        if self.min_frame == 0 {
            return None;
        }
        let Some((t0, f0, b0)) = self.since else {
            self.since = Some((now, frames, bytes));
            return self.small;
        };
        if now.duration_since(t0) < SIZE_WINDOW {
            return self.small;
        }
        self.since = Some((now, frames, bytes));
        let n = frames.wrapping_sub(f0);
        if n < SIZE_MIN_FRAMES {
            return self.small;
        }
        let avg = (bytes.wrapping_sub(b0) / n).min(u32::MAX as u64) as u32;
        let limit = if self.small.is_some() {
            self.lend_from()
        } else {
            self.min_frame
        };
        self.small = (avg < limit).then_some(avg);
        self.small
    }
}

/// Whose guest buffers a zero-copy queue receives into.
#[derive(Clone)]
pub(crate) enum Target {
    /// `zero_copy = "vnf1"`.
    Port(String),
    /// `zero_copy = "auto"`: the vhost-user port the flow table sends
    /// every frame received on port number `port` to, while it does.
    Auto { routes: Arc<dyn Routes>, port: u16 },
}

impl Target {
    /// The port to borrow from now (control plane: may walk the rules).
    pub(crate) fn resolve(&self) -> Option<String> {
        match self {
            Target::Port(p) => Some(p.clone()),
            Target::Auto { routes, port } => routes.sole_destination(*port),
        }
    }

    /// The status while `resolve` finds nothing.
    pub(crate) fn why_none(&self) -> String {
        "copy: auto: the flow table does not send all of this port's frames to one port".to_string()
    }

    /// The status while `target` is no vhost-user port that lends.
    pub(crate) fn waiting(&self, target: &str) -> String {
        match self {
            Target::Port(_) => format!("copy: waiting for vhost-user port {target}"),
            // The node named a port that runs: it is of another type.
            Target::Auto { .. } => format!(
                "copy: auto: the flow table sends this port's frames to {target}, not a \
                 vhost-user port"
            ),
        }
    }

    /// Appended to the zero-copy status.
    pub(crate) fn suffix(&self) -> &'static str {
        match self {
            Target::Port(_) => "",
            Target::Auto { .. } => ", chosen by the flow table",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (ms since the first tick, frames received so far, their bytes so
    /// far, the copy decision after this tick: the window's average while
    /// copying)
    type Step = (u64, u64, u64, Option<u32>);

    const CASES: &[(&str, u32, &[Step])] = &[
        (
            "small frames make the queue copy; big ones bring it back",
            224,
            &[
                (0, 0, 0, None),
                (500, 5_000, 300_000, None),
                (1_000, 10_000, 600_000, Some(60)),
                (2_000, 20_000, 15_600_000, None),
            ],
        ),
        (
            "between the threshold and the hysteresis the mode stays",
            224,
            &[
                (0, 0, 0, None),
                (1_000, 2_000, 400_000, Some(200)),
                (2_000, 4_000, 920_000, Some(260)),
                (3_000, 6_000, 1_500_000, None),
                (4_000, 8_000, 1_960_000, None),
            ],
        ),
        (
            "a quiet window decides nothing",
            224,
            &[
                (0, 0, 0, None),
                (1_000, 2_000, 128_000, Some(64)),
                (2_000, 2_500, 2_500_000, Some(64)),
            ],
        ),
        (
            "0 always lends",
            0,
            &[(0, 0, 0, None), (1_000, 10_000, 640_000, None)],
        ),
    ];

    #[test]
    fn size_policy_follows_the_average_frame_with_hysteresis() {
        for &(name, min_frame, steps) in CASES {
            let mut p = SizePolicy::new(min_frame);
            let t0 = Instant::now();
            for (i, &(ms, frames, bytes, want)) in steps.iter().enumerate() {
                let now = t0 + Duration::from_millis(ms);
                assert_eq!(p.tick(now, frames, bytes), want, "{name}, step {i}");
            }
        }
    }
}
