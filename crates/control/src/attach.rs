//! Attachments on a running node: making (CNI ADD), listing, detaching
//! (DEL) and collecting them (GC), and re-creating the state file's at
//! start. What is asked and its checks are [`crate::attachments`]'s, the
//! state file [`crate::attachment_state`]'s; both are below the node, this
//! is above it.

use crate::attachments::{
    AttachError, AttachRequest, Attachment, AttachmentKey, Attachments, FIRST_ATTACHMENT_ID,
    checked_request,
};
use crate::error::RequestError;
use crate::node::Node;
use nfv_flow::PortNo;
use std::path::Path;

impl Node {
    fn attachments(&self) -> std::sync::MutexGuard<'_, Attachments> {
        self.attachments.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every attachment, by key.
    pub fn list_attachments(&self) -> Vec<Attachment> {
        self.attachments().list.values().cloned().collect()
    }

    /// Makes the port of `key` (or answers the one made before for the
    /// same request). True when it was made now.
    pub fn attach(
        &self,
        key: AttachmentKey,
        req: AttachRequest,
    ) -> Result<(Attachment, bool), AttachError> {
        let req = checked_request(&key, req, self.access.socket_dir.as_deref())?;
        let mut all = self.attachments();
        if let Some(a) = all.list.get_mut(&key) {
            let same_network = a.request.network == req.network || a.request.network.is_empty();
            if a.request.same_port(&req) && same_network {
                // An old state file's attachment takes the network; one
                // made without addresses takes them.
                let adopt = (a.request.network.is_empty() && !req.network.is_empty())
                    || (a.request.addresses.is_none() && req.addresses.is_some());
                if adopt {
                    a.request.network = req.network;
                    a.request.addresses = a.request.addresses.take().or(req.addresses);
                }
                let a = a.clone();
                if adopt && let Err(e) = all.save() {
                    tracing::error!("attachment {}: {e}", a.port);
                }
                return Ok((a, false));
            }
            return Err(AttachError::Conflict {
                container_id: key.container_id,
                ifname: key.ifname,
                port: a.port.clone(),
            });
        }
        let (name, id) = self.free_name_and_id(&key)?;
        self.add_port(&req.port_table(&name, id))?;
        let a = Attachment {
            key: key.clone(),
            request: req,
            port: name,
            id,
        };
        all.list.insert(key, a.clone());
        if let Err(e) = all.save() {
            // The port works; the next change retries the file.
            tracing::error!("attachment {}: {e}", a.port);
        }
        tracing::info!(
            "attached {}/{} as port {} ({})",
            a.key.container_id,
            a.key.ifname,
            a.port,
            a.id
        );
        Ok((a, true))
    }

    /// Removes the port of `key`; `None` if there was no such attachment.
    pub fn detach(&self, key: &AttachmentKey) -> Result<Option<Attachment>, AttachError> {
        let mut all = self.attachments();
        let Some(a) = all.list.remove(key) else {
            return Ok(None);
        };
        match self.del_port(&a.port) {
            Ok(_) | Err(RequestError::NoSuchPort(_)) => {}
            Err(RequestError::Datapath(e)) if e.to_string().contains("no port") => {}
            Err(e) => {
                all.list.insert(key.clone(), a);
                return Err(e.into());
            }
        }
        all.save()?;
        tracing::info!(
            "detached {}/{} (port {})",
            a.key.container_id,
            a.key.ifname,
            a.port
        );
        Ok(Some(a))
    }

    /// Detaches every attachment of `network` whose key is not in `valid`;
    /// returns them. Other networks' attachments stay.
    pub fn gc_attachments(
        &self,
        network: &str,
        valid: &[AttachmentKey],
    ) -> Result<Vec<Attachment>, AttachError> {
        if network.is_empty() {
            return Err(AttachError::Invalid(
                "GC needs the network's name (CNI GC is scoped to one network)".into(),
            ));
        }
        let stale: Vec<AttachmentKey> = self
            .attachments()
            .list
            .values()
            .filter(|a| a.request.network == network && !valid.contains(&a.key))
            .map(|a| a.key.clone())
            .collect();
        let mut removed = Vec::new();
        for k in stale {
            if let Some(a) = self.detach(&k)? {
                removed.push(a);
            }
        }
        Ok(removed)
    }

