//! iperf3 between two guests, driven from their shells: a one-off
//! server (`-s -1 -D`) in one, the client with `-J` in the other, the
//! client's JSON (which carries the receiver's figures too) parsed here.

use super::Guest;
use serde_json::Value;
use std::time::Duration;

const PORT: u16 = 5201;
const CMD: Duration = Duration::from_secs(20);

/// One iperf3 run.
#[derive(Clone, Debug)]
pub struct Run {
    /// UDP datagrams of this many payload bytes (18: a 64-byte frame with
    /// IPv4); TCP when None.
    pub udp_len: Option<usize>,
    /// Parallel streams (`-P`).
    pub streams: u32,
    /// Seconds (`-t`).
    pub seconds: u32,
}

impl Run {
    pub fn tcp(streams: u32, seconds: u32) -> Run {
        Run {
            udp_len: None,
            streams,
            seconds,
        }
    }

    pub fn udp(len: usize, seconds: u32) -> Run {
        Run {
            udp_len: Some(len),
            streams: 1,
            seconds,
        }
    }
}

/// What the run measured; the receiver's figures are the server's, as
/// the client's JSON reports them.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub sent_bytes: u64,
    pub received_bytes: u64,
    pub seconds: f64,
    /// Receiver's goodput, Gbit/s.
    pub gbps: f64,
    /// TCP retransmissions by the sender.
    pub retransmits: Option<u64>,
    /// UDP: datagrams the receiver got per second, and lost ones.
    pub rx_pps: Option<f64>,
    pub lost_packets: Option<u64>,
    /// CPU load of the sender's and the receiver's host (the guests), %.
    pub sender_cpu: f64,
    pub receiver_cpu: f64,
}

impl Outcome {
    /// TCP: something arrived, nothing more than was sent, and what is
    /// missing at most what the two sockets can hold when the test ends
    /// (iperf3's receiver stops counting when the client says the test is
    /// over, with the last segments still in flight or unread).
    pub fn check_tcp(&self, what: &str) -> Result<(), String> {
        const IN_FLIGHT: u64 = 8 << 20;
        if self.received_bytes == 0 || self.sent_bytes == 0 {
            return Err(format!(
                "{what}: sent {} B, received {} B",
                self.sent_bytes, self.received_bytes
            ));
        }
        if self.received_bytes > self.sent_bytes
            || self.sent_bytes - self.received_bytes > IN_FLIGHT
        {
            return Err(format!(
                "{what}: the receiver counted {} B of the {} B sent",
                self.received_bytes, self.sent_bytes
            ));
        }
        Ok(())
    }

    pub fn summary(&self) -> String {
        match (self.rx_pps, self.retransmits) {
            (Some(pps), _) => format!(
                "{:.1} kpps received ({} lost), {} B received of {} B, CPU sender {:.0} % receiver {:.0} %",
                pps / 1e3,
                self.lost_packets.unwrap_or(0),
                self.received_bytes,
                self.sent_bytes,
                self.sender_cpu,
                self.receiver_cpu
            ),
            (None, retr) => format!(
                "{:.3} Gbit/s, {} B received of {} B sent, {} retransmits, CPU sender {:.0} % receiver {:.0} %",
                self.gbps,
                self.received_bytes,
                self.sent_bytes,
                retr.unwrap_or(0),
                self.sender_cpu,
                self.receiver_cpu
            ),
        }
    }
}

/// Runs `run` from `client` to `server`, which is reached at `addr` (an
/// IPv4 or IPv6 address of its eth0).
pub fn run(
    client: &mut Guest,
    server: &mut Guest,
    addr: &str,
    run: &Run,
) -> Result<Outcome, String> {
    server
        .ok(
            &format!(
                "iperf3 -s -1 -D -p {PORT} && \
                 for i in $(seq 100); do netstat -ltn | grep -q ':{PORT} ' && exit 0; sleep 0.1; done; exit 1"
            ),
            CMD,
        )
        .map_err(|e| format!("iperf3 server: {e}"))?;
    let mode = match run.udp_len {
        Some(len) => format!("-u -b 0 -l {len}"),
        None => String::new(),
    };
    let cmd = format!(
        "iperf3 -c {addr} -p {PORT} {mode} -P {} -t {} -i 0 -J",
        run.streams, run.seconds
    );
    let limit = Duration::from_secs(u64::from(run.seconds) + 60);
    let out = client.ok(&cmd, limit);
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            // A server left waiting would take the next run's port.
            let _ = server.ok("killall iperf3; true", CMD);
            return Err(e);
        }
    };
    parse(&out, run).map_err(|e| format!("`{cmd}`: {e}"))
}

