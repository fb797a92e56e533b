//! Flow timeouts: a thread that removes, once a second, the rules whose
//! `idle_timeout` or `hard_timeout` ran out ([`nfv_flow::Rule::expired`]),
//! counts them and logs each (what OVS reports as a flow-removed event).
//! A table with no timed rule is not walked.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::expiry::FlowExpiry;
use crate::node::Node;

/// How often the rules are checked: timeouts are whole seconds, so a rule
/// goes at most this much after its time.
const TICK: Duration = Duration::from_millis(500);

impl FlowExpiry {
    /// Checks the node's table every [`TICK`] until the node is dropped
    /// or stopped.
    pub fn start(node: &Arc<Node>) {
        let weak: Weak<Node> = Arc::downgrade(node);
        let _ = std::thread::Builder::new()
            .name("flow-expiry".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(TICK);
                    let Some(node) = weak.upgrade() else { return };
                    let expiry = &node.flow_expiry;
                    if expiry.stop.load(Relaxed) {
                        return;
                    }
                    let gone = node
                        .datapath()
                        .table()
                        .expire(Instant::now(), nfv_tsc::now());
                    node.openflow_rules_removed(&gone);
                    for (rule, why) in gone {
                        let (counter, name) = match why {
                            nfv_flow::Expiry::Idle => (&expiry.idle, "idle"),
                            nfv_flow::Expiry::Hard => (&expiry.hard, "hard"),
                        };
                        counter.fetch_add(1, Relaxed);
                        tracing::info!(
                            "flow removed by its {name} timeout after {:.1} s, \
                             n_packets={} n_bytes={}: {}",
                            rule.created.elapsed().as_secs_f64(),
                            rule.stats.packets.load(Relaxed),
                            rule.stats.bytes.load(Relaxed),
                            rule.spec
                        );
                    }
                }
            });
    }
}
