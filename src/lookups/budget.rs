//! The watch caches in the memory plan: what one cached object of each kind
//! holds (measured through the watch's own reduction, see the test below),
//! and how many of each fit in the share of the memory limit the caches
//! are given (`src/server/sizing.rs`).
//!
//! A cache that reaches its count stops: its watch ends, its objects are
//! freed, `kserve_injector_cluster_cache_over_budget{kind}` says so, and
//! that kind is read as an unwatched kind is (a GET per admission that
//! needs it; Secrets through the fetched Secrets, kept for `--secret-ttl`),
//! so the
//! process never outgrows its limit because the cluster grew.
//!
//! ClusterStorageContainers are the exception: an admission needs all of
//! them, so without the cache each one would LIST them all, which costs
//! more than the cache. Their cache has no cap and is planned outside the
//! budget, by its count ([`planned_bytes`] each; docs/operations.md).

use super::Kind;

/// Bytes one cached object holds, key and map slot included, as the test
/// below measures them for the shapes of docs/operations.md ("Memory"),
/// rounded up by about a third: a real object carries more annotations.
pub(crate) const fn planned_bytes(kind: Kind) -> u64 {
    match kind {
        Kind::ServiceAccounts => 1_400,
        Kind::Secrets => 2_300,
        Kind::StorageContainers => 5_300,
        Kind::InferenceServices => 768,
    }
}

/// Of the caches' budget, each watched kind's share, in parts: the kinds a
/// cluster has many of get most.
const fn weight(kind: Kind) -> u64 {
    match kind {
        Kind::ServiceAccounts => 4,
        Kind::Secrets => 8,
        Kind::StorageContainers => 0,
        Kind::InferenceServices => 2,
    }
}

/// The most objects each watched kind's cache may hold within `budget`
/// bytes (`None`: no limit), indexed by [`Kind::index`].
pub(crate) fn object_caps(budget: Option<u64>, watched: &[Kind]) -> [Option<usize>; 4] {
    let parts: u64 = watched.iter().map(|k| weight(*k)).sum();
    Kind::ALL.map(|kind| {
        let budget = budget.filter(|_| weight(kind) > 0)?;
        let share = budget * weight(kind) / parts.max(1);
        Some((share / planned_bytes(kind)) as usize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookups::cache::{Cache, Reduce};
    use crate::lookups::metrics::KindMetrics;
    use crate::lookups::reduce;
    use crate::test_alloc::kept_by;
    use k8s_openapi::api::core::v1 as api;
    use kube::api::DynamicObject;
    use serde_json::json;

    const N: usize = 2_000;

    /// Bytes per object kept by a cache of `N` objects of `kind`, each
    /// made by `object(i)` and reduced as the watch reduces it.
    fn per_object<O, R: Reduce<O>>(reduce: R, object: impl Fn(usize) -> O) -> u64
    where
        R::Key: std::hash::Hash + Eq,
    {
        let objects: Vec<O> = (0..N).map(&object).collect();
        let cache = Cache::new(KindMetrics::default(), 1);
        // Reduced from a borrowed object, so only what the cache keeps
        // stays allocated (the API objects are freed after).
        let (kept, ()) = kept_by(|| {
            for o in &objects {
                cache.insert(reduce.key(o), reduce.value(o));
            }
        });
        drop(objects);
        assert_eq!(cache.len(), N);
        kept as u64 / N as u64
    }

    fn meta(i: usize, annotations: serde_json::Value) -> serde_json::Value {
        json!({"name": format!("object-{i}"), "namespace": format!("team-{}", i / 50),
               "uid": "0f0e3d2c-1b1a-4098-8776-655443322110", "resourceVersion": "123456",
               "annotations": annotations})
    }

    /// The measured figures are under the planned ones, and not far under
    /// (a plan that is mostly air wastes the budget). Printed for the docs.
    #[test]
    fn planned_bytes_cover_what_a_cached_object_holds() {
        let sa = per_object(reduce::ServiceAccounts, |i| {
            serde_json::from_value::<api::ServiceAccount>(json!({
                "metadata": meta(i, json!({"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/model-reader"})),
                "secrets": [{"name": format!("s3-{i}")}],
            }))
            .unwrap()
        });
        let secret = per_object(reduce::Secrets, |i| {
            serde_json::from_value::<api::Secret>(json!({
                "metadata": meta(i, json!({
                    "serving.kserve.io/s3-endpoint": "s3.eu-west-1.amazonaws.com",
                    "serving.kserve.io/s3-usehttps": "1",
                    "serving.kserve.io/s3-region": "eu-west-1",
                    "serving.kserve.io/s3-verifyssl": "1",
                })),
                "stringData": {
                    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
                    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                    "gcloud-application-credentials.json": "x".repeat(2_300),
                },
            }))
            .unwrap()
        });
        let csc = per_object(reduce::StorageContainers, |i| {
            serde_json::from_value::<DynamicObject>(json!({
                "apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterStorageContainer",
                "metadata": {"name": format!("csc-{i:05}"), "uid": "0f0e3d2c-1b1a-4098-8776-655443322110"},
                "spec": {
                    "container": {
                        "name": "storage-initializer",
                        "image": format!("registry.example.com/initializer-{i}:1.0"),
                        "resources": {"requests": {"memory": "1Gi", "cpu": "100m"}, "limits": {"memory": "2Gi"}},
                        "env": [{"name": "TEAM", "value": format!("team-{i}")}],
                    },
                    "supportedUriFormats": [{"prefix": format!("s3://bucket-{i}/")}],
                },
            }))
            .unwrap()
        });
        let isvc = per_object(reduce::InferenceServices, |i| {
            serde_json::from_value::<DynamicObject>(json!({
                "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                "metadata": meta(i, json!({"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(1_200)})),
                "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"},
                         "storageUri": format!("s3://bucket-{i}/model")}}},
                "status": {"url": format!("http://object-{i}.example.com"), "conditions": [{"type": "Ready", "status": "True"}]},
            }))
            .unwrap()
        });
        let measured = [
            (Kind::ServiceAccounts, sa),
            (Kind::Secrets, secret),
            (Kind::StorageContainers, csc),
            (Kind::InferenceServices, isvc),
        ];
        for (kind, bytes) in measured {
            let planned = planned_bytes(kind);
            eprintln!(
                "{}: {bytes} bytes per cached object, {planned} planned",
                kind.label()
            );
        }
        for (kind, bytes) in measured {
            let planned = planned_bytes(kind);
            assert!(
                bytes <= planned && bytes * 2 > planned,
                "{kind:?}: measured {bytes}, planned {planned}"
            );
        }
    }

    #[test]
    fn caps_share_the_budget_by_weight_among_the_watched_kinds() {
        assert_eq!(object_caps(None, &Kind::ALL), [None; 4]);
        let budget = 18 << 20;
        let default = object_caps(Some(budget), &crate::lookups::DEFAULT_WATCHED);
        let all = object_caps(Some(budget), &Kind::ALL);
        // Without Secrets watched, the other kinds get their share.
        assert!(default[0] > all[0] && default[3] > all[3]);
        assert_eq!(all[Kind::StorageContainers.index()], None);
        let used: u64 = (Kind::ALL.iter())
            .filter(|k| crate::lookups::DEFAULT_WATCHED.contains(k))
            .filter(|k| **k != Kind::StorageContainers)
            .map(|k| default[k.index()].unwrap() as u64 * planned_bytes(*k))
            .sum();
        assert!(used <= budget);
    }
}
