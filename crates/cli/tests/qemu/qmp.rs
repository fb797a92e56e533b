//! A QMP client for the migration test: QEMU's JSON monitor on a unix
//! socket, one command at a time. Asynchronous events (lines with an
//! `"event"` key) are kept aside, not mistaken for a command's answer.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// Events received so far, oldest first.
    pub events: Vec<Value>,
}

/// What QEMU answered: its `return`, or its error's `desc` (`class` in
/// front) as the error.
pub type Answer = Result<Value, String>;

impl Qmp {
    /// Connects once QEMU has made the socket, reads the greeting and
    /// leaves capabilities negotiation mode (`qmp_capabilities`).
    pub fn connect(path: &Path, timeout: Duration) -> Result<Qmp, String> {
        let deadline = Instant::now() + timeout;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(format!("QMP socket {}: {e}", path.display()));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .map_err(|e| e.to_string())?;
        let writer = stream.try_clone().map_err(|e| e.to_string())?;
        let mut qmp = Qmp {
            reader: BufReader::new(stream),
            writer,
            events: Vec::new(),
        };
        // QEMU may write an event on a fresh connection before the
        // greeting (a destination's MIGRATION "setup" as it starts).
        loop {
            let m = qmp.read_message(deadline)?;
            if m.get("QMP").is_some() {
                break;
            }
            if m.get("event").is_none() {
                return Err(format!("not a QMP greeting: {m}"));
            }
            qmp.events.push(m);
        }
        qmp.execute("qmp_capabilities", json!({}))?
            .map_err(|e| format!("qmp_capabilities: {e}"))?;
        Ok(qmp)
    }

    /// Runs `command` with `arguments`; the outer error is the connection
    /// failing (QEMU gone, no answer in 30 s), the inner one QEMU's refusal.
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Answer, String> {
        let msg = json!({ "execute": command, "arguments": arguments });
        let line = format!("{msg}\n");
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| format!("QMP {command}: write: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = self
                .read_message(deadline)
                .map_err(|e| format!("QMP {command}: {e}"))?;
            if m.get("event").is_some() {
                self.events.push(m);
                continue;
            }
            if let Some(r) = m.get("return") {
                return Ok(Ok(r.clone()));
            }
            if let Some(e) = m.get("error") {
                return Ok(Err(format!(
                    "{}: {}",
                    e["class"].as_str().unwrap_or("?"),
                    e["desc"].as_str().unwrap_or("?")
                )));
            }
            return Err(format!("QMP {command}: unexpected message {m}"));
        }
    }

    /// [`Qmp::execute`] where a refusal is an error too.
    pub fn run(&mut self, command: &str, arguments: Value) -> Result<Value, String> {
        self.execute(command, arguments)?
            .map_err(|e| format!("QMP {command} refused: {e}"))
    }

    fn read_message(&mut self, deadline: Instant) -> Result<Value, String> {
        let mut line = String::new();
        loop {
            match self.reader.read_line(&mut line) {
                Ok(0) => return Err("QMP connection closed (QEMU gone?)".into()),
                Ok(_) if line.ends_with('\n') => {
                    return serde_json::from_str(&line)
                        .map_err(|e| format!("bad QMP message {line:?}: {e}"));
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("QMP read: {e}")),
            }
            if Instant::now() >= deadline {
                return Err(format!("no QMP message in time; partial: {line:?}"));
            }
        }
    }
}
