//! One watch cache: a LIST then a WATCH from its resourceVersion
//! (`stream.rs`, each object decoded on its own into what the core reads,
//! `wire.rs`) feeding a map of reduced objects, keyed by the core's own key
//! types so a lookup borrows the key it was given. What the map holds is
//! charged in bytes (each value's `Decode::weight`) against the kind's share
//! of the caches' budget, as the objects arrive.

use super::metrics::KindMetrics;
use super::options::StreamingLists;
use super::reduce::Collection;
use super::stream::{self, Change, StreamError};
use super::wire::{Decode, Scoped};
use kube::Client;
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

/// After any watch error the watch is dropped and rebuilt from a fresh LIST.
/// kube-runtime would resume from the last resourceVersion, and when the API
/// server's storage was reset (etcd restored or re-created) that version
/// either fails forever ("too large") or, once the new storage has passed
/// it, succeeds and silently skips every object written before: the cache
/// would stay wrong with no further error. A relist is always right.
///
/// The pause before a rebuild starts at [`RELIST_PAUSE`] and doubles up to
/// [`RELIST_PAUSE_MAX`] while rebuilds keep failing, so a persistent error
/// (RBAC, an API server that is down) does not spin. The longest pause is
/// short because the usual errors are an API server's restart: refused
/// connections while it is down, then 403s and 5xxs for a few seconds while
/// its RBAC and storage catch up. With a 30 s maximum, those start-up
/// errors alone pushed the first good relist 30 s past the API server's
/// return; with 4 s, a cache is back within 4 s plus its LIST. A failing
/// request costs the API server little, and a watch that fails right after
/// every LIST keeps the longest pause: the pause goes back to the start
/// only once a watch has run [`HEALTHY_AFTER`] without an error.
const RELIST_PAUSE: Duration = Duration::from_millis(500);
const RELIST_PAUSE_MAX: Duration = Duration::from_secs(4);
const HEALTHY_AFTER: Duration = Duration::from_secs(30);

/// Reduced objects by key, filled by one watch per scope (the whole
/// cluster, or each namespace of `--namespaces`), and how many scopes have
/// not applied a full LIST yet.
#[derive(Debug)]
pub(super) struct Cache<K, T> {
    map: RwLock<HashMap<K, T>>,
    /// Bumped by every change, under the map's write lock.
    generation: AtomicU64,
    unlisted: AtomicUsize,
    /// At most this many bytes held (the kind's share of the caches'
    /// budget), as `weigh` counts them.
    cap: Option<u64>,
    /// Bytes held now.
    bytes: AtomicU64,
    weigh: fn(&K, &T) -> usize,
    /// Set once the cap was reached: the cache is empty for good and the
    /// kind is read as an unwatched one.
    over_budget: AtomicBool,
    pub(super) metrics: KindMetrics,
}

impl<K: Hash + Eq, T> Cache<K, T> {
    #[cfg(test)]
    pub(super) fn new(metrics: KindMetrics, scopes: usize) -> Self {
        Self::capped(metrics, scopes, None, |_, _| 0)
    }

    /// A cache that gives up beyond `cap` bytes, each value weighing what
    /// `weigh` says.
    pub(super) fn capped(
        metrics: KindMetrics,
        scopes: usize,
        cap: Option<u64>,
        weigh: fn(&K, &T) -> usize,
    ) -> Self {
        // Not listed yet: not in sync with the API server.
        metrics.stale.set(scopes as i64);
        Self {
            cap,
            bytes: AtomicU64::new(0),
            weigh,
            over_budget: AtomicBool::new(false),
            map: RwLock::new(HashMap::new()),
            generation: AtomicU64::new(0),
            unlisted: AtomicUsize::new(scopes),
            metrics,
        }
    }

    /// True once every scope's LIST has been applied (stays true while a
    /// watch reconnects: misses then go to the API server).
    pub(super) fn synced(&self) -> bool {
        self.unlisted.load(Ordering::Acquire) == 0
    }

    /// True once the cache gave up at its cap: lookups go to the API server.
    pub(super) fn over_budget(&self) -> bool {
        self.over_budget.load(Ordering::Acquire)
    }

    /// Whether the bytes held are more than the cap allows.
    fn beyond_cap(&self) -> bool {
        (self.cap).is_some_and(|cap| self.bytes.load(Ordering::Acquire) > cap)
    }

