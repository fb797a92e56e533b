//! Meters: per-rule rate limits (`meter:N` in a rule's actions), as
//! OpenFlow 1.3 meters with drop bands and `ovs-ofctl add-meter` syntax:
//!
//! ```text
//! meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100
//! meter=2,pktps,band=type=drop,rate=5000
//! ```
//!
//! `kbps` rates and burst sizes are kilobits (of frame bytes, as OVS counts
//! them), `pktps` ones packets. Without `burst` the bucket holds one
//! second of the rate. One drop band per meter (a packet over the band's
//! rate is dropped and counted on the band); several bands are refused.
//!
//! The token bucket is shared by every PMD and lock-free: tokens and the
//! TSC of the last refill are atomics, refilled by the PMD that finds the
//! bucket stale (one compare-exchange wins) and taken with a
//! compare-exchange loop. A PMD never takes them per packet: it takes a
//! chunk into its own [`MeterBudget`] and spends it packet by packet,
//! giving back what is left at the end of the batch, so the rate holds to
//! a chunk across PMDs and costs one or two atomic operations per meter
//! per batch.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub use crate::action::MAX_METER_ID;

/// The meters of one generation, by id.
pub type Meters = BTreeMap<u32, Arc<Meter>>;

/// What a meter's rate counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MeterUnit {
    Kbps,
    Pktps,
}

/// One meter.
#[derive(Debug)]
pub struct Meter {
    pub id: u32,
    pub unit: MeterUnit,
    /// `burst` given: the band's `burst_size` is the bucket's depth.
    pub burst: bool,
    /// The drop band's rate (kbit/s or packets/s) and depth (kbit or
    /// packets).
    pub rate: u64,
    pub burst_size: u64,
    /// Packets and bytes the meter saw, and those its band dropped.
    pub packets_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub band_packets: AtomicU64,
    pub band_bytes: AtomicU64,
    bucket: Bucket,
}

/// Tokens are bits (kbps) or thousandths of a packet (pktps): both refill
/// in whole tokens at any rate.
#[derive(Debug)]
struct Bucket {
    tokens: AtomicU64,
    /// TSC of the last refill.
    last: AtomicU64,
    /// Tokens a second, and the most the bucket holds.
    per_sec: u64,
    depth: u64,
}

/// Packets' worth of tokens a PMD takes at once (at least one packet's).
const CHUNK_PACKETS: u64 = 8;

impl Meter {
    /// Tokens one packet of `bytes` costs.
    #[inline]
    pub fn cost(&self, bytes: u64) -> u64 {
        match self.unit {
            MeterUnit::Kbps => bytes * 8,
            MeterUnit::Pktps => 1000,
        }
    }

    /// Takes up to `want` tokens at TSC `now` (refilling first if the
    /// bucket is stale); returns how many it got.
    pub fn take(&self, want: u64, now: u64) -> u64 {
        let b = &self.bucket;
        let last = b.last.load(Relaxed);
        let hz = nfv_tsc::hz().max(1);
        // Refill at most every ~10 µs: fewer compare-exchanges, no loss
        // (the elapsed time is carried in `last`).
        if now > last + hz / 100_000 && b.last.compare_exchange(last, now, Relaxed, Relaxed).is_ok()
        {
            let add = (u128::from(now - last) * u128::from(b.per_sec) / u128::from(hz)) as u64;
            let _ = b.tokens.fetch_update(Relaxed, Relaxed, |t| {
                Some(t.saturating_add(add).min(b.depth))
            });
        }
        match b
            .tokens
            .fetch_update(Relaxed, Relaxed, |t| (t > 0).then(|| t - t.min(want)))
        {
            Ok(had) => had.min(want),
            Err(_) => 0,
        }
    }

    /// Gives tokens back (a PMD's unspent chunk), never past the depth.
    pub fn give_back(&self, tokens: u64) {
        if tokens > 0 {
            let b = &self.bucket;
            let _ = b.tokens.fetch_update(Relaxed, Relaxed, |t| {
                Some(t.saturating_add(tokens).min(b.depth))
            });
        }
    }
}

/// A PMD's tokens in hand for the meters it used this batch, and the
/// batch's counts; [`MeterBudget::settle`] hands both back at its end.
#[derive(Default)]
pub struct MeterBudget {
    entries: arrayvec::ArrayVec<Held, 8>,
}

struct Held {
    meter: Arc<Meter>,
    tokens: u64,
    packets: u64,
    bytes: u64,
    dropped: u64,
    dropped_bytes: u64,
}

