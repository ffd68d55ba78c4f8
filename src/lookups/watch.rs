//! The watches that fill the caches, and what every cache can report.

use super::cache::{Cache, Filling};
use super::entry::{Entry, Named};
use super::reduce::collection;
use super::wire::Decode;
use kube::Client;
use std::sync::Arc;

pub(super) type CacheOf<T> = Option<Arc<Cache<T>>>;

/// What every cache can say whatever its key and value types.
pub(super) trait CacheState {
    fn is_synced(&self) -> bool;
    fn objects(&self) -> usize;
}

impl<T: Named> CacheState for Cache<T> {
    fn is_synced(&self) -> bool {
        self.synced()
    }
    fn objects(&self) -> usize {
        self.len()
    }
}

/// Spawns the watches filling `cache` of kind `D`, one per scope, when the
/// kind is watched (`cache` is `Some`).
pub(super) fn spawn_watch<D: Decode>(
    client: &Client,
    cache: &CacheOf<D::Object>,
    scopes: &[Option<String>],
    how: Filling,
) -> Vec<tokio::task::JoinHandle<()>> {
    let Some(cache) = cache.as_ref() else {
        return Vec::new();
    };
    let watch = |scope: &Option<String>| {
        let at = collection(D::KIND, scope.as_deref());
        let run = super::cache::run::<D>(client.clone(), at, scope.clone(), how, cache.clone());
        tokio::spawn(run)
    };
    scopes.iter().map(watch).collect()
}

/// Fills `cache`, when the kind is watched, with a complete listing.
pub(super) fn preload<T: Named>(cache: &CacheOf<T>, entries: impl IntoIterator<Item = Entry<T>>) {
    if let Some(c) = cache {
        c.replace_all(entries);
    }
}
