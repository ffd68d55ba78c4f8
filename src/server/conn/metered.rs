//! A connection's socket, as hyper writes to it, watched for writes that
//! cannot go out: while the client does not read, the bytes hyper and
//! rustls already hold for it stay in memory. The watchdog (`watchdog.rs`)
//! closes a connection whose pending write has made no progress for
//! `--write-timeout`.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Since when a write has been waiting for the socket, if one is.
#[derive(Debug)]
pub(crate) struct WriteStall {
    epoch: Instant,
    /// Microseconds after `epoch`, plus one; 0 while no write waits.
    since_us: AtomicU64,
}

impl WriteStall {
    pub(crate) fn new(epoch: Instant) -> Self {
        Self {
            epoch,
            since_us: AtomicU64::new(0),
        }
    }

    /// When the write now waiting started waiting.
    pub(crate) fn since(&self) -> Option<Instant> {
        match self.since_us.load(Ordering::Relaxed) {
            0 => None,
            us => Some(self.epoch + Duration::from_micros(us - 1)),
        }
    }

    fn record<T>(&self, poll: &Poll<T>) {
        match poll {
            Poll::Pending => {
                if self.since_us.load(Ordering::Relaxed) == 0 {
                    let us = self.epoch.elapsed().as_micros() as u64 + 1;
                    self.since_us.store(us, Ordering::Relaxed);
                }
            }
            Poll::Ready(_) => {
                if self.since_us.load(Ordering::Relaxed) != 0 {
                    self.since_us.store(0, Ordering::Relaxed);
                }
            }
        }
    }
}

/// `io`, with its waiting writes recorded in `stall`.
pub(crate) struct Metered<I> {
    io: I,
    stall: std::sync::Arc<WriteStall>,
}

impl<I> Metered<I> {
    pub(crate) fn new(io: I, stall: std::sync::Arc<WriteStall>) -> Self {
        Self { io, stall }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Metered<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Metered<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        self.stall.record(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.stall.record(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.io).poll_flush(cx);
        self.stall.record(&poll);
        poll
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
