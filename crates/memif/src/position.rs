//! The peer's ring positions, checked against what the switch handed out
//! — in both roles, on both rings. Pure: positions in, a verdict out.
//!
//! Each ring has one position the peer writes and one the switch writes.
//! The switch keeps its own in private (never read back from the shared
//! memory the peer can write) and accepts the peer's only within the
//! *window* it handed out; all in `u16` arithmetic modulo 2^16, as memif
//! counts:
//!
//! | role   | ring | peer writes | sane when                        |
//! |--------|------|-------------|----------------------------------|
//! | server | C2S  | head        | `head − next ∈ [0, size]`        |
//! | server | S2C  | head        | `head − tail ∈ [0, size]`        |
//! | client | S2C  | tail        | `tail − pos ∈ [0, posted − pos]` |
//! | client | C2S  | tail        | `tail − returned ∈ [0, head − returned]` |
//!
//! with, kept privately: `next` the slot the server reads next (= the
//! tail it published), `tail` the slots the server filled, `pos` the slot
//! the client reads next, `posted` the head the client posted last,
//! `returned` the tail the client accepted last, `head` the client's own
//! C2S head.
//!
//! That is: the peer may have filled (rx) or given back (tx) only slots the
//! switch handed it, and never takes back what it handed over. A position
//! outside its window — past the ring (an off-by-one on a full ring),
//! behind ours, anywhere else — is an *event*: the ring moves
//! nothing (no slot read, filled or given back), `bad_head` counts it
//! once, however many bursts it lasts, and the first burst that finds the
//! position sane again goes on from where the switch stopped (its own
//! position never moved meanwhile). A peer that never comes back stalls
//! only its own ring.
//!
//! Cost: one subtraction and one comparison per burst, nothing per packet.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One ring's check, with whether an event is under way.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PeerPosition {
    /// The last burst found the peer's position out of its window.
    out: bool,
}

impl PeerPosition {
    /// How far `to` is ahead of `from`, if at most `window`; otherwise
    /// `None`, counted in `bad` when an event starts (not again until a
    /// burst has found the position sane).
    #[inline(always)]
    pub fn check(&mut self, from: u16, to: u16, window: u16, bad: &AtomicU64) -> Option<u16> {
        let n = to.wrapping_sub(from);
        if n <= window {
            self.out = false;
            Some(n)
        } else {
            self.enter(bad);
            None
        }
    }

    #[cold]
    fn enter(&mut self, bad: &AtomicU64) {
        if !self.out {
            self.out = true;
            bad.store(bad.load(Relaxed).wrapping_add(1), Relaxed);
        }
    }

    /// An event is under way (the ring stands still).
    #[cfg(test)]
    pub fn is_out(&self) -> bool {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u16 = 1024;

    /// What a ring's check makes of the peer's position, for each role:
    /// `from`, `to` and `window` as that role's row of the table in the
    /// module doc computes them.
    #[derive(Debug, Clone, Copy)]
    enum Role {
        /// Server rx: `ours` = next (= published tail), peer = C2S head.
        ServerRx,
        /// Server tx: `ours` = our S2C tail, peer = S2C head.
        ServerTx,
        /// Client rx: `ours` = pos, `posted` = pos + size, peer = S2C tail.
        ClientRx,
        /// Client tx: `ours` = head, `returned` = head − size (a full
        /// ring handed out), peer = C2S tail.
        ClientTx,
    }

    impl Role {
        /// (from, to, window) for our position `ours` and the peer's
        /// position given as `ahead` slots past the start of the window.
        fn args(self, ours: u16, ahead: u16) -> (u16, u16, u16) {
            match self {
                Role::ServerRx | Role::ServerTx | Role::ClientRx => {
                    (ours, ours.wrapping_add(ahead), SIZE)
                }
                Role::ClientTx => {
                    let returned = ours.wrapping_sub(SIZE);
                    (returned, returned.wrapping_add(ahead), SIZE)
                }
            }
        }
    }

    const ROLES: [Role; 4] = [
        Role::ServerRx,
        Role::ServerTx,
        Role::ClientRx,
        Role::ClientTx,
    ];

    /// (case, our position, the peer's as slots past the window's start,
    /// slots accepted or None for an event)
    const CASES: [(&str, u16, u16, Option<u16>); 12] = [
        ("empty", 100, 0, Some(0)),
        ("normal", 100, 32, Some(32)),
        ("full ring", 100, SIZE, Some(SIZE)),
        ("off-by-one overrun", 100, SIZE + 1, None),
        ("wrap-around at u16, within", 65_500, 100, Some(100)),
        ("wrap-around at u16, full", 65_535, SIZE, Some(SIZE)),
        ("wrap-around at u16, overrun", 65_000, SIZE + 1, None),
        ("one behind", 100, u16::MAX, None),
        ("far behind", 100, 40_000, None),
        ("far ahead", 100, 30_000, None),
        ("from zero", 0, 7, Some(7)),
        ("half the positions ahead", 0, 32_768, None),
    ];

    #[test]
    fn positions_in_every_role() {
        for role in ROLES {
            for (case, ours, ahead, want) in CASES {
                let bad = AtomicU64::new(0);
                let mut p = PeerPosition::default();
                let (from, to, window) = role.args(ours, ahead);
                assert_eq!(p.check(from, to, window, &bad), want, "{role:?}: {case}");
                assert_eq!(
                    bad.load(Relaxed),
                    u64::from(want.is_none()),
                    "{role:?}: {case}"
                );
            }
        }
    }

    #[test]
    fn an_event_counts_once_and_the_ring_resumes_when_sane() {
        for role in ROLES {
            for (case, ours, ahead, want) in CASES {
                if want.is_some() {
                    continue;
                }
                let bad = AtomicU64::new(0);
                let mut p = PeerPosition::default();
                let (from, to, window) = role.args(ours, ahead);
                // Many bursts of the same event, and one moving further
                // out: one count.
                for k in 0..1000u16 {
                    let to = if k % 2 == 0 { to } else { to.wrapping_add(k) };
                    if to.wrapping_sub(from) <= window {
                        continue;
                    }
                    assert_eq!(p.check(from, to, window, &bad), None, "{role:?}: {case}");
                }
                assert_eq!(bad.load(Relaxed), 1, "{role:?}: {case}: counted per burst");
                assert!(p.is_out());
                // Sane again: accepted from where we stopped.
                let (from, to, window) = role.args(ours, 5);
                assert_eq!(p.check(from, to, window, &bad), Some(5), "{role:?}: {case}");
                assert!(!p.is_out());
                // A second event is a second count.
                let (from, to, window) = role.args(ours, ahead);
                assert_eq!(p.check(from, to, window, &bad), None);
                assert_eq!(bad.load(Relaxed), 2, "{role:?}: {case}: second event");
            }
        }
    }
}
