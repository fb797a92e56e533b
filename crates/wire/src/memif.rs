//! memif, the shared-memory packet interface (protocol version 2.0, as
//! FD.io VPP, DPDK `net_memif` and libmemif speak it): the 128-byte control
//! messages of its `SOCK_SEQPACKET` socket ([`MsgRepr`]) and the layout of
//! its rings and descriptors in the shared regions ([`ring`], [`DescRepr`]).
//!
//! Byte order: memif writes its integers in the host's order and every
//! implementation runs on little-endian hosts; this module reads and
//! writes little-endian.
//!
//! Roles: the client (VPP's "slave") creates the regions and rings and
//! sends INIT, ADD_REGION, ADD_RING and CONNECT; the server (VPP's
//! "master") sends HELLO and CONNECTED. The two ring directions are
//! named from the client: C2S (client to server, VPP's "S2M") and S2C.
//!
//! Check order of [`MsgRepr::parse`]: the length (exactly [`MSG_LEN`]:
//! shorter is [`Error::Truncated`], longer [`Error::Malformed`]), then the
//! type (NONE and unknown types are [`Error::Malformed`]). The body is not
//! judged here (versions, ids, indices): the port's protocol code decides
//! and answers with a DISCONNECT reason.

use crate::Field;
use crate::error::{Error, Result};

/// Every control message is exactly this long.
pub const MSG_LEN: usize = 128;
/// `cookie` of every ring header.
pub const COOKIE: u32 = 0x03E3_1F20;
/// Protocol version 2.0 (`major << 8 | minor`), the only one in use.
pub const VERSION: u16 = 0x0200;
/// Bytes of a name field (application or interface name).
pub const NAME_LEN: usize = 32;
/// Bytes of INIT's secret.
pub const SECRET_LEN: usize = 24;
/// Bytes of DISCONNECT's reason text.
pub const REASON_LEN: usize = 96;

/// Byte ranges of the control messages (the body starts after the type).
pub mod field {
    use crate::Field;

    /// Message type (all messages).
    pub const TYPE: Field = 0..2;

    /// HELLO: the server's name (its version string).
    pub const HELLO_NAME: Field = 2..34;
    /// HELLO: lowest protocol version the server speaks.
    pub const HELLO_MIN_VERSION: Field = 34..36;
    /// HELLO: highest protocol version.
    pub const HELLO_MAX_VERSION: Field = 36..38;
    /// HELLO: regions the server takes (a maximum index in practice).
    pub const HELLO_MAX_REGION: Field = 38..40;
    /// HELLO: server-to-client rings (C's `max_m2s_ring`).
    pub const HELLO_MAX_S2C_RING: Field = 40..42;
    /// HELLO: client-to-server rings (C's `max_s2m_ring`).
    pub const HELLO_MAX_C2S_RING: Field = 42..44;
    /// HELLO: largest ring, as log2 of its slots.
    pub const HELLO_MAX_LOG2_RING: usize = 44;

    /// INIT: the client's protocol version.
    pub const INIT_VERSION: Field = 2..4;
    /// INIT: the interface id the client asks for.
    pub const INIT_ID: Field = 4..8;
    /// INIT: interface mode (0 Ethernet, 1 IP, 2 punt/inject).
    pub const INIT_MODE: usize = 8;
    /// INIT: the shared secret (NUL padded).
    pub const INIT_SECRET: Field = 9..33;
    /// INIT: the client's name.
    pub const INIT_NAME: Field = 33..65;

    /// ADD_REGION: region index (regions come as 0, 1, 2, ...).
    pub const REGION_INDEX: Field = 2..4;
    /// ADD_REGION: region size in bytes (the memfd rides along).
    pub const REGION_SIZE: Field = 4..12;

    /// ADD_RING: flags (bit 0: the ring is C2S).
    pub const RING_FLAGS: Field = 2..4;
    /// ADD_RING: ring index within its direction.
    pub const RING_INDEX: Field = 4..6;
    /// ADD_RING: region holding the ring.
    pub const RING_REGION: Field = 6..8;
    /// ADD_RING: offset of the ring header in that region.
    pub const RING_OFFSET: Field = 8..12;
    /// ADD_RING: ring slots as log2.
    pub const RING_LOG2_SIZE: usize = 12;
    /// ADD_RING: private header bytes (always 0).
    pub const RING_PRIVATE_HDR: Field = 13..15;