    /// At start, after the config's ports: re-creates the ports of the
    /// state file's attachments. Each passes the checks of a new request
    /// ([`Node::restorable`]); one that fails them, or whose port conflicts
    /// with a port present, is refused: logged, counted, left out (the
    /// config and earlier attachments win). A port that passes but cannot
    /// open (its socket in use, say) is logged and the attachment stays,
    /// so DEL and GC can still remove it.
    pub(crate) fn restore_attachments(&self) -> Result<usize, AttachError> {
        let Some(path) = self.attachments().state_file.clone() else {
            return Ok(0);
        };
        let saved = crate::attachment_state::load(&path)?;
        let mut restored = 0;
        for a in saved {
            let who = format!("{}/{}", a.key.container_id, a.key.ifname);
            let opened = self
                .restorable(&a)
                .and_then(|()| Ok(self.add_port(&a.request.port_table(&a.port, a.id))?));
            match opened {
                Ok(_) => {}
                Err(AttachError::Port(RequestError::Open(e))) => {
                    tracing::error!("attachment {who}: port {}: {e}", a.port);
                }
                Err(e) => {
                    tracing::error!(
                        "attachment {who} of {} refused (left out): {e}",
                        path.display()
                    );
                    self.attachments().restore_refused += 1;
                    continue;
                }
            }
            self.attachments().list.insert(a.key.clone(), a);
            restored += 1;
        }
        if restored > 0 {
            tracing::info!("{restored} attachment(s) restored from {}", path.display());
        }
        Ok(restored)
    }

    /// The checks of a new request, for an attachment read back from the
    /// state file: key, request, socket inside `socket_dir` as stored, a
    /// port name and number of the attachments' own, not listed twice.
    fn restorable(&self, a: &Attachment) -> Result<(), AttachError> {
        let confined =
            checked_request(&a.key, a.request.clone(), self.access.socket_dir.as_deref())?;
        if confined.socket != a.request.socket {
            return Err(AttachError::Invalid(format!(
                "socket {} is not in {}",
                a.request.socket.display(),
                confined.socket.parent().unwrap_or(Path::new("")).display()
            )));
        }
        if a.id < FIRST_ATTACHMENT_ID || !a.port.starts_with("c-") {
            return Err(AttachError::Invalid(format!(
                "port {} ({}): attachment ports are named c-... and numbered from \
                 {FIRST_ATTACHMENT_ID}",
                a.port, a.id
            )));
        }
        if self.attachments().list.contains_key(&a.key) {
            return Err(AttachError::Invalid("listed twice".into()));
        }
        Ok(())
    }

    /// State-file attachments refused at start.
    pub(crate) fn attachments_refused(&self) -> u64 {
        self.attachments().restore_refused
    }

    fn free_name_and_id(&self, key: &AttachmentKey) -> Result<(String, PortNo), AttachError> {
        let configs = self.port_configs();
        let taken_id =
            |id: PortNo| configs.iter().any(|c| c.id == id) || self.failed().contains_key(&id);
        let id = (FIRST_ATTACHMENT_ID..=nfv_config::MAX_PORT_ID)
            .find(|&id| !taken_id(id))
            .ok_or(AttachError::NoFreeId)?;
        let mut name = key.port_name();
        if configs.iter().any(|c| c.name == name) {
            name = format!("c-{id}-{}", &name[name.len().min(2 + 12 + 1)..]);
        }
        name.truncate(nfv_ports::config::MAX_PORT_NAME);
        Ok((name, id))
    }
}
