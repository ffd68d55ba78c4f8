//! Reading a request body: under the byte budget and the body limit, kept
//! as it came when it came in one frame; and draining the body of a request
//! answered without it.

use super::api_error::{too_large, ApiError};
use axum::body::Bytes;
use axum::http::header::CONNECTION;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Version};
use http_body_util::{BodyExt, LengthLimitError};
use hyper::body::Body as HttpBody;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Reads and drops the body of a request answered without it, so that its
/// HTTP/1.1 connection can carry the next request: hyper closes a
/// connection whose request body was left unread unless the rest is
/// already buffered (`poll_drain_or_close_read`), and a client reusing it
/// then meets EOF. Bounded by the body limit and the request timeout. When
/// the body cannot be read to its end, the answer says `Connection: close`
/// (HTTP/1; HTTP/2 resets just the stream).
pub(crate) async fn drained<B: HttpBody + Unpin>(version: Version, mut body: B) -> HeaderMap {
    let mut headers = HeaderMap::new();
    while let Some(frame) = body.frame().await {
        if frame.is_err() {
            if version < Version::HTTP_2 {
                headers.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            break;
        }
    }
    headers
}

/// Collects the body, holding one budget permit per byte until the review
/// is answered; over the budget the request is shed (503) rather than queued,
/// since waiting while holding part of the budget could deadlock. A body
/// that arrives in one frame is kept as it came, not copied.
pub(crate) async fn read_body<B>(
    budget: &Arc<Semaphore>,
    mut body: B,
) -> Result<(Bytes, OwnedSemaphorePermit), ApiError>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    let reserve = |n: u32| {
        let message = "too many request bytes buffered by the server; retry";
        let shed = |_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message);
        budget.clone().try_acquire_many_owned(n).map_err(shed)
    };
    // A declared length is reserved whole before anything is read, so a
    // request that cannot fit is refused without buffering any of it.
    let declared = body.size_hint().exact().map(u32::try_from);
    let declared = declared.transpose().map_err(|_| too_large())?;
    let mut held = reserve(declared.unwrap_or(0))?;
    let mut first: Option<Bytes> = None;
    let mut buffer = Vec::new();
    while let Some(frame) = body.frame().await {
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
        if declared.is_none() {
            let len = u32::try_from(data.len()).map_err(|_| too_large())?;
            held.merge(reserve(len)?);
        }
        match first.take() {
            None if buffer.is_empty() => first = Some(data),
            earlier => {
                if let Some(earlier) = earlier {
                    let capacity = declared.map_or(0, |n| n as usize).max(2 * earlier.len());
                    buffer.reserve(capacity);
                    buffer.extend_from_slice(&earlier);
                }
                buffer.extend_from_slice(&data);
            }
        }
    }
    let body = first.unwrap_or_else(|| Bytes::from(buffer));
    if body.is_empty() {
        let message = "request body is empty: expected an AdmissionReview";
        return Err(ApiError::new(StatusCode::BAD_REQUEST, message));
    }
    Ok((body, held))
}

#[cfg(test)]
mod tests;
