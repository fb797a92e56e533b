//! How many frames a NIC's PCIe link carries, per direction.
//!
//! # The link
//!
//! A PCIe link is full duplex: each direction moves
//! `GT/s per lane × lanes × encoding` bits per second, where the encoding
//! is 8b/10b for Gen1 (2.5 GT/s) and Gen2 (5 GT/s) and 128b/130b for Gen3
//! (8 GT/s), Gen4 (16 GT/s) and Gen5 (32 GT/s). Gen3 x8:
//! 8 × 8 × 128/130 = 63.0 Gbit/s = 7.88 GB/s each way.
//!
//! # What one frame costs on the link
//!
//! Every transaction-layer packet (TLP) carries, besides its payload,
//! [`TLP_LINK_BYTES`] of framing, sequence number and LCRC (Gen1/2: start
//! and end symbols 2 B + sequence 2 B + LCRC 4 B; Gen3 and later: a 4 B
//! STP token that holds the sequence number + LCRC 4 B) and a header of
//! 16 B ([`HDR_4DW`], memory requests with 64-bit addresses) or 12 B
//! ([`HDR_3DW`], completions). No ECRC. A memory write carries at most
//! `mps` bytes (Max_Payload_Size); a read asks for at most `mrrs` bytes
//! (Max_Read_Request_Size) per request and is answered by completions of
//! at most `rcb` bytes each. Data-link packets (ACK and flow-control
//! updates, [`DLLP_BYTES`] each with their framing) flow in the opposite
//! direction to the TLPs they acknowledge.
//!
//! A frame of `F` bytes on the wire crosses the link as `F − 4` bytes
//! (the NIC strips the FCS on receive and adds it on transmit).
//!
//! One **receive** (NIC → host memory, the NIC's rx queue):
//! - NIC → host: the frame as `⌈(F−4)/mps⌉` memory writes, the descriptor
//!   write-back (`desc_bytes`, one write per `desc_batch` descriptors) and
//!   the read request that fetches fresh descriptors (one per
//!   `desc_batch`);
//! - host → NIC: the completion with those descriptors, and the tail
//!   doorbell (a 4 B MMIO write, one per `doorbell_batch` frames).
//!
//! One **transmit** (host memory → NIC, the NIC's tx queue):
//! - NIC → host: the descriptor read request (one per `desc_batch`), the
//!   data read requests (`⌈(F−4)/mrrs⌉`) and the status write-back (one
//!   per `desc_batch`);
//! - host → NIC: the descriptor completion, the data as `⌈(F−4)/rcb⌉`
//!   completions, and the tail doorbell.
//!
//! A VNF on a virtual function receives and transmits through the NIC, so
//! each VNF hop costs one receive and one transmit. In an east-west chain
//! of `L` VNFs on VFs the frame leaves the NIC towards a VF and comes back
//! `L` times (the hairpin): `L` receives and `L` transmits, where a
//! software switch needs one of each whatever `L` is. Throughput through
//! the link is `link bytes per second / bytes per frame` on the busier
//! direction ([`Pcie::max_fps`]).
//!
//! # Assumptions
//!
//! 1. 64-bit addressing (4DW request headers); completions have 3DW headers.
//! 2. Max_Payload_Size 256 B, Max_Read_Request_Size 512 B, and read
//!    completions of 64 B: root complexes answer reads a cache line at a
//!    time. This is what makes a transmit dearer than a receive.
//! 3. 16 B descriptors, fetched and written back 4 at a time (one 64 B
//!    cache line); one doorbell per burst of 32 frames on each queue.
//! 4. One 8 B DLLP per 4 TLPs, in the other direction.
//! 5. Buffers are cache-line aligned, so a write never splits at a 4 KiB
//!    boundary; no ECRC, no relaxed-ordering or header-split effects, no
//!    interrupts (poll mode), no TLP processing hints.
//! 6. The link is this module's only limit inside the NIC; the
//!    controller's packet rate and its VF-to-VF switching rate, which bind
//!    first at small frames, are [`crate::nic`]'s (see
//!    `docs/sriov-figures.md`).
//! 7. Replays, SKP ordered sets and power-state exits are ignored (a few
//!    tenths of a percent).

use serde::{Deserialize, Serialize};

