//! The server side of a memif control connection, as a state machine fed
//! one received message at a time (with the file descriptor that came with
//! it, if any) and answering with what to send. No I/O: the port's socket
//! code reads and writes, this decides; tests feed it byte arrays.
//!
//! Order (DPDK `net_memif` and VPP agree): the server sends HELLO on
//! accept; the client sends INIT (answered ACK), ADD_REGION ×n with a memfd
//! each (ACK), ADD_RING ×n with an eventfd each (ACK), then CONNECT
//! (answered CONNECTED). Anything refused ends the connection with a
//! DISCONNECT whose reason names why ([`Refusal`]); after a refusal or a
//! DISCONNECT from the peer every further message is ignored.
//!
//! Beyond what DPDK checks (it trusts the client's ring sizes and
//! offsets), this side also refuses a ring larger than it announced, a
//! ring outside its region, a ring index given twice, a region of size
//! 0, and a CONNECT without at least one ring each way numbered from 0 —
//! a client is as hostile as a guest.

use nfv_wire::memif::{self, Direction, MsgRepr, Name, Secret, VERSION};

/// What this side announces in HELLO and holds the client to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Regions a client may add.
    pub max_regions: u16,
    /// Rings a client may add per direction (= queue pairs).
    pub max_rings: u16,
    /// Largest ring, as log2 of its slots.
    pub max_log2_ring: u8,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_regions: 256,
            max_rings: 256,
            max_log2_ring: memif::ring::MAX_LOG2_SIZE,
        }
    }
}

impl Limits {
    /// The HELLO this side sends on accept. The `max_*` fields carry a
    /// maximum *index* (count − 1): peers add one before use.
    pub fn hello(&self, name: &str) -> MsgRepr {
        MsgRepr::Hello {
            name: Name::new(name.as_bytes()),
            min_version: VERSION,
            max_version: VERSION,
            max_region: self.max_regions.saturating_sub(1),
            max_s2c_ring: self.max_rings.saturating_sub(1),
            max_c2s_ring: self.max_rings.saturating_sub(1),
            max_log2_ring_size: self.max_log2_ring,
        }
    }
}

/// An interface a client may ask for by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// The secret the client must give (`None`: any or none).
    pub secret: Option<Secret>,
    /// Another client holds the interface now.
    pub taken: bool,
}

/// Why this side ends a connection: the DISCONNECT reason it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Not exactly 128 bytes.
    MessageSize,
    /// A type code that is none of memif's.
    UnknownType,
    /// Anything but INIT first, INIT twice, or a message out of order.
    Unexpected,
    /// INIT's version is not 2.0.
    Version,
    /// No interface with INIT's id.
    IdNotFound,
    /// Another client holds that interface.
    AlreadyConnected,
    /// INIT's mode is not Ethernet.
    NotEthernet,
    /// The interface has a secret; INIT gave none.
    SecretRequired,
    /// INIT's secret is not the interface's.
    IncorrectSecret,
    /// ADD_REGION without a file descriptor.
    MissingRegionFd,
    /// ADD_REGION out of order, past the limit, or of size 0.
    RegionIndex,
    /// ADD_RING without a file descriptor.
    MissingInterruptFd,
    /// ADD_RING's index past the limit or given twice.
    RingIndex,
    /// ADD_RING larger than announced, or outside its region.
    RingPlacement,
    /// CONNECT without rings 0..n in each direction.
    MissingRings,
}

impl Refusal {
    /// Every refusal (for tests and counters).
    pub const ALL: [Refusal; 15] = [
        Refusal::MessageSize,
        Refusal::UnknownType,
        Refusal::Unexpected,
        Refusal::Version,
        Refusal::IdNotFound,
        Refusal::AlreadyConnected,
        Refusal::NotEthernet,
        Refusal::SecretRequired,
        Refusal::IncorrectSecret,
        Refusal::MissingRegionFd,
        Refusal::RegionIndex,
        Refusal::MissingInterruptFd,
        Refusal::RingIndex,
        Refusal::RingPlacement,
        Refusal::MissingRings,
    ];

