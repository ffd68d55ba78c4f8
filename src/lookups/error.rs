//! A lookup that could not be answered.

use std::sync::Arc;
use std::time::Duration;

/// A lookup that could not be answered; admission must fail with it.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error("cluster lookup of {kind} {key}: the API server did not answer within {after:?}")]
    Timeout {
        kind: &'static str,
        key: String,
        after: Duration,
    },
    #[error("cluster lookup of {kind} {key} failed: {source}")]
    Api {
        kind: &'static str,
        key: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("cluster lookup of {kind}: {source}")]
    Invalid {
        kind: &'static str,
        source: super::reduce::InvalidObject,
    },
    /// The pod's namespace already has its share of lookups in flight.
    #[error(transparent)]
    Shed(#[from] super::Shed),
    /// A GET's body did not fit in what the admission may hold.
    #[error("cluster lookup of {kind} {key}: {source}")]
    OverBytes {
        kind: &'static str,
        key: String,
        #[source]
        source: super::shares::OverBytes,
    },
    #[error("cluster lookup of every {kind} failed: {error}")]
    List { kind: &'static str, error: String },
    /// The error of a GET that several admissions waited for.
    #[error(transparent)]
    Shared(Arc<LookupError>),
}