    /// Bytes held now, as the values' weights add up.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire)
    }

    fn held(&self, key: &K, added: Option<&T>, removed: Option<&T>) {
        let weight = |v: Option<&T>| v.map_or(0, |v| (self.weigh)(key, v) as u64);
        self.bytes.fetch_add(weight(added), Ordering::AcqRel);
        self.bytes.fetch_sub(weight(removed), Ordering::AcqRel);
    }

    /// Drops every object and stops caching for good (see `budget.rs`).
    fn give_up(&self, kind: &'static str) {
        if self.over_budget.swap(true, Ordering::AcqRel) {
            return;
        }
        *self.write() = HashMap::new();
        self.bytes.store(0, Ordering::Release);
        self.metrics.objects.set(0);
        self.metrics.over_budget.set(1);
        self.metrics.stale.set(0);
        // Counts as listed, so `/readyz` does not wait for it.
        self.unlisted.store(0, Ordering::Release);
        tracing::error!(
            kind,
            cap_bytes = self.cap,
            "the watch cache reached its share of the memory limit: it is dropped, and this kind is read from the API server for each admission that needs it"
        );
    }

    pub(super) fn read(&self) -> RwLockReadGuard<'_, HashMap<K, T>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn len(&self) -> usize {
        self.read().len()
    }

    /// Changes so far: equal generations, equal contents.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The map, for a change: the generation moves before the lock is let go.
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<K, T>> {
        let map = self.map.write().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        map
    }

    /// Adds or replaces one object (a watch `Apply`).
    pub(super) fn insert(&self, key: K, value: T) {
        use std::collections::hash_map::Entry;
        let mut map = self.write();
        match map.entry(key) {
            Entry::Occupied(mut e) => {
                self.held(e.key(), Some(&value), Some(e.get()));
                e.insert(value);
            }
            Entry::Vacant(e) => {
                self.held(e.key(), Some(&value), None);
                e.insert(value);
            }
        }
        self.metrics.objects.set(map.len() as i64);
    }

    pub(super) fn remove(&self, key: &K) {
        let mut map = self.write();
        let old = map.remove(key);
        self.held(key, None, old.as_ref());
        self.metrics.objects.set(map.len() as i64);
    }

    /// Replaces everything with a complete listing and marks the cache synced.
    pub(super) fn replace_all(&self, listed: HashMap<K, T>) {
        let len = listed.len();
        let bytes: u64 = listed.iter().map(|(k, v)| (self.weigh)(k, v) as u64).sum();
        let mut map = self.write();
        *map = listed;
        self.bytes.store(bytes, Ordering::Release);
        drop(map);
        self.metrics.objects.set(len as i64);
        self.metrics.stale.set(0);
        self.unlisted.store(0, Ordering::Release);
    }
}

