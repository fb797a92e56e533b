//! The `null` port: its type ([`NULL`], registered in `nfv-port-types`),
//! opening (checking the settings; there is nothing to attach to) and its
//! gauges.

use crate::rx::NullRx;
use crate::settings::{self, NullConfig};
use crate::tx::NullTx;
use nfv_ports::config::{PortConfig, PortKind};
use nfv_ports::{OpenContext, Port, PortGauges, PortOpenError, PortType, RxQueue, TxQueue};
use nfv_settings::{PortTable, SettingError};
use std::sync::Arc;

/// The `null` port type, listed in `nfv-port-types`. Its open errors are
/// [`PortOpenError::Failed`]: it needs nothing outside the switch, so
/// only a wrong config stops it.
pub static NULL: NullType = NullType;

pub struct NullType;

impl PortType for NullType {
    fn name(&self) -> &'static str {
        "null"
    }
    fn keys(&self) -> &'static [&'static str] {
        settings::KEYS
    }
    fn parse(&self, t: &PortTable<'_>) -> Result<PortKind, SettingError> {
        Ok(PortKind::typed(settings::parse(t)?))
    }
    fn open(&self, cfg: &PortConfig, _: &OpenContext<'_>) -> Result<Arc<dyn Port>, PortOpenError> {
        open(cfg).map_err(PortOpenError::failed)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("port {port}: not a null port (type {kind})")]
    WrongType { port: String, kind: &'static str },
    #[error("port {port}: {msg}")]
    Config { port: String, msg: String },
}

/// Opens a null port.
pub fn open(cfg: &PortConfig) -> Result<Arc<dyn Port>, OpenError> {
    let Some(nc) = cfg.kind.settings::<NullConfig>() else {
        return Err(OpenError::WrongType {
            port: cfg.name.clone(),
            kind: cfg.kind.type_name(),
        });
    };
    settings::check(nc).map_err(|msg| OpenError::Config {
        port: cfg.name.clone(),
        msg,
    })?;
    Ok(Arc::new(NullPort {
        name: cfg.name.clone(),
        rxqs: cfg.rxqs.max(1),
        max_frame: nc.max_frame,
    }))
}

/// A null port. Thread safety: immutable after open; every queue is
/// its own.
pub struct NullPort {
    name: String,
    rxqs: usize,
    max_frame: Option<usize>,
}

impl Port for NullPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "null"
    }
    fn n_rxq(&self) -> usize {
        self.rxqs
    }
    fn never_receives(&self) -> bool {
        true
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        Box::new(NullRx)
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(NullTx {
            max_frame: self.max_frame.unwrap_or(usize::MAX),
        })
    }
    fn gauges(&self) -> PortGauges {
        let g = PortGauges::default();
        match self.max_frame {
            Some(n) => g.with("max_frame", n),
            None => g.with("max_frame", "none (every frame is taken)"),
        }
    }
}
