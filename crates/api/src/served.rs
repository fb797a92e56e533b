//! What the server serves: the node, which can be replaced while the
//! server runs (`nfvswitch demo` starts a new node for every run and the
//! dashboard's address follows it), and, during a demo, the demo's
//! progress ([`DemoStatus`], `GET /api/v1/demo`).

use nfv_control::Node;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, PoisonError, RwLock};

/// The node and demo status behind one server.
///
/// Thread-safety: read by the API's threads on every request and scrape,
/// written by the thread that owns the [`crate::ApiServer`]. Each lock is
/// held only to clone or swap a value, never across a node operation, so a
/// request in flight keeps the node it started with (an `Arc`) even when
/// the node is replaced meanwhile.
pub struct Served {
    node: RwLock<Arc<Node>>,
    demo: RwLock<Option<DemoStatus>>,
}

impl Served {
    pub fn new(node: Arc<Node>) -> Served {
        Served {
            node: RwLock::new(node),
            demo: RwLock::new(None),
        }
    }

    /// The node served now.
    pub fn node(&self) -> Arc<Node> {
        self.node
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Serves `node` from now on; returns the node served before.
    pub fn set_node(&self, node: Arc<Node>) -> Arc<Node> {
        let mut n = self.node.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *n, node)
    }

    pub fn demo(&self) -> Option<DemoStatus> {
        self.demo
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_demo(&self, status: Option<DemoStatus>) {
        *self.demo.write().unwrap_or_else(PoisonError::into_inner) = status;
    }
}

/// Where a demo is (`GET /api/v1/demo`); the dashboard shows it above the
/// gauges.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DemoStatus {
    /// The run whose node is served now, counted from 1.
    pub run: usize,
    /// Runs in the whole demo.
    pub runs: usize,
    pub phase: DemoPhase,
    /// Seconds of gauges per run.
    pub seconds: u64,
    /// Whether the last run stays up until SIGINT/SIGTERM (`--hold`).
    pub hold: bool,
    /// The run whose node is served now.
    pub current: DemoRun,
    /// Finished runs, in order: what each delivered.
    pub done: Vec<DemoResult>,
}

/// One point of the demo.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DemoRun {
    /// "ns" or "ew".
    pub topology: String,
    /// For people: "east-west (chain of VNFs)".
    pub title: String,
    pub vnfs: usize,
    pub frame_size: usize,
}

/// What a finished run delivered to its sinks (means over its window).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DemoResult {
    pub run: DemoRun,
    pub mpps: f64,
    pub gbps: f64,
    /// What each VNF received, Mpps, in VNF order.
    pub vnf_rx_mpps: Vec<f64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DemoPhase {
    /// The node is up; VNFs are connecting or warming up.
    #[default]
    Starting,
    /// The run's measurement window.
    Measuring,
    /// The last run stays up until Ctrl-C (`--hold`).
    Holding,
    /// Every run is done; the node is being stopped.
    Finished,
}
