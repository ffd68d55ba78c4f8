//! One watch cache: a LIST then a WATCH from its resourceVersion
//! (`stream.rs`, each object decoded on its own into what the core reads,
//! `wire.rs`) feeding a set of reduced objects, each found by its namespace
//! and name, which it holds itself: a key is not a second copy of them,
//! and a lookup borrows the key it was given. What the set holds is
//! charged in bytes (each entry's weight, and the interned namespaces)
//! against the kind's share of the caches' budget, as the objects arrive.

use super::entry::{Entry, Listed, Named, Slot};
use super::metrics::KindMetrics;
use super::names::Names;
use super::options::StreamingLists;
use super::reduce::Collection;
use super::stream::{self, Change, StreamError};
use super::wire::Decode;
use kube::Client;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
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

/// Reduced objects, each found by its namespace and name, filled by one
/// watch per scope (the whole cluster, or each namespace of
/// `--namespaces`), and how many scopes have not applied a full LIST yet.
#[derive(Debug)]
pub(super) struct Cache<T> {
    map: RwLock<HashSet<Slot<T>>>,
    /// The namespaces its objects share.
    pub(super) names: Names,
    /// Bumped by every change, under the map's write lock.
    generation: AtomicU64,
    unlisted: AtomicUsize,
    /// At most this many bytes held (the kind's share of the caches'
    /// budget), as `weigh` counts them and the names add up.
    cap: Option<u64>,
    /// Bytes the entries hold now.
    bytes: AtomicU64,
    weigh: fn(&Entry<T>) -> usize,
    /// Set once the cap was reached: the cache is empty for good and the
    /// kind is read as an unwatched one.
    over_budget: AtomicBool,
    pub(super) metrics: KindMetrics,
}

impl<T: Named> Cache<T> {
    #[cfg(test)]
    pub(super) fn new(metrics: KindMetrics, scopes: usize) -> Self {
        Self::capped(metrics, scopes, None, |_| 0)
    }

    /// A cache that gives up beyond `cap` bytes, each entry weighing what
    /// `weigh` says.
    pub(super) fn capped(
        metrics: KindMetrics,
        scopes: usize,
        cap: Option<u64>,
        weigh: fn(&Entry<T>) -> usize,
    ) -> Self {
        // Not listed yet: not in sync with the API server.
        metrics.stale.set(scopes as i64);
        Self {
            cap,
            names: Names::default(),
            bytes: AtomicU64::new(0),
            weigh,
            over_budget: AtomicBool::new(false),
            map: RwLock::new(HashSet::new()),
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
        (self.cap).is_some_and(|cap| self.bytes() > cap)
    }

    /// Bytes held now: the entries' weights and the shared namespaces.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Acquire) + self.names.bytes()
    }

    fn held(&self, added: Option<&Entry<T>>, removed: Option<&Entry<T>>) {
        let weight = |e: Option<&Entry<T>>| e.map_or(0, |e| (self.weigh)(e) as u64);
        self.bytes.fetch_add(weight(added), Ordering::AcqRel);
        self.bytes.fetch_sub(weight(removed), Ordering::AcqRel);
    }

