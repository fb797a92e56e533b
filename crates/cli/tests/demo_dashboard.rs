//! `nfvswitch demo` with its web dashboard in a real browser (headless
//! Chromium over the DevTools protocol, [`nfv_testutil::chromium`]).
//!
//! The demo runs north-south then east-west, 2 VNFs, 64 B frames, 4 s
//! windows (the page has time to catch the first run on a loaded machine),
//! with `--hold --api 127.0.0.1:0`. Checked: its first output line is the
//! dashboard's URL; the page follows the demo from the north-south node to
//! the east-west node (another node behind the same address), each time
//! with a gauge per VNF and per chain whose values — read from the DOM,
//! the number the gauge shows and its data attribute — are non-zero; the
//! demo panel says which run it is and lists the finished ones; `--hold`
//! keeps the last run up until SIGINT, then the demo exits 0, its socket
//! directory is gone and no VNF process is left; the PMU explanation was
//! printed at most once; no uncaught script exception. Screenshots of both
//! runs are saved under target/tmp and their paths printed.
//!
//! Chromium is started before the demo so the page is up for the first
//! run. Without chromium the test is SKIPPED. The demo runs in a process
//! group of its own; a guard stops it (SIGTERM, then SIGKILL to the group,
//! by id) also when an assertion fails.

use nfv_testutil::TempDir;
use nfv_testutil::chromium::{Browser, save_screenshot};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for one state of the page.
const WAIT: Duration = Duration::from_secs(30);

/// Temp dirs of this test: `nfv-demo-dash-PID-TAG`.
const TMP_PREFIX: &str = "demo-dash";

/// The demo process; its stdout lines arrive on `lines`.
struct Demo {
    child: Child,
    lines: mpsc::Receiver<String>,
    out: Vec<String>,
    /// Lines of `out` that [`Demo::line`] has looked at.
    looked: usize,
}

impl Demo {
    fn start(stderr: &Path) -> Demo {
        let mut child = Command::new(env!("CARGO_BIN_EXE_nfvswitch"))
            .args([
                "demo",
                "--topology",
                "ns,ew",
                "--vnfs",
                "2",
                "--sizes",
                "64",
                "--seconds",
                "4",
                "--api",
                "127.0.0.1:0",
                "--hold",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr).expect("stderr file"))
            .process_group(0)
            .spawn()
            .expect("start nfvswitch demo");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        Demo {
            child,
            lines,
            out: Vec::new(),
            looked: 0,
        }
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Collects output until a line not looked at before satisfies `f`;
    /// returns that line.
    fn line(&mut self, what: &str, f: impl Fn(&str) -> bool) -> String {
        let end = Instant::now() + WAIT;
        loop {
            while self.looked < self.out.len() {
                self.looked += 1;
                if f(&self.out[self.looked - 1]) {
                    return self.out[self.looked - 1].clone();
                }
            }
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.out.push(l),
                Err(_) => panic!(
                    "no {what} from the demo within {WAIT:?}; its output:\n{}",
                    self.out.join("\n")
                ),
            }
        }
    }

    fn signal(&self, sig: nix::sys::signal::Signal) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), sig);
    }

    /// Waits for the exit (at most `t`), then reads the rest of stdout.
    fn wait(&mut self, t: Duration) -> Option<std::process::ExitStatus> {
        let end = Instant::now() + t;
        let status = loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                break Some(s);
            }
            if Instant::now() > end {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.out.push(l);
        }
        status
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(nix::sys::signal::Signal::SIGTERM);
            if self.wait(Duration::from_secs(10)).is_none() {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(self.pid()),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = self.child.wait();
            }
        }
    }
}

/// What the demo page shows, read from the DOM.
const READ: &str = r#"(() => {
  if (!document.body) return { updated: 0, state: "loading" };
  const q = (s) => Array.from(document.querySelectorAll(s));
  const f = (x) => (x === undefined || x === "" ? null : Number(x));
  const shown = (g, kind) => {
    const t = g.querySelector(".gauge." + kind + " .value tspan");
    return t ? Number(t.textContent) : null;
  };
  const gauge = (g) => ({ name: g.dataset.name, chain: g.dataset.chain,
    mpps: f(g.dataset.mpps), gbps: f(g.dataset.gbps),
    shown_mpps: shown(g, "mpps"), shown_gbps: shown(g, "gbps") });
  const d = document.getElementById("demo-panel");
  return {
    updated: f(document.body.dataset.updated) ?? 0,
    state: document.body.dataset.state ?? null,
    demo: d && !d.hidden ? { run: f(d.dataset.run), runs: f(d.dataset.runs),
      phase: d.dataset.phase, topology: d.dataset.topology, vnfs: f(d.dataset.vnfs),
      size: f(d.dataset.size), node: d.dataset.node, text: d.textContent,
      done: q('[data-test="demo-run"]').length } : null,
    vnfs: q('[data-test="vnf-gauge"]').map(gauge),
    chains: q('[data-test="chain-gauge"]').map(gauge),
    errors: q('.panel-error').map((e) => e.textContent),
  };
})()"#;

fn read(b: &mut Browser) -> Value {
    b.eval(READ).unwrap_or_else(|e| panic!("{e}"))
}

