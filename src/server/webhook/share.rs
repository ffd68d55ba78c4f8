//! A connection's share of what the server holds for its clients, so that
//! no client can take what another needs while it waits:
//!
//! - **bytes**: what a connection's request bodies and answers hold is
//!   charged as it arrives (never for a declared length), first to an
//!   allowance of the connection's own ([`OWN_BYTES`], the size of a review
//!   reviewed inline: a small review and its answer always fit, whatever
//!   other connections hold), then to the server's byte budget
//!   (`--max-buffered-bytes`), of which one connection may hold only a part
//!   ([`Budget::per_connection`]);
//! - **eviction**: the token that tells the connection, and its requests
//!   still waiting for their bodies, that a new connection at the
//!   connection cap has taken its slot.
//!
//! Requests in flight are shared out by the listener (at most
//! `--http2-max-concurrent-streams` per connection, `conn/`), and the
//! memory all of it may take is planned in `sizing.rs`.

use crate::limits::MAX_BODY_BYTES;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The bytes each connection may hold of its own, besides the byte budget:
/// a review up to the size reviewed inline (`service.rs`) and its answer.
pub(crate) const OWN_BYTES: usize = 64 * 1024;

/// One connection's share.
#[derive(Debug, Default)]
pub(crate) struct Share {
    /// Bytes held from the connection's own allowance.
    own: AtomicUsize,
    /// Bytes held from the server's byte budget.
    pooled: AtomicUsize,
    /// Cancelled when a new connection at the cap takes this one's slot.
    pub(crate) evict: CancellationToken,
}

impl Share {
    /// Bytes this connection holds of the server's byte budget.
    #[cfg(test)]
    pub(crate) fn pooled(&self) -> usize {
        self.pooled.load(Ordering::Relaxed)
    }
}

/// The server's byte budget (`--max-buffered-bytes`): request bodies while
/// they are read, answers until hyper has taken them.
#[derive(Debug)]
pub(crate) struct Budget {
    pool: Arc<Semaphore>,
    /// The most one connection may hold of the pool: a quarter of it, but
    /// never less than one largest body, which must fit.
    per_connection: usize,
}

/// Why bytes could not be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// The byte budget is spent.
    Server,
    /// The connection holds its part of the byte budget already.
    Connection,
}

/// Bytes held for one request body or answer, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    share: Option<Arc<Share>>,
    own: usize,
    pooled: Option<OwnedSemaphorePermit>,
}

impl Budget {
    pub(crate) fn new(bytes: usize) -> Self {
        Self {
            pool: Arc::new(Semaphore::new(bytes)),
            per_connection: (bytes / 4).max(MAX_BODY_BYTES).min(bytes),
        }
    }

    /// The most one connection may hold of the budget.
    pub(crate) fn per_connection(&self) -> usize {
        self.per_connection
    }

    /// Nothing held yet, for a request or answer of `share`'s connection
    /// (`None`: a router called without a connection, as in tests).
    pub(crate) fn hold(share: Option<&Arc<Share>>) -> Held {
        Held {
            share: share.cloned(),
            own: 0,
            pooled: None,
        }
    }

    /// Holds `n` more bytes in `held`: from its connection's own allowance
    /// while that has room, else from the byte budget.
    pub(crate) fn take(&self, held: &mut Held, n: usize) -> Result<(), Full> {
        if let Some(share) = &held.share {
            let before = share.own.fetch_add(n, Ordering::Relaxed);
            if before + n <= OWN_BYTES {
                held.own += n;
                return Ok(());
            }
            share.own.fetch_sub(n, Ordering::Relaxed);
            let before = share.pooled.fetch_add(n, Ordering::Relaxed);
            if before + n > self.per_connection {
                share.pooled.fetch_sub(n, Ordering::Relaxed);
                return Err(Full::Connection);
            }
        }
        let permit = u32::try_from(n)
            .ok()
            .and_then(|n| self.pool.clone().try_acquire_many_owned(n).ok());
        let Some(permit) = permit else {
            if let Some(share) = &held.share {
                share.pooled.fetch_sub(n, Ordering::Relaxed);
            }
            return Err(Full::Server);
        };
        match &mut held.pooled {
            Some(pooled) => pooled.merge(permit),
            none => *none = Some(permit),
        }
        Ok(())
    }

    /// Bytes of the pool not held by anyone.
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.pool.available_permits()
    }
}

impl Held {
    /// Bytes held, in all.
    pub(crate) fn bytes(&self) -> usize {
        self.own + self.pooled.as_ref().map_or(0, |p| p.num_permits())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(share) = &self.share else { return };
        if self.own > 0 {
            share.own.fetch_sub(self.own, Ordering::Relaxed);
        }
        if let Some(pooled) = &self.pooled {
            share
                .pooled
                .fetch_sub(pooled.num_permits(), Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests;
