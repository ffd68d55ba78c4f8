//! Objects read with a GET when a pod needs them, kept for a short time:
//! the Secrets' default (`--watch-kinds` without `secrets`). Each entry
//! expires `ttl` after its GET, so a Secret changed, created or deleted is
//! seen by the first admission after that; the cache holds at most
//! `capacity` entries and at most its byte cap (each entry charged what its
//! value weighs), least recently used first out. An absent object is
//! kept too ("not found" for `ttl`), so a pod naming a missing Secret does
//! not cost a GET per admission.
//!
//! Admissions that need the same key while its GET runs wait for that one
//! GET (single flight) instead of sending their own.

use super::metrics::KindMetrics;
use super::LookupError;
use lru::LruCache;
use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::OnceCell;
use tokio::time::Instant;

struct Entry<V> {
    fetched: Instant,
    value: Option<V>,
}

type Outcome<V> = Result<Option<V>, Arc<LookupError>>;

pub(super) struct FetchCache<K, V> {
    ttl: Duration,
    entries: Mutex<Held<K, V>>,
    flights: Mutex<HashMap<K, Arc<OnceCell<Outcome<V>>>>>,
    metrics: KindMetrics,
}

/// The entries and the bytes they weigh.
struct Held<K, V> {
    lru: LruCache<K, Entry<V>>,
    bytes: u64,
    cap: Option<u64>,
    weigh: fn(&K, &V) -> usize,
}

