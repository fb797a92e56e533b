//! The disruptions: what each [`Kind`] does to the running node, and the
//! state they leave (dead VNFs waiting for their restart, temporary
//! ports, churned rules, steering overrides) so the soak can undo it all
//! before the final checks.

use super::node::{self, SINK0, STEERING_PRIORITY, Switch};
use super::peers::{self, Peer};
use super::schedule::{Kind, Rng};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// At most this many temporary port sets at a time.
const MAX_TEMPS: usize = 3;
/// Rate of a temporary port's generator.
const TEMP_RATE_PPS: u64 = 5000;
/// Priority of a steering override (above the steering rules).
const OVERRIDE_PRIORITY: u16 = 20;
/// The first octets of churned rules' nw_dst: traffic never goes there.
const CHURN_NET: &str = "10.200";

/// Per-event counts (the summary's events table).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Counts {
    pub kills: u64,
    pub restarts: u64,
    pub reconnects: u64,
    /// Long-lived VNFs that exited without being told to (restarted).
    pub unexpected_exits: u64,
    pub ports_added: u64,
    pub ports_removed: u64,
    /// Temporary ports removed while their VNF was still connected.
    pub removed_while_connected: u64,
    pub flows_added: u64,
    pub flows_deleted: u64,
    pub flow_requests: u64,
    pub steering_flaps: u64,
}

/// A temporary vhost-user port, its generator and its VNF.
struct Temp {
    k: u16,
    vnf: Peer,
}

impl Temp {
    fn vhost_no(&self) -> u16 {
        1000 + self.k
    }
    fn gen_no(&self) -> u16 {
        3000 + self.k
    }
}

pub struct Soak {
    pub sw: Switch,
    pub dir: PathBuf,
    pub bin: PathBuf,
    /// The long-lived VNFs (vnf1, vnf2, testpmd).
    pub peers: Vec<Peer>,
    /// Killed long-lived VNFs: (when to restart, index into `peers`).
    pending: Vec<(Instant, usize)>,
    temps: Vec<Temp>,
    next_temp: u16,
    /// Churned batches: (batch number = third octet of nw_dst, rules).
    churn: Vec<(u16, u64)>,
    next_batch: u16,
    /// Indices into `steering` that have an override installed.
    overridden: Vec<usize>,
    pub steering: Vec<(u16, u16)>,
    pub rng: Rng,
    pub n: Counts,
    /// Requests the switch refused or answered unexpectedly.
    pub errors: Vec<String>,
    /// Every VNF log written (for the panic scan).
    pub logs: Vec<PathBuf>,
}

impl Soak {
    pub fn new(
        sw: Switch,
        dir: &Path,
        bin: &Path,
        peers: Vec<Peer>,
        steering: Vec<(u16, u16)>,
        seed: u64,
    ) -> Soak {
        let logs = peers.iter().map(|p| p.log().to_path_buf()).collect();
        Soak {
            sw,
            dir: dir.to_path_buf(),
            bin: bin.to_path_buf(),
            peers,
            pending: Vec::new(),
            temps: Vec::new(),
            next_temp: 0,
            churn: Vec::new(),
            next_batch: 0,
            overridden: Vec::new(),
            steering,
            rng: Rng::new(seed),
            n: Counts::default(),
            errors: Vec::new(),
            logs,
        }
    }

    pub fn apply(&mut self, kind: Kind) {
        match kind {
            Kind::KillVnf => self.kill_vnf(),
            Kind::ReconnectVnf => self.reconnect_vnf(),
            Kind::AddPort if self.temps.len() >= MAX_TEMPS => self.remove_port(),
            Kind::AddPort => self.add_port(),
            Kind::RemovePort if self.temps.is_empty() => self.add_port(),
            Kind::RemovePort => self.remove_port(),
            Kind::FlowChurn => self.flow_churn(),
            Kind::SteeringFlap => self.steering_flap(),
        }
    }

