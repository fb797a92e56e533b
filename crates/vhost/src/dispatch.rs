//! From a decoded message to the backend and back: which method a request
//! calls, what is replied, and whether the connection goes on.
//!
//! Why our own dispatcher rather than the `vhost` crate's request handler:
//! that handler enforces an order of messages that real frontends do not
//! follow (it refuses SET_VRING_ENABLE until PROTOCOL_FEATURES was acked by
//! SET_FEATURES, which QEMU sends only once the guest driver starts, after
//! enabling the rings), and a refusal there ended the connection. Here
//! every request is accepted in any order the vhost-user spec allows; the
//! backend keeps per-vring state and decides when a ring runs from the
//! whole state, not from the order it arrived in. The message layer is not
//! on the packet path, so owning it costs nothing at run time; it is the
//! part that must match real peers, and the conformance table in
//! `tests/conformance.rs` replays what each known frontend sends.
//!
//! Replies: requests with a reply of their own always get it; any other
//! request gets a REPLY_ACK status (0 = done, 1 = refused) when its header
//! asks for one — whether or not REPLY_ACK was negotiated, as DPDK's vhost
//! library does, because the frontend that set the flag is waiting.

use crate::backend::{Answer, Backend, Refused};
use crate::message::{self, DecodeError, Header, Request, VringFd};

/// What to do after a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Continue,
    /// End the connection, for this (already counted and logged) reason.
    Close(String),
}

/// The outcome of one message: bytes to send back (if any) and what next.
pub(crate) struct Outcome {
    pub reply: Option<Vec<u8>>,
    pub next: Next,
}

impl Outcome {
    fn ack(h: &Header, res: Answer<()>) -> Outcome {
        let ok = res.is_ok();
        let next = match res {
            Err(Refused { msg, fatal: true }) => Next::Close(msg),
            _ => Next::Continue,
        };
        Outcome {
            reply: h
                .need_reply()
                .then(|| message::reply_u64(h.request, u64::from(!ok))),
            next,
        }
    }

    fn value(h: &Header, v: u64) -> Outcome {
        Outcome {
            reply: Some(message::reply_u64(h.request, v)),
            next: Next::Continue,
        }
    }
}

/// Handles one decoded request.
pub(crate) fn handle(b: &mut Backend, h: &Header, req: Request) -> Outcome {
    match req {
        Request::GetFeatures => Outcome::value(h, b.get_features()),
        Request::GetProtocolFeatures => Outcome::value(h, b.get_protocol_features()),
        Request::GetQueueNum => Outcome::value(h, b.get_queue_num()),
        Request::GetVringBase { index } => match b.get_vring_base(index) {
            Ok(pos) => Outcome {
                reply: Some(message::reply_state(h.request, index, pos)),
                next: Next::Continue,
            },
            Err(r) => Outcome {
                reply: None,
                next: Next::Close(r.msg),
            },
        },
        Request::SetFeatures(f) => Outcome::ack(h, b.set_features(f)),
        Request::SetProtocolFeatures(f) => Outcome::ack(h, b.set_protocol_features(f)),
        Request::SetOwner | Request::BackendReqFd => Outcome::ack(h, Ok(())),
        Request::Reset => {
            b.reset();
            Outcome::ack(h, Ok(()))
        }
        Request::SetMemTable(regions, fds) => Outcome::ack(h, b.set_mem_table(&regions, fds)),
        Request::SetVringNum { index, num } => Outcome::ack(h, b.set_vring_num(index, num)),
        Request::SetVringAddr {
            index,
            desc,
            used,
            avail,
        } => Outcome::ack(h, b.set_vring_addr(index, desc, used, avail)),
        Request::SetVringBase { index, base } => Outcome::ack(h, b.set_vring_base(index, base)),
        Request::SetVringFd { kind, index, fd } => {
            let res = match kind {
                VringFd::Kick => b.set_vring_kick(index),
                VringFd::Call => b.set_vring_call(index, fd),
                VringFd::Err => b.set_vring_err(index),
            };
            Outcome::ack(h, res)
        }
        Request::SetVringEnable { index, enable } => {
            Outcome::ack(h, b.set_vring_enable(index, enable))
        }
        Request::SetLogBase { size, offset, fd } => match fd {
            // With LOG_SHMFD the frontend waits for a reply, whatever
            // became of the log: QEMU aborts the VM when starting the log
            // fails, so a log we cannot use is answered like any other and
            // the rings stop instead (`Backend::set_log_base`). The reply
            // echoes the request's payload: QEMU reads a reply of any size
            // and ignores it, rust-vmm's frontend wants the 16 bytes.
            Some(fd) => {
                let res = b.set_log_base(size, offset, fd);
                let mut echo = [0u8; 16];
                echo[..8].copy_from_slice(&size.to_le_bytes());
                echo[8..].copy_from_slice(&offset.to_le_bytes());
                Outcome {
                    reply: Some(message::reply(h.request, &echo)),
                    next: match res {
                        Err(Refused { msg, fatal: true }) => Next::Close(msg),
                        _ => Next::Continue,
                    },
                }
            }
            None => Outcome::ack(h, Err(b.log_base_without_fd())),
        },
        Request::SetLogFd => Outcome::ack(h, Ok(())),
        Request::SendRarp(mac) => Outcome::ack(h, b.send_rarp(mac)),
        Request::NetSetMtu(mtu) => Outcome::ack(h, b.net_set_mtu(mtu)),
    }
}

/// A message that could not be decoded, after the whole of it was read.
/// The caller counts and logs it. Requests whose frontend waits for an
/// answer end the connection; the others get a NACK if they asked for one.
pub(crate) fn undecodable(h: &Header, e: &DecodeError) -> Outcome {
    if !e.recoverable(h) {
        return Outcome {
            reply: None,
            next: Next::Close(format!("{e}; closing the connection")),
        };
    }
    Outcome {
        reply: h.need_reply().then(|| message::reply_u64(h.request, 1)),
        next: Next::Continue,
    }
}
