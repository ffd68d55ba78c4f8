//! An answer's body as hyper sends it, counted while the server holds it.
//!
//! An answer the client does not read stays in memory: a stream whose
//! HTTP/2 window is 0, or an HTTP/1 connection whose socket is full. So
//! every answer is counted until hyper drops its body, once it has handed
//! the last byte on (hyper polls a body one chunk ahead of what it can
//! send, so a chunk taken is not yet a chunk gone): against the
//! server's byte budget (`--max-buffered-bytes`, shared with request bodies,
//! for answers of a review) and against its connection's
//! ([`Outbox`], `--max-connection-buffered-bytes`, for every answer).
//!
//! What hyper holds after taking a chunk is bounded too:
//! - answers over [`CHUNK`] bytes are handed over in copies of at most
//!   [`CHUNK`] bytes, so a chunk waiting in hyper never pins the whole
//!   answer's allocation;
//! - over HTTP/2 an answer is handed over once its client's window has room
//!   for a byte of it. What h2 then holds for a client that withholds the
//!   rest of its window is, per stream, at most [`HANDED_WHOLE`] bytes of
//!   an answer up to that size, handed over whole (the answers of nearly
//!   every review: one chunk, one DATA frame), and a byte of a larger one,
//!   whose last byte is a chunk of its own ([`ReplyBody::last_byte_alone`]):
//!   h2 asks for a stream's next chunk only while what the stream holds is
//!   less than the window its client granted (and than two chunks, the
//!   send buffer set in `conn.rs`), so a larger answer stays counted until
//!   all of it but its last byte may be sent. A connection has at most
//!   `--http2-max-concurrent-streams` streams (a stream h2 still holds
//!   bytes for counts among them), so h2 holds at most that many times
//!   [`HANDED_WHOLE`] uncounted per connection, which the memory plan counts
//!   in each connection's cost (`sizing.rs`, `cost::STREAM`). Splitting
//!   every answer instead cost a second DATA frame and a second turn of
//!   the stream's task on every review: about 5,000 instructions of a
//!   request's 80,000 (docs/performance.md, "The CI guard").

use super::share::Held;
use crate::server::metrics::Metrics;
use axum::body::Bytes;
use hyper::body::{Body, Buf, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

/// The most hyper is handed at once: one HTTP/2 DATA frame at the default
/// frame size.
pub(crate) const CHUNK: usize = 16 * 1024;

/// Over HTTP/2, an answer up to this size is handed over whole; a larger
/// one keeps its last byte back until the rest may leave (module comment).
pub(crate) const HANDED_WHOLE: usize = 4 * 1024;

/// Every byte value, so a last byte is handed over without an allocation.
static EVERY_BYTE: [u8; 256] = {
    let mut all = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        all[i] = i as u8;
        i += 1;
    }
    all
};

/// One connection's answers not yet taken by hyper, and a count of their
/// progress (a chunk taken, or an answer that found the outbox empty): what
/// the connection's watchdog reads to close a connection whose client
/// stopped reading. A count rather than a time, so that an answer costs no
/// clock reading: the watchdog notes when the count last moved.
#[derive(Debug)]
pub(crate) struct Outbox {
    bytes: AtomicUsize,
    answers: AtomicUsize,
    progress: AtomicU64,
    metrics: Arc<Metrics>,
}

impl Outbox {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        Self {
            bytes: AtomicUsize::new(0),
            answers: AtomicUsize::new(0),
            progress: AtomicU64::new(0),
            metrics,
        }
    }

    /// Answer bytes waiting for this connection's client.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Counts a request refused because this connection's answers wait.
    pub(crate) fn shed(&self) {
        self.metrics.answers_shed.inc();
    }

    /// Answers waiting for this connection's client.
    pub(crate) fn answers(&self) -> usize {
        self.answers.load(Ordering::Relaxed)
    }

    /// Chunks taken and answers that found the outbox empty, so far.
    pub(crate) fn progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }

    fn progressed(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }
}

/// An answer's place in its connection's [`Outbox`] and in the server's
/// gauges, given back on drop.
#[derive(Debug)]
struct Queued {
    outbox: Arc<Outbox>,
    len: usize,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.outbox.bytes.fetch_sub(self.len, Ordering::Relaxed);
        self.outbox.answers.fetch_sub(1, Ordering::Relaxed);
        let metrics = &self.outbox.metrics;
        metrics.answers_waiting.dec();
        metrics.answer_bytes_waiting.dec_by(self.len as i64);
    }
}

/// The body of every webhook answer.
#[derive(Debug)]
pub(crate) struct ReplyBody {
    rest: Bytes,
    /// Copies of at most [`CHUNK`] bytes rather than slices of `rest`.
    copy: bool,
    last_byte_alone: bool,
    /// This answer's bytes in its connection's share, when it came from a review.
    _held: Option<Held>,
    queued: Option<Queued>,
}

impl ReplyBody {
    pub(crate) fn new(bytes: Bytes) -> Self {
        Self {
            copy: bytes.len() > CHUNK,
            rest: bytes,
            last_byte_alone: false,
            _held: None,
            queued: None,
        }
    }

    /// Holds `held` (the answer's bytes in its connection's share) until
    /// hyper drops the body.
    pub(crate) fn holding(mut self, held: Held) -> Self {
        self._held = Some(held);
        self
    }

    /// Counts this answer in `outbox` and the server's gauges until hyper
    /// drops the body.
    pub(crate) fn queue_in(&mut self, outbox: &Arc<Outbox>) {
        let len = self.rest.len();
        // Waiting from now, unless answers before it still wait.
        if outbox.bytes.fetch_add(len, Ordering::Relaxed) == 0 {
            outbox.progressed();
        }
        outbox.answers.fetch_add(1, Ordering::Relaxed);
        outbox.metrics.answers_waiting.inc();
        outbox.metrics.answer_bytes_waiting.inc_by(len as i64);
        let outbox = outbox.clone();
        self.queued = Some(Queued { outbox, len });
    }

    /// For HTTP/2: an answer over [`HANDED_WHOLE`] bytes sends its last
    /// byte alone, after the rest has left the stream (module comment).
    pub(crate) fn last_byte_alone(&mut self) {
        self.last_byte_alone = self.rest.len() > HANDED_WHOLE;
    }

    fn next_chunk(&mut self) -> Bytes {
        let len = self.rest.len();
        if len == 1 && self.last_byte_alone {
            // Not a slice: it would keep the whole answer's allocation.
            let byte = usize::from(self.rest[0]);
            self.rest.clear();
            return Bytes::from_static(&EVERY_BYTE[byte..=byte]);
        }
        let take = match len {
            _ if self.last_byte_alone => (len - 1).min(CHUNK),
            _ => len.min(CHUNK),
        };
        if self.copy {
            let chunk = Bytes::copy_from_slice(&self.rest[..take]);
            self.rest.advance(take);
            chunk
        } else {
            self.rest.split_to(take)
        }
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.rest.is_empty() {
            return Poll::Ready(None);
        }
        let chunk = self.next_chunk();
        if let Some(queued) = &self.queued {
            queued.outbox.progressed();
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.rest.len() as u64)
    }
}

#[cfg(test)]
mod tests;
