//! Target `memif_handshake`: the control messages a hostile memif client
//! sends the switch (INIT, ADD_REGION, ADD_RING, CONNECT, DISCONNECT,
//! messages only a server sends, raw bytes of any length; memfds and
//! eventfds attached as the input decides), through the server side's
//! state machine directly and over a real `SOCK_SEQPACKET` connection,
//! then the connection CONNECT set up opened (regions mapped, rings
//! checked). The input format and the checks are documented on
//! `nfv_memif::fuzzing::handshake`.

pub fn run(data: &[u8]) {
    nfv_memif::fuzzing::handshake(data);
}
