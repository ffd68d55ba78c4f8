//! [`Lookups::snapshot`]: the objects one pod's mutation may read, each from
//! its cache (shared, never copied) or, on a miss, from a GET whose body is
//! charged to the admission's share as it arrives (`shares.rs`).
//!
//! The work one admission may cause is bounded before it starts: a
//! ServiceAccount listing more Secrets than `--max-service-account-secrets`
//! is denied before any of them is read; the Secrets are read a few at a
//! time, in the ServiceAccount's order, all within one `--lookup-timeout`;
//! and a Secret the ServiceAccount lists that does not exist ends the
//! reading, because KServe's credential rules fail the pod on the first one
//! missing (`credentials.rs` in the core reports that one).

use super::entry::Named;
use super::names::Names;
use super::reduce::{collection, valid_name, Parsed};
use super::shares::Turn;
use super::stream::{self, GetError};
use super::view::StorageView;
use super::watch::CacheOf;
use super::wire::{self, Decode, Head};
use super::{Kind, LookupError, Lookups};
use futures::StreamExt;
use kserve_injector_core::cluster::{needed_keys, ObjectKey};
use kserve_injector_core::cluster::{ClusterSnapshot, ClusterStorageContainer, ObjectRef};
use kserve_injector_core::config::Config;
use kserve_injector_core::PodFacts;
use kube::Client;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Secrets one admission reads at once.
const CONCURRENT_GETS: usize = 4;

/// One admission's lookups: its deadline and, from its first request to the
/// API server, its turn in its namespace's share.
struct Admission<'a> {
    namespace: &'a str,
    deadline: Instant,
    turn: Option<Turn>,
}

impl Lookups {
    /// The objects one pod's mutation may read: [`needed_keys`] iterated to
    /// a fixed point (as [`ClusterSnapshot::restrict`] does over a snapshot),
    /// each key from its cache or, on a miss, from one GET.
    pub async fn snapshot(
        &self,
        facts: &PodFacts,
        config: &Config,
    ) -> Result<ClusterSnapshot, LookupError> {
        let mut out = ClusterSnapshot::default();
        let mut seen = BTreeSet::new();
        let mut admission = Admission {
            namespace: &facts.namespace,
            deadline: Instant::now() + self.get_timeout,
            turn: None,
        };
        loop {
            let keys: Vec<ObjectKey> = (needed_keys(facts, config, &out).into_iter())
                .filter(|k| !seen.contains(k))
                .collect();
            if keys.is_empty() {
                return Ok(out);
            }
            seen.extend(keys.iter().cloned());
            let mut secrets = Vec::new();
            for key in keys {
                match key {
                    ObjectKey::Secret(r) => secrets.push(r),
                    other => self.fill(&other, &mut out, &mut admission).await?,
                }
            }
            self.fill_secrets(secrets, &mut out, &mut admission).await?;
        }
    }

    async fn fill(
        &self,
        key: &ObjectKey,
        out: &mut ClusterSnapshot,
        admission: &mut Admission<'_>,
    ) -> Result<(), LookupError> {
        match key {
            ObjectKey::ServiceAccount(r) => {
                let kind = Kind::ServiceAccounts;
                let parsed = match self.cached_object(kind, &self.service_accounts, r) {
                    Some(sa) => sa,
                    None => match self.get::<wire::ServiceAccounts>(r, admission).await? {
                        Some(sa) => sa,
                        None => return Ok(()),
                    },
                };
                let sa = self.usable(kind, parsed)?;
                out.service_accounts.insert(r.clone(), sa);
            }
            ObjectKey::InferenceService(r) => {
                let kind = Kind::InferenceServices;
                let parsed = match self.cached_object(kind, &self.inference_services, r) {
                    Some(parsed) => parsed,
                    None => match self.get::<wire::InferenceServices>(r, admission).await? {
                        Some(parsed) => parsed,
                        None => return Ok(()),
                    },
                };
                let isvc = self.usable(kind, parsed)?;
                out.insert_inference_service((*isvc).clone());
            }
            ObjectKey::ClusterStorageContainers => self.fill_storage_containers(out).await?,
            ObjectKey::Secret(r) => {
                self.fill_secrets(vec![r.clone()], out, admission).await?;
            }
        }
        Ok(())
    }