/// Framing + sequence number + LCRC per TLP, any generation.
pub const TLP_LINK_BYTES: f64 = 8.0;
/// Request header with a 64-bit address (memory write, memory read).
pub const HDR_4DW: f64 = 16.0;
/// Completion header.
pub const HDR_3DW: f64 = 12.0;
/// One DLLP (6 B) with its framing (2 B).
pub const DLLP_BYTES: f64 = 8.0;
/// Bytes of a doorbell (one 32-bit tail register write).
pub const DOORBELL_BYTES: f64 = 4.0;
/// Bytes the NIC strips (FCS) before DMA.
pub const FCS: usize = 4;

/// A PCIe link and the NIC's DMA habits (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pcie {
    /// Generation 1..=5.
    pub generation: u8,
    /// Lanes 1..=16.
    pub lanes: u8,
    /// Max_Payload_Size, bytes.
    pub mps: usize,
    /// Max_Read_Request_Size, bytes.
    pub mrrs: usize,
    /// Bytes per read completion.
    pub rcb: usize,
    /// Descriptor size, bytes.
    pub desc_bytes: usize,
    /// Descriptors per descriptor read or write-back.
    pub desc_batch: usize,
    /// Frames per doorbell.
    pub doorbell_batch: usize,
    /// DLLPs sent per TLP received.
    pub dllp_per_tlp: f64,
}

/// Link bytes and TLP counts of one direction.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Dir {
    pub bytes: f64,
    pub tlps: f64,
}

impl Dir {
    fn add(&mut self, tlps: f64, payload: f64, header: f64) {
        self.tlps += tlps;
        self.bytes += payload + tlps * (header + TLP_LINK_BYTES);
    }
}

/// Link bytes per frame in each direction (DLLPs included).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PerFrame {
    /// NIC → host (upstream).
    pub up: f64,
    /// host → NIC (downstream).
    pub down: f64,
}

impl Pcie {
    /// A link of `generation` and `lanes` with the assumed DMA habits.
    pub fn new(generation: u8, lanes: u8) -> Pcie {
        Pcie {
            generation,
            lanes,
            mps: 256,
            mrrs: 512,
            rcb: 64,
            desc_bytes: 16,
            desc_batch: 4,
            doorbell_batch: 32,
            dllp_per_tlp: 0.25,
        }
    }

    /// Transfers per second per lane and the encoding's efficiency.
    fn lane(&self) -> (f64, f64) {
        match self.generation {
            1 => (2.5e9, 0.8),
            2 => (5.0e9, 0.8),
            3 => (8.0e9, 128.0 / 130.0),
            4 => (16.0e9, 128.0 / 130.0),
            _ => (32.0e9, 128.0 / 130.0),
        }
    }

    /// Usable bits per second in one direction.
    pub fn bits_per_second(&self) -> f64 {
        let (gt, enc) = self.lane();
        gt * self.lanes as f64 * enc
    }

    /// Link bytes per frame of `frame` bytes on the wire for `rx`
    /// receives and `tx` transmits of it.
    pub fn per_frame(&self, frame: usize, rx: f64, tx: f64) -> PerFrame {
        let data = frame.saturating_sub(FCS) as f64;
        let (mut up, mut down) = (Dir::default(), Dir::default());
        let per_desc = 1.0 / self.desc_batch as f64;
        let line = (self.desc_bytes * self.desc_batch) as f64 * per_desc;
        let bell = 1.0 / self.doorbell_batch as f64;
        // Receive.
        up.add(rx * (data / self.mps as f64).ceil(), rx * data, HDR_4DW);
        up.add(rx * per_desc, rx * line, HDR_4DW); // write-back
        up.add(rx * per_desc, 0.0, HDR_4DW); // descriptor read request
        down.add(rx * per_desc, rx * line, HDR_3DW); // its completion
        down.add(rx * bell, rx * bell * DOORBELL_BYTES, HDR_4DW);
        // Transmit.
        up.add(tx * per_desc, 0.0, HDR_4DW); // descriptor read request
        down.add(tx * per_desc, tx * line, HDR_3DW);
        up.add(tx * (data / self.mrrs as f64).ceil(), 0.0, HDR_4DW);
        down.add(tx * (data / self.rcb as f64).ceil(), tx * data, HDR_3DW);
        up.add(tx * per_desc, tx * line, HDR_4DW); // status write-back
        down.add(tx * bell, tx * bell * DOORBELL_BYTES, HDR_4DW);
        PerFrame {
            up: up.bytes + down.tlps * self.dllp_per_tlp * DLLP_BYTES,
            down: down.bytes + up.tlps * self.dllp_per_tlp * DLLP_BYTES,
        }
    }

