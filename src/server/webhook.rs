//! One request to the webhook, from the HTTP request hyper hands over to
//! the reply it sends back, without sockets or TLS (`conn/` serves it), so
//! the router can be called in-process. It never panics the process and
//! always replies: malformed requests get a 4xx, overload a 503 with
//! Retry-After, a bug a 500, a stalled request a 504, every error as
//! `{"error": ...}`.
//!
//! | file | what it holds |
//! |---|---|
//! | `service.rs` | the request's path, stage by stage, in the order it meets them |
//! | `body.rs` | reading a body at its pace, charged as it arrives; draining one refused |
//! | `share.rs` | a connection's share of the bytes held, and the server's byte budget |
//! | `reply.rs` | a reply's body as hyper sends it, counted while the server holds it |
//! | `errors.rs` | the error replies: a status and `{"error": ...}` |
//! | `app.rs` | the routers' inputs, and one router's state read through its methods |
//! | `observation.rs`, `summary.rs` | what is recorded of each review, and the periodic summary |

mod app;
mod body;
mod errors;
mod observation;
pub(crate) mod reply;
mod service;
pub(crate) mod share;
mod summary;

pub use app::RouterInputs;
pub(crate) use service::{webhook, WebhookService};

use axum::Router;

impl RouterInputs {
    /// The webhook router (`POST /mutate-pods`, `POST /mutate`) with its
    /// error handling and limits. Each call gets its own concurrency limit
    /// and byte budget.
    pub fn webhook_router(&self) -> Router {
        Router::new().fallback_service(webhook(self))
    }
}
