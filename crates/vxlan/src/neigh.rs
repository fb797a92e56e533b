//! The tunnel's next hop on the underlay: its MAC, learnt by ARP.
//!
//! One entry per tunnel port (its remote, or the gateway towards it),
//! shared by the port's queues through atomics: transmit queues read it
//! once per burst, receive queues write it when an ARP packet from the
//! next hop arrives. No locks; the MAC and its time are separate words,
//! and a reader that sees one updated before the other at worst sends
//! one more request or uses a MAC learnt a moment ago.
//!
//! Behaviour (OVS's `tnl-neigh-cache` answers the same questions; this
//! one also re-verifies a live entry, as Linux does, so an entry never
//! lapses while the next hop answers):
//! * miss: frames are dropped and counted, and an ARP request is sent,
//!   at most one per `retry` (OVS: 1 s);
//! * learnt: from a reply to us, a request from the next hop for our
//!   address, or a gratuitous ARP of the next hop (sender = target);
//! * ageing: an entry is used for `ageing` after it was last confirmed
//!   (OVS's default idle time: 15 min); in the last [`refresh_window`]
//!   of that time requests go out again (rate-limited), so a next hop
//!   that answers keeps its entry without a gap, and one that went away
//!   is forgotten.

use nfv_wire::{ArpOperation, ArpRepr, EthernetAddress, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const VALID: u64 = 1 << 63;
const MAC_BITS: u64 = (1 << 48) - 1;
const NEVER: u64 = u64::MAX;

/// How long before expiry a live entry is re-verified.
pub fn refresh_window(ageing_ms: u64) -> u64 {
    (ageing_ms / 2).min(5_000)
}

/// The next hop's entry. Times are milliseconds of any monotonic clock.
#[derive(Debug)]
pub struct Neighbour {
    pub ip: Ipv4Addr,
    ageing_ms: u64,
    retry_ms: u64,
    entry: AtomicU64,
    confirmed_ms: AtomicU64,
    last_request_ms: AtomicU64,
}

/// What a transmit burst does about the next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookup {
    /// The MAC to send to, if known.
    pub mac: Option<[u8; 6]>,
    /// This caller won the right to send one ARP request now.
    pub send_request: bool,
}

/// The entry as `show ports` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Never learnt, or expired and not learnt again.
    Incomplete,
    Reachable {
        mac: [u8; 6],
        age_ms: u64,
    },
}

/// What an ARP packet from the underlay asks of the tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpOutcome {
    /// The next hop's MAC was (re)learnt from it.
    pub learnt: bool,
    /// It asks for our address: answer with this reply.
    pub reply: Option<ArpRepr>,
}

impl Neighbour {
    pub fn new(ip: Ipv4Addr, ageing_ms: u64, retry_ms: u64) -> Neighbour {
        Neighbour {
            ip,
            ageing_ms,
            retry_ms,
            entry: AtomicU64::new(0),
            confirmed_ms: AtomicU64::new(0),
            last_request_ms: AtomicU64::new(NEVER),
        }
    }

    /// The next hop's MAC for a burst sent at `now`, and whether to send
    /// a request (at most one caller per `retry`, across queues).
    #[inline]
    pub fn lookup(&self, now: u64) -> Lookup {
        let e = self.entry.load(Relaxed);
        let age = now.saturating_sub(self.confirmed_ms.load(Relaxed));
        if e & VALID != 0 && age < self.ageing_ms {
            let refresh = age >= self.ageing_ms - refresh_window(self.ageing_ms);
            return Lookup {
                mac: Some(EthernetAddress::from_u64(e & MAC_BITS).0),
                send_request: refresh && self.claim_request(now),
            };
        }
        Lookup {
            mac: None,
            send_request: self.claim_request(now),
        }
    }

    #[cold]
    fn claim_request(&self, now: u64) -> bool {
        let last = self.last_request_ms.load(Relaxed);
        if last != NEVER && now.saturating_sub(last) < self.retry_ms {
            return false;
        }
        self.last_request_ms
            .compare_exchange(last, now, Relaxed, Relaxed)
            .is_ok()
    }