impl<K: Hash + Eq, V> Held<K, V> {
    fn weight(&self, key: &K, entry: &Entry<V>) -> u64 {
        entry
            .value
            .as_ref()
            .map_or(0, |v| (self.weigh)(key, v) as u64)
    }
    fn pop(&mut self, key: &K) {
        if let Some(entry) = self.lru.pop(key) {
            self.bytes -= self.weight(key, &entry);
        }
    }
    fn put(&mut self, key: K, entry: Entry<V>) {
        self.pop(&key);
        self.bytes += self.weight(&key, &entry);
        if let Some((k, old)) = self.lru.push(key, entry) {
            self.bytes -= self.weight(&k, &old);
        }
        while self.cap.is_some_and(|cap| self.bytes > cap) {
            match self.lru.pop_lru() {
                Some((k, old)) => self.bytes -= self.weight(&k, &old),
                None => break,
            }
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<K: Hash + Eq + Clone, V: Clone> FetchCache<K, V> {
    pub(super) fn new(
        ttl: Duration,
        capacity: NonZeroUsize,
        cap: Option<u64>,
        weigh: fn(&K, &V) -> usize,
        metrics: KindMetrics,
    ) -> Self {
        let lru = LruCache::new(capacity);
        Self {
            ttl,
            entries: Mutex::new(Held {
                lru,
                bytes: 0,
                cap,
                weigh,
            }),
            flights: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// The entry for `key` when it was fetched less than `ttl` ago:
    /// `Some(None)` is a fresh "not found".
    pub(super) fn fresh(&self, key: &K) -> Option<Option<V>> {
        let mut entries = locked(&self.entries);
        let entry = entries.lru.get(key)?;
        if entry.fetched.elapsed() < self.ttl {
            return Some(entry.value.clone());
        }
        entries.pop(key);
        self.metrics.objects.set(entries.lru.len() as i64);
        None
    }

    pub(super) fn insert(&self, key: K, value: Option<V>) {
        let mut entries = locked(&self.entries);
        let fetched = Instant::now();
        entries.put(key, Entry { fetched, value });
        self.metrics.objects.set(entries.lru.len() as i64);
    }

    pub(super) fn len(&self) -> usize {
        locked(&self.entries).lru.len()
    }

    /// Bytes the kept entries weigh.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> u64 {
        locked(&self.entries).bytes
    }

    /// The fresh entry, else the result of `fetch`, run once for all the
    /// callers that ask for `key` meanwhile. A failed fetch is not kept:
    /// the next caller tries again.
    pub(super) async fn get_or_fetch<F, Fut>(
        &self,
        key: &K,
        fetch: F,
    ) -> Result<Option<V>, LookupError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Option<V>, LookupError>>,
    {
        if let Some(found) = self.fresh(key) {
            self.metrics.hits.inc();
            return Ok(found);
        }
        self.metrics.misses.inc();
        let flight = locked(&self.flights)
            .entry(key.clone())
            .or_default()
            .clone();
        let outcome = flight
            .get_or_init(|| async {
                // A flight that ended just before this one started has
                // already filled the entry.
                if let Some(found) = self.fresh(key) {
                    return Ok(found);
                }
                let fetched = fetch().await.map_err(Arc::new)?;
                self.insert(key.clone(), fetched.clone());
                Ok(fetched)
            })
            .await
            .clone();
        {
            let mut flights = locked(&self.flights);
            if flights.get(key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
                flights.remove(key);
            }
        }
        drop(flight);
        outcome.map_err(|e| Arc::try_unwrap(e).unwrap_or_else(LookupError::Shared))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn cache(ttl_ms: u64, capacity: usize) -> FetchCache<String, String> {
        let capacity = NonZeroUsize::new(capacity).unwrap();
        FetchCache::new(
            Duration::from_millis(ttl_ms),
            capacity,
            None,
            |_, v| v.len(),
            KindMetrics::default(),
        )
    }

    /// An entry as if its GET had returned `ago` before now.
    fn insert_fetched(c: &FetchCache<String, String>, key: &str, value: &str, ago: Duration) {
        let entry = Entry {
            fetched: Instant::now() - ago,
            value: Some(value.into()),
        };
        locked(&c.entries).put(key.into(), entry);
    }

    #[test]
    fn entries_go_least_recently_used_first_beyond_the_byte_cap() {
        let c = FetchCache::new(
            Duration::from_secs(30),
            NonZeroUsize::new(100).unwrap(),
            Some(10),
            |_: &String, v: &String| v.len(),
            KindMetrics::default(),
        );
        c.insert("a".into(), Some("1234".into()));
        c.insert("b".into(), Some("1234".into()));
        c.insert("absent".into(), None);
        assert_eq!((c.len(), c.bytes()), (3, 8));
        c.insert("c".into(), Some("123456".into()));
        // 4 + 4 + 6 is over 10: "a", the least recently used, went.
        assert_eq!(c.fresh(&"a".to_string()), None);
        assert_eq!(c.fresh(&"b".to_string()), Some(Some("1234".into())));
        assert_eq!(c.bytes(), 10);
        // A replaced entry gives its bytes back.
        c.insert("c".into(), Some("12".into()));
        assert_eq!(c.bytes(), 6);
    }

    #[test]
    fn an_entry_expires_after_the_ttl() {
        let c = cache(30_000, 10);
        c.insert("ns/absent".into(), None);
        assert_eq!(c.fresh(&"ns/absent".to_string()), Some(None));
        // Fresh until the TTL (5 s to spare for this test's own run).
        insert_fetched(&c, "ns/s", "v1", Duration::from_secs(25));
        assert_eq!(c.fresh(&"ns/s".to_string()), Some(Some("v1".into())));
        insert_fetched(&c, "ns/s", "v2", Duration::from_millis(30_000));
        assert_eq!(c.fresh(&"ns/s".to_string()), None);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let c = cache(30_000, 2);
        c.insert("a".into(), Some("1".into()));
        c.insert("b".into(), None);
        assert!(c.fresh(&"a".to_string()).is_some());
        c.insert("c".into(), Some("3".into()));
        assert_eq!(c.fresh(&"b".to_string()), None);
        assert_eq!(c.fresh(&"a".to_string()), Some(Some("1".into())));
        assert_eq!(c.len(), 2);
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_fetch_and_errors_are_not_kept() {
        let c = Arc::new(cache(30_000, 10));
        let calls = Arc::new(AtomicUsize::new(0));
        let (release, wait) = tokio::sync::watch::channel(false);
        let callers = (0..8).map(|_| {
            let (c, calls, mut wait) = (c.clone(), calls.clone(), wait.clone());
            tokio::spawn(async move {
                c.get_or_fetch(&"k".to_string(), || async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let _ = wait.wait_for(|go| *go).await;
                    Ok(Some("v".to_string()))
                })
                .await
            })
        });
        let callers: Vec<_> = callers.collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        release.send(true).unwrap();
        for caller in callers {
            assert_eq!(caller.await.unwrap().unwrap(), Some("v".into()));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(c.metrics.misses.get() + c.metrics.hits.get(), 8);

        let failing = || async {
            let boom = serde_json::from_str::<serde_json::Value>("boom").unwrap_err();
            Err(LookupError::Invalid {
                kind: "secrets",
                source: crate::lookups::reduce::InvalidObject::Decode {
                    at: "x".into(),
                    source: boom.into(),
                },
            })
        };
        let err = c.get_or_fetch(&"x".to_string(), failing).await.unwrap_err();
        assert!(matches!(err, LookupError::Invalid { .. }), "{err}");
        let again = c
            .get_or_fetch(&"x".to_string(), || async { Ok(Some("ok".to_string())) })
            .await;
        assert_eq!(again.unwrap(), Some("ok".into()));
    }
}
