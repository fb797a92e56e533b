//! The API's listener with limits, so that no client can hold the server:
//! at most [`MAX_CONNECTIONS`] open at once (one more is closed as soon as
//! it is accepted, and counted), and each connection closed when its
//! client sends nothing for [`IDLE`] or after [`LIFETIME`] in all (a
//! client that trickles one byte at a time). Connections are tasks on the
//! API's one thread, never a thread each; node operations run on at most
//! two blocking threads (`lib.rs`).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// Connections open at once: a dashboard, a scraper, the CNI plugin and
/// scripts need a handful.
pub const MAX_CONNECTIONS: usize = 64;
/// A connection whose client sends nothing for this long is closed (the
/// dashboard asks every second).
pub const IDLE: Duration = Duration::from_secs(30);
/// No connection lives longer (clients reconnect).
pub const LIFETIME: Duration = Duration::from_secs(300);

/// Counts of what the limits refused.
#[derive(Default, Debug)]
pub struct ListenerStats {
    /// Connections closed at accept: [`MAX_CONNECTIONS`] were open.
    pub over_limit: AtomicU64,
    /// Connections closed for [`IDLE`] or [`LIFETIME`].
    pub timed_out: AtomicU64,
}

pub struct Bounded {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    stats: Arc<ListenerStats>,
    idle: Duration,
    lifetime: Duration,
}

impl Bounded {
    pub fn new(listener: TcpListener, stats: Arc<ListenerStats>) -> Bounded {
        Bounded::with_limits(listener, stats, MAX_CONNECTIONS, IDLE, LIFETIME)
    }

    pub fn with_limits(
        listener: TcpListener,
        stats: Arc<ListenerStats>,
        max: usize,
        idle: Duration,
        lifetime: Duration,
    ) -> Bounded {
        Bounded {
            listener,
            slots: Arc::new(Semaphore::new(max)),
            stats,
            idle,
            lifetime,
        }
    }
}

impl axum::serve::Listener for Bounded {
    type Io = Limited;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Limited, SocketAddr) {
        loop {
            let (stream, addr) = match self.listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    // Out of fds, say: wait instead of spinning.
                    tracing::debug!("REST API accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            match self.slots.clone().try_acquire_owned() {
                Ok(permit) => {
                    let now = Instant::now();
                    return (
                        Limited {
                            stream,
                            _permit: permit,
                            stats: self.stats.clone(),
                            idle: self.idle,
                            idle_timer: Box::pin(tokio::time::sleep(self.idle)),
                            end: Box::pin(tokio::time::sleep_until(now + self.lifetime)),
                        },
                        addr,
                    );
                }
                Err(_) => {
                    self.stats.over_limit.fetch_add(1, Relaxed);
                    drop(stream);
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// A connection holding its slot, with its deadlines.
pub struct Limited {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
    stats: Arc<ListenerStats>,
    idle: Duration,
    idle_timer: Pin<Box<Sleep>>,
    end: Pin<Box<Sleep>>,
}

impl Limited {
    /// An error once a deadline has passed (and a wake-up registered for
    /// the next one otherwise).
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let idle = self.idle_timer.as_mut().poll(cx).is_ready();
        let end = self.end.as_mut().poll(cx).is_ready();
        (idle || end).then(|| {
            self.stats.timed_out.fetch_add(1, Relaxed);
            io::Error::new(io::ErrorKind::TimedOut, "REST API client too slow or idle")
        })
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let next = Instant::now() + self.idle;
                    self.idle_timer.as_mut().reset(next);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.stream).poll_write(cx, buf) {
            // A client that does not read its answers is as slow as one
            // that does not send.
            Poll::Pending => match self.expired(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            r => r,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::serve::Listener;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Over the limit: closed at once; idle: closed after the idle time;
    /// the slots come back.
    #[tokio::test(flavor = "current_thread")]
    async fn connections_are_limited_in_number_and_idle_time() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let stats = Arc::new(ListenerStats::default());
        let idle = Duration::from_millis(300);
        let mut bounded = Bounded::with_limits(l, stats.clone(), 2, idle, Duration::from_secs(60));
        let served = tokio::spawn(async move {
            loop {
                let (mut io, _) = bounded.accept().await;
                // An echo of one byte, then wait for more until an error.
                tokio::spawn(async move {
                    let mut b = [0u8; 1];
                    while let Ok(1) = io.read(&mut b).await {
                        if io.write_all(&b).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let mut a = TcpStream::connect(addr).await.unwrap();
        let mut b = TcpStream::connect(addr).await.unwrap();
        for c in [&mut a, &mut b] {
            c.write_all(b"x").await.unwrap();
            let mut r = [0u8; 1];
            c.read_exact(&mut r).await.unwrap();
        }
        // The third: accepted by the kernel, closed by us.
        let mut c = TcpStream::connect(addr).await.unwrap();
        let mut r = [0u8; 1];
        let n = tokio::time::timeout(Duration::from_secs(30), c.read(&mut r))
            .await
            .expect("closed, not left hanging");
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
        assert_eq!(stats.over_limit.load(Relaxed), 1);
        // a and b say nothing: both closed after the idle time.
        for c in [&mut a, &mut b] {
            let n = tokio::time::timeout(Duration::from_secs(30), c.read(&mut r))
                .await
                .expect("an idle connection is closed");
            assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
        }
        assert_eq!(stats.timed_out.load(Relaxed), 2);
        // Their slots are free again.
        let mut d = TcpStream::connect(addr).await.unwrap();
        d.write_all(b"y").await.unwrap();
        d.read_exact(&mut r).await.unwrap();
        assert_eq!(&r, b"y");
        served.abort();
    }
}
