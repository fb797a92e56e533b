//! A counter source that tests set by hand.

use crate::{CounterSource, Event, N_EVENTS, Reading};
use std::sync::{Arc, Mutex};

/// Clones share their values, so a test keeps one handle while a sampler
/// (or a thread) owns another. Starts with every counter at `Value(0)`.
#[derive(Clone, Debug)]
pub struct FakeSource {
    state: Arc<Mutex<([Reading; N_EVENTS], u16)>>,
}

impl Default for FakeSource {
    fn default() -> FakeSource {
        FakeSource::new()
    }
}

impl FakeSource {
    pub fn new() -> FakeSource {
        FakeSource {
            state: Arc::new(Mutex::new(([Reading::Value(0); N_EVENTS], 0))),
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut ([Reading; N_EVENTS], u16)) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn set(&self, e: Event, r: Reading) {
        self.with(|s| s.0[e.index()] = r);
    }

    /// Adds `n` to a counter that has a value (an unsupported one stays so).
    pub fn add(&self, e: Event, n: u64) {
        self.with(|s| {
            if let Reading::Value(v) = &mut s.0[e.index()] {
                *v = v.wrapping_add(n);
            }
        });
    }

    pub fn set_user_only(&self, e: Event, user_only: bool) {
        self.with(|s| {
            let bit = 1u16 << e.index();
            s.1 = if user_only { s.1 | bit } else { s.1 & !bit };
        });
    }
}

impl CounterSource for FakeSource {
    fn read(&mut self) -> [Reading; N_EVENTS] {
        self.with(|s| s.0)
    }
    fn user_only(&self) -> u16 {
        self.with(|s| s.1)
    }
}
