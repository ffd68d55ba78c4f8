//! The watch caches in the memory plan: each watched kind's share, in
//! bytes, of what the memory limit gives the caches (`src/server/sizing.rs`).
//! Every object is charged what its kept part weighs (`kept_bytes`, checked
//! below against a counting allocator) as it arrives, so a cache of large
//! objects reaches its share sooner, never outgrows it.
//!
//! A cache that reaches its share stops: its watch ends, its objects are
//! freed, `kserve_injector_cluster_cache_over_budget{kind}` says so, and
//! that kind is read as an unwatched kind is (a GET per admission that
//! needs it; Secrets through the fetched Secrets, kept for `--secret-ttl`),
//! so the
//! process never outgrows its limit because the cluster grew.
//!
//! ClusterStorageContainers are the exception: an admission needs all of
//! them, so without the cache each one would LIST them all, which costs
//! more than the cache. Their cache has no cap and is planned outside the
//! budget, by its count (`wire::STORAGE_CONTAINER_BYTES` each;
//! docs/operations.md).

use super::Kind;

/// Of the caches' budget, each kind's share, in parts: the kinds a cluster
/// has many of get most. Secrets not watched are the fetched ones, kept for
/// their TTL: few of them at a time.
const fn weight(kind: Kind, watched: bool) -> u64 {
    match (kind, watched) {
        (Kind::ServiceAccounts, true) => 4,
        (Kind::Secrets, true) => 8,
        (Kind::Secrets, false) => 1,
        (Kind::InferenceServices, true) => 2,
        _ => 0,
    }
}

/// The bytes each kind's cache may hold within `budget` (`None`: no
/// limit), indexed by [`Kind::index`]: the watched kinds' caches, and the
/// fetched Secrets when Secrets are not watched.
pub(crate) fn byte_caps(budget: Option<u64>, watched: &[Kind]) -> [Option<u64>; 4] {
    let parts_of = |kind: Kind| weight(kind, watched.contains(&kind));
    let parts: u64 = Kind::ALL.iter().map(|k| parts_of(*k)).sum();
    Kind::ALL.map(|kind| {
        let budget = budget.filter(|_| parts_of(kind) > 0)?;
        Some(budget * parts_of(kind) / parts.max(1))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookups::cache::Cache;
    use crate::lookups::metrics::KindMetrics;
    use crate::lookups::wire::{self, Decode, Head};
    use crate::test_alloc::kept_by;
    use serde_json::json;

    const N: usize = 2_000;

    /// Bytes per object kept by a cache of `N` objects of kind `D`, each
    /// the text of `object(i)` decoded as the watch decodes it, and the
    /// bytes the cache charged for them.
    fn per_object<D: Decode>(object: impl Fn(usize) -> serde_json::Value) -> (u64, u64) {
        let texts: Vec<String> = (0..N).map(|i| object(i).to_string()).collect();
        let cache = Cache::capped(KindMetrics::default(), 1, None, D::weight);
        // Decoded from borrowed text, so only what the cache keeps stays
        // allocated (the texts are freed after).
        let (kept, ()) = kept_by(|| {
            for text in &texts {
                let head = Head::parse(text).unwrap();
                cache.insert(D::key(&head), D::value(&head, text, wire::Bounds::NONE));
            }
        });
        drop(texts);
        assert_eq!(cache.len(), N);
        (kept as u64 / N as u64, cache.bytes() / N as u64)
    }

    fn meta(i: usize, annotations: serde_json::Value) -> serde_json::Value {
        json!({"name": format!("object-{i}"), "namespace": format!("team-{}", i / 50),
               "uid": "0f0e3d2c-1b1a-4098-8776-655443322110", "resourceVersion": "123456",
               "annotations": annotations,
               "managedFields": [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:metadata": {}}}]})
    }

    /// What the cache charges covers what an object holds, and not by far
    /// more (a charge that is mostly air wastes the budget). Printed for
    /// docs/operations.md ("Memory").
    #[test]
    fn the_bytes_charged_cover_what_a_cached_object_holds() {
        let sa = per_object::<wire::ServiceAccounts>(|i| {
            json!({"metadata": meta(i, json!({"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/model-reader",
                                              "kubectl.kubernetes.io/last-applied-configuration": "x".repeat(1_200)})),
                   "secrets": [{"name": format!("s3-{i}")}]})
        });
        let secret = per_object::<wire::Secrets>(|i| {
            use base64::Engine;
            let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
            json!({"metadata": meta(i, json!({
                "serving.kserve.io/s3-endpoint": "s3.eu-west-1.amazonaws.com",
                "serving.kserve.io/s3-usehttps": "1",
                "serving.kserve.io/s3-region": "eu-west-1",
                "serving.kserve.io/s3-verifyssl": "1",
            })),
            "data": {
                "AWS_ACCESS_KEY_ID": b64("AKIAIOSFODNN7EXAMPLE"),
                "AWS_SECRET_ACCESS_KEY": b64("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
                "gcloud-application-credentials.json": b64(&"x".repeat(2_300)),
            }})
        });
        let isvc = per_object::<wire::InferenceServices>(|i| {
            json!({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                   "metadata": meta(i, json!({"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(1_200)})),
                   "spec": {"predictor": {"logger": {"mode": "all"}, "model": {"modelFormat": {"name": "sklearn"},
                            "storageUri": format!("s3://bucket-{i}/model")}}},
                   "status": {"url": format!("http://object-{i}.example.com")}})
        });
        let measured = [
            (Kind::ServiceAccounts, sa),
            (Kind::Secrets, secret),
            (Kind::InferenceServices, isvc),
        ];
        for (kind, (held, charged)) in measured {
            eprintln!(
                "{}: {held} bytes per cached object, {charged} charged",
                kind.label()
            );
        }
        for (kind, (held, charged)) in measured {
            assert!(
                held <= charged && charged < held * 2,
                "{kind:?}: holds {held}, charged {charged}"
            );
        }
    }

    #[test]
    fn caps_share_the_budget_by_weight_among_the_watched_kinds() {
        assert_eq!(byte_caps(None, &Kind::ALL), [None; 4]);
        let budget = 18 << 20;
        let default = byte_caps(Some(budget), &crate::lookups::options::DEFAULT_WATCHED);
        let all = byte_caps(Some(budget), &Kind::ALL);
        // Without Secrets watched, the other kinds get most of their share,
        // the fetched Secrets a little.
        assert!(default[0] > all[0] && default[3] > all[3]);
        let secrets = Kind::Secrets.index();
        assert!(default[secrets].unwrap() < all[secrets].unwrap());
        assert_eq!(all[Kind::StorageContainers.index()], None);
        for caps in [default, all] {
            let used: u64 = caps.iter().flatten().sum();
            assert!(used <= budget && used > budget - 16);
        }
    }
}