    /// The DISCONNECT text: DPDK's wording where it refuses the same.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::MessageSize => "Invalid message size",
            Refusal::UnknownType => "Unknown message type",
            Refusal::Unexpected => "Unexpected message",
            Refusal::Version => "Incompatible memif version",
            Refusal::IdNotFound => "ID not found",
            Refusal::AlreadyConnected => "Already connected",
            Refusal::NotEthernet => "Only ethernet mode supported",
            Refusal::SecretRequired => "Secret required",
            Refusal::IncorrectSecret => "Incorrect secret",
            Refusal::MissingRegionFd => "Missing region fd",
            Refusal::RegionIndex => "Invalid region index",
            Refusal::MissingInterruptFd => "Missing interrupt fd",
            Refusal::RingIndex => "Invalid ring index",
            Refusal::RingPlacement => "Invalid ring size or offset",
            Refusal::MissingRings => "Missing rings",
        }
    }

    /// The DISCONNECT message.
    pub fn message(self) -> MsgRepr {
        MsgRepr::Disconnect {
            code: 0,
            reason: memif::Reason::new(self.reason().as_bytes()),
        }
    }

    /// A short name for counters (`memif_refused_<name>`).
    pub fn name(self) -> &'static str {
        match self {
            Refusal::MessageSize => "message_size",
            Refusal::UnknownType => "unknown_type",
            Refusal::Unexpected => "unexpected",
            Refusal::Version => "version",
            Refusal::IdNotFound => "id_not_found",
            Refusal::AlreadyConnected => "already_connected",
            Refusal::NotEthernet => "not_ethernet",
            Refusal::SecretRequired => "secret_required",
            Refusal::IncorrectSecret => "incorrect_secret",
            Refusal::MissingRegionFd => "missing_region_fd",
            Refusal::RegionIndex => "region_index",
            Refusal::MissingInterruptFd => "missing_interrupt_fd",
            Refusal::RingIndex => "ring_index",
            Refusal::RingPlacement => "ring_placement",
            Refusal::MissingRings => "missing_rings",
        }
    }
}

/// A region the client added: its size and memfd.
#[derive(Debug, PartialEq, Eq)]
pub struct Region<F> {
    pub size: u64,
    pub fd: F,
}

/// A ring the client added: where it lies and its eventfd.
#[derive(Debug, PartialEq, Eq)]
pub struct Ring<F> {
    pub region: u16,
    pub offset: u32,
    pub log2_size: u8,
    pub fd: F,
}

/// What the client set up, once CONNECT came: rings by direction, in
/// index order (index i at position i).
#[derive(Debug, PartialEq, Eq)]
pub struct Setup<F> {
    pub id: u32,
    pub peer_name: Name,
    pub peer_if_name: Name,
    pub regions: Vec<Region<F>>,
    pub c2s: Vec<Ring<F>>,
    pub s2c: Vec<Ring<F>>,
}

/// What to do after a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<F> {
    /// Send this (ACK).
    Reply(MsgRepr),
    /// Send CONNECTED with this side's interface name and start the
    /// interface over `Setup` (map the regions, check the ring cookies).
    Connect(Box<Setup<F>>),
    /// Send this DISCONNECT and close: the client was refused.
    Refuse(Refusal),
    /// The client disconnected, saying why: close.
    PeerLeft(memif::Reason),
    /// Nothing (after the connection ended).
    Ignore,
}

#[derive(Debug)]
enum State<F> {
    /// HELLO sent, INIT awaited.
    Hello,
    /// INIT accepted: regions and rings come, then CONNECT.
    Building {
        id: u32,
        peer_name: Name,
        regions: Vec<Region<F>>,
        c2s: Vec<Option<Ring<F>>>,
        s2c: Vec<Option<Ring<F>>>,
    },
    /// CONNECT answered, or the connection ended.
    Done,
}

/// One control connection, server side.
#[derive(Debug)]
pub struct ServerHandshake<F> {
    limits: Limits,
    state: State<F>,
}

impl<F> ServerHandshake<F> {
    /// A connection just accepted (send `limits.hello(..)` first).
    pub fn new(limits: Limits) -> Self {
        ServerHandshake {
            limits,
            state: State::Hello,
        }
    }

