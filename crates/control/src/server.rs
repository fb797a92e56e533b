//! The unix control socket: one JSON request per line, one JSON response
//! per line, any number of requests per connection. A thread per client
//! (clients are few and short-lived); PMD threads are never involved
//! except through `Node`'s typed operations.

use crate::node::Node;
use crate::protocol::{Request, Response};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest request line accepted (a big add-flows batch fits).
const MAX_REQUEST: usize = 16 << 20;

pub struct ControlServer {
    path: PathBuf,
}

impl ControlServer {
    /// Binds `path` (replacing a stale socket file) and serves `node`.
    pub fn start(path: &Path, node: Arc<Node>) -> std::io::Result<ControlServer> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if path.exists() {
            // A live daemon answers; a stale file from a crash does not.
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("{} is in use by a running nfvswitch", path.display()),
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let node = node.clone();
                    let _ = std::thread::Builder::new()
                        .name("control-client".into())
                        .spawn(move || serve(conn, &node));
                }
            })?;
        Ok(ControlServer {
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(conn: UnixStream, node: &Node) {
    let Ok(write_half) = conn.try_clone() else {
        return;
    };
    let mut out = std::io::BufWriter::new(write_half);
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    loop {
        line.clear();
        match std::io::Read::take(&mut reader, MAX_REQUEST as u64 + 1).read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let resp = if line.len() > MAX_REQUEST {
            Response::Error {
                message: format!("request longer than {MAX_REQUEST} bytes"),
            }
        } else {
            match serde_json::from_str::<Request>(&line) {
                Ok(req) => node.handle(&req),
                Err(e) => Response::Error {
                    message: format!("bad request: {e}"),
                },
            }
        };
        let Ok(mut text) = serde_json::to_string(&resp) else {
            return;
        };
        text.push('\n');
        if out
            .write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            return;
        }
        if line.len() > MAX_REQUEST {
            return;
        }
    }
}

/// Client side: sends one request and waits for its response.
pub fn request(path: &Path, req: &Request) -> Result<Response, String> {
    let conn = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach nfvswitch at {}: {e} (is `nfvswitch run` running?)",
            path.display()
        )
    })?;
    let mut w = conn.try_clone().map_err(|e| e.to_string())?;
    let mut text = serde_json::to_string(req).map_err(|e| e.to_string())?;
    text.push('\n');
    w.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(conn)
        .read_line(&mut line)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&line).map_err(|e| format!("bad response from switch: {e}"))
}
