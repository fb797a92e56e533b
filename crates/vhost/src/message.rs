//! vhost-user messages as bytes: the 12-byte header, the payload of every
//! request the port understands, and the replies it sends. Pure functions
//! over byte slices: no I/O, no `unsafe`, no panics on any input (the
//! `vhost_messages` fuzz target and the conformance table drive them).
//!
//! Layout (vhost-user spec, "Message Specification"): a header of three
//! little-endian `u32` — request, flags, payload size — then `size` bytes
//! of payload; file descriptors travel as `SCM_RIGHTS` with the header.
//! Flags: bits 0–1 the version (always 1), bit 2 marks a reply, bit 3 asks
//! for a reply (`REPLY_ACK`).
//!
//! Decoding is strict about what it needs and lenient about what it does
//! not: a payload shorter than its request's fixed part is an error, a
//! longer one is accepted (QEMU pads some messages to a union's size), and
//! the number of fds must be what the request carries.

use std::os::fd::OwnedFd;

/// Header bytes before the payload.
pub const HEADER_LEN: usize = 12;
/// Largest payload accepted. The longest request the port understands is
/// SET_MEM_TABLE with 8 regions (8 + 8 × 32 = 264 bytes); a frontend can
/// still send requests we do not use (SET_CONFIG: up to 256 + 12 bytes), so
/// this leaves room for those to be read and refused without ending the
/// connection, while a hostile size cannot make us buffer much.
pub const MAX_PAYLOAD: usize = 4096;
/// Most file descriptors accepted with one message (SET_MEM_TABLE's limit).
pub const MAX_FDS: usize = 8;
/// Most regions in one memory table.
pub const MAX_REGIONS: usize = 8;

const VERSION: u32 = 0x1;
const VERSION_MASK: u32 = 0x3;
const FLAG_REPLY: u32 = 0x4;
const FLAG_NEED_REPLY: u32 = 0x8;
/// In the u64 of SET_VRING_KICK/CALL/ERR: bits 0–7 the vring, bit 8 set
/// when no fd comes with the message.
const VRING_INDEX_MASK: u64 = 0xff;
const VRING_NOFD: u64 = 0x100;

/// Request codes (vhost-user spec, "Front-end message types").
pub mod code {
    pub const GET_FEATURES: u32 = 1;
    pub const SET_FEATURES: u32 = 2;
    pub const SET_OWNER: u32 = 3;
    pub const RESET_OWNER: u32 = 4;
    pub const SET_MEM_TABLE: u32 = 5;
    pub const SET_LOG_BASE: u32 = 6;
    pub const SET_LOG_FD: u32 = 7;
    pub const SET_VRING_NUM: u32 = 8;
    pub const SET_VRING_ADDR: u32 = 9;
    pub const SET_VRING_BASE: u32 = 10;
    pub const GET_VRING_BASE: u32 = 11;
    pub const SET_VRING_KICK: u32 = 12;
    pub const SET_VRING_CALL: u32 = 13;
    pub const SET_VRING_ERR: u32 = 14;
    pub const GET_PROTOCOL_FEATURES: u32 = 15;
    pub const SET_PROTOCOL_FEATURES: u32 = 16;
    pub const GET_QUEUE_NUM: u32 = 17;
    pub const SET_VRING_ENABLE: u32 = 18;
    pub const SEND_RARP: u32 = 19;
    pub const NET_SET_MTU: u32 = 20;
    pub const SET_BACKEND_REQ_FD: u32 = 21;
    pub const GET_CONFIG: u32 = 24;
    pub const GET_INFLIGHT_FD: u32 = 31;
    pub const RESET_DEVICE: u32 = 34;
    pub const GET_MAX_MEM_SLOTS: u32 = 36;
    pub const GET_STATUS: u32 = 40;
}