    /// One received message: its bytes, the descriptor that came with it,
    /// and the interfaces on offer by id. A descriptor not used is
    /// dropped (closed) here.
    pub fn on_message(
        &mut self,
        bytes: &[u8],
        fd: Option<F>,
        offer: impl Fn(u32) -> Option<Offer>,
    ) -> Step<F> {
        if matches!(self.state, State::Done) {
            return Step::Ignore;
        }
        let step = self.step(bytes, fd, offer);
        if !matches!(step, Step::Reply(_)) {
            self.state = State::Done;
        }
        step
    }

    fn step(
        &mut self,
        bytes: &[u8],
        fd: Option<F>,
        offer: impl Fn(u32) -> Option<Offer>,
    ) -> Step<F> {
        let msg = match self.parse(bytes) {
            Ok(msg) => msg,
            Err(r) => return Step::Refuse(r),
        };
        if let MsgRepr::Disconnect { reason, .. } = msg {
            return Step::PeerLeft(reason);
        }
        match (&mut self.state, msg) {
            (
                State::Hello,
                MsgRepr::Init {
                    version,
                    id,
                    mode,
                    secret,
                    name,
                },
            ) => match accept_init(version, id, mode, secret, offer) {
                Ok(()) => {
                    self.state = State::Building {
                        id,
                        peer_name: name,
                        regions: Vec::new(),
                        c2s: Vec::new(),
                        s2c: Vec::new(),
                    };
                    Step::Reply(MsgRepr::Ack)
                }
                Err(r) => Step::Refuse(r),
            },
            (State::Building { regions, .. }, MsgRepr::AddRegion { index, size }) => {
                add_region(self.limits, regions, index, size, fd)
            }
            (
                State::Building {
                    regions, c2s, s2c, ..
                },
                MsgRepr::AddRing {
                    direction,
                    index,
                    region,
                    offset,
                    log2_ring_size,
                    ..
                },
            ) => {
                let Some(fd) = fd else {
                    return Step::Refuse(Refusal::MissingInterruptFd);
                };
                let rings = match direction {
                    Direction::C2s => c2s,
                    Direction::S2c => s2c,
                };
                let ring = Ring {
                    region,
                    offset,
                    log2_size: log2_ring_size,
                    fd,
                };
                add_ring(self.limits, regions, rings, index, ring)
            }
            (State::Building { .. }, MsgRepr::Connect { if_name }) => self.connect(if_name),
            _ => Step::Refuse(Refusal::Unexpected),
        }
    }

    /// The message in `bytes`, or why it is refused: not memif's size, a
    /// type other than INIT before INIT, a type memif does not have.
    fn parse(&self, bytes: &[u8]) -> Result<MsgRepr, Refusal> {
        if bytes.len() != memif::MSG_LEN {
            return Err(Refusal::MessageSize);
        }
        // Before INIT only INIT (or the peer leaving) is expected: DPDK
        // answers an unknown type there as unexpected too.
        let code = u16::from_le_bytes([bytes[0], bytes[1]]);
        if matches!(self.state, State::Hello)
            && code != memif::MsgType::Init as u16
            && code != memif::MsgType::Disconnect as u16
        {
            return Err(Refusal::Unexpected);
        }
        MsgRepr::parse(bytes).map_err(|_| Refusal::UnknownType)
    }

    /// CONNECT: the interface as the client set it up, if it added rings
    /// 0..n in each direction. Ends the handshake either way.
    fn connect(&mut self, if_name: Name) -> Step<F> {
        let State::Building {
            id,
            peer_name,
            regions,
            c2s,
            s2c,
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            unreachable!("`step` calls this in State::Building only");
        };
        let complete = |v: Vec<Option<Ring<F>>>| -> Option<Vec<Ring<F>>> {
            if v.is_empty() {
                return None;
            }
            v.into_iter().collect()
        };
        match (complete(c2s), complete(s2c)) {
            (Some(c2s), Some(s2c)) => Step::Connect(Box::new(Setup {
                id,
                peer_name,
                peer_if_name: if_name,
                regions,
                c2s,
                s2c,
            })),
            _ => Step::Refuse(Refusal::MissingRings),
        }
    }
}

