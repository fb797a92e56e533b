//! TCP window tracking and connection states.
//!
//! # Rules followed
//!
//! Window tracking is Guido van Rooij's ("Real Stateful TCP Packet Filtering
//! in IP Filter", 2000), in the form Linux's `nf_conntrack_proto_tcp.c` uses.
//! Each direction keeps `end` (highest sequence number sent, counting SYN and
//! FIN), `max_end` (highest `ack + window` the other side granted), `max_win`
//! (largest window it advertised, scaled) and its window-scale shift. A
//! segment from sender S to receiver R passes when
//!
//! 1. its last byte is inside what R granted: `end ≤ S.max_end`;
//! 2. its first byte is at most one window back: `seq ≥ S.end − R.max_win`
//!    (the paper's form; Linux tests the last byte here);
//! 3. it acknowledges nothing R has not sent: `ack ≤ R.end`;
//! 4. it acknowledges at most one window back:
//!    `ack ≥ R.end − max(S.max_win, 66000)` (Linux's bound).
//!
//! all compared modulo 2^32 (RFC 9293 §3.4). A segment without payload, SYN
//! or FIN is checked by its acknowledgement only; an RST always by its
//! sequence number. A segment that fails is `+inv` and changes nothing.
//! Window scale (RFC 7323 §2.2) applies only when both SYNs offered it; SYN
//! windows are never scaled.
//!
//! States follow Linux's names (SYN_SENT, SYN_SENT2 for simultaneous open,
//! SYN_RECV, ESTABLISHED, FIN_WAIT, CLOSE_WAIT, LAST_ACK, TIME_WAIT, CLOSE),
//! but the closing states are derived from two facts per direction (FIN
//! sent, FIN acknowledged) rather than from a transition table. OVS's
//! userspace tracker instead runs pf's per-peer states
//! (`lib/conntrack-tcp.c`); both accept the same well-formed traffic.
//!
//! Flag combinations refused outright (RFC 9293 §3.1 and the checks OVS and
//! Linux share): SYN with RST or FIN; FIN, PSH or URG without ACK; a segment
//! with neither SYN, ACK nor RST. A connection may start from a SYN, or —
//! like OVS and Linux by default — be picked up from a plain ACK, in which
//! case its windows are not checked ("liberal", as Linux marks them). A
//! SYN/ACK never starts one. A SYN on a TIME_WAIT or CLOSE connection asks
//! to replace it (RFC 9293 §3.10.7.4 lets a SYN reopen TIME_WAIT).

use crate::packet::{TcpFlags, TcpSegment};
use crate::timeouts::TimeoutClass;

/// RFC 7323 §2.3: shifts above 14 are treated as 14.
const MAX_WSCALE: u8 = 14;
/// Lower bound on how far back an ACK may lag (Linux's `MAXACKWINDOW`).
const MIN_ACK_LAG: u32 = 66_000;
const ORIG: usize = 0;
const REPLY: usize = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    SynSent,
    SynSent2,
    SynRecv,
    Established,
    FinWait,
    CloseWait,
    LastAck,
    TimeWait,
    Close,
}

/// Window-tracking data of one direction (the sender of its packets).
///
/// 20 bytes, no padding: the FIN's sequence number and whether it was sent
/// are kept apart rather than as an `Option<u32>` (8 bytes), so that a
/// connection's protocol state fits beside its label on one cache line
/// (see `table::Conn`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpPeer {
    pub end: u32,
    pub max_end: u32,
    /// Zero until this direction's first packet has been seen.
    pub max_win: u32,
    /// The sequence number just after this direction's FIN, once
    /// `fin_sent`.
    fin_seq: u32,
    pub scale: u8,
    scale_offered: bool,
    fin_sent: bool,
    pub fin_acked: bool,
}

