//! The watches that fill the caches, and what every cache can report.

use super::cache::Cache;
use super::reduce::Reduce;
use kube::runtime::watcher;
use kube::Api;
use std::hash::Hash;
use std::sync::Arc;

pub(super) fn watch_all() -> watcher::Config {
    watcher::Config::default()
}

/// Secrets: Helm's release records (often hundreds of KiB each, never a
/// credential) are left out of the cache, should a pod ever name one it is
/// fetched by the fallback GET; and LIST pages are kept small, because a page
/// is held whole (unreduced) until its objects are reduced.
pub(super) fn watch_secrets() -> watcher::Config {
    watcher::Config::default()
        .fields(SECRET_FIELD_SELECTOR)
        .page_size(SECRET_PAGE_SIZE)
}

pub const SECRET_FIELD_SELECTOR: &str = "type!=helm.sh/release.v1";
const SECRET_PAGE_SIZE: u32 = 100;

pub(super) type CacheOf<K, T> = Option<Arc<Cache<K, T>>>;

/// What every cache can say whatever its key and value types.
pub(super) trait CacheState {
    fn is_synced(&self) -> bool;
    fn objects(&self) -> usize;
}

impl<K: Hash + Eq, T> CacheState for Cache<K, T> {
    fn is_synced(&self) -> bool {
        self.synced()
    }
    fn objects(&self) -> usize {
        self.len()
    }
}

/// Spawns the watches filling `cache`, one per scope, when the kind is
/// watched (`cache` is `Some`).
pub(super) fn spawn_watch<O, R>(
    cache: &CacheOf<R::Key, R::Value>,
    scopes: &[Option<String>],
    api: impl Fn(&Option<String>) -> Api<O>,
    config: watcher::Config,
    reduce: R,
) -> Vec<tokio::task::JoinHandle<()>>
where
    O: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    R: Reduce<O> + Clone,
{
    let Some(cache) = cache.as_ref() else {
        return Vec::new();
    };
    let watch = |scope: &Option<String>| {
        let run = super::cache::run(
            api(scope),
            scope.clone(),
            config.clone(),
            reduce.clone(),
            cache.clone(),
        );
        tokio::spawn(run)
    };
    scopes.iter().map(watch).collect()
}

/// Fills `cache`, when the kind is watched, with a complete listing.
pub(super) fn preload<K: Hash + Eq, T>(
    cache: &CacheOf<K, T>,
    entries: impl IntoIterator<Item = (K, T)>,
) {
    if let Some(c) = cache {
        c.replace_all(entries.into_iter().collect());
    }
}
