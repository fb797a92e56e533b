//! Values in rule text: numbers, ports, MAC, IPv4 and IPv6 addresses with
//! their masks, and the error every parser of this crate returns.

use crate::key::{PortNo, mac_from_u64};
use core::net::{Ipv4Addr, Ipv6Addr};
use nfv_wire::EthernetAddress;

/// Highest port number a rule may name (OpenFlow 1.0 `OFPP_MAX` - 1);
/// port 0 is invalid.
pub const MAX_PORT: PortNo = 0xfeff;

/// Why a flow or filter string was rejected. Every message names the
/// offending field or token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowParseError {
    #[error("unknown field \"{0}\"")]
    UnknownField(String),
    #[error("duplicate field \"{0}\"")]
    DuplicateField(String),
    #[error("missing actions=")]
    MissingActions,
    #[error("actions= is not allowed in a filter (match fields and priority only)")]
    ActionsInFilter,
    #[error("{0}: missing value (expected {0}=...)")]
    MissingValue(String),
    #[error("{field}: \"{value}\" is not {expected}")]
    BadValue {
        field: String,
        value: String,
        expected: &'static str,
    },
    #[error("actions: unknown action \"{0}\"")]
    UnknownAction(String),
    /// Anything else: a range, a prerequisite or a conflict.
    #[error("{field}: {reason}")]
    Invalid { field: String, reason: String },
}

pub(crate) use FlowParseError as E;

pub(crate) fn bad(field: &str, value: &str, expected: &'static str) -> FlowParseError {
    E::BadValue {
        field: field.into(),
        value: value.into(),
        expected,
    }
}

pub(crate) fn invalid(field: &str, reason: impl Into<String>) -> FlowParseError {
    E::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

pub(crate) fn vni(field: &str, s: &str) -> Result<u32, E> {
    Ok(uint_in(field, s, 0xff_ffff, "a VNI (0..16777215)")? as u32)
}

/// Decimal or `0x` hex, digits only (no sign, no spaces).
pub(crate) fn uint(s: &str) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// [`uint`] for 128-bit values (`ct_label`): decimal or `0x` hex.
pub(crate) fn uint128(s: &str) -> Option<u128> {
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u128::from_str_radix(digits, radix).ok()
}

/// `N` or `N/MASK`, 128-bit.
pub(crate) fn uint128_masked(
    field: &str,
    s: &str,
    expected: &'static str,
) -> Result<(u128, u128), E> {
    let one = |t: &str| uint128(t).ok_or_else(|| bad(field, t, expected));
    match s.split_once('/') {
        None => Ok((one(s)?, u128::MAX)),
        Some((v, m)) => Ok((one(v)?, one(m)?)),
    }
}

pub(crate) fn uint_in(field: &str, s: &str, max: u64, expected: &'static str) -> Result<u64, E> {
    uint(s)
        .filter(|&v| v <= max)
        .ok_or_else(|| bad(field, s, expected))
}

/// `N` or `N/MASK`, both at most `max`.
pub(crate) fn uint_masked(
    field: &str,
    s: &str,
    max: u64,
    expected: &'static str,
) -> Result<(u64, u64), E> {
    match s.split_once('/') {
        None => Ok((uint_in(field, s, max, expected)?, max)),
        Some((v, m)) => Ok((
            uint_in(field, v, max, expected)?,
            uint_in(field, m, max, expected)?,
        )),
    }
}

pub(crate) fn port(field: &str, s: &str) -> Result<PortNo, E> {
    uint(s)
        .filter(|&p| (1..=u64::from(MAX_PORT)).contains(&p))
        .map(|p| p as PortNo)
        .ok_or_else(|| bad(field, s, "a port number (1..65279)"))
}

/// A MAC address (`xx:xx:xx:xx:xx:xx`, one or two hex digits an octet)
/// as the 48-bit number the flow key stores.
pub(crate) fn mac_u64(s: &str) -> Option<u64> {
    s.parse::<EthernetAddress>()
        .ok()
        .map(EthernetAddress::to_u64)
}

pub(crate) fn mac(field: &str, s: &str) -> Result<[u8; 6], E> {
    mac_u64(s)
        .map(mac_from_u64)
        .ok_or_else(|| bad(field, s, "a MAC address (xx:xx:xx:xx:xx:xx)"))
}

pub(crate) fn mac_masked(field: &str, s: &str) -> Result<(u64, u64), E> {
    let (v, m) = match s.split_once('/') {
        None => (s, None),
        Some((v, m)) => (v, Some(m)),
    };
    let expected = "a MAC address (xx:xx:xx:xx:xx:xx)";
    let value = mac_u64(v).ok_or_else(|| bad(field, v, expected))?;
    let mask = match m {
        None => (1 << 48) - 1,
        Some(m) => mac_u64(m).ok_or_else(|| bad(field, m, expected))?,
    };
    Ok((value, mask))
}

pub(crate) fn ipv4_masked(field: &str, s: &str) -> Result<(u64, u64), E> {
    let (a, m) = match s.split_once('/') {
        None => (s, None),
        Some((a, m)) => (a, Some(m)),
    };
    let addr: Ipv4Addr = a.parse().map_err(|_| bad(field, a, "an IPv4 address"))?;
    let mask = match m {
        None => u32::MAX,
        Some(m) if m.contains('.') => u32::from(
            m.parse::<Ipv4Addr>()
                .map_err(|_| bad(field, m, "a prefix length or netmask"))?,
        ),
        Some(m) => {
            if m.is_empty() || !m.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(field, m, "a prefix length or netmask"));
            }
            match m.parse::<u32>() {
                Ok(n) if n <= 32 => prefix_mask(n),
                _ => {
                    return Err(invalid(
                        field,
                        format!("prefix length {m} out of range 0..32"),
                    ));
                }
            }
        }
    };
    Ok((u32::from(addr).into(), mask.into()))
}

/// `ADDR`, `ADDR/PREFIX` (0..128) or `ADDR/MASK` for an IPv6 field.
pub(crate) fn ipv6_masked(field: &str, s: &str) -> Result<(u128, u128), E> {
    let (a, m) = match s.split_once('/') {
        None => (s, None),
        Some((a, m)) => (a, Some(m)),
    };
    let addr: Ipv6Addr = a.parse().map_err(|_| bad(field, a, "an IPv6 address"))?;
    let mask = match m {
        None => u128::MAX,
        Some(m) if m.contains(':') => m
            .parse::<Ipv6Addr>()
            .map_err(|_| bad(field, m, "a prefix length or IPv6 mask"))?
            .to_bits(),
        Some(m) => match m.parse::<u32>() {
            Ok(n) if n <= 128 && m.bytes().all(|b| b.is_ascii_digit()) => prefix_mask128(n),
            Ok(_) => {
                return Err(invalid(
                    field,
                    format!("prefix length {m} out of range 0..128"),
                ));
            }
            Err(_) => return Err(bad(field, m, "a prefix length or IPv6 mask")),
        },
    };
    Ok((addr.to_bits(), mask))
}

/// The mask of an `n`-bit IPv6 prefix (`n` ≤ 128).
pub(crate) fn prefix_mask128(n: u32) -> u128 {
    u128::MAX.checked_shl(128 - n).unwrap_or(0)
}

/// The netmask of an `n`-bit prefix (`n` ≤ 32).
pub(crate) fn prefix_mask(n: u32) -> u32 {
    u32::MAX.checked_shl(32 - n).unwrap_or(0)
}
