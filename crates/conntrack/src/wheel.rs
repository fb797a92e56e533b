//! Expiry: a hashed timer wheel with lazy refresh.
//!
//! Each connection sits in the slot of the one-second tick at which its
//! deadline falls, linked through indices (no allocation after start-up).
//! A packet that only pushes a deadline later just stores the new deadline;
//! the entry stays where it is and is moved when the sweep reaches it. A
//! deadline that moves earlier (a state change to a shorter timeout) is
//! relinked at once, so nothing outlives its deadline by more than a tick.
//!
//! Sweeping tick `t` detaches slot `t` and walks it: entries that are due are
//! handed back, the rest (refreshed since placement, or a whole lap of the
//! wheel away) are relinked by their current deadline. The cost of
//! [`Wheel::expire`] is therefore the due entries plus, at most once per
//! refresh period or wheel lap, each live entry: never a scan of the table.

const TICK_MS: u64 = 1000;
/// Slots of the wheel: one lap is 4096 s (68 min). Longer timeouts cost one
/// revisit per lap; the heads fit in 16 KiB.
const SLOTS: u64 = 4096;
const NIL: u32 = u32::MAX;

/// A connection's place in the wheel. Kept apart from its deadline: the
/// packet path reads the deadline, and these links only when an entry moves.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Links {
    prev: u32,
    next: u32,
    linked: bool,
    /// The tick whose slot holds the entry.
    placed_tick: u64,
}

impl Links {
    pub(crate) const UNLINKED: Links = Links {
        prev: NIL,
        next: NIL,
        linked: false,
        placed_tick: 0,
    };
}

/// Where the timer records live: in the connection slots, so that a packet
/// finds its deadline on a cache line it reads anyway.
pub(crate) trait TimerSlots {
    fn deadline(&self, idx: u32) -> u64;
    fn set_deadline(&mut self, idx: u32, deadline_ms: u64);
    fn links(&mut self, idx: u32) -> &mut Links;
}

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Entries whose deadline had passed and that were handed back.
    pub expired: u64,
    /// Entries looked at, due or not.
    pub visited: u64,
}

pub(crate) struct Wheel {
    heads: Vec<u32>,
    /// The first tick not yet swept.
    next_tick: u64,
}

fn tick_of(deadline_ms: u64) -> u64 {
    deadline_ms.div_ceil(TICK_MS)
}

impl Wheel {
    pub(crate) fn new() -> Self {
        Wheel {
            heads: vec![NIL; SLOTS as usize],
            next_tick: 0,
        }
    }

    /// Starts timing entry `idx`, which must not be linked.
    pub(crate) fn insert(&mut self, t: &mut impl TimerSlots, idx: u32, deadline_ms: u64) {
        debug_assert!(!t.links(idx).linked);
        t.set_deadline(idx, deadline_ms);
        self.link(t, idx);
    }

    /// Sets a new deadline. Writes nothing when it did not change, and
    /// relinks only when it moved earlier than the slot the entry sits in:
    /// a later deadline is found by the sweep (see the module docs).
    pub(crate) fn refresh(&mut self, t: &mut impl TimerSlots, idx: u32, deadline_ms: u64) {
        let old = t.deadline(idx);
        if deadline_ms == old {
            return;
        }
        t.set_deadline(idx, deadline_ms);
        if deadline_ms < old && tick_of(deadline_ms) < t.links(idx).placed_tick {
            self.unlink(t, idx);
            self.link(t, idx);
        }
    }

    pub(crate) fn remove(&mut self, t: &mut impl TimerSlots, idx: u32) {
        if t.links(idx).linked {
            self.unlink(t, idx);
        }
    }

    /// Sweeps every tick up to `now_ms`, calling `on_due` for each entry
    /// whose deadline is at or before `now_ms` (already unlinked when called,
    /// its successor already read, so `on_due` may free its slot).
    pub(crate) fn expire<T: TimerSlots>(
        &mut self,
        t: &mut T,
        now_ms: u64,
        mut on_due: impl FnMut(&mut T, u32),
    ) -> SweepStats {
        let now_tick = now_ms / TICK_MS;
        let mut stats = SweepStats::default();
        if now_tick < self.next_tick {
            return stats;
        }
        // One lap visits every slot; more would only revisit them.
        let first = self.next_tick.max((now_tick + 1).saturating_sub(SLOTS));
        self.next_tick = now_tick + 1;
        for tick in first..=now_tick {
            let slot = (tick % SLOTS) as usize;
            let mut idx = std::mem::replace(&mut self.heads[slot], NIL);
            while idx != NIL {
                let links = t.links(idx);
                let next = links.next;
                links.linked = false;
                stats.visited += 1;
                if t.deadline(idx) <= now_ms {
                    stats.expired += 1;
                    on_due(t, idx);
                } else {
                    self.link(t, idx);
                }
                idx = next;
            }
        }
        stats
    }

