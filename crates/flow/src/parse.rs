//! Parser for the common subset of `ovs-ofctl` flow syntax.
//! (Stub: being implemented.)

use crate::rule::{FlowSpec, Match};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowParseError {
    #[error("{0}")]
    Invalid(String),
}

/// A `del-flows`/`dump-flows` selection: match fields and, for strict
/// deletion, a priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlowFilter {
    pub matches: Match,
    pub priority: Option<u16>,
}

/// Parses an `add-flow` string such as
/// `priority=10,in_port=1,dl_type=0x0800,nw_dst=10.0.0.0/8,actions=output:2`.
pub fn parse_flow(_text: &str) -> Result<FlowSpec, FlowParseError> {
    todo!()
}

/// Parses a `del-flows` filter: match fields only (and optional `priority=`).
pub fn parse_filter(_text: &str) -> Result<FlowFilter, FlowParseError> {
    todo!()
}
