//! Target `vxlan_underlay`: frames arriving on a VXLAN tunnel's underlay
//! (tunnel frames mutated header by header, ARP requests and replies, raw
//! bytes) and frames sent into the tunnel, through the port's real
//! receive and transmit queues over a fake underlay, with the clock moved
//! by the input. The input format is documented on
//! `nfv_vxlan::fuzzing`. Checks: no panic; `fast_tunnel` and `classify`
//! agree; what goes up is exactly the inner frames of the tunnel's
//! frames; ARP answers and requests are well formed and only where due;
//! the next hop's MAC is the one ARP taught; every encapsulated frame
//! reads back as this tunnel's, carrying exactly its inner frame.

pub fn run(data: &[u8]) {
    nfv_vxlan::fuzzing::underlay_frames(data);
}