    fn link(&mut self, t: &mut impl TimerSlots, idx: u32) {
        let placed_tick = tick_of(t.deadline(idx)).max(self.next_tick);
        let slot = (placed_tick % SLOTS) as usize;
        let head = self.heads[slot];
        if head != NIL {
            t.links(head).prev = idx;
        }
        *t.links(idx) = Links {
            prev: NIL,
            next: head,
            linked: true,
            placed_tick,
        };
        self.heads[slot] = idx;
    }

    fn unlink(&mut self, t: &mut impl TimerSlots, idx: u32) {
        let Links {
            prev,
            next,
            placed_tick,
            ..
        } = *t.links(idx);
        if prev == NIL {
            self.heads[(placed_tick % SLOTS) as usize] = next;
        } else {
            t.links(prev).next = next;
        }
        if next != NIL {
            t.links(next).prev = prev;
        }
        *t.links(idx) = Links::UNLINKED;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timer records in a plain array, as the wheel's own tests need them.
    struct Slots(Vec<(u64, Links)>);

    impl TimerSlots for Slots {
        fn deadline(&self, idx: u32) -> u64 {
            self.0[idx as usize].0
        }
        fn set_deadline(&mut self, idx: u32, deadline_ms: u64) {
            self.0[idx as usize].0 = deadline_ms;
        }
        fn links(&mut self, idx: u32) -> &mut Links {
            &mut self.0[idx as usize].1
        }
    }

    fn wheel(entries: usize) -> (Wheel, Slots) {
        (Wheel::new(), Slots(vec![(0, Links::UNLINKED); entries]))
    }

    fn swept((wheel, slots): &mut (Wheel, Slots), now_ms: u64) -> (Vec<u32>, SweepStats) {
        let mut due = Vec::new();
        let stats = wheel.expire(slots, now_ms, |_, idx| due.push(idx));
        due.sort_unstable();
        (due, stats)
    }

    #[test]
    fn entries_expire_at_their_deadline_not_before() {
        let mut w = wheel(4);
        w.0.insert(&mut w.1, 0, 10_000);
        w.0.insert(&mut w.1, 1, 10_500);
        w.0.insert(&mut w.1, 2, 30_000);
        let cases: [(u64, &[u32]); 4] =
            [(9_999, &[]), (10_000, &[0]), (11_000, &[1]), (30_000, &[2])];
        for (now, want) in cases {
            assert_eq!(swept(&mut w, now).0, want, "at {now} ms");
        }
    }

    #[test]
    fn refresh_later_is_lazy_and_earlier_is_immediate() {
        let mut w = wheel(2);
        w.0.insert(&mut w.1, 0, 10_000);
        w.0.insert(&mut w.1, 1, 100_000);
        w.0.refresh(&mut w.1, 0, 50_000);
        w.0.refresh(&mut w.1, 1, 20_000);
        let (due, stats) = swept(&mut w, 20_000);
        assert_eq!(due, [1]);
        assert_eq!(
            stats,
            SweepStats {
                expired: 1,
                visited: 2
            },
            "0 revisited once, 1 due"
        );
        assert_eq!(swept(&mut w, 50_000).0, [0]);
    }

    #[test]
    fn deadlines_beyond_one_lap_survive_the_lap() {
        let mut w = wheel(1);
        let far = (SLOTS * 3 + 5) * TICK_MS;
        w.0.insert(&mut w.1, 0, far);
        for now in (0..far).step_by(1_000_000) {
            assert!(swept(&mut w, now).0.is_empty(), "not due at {now}");
        }
        assert_eq!(swept(&mut w, far).0, [0]);
    }

    #[test]
    fn removed_entries_are_never_handed_back() {
        let mut w = wheel(3);
        for idx in 0..3 {
            w.0.insert(&mut w.1, idx, 5_000);
        }
        w.0.remove(&mut w.1, 1);
        assert_eq!(swept(&mut w, 5_000).0, [0, 2]);
    }
}