impl MeterBudget {
    /// Whether a packet of `bytes` passes `meter` at TSC `now`.
    #[inline]
    pub fn admit(&mut self, meter: &Arc<Meter>, bytes: u64, now: u64) -> bool {
        let i = match self
            .entries
            .iter()
            .position(|h| Arc::ptr_eq(&h.meter, meter))
        {
            Some(i) => i,
            None => {
                if self.entries.is_full() {
                    self.settle();
                }
                self.entries.push(Held {
                    meter: meter.clone(),
                    tokens: 0,
                    packets: 0,
                    bytes: 0,
                    dropped: 0,
                    dropped_bytes: 0,
                });
                self.entries.len() - 1
            }
        };
        let h = &mut self.entries[i];
        let cost = meter.cost(bytes);
        if h.tokens < cost {
            h.tokens += meter.take(cost.max(meter.cost(64) * CHUNK_PACKETS), now);
        }
        h.packets += 1;
        h.bytes += bytes;
        if h.tokens >= cost {
            h.tokens -= cost;
            true
        } else {
            h.dropped += 1;
            h.dropped_bytes += bytes;
            false
        }
    }

    /// Gives back unspent tokens and adds the counts to the meters.
    pub fn settle(&mut self) {
        for h in self.entries.drain(..) {
            h.meter.give_back(h.tokens);
            h.meter.packets_in.fetch_add(h.packets, Relaxed);
            h.meter.bytes_in.fetch_add(h.bytes, Relaxed);
            if h.dropped > 0 {
                h.meter.band_packets.fetch_add(h.dropped, Relaxed);
                h.meter.band_bytes.fetch_add(h.dropped_bytes, Relaxed);
            }
        }
    }
}

/// Why a meter text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("meter: {0}")]
pub struct MeterParseError(pub String);

/// Parses `ovs-ofctl add-meter` text (see the module doc).
pub fn parse_meter(text: &str) -> Result<Meter, MeterParseError> {
    let bad = |m: String| MeterParseError(m);
    let num = |k: &str, v: &str| -> Result<u64, MeterParseError> {
        v.parse::<u64>()
            .map_err(|_| bad(format!("{k}: \"{v}\" is not a number")))
    };
    let (mut id, mut unit, mut burst) = (None, None, false);
    let (mut rate, mut burst_size, mut bands) = (None, None, 0);
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        match (k, v) {
            ("meter", v) => {
                let n = num(k, v)?;
                if n == 0 || n > u64::from(MAX_METER_ID) {
                    return Err(bad(format!("meter id {n} out of range 1..{MAX_METER_ID}")));
                }
                id = Some(n as u32);
            }
            ("kbps" | "pktps", "") if unit.is_some() => {
                return Err(bad("kbps and pktps: give one".into()));
            }
            ("kbps", "") => unit = Some(MeterUnit::Kbps),
            ("pktps", "") => unit = Some(MeterUnit::Pktps),
            ("burst", "") => burst = true,
            ("stats", "") => {}
            ("band", v) => {
                bands += 1;
                if bands > 1 {
                    return Err(bad("one band per meter".into()));
                }
                if v != "type=drop" {
                    return Err(bad(format!("band \"{v}\": only type=drop is supported")));
                }
            }
            ("rate", v) => rate = Some(num(k, v)?),
            ("burst_size", v) => burst_size = Some(num(k, v)?),
            _ => return Err(bad(format!("unknown item \"{item}\""))),
        }
    }
    let id = id.ok_or_else(|| bad("meter=ID missing".into()))?;
    let unit = unit.unwrap_or(MeterUnit::Kbps);
    if bands == 0 {
        return Err(bad("band=type=drop,rate=R missing".into()));
    }
    let rate = rate
        .filter(|&r| r > 0)
        .ok_or_else(|| bad("rate=R (above 0) missing".into()))?;
    if burst_size.is_some() && !burst {
        return Err(bad("burst_size needs the burst flag".into()));
    }
    let burst_size = burst_size.unwrap_or(rate).max(1);
    Ok(Meter::new(id, unit, burst, rate, burst_size))
}

impl Meter {
    pub fn new(id: u32, unit: MeterUnit, burst: bool, rate: u64, burst_size: u64) -> Meter {
        let scale = match unit {
            MeterUnit::Kbps => 1000,
            MeterUnit::Pktps => 1000,
        };
        let depth = burst_size.saturating_mul(scale);
        Meter {
            id,
            unit,
            burst,
            rate,
            burst_size,
            packets_in: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            band_packets: AtomicU64::new(0),
            band_bytes: AtomicU64::new(0),
            bucket: Bucket {
                tokens: AtomicU64::new(depth),
                last: AtomicU64::new(nfv_tsc::now()),
                per_sec: rate.saturating_mul(scale),
                depth,
            },
        }
    }
}