    /// CONNECT / CONNECTED: the sender's interface name.
    pub const IF_NAME: Field = 2..34;

    /// DISCONNECT: a code (0 in every implementation seen).
    pub const DISCONNECT_CODE: Field = 2..6;
    /// DISCONNECT: the reason, text (NUL padded).
    pub const DISCONNECT_REASON: Field = 6..102;
}

/// Message type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum MsgType {
    /// Acknowledges INIT, ADD_REGION and ADD_RING.
    Ack = 1,
    /// Server → client, first message on a connection.
    Hello = 2,
    /// Client → server: which interface, with which secret.
    Init = 3,
    /// Client → server, with the region's memfd.
    AddRegion = 4,
    /// Client → server, with the ring's eventfd.
    AddRing = 5,
    /// Client → server: set-up done.
    Connect = 6,
    /// Server → client: the interface is up.
    Connected = 7,
    /// Either way: the connection ends, with a reason.
    Disconnect = 8,
}

impl MsgType {
    /// The type of code `v`, if it is one (0, NONE, is not).
    pub const fn from_u16(v: u16) -> Option<MsgType> {
        Some(match v {
            1 => MsgType::Ack,
            2 => MsgType::Hello,
            3 => MsgType::Init,
            4 => MsgType::AddRegion,
            5 => MsgType::AddRing,
            6 => MsgType::Connect,
            7 => MsgType::Connected,
            8 => MsgType::Disconnect,
            _ => return None,
        })
    }

    /// Whether a message of this type carries one file descriptor.
    pub const fn carries_fd(self) -> bool {
        matches!(self, MsgType::AddRegion | MsgType::AddRing)
    }
}

/// A fixed-size text field, NUL padded. Built from longer text it keeps
/// the first `N - 1` bytes (a NUL always ends it, as C peers expect); read
/// from the wire it is everything before the first NUL.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Text<const N: usize>([u8; N]);

/// A name field ([`NAME_LEN`] bytes).
pub type Name = Text<NAME_LEN>;
/// INIT's secret ([`SECRET_LEN`] bytes).
pub type Secret = Text<SECRET_LEN>;
/// DISCONNECT's reason ([`REASON_LEN`] bytes).
pub type Reason = Text<REASON_LEN>;

impl<const N: usize> Text<N> {
    /// The empty text.
    pub const EMPTY: Self = Text([0; N]);

    /// `s`, cut to `N - 1` bytes.
    pub fn new(s: &[u8]) -> Self {
        let mut t = [0; N];
        let n = s.len().min(N - 1);
        t[..n].copy_from_slice(&s[..n]);
        Text(t)
    }

    /// The bytes before the first NUL.
    pub fn as_bytes(&self) -> &[u8] {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(N);
        &self.0[..end]
    }

    /// The text as UTF-8, or `None` if it is not.
    pub fn as_str(&self) -> Option<&str> {
        core::str::from_utf8(self.as_bytes()).ok()
    }

    fn read(b: &[u8]) -> Self {
        let mut t = [0; N];
        t.copy_from_slice(&b[..N]);
        Text(t)
    }
}

impl<const N: usize> core::fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.as_str() {
            Some(s) => write!(f, "{s:?}"),
            None => write!(f, "{:?}", self.as_bytes()),
        }
    }
}

/// Which way a ring carries packets, named from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client → server: the client fills descriptors, the server reads.
    C2s,
    /// Server → client: the client posts empty buffers, the server fills.
    S2c,
}

/// ADD_RING flag: the ring is C2S.
pub const RING_FLAG_C2S: u16 = 1;

