//! `pcap`: replay a capture as rx, and/or write tx to a capture file that
//! tshark/tcpdump read (classic pcap, Ethernet, microsecond timestamps).
//!
//! Replay frames are loaded into memory when the port opens (the file is
//! read once, on the control plane), then copied into pool buffers on rx.
//! Capture is a debugging aid, not a fast path: each tx burst takes a
//! mutex (shared by the PMDs' tx queues) and writes through a buffered
//! file that is flushed at most every 100 ms and when the port closes.

use crate::config::PcapConfig;
use crate::{Port, PortGauges, RxQueue, TxQueue};
use nfv_mem::{Batch, PoolCache};
use pcap_file::pcap::PcapReader;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("cannot read capture {path}: {err}")]
    Read { path: String, err: String },
    #[error("capture {path} holds no frames")]
    Empty { path: String },
    #[error("cannot create capture file {path}: {err}")]
    Create { path: String, err: String },
}

/// Reads every frame of a classic pcap file.
pub fn read_frames(path: &Path) -> Result<Vec<Vec<u8>>, PcapError> {
    let err = |e: &dyn std::fmt::Display| PcapError::Read {
        path: path.display().to_string(),
        err: e.to_string(),
    };
    // Not through a symlink: the path may be checked to lie in a
    // directory (`[node] pcap_dir`) and must not be swapped for one after.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| err(&e))?;
    let mut reader = PcapReader::new(std::io::BufReader::new(file)).map_err(|e| err(&e))?;
    let mut frames = Vec::new();
    while let Some(p) = reader.next_packet() {
        frames.push(p.map_err(|e| err(&e))?.data.into_owned());
    }
    if frames.is_empty() {
        return Err(PcapError::Empty {
            path: path.display().to_string(),
        });
    }
    Ok(frames)
}

/// Classic pcap writer (the format is two fixed little-endian headers,
/// so it is written directly rather than through a crate that hides the
/// flush).
struct Capture {
    out: BufWriter<File>,
    last_flush: Instant,
}

impl Capture {
    fn new(file: File) -> std::io::Result<Capture> {
        let mut out = BufWriter::with_capacity(1 << 16, file);
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes()); // magic, microseconds
        h.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&65535u32.to_le_bytes()); // snaplen
        h.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        out.write_all(&h)?;
        out.flush()?;
        Ok(Capture {
            out,
            last_flush: Instant::now(),
        })
    }

    fn write(&mut self, ts: Duration, frame: &[u8]) -> std::io::Result<()> {
        let snap = &frame[..frame.len().min(65535)];
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&(ts.as_secs() as u32).to_le_bytes());
        h[4..8].copy_from_slice(&ts.subsec_micros().to_le_bytes());
        h[8..12].copy_from_slice(&(snap.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(snap)
    }
}

pub struct PcapPort {
    name: String,
    cfg: PcapConfig,
    frames: Arc<[Vec<u8>]>,
    capture: Option<Arc<Mutex<Capture>>>,
    replayed: Arc<AtomicU64>,
    captured: Arc<AtomicU64>,
}

impl PcapPort {
    pub fn new(name: &str, cfg: PcapConfig) -> Result<PcapPort, PcapError> {
        let frames: Arc<[Vec<u8>]> = match &cfg.replay {
            Some(p) => read_frames(p)?.into(),
            None => Arc::from(Vec::new()),
        };
        let capture = match &cfg.capture {
            Some(p) => {
                let err = |e: &dyn std::fmt::Display| PcapError::Create {
                    path: p.display().to_string(),
                    err: e.to_string(),
                };
                // `File::create` without following a symlink (see
                // `read_frames`).
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(p)
                    .map_err(|e| err(&e))?;
                Some(Arc::new(Mutex::new(Capture::new(f).map_err(|e| err(&e))?)))
            }
            None => None,
        };
        Ok(PcapPort {
            name: name.to_string(),
            cfg,
            frames,
            capture,
            replayed: Arc::default(),
            captured: Arc::default(),
        })
    }
}

struct ReplayRx {
    frames: Arc<[Vec<u8>]>,
    next: usize,
    loops_left: u64,
    forever: bool,
    sent: u64,
    rate: Option<(u64, u64, u64)>,
    replayed: Arc<AtomicU64>,
}

impl RxQueue for ReplayRx {
    fn rx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        if self.frames.is_empty() || (!self.forever && self.loops_left == 0) {
            return 0;
        }
        let mut want = batch.remaining_capacity() as u64;
        if let Some((pps, start, hz)) = self.rate {
            let due =
                (nfv_tsc::now().saturating_sub(start) as u128 * pps as u128 / hz as u128) as u64;
            want = want.min(due.saturating_sub(self.sent));
        }
        let mut n = 0;
        while (n as u64) < want {
            let frame = &self.frames[self.next];
            let Some(mut pkt) = pool.alloc() else { break };
            if pkt.set_len(frame.len()).is_err() {
                // Frame bigger than a buffer: skip it rather than truncate.
                pool.free(pkt);
            } else {
                pkt.data_mut().copy_from_slice(frame);
                batch.push(pkt);
                n += 1;
            }
            self.next += 1;
            if self.next == self.frames.len() {
                self.next = 0;
                if !self.forever {
                    self.loops_left -= 1;
                    if self.loops_left == 0 {
                        break;
                    }
                }
            }
        }
        self.sent += n as u64;
        self.replayed.fetch_add(n as u64, Relaxed);
        n
    }
}

struct CaptureTx {
    capture: Option<Arc<Mutex<Capture>>>,
    captured: Arc<AtomicU64>,
}

impl TxQueue for CaptureTx {
    fn tx_burst(&mut self, batch: &mut Batch, pool: &mut PoolCache) -> usize {
        let n = batch.len();
        if let Some(c) = &self.capture {
            let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
            let ts = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or(Duration::ZERO);
            for p in batch.iter() {
                let _ = c.write(ts, p.data());
            }
            if c.last_flush.elapsed() > Duration::from_millis(100) {
                let _ = c.out.flush();
                c.last_flush = Instant::now();
            }
            self.captured.fetch_add(n as u64, Relaxed);
        }
        pool.free_batch(batch);
        n
    }
}

impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn type_name(&self) -> &'static str {
        "pcap"
    }
    fn n_rxq(&self) -> usize {
        1
    }
    fn open_rxq(&self, _q: usize) -> Box<dyn RxQueue> {
        Box::new(ReplayRx {
            frames: self.frames.clone(),
            next: 0,
            loops_left: self.cfg.loops,
            forever: self.cfg.loops == 0,
            sent: 0,
            rate: self
                .cfg
                .rate_pps
                .map(|r| (r.max(1), nfv_tsc::now(), nfv_tsc::hz())),
            replayed: self.replayed.clone(),
        })
    }
    fn open_txq(&self, _q: usize) -> Box<dyn TxQueue> {
        Box::new(CaptureTx {
            capture: self.capture.clone(),
            captured: self.captured.clone(),
        })
    }
    fn gauges(&self) -> PortGauges {
        let path = |p: &Option<std::path::PathBuf>| {
            p.as_ref().map_or("-".into(), |p| p.display().to_string())
        };
        PortGauges::default()
            .with("replay", path(&self.cfg.replay))
            .with("capture", path(&self.cfg.capture))
            .with("replayed", self.replayed.load(Relaxed))
            .with("captured", self.captured.load(Relaxed))
    }
}

impl Drop for PcapPort {
    fn drop(&mut self) {
        if let Some(c) = &self.capture {
            let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
            let _ = c.out.flush();
        }
    }
}
