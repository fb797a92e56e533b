//! The serial shell of a QEMU guest: commands written to its second
//! serial port, output read back up to a numbered end marker.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// The readiness probe. No quotes, backslashes, parentheses or operators:
/// whatever prefix of it the guest loses (see [`Console::wait_ready`]),
/// the rest is a complete simple command, so the shell is never left
/// waiting for the end of a quoted string or a compound command. (The
/// earlier probe, `echo NFV''READY`, left the shell inside a quoted string
/// for good when the first byte it read was the second quote: every later
/// probe then added two quotes more.)
const PROBE: &str = "echo NFV  READY\n";
/// What `echo` makes of [`PROBE`]: its two words joined by one space. Not
/// in the probe itself (two spaces), so a tty echo of the probe does not
/// match, nor in "sh: NFV: not found" for a probe that lost its `echo `.
const PROBE_ANSWER: &str = "NFV READY";

/// The guest's shell on a serial port. Every command runs with stdin from
/// /dev/null (so nothing it starts eats the next command) and ends with a
/// numbered marker carrying its exit status; every read has a deadline.
/// Commands run in a subshell: state (variables, `cd`) does not carry
/// over, and background jobs must send their output to files.
pub struct Console {
    stream: Option<UnixStream>,
    buf: String,
    next_id: u64,
}

impl Console {
    pub(super) fn unconnected() -> Console {
        Console {
            stream: None,
            buf: String::new(),
            next_id: 1,
        }
    }

    /// Connects to QEMU's serial socket once QEMU has made it.
    pub(super) fn connect(
        path: &Path,
        deadline: Instant,
        qemu: &mut Child,
    ) -> Result<Console, String> {
        loop {
            if let Ok(s) = UnixStream::connect(path) {
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .map_err(|e| e.to_string())?;
                s.set_write_timeout(Some(Duration::from_secs(5)))
                    .map_err(|e| e.to_string())?;
                let mut c = Console::unconnected();
                c.stream = Some(s);
                return Ok(c);
            }
            if let Ok(Some(st)) = qemu.try_wait() {
                return Err(format!("QEMU exited at start ({st})"));
            }
            if Instant::now() >= deadline {
                return Err(format!("no serial socket {} from QEMU", path.display()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the shell: a probe every 2 s until one is answered, then
    /// one numbered command so that later reads start clean.
    ///
    /// The probes sent while the guest boots pile up in QEMU's socket and
    /// UART, and the guest drops an arbitrary part of them: every first
    /// open of ttyS1 (init's `stty`, then the shell) clears the UART's
    /// FIFO and reads its receive register, and closing the port after
    /// `stty` discards what the tty had buffered. So the shell starts
    /// reading at any byte of a probe, and [`PROBE`] must be such that any
    /// tail of it, followed by whole probes, still gets an answer (see the
    /// test `probe_survives_any_lost_prefix`).
    pub(super) fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        let started = Instant::now();
        let mut probes = 0u32;
        let mut next_probe = started;
        loop {
            if Instant::now() >= next_probe {
                self.send(PROBE)?;
                probes += 1;
                next_probe = Instant::now() + Duration::from_secs(2);
            }
            self.fill(next_probe.min(deadline))?;
            if self.buf.contains(PROBE_ANSWER) {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the guest's shell answered none of {probes} probes in {:.0} s; serial said: {:?}",
                    started.elapsed().as_secs_f64(),
                    self.tail()
                ));
            }
        }
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(5));
        self.run("true", left).map(|_| ())
    }

    /// Runs `cmd` and returns (exit status, output) or an error on timeout.
    pub fn run(&mut self, cmd: &str, timeout: Duration) -> Result<(i32, String), String> {
        let id = self.next_id;
        self.next_id += 1;
        let marker = format!("NFVEND{id} ");
        // A subshell: `exit` ends the command, not the guest's shell.
        self.send(&format!(
            "( {cmd}\n) </dev/null 2>&1; echo NFV''END{id} $?\n"
        ))?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.buf.find(&marker) {
                let rest = &self.buf[at + marker.len()..];
                if let Some(nl) = rest.find('\n') {
                    let status = rest[..nl].trim().parse().unwrap_or(-1);
                    let out = self.buf[..at].replace('\r', "");
                    self.buf = rest[nl + 1..].to_string();
                    return Ok((status, out));
                }
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "`{cmd}`: no answer within {timeout:?}; got {:?}",
                    self.tail()
                ));
            }
            self.fill(deadline)?;
        }
    }

    /// Runs `cmd`; a non-zero exit status is an error with the output.
    pub fn ok(&mut self, cmd: &str, timeout: Duration) -> Result<String, String> {
        match self.run(cmd, timeout)? {
            (0, out) => Ok(out),
            (st, out) => Err(format!("`{cmd}` exited {st}: {}", out.trim())),
        }
    }

    fn send(&mut self, s: &str) -> Result<(), String> {
        let stream = self.stream.as_mut().ok_or("console not connected")?;
        stream
            .write_all(s.as_bytes())
            .map_err(|e| format!("serial write: {e}"))
    }

    /// Reads what is there (up to ~100 ms, never past `until`).
    fn fill(&mut self, until: Instant) -> Result<(), String> {
        let stream = self.stream.as_mut().ok_or("console not connected")?;
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => return Err("the serial socket closed (QEMU gone?)".into()),
                Ok(n) => self.buf.push_str(&String::from_utf8_lossy(&chunk[..n])),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(());
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("serial read: {e}")),
            }
            if Instant::now() >= until {
                return Ok(());
            }
        }
    }

    fn tail(&self) -> &str {
        let start = self.buf.len().saturating_sub(400);
        let start = (start..self.buf.len())
            .find(|&i| self.buf.is_char_boundary(i))
            .unwrap_or(0);
        &self.buf[start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Every tail of the probe, followed by whole probes, gets an answer from
    /// a shell (the guest's busybox sh where the host has busybox): the
    /// guest's shell may start reading at any byte of the probes sent while
    /// it booted.
    #[test]
    fn probe_survives_any_lost_prefix() {
        let shell: &[&str] = if Path::new("/bin/busybox").exists() {
            &["/bin/busybox", "sh"]
        } else {
            &["sh"]
        };
        for cut in 0..PROBE.len() {
            let input = format!("{}{PROBE}{PROBE}", &PROBE[cut..]);
            let mut child = Command::new(shell[0])
                .args(&shell[1..])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("run sh");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("write to sh");
            let out = child.wait_with_output().expect("sh output");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            // Only the echo's output carries the answer, never a "not found".
            let answers = text.lines().filter(|l| l.contains(PROBE_ANSWER));
            assert!(
                answers.clone().all(|l| l == PROBE_ANSWER),
                "probe input {input:?}: sh said {text:?}"
            );
            let want = if cut == 0 { 3 } else { 2 };
            assert_eq!(
                answers.count(),
                want,
                "probe input {input:?} (first {cut} bytes lost): sh said {text:?}"
            );
        }
    }
}