/// The name of a request code, for logs.
pub fn name(request: u32) -> &'static str {
    const NAMES: [&str; 42] = [
        "NONE",
        "GET_FEATURES",
        "SET_FEATURES",
        "SET_OWNER",
        "RESET_OWNER",
        "SET_MEM_TABLE",
        "SET_LOG_BASE",
        "SET_LOG_FD",
        "SET_VRING_NUM",
        "SET_VRING_ADDR",
        "SET_VRING_BASE",
        "GET_VRING_BASE",
        "SET_VRING_KICK",
        "SET_VRING_CALL",
        "SET_VRING_ERR",
        "GET_PROTOCOL_FEATURES",
        "SET_PROTOCOL_FEATURES",
        "GET_QUEUE_NUM",
        "SET_VRING_ENABLE",
        "SEND_RARP",
        "NET_SET_MTU",
        "SET_BACKEND_REQ_FD",
        "IOTLB_MSG",
        "SET_VRING_ENDIAN",
        "GET_CONFIG",
        "SET_CONFIG",
        "CREATE_CRYPTO_SESSION",
        "CLOSE_CRYPTO_SESSION",
        "POSTCOPY_ADVISE",
        "POSTCOPY_LISTEN",
        "POSTCOPY_END",
        "GET_INFLIGHT_FD",
        "SET_INFLIGHT_FD",
        "GPU_SET_SOCKET",
        "RESET_DEVICE",
        "VRING_KICK",
        "GET_MAX_MEM_SLOTS",
        "ADD_MEM_REG",
        "REM_MEM_REG",
        "SET_STATUS",
        "GET_STATUS",
        "GET_SHARED_OBJECT",
    ];
    NAMES.get(request as usize).copied().unwrap_or("UNKNOWN")
}

/// Whether a request has a reply of its own (sent whatever the flags say).
/// Requests we do not implement but whose frontend waits for an answer are
/// listed too, so that we can end the connection instead of leaving the
/// frontend blocked forever.
pub fn has_own_reply(request: u32) -> bool {
    matches!(
        request,
        code::GET_FEATURES
            | code::GET_VRING_BASE
            | code::GET_PROTOCOL_FEATURES
            | code::GET_QUEUE_NUM
            | code::GET_CONFIG
            | code::GET_INFLIGHT_FD
            | code::GET_MAX_MEM_SLOTS
            | code::GET_STATUS
    )
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub request: u32,
    pub flags: u32,
    pub size: u32,
}

impl Header {
    /// Decodes and checks a header: version 1, not a reply, payload within
    /// [`MAX_PAYLOAD`].
    pub fn parse(b: &[u8; HEADER_LEN]) -> Result<Header, DecodeError> {
        let h = Header {
            request: u32_at(b, 0),
            flags: u32_at(b, 4),
            size: u32_at(b, 8),
        };
        if h.flags & VERSION_MASK != VERSION {
            return Err(DecodeError::Version(h.flags & VERSION_MASK));
        }
        if h.flags & FLAG_REPLY != 0 {
            return Err(DecodeError::ReplyFlag);
        }
        if h.size as usize > MAX_PAYLOAD {
            return Err(DecodeError::TooBig(h.size));
        }
        Ok(h)
    }

    /// The frontend asked for an ack (REPLY_ACK's NEED_REPLY flag).
    pub fn need_reply(&self) -> bool {
        self.flags & FLAG_NEED_REPLY != 0
    }

    pub fn name(&self) -> &'static str {
        name(self.request)
    }
}

/// Why a message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("header version {0} (only 1 exists)")]
    Version(u32),
    #[error("a frontend message carries the reply flag")]
    ReplyFlag,
    #[error("payload of {0} bytes (at most {MAX_PAYLOAD} accepted)")]
    TooBig(u32),
    #[error("{request}: payload of {got} bytes, at least {need} needed")]
    Short {
        request: &'static str,
        need: usize,
        got: usize,
    },
    #[error("{request}: {got} file descriptors, {want} expected")]
    Fds {
        request: &'static str,
        want: usize,
        got: usize,
    },
    #[error("SET_MEM_TABLE: {0} regions (1..={MAX_REGIONS} allowed)")]
    Regions(u32),
    #[error("request {0} ({1}) is not supported")]
    Unsupported(u32, &'static str),
}