    /// Records `mac` as the next hop's, confirmed at `now`.
    pub fn learn(&self, mac: [u8; 6], now: u64) {
        self.confirmed_ms.store(now, Relaxed);
        self.entry
            .store(VALID | EthernetAddress(mac).to_u64(), Relaxed);
    }

    /// Forgets the entry (the next burst sends a request).
    pub fn flush(&self) {
        self.entry.store(0, Relaxed);
    }

    pub fn state(&self, now: u64) -> State {
        let e = self.entry.load(Relaxed);
        let age = now.saturating_sub(self.confirmed_ms.load(Relaxed));
        if e & VALID != 0 && age < self.ageing_ms {
            State::Reachable {
                mac: EthernetAddress::from_u64(e & MAC_BITS).0,
                age_ms: age,
            }
        } else {
            State::Incomplete
        }
    }

    /// Takes an ARP packet received on the underlay, for a tunnel whose
    /// address is `local_ip` and MAC `local_mac`: learns the next hop
    /// from it and says whether to answer. A sender address of zero
    /// (probes), broadcast or multicast sender MACs and packets about
    /// other hosts teach nothing.
    pub fn on_arp(
        &self,
        arp: &ArpRepr,
        local_ip: Ipv4Addr,
        local_mac: [u8; 6],
        now: u64,
    ) -> ArpOutcome {
        let from_next_hop = arp.spa == self.ip && arp.sha.is_unicast();
        let to_us = arp.tpa == local_ip;
        let gratuitous = arp.spa == arp.tpa;
        let learnt = from_next_hop && (to_us || gratuitous);
        if learnt {
            self.learn(arp.sha.0, now);
        }
        let reply = (arp.op == ArpOperation::REQUEST
            && to_us
            && !arp.spa.is_unspecified()
            && arp.sha.is_unicast())
        .then(|| arp.reply(EthernetAddress(local_mac)));
        ArpOutcome { learnt, reply }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOP: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 1);
    const US: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 100);
    const US_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x64];
    const HOP_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const SECOND: u64 = 1_000;

    fn arp(op: ArpOperation, sha: [u8; 6], spa: Ipv4Addr, tpa: Ipv4Addr) -> ArpRepr {
        ArpRepr {
            op,
            sha: EthernetAddress(sha),
            spa,
            tha: EthernetAddress([0; 6]),
            tpa,
        }
    }

    #[test]
    fn a_miss_sends_one_request_per_retry_interval() {
        let n = Neighbour::new(HOP, 900 * SECOND, SECOND);
        let sent: Vec<u64> = (0..50u64)
            .map(|i| i * 100) // a burst every 100 ms for 5 s
            .filter(|&t| {
                let l = n.lookup(t);
                assert_eq!(l.mac, None, "at {t} ms");
                l.send_request
            })
            .collect();
        assert_eq!(sent, [0, 1000, 2000, 3000, 4000]);
    }

    #[test]
    fn learning_stops_requests_until_the_refresh_window() {
        let n = Neighbour::new(HOP, 60 * SECOND, SECOND);
        assert!(n.lookup(0).send_request);
        let reply = arp(ArpOperation::REPLY, HOP_MAC, HOP, US);
        assert!(n.on_arp(&reply, US, US_MAC, 10).learnt);
        for t in [10, 2 * SECOND, 54 * SECOND] {
            assert_eq!(
                n.lookup(t),
                Lookup {
                    mac: Some(HOP_MAC),
                    send_request: false
                },
                "at {t} ms"
            );
        }
        // The last 5 s: still used, re-verified once per second.
        assert_eq!(
            n.lookup(55 * SECOND + 10),
            Lookup {
                mac: Some(HOP_MAC),
                send_request: true
            }
        );
        assert_eq!(
            n.lookup(55 * SECOND + 500),
            Lookup {
                mac: Some(HOP_MAC),
                send_request: false
            }
        );
        // The next hop answers: a new minute.
        n.on_arp(&reply, US, US_MAC, 56 * SECOND);
        assert_eq!(
            n.state(100 * SECOND),
            State::Reachable {
                mac: HOP_MAC,
                age_ms: 44 * SECOND
            }
        );
        // It does not: the entry expires and traffic waits for ARP again.
        assert_eq!(n.lookup(116 * SECOND + 10).mac, None);
        assert_eq!(n.state(116 * SECOND + 10), State::Incomplete);
    }

    #[test]
    fn what_teaches_and_what_is_answered() {
        struct Case {
            name: &'static str,
            arp: ArpRepr,
            learnt: bool,
            answered: bool,
        }
        let other = Ipv4Addr::new(172, 31, 1, 7);
        let cases = [
            Case {
                name: "reply to us",
                arp: arp(ArpOperation::REPLY, HOP_MAC, HOP, US),
                learnt: true,
                answered: false,
            },
            Case {
                name: "request for us from the hop",
                arp: arp(ArpOperation::REQUEST, HOP_MAC, HOP, US),
                learnt: true,
                answered: true,
            },
            Case {
                name: "gratuitous request",
                arp: arp(ArpOperation::REQUEST, HOP_MAC, HOP, HOP),
                learnt: true,
                answered: false,
            },
            Case {
                name: "gratuitous reply",
                arp: arp(ArpOperation::REPLY, HOP_MAC, HOP, HOP),
                learnt: true,
                answered: false,
            },
            Case {
                name: "reply to another host",
                arp: arp(ArpOperation::REPLY, HOP_MAC, HOP, other),
                learnt: false,
                answered: false,
            },
            Case {
                name: "another host asks for us",
                arp: arp(ArpOperation::REQUEST, [2, 0, 0, 0, 0, 7], other, US),
                learnt: false,
                answered: true,
            },
            Case {
                name: "request for someone else",
                arp: arp(ArpOperation::REQUEST, [2, 0, 0, 0, 0, 7], other, HOP),
                learnt: false,
                answered: false,
            },
            Case {
                name: "probe for us (sender 0.0.0.0)",
                arp: arp(
                    ArpOperation::REQUEST,
                    [2, 0, 0, 0, 0, 7],
                    Ipv4Addr::UNSPECIFIED,
                    US,
                ),
                learnt: false,
                answered: false,
            },
            Case {
                name: "broadcast sender MAC",
                arp: arp(ArpOperation::REPLY, [0xff; 6], HOP, US),
                learnt: false,
                answered: false,
            },
            Case {
                name: "multicast sender MAC",
                arp: arp(ArpOperation::REPLY, [1, 0, 0x5e, 0, 0, 1], HOP, US),
                learnt: false,
                answered: false,
            },
        ];
        for c in cases {
            let n = Neighbour::new(HOP, 900 * SECOND, SECOND);
            let out = n.on_arp(&c.arp, US, US_MAC, 0);
            assert_eq!(out.learnt, c.learnt, "{}", c.name);
            assert_eq!(n.state(1) != State::Incomplete, c.learnt, "{}", c.name);
            match out.reply {
                None => assert!(!c.answered, "{}: no reply", c.name),
                Some(r) => {
                    assert!(c.answered, "{}: replied", c.name);
                    assert_eq!(r.op, ArpOperation::REPLY);
                    assert_eq!(
                        (r.sha.0, r.spa, r.tha, r.tpa),
                        (US_MAC, US, c.arp.sha, c.arp.spa),
                        "{}",
                        c.name
                    );
                }
            }
        }
    }

    #[test]
    fn a_changed_mac_replaces_the_old_one() {
        let n = Neighbour::new(HOP, 900 * SECOND, SECOND);
        n.on_arp(&arp(ArpOperation::REPLY, HOP_MAC, HOP, US), US, US_MAC, 0);
        let moved = [2, 0, 0, 0, 0, 0x99];
        n.on_arp(&arp(ArpOperation::REQUEST, moved, HOP, HOP), US, US_MAC, 5);
        assert_eq!(n.lookup(6).mac, Some(moved));
        n.flush();
        assert_eq!(n.lookup(7).mac, None);
    }
}
