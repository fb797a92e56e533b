//! `nfvswitch-cni`: a CNI plugin (spec 1.1.0) for nfvswitch. A container
//! runtime (or Multus, or `cnitool`) runs it with `CNI_COMMAND` and the
//! other `CNI_*` variables set and the network config on stdin; it asks
//! the node's REST API for a port per container interface (the node's
//! attachments: `PUT /api/v1/attachments/{container id}/{ifname}`), and
//! answers on stdout with a result or an error in the spec's JSON. The
//! logic is the library (`src/lib.rs`); this binary only calls
//! `nfvswitch_cni::run`.
//!
//! Network config (besides `cniVersion`, `name`, `type`):
//!
//! ```json
//! { "api": "http://127.0.0.1:9180",
//!   "apiTokenFile": "/var/run/nfvswitch/api-token",
//!   "interface": "vhost-user",          // or "memif" ("vhost": vhost-user)
//!   "switchRole": "server",             // the switch's end of the socket
//!   "socketDir": "/var/run/nfvswitch/pods" }
//! ```
//!
//! The plugin runs as root in the host's namespaces and reads hostile
//! input as such:
//!
//! * `api` must be `http://` or `https://` on `127.0.0.1`, `[::1]` or
//!   `localhost` (any port, no path) unless `"allowRemoteApi": true`;
//!   checked before any call, and no call follows a redirect or a proxy.
//! * Every change (PUT, DELETE, POST) carries `Authorization: Bearer
//!   TOKEN`, the trimmed content of `apiTokenFile` (default
//!   `/var/run/nfvswitch/api-token`, the node's `[node] api_token_file`);
//!   reads carry it when it is readable. A missing file is code 11 (the
//!   node makes it at its first start); an unusable one is 7 (5 for the
//!   default path). The node's 401/403 is code 102 with its message.
//! * The socket is the node's: the plugin sends only its file name,
//!   `<container id, 12>-<ifname>.sock`, and the node makes it in its
//!   `[node] socket_dir` and answers the full path, which goes into the
//!   result and the device-info file. `socketDir`, when given, must be the
//!   node's directory (compared resolved); the plugin creates nothing there.
//! * Every JSON read (stdin, `prevResult`, the node's answers and the
//!   addresses it kept, an IPAM plugin's output) is parsed into a type
//!   first; any failure is an error result, never a panic (one caught
//!   anyway answers code 999).
//!
//! With `runtimeConfig.CNIDeviceInfoFile` (the `CNIDeviceInfoFile`
//! capability) the plugin writes the Network Plumbing WG device-info file
//! (spec 1.1.0): `vhost-user` with the application's `mode` (the switch as
//! server means the application is the client), or `memif` with the
//! application's `role` (`slave`: the switch is the server), plus a marker
//! `"nfvswitch": {"container_id", "ifname"}`. It is written to a new file
//! renamed into place, never over a file or symlink the plugin did not
//! write; DEL removes it only when the marker names the attachment.
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
//!
//! Error codes: the spec's (1 version, 4 environment, 5 I/O, 6 decode,
//! 7 config, 11 try again later, 50 STATUS: not available) and this
//! plugin's: 100 CHECK found no port or socket, 101 the IPAM plugin failed
//! or answered no usable result, 102 the node refused the token, 103 the
//! node answered something unusable (e.g. kept addresses that are not an
//! IPAM result: DEL the attachment and ADD it again), 104 the device-info
//! path holds a file the plugin did not write, 999 a bug.

fn main() {
    std::process::exit(nfvswitch_cni::run(
        std::env::vars().collect(),
        &mut std::io::stdin(),
        &mut std::io::stdout(),
    ));
}
