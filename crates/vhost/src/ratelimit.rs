//! Rate-limited warnings: a frontend flooding bad messages must not fill
//! the disk with log lines. Counting is the caller's job and is never
//! limited; only the log lines are.
//!
//! Per limiter (one per port) and per *reason* (a short static name such
//! as `"refused"`): at most [`RateLimitedLog::LINES`] lines per
//! [`RateLimitedLog::INTERVAL`]. The first line of the next interval that
//! has any is preceded by a summary of how many were suppressed in the
//! interval(s) before it.
//!
//! Thread safety: `Sync`; a short mutex around a few counters (the log call
//! itself happens outside it). Meant for control threads and the cold
//! paths of PMDs (once per event, not per packet).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A per-port, per-reason limiter for `tracing::warn!` lines.
#[derive(Debug)]
pub struct RateLimitedLog {
    /// Prefix of every line, e.g. `vhost-user port vm1`.
    prefix: String,
    windows: Mutex<Vec<Window>>,
}

#[derive(Debug)]
struct Window {
    reason: &'static str,
    start: Instant,
    logged: u32,
    suppressed: u64,
}

/// What [`RateLimitedLog::decide`] says about one message.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Log,
    /// Log, after a summary of this many suppressed messages.
    LogAfter(u64),
    Suppress,
}

impl RateLimitedLog {
    /// Lines per reason and interval.
    pub const LINES: u32 = 5;
    pub const INTERVAL: Duration = Duration::from_secs(10);

    pub fn new(prefix: impl Into<String>) -> RateLimitedLog {
        RateLimitedLog {
            prefix: prefix.into(),
            windows: Mutex::new(Vec::new()),
        }
    }

    /// Logs `msg()` as a warning unless `reason` is over its budget;
    /// `msg` is only called when the line is logged. Returns whether it
    /// was.
    pub fn warn(&self, reason: &'static str, msg: impl FnOnce() -> String) -> bool {
        match self.decide(reason, Instant::now()) {
            Verdict::Suppress => false,
            v => {
                if let Verdict::LogAfter(k) = v {
                    tracing::warn!(
                        "{}: {k} more '{reason}' messages were suppressed (at most {} per {:?})",
                        self.prefix,
                        Self::LINES,
                        Self::INTERVAL
                    );
                }
                tracing::warn!("{}: {}", self.prefix, msg());
                true
            }
        }
    }

    /// [`RateLimitedLog::warn`] at info level, for events that are normal
    /// but that a frontend could repeat without end (a ring started or
    /// stopped).
    pub fn info(&self, reason: &'static str, msg: impl FnOnce() -> String) -> bool {
        match self.decide(reason, Instant::now()) {
            Verdict::Suppress => false,
            v => {
                if let Verdict::LogAfter(k) = v {
                    tracing::info!(
                        "{}: {k} more '{reason}' messages were suppressed (at most {} per {:?})",
                        self.prefix,
                        Self::LINES,
                        Self::INTERVAL
                    );
                }
                tracing::info!("{}: {}", self.prefix, msg());
                true
            }
        }
    }

    fn decide(&self, reason: &'static str, now: Instant) -> Verdict {
        let mut ws = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let i = match ws.iter().position(|w| w.reason == reason) {
            Some(i) => i,
            None => {
                ws.push(Window {
                    reason,
                    start: now,
                    logged: 0,
                    suppressed: 0,
                });
                ws.len() - 1
            }
        };
        let w = &mut ws[i];
        let mut summary = 0;
        if now.duration_since(w.start) >= Self::INTERVAL {
            summary = std::mem::take(&mut w.suppressed);
            w.start = now;
            w.logged = 0;
        }
        if w.logged >= Self::LINES {
            w.suppressed += 1;
            return Verdict::Suppress;
        }
        w.logged += 1;
        if summary > 0 {
            Verdict::LogAfter(summary)
        } else {
            Verdict::Log
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_budget_per_reason_and_summarised_later() {
        let l = RateLimitedLog::new("test");
        let t0 = Instant::now();
        let lines = RateLimitedLog::LINES as usize;
        let first: Vec<Verdict> = (0..1000).map(|_| l.decide("refused", t0)).collect();
        assert!(first[..lines].iter().all(|v| *v == Verdict::Log));
        assert!(first[lines..].iter().all(|v| *v == Verdict::Suppress));
        // Another reason has its own budget.
        assert_eq!(l.decide("ring", t0), Verdict::Log);
        // Still inside the interval: suppressed.
        let almost = t0 + RateLimitedLog::INTERVAL - Duration::from_millis(1);
        assert_eq!(l.decide("refused", almost), Verdict::Suppress);
        // The next interval opens with the count of what was dropped.
        let next = t0 + RateLimitedLog::INTERVAL;
        assert_eq!(
            l.decide("refused", next),
            Verdict::LogAfter(1000 - lines as u64 + 1)
        );
        assert_eq!(l.decide("refused", next), Verdict::Log);
        // A quiet interval: no summary.
        let later = next + 3 * RateLimitedLog::INTERVAL;
        assert_eq!(l.decide("refused", later), Verdict::Log);
    }
}