/// `ovs-ofctl dump-meters` text (parses back with [`parse_meter`]).
impl fmt::Display for Meter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.unit {
            MeterUnit::Kbps => "kbps",
            MeterUnit::Pktps => "pktps",
        };
        write!(f, "meter={},{unit}", self.id)?;
        if self.burst {
            write!(f, ",burst")?;
        }
        write!(f, ",band=type=drop,rate={}", self.rate)?;
        if self.burst {
            write!(f, ",burst_size={}", self.burst_size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_parse_and_print_back() {
        for (text, printed) in [
            (
                "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100",
                "meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100",
            ),
            (
                "meter=2,pktps,stats,band=type=drop,rate=5000",
                "meter=2,pktps,band=type=drop,rate=5000",
            ),
            (
                "meter=3,band=type=drop,rate=7",
                "meter=3,kbps,band=type=drop,rate=7",
            ),
        ] {
            let m = parse_meter(text).unwrap();
            assert_eq!(m.to_string(), printed);
            assert_eq!(parse_meter(printed).unwrap().to_string(), printed);
        }
        for (text, why) in [
            ("kbps,band=type=drop,rate=1", "meter=ID missing"),
            ("meter=0,band=type=drop,rate=1", "out of range"),
            ("meter=1,kbps", "band=type=drop"),
            ("meter=1,band=type=dscp_remark,rate=1", "only type=drop"),
            (
                "meter=1,band=type=drop,rate=1,band=type=drop,rate=2",
                "one band",
            ),
            ("meter=1,band=type=drop,rate=0", "rate=R"),
            (
                "meter=1,band=type=drop,rate=5,burst_size=3",
                "needs the burst flag",
            ),
            ("meter=1,kbps,pktps,band=type=drop,rate=5", "give one"),
            ("meter=1,band=type=drop,rate=x", "not a number"),
            ("meter=1,colour=red", "unknown item"),
        ] {
            let e = parse_meter(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn the_meter_action_parses_and_prints_back() {
        let r = crate::parse_flow("actions=meter:3,output:2").unwrap();
        assert_eq!(
            r.actions,
            vec![crate::Action::Meter(3), crate::Action::Output(2)]
        );
        assert_eq!(r.to_string(), "priority=32768,actions=meter:3,output:2");
        assert!(crate::parse_flow("actions=meter:0").is_err());
        assert!(crate::parse_flow("actions=meter").is_err());
    }

    /// Simulated time (TSC values handed in): over 10 s a flood gets
    /// the rate plus the burst, within a chunk; tokens handed back are
    /// not lost.
    #[test]
    fn a_flood_gets_the_rate_and_the_burst() {
        let hz = nfv_tsc::hz();
        let m = Arc::new(Meter::new(1, MeterUnit::Pktps, true, 1000, 10));
        let start = m.bucket.last.load(Relaxed);
        let mut budget = MeterBudget::default();
        let mut passed = 0u64;
        let steps = 10_000u64;
        for s in 1..=steps {
            let now = start + hz * 10 * s / steps;
            // 5 packets a millisecond: 5x the rate.
            for _ in 0..5 {
                passed += u64::from(budget.admit(&m, 64, now));
            }
            budget.settle();
        }
        let want = 10 * 1000 + 10;
        assert!(
            passed.abs_diff(want) <= want / 100,
            "passed {passed}, want ~{want}"
        );
        assert_eq!(m.packets_in.load(Relaxed), steps * 5);
        assert_eq!(m.band_packets.load(Relaxed), steps * 5 - passed);
    }

    #[test]
    fn kbps_counts_frame_bits() {
        let hz = nfv_tsc::hz();
        // 1000 kbit/s, 1 s of burst: 1500-byte frames, 12 kbit each.
        let m = Arc::new(Meter::new(1, MeterUnit::Kbps, false, 1000, 1000));
        let start = m.bucket.last.load(Relaxed);
        let mut budget = MeterBudget::default();
        let mut bits = 0u64;
        for s in 1..=1000u64 {
            let now = start + hz * 5 * s / 1000;
            for _ in 0..10 {
                if budget.admit(&m, 1500, now) {
                    bits += 12_000;
                }
            }
            budget.settle();
        }
        // 5 s at 1 Mbit/s plus the 1 Mbit burst.
        let want = 6_000_000u64;
        assert!(
            bits.abs_diff(want) <= want / 50,
            "{bits} bits, want ~{want}"
        );
    }
}