impl DecodeError {
    /// Whether the connection can go on after this error: the stream is in
    /// step (a whole message was read) and the frontend is not waiting for
    /// a reply we cannot give.
    pub fn recoverable(&self, header: &Header) -> bool {
        match self {
            DecodeError::Version(_) | DecodeError::ReplyFlag | DecodeError::TooBig(_) => false,
            // A request nobody has defined: whether its frontend waits for
            // an answer is unknowable, so the connection ends rather than
            // leave it blocked.
            DecodeError::Unsupported(_, "UNKNOWN") => false,
            // QEMU waits for a reply to SET_LOG_BASE (with LOG_SHMFD).
            _ if header.request == code::SET_LOG_BASE => false,
            _ => !has_own_reply(header.request),
        }
    }
}

/// One memory region of SET_MEM_TABLE (vhost-user "Memory region
/// description").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub guest_phys_addr: u64,
    pub memory_size: u64,
    pub user_addr: u64,
    pub mmap_offset: u64,
}

/// A request the port acts on, with its payload decoded and its fds taken.
#[derive(Debug)]
pub enum Request {
    GetFeatures,
    SetFeatures(u64),
    SetOwner,
    /// RESET_OWNER and RESET_DEVICE.
    Reset,
    SetMemTable(Vec<Region>, Vec<OwnedFd>),
    SetVringNum {
        index: u32,
        num: u32,
    },
    SetVringAddr {
        index: u32,
        desc: u64,
        used: u64,
        avail: u64,
    },
    SetVringBase {
        index: u32,
        base: u32,
    },
    GetVringBase {
        index: u32,
    },
    /// SET_VRING_KICK, SET_VRING_CALL and SET_VRING_ERR; `fd` is `None`
    /// when the frontend set the no-fd bit (polling).
    SetVringFd {
        kind: VringFd,
        index: u32,
        fd: Option<OwnedFd>,
    },
    GetProtocolFeatures,
    SetProtocolFeatures(u64),
    GetQueueNum,
    SetVringEnable {
        index: u32,
        enable: bool,
    },
    /// SET_BACKEND_REQ_FD: accepted and closed (no backend-initiated
    /// requests are offered).
    BackendReqFd,
    /// SET_LOG_BASE: the dirty log, `size` bytes at `offset` in `fd`
    /// (with LOG_SHMFD; without it there is no fd and nothing we can map).
    SetLogBase {
        size: u64,
        offset: u64,
        fd: Option<OwnedFd>,
    },
    /// SET_LOG_FD: an eventfd for log-change notices we never send;
    /// accepted and closed.
    SetLogFd,
    /// SEND_RARP: announce this MAC from here (the guest just migrated in).
    SendRarp([u8; 6]),
    /// NET_SET_MTU: the MTU the frontend gave its guest.
    NetSetMtu(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VringFd {
    Kick,
    Call,
    Err,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

fn need(h: &Header, payload: &[u8], n: usize) -> Result<(), DecodeError> {
    if payload.len() < n {
        Err(DecodeError::Short {
            request: h.name(),
            need: n,
            got: payload.len(),
        })
    } else {
        Ok(())
    }
}

fn fds_exactly(h: &Header, fds: &[OwnedFd], want: usize) -> Result<(), DecodeError> {
    if fds.len() != want {
        Err(DecodeError::Fds {
            request: h.name(),
            want,
            got: fds.len(),
        })
    } else {
        Ok(())
    }
}

/// Decodes one request. `fds` are those that came with it; any not used
/// by the request are closed when this returns (they are dropped).
pub fn decode(h: &Header, payload: &[u8], fds: Vec<OwnedFd>) -> Result<Request, DecodeError> {
    use code::*;
    let state = |h: &Header| -> Result<(u32, u32), DecodeError> {
        need(h, payload, 8)?;
        Ok((u32_at(payload, 0), u32_at(payload, 4)))
    };
    let value = |h: &Header| -> Result<u64, DecodeError> {
        need(h, payload, 8)?;
        Ok(u64_at(payload, 0))
    };
    let no_fds = |h: &Header, fds: &[OwnedFd]| fds_exactly(h, fds, 0);
    let req = match h.request {
        GET_FEATURES => Request::GetFeatures,
        SET_FEATURES => Request::SetFeatures(value(h)?),
        SET_OWNER => Request::SetOwner,
        RESET_OWNER | RESET_DEVICE => Request::Reset,
        SET_MEM_TABLE => return decode_mem_table(h, payload, fds),
        SET_VRING_NUM => {
            let (index, num) = state(h)?;
            Request::SetVringNum { index, num }
        }
        SET_VRING_ADDR => decode_vring_addr(h, payload)?,
        SET_VRING_BASE => {
            let (index, base) = state(h)?;
            Request::SetVringBase { index, base }
        }
        GET_VRING_BASE => Request::GetVringBase { index: state(h)?.0 },
        SET_VRING_KICK | SET_VRING_CALL | SET_VRING_ERR => {
            return decode_vring_fd(h, payload, fds);
        }
        GET_PROTOCOL_FEATURES => Request::GetProtocolFeatures,
        SET_PROTOCOL_FEATURES => Request::SetProtocolFeatures(value(h)?),
        GET_QUEUE_NUM => Request::GetQueueNum,
        SET_VRING_ENABLE => {
            let (index, num) = state(h)?;
            Request::SetVringEnable {
                index,
                enable: num != 0,
            }
        }
        SET_BACKEND_REQ_FD => {
            fds_exactly(h, &fds, 1)?;
            return Ok(Request::BackendReqFd);
        }
        SET_LOG_BASE => return decode_log_base(h, payload, fds),
        SET_LOG_FD => {
            fds_exactly(h, &fds, 1)?;
            return Ok(Request::SetLogFd);
        }
        SEND_RARP => {
            need(h, payload, 8)?;
            let mut mac = [0u8; 6];
            mac.copy_from_slice(&payload[..6]);
            Request::SendRarp(mac)
        }
        NET_SET_MTU => {
            need(h, payload, 8)?;
            Request::NetSetMtu(u64_at(payload, 0))
        }
        other => return Err(DecodeError::Unsupported(other, name(other))),
    };
    no_fds(h, &fds)?;
    Ok(req)
}

/// SET_VRING_ADDR: index, flags, then desc, used, avail, log (u64 each).
fn decode_vring_addr(h: &Header, payload: &[u8]) -> Result<Request, DecodeError> {
    need(h, payload, 40)?;
    Ok(Request::SetVringAddr {
        index: u32_at(payload, 0),
        desc: u64_at(payload, 8),
        used: u64_at(payload, 16),
        avail: u64_at(payload, 24),
    })
}

/// SET_VRING_KICK, SET_VRING_CALL, SET_VRING_ERR: the vring index and,
/// unless `VRING_NOFD` is set, one fd.
fn decode_vring_fd(
    h: &Header,
    payload: &[u8],
    mut fds: Vec<OwnedFd>,
) -> Result<Request, DecodeError> {
    use code::*;
    need(h, payload, 8)?;
    let v = u64_at(payload, 0);
    let kind = match h.request {
        SET_VRING_KICK => VringFd::Kick,
        SET_VRING_CALL => VringFd::Call,
        _ => VringFd::Err,
    };
    let index = (v & VRING_INDEX_MASK) as u32;
    let fd = if v & VRING_NOFD != 0 {
        fds_exactly(h, &fds, 0)?;
        None
    } else {
        fds_exactly(h, &fds, 1)?;
        fds.pop()
    };
    Ok(Request::SetVringFd { kind, index, fd })
}

/// SET_LOG_BASE: mmap_size, mmap_offset (VhostUserLog); the fd with
/// LOG_SHMFD.
fn decode_log_base(
    h: &Header,
    payload: &[u8],
    mut fds: Vec<OwnedFd>,
) -> Result<Request, DecodeError> {
    need(h, payload, 16)?;
    if fds.len() > 1 {
        fds_exactly(h, &fds, 1)?;
    }
    Ok(Request::SetLogBase {
        size: u64_at(payload, 0),
        offset: u64_at(payload, 8),
        fd: fds.pop(),
    })
}

fn decode_mem_table(h: &Header, payload: &[u8], fds: Vec<OwnedFd>) -> Result<Request, DecodeError> {
    need(h, payload, 8)?;
    let n = u32_at(payload, 0);
    if n == 0 || n as usize > MAX_REGIONS {
        return Err(DecodeError::Regions(n));
    }
    let n = n as usize;
    need(h, payload, 8 + 32 * n)?;
    fds_exactly(h, &fds, n)?;
    let regions = (0..n)
        .map(|i| {
            let o = 8 + 32 * i;
            Region {
                guest_phys_addr: u64_at(payload, o),
                memory_size: u64_at(payload, o + 8),
                user_addr: u64_at(payload, o + 16),
                mmap_offset: u64_at(payload, o + 24),
            }
        })
        .collect();
    Ok(Request::SetMemTable(regions, fds))
}

/// A reply: the request's header with the reply flag, and `payload`.
pub fn reply(request: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(HEADER_LEN + payload.len());
    v.extend_from_slice(&request.to_le_bytes());
    v.extend_from_slice(&(VERSION | FLAG_REPLY).to_le_bytes());
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// A reply carrying one u64 (features, queue count, REPLY_ACK status).
pub fn reply_u64(request: u32, value: u64) -> Vec<u8> {
    reply(request, &value.to_le_bytes())
}

/// A reply carrying a vring state (GET_VRING_BASE).
pub fn reply_state(request: u32, index: u32, num: u32) -> Vec<u8> {
    let mut p = [0u8; 8];
    p[..4].copy_from_slice(&index.to_le_bytes());
    p[4..].copy_from_slice(&num.to_le_bytes());
    reply(request, &p)
}

/// Encodes a frontend message (tests, fuzz seeds and the conformance
/// table build streams with it).
pub fn encode(request: u32, need_reply: bool, payload: &[u8]) -> Vec<u8> {
    let flags = VERSION | if need_reply { FLAG_NEED_REPLY } else { 0 };
    let mut v = Vec::with_capacity(HEADER_LEN + payload.len());
    v.extend_from_slice(&request.to_le_bytes());
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(request: u32, flags: u32, size: u32) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&request.to_le_bytes());
        b[4..8].copy_from_slice(&flags.to_le_bytes());
        b[8..].copy_from_slice(&size.to_le_bytes());
        b
    }

    fn memfd() -> OwnedFd {
        use std::os::fd::FromRawFd;
        // SAFETY: memfd_create with a valid C string; on success the fd is
        // new and owned by nobody else.
        let fd = unsafe { libc::memfd_create(c"t".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: `fd` is a fresh, open descriptor.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    #[test]
    fn headers() {
        let table: [([u8; 12], Result<Header, DecodeError>); 5] = [
            (
                hdr(1, 1, 0),
                Ok(Header {
                    request: 1,
                    flags: 1,
                    size: 0,
                }),
            ),
            (hdr(1, 0, 0), Err(DecodeError::Version(0))),
            (hdr(1, 2, 0), Err(DecodeError::Version(2))),
            (hdr(1, 5, 0), Err(DecodeError::ReplyFlag)),
            (hdr(5, 1, 5000), Err(DecodeError::TooBig(5000))),
        ];
        for (bytes, want) in table {
            assert_eq!(Header::parse(&bytes), want, "{bytes:?}");
        }
        assert!(Header::parse(&hdr(2, 9, 8)).unwrap().need_reply());
    }

    #[test]
    fn payload_checks() {
        let h = |r, s| Header {
            request: r,
            flags: 1,
            size: s,
        };
        // (request, payload length, fds, Ok or the error's text start)
        let table: [(u32, usize, usize, Result<(), &str>); 12] = [
            (code::GET_FEATURES, 0, 0, Ok(())),
            (code::SET_FEATURES, 8, 0, Ok(())),
            (code::SET_FEATURES, 4, 0, Err("SET_FEATURES: payload of 4")),
            (code::SET_FEATURES, 8, 1, Err("SET_FEATURES: 1 file")),
            (code::SET_VRING_ADDR, 40, 0, Ok(())),
            (code::SET_VRING_ADDR, 39, 0, Err("SET_VRING_ADDR: payload")),
            (code::SET_VRING_ENABLE, 8, 0, Ok(())),
            (code::SET_VRING_ENABLE, 12, 0, Ok(())),
            (code::GET_VRING_BASE, 7, 0, Err("GET_VRING_BASE: payload")),
            (code::SET_BACKEND_REQ_FD, 0, 1, Ok(())),
            (code::SET_BACKEND_REQ_FD, 0, 0, Err("SET_BACKEND_REQ_FD: 0")),
            (99, 0, 0, Err("request 99 (UNKNOWN)")),
        ];
        for (req, len, nfds, want) in table {
            let fds = (0..nfds).map(|_| memfd()).collect();
            let got = decode(&h(req, len as u32), &vec![0u8; len], fds);
            match (got, want) {
                (Ok(_), Ok(())) => {}
                (Err(e), Err(prefix)) => assert!(
                    e.to_string().starts_with(prefix),
                    "{req}: {e} does not start with {prefix}"
                ),
                (got, want) => panic!("{req} len {len} fds {nfds}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn vring_fd_flags() {
        let h = Header {
            request: code::SET_VRING_CALL,
            flags: 1,
            size: 8,
        };
        let r = decode(&h, &(3u64 | VRING_NOFD).to_le_bytes(), vec![]).unwrap();
        assert!(matches!(
            r,
            Request::SetVringFd {
                kind: VringFd::Call,
                index: 3,
                fd: None
            }
        ));
        let r = decode(&h, &5u64.to_le_bytes(), vec![memfd()]).unwrap();
        assert!(matches!(
            r,
            Request::SetVringFd {
                index: 5,
                fd: Some(_),
                ..
            }
        ));
        assert!(decode(&h, &5u64.to_le_bytes(), vec![]).is_err());
        assert!(decode(&h, &VRING_NOFD.to_le_bytes(), vec![memfd()]).is_err());
    }

    #[test]
    fn mem_table() {
        let h = |s| Header {
            request: code::SET_MEM_TABLE,
            flags: 1,
            size: s,
        };
        let mut p = vec![0u8; 8 + 64];
        p[0] = 2;
        p[8..16].copy_from_slice(&0x1000u64.to_le_bytes());
        p[16..24].copy_from_slice(&0x2000u64.to_le_bytes());
        p[40 + 24..40 + 32].copy_from_slice(&7u64.to_le_bytes());
        match decode(&h(72), &p, vec![memfd(), memfd()]).unwrap() {
            Request::SetMemTable(r, fds) => {
                assert_eq!(fds.len(), 2);
                assert_eq!(r[0].guest_phys_addr, 0x1000);
                assert_eq!(r[0].memory_size, 0x2000);
                assert_eq!(r[1].mmap_offset, 7);
            }
            other => panic!("{other:?}"),
        }
        assert!(decode(&h(72), &p, vec![memfd()]).is_err());
        assert!(decode(&h(40), &p[..40], vec![memfd(), memfd()]).is_err());
        p[0] = 9;
        assert_eq!(
            decode(&h(72), &p, vec![]).unwrap_err(),
            DecodeError::Regions(9)
        );
    }

    #[test]
    fn replies() {
        let r = reply_u64(code::GET_FEATURES, 0x1234);
        assert_eq!(&r[..4], &1u32.to_le_bytes());
        assert_eq!(&r[4..8], &5u32.to_le_bytes());
        assert_eq!(&r[8..12], &8u32.to_le_bytes());
        assert_eq!(&r[12..], &0x1234u64.to_le_bytes());
        let s = reply_state(code::GET_VRING_BASE, 1, 77);
        assert_eq!(&s[12..16], &1u32.to_le_bytes());
        assert_eq!(&s[16..20], &77u32.to_le_bytes());
        let m = encode(code::SET_FEATURES, true, &[0; 8]);
        assert!(
            Header::parse(m[..12].try_into().unwrap())
                .unwrap()
                .need_reply()
        );
    }
}
