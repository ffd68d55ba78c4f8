//! The webhook's error replies: a status and `{"error": ...}`, with
//! `Retry-After` on 503 so a shed client knows to come back.

use super::reply::ReplyBody;
use crate::limits::MAX_BODY_BYTES;
use axum::body::Bytes;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, Response, StatusCode};

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// The server's reply to one request: a whole body, which hyper sends as
/// it is (the core's `Reviewed` is its AdmissionReview answer, carried in it).
pub(crate) type Reply = Response<ReplyBody>;

/// Every error the webhook answers with: a status and the `error` text.
#[derive(Debug)]
pub(crate) struct ApiError(pub(crate) StatusCode, String);

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self(status, message.into())
    }

    pub(crate) fn reply(self) -> Reply {
        let body = serde_json::json!({ "error": self.1 }).to_string();
        let mut response = json_reply(self.0, body);
        if self.0 == StatusCode::SERVICE_UNAVAILABLE {
            let retry = HeaderValue::from_static("1");
            response.headers_mut().insert(RETRY_AFTER, retry);
        }
        response
    }

    /// The reply, with `headers` added (`Connection: close`, `Allow`).
    pub(crate) fn reply_with(self, headers: HeaderMap) -> Reply {
        let mut response = self.reply();
        response.headers_mut().extend(headers);
        response
    }
}

pub(crate) fn json_reply(status: StatusCode, body: impl Into<Bytes>) -> Reply {
    json_body(status, ReplyBody::new(body.into()))
}

pub(crate) fn json_body(status: StatusCode, body: ReplyBody) -> Reply {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, JSON);
    response
}

pub(crate) fn too_large() -> ApiError {
    let message = format!("request body is larger than {MAX_BODY_BYTES} bytes");
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, message)
}