    /// Frames per second the link carries when each frame is received
    /// `rx` times and transmitted `tx` times (the busier direction
    /// decides).
    pub fn max_fps(&self, frame: usize, rx: f64, tx: f64) -> f64 {
        let p = self.per_frame(frame, rx, tx);
        self.bits_per_second() / 8.0 / p.up.max(p.down)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn link_rates_per_generation() {
        // (gen, lanes, Gbit/s each way), by hand: GT/s × lanes × encoding.
        let rows: &[(u8, u8, f64)] = &[
            (1, 8, 16.0),
            (2, 8, 32.0),
            (3, 8, 63.015_384_6),
            (3, 16, 126.030_769),
            (4, 8, 126.030_769),
            (5, 4, 126.030_769),
        ];
        for &(g, l, gbps) in rows {
            let got = Pcie::new(g, l).bits_per_second() / 1e9;
            assert!(close(got, gbps, 1e-6), "Gen{g} x{l}: {got} vs {gbps}");
        }
    }

    /// Link bytes per frame, one receive and one transmit, by hand.
    ///
    /// 1518 B: 1514 B of data.
    /// - up: 6 writes (256 B MPS) × 24 + 1514 = 1658; write-back 88/4 = 22;
    ///   rx descriptor request 24/4 = 6; tx descriptor request 6; 3 data
    ///   read requests (512 B MRRS) × 24 = 72; status write-back 22;
    ///   DLLPs for the 24.5625 downstream TLPs: 24.5625 × 0.25 × 8 =
    ///   49.125. Total 1835.125.
    /// - down: 24 completions (64 B) × 20 + 1514 = 1994; two descriptor
    ///   completions 84/4 × 2 = 42; two doorbells 28/32 × 2 = 1.75; DLLPs
    ///   for the 10 upstream TLPs: 20. Total 2057.75.
    ///
    /// 64 B: 60 B of data.
    /// - up: 84 + 22 + 6 + 6 + 24 + 22 + DLLPs (1.5625 down TLPs: 3.125)
    ///   = 167.125.
    /// - down: 80 + 42 + 1.75 + DLLPs (3 upstream TLPs: 6) = 129.75.
    #[test]
    fn bytes_per_frame_by_hand() {
        let rows: &[(usize, f64, f64)] = &[(1518, 1835.125, 2057.75), (64, 167.125, 129.75)];
        let p = Pcie::new(3, 8);
        for &(f, up, down) in rows {
            let got = p.per_frame(f, 1.0, 1.0);
            assert!(close(got.up, up, 1e-9), "{f} B up {}", got.up);
            assert!(close(got.down, down, 1e-9), "{f} B down {}", got.down);
        }
    }

    /// The seeds' hairpin cap: a Gen3 x8 NIC (XL710 class) moves about
    /// 50 Gbit/s of frames through VF hops whatever the chain length.
    /// By hand at 1518 B: 63.015e9 / 8 / 2057.75 = 3.828 M hops/s =
    /// 46.49 Gbit/s of 1518 B frames; a chain of L VNFs gets 1/L of it.
    #[test]
    fn gen3_x8_hairpin_cap() {
        let p = Pcie::new(3, 8);
        let rows: &[(f64, f64)] = &[(1.0, 46.49), (2.0, 23.24), (4.0, 11.62), (8.0, 5.81)];
        for &(l, gbps) in rows {
            let got = p.max_fps(1518, l, l) * 1518.0 * 8.0 / 1e9;
            assert!(close(got, gbps, 2e-3), "L={l}: {got} Gbit/s vs {gbps}");
            // Per-hop aggregate (what the seeds' GUI sums over VNFs).
            assert!(close(got * l, 46.49, 2e-3));
        }
    }

    #[test]
    fn small_frames_are_bound_by_the_upstream_direction() {
        let p = Pcie::new(3, 8).per_frame(64, 1.0, 1.0);
        assert!(p.up > p.down);
        let big = Pcie::new(3, 8).per_frame(1518, 1.0, 1.0);
        assert!(big.down > big.up);
    }
}