/// A control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgRepr {
    /// ACK.
    Ack,
    /// HELLO: what the server takes.
    Hello {
        /// The server's name (its version string).
        name: Name,
        /// Lowest version spoken.
        min_version: u16,
        /// Highest version spoken.
        max_version: u16,
        /// Region limit (peers treat it as a maximum index).
        max_region: u16,
        /// S2C ring limit (a maximum index, as above).
        max_s2c_ring: u16,
        /// C2S ring limit (a maximum index, as above).
        max_c2s_ring: u16,
        /// Largest ring as log2 of its slots.
        max_log2_ring_size: u8,
    },
    /// INIT: the interface the client wants.
    Init {
        /// The client's version.
        version: u16,
        /// Interface id.
        id: u32,
        /// Interface mode (0: Ethernet).
        mode: u8,
        /// Shared secret, empty if none.
        secret: Secret,
        /// The client's name.
        name: Name,
    },
    /// ADD_REGION (the memfd rides along).
    AddRegion {
        /// Region index.
        index: u16,
        /// Size in bytes.
        size: u64,
    },
    /// ADD_RING (the eventfd rides along).
    AddRing {
        /// C2S or S2C.
        direction: Direction,
        /// The flags other than [`RING_FLAG_C2S`], kept as received.
        other_flags: u16,
        /// Ring index within its direction.
        index: u16,
        /// Region holding the ring.
        region: u16,
        /// Offset of the ring header in that region.
        offset: u32,
        /// Slots as log2.
        log2_ring_size: u8,
        /// Private header bytes (0 in every implementation).
        private_hdr_size: u16,
    },
    /// CONNECT: the client's interface name.
    Connect {
        /// Interface name.
        if_name: Name,
    },
    /// CONNECTED: the server's interface name.
    Connected {
        /// Interface name.
        if_name: Name,
    },
    /// DISCONNECT.
    Disconnect {
        /// Code (0 in practice).
        code: u32,
        /// Why.
        reason: Reason,
    },
}

fn le16(b: &[u8], f: Field) -> u16 {
    u16::from_le_bytes([b[f.start], b[f.start + 1]])
}

fn le32(b: &[u8], f: Field) -> u32 {
    let mut v = [0; 4];
    v.copy_from_slice(&b[f]);
    u32::from_le_bytes(v)
}

fn le64(b: &[u8], f: Field) -> u64 {
    let mut v = [0; 8];
    v.copy_from_slice(&b[f]);
    u64::from_le_bytes(v)
}

impl MsgRepr {
    /// The message's type.
    pub fn msg_type(&self) -> MsgType {
        match self {
            MsgRepr::Ack => MsgType::Ack,
            MsgRepr::Hello { .. } => MsgType::Hello,
            MsgRepr::Init { .. } => MsgType::Init,
            MsgRepr::AddRegion { .. } => MsgType::AddRegion,
            MsgRepr::AddRing { .. } => MsgType::AddRing,
            MsgRepr::Connect { .. } => MsgType::Connect,
            MsgRepr::Connected { .. } => MsgType::Connected,
            MsgRepr::Disconnect { .. } => MsgType::Disconnect,
        }
    }

    /// Reads one received message (see the module doc for the checks).
    pub fn parse(b: &[u8]) -> Result<MsgRepr> {
        if b.len() < MSG_LEN {
            return Err(Error::Truncated);
        }
        if b.len() > MSG_LEN {
            return Err(Error::Malformed);
        }
        use field::*;
        let t = MsgType::from_u16(le16(b, TYPE)).ok_or(Error::Malformed)?;
        Ok(match t {
            MsgType::Ack => MsgRepr::Ack,
            MsgType::Hello => MsgRepr::Hello {
                name: Name::read(&b[HELLO_NAME]),
                min_version: le16(b, HELLO_MIN_VERSION),
                max_version: le16(b, HELLO_MAX_VERSION),
                max_region: le16(b, HELLO_MAX_REGION),
                max_s2c_ring: le16(b, HELLO_MAX_S2C_RING),
                max_c2s_ring: le16(b, HELLO_MAX_C2S_RING),
                max_log2_ring_size: b[HELLO_MAX_LOG2_RING],
            },
            MsgType::Init => MsgRepr::Init {
                version: le16(b, INIT_VERSION),
                id: le32(b, INIT_ID),
                mode: b[INIT_MODE],
                secret: Secret::read(&b[INIT_SECRET]),
                name: Name::read(&b[INIT_NAME]),
            },
            MsgType::AddRegion => MsgRepr::AddRegion {
                index: le16(b, REGION_INDEX),
                size: le64(b, REGION_SIZE),
            },
            MsgType::AddRing => {
                let flags = le16(b, RING_FLAGS);
                MsgRepr::AddRing {
                    direction: if flags & RING_FLAG_C2S != 0 {
                        Direction::C2s
                    } else {
                        Direction::S2c
                    },
                    other_flags: flags & !RING_FLAG_C2S,
                    index: le16(b, RING_INDEX),
                    region: le16(b, RING_REGION),
                    offset: le32(b, RING_OFFSET),
                    log2_ring_size: b[RING_LOG2_SIZE],
                    private_hdr_size: le16(b, RING_PRIVATE_HDR),
                }
            }
            MsgType::Connect => MsgRepr::Connect {
                if_name: Name::read(&b[IF_NAME]),
            },
            MsgType::Connected => MsgRepr::Connected {
                if_name: Name::read(&b[IF_NAME]),
            },
            MsgType::Disconnect => MsgRepr::Disconnect {
                code: le32(b, DISCONNECT_CODE),
                reason: Reason::read(&b[DISCONNECT_REASON]),
            },
        })
    }

