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
//! With `runtimeConfig.CNIDeviceInfoFile` (the `CNIDeviceInfoFile` capability)
//! the plugin writes the Network Plumbing WG device-info file (spec
//! 1.1.0): `vhost-user` with the application's `mode` (the switch as
//! server means the application is the client), or `memif` with the
//! application's `role` (`slave`: the switch is the server).
//!
//! With `ipam: {"type": PLUGIN, ...}` the plugin delegates IP address
//! management (spec section 4): PLUGIN from `CNI_PATH` runs with the same
//! environment and config for ADD (its `ips` are put on our interface, its
//! `routes` and `dns` into our result), DEL (also when the port is already
//! gone), CHECK, GC and STATUS; a failure after its ADD releases with its
//! DEL; its errors are answered with their own codes.
//!
//! The node keeps the network's `name` with each port: GC removes only
//! this network's ports missing from `cni.dev/valid-attachments`.

mod cni;
mod ipam;

fn main() {
    std::process::exit(cni::run(
        std::env::vars().collect(),
        &mut std::io::stdin(),
        &mut std::io::stdout(),
    ));
}
