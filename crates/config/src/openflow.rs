//! `[openflow]`: where OpenFlow clients and controllers reach the node
//! (`nfv_openflow`), checked key by key, each error at its line.

use std::path::Path;

use crate::check::{self, Result};
use crate::error::Doc;
use crate::raw::{self, S};
use nfv_openflow::listen::{Controller, FailMode};
use nfv_openflow::tls::TlsFiles;

/// `[openflow]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenFlowConfig {
    /// `listen = ["punix:PATH", "ptcp:PORT[:IP]"]` (`ptcp:` on loopback
    /// only); empty: no OpenFlow.
    pub listen: Vec<nfv_openflow::Target>,
    /// `datapath_id = "0000000000000001"` (16 hex digits, as OVS's
    /// `other-config:datapath-id`); default: derived from the node name.
    pub datapath_id: u64,
    /// `packet_in_rate` (packets a second, default 1000) and
    /// `packet_in_burst` (default 100): how fast `controller` actions may
    /// send packets up, as OVS's `controller-rate-limit`/`-burst-limit`.
    pub packet_in_rate: u64,
    pub packet_in_burst: u64,
    /// `controllers = ["tcp:IP[:PORT]", "unix:PATH"]`: controllers the
    /// switch connects to (and reconnects to, with backoff).
    pub controllers: Vec<nfv_openflow::listen::Controller>,
    /// `fail_mode = "secure"` (default: keep the rules while no
    /// controller is connected) or `"standalone"` (learn MACs then).
    pub fail_mode: nfv_openflow::listen::FailMode,
    /// `ssl_private_key`, `ssl_certificate`, `ssl_ca_certificate` (PEM
    /// files, all three or none): what `pssl:` and `ssl:` need.
    pub tls: Option<nfv_openflow::tls::TlsFiles>,
}

impl Default for OpenFlowConfig {
    fn default() -> Self {
        OpenFlowConfig {
            controllers: Vec::new(),
            fail_mode: Default::default(),
            tls: None,
            listen: Vec::new(),
            datapath_id: 0,
            packet_in_rate: 1000,
            packet_in_burst: 100,
        }
    }
}

/// `[openflow]`: each listener parsed (relative `punix:` paths against
/// the config's directory), the datapath id as 16 hex digits.
pub(crate) fn openflow(
    doc: &Doc<'_>,
    raw: Option<&S<raw::RawOpenFlow>>,
    node_name: &str,
    base: &Path,
) -> Result<OpenFlowConfig> {
    let r = raw.map(|r| r.get_ref());
    let listen = listeners(doc, r, base)?;
    let controllers = controllers(doc, r)?;
    let tls = tls_files(doc, r, base)?;
    let needs_tls = listen.iter().any(nfv_openflow::Target::is_tls)
        || controllers.iter().any(Controller::is_tls);
    if needs_tls
        && tls.is_none()
        && let Some(r) = raw
    {
        return Err(doc.err(
            r.span(),
            "openflow",
            "pssl: and ssl: need ssl_private_key, ssl_certificate and ssl_ca_certificate"
                .to_string(),
        ));
    }
    Ok(OpenFlowConfig {
        listen,
        datapath_id: datapath_id(doc, r, node_name)?,
        packet_in_rate: check::opt_int(
            doc,
            &r.and_then(|r| r.packet_in_rate.clone()),
            "openflow.packet_in_rate",
            1..=1_000_000,
            1000u64,
        )?,
        packet_in_burst: check::opt_int(
            doc,
            &r.and_then(|r| r.packet_in_burst.clone()),
            "openflow.packet_in_burst",
            1..=100_000,
            100u64,
        )?,
        controllers,
        fail_mode: fail_mode(doc, r)?,
        tls,
    })
}

/// `listen`: `punix:`, `ptcp:`, `pssl:`; each once.
fn listeners(
    doc: &Doc<'_>,
    r: Option<&raw::RawOpenFlow>,
    base: &Path,
) -> Result<Vec<nfv_openflow::Target>> {
    let mut listen = Vec::new();
    let Some(list) = r.and_then(|r| r.listen.as_ref()) else {
        return Ok(listen);
    };
    for (i, v) in list.get_ref().iter().enumerate() {
        let field = format!("openflow.listen[{i}]");
        let text = v.get_ref();
        let text = match text.strip_prefix("punix:") {
            Some(p) if !p.starts_with('/') => format!("punix:{}", base.join(p).display()),
            _ => text.clone(),
        };
        let t = nfv_openflow::parse_target(&text).map_err(|m| doc.err(v.span(), &field, m))?;
        if listen.contains(&t) {
            return Err(doc.err(v.span(), &field, "listed twice".to_string()));
        }
        listen.push(t);
    }
    Ok(listen)
}