    /// The message as sent: [`MSG_LEN`] bytes, unused ones zero.
    pub fn emit(&self) -> [u8; MSG_LEN] {
        use field::*;
        let mut b = [0u8; MSG_LEN];
        fn put(b: &mut [u8], f: Field, v: &[u8]) {
            b[f].copy_from_slice(v);
        }
        put(&mut b, TYPE, &(self.msg_type() as u16).to_le_bytes());
        match *self {
            MsgRepr::Ack => {}
            MsgRepr::Hello {
                name,
                min_version,
                max_version,
                max_region,
                max_s2c_ring,
                max_c2s_ring,
                max_log2_ring_size,
            } => {
                put(&mut b, HELLO_NAME, &name.0);
                put(&mut b, HELLO_MIN_VERSION, &min_version.to_le_bytes());
                put(&mut b, HELLO_MAX_VERSION, &max_version.to_le_bytes());
                put(&mut b, HELLO_MAX_REGION, &max_region.to_le_bytes());
                put(&mut b, HELLO_MAX_S2C_RING, &max_s2c_ring.to_le_bytes());
                put(&mut b, HELLO_MAX_C2S_RING, &max_c2s_ring.to_le_bytes());
                b[HELLO_MAX_LOG2_RING] = max_log2_ring_size;
            }
            MsgRepr::Init {
                version,
                id,
                mode,
                secret,
                name,
            } => {
                put(&mut b, INIT_VERSION, &version.to_le_bytes());
                put(&mut b, INIT_ID, &id.to_le_bytes());
                b[INIT_MODE] = mode;
                put(&mut b, INIT_SECRET, &secret.0);
                put(&mut b, INIT_NAME, &name.0);
            }
            MsgRepr::AddRegion { index, size } => {
                put(&mut b, REGION_INDEX, &index.to_le_bytes());
                put(&mut b, REGION_SIZE, &size.to_le_bytes());
            }
            MsgRepr::AddRing {
                direction,
                other_flags,
                index,
                region,
                offset,
                log2_ring_size,
                private_hdr_size,
            } => {
                let flags = match direction {
                    Direction::C2s => other_flags | RING_FLAG_C2S,
                    Direction::S2c => other_flags & !RING_FLAG_C2S,
                };
                put(&mut b, RING_FLAGS, &flags.to_le_bytes());
                put(&mut b, RING_INDEX, &index.to_le_bytes());
                put(&mut b, RING_REGION, &region.to_le_bytes());
                put(&mut b, RING_OFFSET, &offset.to_le_bytes());
                b[RING_LOG2_SIZE] = log2_ring_size;
                put(&mut b, RING_PRIVATE_HDR, &private_hdr_size.to_le_bytes());
            }
            MsgRepr::Connect { if_name } | MsgRepr::Connected { if_name } => {
                put(&mut b, IF_NAME, &if_name.0);
            }
            MsgRepr::Disconnect { code, reason } => {
                put(&mut b, DISCONNECT_CODE, &code.to_le_bytes());
                put(&mut b, DISCONNECT_REASON, &reason.0);
            }
        }
        b
    }
}

/// The ring header and its descriptors in a shared region. A ring at
/// `offset` is [`ring::HEADER_LEN`] bytes of header (cookie, flags and
/// head on the first cache line, tail on the second) followed by
/// 2^log2 descriptors of [`ring::DESC_LEN`] bytes.
pub mod ring {
    use crate::Field;

