//! A headless Chromium for dashboard tests, driven over the DevTools
//! protocol on a pipe (`--remote-debugging-pipe`: JSON messages ending in
//! NUL on fds 3 and 4, no WebSocket needed). Debian's `chromium`; without
//! it [`Browser::find`] says why, for the caller's SKIPPED line.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for one reply from chromium.
pub const WAIT: Duration = Duration::from_secs(20);

/// A headless chromium with one page attached. Killed (its process group,
/// by id) on drop.
pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: mpsc::Receiver<Value>,
    next_id: u64,
    session: String,
    /// Events seen while waiting for replies.
    events: Vec<Value>,
    log: PathBuf,
}

impl Browser {
    /// The `chromium` on PATH, or why there is none (for a SKIPPED line).
    pub fn find() -> Result<PathBuf, String> {
        crate::which("chromium")
            .ok_or_else(|| "chromium is not installed (apt-get install chromium)".to_string())
    }

    pub fn launch(exe: &Path, profile: &Path, log: &Path) -> std::io::Result<Browser> {
        let mut cmd = Command::new("sh");
        // Chromium reads commands on fd 3 and writes replies on fd 4.
        cmd.arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(exe)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--mute-audio",
                "--window-size=1400,1000",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log)?)
            .process_group(0);
        let mut child = cmd.spawn()?;
        let to = child.stdin.take().expect("stdin");
        let mut out = child.stdout.take().expect("stdout");
        let (tx, from) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = out.read(&mut chunk) {
                if n == 0 {
                    return;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..end])
                        && tx.send(v).is_err()
                    {
                        return;
                    }
                }
            }
        });
        Ok(Browser {
            child,
            to,
            from,
            next_id: 0,
            session: String::new(),
            events: Vec::new(),
            log: log.to_path_buf(),
        })
    }

    /// Sends one command (to the page when `page`, else to the browser)
    /// and waits for its reply.
    pub fn call(&mut self, page: bool, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if page {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to
            .write_all(&bytes)
            .map_err(|e| format!("{method}: writing to chromium: {e}"))?;
        let end = Instant::now() + WAIT;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let v = self.from.recv_timeout(left).map_err(|_| {
                format!(
                    "{method}: no reply from chromium within {WAIT:?}; its log:\n{}",
                    self.log_tail()
                )
            })?;
            if v["id"].as_u64() == Some(id) {
                return match v.get("error") {
                    Some(e) => Err(format!("{method}: {e}")),
                    None => Ok(v["result"].clone()),
                };
            }
            self.events.push(v);
        }
    }

    /// Opens `url` in a new page, attaches to it and sets a 1400×1000
    /// viewport.
    pub fn open(&mut self, url: &str) -> Result<(), String> {
        let t = self.call(false, "Target.createTarget", json!({ "url": url }))?;
        let target = t["targetId"].as_str().ok_or("no targetId")?.to_string();
        let a = self.call(
            false,
            "Target.attachToTarget",
            json!({ "targetId": target, "flatten": true }),
        )?;
        self.session = a["sessionId"].as_str().ok_or("no sessionId")?.to_string();
        self.call(true, "Runtime.enable", json!({}))?;
        self.call(
            true,
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": false }),
        )?;
        Ok(())
    }

    /// Evaluates `expr` in the page and returns its value (as JSON).
    pub fn eval(&mut self, expr: &str) -> Result<Value, String> {
        let r = self.call(
            true,
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(format!("evaluating {expr:?}: {e}"));
        }
        Ok(r["result"]["value"].clone())
    }

    /// Uncaught exceptions the page reported so far.
    pub fn exceptions(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["method"] == "Runtime.exceptionThrown")
            .map(|e| e["params"]["exceptionDetails"].to_string())
            .collect()
    }

    /// The whole page (1400 px wide, as tall as the content).
    pub fn screenshot(&mut self) -> Result<Vec<u8>, String> {
        let m = self.call(true, "Page.getLayoutMetrics", json!({}))?;
        let h = m["cssContentSize"]["height"]
            .as_f64()
            .unwrap_or(1000.0)
            .clamp(600.0, 4000.0);
        let r = self.call(
            true,
            "Page.captureScreenshot",
            json!({
                "format": "png",
                "captureBeyondViewport": true,
                "clip": { "x": 0, "y": 0, "width": 1400, "height": h, "scale": 1 },
            }),
        )?;
        base64_decode(r["data"].as_str().ok_or("no screenshot data")?)
    }

    pub fn log_tail(&self) -> String {
        let s = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = s.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Politely first: chromium then ends and reaps its own children.
        let close = format!(r#"{{"id":{},"method":"Browser.close"}}"#, self.next_id + 1);
        let _ = self
            .to
            .write_all(close.as_bytes())
            .and_then(|()| self.to.write_all(b"\0"));
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of its process group (zygote, renderers), by id.
        let pgid = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let val = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("bad base64 byte {c}")),
        } as u32)
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=' && c != b'\n').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= val(c)? << (18 - 6 * i);
        }
        let n = chunk.len() * 6 / 8;
        out.extend_from_slice(&acc.to_be_bytes()[1..1 + n]);
    }
    Ok(out)
}

/// Checks a PNG's signature and size; returns (width, height).
pub fn png_size(png: &[u8]) -> (u32, u32) {
    assert!(
        png.len() > 24 && png[..8] == *b"\x89PNG\r\n\x1a\n",
        "not a PNG"
    );
    let w = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let h = u32::from_be_bytes(png[20..24].try_into().unwrap());
    (w, h)
}

/// Saves a screenshot of the whole page as `dir/name`, checks it is a
/// real, non-trivial PNG and prints its path.
pub fn save_screenshot(b: &mut Browser, dir: &Path, name: &str) -> PathBuf {
    let png = b.screenshot().unwrap_or_else(|e| panic!("{e}"));
    let (w, h) = png_size(&png);
    assert!(
        w >= 1000 && h >= 700 && png.len() > 20_000,
        "{w}x{h}, {} bytes",
        png.len()
    );
    let shot = dir.join(name);
    std::fs::write(&shot, &png).expect("write screenshot");
    println!(
        "screenshot: {} ({w}x{h}, {} bytes)",
        shot.display(),
        png.len()
    );
    shot
}
