//! An OpenFlow 1.3 switch agent, so that `ovs-ofctl` and SDN controllers
//! can program nfvswitch's flow table.
//!
//! * [`wire`]: framing, the protocol's numbers, bounds-checked reading.
//! * [`oxm`] and [`actions`]: match fields and instructions to and from
//!   the flow crate's `Match` and `Action`s — one table of fields, the
//!   spec's error for anything that would not mean the same here.
//! * [`session`]: one connection (negotiation, each request answered in
//!   order); [`mods`] and [`multipart`] do the edits and the reports.
//! * [`agent`]: what the connections share (roles, asynchronous
//!   messages), [`listen`]: the sockets they arrive on, [`tls`]: the
//!   same over TLS.
//!
//! The agent edits the node's `SharedFlowTable` directly, as `ctl` does:
//! one table, one owner of each rule's identity (table, priority,
//! match), whoever added it. The node supplies the rest through
//! [`switch::Switch`]. Nothing here runs on a PMD thread.

pub mod actions;
pub mod agent;
pub mod listen;
pub mod messages;
pub mod mods;
pub mod multipart;
pub mod oxm;
pub mod session;
pub mod switch;
pub mod tls;
pub mod wire;

pub use agent::{Agent, Role, SessionReport};
pub use listen::{Listeners, Target, parse_target};
pub use switch::{Description, PortInfo, Switch};
pub use wire::OfError;
