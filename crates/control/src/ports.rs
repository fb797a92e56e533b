//! Ports of a running node: opening them (at start and by `add-port`),
//! removing them, and finding them by name or number. The datapath's
//! registry is the only list of ports; each entry carries the config it
//! was opened from ([`nfv_ports::Configured`]).

use crate::access::{Caller, KERNEL_FACING, confined_file};
use crate::error::{NodeError, RequestError};
use crate::node::Node;
use nfv_flow::PortNo;
use nfv_ports::{Configured, OpenContext, PortConfig, PortKind, PortOpenError};
use std::sync::Arc;

impl Node {
    /// The configs of the ports that run now, by number.
    pub(crate) fn port_configs(&self) -> Vec<PortConfig> {
        self.datapath
            .port_views()
            .into_iter()
            .filter_map(|v| v.port.config().cloned())
            .collect()
    }

    pub(crate) fn open_port(&self, p: &PortConfig) -> Result<(), NodeError> {
        let kind = p.kind.type_name();
        let port_type = nfv_port_types::port_type(kind).ok_or(NodeError::UnregisteredType(kind))?;
        let routes: Arc<dyn nfv_ports::Routes> = self.routes.clone();
        let cx = OpenContext {
            memory: &self.memory,
            factory: &self.factory,
            routes: &routes,
            lenders: &self.lenders,
        };
        let port = port_type.open(p, &cx).map_err(|e| match e {
            PortOpenError::Unavailable(why) => NodeError::KernelPort(why),
            PortOpenError::Failed(e) => NodeError::Open(e),
        })?;
        self.datapath
            .add_port(p.id, Configured::wrap(p.clone(), port))?;
        self.routes.port_added(p.id, &p.name);
        self.failed().remove(&p.id);
        tracing::info!("port {} ({}) added as {}", p.name, p.kind.type_name(), p.id);
        Ok(())
    }

    /// `add-port`: validates the port table on its own, then against the
    /// ports present with the same checks as a config file, then opens it.
    pub fn add_port(&self, text: &str) -> Result<PortNo, RequestError> {
        self.add_port_as(text, crate::Caller::ControlSocket)
    }

    /// [`Node::add_port`] for `caller`, held to what it may add
    /// (`crate::access`).
    pub fn add_port_as(&self, text: &str, caller: crate::Caller) -> Result<PortNo, RequestError> {
        let p = nfv_config::parse_port_table(text, &self.memory)?;
        self.check_caller_may_add(&p, caller)?;
        let _changing = self.port_changes.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.port_configs();
        // Ports that failed to open still hold their names and interfaces,
        // except the one this add retries.
        all.extend(
            self.failed()
                .values()
                .map(|(c, _)| c)
                .filter(|c| c.id != p.id)
                .cloned(),
        );
        all.push(p.clone());
        // The other end of a ring may come later.
        nfv_config::check_port_set(&all, nfv_config::Peers::MayBeMissing)
            .map_err(|c| RequestError::PortConflict(c.describe(&all)))?;
        self.open_port(&p)?;
        if let Some(info) = self.openflow_ports().into_iter().find(|i| i.no == p.id) {
            self.openflow_port_changed(info, true);
        }
        Ok(p.id)
    }

    /// Refuses a port `caller` may not add (see `crate::access`). A port
    /// of the config file that failed to open may always be retried as it
    /// was configured.
    pub(crate) fn check_caller_may_add(
        &self,
        p: &PortConfig,
        caller: Caller,
    ) -> Result<(), RequestError> {
        if caller == Caller::ControlSocket {
            return Ok(());
        }
        let retry = self.failed().get(&p.id).is_some_and(|(c, _)| c == p);
        let kind = p.kind.type_name();
        if KERNEL_FACING.contains(&kind) && !self.access.runtime_kernel_ports && !retry {
            return Err(RequestError::Forbidden(format!(
                "port {}: {kind} ports reach the host's interfaces and are added over the REST \
                 API only with [node] runtime_kernel_ports = true (or put it in the config file, \
                 or use `nfvswitch ctl` on the node)",
                p.name
            )));
        }
        if let PortKind::Pcap(pcap) = &p.kind {
            let Some(dir) = &self.access.pcap_dir else {
                return Err(RequestError::Forbidden(format!(
                    "port {}: pcap ports write and read files, and are added over the REST API \
                     only with [node] pcap_dir set (their files then live there)",
                    p.name
                )));
            };
            for (key, path) in [("capture", &pcap.capture), ("replay", &pcap.replay)] {
                if let Some(path) = path {
                    confined_file(dir, path).map_err(|why| {
                        RequestError::Forbidden(format!("port {}: {key}: {why}", p.name))
                    })?;
                }
            }
        }
        Ok(())
    }

    /// `del-port`: a running port, or one that failed to open.
    pub fn del_port(&self, name_or_no: &str) -> Result<PortNo, RequestError> {
        let _changing = self.port_changes.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut failed = self.failed();
            let hit = failed
                .iter()
                .find(|(no, (c, _))| c.name == name_or_no || no.to_string() == name_or_no)
                .map(|(no, _)| *no);
            if let Some(no) = hit {
                failed.remove(&no);
                return Ok(no);
            }
        }
        let before = self.openflow_ports();
        let no = self.datapath.del_port(name_or_no)?;
        self.routes.port_removed(no);
        if let Some(info) = before.into_iter().find(|i| i.no == no) {
            self.openflow_port_changed(info, false);
        }
        Ok(no)
    }

    /// The run control of generator port `name_or_no`.
    pub fn generator_control(
        &self,
        name_or_no: &str,
    ) -> Result<Arc<nfv_ports::GeneratorControl>, RequestError> {
        self.port_view(name_or_no)?
            .port
            .generator_control()
            .ok_or_else(|| RequestError::NotGenerator(name_or_no.to_string()))
    }

    /// The counters of receiver port `name_or_no`.
    pub fn receiver_stats(
        &self,
        name_or_no: &str,
    ) -> Result<Arc<nfv_ports::ReceiverStats>, RequestError> {
        self.port_view(name_or_no)?
            .port
            .receiver_stats()
            .ok_or_else(|| RequestError::NotReceiver(name_or_no.to_string()))
    }

    fn port_view(&self, name_or_no: &str) -> Result<nfv_datapath::PortView, RequestError> {
        let no_port = || RequestError::NoSuchPort(name_or_no.to_string());
        let no = self.datapath.resolve_port(name_or_no).ok_or_else(no_port)?;
        self.datapath
            .port_views()
            .into_iter()
            .find(|v| v.no == no)
            .ok_or_else(no_port)
    }
}
