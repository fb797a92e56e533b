//! RFC 2544 trials against a running node: a generator port (with
//! `stamp = true`) offers a rate for a while, a receiver port counts what
//! came through. [`TrialRunner::run`] is the `trial` function of
//! `nfv_traffic::search` for `nfvswitch ndr`.
//!
//! A trial at rate R for T seconds: clear the receiver, tell the
//! generator to send R·T packets at R (lock-free, [`GeneratorControl`]),
//! wait until it has sent them or T plus a grace period has passed, stop
//! it, wait for the receiver's count to settle, and read the streams of
//! that generator. Sent is the *offered* count R·T. The generator stands
//! in for a NIC fed by an external tester: when the PMD does not poll it
//! fast enough it falls behind, and beyond [`TrialRunner::backlog_limit`]
//! packets (its "rx ring") it drops the excess; those, and any still
//! unsent when the trial ends, count as lost.

use crate::error::RequestError;
use crate::node::Node;
use nfv_ports::{GeneratorControl, ReceiverStats};
use nfv_traffic::stamp::stream_port;
use nfv_traffic::{LatencySummary, StreamSnapshot, TrialResult};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one trial measured.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialOutcome {
    /// Offered (sent) and received packets.
    pub result: TrialResult,
    /// Packets the generator actually emitted (≤ offered).
    pub generated: u64,
    /// Packets it dropped for falling more than the backlog limit behind
    /// its rate (the switch did not poll it fast enough).
    pub missed: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub latency: Option<LatencySummary>,
    /// Wall time from start to the generator stopping.
    pub elapsed: Duration,
}

pub struct TrialRunner {
    generator: Arc<GeneratorControl>,
    receiver: Arc<ReceiverStats>,
    /// Extra time after the trial's length for the generator to finish:
    /// this much plus 10 % of the trial. Default 20 ms.
    pub grace: Duration,
    /// How long the receiver's count must stay unchanged to call the
    /// trial drained (at most 100 times this is waited). Default 20 ms.
    pub settle: Duration,
    /// Packets the generator may fall behind the offered rate before it
    /// drops the excess, like a NIC rx ring that overflows; 0 = never drop
    /// (late packets are sent late, and lost only if still unsent when
    /// the trial ends). Default 4096.
    pub backlog_limit: u64,
}

impl TrialRunner {
    /// Trials from generator port `generator` to receiver port `receiver`
    /// of `node`. The generator must stamp its frames.
    pub fn new(node: &Node, generator: &str, receiver: &str) -> Result<TrialRunner, RequestError> {
        let g = node.generator_control(generator)?;
        if !g.stamps() {
            return Err(RequestError::NotStamping(generator.to_string()));
        }
        Ok(TrialRunner {
            generator: g,
            receiver: node.receiver_stats(receiver)?,
            grace: Duration::from_millis(20),
            settle: Duration::from_millis(20),
            backlog_limit: 4096,
        })
    }

    pub fn generator(&self) -> &Arc<GeneratorControl> {
        &self.generator
    }

    /// Offers `rate_pps` for `secs` (at least one packet).
    pub fn run(&self, rate_pps: f64, secs: f64) -> TrialOutcome {
        let count = ((rate_pps * secs).round() as u64).max(1);
        let rate = (rate_pps.round() as u64).max(1);
        let deadline = Duration::from_secs_f64(secs * 1.1) + self.grace;
        let (generated, missed, elapsed) = self.send(Some(rate), Some(count), deadline);
        self.outcome(count, generated, missed, elapsed)
    }

    /// Sends as fast as the switch takes packets for `secs`; returns the
    /// rate reached (packets per second). A starting point for the search.
    pub fn max_rate(&self, secs: f64) -> f64 {
        let (generated, _, elapsed) = self.send(None, None, Duration::from_secs_f64(secs));
        self.drain();
        generated as f64 / elapsed.as_secs_f64().max(1e-9)
    }

    /// Runs the generator; returns (generated, missed, time until stopped).
    fn send(&self, rate: Option<u64>, count: Option<u64>, limit: Duration) -> (u64, u64, Duration) {
        let g = &self.generator;
        self.drain();
        self.receiver.clear();
        let (g0, m0) = (g.generated(), g.missed());
        let t0 = Instant::now();
        g.set_backlog_limit(self.backlog_limit);
        g.start(rate, count);
        let want = count.unwrap_or(u64::MAX);
        let done = || g.generated() - g0 + g.missed() - m0;
        while t0.elapsed() < limit && done() < want {
            std::thread::sleep(Duration::from_millis(2));
        }
        g.stop();
        let elapsed = t0.elapsed();
        // A queue may finish the burst it was in when told to stop.
        std::thread::sleep(Duration::from_millis(1));
        (g.generated() - g0, g.missed() - m0, elapsed)
    }

    /// This generator's streams at the receiver since the last clear.
    fn streams(&self) -> Vec<StreamSnapshot> {
        let port = self.generator.port_id();
        self.receiver
            .snapshot()
            .streams
            .into_iter()
            .filter(|s| stream_port(s.stream) == port)
            .collect()
    }

    /// Waits until the receiver's count stops changing.
    fn drain(&self) {
        let received = || {
            self.receiver
                .total()
                .streams
                .iter()
                .map(|s| s.received)
                .sum::<u64>()
        };
        let mut last = received();
        for _ in 0..100 {
            std::thread::sleep(self.settle);
            let now = received();
            if now == last {
                return;
            }
            last = now;
        }
    }

    fn outcome(&self, count: u64, generated: u64, missed: u64, elapsed: Duration) -> TrialOutcome {
        self.drain();
        let mut all = StreamSnapshot::empty(0);
        for s in self.streams() {
            all.merge(&s);
        }
        TrialOutcome {
            result: TrialResult {
                sent: count,
                received: all.unique().min(count),
            },
            generated,
            missed,
            reordered: all.reordered,
            duplicates: all.duplicates,
            latency: all.latency(),
            elapsed,
        }
    }
}
