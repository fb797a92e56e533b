//! Target `memif_rings`: the memif ring walk against a hostile client. A
//! real server port and a client connected to it over its socket; the
//! client then writes anything into its shared memory — descriptors
//! pointing anywhere (past the region, into the rings, another region),
//! heads outside the window, chains that never end, bytes over ring
//! headers — between the port's rx and tx bursts. The input format is
//! documented on `nfv_memif::fuzzing::ring_walk`. Checks, per burst,
//! against a model of the walk: exactly the frames of the sane chains
//! are received; rx writes only its tail; tx writes exactly the posted
//! buffers' bytes, their descriptors' flags and lengths and its tail,
//! nothing else of the region; no panic, no fault.

pub fn run(data: &[u8]) {
    nfv_memif::fuzzing::ring_walk(data);
}
