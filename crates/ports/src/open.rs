//! Turning a validated [`PortConfig`] into a running port.

use crate::Port;
use crate::config::{PortConfig, PortKind};
use crate::generator::GeneratorPort;
use crate::pcap::{PcapError, PcapPort};
use crate::receiver::ReceiverPort;
use crate::ring::{Inbox, RingPort};
use crate::sink::SinkPort;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("port {port}: {err}")]
    Pcap { port: String, err: PcapError },
    #[error("port {port}: type {kind:?} is not opened here; {hint}")]
    Unsupported {
        port: String,
        kind: &'static str,
        hint: &'static str,
    },
}

/// Opens ports and remembers what port pairs share (ring inboxes).
/// Thread safety: `Sync`; used by the control plane only.
#[derive(Default)]
pub struct PortFactory {
    ring_inboxes: Mutex<HashMap<String, Inbox>>,
}

impl PortFactory {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn open(&self, cfg: &PortConfig) -> Result<Arc<dyn Port>, OpenError> {
        Ok(match &cfg.kind {
            PortKind::Generator(g) => {
                Arc::new(GeneratorPort::new(&cfg.name, cfg.id, cfg.rxqs, g.clone()))
            }
            PortKind::Sink => Arc::new(SinkPort::new(&cfg.name)),
            PortKind::Receiver => Arc::new(ReceiverPort::new(&cfg.name)),
            PortKind::Pcap(p) => {
                Arc::new(
                    PcapPort::new(&cfg.name, p.clone()).map_err(|err| OpenError::Pcap {
                        port: cfg.name.clone(),
                        err,
                    })?,
                )
            }
            PortKind::Ring(r) => {
                let mut t = self.ring_inboxes.lock().unwrap_or_else(|p| p.into_inner());
                let mine = t.entry(cfg.name.clone()).or_default().clone();
                let peer = t.entry(r.peer.clone()).or_default().clone();
                Arc::new(RingPort::new(&cfg.name, cfg.rxqs, r.size, mine, peer))
            }
            PortKind::Typed(_) => {
                return Err(OpenError::Unsupported {
                    port: cfg.name.clone(),
                    kind: cfg.kind.type_name(),
                    hint: "it is opened by its own crate's PortType (see nfv-port-types)",
                });
            }
        })
    }
}
