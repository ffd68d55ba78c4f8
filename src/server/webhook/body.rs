//! Reading a request body: at its pace, charged for what has arrived, kept
//! as it came when it came in one frame; and draining the body of a request
//! answered without it.
//!
//! A body is granted time and bytes for what it delivers, never for what it
//! declares: its bytes are charged to its connection's share as they arrive
//! (`share.rs`), the buffer they are joined in grows with them, and it must
//! keep [`Pace`]: a body still arriving `--body-timeout` after its request's
//! head plus the time its bytes so far take at `--min-body-rate` is answered
//! 408 (its stream reset over HTTP/2 once the answer is sent). A body that
//! is in hand when the request is answered costs nothing of this: the timer
//! is armed only when a frame has to be waited for.

use super::errors::{too_large, ApiError};
use super::share::{Budget, Full, Held, Share};
use crate::server::limits::Pace;
use axum::body::Bytes;
use axum::http::header::CONNECTION;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Version};
use futures::FutureExt;
use http_body_util::{BodyExt, LengthLimitError};
use hyper::body::{Body as HttpBody, Frame};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio::time::Sleep;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request as it arrived: its connection's share (none when the router
/// is called without a connection) and when its head arrived, from which
/// its body's pace runs.
pub(crate) struct Arrival {
    pub share: Option<Arc<Share>>,
    pub start: Instant,
}

/// Why a body stopped being waited for.
enum Stop {
    /// It fell behind its pace.
    Pace { received: usize },
    /// Its connection was taken for a new one at the connection cap.
    Evicted,
}

impl Stop {
    fn refusal(self, start: Instant, pace: &Pace) -> ApiError {
        match self {
            Stop::Pace { received } => {
                let message = format!(
                    "the request body did not arrive in time: {received} bytes in {:.1} s, where a body may take {} s plus 1 s per {} bytes (--body-timeout, --min-body-rate)",
                    start.elapsed().as_secs_f64(),
                    pace.timeout.as_secs_f64(),
                    pace.min_rate,
                );
                ApiError::new(StatusCode::REQUEST_TIMEOUT, message)
            }
            Stop::Evicted => {
                let message = "this connection was closed for a new one at the server's connection limit before the request body arrived; retry";
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
            }
        }
    }
}

/// The frames of a body, each waited for only as long as its pace allows.
struct Frames<'a, B> {
    body: B,
    arrival: &'a Arrival,
    pace: &'a Pace,
    received: usize,
    /// Armed at the first frame that has to be waited for.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<'a, B: HttpBody + Unpin> Frames<'a, B> {
    fn new(body: B, arrival: &'a Arrival, pace: &'a Pace) -> Self {
        Self {
            body,
            arrival,
            pace,
            received: 0,
            timer: None,
        }
    }

    async fn next(&mut self) -> Result<Option<Result<Frame<B::Data>, B::Error>>, Stop> {
        // A frame already in hand needs no timer.
        if let Some(frame) = self.body.frame().now_or_never() {
            return Ok(frame);
        }
        let Self {
            body,
            arrival,
            pace,
            received,
            timer,
        } = self;
        let deadline = pace.deadline(arrival.start, *received).into();
        let timer = match timer {
            Some(timer) => {
                timer.as_mut().reset(deadline);
                timer
            }
            none => none.insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        let evicted = async {
            match &arrival.share {
                Some(share) => share.evict.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            frame = body.frame() => Ok(frame),
            _ = timer.as_mut() => Err(Stop::Pace { received: *received }),
            _ = evicted => Err(Stop::Evicted),
        }
    }
}

/// Reads and drops the body of a request answered without it, so that its
/// HTTP/1.1 connection can carry the next request: hyper closes a
/// connection whose request body was left unread unless the rest is
/// already buffered (`poll_drain_or_close_read`), and a client reusing it
/// then meets EOF. Bounded by the body limit and the body's pace. When the
/// body cannot be read to its end, the answer says `Connection: close`
/// (HTTP/1; HTTP/2 resets just the stream).
pub(crate) async fn drained<B: HttpBody + Unpin>(
    version: Version,
    body: B,
    arrival: &Arrival,
    pace: &Pace,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut frames = Frames::new(body, arrival, pace);
    loop {
        match frames.next().await {
            Ok(None) => break,
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    frames.received += hyper::body::Buf::remaining(data);
                }
            }
            Ok(Some(Err(_))) | Err(_) => {
                if version < Version::HTTP_2 {
                    headers.insert(CONNECTION, HeaderValue::from_static("close"));
                }
                break;
            }
        }
    }
    headers
}

/// Collects the body at its pace, holding what it holds in its
/// connection's share until the review is answered; a body that does not
/// fit is refused (503) rather than queued, since waiting while holding
/// part of the budget could deadlock. A body that arrives in one frame is
/// kept as it came, not copied; one of several frames is joined into a
/// buffer that grows with what arrived (at most twice it, and never past
/// the body's limit), its capacity charged.
pub(crate) async fn read_body<B>(
    budget: &Budget,
    arrival: &Arrival,
    pace: &Pace,
    body: B,
) -> Result<(Bytes, Held), ApiError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    // The body's limit: its declared length (over the body limit it was
    // refused from the head alone), or the body limit.
    let limit = body.size_hint().upper().map_or(usize::MAX, |n| n as usize);
    let mut held = Budget::hold(arrival.share.as_ref());
    let mut frames = Frames::new(body, arrival, pace);
    let mut first: Option<Bytes> = None;
    let mut buffer = Vec::new();
    loop {
        let frame = match frames.next().await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(stop) => return Err(stop.refusal(arrival.start, pace)),
        };
        let frame = frame.map_err(|e| match e.into() {
            inner if inner.is::<LengthLimitError>() => too_large(),
            inner => {
                let message = format!("cannot read request body: {inner}");
                ApiError::new(StatusCode::BAD_REQUEST, message)
            }
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        frames.received += data.len();
        if first.is_none() && buffer.is_empty() {
            charge(budget, &mut held, data.len())?;
            first = Some(data);
            continue;
        }
        let needed = frames.received;
        if needed > buffer.capacity() {
            let capacity = (2 * needed).min(limit).max(needed);
            charge(budget, &mut held, capacity)?;
            buffer.reserve_exact(capacity - buffer.len());
        }
        if let Some(earlier) = first.take() {
            buffer.extend_from_slice(&earlier);
        }
        buffer.extend_from_slice(&data);
    }
    let body = first.unwrap_or_else(|| Bytes::from(buffer));
    if body.is_empty() {
        let message = "request body is empty: expected an AdmissionReview";
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    Ok((body, held))
}

/// Holds `held` up to `holding` bytes in all.
fn charge(budget: &Budget, held: &mut Held, holding: usize) -> Result<(), ApiError> {
    let more = holding.saturating_sub(held.bytes());
    if more == 0 {
        return Ok(());
    }
    budget.take(held, more).map_err(refused)
}

/// The 503 for bytes that do not fit.
pub(crate) fn refused(full: Full) -> ApiError {
    let message = match full {
        Full::Server => "too many request bytes buffered by the server; retry",
        Full::Connection => "this connection's requests hold their part of the bytes the server buffers; retry, or send on another connection",
    };
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
}

#[cfg(test)]
mod tests;