impl<K: Hash + Eq + Scoped, T> Cache<K, T> {
    /// After a complete listing of `scope` (all of it for `None`) was
    /// applied in place: drops that scope's entries the listing did not
    /// name (deleted meanwhile); `first` counts the scope as listed.
    fn listed_scope(&self, scope: Option<&str>, listed: &HashSet<K>, first: bool) {
        let mut map = self.write();
        map.retain(|k, v| {
            let keep = match scope {
                None => listed.contains(k),
                Some(ns) => k.namespace() != Some(ns) || listed.contains(k),
            };
            if !keep {
                self.held(k, None, Some(v));
            }
            keep
        });
        self.metrics.objects.set(map.len() as i64);
        if first {
            self.unlisted.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What every watch cache is filled with: the objects' bounds and how it
/// lists.
#[derive(Debug, Clone, Copy)]
pub(super) struct Filling {
    pub(super) bounds: super::wire::Bounds,
    pub(super) lists: StreamingLists,
}

/// Runs the watch of `at` (the whole of `scope`: a namespace, or the
/// cluster for `None`) into `cache` until the task is aborted.
pub(super) async fn run<D: Decode>(
    client: Client,
    at: Collection,
    scope: Option<String>,
    how: Filling,
    cache: Arc<Cache<D::Key, D::Value>>,
) {
    let kind = D::KIND.label();
    let namespace = scope.as_deref().unwrap_or("(all)");
    let bounds = how.bounds;
    let mut streaming = how.lists == StreamingLists::Auto;
    let mut pause = RELIST_PAUSE;
    let mut listed_once = false;
    // Counted in the kind's `stale` gauge from `Cache::new` until listed.
    let mut in_sync = false;
    loop {
        let mut listed_at = None;
        // A listing is applied in place as its items arrive, so a relist
        // holds the objects once (and the keys seen), not twice; until it is
        // done the cache mixes the old and the new state of objects.
        let listed = Arc::new(std::sync::Mutex::new(HashSet::<D::Key>::new()));
        let (filling, keys) = (cache.clone(), listed.clone());
        let each = move |head: &super::wire::Head, text: &str| {
            let key = D::key(head);
            filling.insert(key.clone(), D::value(head, text, bounds));
            keys.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
            if filling.beyond_cap() {
                filling.give_up(kind);
                return Err(StreamError::OverBudget);
            }
            Ok(())
        };
        let listing = if streaming {
            stream::streaming_list(&client, &at, each).await
        } else {
            stream::list(&client, &at, each).await
        };
        if let Err(StreamError::NoStreamingLists(reason)) = &listing {
            tracing::info!(
                kind,
                namespace,
                reason,
                "the API server offers no streaming lists: listing in pages"
            );
            streaming = false;
            continue;
        }
        let listed = std::mem::take(&mut *listed.lock().unwrap_or_else(|e| e.into_inner()));
        let ended = match listing {
            Ok(mut version) => {
                cache.listed_scope(scope.as_deref(), &listed, !listed_once);
                match streaming {
                    true => cache.metrics.streaming_lists.inc(),
                    false => cache.metrics.paged_lists.inc(),
                };
                drop(listed);
                listed_once = true;
                listed_at = Some(tokio::time::Instant::now());
                if !in_sync {
                    in_sync = true;
                    cache.metrics.stale.dec();
                }
                tracing::debug!(
                    kind,
                    namespace,
                    objects = cache.len(),
                    bytes = cache.bytes(),
                    "watch cache listed"
                );
                loop {
                    let started = tokio::time::Instant::now();
                    let watched = stream::watch(&client, &at, &mut version, |change| {
                        match change {
                            Change::Apply(head, text) => {
                                cache.insert(D::key(head), D::value(head, text, bounds));
                                if cache.beyond_cap() {
                                    cache.give_up(kind);
                                    return Err(StreamError::OverBudget);
                                }
                            }
                            Change::Delete(head) => cache.remove(&D::key(head)),
                        }
                        Ok(())
                    })
                    .await;
                    // A watch the server closed at its timeout: resume (not
                    // at once if it closed at once, so that cannot spin).
                    if let Err(e) = watched {
                        break e;
                    }
                    if started.elapsed() < Duration::from_secs(1) {
                        tokio::time::sleep(RELIST_PAUSE).await;
                    }
                }
            }
            Err(e) => e,
        };
        if cache.over_budget() {
            return;
        }
        if !matches!(ended, StreamError::Gone) {
            cache.metrics.watch_errors.inc();
            let error = crate::log_text::bounded(&ended);
            tracing::warn!(kind, namespace, %error, "cluster watch error");
        }
        // Admissions keep reading what the cache holds; the gauge says it
        // may be behind until the next LIST is applied.
        if in_sync {
            in_sync = false;
            cache.metrics.stale.inc();
        }
        if listed_at.is_some_and(|at: tokio::time::Instant| at.elapsed() >= HEALTHY_AFTER) {
            pause = RELIST_PAUSE;
        }
        tracing::info!(
            kind,
            namespace,
            pause_ms = pause.as_millis() as u64,
            "rebuilding the cluster watch from a fresh list"
        );
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RELIST_PAUSE_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kserve_injector_core::cluster::ObjectRef;

    /// Applies a listing of `ns` in place, as the watch does.
    fn list(cache: &Cache<ObjectRef, u8>, ns: &str, names: &[&str], first: bool) {
        let keys: HashSet<ObjectRef> = names.iter().map(|n| ObjectRef::new(ns, *n)).collect();
        for k in &keys {
            cache.insert(k.clone(), 0);
        }
        cache.listed_scope(Some(ns), &keys, first);
    }

    #[test]
    fn a_namespace_listing_replaces_that_namespace_only_and_all_must_list() {
        let cache = Cache::new(KindMetrics::default(), 2);
        list(&cache, "a", &["x", "y"], true);
        assert!(!cache.synced(), "b has not listed yet");
        list(&cache, "b", &["x"], true);
        assert!(cache.synced());
        // a relists after a watch error: y was deleted meanwhile.
        list(&cache, "a", &["x"], false);
        assert!(cache.synced());
        let mut keys: Vec<String> = cache.read().keys().map(|k| k.to_string()).collect();
        keys.sort();
        assert_eq!(keys, ["a/x", "b/x"]);
        assert_eq!(cache.metrics.objects.get(), 2);
    }

    #[test]
    fn a_cache_past_its_cap_gives_up_and_counts_as_listed() {
        let metrics = KindMetrics::default();
        // Each object weighs its value, in bytes.
        let cache = Cache::capped(metrics.clone(), 1, Some(20), |_, v: &u8| *v as usize);
        for n in ["x", "y"] {
            cache.insert(ObjectRef::new("a", n), 10u8);
        }
        assert!(!cache.beyond_cap());
        // A replaced object gives its old bytes back.
        cache.insert(ObjectRef::new("a", "y"), 5);
        assert_eq!(cache.bytes(), 15);
        cache.insert(ObjectRef::new("a", "z"), 6);
        assert!(cache.beyond_cap());
        cache.give_up("serviceaccounts");
        assert!(cache.over_budget() && cache.synced());
        assert_eq!(
            (
                cache.len(),
                metrics.objects.get(),
                metrics.over_budget.get()
            ),
            (0, 0, 1)
        );
    }
}