/// `controllers`: `tcp:`, `ssl:`, `unix:`; each once.
fn controllers(doc: &Doc<'_>, r: Option<&raw::RawOpenFlow>) -> Result<Vec<Controller>> {
    let mut out = Vec::new();
    let Some(list) = r.and_then(|r| r.controllers.as_ref()) else {
        return Ok(out);
    };
    for (i, v) in list.get_ref().iter().enumerate() {
        let field = format!("openflow.controllers[{i}]");
        let c = nfv_openflow::listen::parse_controller(v.get_ref())
            .map_err(|m| doc.err(v.span(), &field, m))?;
        if out.contains(&c) {
            return Err(doc.err(v.span(), &field, "listed twice".to_string()));
        }
        out.push(c);
    }
    Ok(out)
}

/// `datapath_id`, 16 hex digits; by default FNV-1a of the node's name in
/// 48 bits, as OVS's MAC-derived ids are: stable across restarts,
/// distinct between nodes.
fn datapath_id(doc: &Doc<'_>, r: Option<&raw::RawOpenFlow>, node_name: &str) -> Result<u64> {
    let Some(v) = r.and_then(|r| r.datapath_id.as_ref()) else {
        return Ok(node_name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        }) & 0xffff_ffff_ffff);
    };
    let t = v.get_ref();
    if t.len() != 16 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(doc.err(
            v.span(),
            "openflow.datapath_id",
            format!("{t:?} is not 16 hex digits (\"0000000000000001\")"),
        ));
    }
    Ok(u64::from_str_radix(t, 16).unwrap_or_default())
}

/// `fail_mode`: `secure` (default) or `standalone`.
fn fail_mode(doc: &Doc<'_>, r: Option<&raw::RawOpenFlow>) -> Result<FailMode> {
    let Some(v) = r.and_then(|r| r.fail_mode.as_ref()) else {
        return Ok(FailMode::Secure);
    };
    match v.get_ref().as_str() {
        "secure" => Ok(FailMode::Secure),
        "standalone" => Ok(FailMode::Standalone),
        other => Err(doc.err(
            v.span(),
            "openflow.fail_mode",
            format!("{other:?} is not \"secure\" or \"standalone\""),
        )),
    }
}

/// `ssl_private_key`, `ssl_certificate`, `ssl_ca_certificate`: all three
/// or none.
fn tls_files(doc: &Doc<'_>, r: Option<&raw::RawOpenFlow>, base: &Path) -> Result<Option<TlsFiles>> {
    let files = [
        (
            "openflow.ssl_private_key",
            r.and_then(|r| r.ssl_private_key.as_ref()),
        ),
        (
            "openflow.ssl_certificate",
            r.and_then(|r| r.ssl_certificate.as_ref()),
        ),
        (
            "openflow.ssl_ca_certificate",
            r.and_then(|r| r.ssl_ca_certificate.as_ref()),
        ),
    ];
    match files {
        [(_, Some(k)), (_, Some(c)), (_, Some(ca))] => Ok(Some(TlsFiles {
            private_key: check::file_path(doc, k, "openflow.ssl_private_key", base)?,
            certificate: check::file_path(doc, c, "openflow.ssl_certificate", base)?,
            ca_certificate: check::file_path(doc, ca, "openflow.ssl_ca_certificate", base)?,
        })),
        [(_, None), (_, None), (_, None)] => Ok(None),
        _ => {
            let (given, v) = files
                .iter()
                .find_map(|(f, v)| v.map(|v| (*f, v)))
                .unwrap_or_else(|| unreachable!("some are given"));
            Err(doc.err(
                v.span(),
                given,
                "ssl_private_key, ssl_certificate and ssl_ca_certificate go together".to_string(),
            ))
        }
    }
}
