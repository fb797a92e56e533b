//! Idle timeouts per connection state.
//!
//! Defaults are those of OVS's userspace datapath, `ct_dpif_netdev_tp_def`
//! in `lib/conntrack-tp.c` (OVS 3.x), in seconds:
//!
//! | field            | default | applies here to                              |
//! |------------------|--------:|----------------------------------------------|
//! | `tcp_syn_sent`   | 30      | SYN seen (also SYN_SENT2); picked-up TCP before any reply |
//! | `tcp_syn_recv`   | 30      | SYN/ACK seen, handshake not finished          |
//! | `tcp_established`| 86 400  | ESTABLISHED                                   |
//! | `tcp_fin_wait`   | 900     | FIN_WAIT, CLOSE_WAIT, LAST_ACK                |
//! | `tcp_time_wait`  | 45      | TIME_WAIT (both FINs acknowledged)            |
//! | `tcp_close`      | 30      | CLOSE (after an accepted RST)                 |
//! | `udp_first`      | 60      | first packet of UDP/other                    |
//! | `udp_single`     | 60      | more packets, one direction only             |
//! | `udp_multiple`   | 30      | packets seen both ways                       |
//! | `icmp_first`     | 60      | ICMP query sent                              |
//! | `icmp_reply`     | 30      | ICMP answer seen                             |
//!
//! Like OVS, protocols other than TCP and ICMP share the UDP policy.
//! OVS picks a TCP timeout from its pf-derived peer states
//! (`tcp_conn_update` in `lib/conntrack-tcp.c`): one peer closing →
//! `tcp_fin_wait`; both peers closing → `tcp_time_wait`; both past FIN_WAIT_2
//! (and after an RST) → `tcp_close`. Here each state uses the field of its
//! own name, so "both FINs acknowledged" lives `tcp_time_wait` (45 s) where
//! OVS gives it `tcp_close` (30 s), and "both FINs sent, last unacknowledged"
//! lives `tcp_fin_wait` where OVS gives it `tcp_time_wait`.

use thiserror::Error;

/// Timeouts in seconds. Fixed for a tracker's lifetime: the expiry wheel
/// places a connection by the deadline it had when it last changed state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub tcp_syn_sent: u32,
    pub tcp_syn_recv: u32,
    pub tcp_established: u32,
    pub tcp_fin_wait: u32,
    pub tcp_time_wait: u32,
    pub tcp_close: u32,
    pub udp_first: u32,
    pub udp_single: u32,
    pub udp_multiple: u32,
    pub icmp_first: u32,
    pub icmp_reply: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            tcp_syn_sent: 30,
            tcp_syn_recv: 30,
            tcp_established: 24 * 60 * 60,
            tcp_fin_wait: 15 * 60,
            tcp_time_wait: 45,
            tcp_close: 30,
            udp_first: 60,
            udp_single: 60,
            udp_multiple: 30,
            icmp_first: 60,
            icmp_reply: 30,
        }
    }
}

/// The timeouts in milliseconds, indexed by class: a tracked packet's
/// deadline is one load and an add (the match of [`Timeouts::seconds`]
/// compiles to a jump through a table, ~6 instructions a packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeoutMillis([u64; TimeoutClass::ALL.len()]);

impl TimeoutMillis {
    /// Deadline in milliseconds for a connection of `class` touched at
    /// `now_ms`.
    #[inline(always)]
    pub fn deadline(&self, class: TimeoutClass, now_ms: u64) -> u64 {
        now_ms + self.0[class as usize]
    }
}

/// Which timeout a connection's current state uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutClass {
    TcpSynSent,
    TcpSynRecv,
    TcpEstablished,
    TcpFinWait,
    TcpTimeWait,
    TcpClose,
    UdpFirst,
    UdpSingle,
    UdpMultiple,
    IcmpFirst,
    IcmpReply,
}

impl TimeoutClass {
    /// Every class, in declaration order (`ALL[c as usize] == c`).
    pub const ALL: [TimeoutClass; 11] = [
        TimeoutClass::TcpSynSent,
        TimeoutClass::TcpSynRecv,
        TimeoutClass::TcpEstablished,
        TimeoutClass::TcpFinWait,
        TimeoutClass::TcpTimeWait,
        TimeoutClass::TcpClose,
        TimeoutClass::UdpFirst,
        TimeoutClass::UdpSingle,
        TimeoutClass::UdpMultiple,
        TimeoutClass::IcmpFirst,
        TimeoutClass::IcmpReply,
    ];
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TimeoutsError {
    #[error("timeout {0} is zero: a connection would expire as it is created")]
    Zero(&'static str),
}

impl Timeouts {
    pub fn seconds(&self, class: TimeoutClass) -> u32 {
        match class {
            TimeoutClass::TcpSynSent => self.tcp_syn_sent,
            TimeoutClass::TcpSynRecv => self.tcp_syn_recv,
            TimeoutClass::TcpEstablished => self.tcp_established,
            TimeoutClass::TcpFinWait => self.tcp_fin_wait,
            TimeoutClass::TcpTimeWait => self.tcp_time_wait,
            TimeoutClass::TcpClose => self.tcp_close,
            TimeoutClass::UdpFirst => self.udp_first,
            TimeoutClass::UdpSingle => self.udp_single,
            TimeoutClass::UdpMultiple => self.udp_multiple,
            TimeoutClass::IcmpFirst => self.icmp_first,
            TimeoutClass::IcmpReply => self.icmp_reply,
        }
    }

    /// Every class's timeout in milliseconds, for [`TimeoutMillis`].
    pub fn millis(&self) -> TimeoutMillis {
        TimeoutMillis(TimeoutClass::ALL.map(|c| u64::from(self.seconds(c)) * 1000))
    }

    pub fn validate(&self) -> Result<(), TimeoutsError> {
        let named = [
            ("tcp_syn_sent", self.tcp_syn_sent),
            ("tcp_syn_recv", self.tcp_syn_recv),
            ("tcp_established", self.tcp_established),
            ("tcp_fin_wait", self.tcp_fin_wait),
            ("tcp_time_wait", self.tcp_time_wait),
            ("tcp_close", self.tcp_close),
            ("udp_first", self.udp_first),
            ("udp_single", self.udp_single),
            ("udp_multiple", self.udp_multiple),
            ("icmp_first", self.icmp_first),
            ("icmp_reply", self.icmp_reply),
        ];
        match named.iter().find(|(_, secs)| *secs == 0) {
            Some((name, _)) => Err(TimeoutsError::Zero(name)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table by class gives every class the deadline its named
    /// timeout does, each value distinct so a swapped index shows.
    #[test]
    fn the_millisecond_table_agrees_with_each_named_timeout() {
        let t = Timeouts {
            tcp_syn_sent: 1,
            tcp_syn_recv: 2,
            tcp_established: 3,
            tcp_fin_wait: 4,
            tcp_time_wait: 5,
            tcp_close: 6,
            udp_first: 7,
            udp_single: 8,
            udp_multiple: 9,
            icmp_first: 10,
            icmp_reply: 11,
        };
        let table = t.millis();
        for (i, class) in TimeoutClass::ALL.into_iter().enumerate() {
            assert_eq!(class as usize, i, "{class:?} out of declaration order");
            assert_eq!(
                table.deadline(class, 5_000),
                5_000 + u64::from(t.seconds(class)) * 1000,
                "{class:?}"
            );
        }
        assert_eq!(table.deadline(TimeoutClass::UdpSingle, 0), 8_000);
    }
}
