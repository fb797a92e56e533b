//! The XDP side: an XSKMAP (rx queue index → AF_XDP socket), a built-in
//! six-instruction program that redirects every frame to its queue's
//! socket, and a `bpf_link` attaching it to the interface.
//!
//! No clang and no libbpf: the program is assembled here and loaded with
//! `bpf(BPF_PROG_LOAD)`. It is, in C:
//!
//! ```c
//! SEC("xdp") int nfv_xsk(struct xdp_md *ctx) {
//!     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//!
//! Frames of a queue without a socket (a NIC with more queues than the
//! port's `rxqs`) go to the kernel stack (`XDP_PASS`).
//!
//! Attaching through a link (`BPF_LINK_CREATE`) rather than netlink means
//! the program is detached when the link's fd is closed — when the port is
//! dropped, and also when the switch dies — so nothing stays attached.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

// bpf(2) commands (uapi/linux/bpf.h, `enum bpf_cmd`).
const BPF_MAP_CREATE: libc::c_int = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_int = 2;
const BPF_PROG_LOAD: libc::c_int = 5;
const BPF_LINK_CREATE: libc::c_int = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type`: BPF_XDP.
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
/// `struct xdp_md`: u32 data, data_end, data_meta, ingress_ifindex,
/// rx_queue_index.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

// `XDP_FLAGS_*` (uapi/linux/if_link.h), passed as the link's flags.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// How the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachMode {
    /// In the driver, before an skb exists (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// After the skb is built, for drivers without XDP support
    /// (`XDP_FLAGS_SKB_MODE`); slower, always available.
    Generic,
}

impl AttachMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        }
    }
    fn flags(&self) -> u32 {
        match self {
            AttachMode::Native => XDP_FLAGS_DRV_MODE,
            AttachMode::Generic => XDP_FLAGS_SKB_MODE,
        }
    }
}

/// `struct bpf_insn`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// dst register in the low nibble, src register in the high nibble.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

// Opcodes used (class | size/op | mode/source).
const LDX_MEM_W: u8 = 0x61; // BPF_LDX | BPF_MEM | BPF_W
const LD_IMM_DW: u8 = 0x18; // BPF_LD | BPF_IMM | BPF_DW
const ALU64_MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const JMP_CALL: u8 = 0x85; // BPF_JMP | BPF_CALL
const JMP_EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

/// The redirect program for the XSKMAP with fd `map_fd`.
pub fn program(map_fd: i32) -> [Insn; 6] {
    [
        // r2 = ctx->rx_queue_index
        insn(LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = &xsks (a 16-byte load of the map's fd, resolved by the kernel)
        insn(LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: the action when the queue has no socket
        insn(ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)
        insn(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        insn(JMP_EXIT, 0, 0, 0, 0),
    ]
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    for (d, b) in n.iter_mut().zip(s.bytes().take(15)) {
        *d = b;
    }
    n
}

/// `union bpf_attr` for BPF_MAP_CREATE, up to `map_name`.
#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// `union bpf_attr` for BPF_MAP_UPDATE_ELEM.
#[repr(C)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `union bpf_attr` for BPF_PROG_LOAD, up to `expected_attach_type`.
#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for BPF_LINK_CREATE, the common part.
#[repr(C)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Calls bpf(2) with `attr`; returns the new fd.
///
/// `T` must be the `bpf_attr` layout `cmd` expects (a prefix of the union:
/// the kernel zero-extends it).
fn sys_bpf<T>(cmd: libc::c_int, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, fully initialised repr(C) struct of the
    // size passed; pointers inside it are valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T,
            std::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the commands used here return a new fd we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(r as i32) })
}

/// An XSKMAP: key = rx queue index (u32), value = AF_XDP socket fd.
pub struct XskMap {
    fd: OwnedFd,
}

impl XskMap {
    pub fn new(entries: u32) -> io::Result<XskMap> {
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: entries,
            map_flags: 0,
            inner_map_fd: 0,
            numa_node: 0,
            map_name: name16("nfv_xsks"),
        };
        Ok(XskMap {
            fd: sys_bpf(BPF_MAP_CREATE, &mut attr)?,
        })
    }

    /// Points queue `queue` at socket `sock`.
    pub fn set(&self, queue: u32, sock: BorrowedFd<'_>) -> io::Result<()> {
        let key = queue;
        let value = sock.as_raw_fd() as u32;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0, // BPF_ANY
        };
        // SAFETY: `attr` and the key/value it points to live across the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_UPDATE_ELEM,
                &mut attr as *mut MapElemAttr,
                std::mem::size_of::<MapElemAttr>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl AsFd for XskMap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Why loading failed, with the verifier's log when it had one.
#[derive(Debug)]
pub struct LoadError {
    pub err: io::Error,
    pub log: String,
}

/// Loads the redirect program for `map`.
pub fn load_program(map: &XskMap) -> Result<OwnedFd, LoadError> {
    let insns = program(map.fd.as_raw_fd());
    let license: &CStr = c"Dual BSD/GPL";
    let load = |log: Option<&mut [u8]>| {
        let (level, size, buf) = match log {
            Some(b) => (1, b.len() as u32, b.as_mut_ptr() as u64),
            None => (0, 0, 0),
        };
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            log_level: level,
            log_size: size,
            log_buf: buf,
            kern_version: 0,
            prog_flags: 0,
            prog_name: name16("nfv_xsk_redir"),
            prog_ifindex: 0,
            expected_attach_type: BPF_XDP,
        };
        // The kernel may answer EAGAIN for a load that would succeed when
        // tried again (seen here under load; libbpf retries it too).
        let mut tries = 5;
        loop {
            match sys_bpf(BPF_PROG_LOAD, &mut attr) {
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) && tries > 1 => {
                    tries -= 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                r => return r,
            }
        }
    };
    match load(None) {
        Ok(fd) => Ok(fd),
        Err(err) if err.raw_os_error() == Some(libc::EPERM) => Err(LoadError {
            err,
            log: String::new(),
        }),
        Err(err) => {
            // Load again with the verifier's log, for the error message.
            // Slow path only: this allocation happens once, on failure.
            let mut buf = vec![0u8; 16 * 1024];
            let _ = load(Some(&mut buf));
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            Err(LoadError {
                err,
                log: String::from_utf8_lossy(&buf[..end]).trim().to_string(),
            })
        }
    }
}

/// An attached program; dropping it detaches the program.
pub struct Link {
    _fd: OwnedFd,
    pub mode: AttachMode,
}

/// Attaches `prog` to interface `ifindex` in `mode`.
pub fn attach(prog: BorrowedFd<'_>, ifindex: u32, mode: AttachMode) -> io::Result<Link> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: mode.flags(),
    };
    Ok(Link {
        _fd: sys_bpf(BPF_LINK_CREATE, &mut attr)?,
        mode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encodes_like_clang_output() {
        // The encoding of the C in the module docs (map fd 5), byte by byte
        // as the eBPF instruction set document lays instructions out.
        let p = program(5);
        let bytes: Vec<[u8; 8]> = p
            .iter()
            .map(|i| {
                let mut b = [0u8; 8];
                b[0] = i.code;
                b[1] = i.regs;
                b[2..4].copy_from_slice(&i.off.to_le_bytes());
                b[4..8].copy_from_slice(&i.imm.to_le_bytes());
                b
            })
            .collect();
        assert_eq!(
            bytes,
            vec![
                [0x61, 0x12, 0x10, 0, 0, 0, 0, 0],
                [0x18, 0x11, 0, 0, 5, 0, 0, 0],
                [0, 0, 0, 0, 0, 0, 0, 0],
                [0xb7, 0x03, 0, 0, 2, 0, 0, 0],
                [0x85, 0, 0, 0, 51, 0, 0, 0],
                [0x95, 0, 0, 0, 0, 0, 0, 0],
            ]
        );
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(std::mem::size_of::<MapCreateAttr>(), 44);
    }
}