    /// [`super::COOKIE`].
    pub const COOKIE: Field = 0..4;
    /// Ring flags ([`FLAG_MASK_INT`]).
    pub const FLAGS: Field = 4..6;
    /// Head: written by the ring's producer (the client on both rings:
    /// it fills C2S slots and posts S2C buffers).
    pub const HEAD: Field = 6..8;
    /// Tail: written by the consumer (the server on both rings), on its
    /// own cache line.
    pub const TAIL: Field = 64..66;
    /// Bytes before the first descriptor.
    pub const HEADER_LEN: usize = 128;
    /// Bytes per descriptor.
    pub const DESC_LEN: usize = 16;
    /// Ring flag: the receiver polls; the sender does not signal the
    /// eventfd.
    pub const FLAG_MASK_INT: u16 = 1;
    /// Largest ring DPDK and VPP accept, as log2 of its slots.
    pub const MAX_LOG2_SIZE: u8 = 14;

    /// Bytes of a ring of 2^`log2` slots (header included), or `None`
    /// past [`MAX_LOG2_SIZE`].
    pub const fn len(log2: u8) -> Option<usize> {
        if log2 > MAX_LOG2_SIZE {
            return None;
        }
        Some(HEADER_LEN + DESC_LEN * (1 << log2))
    }

    /// Offset of descriptor `slot` from the ring header.
    pub const fn desc_offset(slot: usize) -> usize {
        HEADER_LEN + DESC_LEN * slot
    }

    /// Descriptor fields.
    pub mod desc {
        use crate::Field;
        /// Flags ([`FLAG_NEXT`]).
        pub const FLAGS: Field = 0..2;
        /// Region of the buffer.
        pub const REGION: Field = 2..4;
        /// Bytes of data (S2C as posted: the buffer's room).
        pub const LENGTH: Field = 4..8;
        /// Buffer offset in its region.
        pub const OFFSET: Field = 8..12;
        /// Metadata (unused by Ethernet mode).
        pub const METADATA: Field = 12..16;
        /// The packet continues in the next slot.
        pub const FLAG_NEXT: u16 = 1;
    }
}

/// A ring descriptor, as read from (or written to) its 16 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DescRepr {
    /// The packet continues in the next slot.
    pub next: bool,
    /// Flags other than NEXT, as read.
    pub other_flags: u16,
    /// Region of the buffer.
    pub region: u16,
    /// Bytes of data, or of room when posted on S2C.
    pub length: u32,
    /// Buffer offset in its region.
    pub offset: u32,
    /// Metadata.
    pub metadata: u32,
}

impl DescRepr {
    /// Reads a descriptor from the first [`ring::DESC_LEN`] bytes of `b`.
    pub fn parse(b: &[u8]) -> Result<DescRepr> {
        use ring::desc::*;
        if b.len() < ring::DESC_LEN {
            return Err(Error::Truncated);
        }
        let flags = le16(b, FLAGS);
        Ok(DescRepr {
            next: flags & FLAG_NEXT != 0,
            other_flags: flags & !FLAG_NEXT,
            region: le16(b, REGION),
            length: le32(b, LENGTH),
            offset: le32(b, OFFSET),
            metadata: le32(b, METADATA),
        })
    }

    /// The descriptor's bytes.
    pub fn emit(&self) -> [u8; ring::DESC_LEN] {
        use ring::desc::*;
        let mut b = [0u8; ring::DESC_LEN];
        let flags = if self.next {
            self.other_flags | FLAG_NEXT
        } else {
            self.other_flags & !FLAG_NEXT
        };
        b[FLAGS].copy_from_slice(&flags.to_le_bytes());
        b[REGION].copy_from_slice(&self.region.to_le_bytes());
        b[LENGTH].copy_from_slice(&self.length.to_le_bytes());
        b[OFFSET].copy_from_slice(&self.offset.to_le_bytes());
        b[METADATA].copy_from_slice(&self.metadata.to_le_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of expected bytes: (offset, bytes); every other byte is 0.
    type Runs = &'static [(usize, &'static [u8])];