    /// The Secrets of one round, read a few at a time in the order the
    /// snapshot's ServiceAccounts list them (the others after), stopping at
    /// the first listed one that does not exist.
    async fn fill_secrets(
        &self,
        keys: Vec<ObjectRef>,
        out: &mut ClusterSnapshot,
        admission: &mut Admission<'_>,
    ) -> Result<(), LookupError> {
        // Secrets the cache holds cost nothing and are never skipped.
        let mut missing = Vec::new();
        for key in keys {
            match self.cached_secret(&key) {
                Some(Some(parsed)) => {
                    out.secrets.insert(key, self.usable(Kind::Secrets, parsed)?);
                }
                Some(None) => missing.push((key, true)),
                None => missing.push((key, false)),
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let lists: Vec<Vec<ObjectRef>> = (out.service_accounts.values())
            .map(|sa| {
                (sa.secrets())
                    .map(|n| ObjectRef::new(sa.namespace(), n))
                    .collect()
            })
            .collect();
        let position = |k: &ObjectRef| {
            (lists.iter())
                .filter_map(|l| l.iter().position(|x| x == k))
                .min()
                .unwrap_or(usize::MAX)
        };
        missing.sort_by_cached_key(|(k, _)| (position(k), k.clone()));
        // A Secret is read unless every list naming it has a Secret missing
        // before it: KServe's rules stop at that one.
        let absent: std::sync::Mutex<HashSet<ObjectRef>> = Default::default();
        let needed = |k: &ObjectRef| {
            let absent = absent.lock().unwrap_or_else(|e| e.into_inner());
            let mut naming = lists.iter().filter(|l| l.contains(k)).peekable();
            naming.peek().is_none()
                || naming.any(|l| !l.iter().take_while(|x| *x != k).any(|x| absent.contains(x)))
        };
        if missing.iter().any(|(_, known_absent)| !known_absent) && admission.turn.is_none() {
            admission.turn = Some(self.turn(admission)?);
        }
        let admission = &*admission;
        let turn = admission.turn.as_ref();
        let reads = futures::stream::iter(missing)
            .filter(|(k, _)| std::future::ready(needed(k)))
            .map(|(k, known_absent)| async move {
                if known_absent {
                    return (k, Ok(None));
                }
                let read = self.secret(&k, admission, turn).await;
                (k, read)
            })
            .buffered(CONCURRENT_GETS);
        let mut reads = std::pin::pin!(reads);
        while let Some((key, read)) = reads.next().await {
            match read? {
                Some(parsed) => {
                    out.secrets.insert(key, self.usable(Kind::Secrets, parsed)?);
                }
                None => {
                    absent.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
                }
            }
        }
        Ok(())
    }

    /// What the caches know of a Secret without asking: `Some(Some(_))`
    /// held, `Some(None)` known absent (fetched lately), `None` unknown.
    fn cached_secret(
        &self,
        r: &ObjectRef,
    ) -> Option<Option<Parsed<Arc<kserve_injector_core::cluster::Secret>>>> {
        if !valid_name(&r.name) {
            return Some(None);
        }
        match self.secrets_fetched() {
            // A miss is counted by the fetch that follows.
            true => {
                let found = self.fetched_secrets.fresh(r);
                if found.is_some() {
                    self.metrics.kind(Kind::Secrets).hits.inc();
                }
                found
            }
            false => self
                .cached_object(Kind::Secrets, &self.secrets, r)
                .map(Some),
        }
    }

    /// One Secret the caches did not hold: fetched (once for every admission
    /// asking meanwhile) and kept for the TTL when Secrets are not watched.
    async fn secret(
        &self,
        r: &ObjectRef,
        admission: &Admission<'_>,
        turn: Option<&Turn>,
    ) -> Result<Option<Parsed<Arc<kserve_injector_core::cluster::Secret>>>, LookupError> {
        let read = || self.read::<wire::Secrets>(r, admission, turn);
        match self.secrets_fetched() {
            true => self.fetched_secrets.get_or_fetch(r, read).await,
            false => read().await,
        }
    }

    /// The admission's turn in its namespace's share, taken at its first
    /// request to the API server.
    fn turn(&self, admission: &Admission<'_>) -> Result<Turn, LookupError> {
        Ok(self.shares.enter(admission.namespace)?)
    }

    /// A GET of `r` for an admission that has no turn yet (one request).
    async fn get<D: Decode>(
        &self,
        r: &ObjectRef,
        admission: &mut Admission<'_>,
    ) -> Result<Option<Parsed<Arc<D::Object>>>, LookupError> {
        if !valid_name(&r.name) {
            return Ok(None);
        }
        if admission.turn.is_none() {
            admission.turn = Some(self.turn(admission)?);
        }
        self.read::<D>(r, admission, admission.turn.as_ref()).await
    }

    /// One GET, its body charged to `turn` as it arrives, decoded as the
    /// watch decodes; `None` for a 404. Counted as a fallback.
    async fn read<D: Decode>(
        &self,
        r: &ObjectRef,
        admission: &Admission<'_>,
        turn: Option<&Turn>,
    ) -> Result<Option<Parsed<Arc<D::Object>>>, LookupError> {
        let kind = D::KIND;
        let m = self.metrics.kind(kind);
        m.fallback_gets.inc();
        let failed = |e| {
            m.lookup_errors.inc();
            e
        };
        let at = collection(kind, Some(&r.namespace));
        let charge = |n| turn.map_or(Ok(()), |t| t.charge(n));
        let request = stream::get(&self.client, &at.url, &r.name, charge);
        let body = match tokio::time::timeout_at(admission.deadline, request).await {
            Ok(Ok(Some(body))) => body,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(GetError::Api(source))) => {
                return Err(failed(LookupError::Api {
                    kind: kind.label(),
                    key: r.to_string(),
                    source: Box::new(source),
                }))
            }
            Ok(Err(GetError::Charge(source))) => {
                return Err(failed(LookupError::OverBytes {
                    kind: kind.label(),
                    key: r.to_string(),
                    source,
                }))
            }
            Err(_) => {
                return Err(failed(LookupError::Timeout {
                    kind: kind.label(),
                    key: r.to_string(),
                    after: self.get_timeout,
                }))
            }
        };
        let invalid = |source: serde_json::Error| {
            failed(LookupError::Invalid {
                kind: kind.label(),
                source: super::reduce::InvalidObject::Decode {
                    at: r.to_string(),
                    source: source.into(),
                },
            })
        };
        // The API server answers UTF-8; the body is parsed where it lies.
        let text = std::str::from_utf8(&body).map_err(|e| invalid(serde::de::Error::custom(e)))?;
        let head = Head::parse(text).map_err(invalid)?;
        // Not interned: no watch cache keeps a GET's object (a fetched
        // Secret is charged its own namespace).
        Ok(Some(D::value(&head, text, self.bounds, &Names::default())))
    }

    /// The cached object (shared), counting a hit; `None` (a miss) when the
    /// kind is not watched, not synced yet, or the key is absent.
    fn cached_object<T: Named>(
        &self,
        kind: Kind,
        cache: &CacheOf<T>,
        key: &ObjectRef,
    ) -> Option<Parsed<Arc<T>>> {
        let m = self.metrics.kind(kind);
        let found = (cache.as_ref())
            .filter(|c| c.synced() && !c.over_budget())
            .and_then(|c| c.get(key))
            .map(|entry| entry.parsed());
        match found {
            Some(_) => m.hits.inc(),
            None => m.misses.inc(),
        };
        found
    }

    /// Every ClusterStorageContainer, shared: the cache's current set (built
    /// once per change, then handed to every admission as an `Arc`), or on
    /// a miss one LIST. An unusable one fails the lookup, the first by name
    /// as KServe's typed decode of the list would.
    async fn fill_storage_containers(&self, out: &mut ClusterSnapshot) -> Result<(), LookupError> {
        let kind = Kind::StorageContainers;
        let m = self.metrics.kind(kind);
        let cache = (self.storage_containers.as_ref()).filter(|c| c.synced() && !c.over_budget());
        let shared = match cache {
            Some(cache) => {
                m.hits.inc();
                self.storage_view.current(cache)
            }
            None => {
                m.misses.inc();
                m.fallback_gets.inc();
                let all = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
                let filling = all.clone();
                let at = collection(kind, None);
                let bounds = self.bounds;
                let names = Names::default();
                let listing = stream::list(&self.client, &at, move |head, text| {
                    let parsed = wire::StorageContainers::value(head, text, bounds, &names);
                    let mut all = filling.lock().unwrap_or_else(|e| e.into_inner());
                    all.insert(head.name().to_string(), parsed);
                    Ok(())
                });
                let failed = |e| {
                    m.lookup_errors.inc();
                    e
                };
                match tokio::time::timeout(self.get_timeout, listing).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        return Err(failed(LookupError::List {
                            kind: kind.label(),
                            error: crate::log_text::bounded(&e).to_string(),
                        }))
                    }
                    Err(_) => {
                        return Err(failed(LookupError::Timeout {
                            kind: kind.label(),
                            key: "(all)".to_string(),
                            after: self.get_timeout,
                        }))
                    }
                }
                let all: BTreeMap<String, Parsed<Arc<ClusterStorageContainer>>> =
                    std::mem::take(&mut *all.lock().unwrap_or_else(|e| e.into_inner()));
                StorageView::build(all.values())
            }
        };
        out.storage_containers = self.usable(kind, shared)?;
        Ok(())
    }

    fn usable<T>(&self, kind: Kind, parsed: Parsed<T>) -> Result<T, LookupError> {
        parsed.map_err(|source| {
            let m = self.metrics.kind(kind);
            m.lookup_errors.inc();
            use super::reduce::InvalidObject::{TooLarge, TooManySecrets};
            if matches!(source, TooLarge { .. } | TooManySecrets { .. }) {
                m.too_large.inc();
            }
            LookupError::Invalid {
                kind: kind.label(),
                source,
            }
        })
    }
}

/// Reads exactly the objects one pod's mutation needs with direct GETs (a
/// LIST for ClusterStorageContainers), all within `get_timeout`: the CLI's
/// `mutate --kubeconfig`.
pub async fn fetch_once(
    client: Client,
    facts: &PodFacts,
    config: &Config,
    get_timeout: Duration,
) -> Result<ClusterSnapshot, LookupError> {
    Lookups::uncached(client, get_timeout)
        .snapshot(facts, config)
        .await
}
