//! What admissions' lookups hold, shared out between namespaces, so that
//! one namespace's pods cannot delay, fail or starve another's:
//!
//! - **turns**: at most `namespace_admissions` admissions of one namespace
//!   read the API server at once; one more is shed (503 with Retry-After,
//!   which the API server's webhook client retries) before it reads
//!   anything, whatever the other namespaces do;
//! - **bytes**: every GET body is charged as it arrives, never for a
//!   declared length: to the admission ([`PER_ADMISSION_BYTES`], a few of
//!   the largest objects the API server stores), to its namespace (a
//!   quarter of the pool) and to the pool (`lookup_bytes`), and given back
//!   when the admission ends. A GET that does not fit fails that admission
//!   alone, with a reason that names the object.
//!
//! Cache hits cost nothing here: the objects are shared with the cache.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Default bytes all admissions' GETs may hold at once.
pub(crate) const DEFAULT_LOOKUP_BYTES: usize = 8 << 20;
/// Default for how many admissions of one namespace read the API server at once.
pub(crate) const DEFAULT_NAMESPACE_ADMISSIONS: usize = 16;
/// What one admission's GETs may hold: the API server stores objects of
/// up to 1.5 MiB, whose JSON may be larger; a pod's lookups usually take a
/// few KiB.
pub(super) const PER_ADMISSION_BYTES: usize = 2 << 20;

#[derive(Debug, Default)]
struct Held {
    admissions: usize,
    bytes: usize,
}

#[derive(Debug)]
struct State {
    namespaces: HashMap<String, Held>,
    pooled: usize,
}

/// The shares of every namespace.
#[derive(Debug, Clone)]
pub(super) struct Shares {
    state: Arc<Mutex<State>>,
    pool: usize,
    per_namespace_bytes: usize,
    per_namespace_admissions: usize,
}

/// An admission that may not read the API server now; it is told to retry.
#[derive(Debug, Clone, thiserror::Error)]
#[error("namespace {namespace:?} has {admissions} pods reading cluster objects at once, its share of kserve-injector's lookups; retry")]
pub struct Shed {
    namespace: String,
    admissions: usize,
}

/// Why a GET's bytes could not be held.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OverBytes {
    #[error(
        "the objects this pod's lookups read are over {limit} bytes, what one admission may hold"
    )]
    Admission { limit: usize },
    #[error("namespace {namespace:?}'s lookups in flight hold {limit} bytes, its share of kserve-injector's; retry")]
    Namespace { namespace: String, limit: usize },
    #[error("every admission's lookups in flight hold {limit} bytes together (--max-lookup-bytes); retry")]
    Pool { limit: usize },
}

impl Shares {
    pub(super) fn new(pool: usize, per_namespace_admissions: usize) -> Self {
        let state = State {
            namespaces: HashMap::new(),
            pooled: 0,
        };
        Self {
            state: Arc::new(Mutex::new(state)),
            pool,
            per_namespace_bytes: (pool / 4).max(PER_ADMISSION_BYTES.min(pool)),
            per_namespace_admissions: per_namespace_admissions.max(1),
        }
    }

    fn locked(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A turn for one admission of `namespace`, or [`Shed`] when the
    /// namespace already holds its share.
    pub(super) fn enter(&self, namespace: &str) -> Result<Turn, Shed> {
        let mut state = self.locked();
        let held = state.namespaces.entry(namespace.to_string()).or_default();
        if held.admissions >= self.per_namespace_admissions {
            return Err(Shed {
                namespace: namespace.to_string(),
                admissions: held.admissions,
            });
        }
        held.admissions += 1;
        Ok(Turn {
            shares: self.clone(),
            namespace: namespace.to_string(),
            bytes: Mutex::new(0),
        })
    }
}

/// One admission's turn: its bytes are given back when it is dropped.
#[derive(Debug)]
pub(super) struct Turn {
    shares: Shares,
    namespace: String,
    bytes: Mutex<usize>,
}

impl Turn {
    /// Holds `n` more bytes for this admission, or says whose limit they
    /// would pass.
    pub(super) fn charge(&self, n: usize) -> Result<(), OverBytes> {
        let mut mine = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        if *mine + n > PER_ADMISSION_BYTES {
            return Err(OverBytes::Admission {
                limit: PER_ADMISSION_BYTES,
            });
        }
        let shares = &self.shares;
        let mut state = shares.locked();
        if state.pooled + n > shares.pool {
            return Err(OverBytes::Pool { limit: shares.pool });
        }
        let held = state.namespaces.entry(self.namespace.clone()).or_default();
        if held.bytes + n > shares.per_namespace_bytes {
            return Err(OverBytes::Namespace {
                namespace: self.namespace.clone(),
                limit: shares.per_namespace_bytes,
            });
        }
        held.bytes += n;
        state.pooled += n;
        *mine += n;
        Ok(())
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mine = *self.bytes.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut state = self.shares.locked();
        state.pooled -= mine;
        let gone = match state.namespaces.get_mut(&self.namespace) {
            Some(held) => {
                held.bytes -= mine;
                held.admissions -= 1;
                held.admissions == 0
            }
            None => false,
        };
        // Namespaces with nothing in flight hold no entry.
        if gone {
            state.namespaces.remove(&self.namespace);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_past_its_share_is_shed_and_others_are_not() {
        let shares = Shares::new(8 << 20, 2);
        let a1 = shares.enter("a").unwrap();
        let _a2 = shares.enter("a").unwrap();
        let shed = shares.enter("a").unwrap_err();
        assert!(shed.to_string().contains("\"a\" has 2 pods"), "{shed}");
        let b = shares.enter("b").unwrap();
        drop(a1);
        assert!(shares.enter("a").is_ok());
        drop(b);
        assert!(!shares.locked().namespaces.contains_key("b"));
    }

    #[test]
    fn bytes_are_charged_per_admission_namespace_and_pool_and_given_back() {
        let shares = Shares::new(8 << 20, 16);
        let a = shares.enter("a").unwrap();
        a.charge(PER_ADMISSION_BYTES).unwrap();
        let err = a.charge(1).unwrap_err();
        assert!(matches!(err, OverBytes::Admission { .. }), "{err}");
        // The namespace holds a quarter of the pool: 2 MiB, all a's.
        let a2 = shares.enter("a").unwrap();
        let err = a2.charge(1).unwrap_err();
        assert!(matches!(err, OverBytes::Namespace { .. }), "{err}");
        // Another namespace is not touched by a's bytes.
        let b = shares.enter("b").unwrap();
        b.charge(PER_ADMISSION_BYTES).unwrap();
        drop((a, a2, b));
        let state = shares.locked();
        assert_eq!((state.pooled, state.namespaces.len()), (0, 0));
    }
}
