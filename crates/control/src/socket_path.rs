//! The control socket's default path: the daemon binds it, `ctl` connects
//! to it, and the node puts its token file beside it, so it sits below the
//! node.

/// Where the control socket lives when the config does not say.
pub fn default_socket(node_name: &str) -> std::path::PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) => std::path::Path::new(&d).join(format!("nfvswitch-{node_name}.sock")),
        None => std::path::PathBuf::from(format!("/tmp/nfvswitch-{node_name}.sock")),
    }
}