    /// (message, its bytes).
    fn cases() -> [(MsgRepr, Runs); 8] {
        [
            (MsgRepr::Ack, &[(0, &[1, 0])]),
            (
                MsgRepr::Hello {
                    name: Name::new(b"nfvswitch"),
                    min_version: VERSION,
                    max_version: VERSION,
                    max_region: 255,
                    max_s2c_ring: 255,
                    max_c2s_ring: 255,
                    max_log2_ring_size: 14,
                },
                &[
                    (0, &[2, 0]),
                    (2, b"nfvswitch"),
                    (34, &[0, 2, 0, 2]),
                    (38, &[255, 0, 255, 0, 255, 0]),
                    (44, &[14]),
                ],
            ),
            (
                MsgRepr::Init {
                    version: VERSION,
                    id: 0x0102_0304,
                    mode: 0,
                    secret: Secret::new(b"s3cr3t"),
                    name: Name::new(b"DPDK 22.11.11"),
                },
                &[
                    (0, &[3, 0]),
                    (2, &[0, 2]),
                    (4, &[4, 3, 2, 1]),
                    (9, b"s3cr3t"),
                    (33, b"DPDK 22.11.11"),
                ],
            ),
            (
                MsgRepr::AddRegion {
                    index: 1,
                    size: 0x0000_0001_0080_0000,
                },
                &[
                    (0, &[4, 0]),
                    (2, &[1, 0]),
                    (4, &[0, 0, 0x80, 0, 1, 0, 0, 0]),
                ],
            ),
            (
                MsgRepr::AddRing {
                    direction: Direction::C2s,
                    other_flags: 0,
                    index: 3,
                    region: 0,
                    offset: 16_512,
                    log2_ring_size: 10,
                    private_hdr_size: 0,
                },
                &[
                    (0, &[5, 0]),
                    (2, &[1, 0]),
                    (4, &[3, 0]),
                    (8, &[0x80, 0x40, 0, 0]),
                    (12, &[10]),
                ],
            ),
            (
                MsgRepr::Connect {
                    if_name: Name::new(b"memif0"),
                },
                &[(0, &[6, 0]), (2, b"memif0")],
            ),
            (
                MsgRepr::Connected {
                    if_name: Name::new(b"nfv0"),
                },
                &[(0, &[7, 0]), (2, b"nfv0")],
            ),
            (
                MsgRepr::Disconnect {
                    code: 0,
                    reason: Reason::new(b"Incorrect secret"),
                },
                &[(0, &[8, 0]), (6, b"Incorrect secret")],
            ),
        ]
    }

    #[test]
    fn messages_are_byte_exact_and_round_trip() {
        for (msg, runs) in cases() {
            let mut want = [0u8; MSG_LEN];
            for &(at, bytes) in runs {
                want[at..at + bytes.len()].copy_from_slice(bytes);
            }
            let got = msg.emit();
            assert_eq!(got, want, "{msg:?}");
            assert_eq!(MsgRepr::parse(&got), Ok(msg));
        }
    }

    /// A DPDK 22.11.11 testpmd `net_memif` client's handshake with a
    /// testpmd server (`role=client,id=7,secret=abc,rsize=10,bsize=2048`),
    /// as strace showed its `sendmsg`/`recvmsg` calls: (direction, the
    /// message's bytes up to its last non-zero one, what it parses to).
    fn dpdk_handshake() -> [(&'static str, &'static str, MsgRepr); 11] {
        let dpdk = Name::new(b"DPDK 22.11.11");
        let ring = |direction, offset| MsgRepr::AddRing {
            direction,
            other_flags: 0,
            index: 0,
            region: 0,
            offset,
            log2_ring_size: 10,
            private_hdr_size: 0,
        };
        let if_name = Name::new(b"net_memif0");
        [
            (
                "S->C",
                "02004450444b2032322e31312e31310000000000000000000000000000000000000000020002ff00ff00ff000e",
                MsgRepr::Hello {
                    name: dpdk,
                    min_version: VERSION,
                    max_version: VERSION,
                    max_region: 255,
                    max_s2c_ring: 255,
                    max_c2s_ring: 255,
                    max_log2_ring_size: 14,
                },
            ),
            (
                "C->S",
                "0300000207000000006162630000000000000000000000000000000000000000004450444b2032322e31312e3131",
                MsgRepr::Init {
                    version: VERSION,
                    id: 7,
                    mode: 0,
                    secret: Secret::new(b"abc"),
                    name: dpdk,
                },
            ),
            ("S->C", "01", MsgRepr::Ack),
            (
                "C->S",
                "04000000008140",
                MsgRepr::AddRegion {
                    index: 0,
                    size: 0x40_8100,
                },
            ),
            ("S->C", "01", MsgRepr::Ack),
            (
                "C->S",
                "0500010000000000000000000a",
                ring(Direction::C2s, 0),
            ),
            ("S->C", "01", MsgRepr::Ack),
            (
                "C->S",
                "0500000000000000804000000a",
                ring(Direction::S2c, 16_512),
            ),
            ("S->C", "01", MsgRepr::Ack),
            (
                "C->S",
                "06006e65745f6d656d696630",
                MsgRepr::Connect { if_name },
            ),
            (
                "S->C",
                "07006e65745f6d656d696630",
                MsgRepr::Connected { if_name },
            ),
        ]
    }