impl TcpPeer {
    /// The sequence number just after this direction's FIN, if it sent one.
    pub fn fin_end(&self) -> Option<u32> {
        self.fin_sent.then_some(self.fin_seq)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpConn {
    pub state: TcpState,
    /// Indexed by direction: 0 original, 1 reply.
    pub peers: [TcpPeer; 2],
    /// Picked up mid-stream: windows unknown, so not checked.
    pub liberal: bool,
    simultaneous: bool,
    reply_seen: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TcpUpdate {
    Accept,
    Reject,
    /// A SYN on a closed connection: a new connection may replace it.
    Reopen,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Syn,
    SynAck,
    Rst,
    Fin,
    Ack,
}

/// Sequence-space comparison modulo 2^32 (RFC 9293 §3.4).
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn after(a: u32, b: u32) -> bool {
    before(b, a)
}

fn classify(flags: TcpFlags) -> Option<Kind> {
    let has_ack = flags.has(TcpFlags::ACK);
    if flags.has(TcpFlags::SYN) && flags.0 & (TcpFlags::RST | TcpFlags::FIN) != 0 {
        return None;
    }
    if !has_ack && flags.0 & (TcpFlags::FIN | TcpFlags::PSH | TcpFlags::URG) != 0 {
        return None;
    }
    Some(match () {
        () if flags.has(TcpFlags::SYN) && has_ack => Kind::SynAck,
        () if flags.has(TcpFlags::SYN) => Kind::Syn,
        () if flags.has(TcpFlags::RST) => Kind::Rst,
        () if !has_ack => return None,
        () if flags.has(TcpFlags::FIN) => Kind::Fin,
        () => Kind::Ack,
    })
}

/// Sequence number just after the segment: payload, SYN and FIN each count.
fn segment_end(seg: &TcpSegment) -> u32 {
    let syn = u32::from(seg.flags.has(TcpFlags::SYN));
    let fin = u32::from(seg.flags.has(TcpFlags::FIN));
    seg.seq
        .wrapping_add(seg.payload_len)
        .wrapping_add(syn)
        .wrapping_add(fin)
}

fn peer_from_syn(seg: &TcpSegment) -> TcpPeer {
    let end = segment_end(seg);
    TcpPeer {
        end,
        max_end: end,
        max_win: u32::from(seg.window).max(1),
        scale: seg.wscale.map_or(0, |s| s.min(MAX_WSCALE)),
        scale_offered: seg.wscale.is_some(),
        fin_seq: 0,
        fin_sent: false,
        fin_acked: false,
    }
}

/// Whether a segment may start a connection (before any commit).
pub(crate) fn valid_new(seg: &TcpSegment, pickup: bool) -> bool {
    TcpConn::open(seg, pickup).is_some()
}

impl TcpConn {
    /// The connection a first segment starts, or `None` if it may not.
    pub(crate) fn open(seg: &TcpSegment, pickup: bool) -> Option<TcpConn> {
        let mut peers = [TcpPeer::default(); 2];
        let (state, liberal) = match classify(seg.flags)? {
            Kind::Syn => {
                peers[ORIG] = peer_from_syn(seg);
                (TcpState::SynSent, false)
            }
            Kind::Ack if pickup => {
                let end = segment_end(seg);
                let win = u32::from(seg.window).max(1);
                peers[ORIG] = TcpPeer {
                    end,
                    max_end: end.wrapping_add(win),
                    max_win: win,
                    ..TcpPeer::default()
                };
                (TcpState::Established, true)
            }
            _ => return None,
        };
        Some(TcpConn {
            state,
            peers,
            liberal,
            simultaneous: false,
            reply_seen: false,
        })
    }

    pub fn timeout_class(&self) -> TimeoutClass {
        match self.state {
            TcpState::SynSent | TcpState::SynSent2 => TimeoutClass::TcpSynSent,
            TcpState::SynRecv => TimeoutClass::TcpSynRecv,
            // A picked-up connection nobody answered is as cheap to drop as
            // a SYN nobody answered.
            TcpState::Established if !self.reply_seen => TimeoutClass::TcpSynSent,
            TcpState::Established => TimeoutClass::TcpEstablished,
            TcpState::FinWait | TcpState::CloseWait | TcpState::LastAck => TimeoutClass::TcpFinWait,
            TcpState::TimeWait => TimeoutClass::TcpTimeWait,
            TcpState::Close => TimeoutClass::TcpClose,
        }
    }

    /// Runs one segment from direction `reply` through the connection. On
    /// anything but `Accept` the connection is left exactly as it was.
    pub(crate) fn update(&mut self, seg: &TcpSegment, reply: bool) -> TcpUpdate {
        let Some(kind) = classify(seg.flags) else {
            return TcpUpdate::Reject;
        };
        let dir = usize::from(reply);
        let mut next = *self;
        let outcome = next.step(kind, seg, dir);
        if outcome == TcpUpdate::Accept {
            next.reply_seen |= reply;
            *self = next;
        }
        outcome
    }

    fn step(&mut self, kind: Kind, seg: &TcpSegment, dir: usize) -> TcpUpdate {
        if let Some(decided) = self.handshake(kind, seg, dir) {
            return decided;
        }
        if !self.liberal && !self.in_window(kind, seg, dir) {
            return TcpUpdate::Reject;
        }
        self.advance_window(kind, seg, dir);
        self.advance_state(kind, seg, dir);
        TcpUpdate::Accept
    }

    /// SYN-bearing segments and the SYN_SENT phase, where the reply
    /// direction has no window yet. `None` means: check the window.
    fn handshake(&mut self, kind: Kind, seg: &TcpSegment, dir: usize) -> Option<TcpUpdate> {
        use TcpState::*;
        match (self.state, kind, dir) {
            (TimeWait | Close, Kind::Syn, _) => Some(TcpUpdate::Reopen),
            (SynSent | SynSent2, Kind::Syn, ORIG) => {
                // RFC 9293 §3.10.7.3: a restarted opener uses a newer ISN.
                if after(segment_end(seg), self.peers[ORIG].end) {
                    self.peers[ORIG] = peer_from_syn(seg);
                }
                None
            }
            (SynSent, Kind::Syn, REPLY) => {
                self.peers[REPLY] = peer_from_syn(seg);
                self.agree_scale();
                self.state = SynSent2;
                self.simultaneous = true;
                None
            }
            (SynSent2, Kind::Syn, REPLY) => None,
            (SynSent, Kind::SynAck, REPLY) => {
                if seg.ack != self.peers[ORIG].end {
                    return Some(TcpUpdate::Reject);
                }
                self.peers[REPLY] = peer_from_syn(seg);
                self.agree_scale();
                self.state = SynRecv;
                None
            }
            (SynSent2, Kind::SynAck, _) => {
                self.state = SynRecv;
                None
            }
            // A SYN/ACK again: the final ACK of the handshake was lost.
            (SynRecv | Established | FinWait | CloseWait | LastAck, Kind::SynAck, d)
                if d == REPLY || self.simultaneous =>
            {
                None
            }
            (_, Kind::Syn | Kind::SynAck, _) => Some(TcpUpdate::Reject),
            (SynSent, Kind::Rst, REPLY) => Some(self.refused(seg)),
            (SynSent | SynSent2, Kind::Ack | Kind::Fin, _) => Some(TcpUpdate::Reject),
            _ => None,
        }
    }

    /// An RST answering our SYN must acknowledge it (RFC 9293 §3.10.7.3).
    fn refused(&mut self, seg: &TcpSegment) -> TcpUpdate {
        if seg.flags.has(TcpFlags::ACK) && seg.ack == self.peers[ORIG].end {
            self.state = TcpState::Close;
            TcpUpdate::Accept
        } else {
            TcpUpdate::Reject
        }
    }

    fn agree_scale(&mut self) {
        if !(self.peers[ORIG].scale_offered && self.peers[REPLY].scale_offered) {
            self.peers[ORIG].scale = 0;
            self.peers[REPLY].scale = 0;
        }
    }

    fn effective_ack(kind: Kind, seg: &TcpSegment, receiver: &TcpPeer) -> u32 {
        let acks = seg.flags.has(TcpFlags::ACK);
        // Some stacks send RST|ACK with a zero ack field: nothing to check.
        if !acks || (kind == Kind::Rst && seg.ack == 0) {
            receiver.end
        } else {
            seg.ack
        }
    }

    /// The segment's (seq, end), with empty non-RST segments moved onto the
    /// sender's edge so that only their acknowledgement is judged.
    fn judged_range(kind: Kind, seg: &TcpSegment, sender: &TcpPeer) -> (u32, u32) {
        let end = segment_end(seg);
        if seg.seq == end && kind != Kind::Rst {
            (sender.end, sender.end)
        } else {
            (seg.seq, end)
        }
    }

    fn in_window(&self, kind: Kind, seg: &TcpSegment, dir: usize) -> bool {
        let (sender, receiver) = (&self.peers[dir], &self.peers[1 - dir]);
        let (seq, end) = Self::judged_range(kind, seg, sender);
        let ack = Self::effective_ack(kind, seg, receiver);
        let ack_lag = sender.max_win.max(MIN_ACK_LAG);
        !after(end, sender.max_end)
            && !before(seq, sender.end.wrapping_sub(receiver.max_win.max(1)))
            && !after(ack, receiver.end)
            && !before(ack, receiver.end.wrapping_sub(ack_lag))
    }

    fn advance_window(&mut self, kind: Kind, seg: &TcpSegment, dir: usize) {
        let (_, end) = Self::judged_range(kind, seg, &self.peers[dir]);
        let sender = &mut self.peers[dir];
        let win = if seg.flags.has(TcpFlags::SYN) {
            u32::from(seg.window)
        } else {
            u32::from(seg.window) << sender.scale
        };
        sender.max_win = sender.max_win.max(win);
        if after(end, sender.end) {
            sender.end = end;
        }
        if seg.flags.has(TcpFlags::ACK) {
            let receiver = &mut self.peers[1 - dir];
            let limit = seg.ack.wrapping_add(win.max(1));
            if after(limit, receiver.max_end) {
                receiver.max_end = limit;
            }
        }
    }

    fn advance_state(&mut self, kind: Kind, seg: &TcpSegment, dir: usize) {
        match kind {
            Kind::Rst => self.state = TcpState::Close,
            Kind::Syn | Kind::SynAck => {}
            Kind::Fin | Kind::Ack => {
                if self.state == TcpState::Close {
                    return;
                }
                if self.state == TcpState::SynRecv && (dir == ORIG || self.simultaneous) {
                    self.state = TcpState::Established;
                }
                if self.state == TcpState::SynRecv {
                    return;
                }
                self.note_fin_and_ack(kind, seg, dir);
                self.state = self.closing_state();
            }
        }
    }

    fn note_fin_and_ack(&mut self, kind: Kind, seg: &TcpSegment, dir: usize) {
        if kind == Kind::Fin && !self.peers[dir].fin_sent {
            self.peers[dir].fin_seq = segment_end(seg);
            self.peers[dir].fin_sent = true;
        }
        let other = &mut self.peers[1 - dir];
        if let Some(fin_end) = other.fin_end()
            && seg.flags.has(TcpFlags::ACK)
            && !before(seg.ack, fin_end)
        {
            other.fin_acked = true;
        }
    }

    fn closing_state(&self) -> TcpState {
        let sent = self.peers.iter().filter(|p| p.fin_sent).count();
        let acked = self
            .peers
            .iter()
            .filter(|p| p.fin_sent && p.fin_acked)
            .count();
        match (sent, acked) {
            (0, _) => TcpState::Established,
            (1, 0) => TcpState::FinWait,
            (1, _) => TcpState::CloseWait,
            (_, 2) => TcpState::TimeWait,
            _ => TcpState::LastAck,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_combinations() {
        const S: u8 = TcpFlags::SYN;
        const A: u8 = TcpFlags::ACK;
        const F: u8 = TcpFlags::FIN;
        const R: u8 = TcpFlags::RST;
        const P: u8 = TcpFlags::PSH;
        let cases = [
            (S, Some(Kind::Syn)),
            (S | A, Some(Kind::SynAck)),
            (S | F, None),
            (S | R | A, None),
            (A, Some(Kind::Ack)),
            (A | P, Some(Kind::Ack)),
            (F | A, Some(Kind::Fin)),
            (F, None),
            (P, None),
            (R, Some(Kind::Rst)),
            (R | A, Some(Kind::Rst)),
            (0, None),
        ];
        for (bits, want) in cases {
            assert_eq!(classify(TcpFlags(bits)), want, "flags {bits:#04x}");
        }
    }

    #[test]
    fn sequence_comparison_wraps() {
        let cases = [
            (1, 2, true),
            (2, 1, false),
            (u32::MAX, 0, true),
            (0, u32::MAX, false),
            (5, 5, false),
        ];
        for (a, b, want) in cases {
            assert_eq!(before(a, b), want, "before({a}, {b})");
        }
    }
}
