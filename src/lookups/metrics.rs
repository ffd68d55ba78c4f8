//! The lookup layer's Prometheus metrics. Every handle is resolved once, at
//! registration, so a lookup only bumps atomics (no family lookup, no label
//! allocation per request).

use super::Kind;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListLabels {
    kind: &'static str,
    /// `streaming` or `paged`.
    how: &'static str,
}

/// The handles for one kind of object.
#[derive(Clone, Debug, Default)]
pub struct KindMetrics {
    /// Objects held by the cache now.
    pub objects: Gauge,
    /// Keys answered from a synced cache.
    pub hits: Counter,
    /// Keys the cache did not hold (or the cache was not synced or not run).
    pub misses: Counter,
    /// Direct GETs (a LIST for ClusterStorageContainers) made for misses.
    pub fallback_gets: Counter,
    /// Lookups that failed: API error, timeout or an unusable object.
    pub lookup_errors: Counter,
    /// Errors the watch reported (each one rebuilds it from a fresh LIST).
    pub watch_errors: Counter,
    /// Watches (one per scope) whose cache may be behind the API server:
    /// not listed yet, or broken since their last LIST.
    pub stale: Gauge,
    /// 1 once the cache reached its share of the memory limit and was
    /// dropped (the kind is then read from the API server).
    pub over_budget: Gauge,
    /// Admissions denied because an object they need keeps more than
    /// `--max-lookup-object-bytes` of what KServe reads.
    pub too_large: Counter,
    /// Complete listings applied: streaming lists (a WATCH with
    /// `sendInitialEvents`) and paged LISTs.
    pub streaming_lists: Counter,
    pub paged_lists: Counter,
}

/// Metrics for every [`Kind`], indexed by the kind's position.
#[derive(Clone, Debug, Default)]
pub struct LookupMetrics {
    kinds: [KindMetrics; 4],
}

impl LookupMetrics {
    /// Handles that are not exported anywhere (the CLI's one-shot fetch).
    pub fn unregistered() -> Self {
        Self::default()
    }

    /// Registers the families (`cluster_cache_objects`, `cluster_cache_stale`,
    /// `cluster_cache_over_budget`,
    /// `cluster_cache_hits`, `cluster_cache_misses`, `cluster_fallback_gets`,
    /// `cluster_lookup_errors`, `cluster_watch_errors`,
    /// `cluster_objects_too_large`, label `kind`; `cluster_lists`, labels
    /// `kind` and `how`) on
    /// `registry` (its prefix applies) and resolves every handle.
    pub fn register(registry: &mut Registry) -> Self {
        let objects = Family::<KindLabels, Gauge>::default();
        let stale = Family::<KindLabels, Gauge>::default();
        let over_budget = Family::<KindLabels, Gauge>::default();
        let families: [(&str, &str, Family<KindLabels, Counter>); 6] = [
            (
                "cluster_cache_hits",
                "Cluster object keys answered from a synced watch cache",
                Family::default(),
            ),
            (
                "cluster_cache_misses",
                "Cluster object keys the watch cache did not hold",
                Family::default(),
            ),
            (
                "cluster_fallback_gets",
                "Direct API requests made for cache misses",
                Family::default(),
            ),
            (
                "cluster_lookup_errors",
                "Cluster lookups that failed (API error, timeout, unusable object)",
                Family::default(),
            ),
            (
                "cluster_watch_errors",
                "Errors reported by the watches (each rebuilds the watch from a fresh list after a growing pause)",
                Family::default(),
            ),
            (
                "cluster_objects_too_large",
                "Admissions denied because an object they need keeps more than --max-lookup-object-bytes of what KServe reads",
                Family::default(),
            ),
        ];
        registry.register(
            "cluster_cache_objects",
            "Objects held by each cluster watch cache",
            objects.clone(),
        );
        registry.register(
            "cluster_cache_stale",
            "Watches of each kind whose cache may be behind the API server (not listed yet, or broken since their last list)",
            stale.clone(),
        );
        registry.register(
            "cluster_cache_over_budget",
            "1 when the kind's watch cache reached its share of the memory limit and was dropped: the kind is read from the API server for each admission",
            over_budget.clone(),
        );
        let lists = Family::<ListLabels, Counter>::default();
        registry.register(
            "cluster_lists",
            "Complete listings applied to each watch cache, by how they were read (streaming: a watch that begins with every object, where the API server offers it; paged: LIST)",
            lists.clone(),
        );
        for (name, help, family) in &families {
            registry.register(*name, *help, family.clone());
        }
        let kinds = Kind::ALL.map(|kind| {
            let labels = KindLabels { kind: kind.label() };
            let counter = |i: usize| families[i].2.get_or_create(&labels).clone();
            // One statement per handle: the family's read guard lives to
            // the end of the statement, and a second get_or_create inside
            // it would wait for its own write lock.
            let listed = |how| {
                let handle = lists.get_or_create(&ListLabels {
                    kind: kind.label(),
                    how,
                });
                handle.clone()
            };
            KindMetrics {
                objects: objects.get_or_create(&labels).clone(),
                hits: counter(0),
                misses: counter(1),
                fallback_gets: counter(2),
                lookup_errors: counter(3),
                watch_errors: counter(4),
                too_large: counter(5),
                stale: stale.get_or_create(&labels).clone(),
                over_budget: over_budget.get_or_create(&labels).clone(),
                streaming_lists: listed("streaming"),
                paged_lists: listed("paged"),
            }
        });
        Self { kinds }
    }

    pub fn kind(&self, kind: Kind) -> &KindMetrics {
        &self.kinds[kind.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn handles_are_the_registered_series() {
        let mut registry = Registry::with_prefix("kserve_injector");
        let m = LookupMetrics::register(&mut registry);
        m.kind(Kind::Secrets).fallback_gets.inc();
        m.kind(Kind::ServiceAccounts).objects.set(7);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("kserve_injector_cluster_fallback_gets_total{kind=\"secrets\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("kserve_injector_cluster_cache_objects{kind=\"serviceaccounts\"} 7"),
            "{text}"
        );
        assert!(text.contains(
            "kserve_injector_cluster_cache_hits_total{kind=\"clusterstoragecontainers\"} 0"
        ));
        m.kind(Kind::ServiceAccounts).streaming_lists.inc();
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                "kserve_injector_cluster_lists_total{kind=\"serviceaccounts\",how=\"streaming\"} 1"
            ),
            "{text}"
        );
    }
}