    /// A failed step: remembered for the summary (the soak goes on).
    fn note<T>(&mut self, what: &str, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                let line = format!("{what}: {e}");
                eprintln!("soak: {line}");
                self.errors.push(line);
                None
            }
        }
    }

    fn running_peer(&mut self) -> Option<usize> {
        let up: Vec<usize> = (0..self.peers.len())
            .filter(|&i| !self.pending.iter().any(|(_, j)| *j == i))
            .collect();
        let up: Vec<usize> = up
            .into_iter()
            .filter(|&i| self.peers[i].running())
            .collect();
        (!up.is_empty()).then(|| up[self.rng.index(up.len())])
    }

    fn kill_vnf(&mut self) {
        let Some(i) = self.running_peer() else { return };
        self.peers[i].kill();
        self.n.kills += 1;
        let at = Instant::now() + self.rng.millis(200, 4000);
        self.pending.push((at, i));
    }

    fn reconnect_vnf(&mut self) {
        let Some(i) = self.running_peer() else { return };
        self.peers[i].stop();
        let r = self.peers[i].start();
        let what = format!("restart {}", self.peers[i].name);
        if self.note(&what, r).is_some() {
            self.n.reconnects += 1;
        }
    }

    /// Restarts killed VNFs whose pause is over (all of them with `all`),
    /// and restarts long-lived VNFs that exited by themselves.
    pub fn restarts_due(&mut self, all: bool) {
        let now = Instant::now();
        let (due, wait): (Vec<_>, Vec<_>) =
            self.pending.iter().partition(|(t, _)| all || *t <= now);
        self.pending = wait;
        for (_, i) in due {
            let r = self.peers[i].start();
            let what = format!("restart {}", self.peers[i].name);
            if self.note(&what, r).is_some() {
                self.n.restarts += 1;
            }
        }
        for i in 0..self.peers.len() {
            if self.pending.iter().any(|(_, j)| *j == i) || self.peers[i].running() {
                continue;
            }
            self.n.unexpected_exits += 1;
            let name = self.peers[i].name.clone();
            let tail = crate::proc::tail(self.peers[i].log(), 5);
            self.errors
                .push(format!("{name} exited by itself:\n{tail}"));
            let r = self.peers[i].start();
            self.note(&format!("restart {name}"), r);
        }
    }

    fn add_port(&mut self) {
        let k = self.next_temp;
        self.next_temp = (self.next_temp + 1) % 1000;
        let name = format!("x{k}");
        let sock = node::socket(&self.dir, &name);
        let kind = peers::Kind::Builtin {
            socket: sock.clone(),
            app: "io",
        };
        let t = Temp {
            k,
            vnf: Peer::new(&name, kind, &self.bin, &self.dir),
        };
        self.logs.push(t.vnf.log().to_path_buf());
        let mut t = t;
        // Half the time the VNF comes first and waits for the socket.
        let vnf_first = self.rng.chance(50);
        if vnf_first {
            let r = t.vnf.start();
            self.note(&format!("start {name}"), r);
        }
        let r = self
            .sw
            .add_port(&node::vhost(&name, t.vhost_no(), &sock, "server"));
        if self.note(&format!("add-port {name}"), r).is_some() {
            self.n.ports_added += 1;
        }
        let g = format!("gx{k}");
        let r = self
            .sw
            .add_port(&node::generator(&g, t.gen_no(), TEMP_RATE_PPS));
        if self.note(&format!("add-port {g}"), r).is_some() {
            self.n.ports_added += 1;
        }
        let rules = vec![
            node::rule(STEERING_PRIORITY, t.gen_no(), t.vhost_no()),
            node::rule(STEERING_PRIORITY, t.vhost_no(), SINK0),
        ];
        self.add_flows(&format!("flows of {name}"), rules);
        if !vnf_first {
            let r = t.vnf.start();
            self.note(&format!("start {name}"), r);
        }
        self.temps.push(t);
    }

    fn remove_port(&mut self) {
        let i = self.rng.index(self.temps.len());
        let t = self.temps.swap_remove(i);
        self.remove_temp(t, true);
    }

    /// Takes a temporary port set away: VNF, rules, vhost port and
    /// generator in a random order (`shuffle`) or in the orderly one.
    fn remove_temp(&mut self, mut t: Temp, shuffle: bool) {
        let mut steps = [0u8, 1, 2, 3];
        if shuffle {
            for j in (1..steps.len()).rev() {
                steps.swap(j, self.rng.index(j + 1));
            }
        }
        let at = |x: u8| steps.iter().position(|&s| s == x);
        if at(2) < at(0)
            && self
                .sw
                .ports()
                .is_ok_and(|p| node::connected(&p, t.vhost_no()))
        {
            self.n.removed_while_connected += 1;
        }
        for s in steps {
            match s {
                0 if shuffle && self.rng.chance(50) => t.vnf.kill(),
                0 => t.vnf.stop(),
                1 => {
                    for p in [t.gen_no(), t.vhost_no()] {
                        self.del_flows(&format!("in_port={p}"), Some(1));
                    }
                }
                2 => {
                    let r = self.sw.del_port(&format!("x{}", t.k));
                    if self.note(&format!("del-port x{}", t.k), r).is_some() {
                        self.n.ports_removed += 1;
                    }
                }
                _ => {
                    let r = self.sw.del_port(&format!("gx{}", t.k));
                    if self.note(&format!("del-port gx{}", t.k), r).is_some() {
                        self.n.ports_removed += 1;
                    }
                }
            }
        }
    }

    fn add_flows(&mut self, what: &str, rules: Vec<String>) {
        let want = rules.len() as u64;
        self.n.flow_requests += 1;
        let r = self.sw.add_flows(rules);
        if let Some(got) = self.note(what, r) {
            self.n.flows_added += got;
            if got != want {
                self.errors
                    .push(format!("{what}: {got} rules added, {want} sent"));
            }
        }
    }

    /// Deletes what `filter` selects; `want`: how many it must delete.
    fn del_flows(&mut self, filter: &str, want: Option<u64>) {
        self.n.flow_requests += 1;
        let r = self.sw.del_flows(filter);
        if let Some(got) = self.note(&format!("del-flows {filter}"), r) {
            self.n.flows_deleted += got;
            if want.is_some_and(|w| w != got) {
                self.errors.push(format!(
                    "del-flows {filter}: {got} deleted, {want:?} expected"
                ));
            }
        }
    }

    /// Adds a batch of 1..=64 rules that match no traffic (mixed masks
    /// and priorities, some above the steering rules), or deletes one
    /// batch with a non-strict filter that must select exactly it.
    fn flow_churn(&mut self) {
        if !self.churn.is_empty() && (self.churn.len() >= 16 || self.rng.chance(40)) {
            let (b, n) = self.churn.swap_remove(self.rng.index(self.churn.len()));
            self.del_flows(&format!("udp,nw_dst={CHURN_NET}.{b}.0/24"), Some(n));
            return;
        }
        let b = self.next_batch;
        self.next_batch = (self.next_batch + 1) % 250;
        let n = self.rng.range(1, 64);
        let rules: Vec<String> = (1..=n)
            .map(|i| {
                let prio = [5, 15, 25][self.rng.index(3)];
                let action = ["drop", "output:2", "mod_dl_src:02:00:00:00:00:99,output:2"]
                    [self.rng.index(3)];
                let tp = if self.rng.chance(50) {
                    format!(",tp_dst={}", self.rng.range(1, 65535))
                } else {
                    String::new()
                };
                format!("priority={prio},udp,nw_dst={CHURN_NET}.{b}.{i}{tp},actions={action}")
            })
            .collect();
        self.add_flows(&format!("churn batch {b}"), rules);
        self.churn.push((b, n));
    }

    /// Overrides a steering rule with an equal one of higher priority,
    /// or removes the override (strict delete of exactly that rule).
    fn steering_flap(&mut self) {
        let i = self.rng.index(self.steering.len());
        let (a, b) = self.steering[i];
        if let Some(j) = self.overridden.iter().position(|&x| x == i) {
            self.overridden.swap_remove(j);
            self.del_flows(
                &format!("priority={OVERRIDE_PRIORITY},in_port={a}"),
                Some(1),
            );
        } else {
            self.overridden.push(i);
            self.add_flows(
                "steering override",
                vec![node::rule(OVERRIDE_PRIORITY, a, b)],
            );
        }
        self.n.steering_flaps += 1;
    }

    /// Undoes every disruption still in place: killed VNFs restarted,
    /// temporary ports removed in order, churned rules and overrides
    /// deleted.
    pub fn undo_all(&mut self) {
        self.restarts_due(true);
        for t in std::mem::take(&mut self.temps) {
            self.remove_temp(t, false);
        }
        for (b, n) in std::mem::take(&mut self.churn) {
            self.del_flows(&format!("udp,nw_dst={CHURN_NET}.{b}.0/24"), Some(n));
        }
        for i in std::mem::take(&mut self.overridden) {
            let a = self.steering[i].0;
            self.del_flows(
                &format!("priority={OVERRIDE_PRIORITY},in_port={a}"),
                Some(1),
            );
        }
    }
}