/// INIT's checks, in DPDK's order: version, id, taken, mode, secret.
fn accept_init(
    version: u16,
    id: u32,
    mode: u8,
    secret: Secret,
    offer: impl Fn(u32) -> Option<Offer>,
) -> Result<(), Refusal> {
    if version != VERSION {
        return Err(Refusal::Version);
    }
    let o = offer(id).ok_or(Refusal::IdNotFound)?;
    if o.taken {
        return Err(Refusal::AlreadyConnected);
    }
    if mode != 0 {
        return Err(Refusal::NotEthernet);
    }
    if let Some(want) = o.secret
        && !want.as_bytes().is_empty()
    {
        if secret.as_bytes().is_empty() {
            return Err(Refusal::SecretRequired);
        }
        if secret.as_bytes() != want.as_bytes() {
            return Err(Refusal::IncorrectSecret);
        }
    }
    Ok(())
}

/// ADD_REGION: region `index`, if it comes next, within the limit and not
/// empty.
fn add_region<F>(
    limits: Limits,
    regions: &mut Vec<Region<F>>,
    index: u16,
    size: u64,
    fd: Option<F>,
) -> Step<F> {
    let Some(fd) = fd else {
        return Step::Refuse(Refusal::MissingRegionFd);
    };
    if usize::from(index) != regions.len() || index >= limits.max_regions || size == 0 {
        return Step::Refuse(Refusal::RegionIndex);
    }
    regions.push(Region { size, fd });
    Step::Reply(MsgRepr::Ack)
}

/// ADD_RING: ring `index` of one direction (`rings`), if that index is
/// within the limit and not taken and the ring fits its region.
fn add_ring<F>(
    limits: Limits,
    regions: &[Region<F>],
    rings: &mut Vec<Option<Ring<F>>>,
    index: u16,
    ring: Ring<F>,
) -> Step<F> {
    let i = usize::from(index);
    if index >= limits.max_rings || rings.get(i).is_some_and(Option::is_some) {
        return Step::Refuse(Refusal::RingIndex);
    }
    if !ring_fits(regions, limits, ring.region, ring.offset, ring.log2_size) {
        return Step::Refuse(Refusal::RingPlacement);
    }
    if rings.len() <= i {
        rings.resize_with(i + 1, || None);
    }
    rings[i] = Some(ring);
    Step::Reply(MsgRepr::Ack)
}

