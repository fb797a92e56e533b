//! A frontend hands over a call fd whose `write` blocks: an eventfd at its
//! maximum count in blocking mode, or the write end of a full pipe nobody
//! reads. The PMD serving that port (and a healthy one) must keep running,
//! the port must count the interrupts it could not send, and
//! GET_VRING_BASE and disconnect on it must still complete.

mod common;
mod hostile_support;

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};

use common::*;
use hostile_support::*;
use nfv_vhost::VhostUserMode::Server;
use vhost::VhostBackend;
use vmm_sys_util::eventfd::EventFd;

/// Hostile call fds, with whatever must stay open for them to block
/// (a pipe's read end).
fn hostile_fds() -> Vec<(&'static str, EventFd, Option<OwnedFd>)> {
    let full = EventFd::new(0).expect("eventfd");
    full.write(u64::MAX - 1).expect("fill eventfd");
    let (pr, pw) = nix::unistd::pipe().expect("pipe");
    let set_nonblock = |fd: &OwnedFd, on: bool| {
        // SAFETY: fcntl on an fd we own.
        unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_SETFL,
                if on { libc::O_NONBLOCK } else { 0 },
            )
        };
    };
    set_nonblock(&pw, true);
    let chunk = [0u8; 4096];
    // SAFETY: writes from a live buffer until the pipe is full.
    while unsafe { libc::write(pw.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) } > 0 {}
    set_nonblock(&pw, false);
    // SAFETY: the pipe's write end, handed over; `EventFd` only wraps it.
    let pipe = unsafe { EventFd::from_raw_fd(pw.into_raw_fd()) };
    vec![
        ("eventfd at max count", full, None),
        ("full pipe", pipe, Some(pr)),
    ]
}

#[test]
fn a_blocking_call_fd_does_not_stop_the_pmd() {
    for (i, (what, call, _keep)) in hostile_fds().into_iter().enumerate() {
        let tag = format!("callfd{i}");
        let (mut b, b_side) = Healthy::new(&tag);
        let path = sock(&format!("{tag}-a"));
        let a_side = SwitchSide::open(&format!("{tag}-a"), &cfg(&path, Server, 1, true), 1);
        let a = a_side.port.clone();
        let mut g = Guest::setup(connect(&path), &format!("{tag}-a"), &GuestOpts::default());
        wait_status(&a, "pair up", |s| s.pairs_enabled == 1);
        let _pmd = EchoPmd::spawn(vec![a_side, b_side]);
        b.check();
        echo_round_trip(&mut g, &[frame(64, 1)]);
        // The attack: the guest RX virtqueue's call fd blocks, and the
        // guest asks for interrupts.
        g.fe.set_vring_call(0, &call).expect("SET_VRING_CALL");
        g.rx[0].enable_interrupts();
        let mut n = 0;
        let stuck = nfv_testutil::wait_until(WAIT, || {
            n += 1;
            echo_round_trip(&mut g, &[frame(64, n), frame(1000, n + 1)]);
            b.check();
            a.status().counter("call_blocked") > 0
        });
        let st = a.status();
        assert!(stuck, "{what}: no call_blocked counted: {st:#?}");
        assert_eq!(st.call_stuck(), vec![0], "{what}: {st:#?}");
        let gauges = nfv_ports::Port::gauges(&*a);
        assert_eq!(
            gauges.text("call_stuck").as_deref(),
            Some("[0]"),
            "{what}: {gauges:?}"
        );
        // Traffic to the guest keeps flowing without interrupts, and the
        // healthy port on the same PMD is unaffected.
        echo_round_trip(&mut g, &[frame(200, 7)]);
        b.check();
        // The protocol thread is not stuck either.
        let base = g.fe.get_vring_base(0).expect("GET_VRING_BASE");
        assert!(base > 0, "{what}");
        drop(g);
        wait_status(&a, "disconnect", |s| !s.connected && s.disconnects == 1);
        b.check();
    }
}
