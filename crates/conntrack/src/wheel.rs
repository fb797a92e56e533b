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

#[derive(Clone, Copy, Debug)]
struct Timer {
    prev: u32,
    next: u32,
    linked: bool,
    /// The tick whose slot holds the entry.
    placed_tick: u64,
    deadline_ms: u64,
}

const UNLINKED: Timer = Timer {
    prev: NIL,
    next: NIL,
    linked: false,
    placed_tick: 0,
    deadline_ms: 0,
};

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
    timers: Vec<Timer>,
    /// The first tick not yet swept.
    next_tick: u64,
}

fn tick_of(deadline_ms: u64) -> u64 {
    deadline_ms.div_ceil(TICK_MS)
}

impl Wheel {
    pub(crate) fn with_capacity(entries: usize) -> Self {
        let mut timers = Vec::with_capacity(entries);
        timers.resize(entries, UNLINKED);
        Wheel {
            heads: vec![NIL; SLOTS as usize],
            timers,
            next_tick: 0,
        }
    }

    pub(crate) fn deadline(&self, idx: u32) -> u64 {
        self.timers[idx as usize].deadline_ms
    }

    /// Starts timing entry `idx`, which must not be linked.
    pub(crate) fn insert(&mut self, idx: u32, deadline_ms: u64) {
        debug_assert!(!self.timers[idx as usize].linked);
        self.timers[idx as usize].deadline_ms = deadline_ms;
        self.link(idx);
    }

    /// Sets a new deadline; relinks only when it moved earlier than the slot
    /// the entry sits in.
    pub(crate) fn refresh(&mut self, idx: u32, deadline_ms: u64) {
        let timer = &mut self.timers[idx as usize];
        timer.deadline_ms = deadline_ms;
        if tick_of(deadline_ms) < timer.placed_tick {
            self.unlink(idx);
            self.link(idx);
        }
    }

    pub(crate) fn remove(&mut self, idx: u32) {
        if self.timers[idx as usize].linked {
            self.unlink(idx);
        }
    }

    /// Sweeps every tick up to `now_ms`, calling `on_due` for each entry
    /// whose deadline is at or before `now_ms` (already unlinked when called).
    pub(crate) fn expire(&mut self, now_ms: u64, mut on_due: impl FnMut(u32)) -> SweepStats {
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
                let timer = &mut self.timers[idx as usize];
                let next = timer.next;
                timer.linked = false;
                stats.visited += 1;
                if timer.deadline_ms <= now_ms {
                    stats.expired += 1;
                    on_due(idx);
                } else {
                    self.link(idx);
                }
                idx = next;
            }
        }
        stats
    }

    fn link(&mut self, idx: u32) {
        let placed_tick = tick_of(self.timers[idx as usize].deadline_ms).max(self.next_tick);
        let slot = (placed_tick % SLOTS) as usize;
        let head = self.heads[slot];
        if head != NIL {
            self.timers[head as usize].prev = idx;
        }
        self.timers[idx as usize] = Timer {
            prev: NIL,
            next: head,
            linked: true,
            placed_tick,
            deadline_ms: self.timers[idx as usize].deadline_ms,
        };
        self.heads[slot] = idx;
    }

    fn unlink(&mut self, idx: u32) {
        let Timer {
            prev,
            next,
            placed_tick,
            ..
        } = self.timers[idx as usize];
        if prev == NIL {
            self.heads[(placed_tick % SLOTS) as usize] = next;
        } else {
            self.timers[prev as usize].next = next;
        }
        if next != NIL {
            self.timers[next as usize].prev = prev;
        }
        let timer = &mut self.timers[idx as usize];
        timer.linked = false;
        timer.prev = NIL;
        timer.next = NIL;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swept(wheel: &mut Wheel, now_ms: u64) -> (Vec<u32>, SweepStats) {
        let mut due = Vec::new();
        let stats = wheel.expire(now_ms, |idx| due.push(idx));
        due.sort_unstable();
        (due, stats)
    }

    #[test]
    fn entries_expire_at_their_deadline_not_before() {
        let mut wheel = Wheel::with_capacity(4);
        wheel.insert(0, 10_000);
        wheel.insert(1, 10_500);
        wheel.insert(2, 30_000);
        let cases: [(u64, &[u32]); 4] =
            [(9_999, &[]), (10_000, &[0]), (11_000, &[1]), (30_000, &[2])];
        for (now, want) in cases {
            assert_eq!(swept(&mut wheel, now).0, want, "at {now} ms");
        }
    }

    #[test]
    fn refresh_later_is_lazy_and_earlier_is_immediate() {
        let mut wheel = Wheel::with_capacity(2);
        wheel.insert(0, 10_000);
        wheel.insert(1, 100_000);
        wheel.refresh(0, 50_000);
        wheel.refresh(1, 20_000);
        let (due, stats) = swept(&mut wheel, 20_000);
        assert_eq!(due, [1]);
        assert_eq!(
            stats,
            SweepStats {
                expired: 1,
                visited: 2
            },
            "0 revisited once, 1 due"
        );
        assert_eq!(swept(&mut wheel, 50_000).0, [0]);
    }

    #[test]
    fn deadlines_beyond_one_lap_survive_the_lap() {
        let mut wheel = Wheel::with_capacity(1);
        let far = (SLOTS * 3 + 5) * TICK_MS;
        wheel.insert(0, far);
        for now in (0..far).step_by(1_000_000) {
            assert!(swept(&mut wheel, now).0.is_empty(), "not due at {now}");
        }
        assert_eq!(swept(&mut wheel, far).0, [0]);
    }

    #[test]
    fn removed_entries_are_never_handed_back() {
        let mut wheel = Wheel::with_capacity(3);
        for idx in 0..3 {
            wheel.insert(idx, 5_000);
        }
        wheel.remove(1);
        assert_eq!(swept(&mut wheel, 5_000).0, [0, 2]);
    }
}
