//! Match/action rules for nfvswitch.
//!
//! The forwarding decision is layered like OVS's cache hierarchy, one tier
//! per module behind a small lookup API:
//! 1. [`emc::ExactMatchCache`] — per PMD thread, exact key → rule.
//! 2. [`classifier::Classifier`] — tuple-space search over all rules,
//!    priorities respected.
//!
//! Rule text uses the common subset of `ovs-ofctl` syntax ([`parse`]).
//! Nothing here touches packets' memory except [`extract()`], which reads a
//! frame's headers into a [`FlowKey`] through `nfv_wire`'s views (this
//! crate writes no header offsets of its own).

pub mod action;
pub mod classifier;
pub mod ct;
pub mod ct_dispatch;
pub mod emc;
pub mod extract;
mod fields;
pub mod format;
pub mod group;
pub mod key;
pub mod megaflow;
pub mod meter;
pub mod parse;
pub mod pipeline;
pub mod port_wide;
pub mod rule;
pub mod table;
pub mod tunnel;
mod values;

pub use action::Action;
pub use classifier::{Classified, Classifier};
pub use extract::extract;
pub use fields::{ct_states_text, parse_ct_states};
pub use group::{Group, GroupType, parse_group};
pub use key::{FlowKey, PortNo};
pub use parse::{CookieMatch, FlowFilter, FlowParseError, parse_filter, parse_flow};
pub use rule::{DEFAULT_PRIORITY, Expiry, FlowSpec, Match, Rule, Timeouts};
pub use tunnel::{TunnelError, TunnelPort};