    /// Drops every object and stops caching for good (see `budget.rs`).
    fn give_up(&self, kind: &'static str) {
        if self.over_budget.swap(true, Ordering::AcqRel) {
            return;
        }
        *self.write() = HashSet::new();
        self.bytes.store(0, Ordering::Release);
        self.names.prune();
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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashSet<Slot<T>>> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry of the object `key` names.
    pub(super) fn get(&self, key: &dyn Named) -> Option<Entry<T>> {
        self.read().get(key).map(|slot| slot.0.clone())
    }

    /// Every entry, and the generation they are of.
    pub(super) fn entries(&self) -> (u64, Vec<Entry<T>>) {
        let map = self.read();
        // Read under the map's lock: a write bumps it under the write lock.
        let generation = self.generation();
        (generation, map.iter().map(|slot| slot.0.clone()).collect())
    }

    pub(super) fn len(&self) -> usize {
        self.read().len()
    }

    /// Changes so far: equal generations, equal contents.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The map, for a change: the generation moves before the lock is let go.
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashSet<Slot<T>>> {
        let map = self.map.write().unwrap_or_else(|e| e.into_inner());
        self.generation.fetch_add(1, Ordering::AcqRel);
        map
    }

    /// Adds or replaces one object (a watch `Apply`).
    pub(super) fn insert(&self, entry: Entry<T>) {
        let mut map = self.write();
        self.held(Some(&entry), None);
        if let Some(old) = map.replace(Slot(entry)) {
            self.held(None, Some(&old.0));
        }
        self.metrics.objects.set(map.len() as i64);
    }

    pub(super) fn remove(&self, key: &dyn Named) {
        let mut map = self.write();
        if let Some(old) = map.take(key) {
            self.held(None, Some(&old.0));
        }
        self.metrics.objects.set(map.len() as i64);
    }

    /// Replaces everything with a complete listing and marks the cache synced.
    pub(super) fn replace_all(&self, listed: impl IntoIterator<Item = Entry<T>>) {
        let listed: HashSet<Slot<T>> = listed.into_iter().map(Slot).collect();
        let len = listed.len();
        let bytes: u64 = listed.iter().map(|s| (self.weigh)(&s.0) as u64).sum();
        let mut map = self.write();
        *map = listed;
        self.bytes.store(bytes, Ordering::Release);
        drop(map);
        self.metrics.objects.set(len as i64);
        self.metrics.stale.set(0);
        self.unlisted.store(0, Ordering::Release);
    }

    /// After a complete listing of `scope` (all of it for `None`) was
    /// applied in place: drops that scope's entries the listing did not
    /// name (deleted meanwhile); `first` counts the scope as listed.
    fn listed_scope(&self, scope: Option<&str>, listed: &Listed<T>, first: bool) {
        let mut map = self.write();
        map.retain(|slot| {
            let keep = match scope {
                None => listed.contains(slot),
                Some(ns) => slot.0.namespace() != ns || listed.contains(slot),
            };
            if !keep {
                self.held(None, Some(&slot.0));
            }
            keep
        });
        self.metrics.objects.set(map.len() as i64);
        drop(map);
        // The namespaces of what was dropped (a namespace deleted).
        self.names.prune();
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
    cache: Arc<Cache<D::Object>>,
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
        let listed = Arc::new(std::sync::Mutex::new(Listed::<D::Object>::new()));
        let (filling, keys) = (cache.clone(), listed.clone());
        let each = move |head: &super::wire::Head, text: &str| {
            let entry = Entry::new(head, D::value(head, text, bounds, &filling.names));
            filling.insert(entry.clone());
            keys.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(Slot(entry));
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
                                let value = D::value(head, text, bounds, &cache.names);
                                cache.insert(Entry::new(head, value));
                                if cache.beyond_cap() {
                                    cache.give_up(kind);
                                    return Err(StreamError::OverBudget);
                                }
                            }
                            Change::Delete(head) => cache.remove(head),
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
    use super::super::reduce::InvalidObject;
    use super::*;
    use kserve_injector_core::cluster::ObjectRef;

    /// An object of the tests: its key and the bytes it is charged.
    #[derive(Debug)]
    struct Object(ObjectRef, u8);

    impl Named for Object {
        fn namespace(&self) -> &str {
            &self.0.namespace
        }
        fn name(&self) -> &str {
            &self.0.name
        }
    }

    fn object(ns: &str, name: &str, bytes: u8) -> Entry<Object> {
        Entry::Usable(Arc::new(Object(ObjectRef::new(ns, name), bytes)))
    }

    /// Applies a listing of `ns` in place, as the watch does.
    fn list(cache: &Cache<Object>, ns: &str, names: &[&str], first: bool) {
        let mut listed = Listed::new();
        for n in names {
            cache.insert(object(ns, n, 0));
            listed.insert(Slot(object(ns, n, 0)));
        }
        cache.listed_scope(Some(ns), &listed, first);
    }

    fn weight(entry: &Entry<Object>) -> usize {
        match entry {
            Entry::Usable(o) => o.1 as usize,
            Entry::Unusable(_) => 0,
        }
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
        let (_, entries) = cache.entries();
        let mut keys: Vec<String> = (entries.iter())
            .map(|e| format!("{}/{}", e.namespace(), e.name()))
            .collect();
        keys.sort();
        assert_eq!(keys, ["a/x", "b/x"]);
        assert_eq!(cache.metrics.objects.get(), 2);
        assert!(cache.get(&ObjectRef::new("b", "x")).is_some());
        assert!(cache.get(&ObjectRef::new("a", "y")).is_none());
    }

    #[test]
    fn a_cache_past_its_cap_gives_up_and_counts_as_listed() {
        let metrics = KindMetrics::default();
        // Each object weighs its value, in bytes.
        let cache = Cache::capped(metrics.clone(), 1, Some(20), weight);
        for n in ["x", "y"] {
            cache.insert(object("a", n, 10));
        }
        assert!(!cache.beyond_cap());
        // A replaced object gives its old bytes back.
        cache.insert(object("a", "y", 5));
        assert_eq!(cache.bytes(), 15);
        cache.remove(&ObjectRef::new("a", "x"));
        assert_eq!(cache.bytes(), 5);
        cache.insert(object("a", "x", 10));
        cache.insert(object("a", "z", 6));
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

    #[test]
    fn the_shared_namespaces_are_charged_to_the_cache() {
        let cache: Cache<Object> = Cache::new(KindMetrics::default(), 1);
        let shared = cache.names.intern("team");
        assert!(cache.bytes() > 0);
        drop(shared);
        cache.give_up("serviceaccounts");
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn an_unusable_object_is_found_by_its_name_and_says_why() {
        let cache: Cache<Object> = Cache::new(KindMetrics::default(), 1);
        let at = ObjectRef::new("a", "bad");
        let error = InvalidObject::TooManySecrets {
            at: at.to_string(),
            listed: 2,
            limit: 1,
        };
        cache.insert(Entry::new(&at, Err(error)));
        let found = cache.get(&at).unwrap().parsed().unwrap_err();
        assert!(
            found.to_string().contains("a/bad lists 2 Secrets"),
            "{found}"
        );
        cache.insert(object("a", "bad", 0));
        assert!(cache.get(&at).unwrap().parsed().is_ok());
        assert_eq!(cache.len(), 1);
    }
}