    #[test]
    fn a_dpdk_handshake_parses_and_emits_byte_for_byte() {
        for (way, hex, want) in dpdk_handshake() {
            let mut b = [0u8; MSG_LEN];
            for (i, byte) in b.iter_mut().enumerate().take(hex.len() / 2) {
                *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
            }
            assert_eq!(MsgRepr::parse(&b), Ok(want), "{way} {hex}");
            assert_eq!(want.emit(), b, "{way} {want:?}");
        }
    }

    #[test]
    fn lengths_and_types_are_checked_first() {
        let ok = MsgRepr::Ack.emit();
        let mut long = [0u8; MSG_LEN + 1];
        long[..MSG_LEN].copy_from_slice(&ok);
        // (bytes, result)
        let table: [(&[u8], Result<MsgRepr>); 6] = [
            (&[], Err(Error::Truncated)),
            (&ok[..MSG_LEN - 1], Err(Error::Truncated)),
            (&long, Err(Error::Malformed)),
            (&[0u8; MSG_LEN], Err(Error::Malformed)),
            (
                &{
                    let mut b = [0u8; MSG_LEN];
                    b[0] = 9;
                    b
                },
                Err(Error::Malformed),
            ),
            (&ok, Ok(MsgRepr::Ack)),
        ];
        for (i, (bytes, want)) in table.iter().enumerate() {
            assert_eq!(&MsgRepr::parse(bytes), want, "row {i}");
        }
    }

    #[test]
    fn ring_direction_keeps_other_flags() {
        let mut b = MsgRepr::AddRing {
            direction: Direction::S2c,
            other_flags: 0,
            index: 0,
            region: 0,
            offset: 0,
            log2_ring_size: 10,
            private_hdr_size: 0,
        }
        .emit();
        b[field::RING_FLAGS.start] = 0x06;
        match MsgRepr::parse(&b) {
            Ok(MsgRepr::AddRing {
                direction,
                other_flags,
                ..
            }) => assert_eq!((direction, other_flags), (Direction::S2c, 6)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn text_fields_end_with_a_nul_and_read_up_to_one() {
        let long = [b'x'; 40];
        assert_eq!(Name::new(&long).as_bytes(), &long[..NAME_LEN - 1]);
        assert_eq!(Name::new(b"a\0b").as_bytes(), b"a");
        assert_eq!(Name::read(&[b'y'; NAME_LEN]).as_bytes().len(), NAME_LEN);
        assert_eq!(Secret::EMPTY.as_str(), Some(""));
        assert_eq!(Reason::new(&[0xff, 0xfe]).as_str(), None);
    }

    #[test]
    fn ring_layout_matches_the_peers() {
        // 1024 slots: 16,512 bytes (VPP's `show memif` ring stride).
        assert_eq!(ring::len(10), Some(16_512));
        assert_eq!(ring::len(14), Some(128 + 16 * 16_384));
        assert_eq!(ring::len(15), None);
        assert_eq!(ring::desc_offset(2), 160);
        let d = DescRepr {
            next: true,
            other_flags: 0,
            region: 1,
            length: 2048,
            offset: 0x10_0000,
            metadata: 7,
        };
        let b = d.emit();
        assert_eq!(b, [1, 0, 1, 0, 0, 8, 0, 0, 0, 0, 0x10, 0, 7, 0, 0, 0]);
        assert_eq!(DescRepr::parse(&b), Ok(d));
        assert_eq!(DescRepr::parse(&b[..15]), Err(Error::Truncated));
    }
}