/// The client's `-J` output (anything before the JSON object is ignored).
pub fn parse(text: &str, run: &Run) -> Result<Outcome, String> {
    let start = text.find('{').ok_or_else(|| format!("no JSON: {text}"))?;
    let end = text.rfind('}').ok_or_else(|| format!("no JSON: {text}"))?;
    let v: Value =
        serde_json::from_str(&text[start..=end]).map_err(|e| format!("JSON: {e}: {text}"))?;
    if let Some(e) = v["error"].as_str() {
        return Err(format!("iperf3: {e}"));
    }
    let end = &v["end"];
    let (sent, recv) = (&end["sum_sent"], &end["sum_received"]);
    let num = |x: &Value, k: &str| {
        x[k].as_f64()
            .ok_or_else(|| format!("no end.{k} in the JSON: {}", truncated(text)))
    };
    let received_bytes = num(recv, "bytes")? as u64;
    let seconds = num(recv, "seconds")?;
    let cpu = &end["cpu_utilization_percent"];
    let mut o = Outcome {
        sent_bytes: num(sent, "bytes")? as u64,
        received_bytes,
        seconds,
        gbps: num(recv, "bits_per_second")? / 1e9,
        sender_cpu: cpu["host_total"].as_f64().unwrap_or(f64::NAN),
        receiver_cpu: cpu["remote_total"].as_f64().unwrap_or(f64::NAN),
        ..Outcome::default()
    };
    match run.udp_len {
        Some(len) => {
            o.rx_pps = Some(received_bytes as f64 / len as f64 / seconds.max(1e-3));
            o.lost_packets = recv["lost_packets"].as_u64();
        }
        None => o.retransmits = sent["retransmits"].as_u64(),
    }
    Ok(o)
}

fn truncated(s: &str) -> &str {
    let mut n = s.len().min(2000);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_and_udp_ends() {
        let tcp = r#"noise {"start":{},"end":{"sum_sent":{"bytes":20971520,"seconds":3.0,
            "bits_per_second":361387890.8,"retransmits":2},"sum_received":{"bytes":20883864,
            "seconds":3.01,"bits_per_second":336470875.4},"cpu_utilization_percent":
            {"host_total":95.1,"remote_total":83.9}}}"#;
        let o = parse(tcp, &Run::tcp(1, 3)).unwrap();
        assert_eq!((o.sent_bytes, o.received_bytes), (20971520, 20883864));
        assert_eq!(o.retransmits, Some(2));
        assert!((o.gbps - 0.336).abs() < 1e-3);
        o.check_tcp("t").unwrap();
        let udp = r#"{"end":{"sum_sent":{"bytes":562500,"seconds":3.0,"bits_per_second":1.4e6},
            "sum_received":{"bytes":425340,"seconds":3.0,"bits_per_second":1.1e6,
            "lost_packets":7470},"cpu_utilization_percent":{}}}"#;
        let o = parse(udp, &Run::udp(18, 3)).unwrap();
        assert!((o.rx_pps.unwrap() - 425340.0 / 18.0 / 3.0).abs() < 1e-6);
        assert_eq!(o.lost_packets, Some(7470));
        assert!(parse(r#"{"error":"unable to connect"}"#, &Run::tcp(1, 3)).is_err());
        let none = Outcome {
            sent_bytes: 10,
            ..Outcome::default()
        };
        assert!(none.check_tcp("t").is_err());
    }
}
