//! The demo's web dashboard: one address for the whole demo, bound before
//! the first node exists (so it is the first thing printed), serving each
//! run's node from the moment it starts, and `GET /api/v1/demo` saying
//! which run it is and what the finished runs delivered.

use crate::topology::{Measurement, Run};
use nfv_api::{ApiServer, DemoPhase, DemoResult, DemoRun, DemoStatus};
use nfv_control::Node;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

/// The dashboard of one demo; everything is a no-op when it is off.
pub struct Dashboard {
    addr: Option<SocketAddr>,
    /// Bound, not yet served (until the first node runs).
    listener: Option<TcpListener>,
    server: Option<ApiServer>,
    status: DemoStatus,
}

fn demo_run(run: &Run) -> DemoRun {
    DemoRun {
        topology: run.topology.as_str().into(),
        title: run.topology.describe().into(),
        vnfs: run.vnfs,
        frame_size: run.size,
    }
}

impl Dashboard {
    /// Binds `api` ("off": no dashboard; `None`: 127.0.0.1:9180, or any
    /// free port when that one is taken). An address given and taken is an
    /// error.
    pub fn bind(
        api: Option<&str>,
        runs: usize,
        seconds: u64,
        hold: bool,
    ) -> Result<Dashboard, String> {
        let listener = match api {
            Some(a) => match nfv_config::parse_api_addr(a).map_err(|e| format!("--api: {e}"))? {
                Some(addr) => {
                    Some(TcpListener::bind(addr).map_err(|e| format!("--api {addr}: {e}"))?)
                }
                None => None,
            },
            None => Some(
                TcpListener::bind(nfv_config::DEFAULT_API)
                    .or_else(|_| TcpListener::bind("127.0.0.1:0"))
                    .map_err(|e| format!("dashboard: cannot listen on 127.0.0.1: {e}"))?,
            ),
        };
        let addr = match &listener {
            Some(l) => Some(l.local_addr().map_err(|e| e.to_string())?),
            None => None,
        };
        if let Some(a) = addr.filter(|a| !a.ip().is_loopback()) {
            return Err(format!(
                "--api {a}: the dashboard serves loopback only (127.0.0.1 or [::1]); reach it \
                 from elsewhere through an SSH tunnel"
            ));
        }
        Ok(Dashboard {
            addr,
            listener,
            server: None,
            status: DemoStatus {
                runs,
                seconds,
                hold,
                ..Default::default()
            },
        })
    }

    /// `http://ADDR/`, or `None` when the dashboard is off.
    pub fn url(&self) -> Option<String> {
        self.addr.map(|a| format!("http://{a}/"))
    }

    /// Run `k` (from 1) of the demo is starting.
    pub fn starting(&mut self, k: usize, run: &Run) {
        self.status.run = k;
        self.status.current = demo_run(run);
        self.status.phase = DemoPhase::Starting;
        self.publish();
    }

    /// Serves `node` from now on (the first call starts the server).
    pub fn show(&mut self, node: &Arc<Node>) {
        if let Some(s) = &self.server {
            s.replace_node(node.clone());
        } else if let Some(l) = self.listener.take() {
            match ApiServer::serve(l, node.clone()) {
                Ok(s) => self.server = Some(s),
                Err(e) => eprintln!("nfvswitch demo: dashboard not started: {e}"),
            }
        }
        self.publish();
    }

    pub fn measuring(&mut self) {
        self.status.phase = DemoPhase::Measuring;
        self.publish();
    }

    /// What `run` delivered, for the list of finished runs.
    pub fn done(&mut self, run: &Run, m: &Measurement) {
        self.status.done.push(DemoResult {
            run: demo_run(run),
            mpps: m.mpps,
            gbps: m.gbps,
            vnf_rx_mpps: m.vnfs.iter().map(|v| v.rx_mpps).collect(),
        });
        self.publish();
    }

    pub fn holding(&mut self) {
        self.status.phase = DemoPhase::Holding;
        self.publish();
    }

    pub fn finished(&mut self) {
        self.status.phase = DemoPhase::Finished;
        self.publish();
    }

    fn publish(&self) {
        if let Some(s) = &self.server {
            s.set_demo(Some(self.status.clone()));
        }
    }
}