/// Reads the page every 200 ms until `cond` holds; panics with the last
/// read and the demo's output after [`WAIT`].
fn wait_for(b: &mut Browser, demo: &mut Demo, what: &str, cond: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + WAIT;
    loop {
        let v = read(b);
        if cond(&v) {
            return v;
        }
        while let Ok(l) = demo.lines.try_recv() {
            demo.out.push(l);
        }
        assert!(
            Instant::now() < end,
            "timed out after {WAIT:?} waiting for {what}; the page shows:\n{v:#}\nthe demo printed:\n{}",
            demo.out.join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// Every gauge in `list` shows a rate above zero, in its number and data.
fn all_live(list: &Value) -> bool {
    list.as_array().is_some_and(|a| {
        !a.is_empty()
            && a.iter().all(|g| {
                ["mpps", "gbps", "shown_mpps", "shown_gbps"]
                    .iter()
                    .all(|k| f(&g[*k]) > 0.0)
            })
    })
}

fn names(list: &Value) -> Vec<String> {
    let mut n: Vec<String> = list
        .as_array()
        .map(|a| {
            a.iter()
                .map(|g| {
                    format!(
                        "{}/{}",
                        g["chain"].as_str().unwrap_or(""),
                        g["name"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    n.sort();
    n
}

/// The page shows run `run` of topology `topology` with live gauges for
/// `vnfs` (chain/VNF) and `chains`.
fn shows(v: &Value, run: u64, topology: &str, vnfs: &[&str], chains: &[&str]) -> bool {
    let d = &v["demo"];
    v["state"] == "live"
        && d["run"].as_u64() == Some(run)
        && d["topology"] == topology
        && names(&v["vnfs"]) == vnfs
        && names(&v["chains"])
            .iter()
            .map(|c| c.split('/').next_back().unwrap_or(""))
            .eq(chains.iter().copied())
        && all_live(&v["vnfs"])
        && all_live(&v["chains"])
}

/// Processes whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(needle) {
                found.push(format!("{}: {c}", e.file_name().to_string_lossy()));
            }
        }
    }
    found
}

#[test]
fn demo_dashboard_follows_the_runs_and_holds() {
    const NAME: &str = "demo_dashboard_follows_the_runs_and_holds";
    let exe = match Browser::find() {
        Ok(exe) => exe,
        Err(why) => {
            nfv_testutil::skip(NAME, &why);
            return;
        }
    };
    let tmp = TempDir::new(TMP_PREFIX, "run");
    let mut b = match Browser::launch(&exe, &tmp.0.join("profile"), &tmp.0.join("chromium.log")) {
        Ok(b) => b,
        Err(e) => {
            nfv_testutil::skip(NAME, &format!("cannot start chromium: {e}"));
            return;
        }
    };
    let t0 = Instant::now();
    let mut demo = Demo::start(&tmp.0.join("demo.stderr"));
    let first = demo.line("first line", |_| true);
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("the first line names no dashboard URL: {first:?}"))
        .to_string();
    b.open(&url).unwrap_or_else(|e| panic!("{e}"));
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"));

    // Run 1: north-south, two chains of one VNF each.
    let ns = wait_for(&mut b, &mut demo, "run 1 (ns) with live gauges", |v| {
        shows(v, 1, "ns", &["ns1/vnf1", "ns2/vnf2"], &["ns1", "ns2"])
    });
    assert_eq!(ns["demo"]["runs"], 2, "{ns:#}");
    let text = ns["demo"]["text"].as_str().unwrap_or("");
    assert!(
        text.contains("north-south") && text.contains("2 VNFs"),
        "{text}"
    );
    save_screenshot(&mut b, shots, "demo-dashboard-ns.png");

    // Run 2: east-west, one chain of two VNFs, on another node; then held.
    let ew = wait_for(
        &mut b,
        &mut demo,
        "run 2 (ew) held, with live gauges",
        |v| shows(v, 2, "ew", &["ew/vnf1", "ew/vnf2"], &["ew"]) && v["demo"]["phase"] == "holding",
    );
    assert_ne!(
        ew["demo"]["node"], ns["demo"]["node"],
        "the page kept the first node"
    );
    assert_eq!(ew["demo"]["done"], 2, "finished runs listed: {ew:#}");
    assert_eq!(
        ew["errors"],
        serde_json::json!([]),
        "panels failed to render"
    );
    save_screenshot(&mut b, shots, "demo-dashboard-ew-hold.png");
    println!(
        "demo page: ns vnf Mpps {:?}, ew vnf Mpps {:?}, after {:.1} s",
        ns["vnfs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| f(&g["mpps"]))
            .collect::<Vec<_>>(),
        ew["vnfs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| f(&g["mpps"]))
            .collect::<Vec<_>>(),
        t0.elapsed().as_secs_f64()
    );

    // Still held a second later; then SIGINT ends it cleanly.
    demo.line("the hold line", |l| l.starts_with("holding "));
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        matches!(demo.child.try_wait(), Ok(None)),
        "the demo did not hold"
    );
    let dir = std::env::temp_dir().join(format!("nfvswitch-demo-{}", demo.pid()));
    assert!(dir.exists(), "{} missing while held", dir.display());
    demo.signal(nix::sys::signal::Signal::SIGINT);
    let status = demo.wait(Duration::from_secs(20));
    let out = demo.out.join("\n");
    assert!(
        status.is_some_and(|s| s.success()),
        "exit {status:?}; output:\n{out}"
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
    let left = processes_naming(&format!("{}/", dir.display()));
    assert!(left.is_empty(), "VNF processes left: {left:?}");

    // The PMU explanation ("unsupported ...: reason") at most once.
    let notes: Vec<&str> = out
        .lines()
        .filter(|l| l.trim_start().starts_with("unsupported "))
        .collect();
    let mut distinct = notes.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(notes.len(), distinct.len(), "PMU notes repeated:\n{out}");
    assert_eq!(
        out.matches("PMU (over").count(),
        2,
        "PMU figures per run:\n{out}"
    );
    let ex = b.exceptions();
    assert!(ex.is_empty(), "uncaught exceptions in the page: {ex:#?}");
    println!("demo with dashboard: {:.1} s", t0.elapsed().as_secs_f64());
}
