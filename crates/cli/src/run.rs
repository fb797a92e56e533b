//! `nfvswitch run` and `nfvswitch check`.

use nfv_control::{ControlServer, Node};
use nix::sys::signal::{SigSet, Signal};
use std::path::Path;

/// Blocks SIGINT/SIGTERM in this thread and every thread it spawns later,
/// so the main thread can wait for them synchronously.
pub fn block_shutdown_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    let _ = set.thread_block();
    set
}

/// Sends ourselves SIGTERM after `secs` (for `--exit-after`).
pub fn exit_after(secs: f64) {
    let _ = std::thread::Builder::new()
        .name("exit-after".into())
        .spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs_f64(secs.max(0.0)));
            let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), Signal::SIGTERM);
        });
}

pub fn run(config: &Path, exit_after_secs: Option<f64>, api: Option<&str>) -> Result<(), String> {
    let cfg = nfv_config::load(config).map_err(|e| e.to_string())?;
    let api_addr = match api {
        Some(a) => nfv_config::parse_api_addr(a).map_err(|e| format!("--api: {e}"))?,
        None => cfg.api,
    };
    let signals = block_shutdown_signals();
    let node = Node::start(&cfg).map_err(|e| format!("{}: {e}", config.display()))?;
    let socket = cfg
        .control_socket
        .clone()
        .unwrap_or_else(|| nfv_control::default_socket(&cfg.name));
    let server =
        ControlServer::start(&socket, node.clone(), cfg.access.group.as_deref()).map_err(|e| {
            node.shutdown();
            format!("control socket {}: {e}", socket.display())
        })?;
    tracing::info!(
        "node {:?} running: {} PMD thread(s) on cores {:?}, {} port(s), {} flow(s); control socket {}",
        cfg.name,
        cfg.pmd.cores.len(),
        cfg.pmd.cores,
        cfg.ports.len(),
        cfg.flows.len(),
        server.path().display()
    );
    let api = match api_addr.map(|a| start_api(a, &node)).transpose() {
        Ok(api) => api.flatten(),
        Err(e) => {
            drop(server);
            node.shutdown();
            return Err(e);
        }
    };
    if let Some(s) = exit_after_secs {
        exit_after(s);
    }
    let sig = signals.wait().map_err(|e| e.to_string())?;
    tracing::info!("{sig:?}: shutting down");
    // Final counters, as OVS prints on exit of a benchmark run.
    let ports = node.show_ports();
    let pmds = node.show_pmd();
    if let Some(api) = api {
        api.stop();
    }
    drop(server);
    node.shutdown();
    print!("{}", crate::ctl::ports_table(&ports));
    print!("{}", crate::ctl::pmd_text(&pmds));
    Ok(())
}

/// Starts the REST API. An address in use is a warning (the switch runs
/// on without the API); a refusal for access reasons (a bind outside
/// loopback, a token file others can read) stops the start, since the
/// operator asked for something the node will not do safely.
fn start_api(
    addr: std::net::SocketAddr,
    node: &std::sync::Arc<Node>,
) -> Result<Option<nfv_api::ApiServer>, String> {
    match nfv_api::ApiServer::start(addr, node.clone()) {
        Ok(s) => {
            tracing::info!(
                "REST API and dashboard on http://{}/ (changes need the token in {})",
                s.addr(),
                node.api_token_file().display()
            );
            Ok(Some(s))
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData
            ) =>
        {
            Err(format!("REST API on {addr}: {e}"))
        }
        Err(e) => {
            tracing::warn!(
                "REST API not started: cannot listen on {addr}: {e}; the switch runs without it \
                 (choose another address with [node] api or --api, port 0 for any free port, or \"off\")"
            );
            Ok(None)
        }
    }
}

pub fn check(config: &Path) -> Result<(), String> {
    let cfg = nfv_config::load(config).map_err(|e| e.to_string())?;
    println!(
        "{}: ok — node {:?}, {} PMD(s) on cores {:?}, memory {} x {} B ({:?} hugepages), {} port(s), {} flow(s)",
        config.display(),
        cfg.name,
        cfg.pmd.cores.len(),
        cfg.pmd.cores,
        cfg.memory.frames,
        cfg.memory.frame_size,
        cfg.memory.hugepages,
        cfg.ports.len(),
        cfg.flows.len()
    );
    for p in &cfg.ports {
        println!("  port {:>5}  {:<16} {}", p.id, p.name, p.kind.type_name());
    }
    for f in &cfg.flows {
        println!("  flow {f}");
    }
    Ok(())
}
