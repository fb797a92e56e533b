//! Target `vhost_messages`: the vhost-user message stream a frontend
//! sends, through the port's real protocol code (`Channel` over a socket
//! pair, decoding, dispatch, the backend's state and ring publishing),
//! with memfds attached as the input decides and the port's queues polled
//! after every message. The input format is documented on
//! `nfv_vhost::fuzzing`. Checks: no panic, no fault (the backend checks
//! what it maps; a ring pointed anywhere must stay within the table).

pub fn run(data: &[u8]) {
    nfv_vhost::fuzzing::message_stream(data);
}
