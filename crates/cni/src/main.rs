//! `nfvswitch-cni`: a CNI plugin (spec 1.1.0) for nfvswitch. A container
//! runtime (or Multus, or `cnitool`) runs it with `CNI_COMMAND` and the
//! other `CNI_*` variables set and the network config on stdin; it asks
//! the node's REST API for a port per container interface (the node's
//! attachments: `PUT /api/v1/attachments/{container id}/{ifname}`), and
//! answers on stdout with a result or an error in the spec's JSON.
//!
//! Network config (besides `cniVersion`, `name`, `type`):
//!
//! ```json
//! { "api": "http://127.0.0.1:9180",
//!   "interface": "vhost-user",          // or "memif"
//!   "switchRole": "server",             // the switch's end of the socket
//!   "socketDir": "/var/run/nfvswitch/pods" }
//! ```
//!
//! The socket is `<socketDir>/<container id, 12>-<ifname>.sock`, at most
//! 107 bytes (a unix socket path's limit), in a directory the pod mounts.
//! With `runtimeConfig.CNIDeviceInfoFile` (the `deviceInfo` capability)
//! the plugin writes the Network Plumbing WG device-info file (spec
//! 1.1.0): `vhost-user` with the application's `mode` (the switch as
//! server means the application is the client), or `memif` with the
//! application's `role` (`slave`: the switch is the server).
//!
//! Not done here: IP address management (the result has no `ips`; chain an
//! IPAM plugin in a conflist if the application needs one).

mod cni;

fn main() {
    std::process::exit(cni::run(
        std::env::vars().collect(),
        &mut std::io::stdin(),
        &mut std::io::stdout(),
    ));
}