/// Whether a ring of 2^`log2` slots at `offset` lies inside region
/// `region` (already added) and is no larger than announced.
fn ring_fits<F>(regions: &[Region<F>], limits: Limits, region: u16, offset: u32, log2: u8) -> bool {
    if log2 > limits.max_log2_ring {
        return false;
    }
    let (Some(r), Some(len)) = (regions.get(usize::from(region)), memif::ring::len(log2)) else {
        return false;
    };
    u64::from(offset)
        .checked_add(len as u64)
        .is_some_and(|end| end <= r.size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfv_wire::memif::{MSG_LEN, Reason};

    const ID: u32 = 7;

    fn init(version: u16, id: u32, mode: u8, secret: &[u8]) -> MsgRepr {
        MsgRepr::Init {
            version,
            id,
            mode,
            secret: Secret::new(secret),
            name: Name::new(b"DPDK 22.11.11"),
        }
    }

    fn region(index: u16, size: u64) -> MsgRepr {
        MsgRepr::AddRegion { index, size }
    }

    fn ring(direction: Direction, index: u16, offset: u32, log2: u8) -> MsgRepr {
        MsgRepr::AddRing {
            direction,
            other_flags: 0,
            index,
            region: 0,
            offset,
            log2_ring_size: log2,
            private_hdr_size: 0,
        }
    }

    fn connect() -> MsgRepr {
        MsgRepr::Connect {
            if_name: Name::new(b"net_memif0"),
        }
    }

    /// One message of a script: its bytes and whether an fd comes along.
    #[derive(Clone)]
    struct In(Vec<u8>, bool);

    fn m(msg: MsgRepr) -> In {
        In(msg.emit().to_vec(), msg.msg_type().carries_fd())
    }

    fn no_fd(msg: MsgRepr) -> In {
        In(msg.emit().to_vec(), false)
    }

    /// What DPDK's client sends for one queue pair of 1024 slots.
    fn good() -> Vec<In> {
        vec![
            m(init(VERSION, ID, 0, b"abc")),
            m(region(0, 0x40_8100)),
            m(ring(Direction::C2s, 0, 0, 10)),
            m(ring(Direction::S2c, 0, 16_512, 10)),
            m(connect()),
        ]
    }

    /// `good()` with message `at` replaced by `with`.
    fn good_but(at: usize, with: In) -> Vec<In> {
        let mut v = good();
        v[at] = with;
        v
    }

    fn offer(taken: bool, secret: Option<&[u8]>) -> impl Fn(u32) -> Option<Offer> {
        let secret = secret.map(Secret::new);
        move |id| (id == ID).then_some(Offer { secret, taken })
    }

    /// Runs `script`; the last step and how many ACKs came before it.
    fn run(script: &[In], offer: impl Fn(u32) -> Option<Offer>) -> (Step<u32>, usize) {
        let mut h = ServerHandshake::new(Limits::default());
        let mut acks = 0;
        let mut fds = 100..;
        for (i, In(bytes, fd)) in script.iter().enumerate() {
            let fd = fd.then(|| fds.next().unwrap());
            let step = h.on_message(bytes, fd, &offer);
            match step {
                Step::Reply(MsgRepr::Ack) if i + 1 < script.len() => acks += 1,
                last => return (last, acks),
            }
        }
        unreachable!("the script ended on an ACK")
    }

    #[test]
    fn a_dpdk_client_connects() {
        let (step, acks) = run(&good(), offer(false, Some(b"abc")));
        assert_eq!(acks, 4);
        let Step::Connect(setup) = step else {
            panic!("{step:?}");
        };
        assert_eq!(setup.id, ID);
        assert_eq!(setup.peer_if_name.as_bytes(), b"net_memif0");
        assert_eq!(
            setup.regions,
            [Region {
                size: 0x40_8100,
                fd: 100
            }]
        );
        assert_eq!(
            (
                setup.c2s.len(),
                setup.s2c.len(),
                setup.s2c[0].offset,
                setup.s2c[0].fd
            ),
            (1, 1, 16_512, 102)
        );
    }

    /// (name, script, interface offered: taken, secret; refusal, ACKs before it)
    #[allow(clippy::type_complexity)]
    fn refusals() -> Vec<(
        &'static str,
        Vec<In>,
        bool,
        Option<&'static [u8]>,
        Refusal,
        usize,
    )> {
        let short = In(vec![0u8; MSG_LEN - 1], false);
        let unknown = {
            let mut b = vec![0u8; MSG_LEN];
            b[0] = 42;
            In(b, false)
        };
        vec![
            (
                "short message",
                good_but(0, short.clone()),
                false,
                None,
                Refusal::MessageSize,
                0,
            ),
            (
                "short later",
                good_but(2, short),
                false,
                None,
                Refusal::MessageSize,
                2,
            ),
            (
                "unknown type first",
                good_but(0, unknown.clone()),
                false,
                None,
                Refusal::Unexpected,
                0,
            ),
            (
                "unknown type later",
                good_but(1, unknown),
                false,
                None,
                Refusal::UnknownType,
                1,
            ),
            (
                "connect first",
                vec![m(connect())],
                false,
                None,
                Refusal::Unexpected,
                0,
            ),
            (
                "init twice",
                good_but(1, m(init(VERSION, ID, 0, b""))),
                false,
                None,
                Refusal::Unexpected,
                1,
            ),
            (
                "hello from a client",
                good_but(1, m(Limits::default().hello("x"))),
                false,
                None,
                Refusal::Unexpected,
                1,
            ),
            (
                "wrong version",
                good_but(0, m(init(0x0100, ID, 0, b""))),
                false,
                None,
                Refusal::Version,
                0,
            ),
            (
                "unknown id",
                good_but(0, m(init(VERSION, 8, 0, b""))),
                false,
                None,
                Refusal::IdNotFound,
                0,
            ),
            ("taken", good(), true, None, Refusal::AlreadyConnected, 0),
            (
                "ip mode",
                good_but(0, m(init(VERSION, ID, 1, b""))),
                false,
                None,
                Refusal::NotEthernet,
                0,
            ),
            (
                "no secret given",
                good_but(0, m(init(VERSION, ID, 0, b""))),
                false,
                Some(b"abc"),
                Refusal::SecretRequired,
                0,
            ),
            (
                "wrong secret",
                good(),
                false,
                Some(b"abd"),
                Refusal::IncorrectSecret,
                0,
            ),
            (
                "region without fd",
                good_but(1, no_fd(region(0, 0x40_8100))),
                false,
                None,
                Refusal::MissingRegionFd,
                1,
            ),
            (
                "region 1 first",
                good_but(1, m(region(1, 0x40_8100))),
                false,
                None,
                Refusal::RegionIndex,
                1,
            ),
            (
                "empty region",
                good_but(1, m(region(0, 0))),
                false,
                None,
                Refusal::RegionIndex,
                1,
            ),
            (
                "ring without fd",
                good_but(2, no_fd(ring(Direction::C2s, 0, 0, 10))),
                false,
                None,
                Refusal::MissingInterruptFd,
                2,
            ),
            (
                "ring index past the limit",
                good_but(2, m(ring(Direction::C2s, 256, 0, 10))),
                false,
                None,
                Refusal::RingIndex,
                2,
            ),
            (
                "ring given twice",
                good_but(3, m(ring(Direction::C2s, 0, 16_512, 10))),
                false,
                None,
                Refusal::RingIndex,
                3,
            ),
            (
                "ring larger than announced",
                good_but(2, m(ring(Direction::C2s, 0, 0, 15))),
                false,
                None,
                Refusal::RingPlacement,
                2,
            ),
            (
                "ring past its region",
                good_but(3, m(ring(Direction::S2c, 0, 0x40_8100 - 16_000, 10))),
                false,
                None,
                Refusal::RingPlacement,
                3,
            ),
            (
                "ring offset overflowing",
                good_but(3, m(ring(Direction::S2c, 0, u32::MAX, 10))),
                false,
                None,
                Refusal::RingPlacement,
                3,
            ),
            (
                "ring in a region not added",
                good_but(
                    2,
                    m(MsgRepr::AddRing {
                        direction: Direction::C2s,
                        other_flags: 0,
                        index: 0,
                        region: 1,
                        offset: 0,
                        log2_ring_size: 10,
                        private_hdr_size: 0,
                    }),
                ),
                false,
                None,
                Refusal::RingPlacement,
                2,
            ),
            (
                "no s2c ring",
                good_but(3, m(connect())),
                false,
                None,
                Refusal::MissingRings,
                3,
            ),
            (
                "a gap in the rings",
                good_but(3, m(ring(Direction::S2c, 1, 16_512, 10))),
                false,
                None,
                Refusal::MissingRings,
                4,
            ),
        ]
    }

    #[test]
    fn every_refusal_ends_with_its_disconnect() {
        let mut seen = std::collections::HashSet::new();
        for (name, script, taken, secret, want, acks) in refusals() {
            let (step, got_acks) = run(&script, offer(taken, secret));
            assert_eq!(step, Step::Refuse(want), "{name}");
            assert_eq!(got_acks, acks, "{name}: ACKs before the refusal");
            seen.insert(want);
        }
        for r in Refusal::ALL {
            assert!(seen.contains(&r), "no case refuses with {r:?}");
            let MsgRepr::Disconnect { reason, .. } = r.message() else {
                panic!("{r:?}");
            };
            assert_eq!(reason.as_bytes(), r.reason().as_bytes());
        }
    }

    #[test]
    fn after_the_end_everything_is_ignored() {
        let mut h = ServerHandshake::<u32>::new(Limits::default());
        let bye = MsgRepr::Disconnect {
            code: 0,
            reason: Reason::new(b"testpmd quit"),
        };
        let step = h.on_message(&bye.emit(), None, offer(false, None));
        assert_eq!(step, Step::PeerLeft(Reason::new(b"testpmd quit")));
        for msg in good() {
            assert_eq!(h.on_message(&msg.0, None, offer(false, None)), Step::Ignore);
        }
    }

    #[test]
    fn hello_announces_maximum_indices() {
        let l = Limits {
            max_regions: 4,
            max_rings: 2,
            max_log2_ring: 12,
        };
        match l.hello("nfvswitch") {
            MsgRepr::Hello {
                max_region,
                max_s2c_ring,
                max_c2s_ring,
                max_log2_ring_size,
                min_version,
                ..
            } => assert_eq!(
                (
                    max_region,
                    max_s2c_ring,
                    max_c2s_ring,
                    max_log2_ring_size,
                    min_version
                ),
                (3, 1, 1, 12, VERSION)
            ),
            other => panic!("{other:?}"),
        }
    }
}
