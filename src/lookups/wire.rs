//! The API objects as the watches, LISTs and GETs decode them: each object
//! arrives as its own JSON text (a LIST item, a watch event's object, a GET
//! body) and is decoded straight into what KServe's rules read of it. The
//! rest (managedFields, annotations the rules never name, a Secret's values
//! other than those `KEPT_SECRET_VALUE_KEYS` lists, an InferenceService's
//! spec beyond `predictor.logger`) is skipped as it is parsed (serde's
//! `IgnoredAny`), so a 1.4 MB object costs what its kept fields cost.
//!
//! A decoded object whose kept part is still over `--max-lookup-object-bytes`
//! is not held: the cache keeps a marker naming it and its size, and an
//! admission that needs it is denied with that reason, as the over-budget
//! metric counts it.
//!
//! Hand-written visitors only where a derive would keep what no rule reads:
//! the annotations (kept by name, values of the others skipped unread).

use super::entry::{Entry, Named};
use super::names::Names;
use super::reduce::{InvalidObject, Parsed};
use super::Kind;
use k8s_openapi::ByteString;
use kserve_injector_core::cluster::{
    annotation_read, inference_service, storage_container, ClusterStorageContainer,
    InferenceService, ObjectRef, Secret, ServiceAccount,
};
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Default for `--max-lookup-object-bytes`: the kept part of one object
/// (what [`ServiceAccount::kept_bytes`] counts). A ServiceAccount listing a
/// handful of Secrets keeps a few hundred bytes, a storage-config Secret
/// with a hundred entries about 20 KiB.
pub(crate) const DEFAULT_MAX_OBJECT_BYTES: usize = 64 * 1024;

/// What one object may keep: `--max-lookup-object-bytes` and, for a
/// ServiceAccount, `--max-service-account-secrets`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub object: usize,
    pub sa_secrets: usize,
}

impl Bounds {
    /// No bound (tests, and the ClusterStorageContainers' LIST).
    #[cfg(test)]
    pub(super) const NONE: Self = Self {
        object: usize::MAX,
        sa_secrets: usize::MAX,
    };
}

/// An object's identity and version, the first thing decoded of it: so an
/// object that fails the full decode is still known by name.
#[derive(Deserialize)]
pub(super) struct Head {
    #[serde(default)]
    metadata: HeadMeta,
}

#[derive(Deserialize, Default)]
struct HeadMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
}

impl Head {
    pub(super) fn parse(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
    pub(super) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(&self.metadata.namespace, &self.metadata.name)
    }
    pub(super) fn resource_version(&self) -> &str {
        &self.metadata.resource_version
    }
}

impl Named for Head {
    fn namespace(&self) -> &str {
        &self.metadata.namespace
    }
    fn name(&self) -> &str {
        &self.metadata.name
    }
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default, deserialize_with = "read_annotations")]
    annotations: BTreeMap<String, String>,
}

type Annotations = BTreeMap<String, String>;

/// Only the annotations [`annotation_read`] names; the others' values are
/// skipped unread.
fn read_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<Annotations, D::Error> {
    struct Kept;
    impl<'de> Visitor<'de> for Kept {
        type Value = Annotations;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of strings")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = BTreeMap::new();
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if annotation_read(&key) {
                    kept.insert(key.into_owned(), map.next_value::<String>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }
    d.deserialize_option(Kept)
}

#[derive(Deserialize)]
struct NameOnly {
    #[serde(default)]
    name: Option<String>,
}

#[derive(Deserialize)]
struct WireServiceAccount {
    metadata: Meta,
    #[serde(default)]
    secrets: Option<Vec<NameOnly>>,
}

#[derive(Deserialize)]
struct WireSecret {
    metadata: Meta,
    #[serde(default)]
    data: Option<BTreeMap<String, ByteString>>,
    #[serde(default, rename = "stringData")]
    string_data: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct WireIsvc {
    metadata: Meta,
    #[serde(default)]
    spec: Option<WireIsvcSpec>,
}

#[derive(Deserialize)]
struct WireIsvcSpec {
    #[serde(default)]
    predictor: Option<WirePredictor>,
}

#[derive(Deserialize)]
struct WirePredictor {
    #[serde(default)]
    logger: Option<serde_json::Value>,
}

macro_rules! named {
    ($($t:ty),*) => {$(
        impl Named for $t {
            fn namespace(&self) -> &str {
                <$t>::namespace(self)
            }
            fn name(&self) -> &str {
                <$t>::name(self)
            }
        }
    )*};
}

named!(ServiceAccount, Secret, InferenceService);

/// Cluster-scoped: no namespace.
impl Named for ClusterStorageContainer {
    fn namespace(&self) -> &str {
        ""
    }
    fn name(&self) -> &str {
        ClusterStorageContainer::name(self)
    }
}

/// How one kind's object text becomes what its cache holds.
pub(super) trait Decode: Send + Sync + 'static {
    const KIND: Kind;
    type Object: Named + std::fmt::Debug + Send + Sync + 'static;
    /// The object of `text` (an object named by `head`), its namespace
    /// shared through `names`, or why it cannot be used (an object too
    /// large among them).
    fn value(head: &Head, text: &str, bounds: Bounds, names: &Names) -> Parsed<Arc<Self::Object>>;
    /// What the object holds (`kept_bytes`).
    fn kept(object: &Self::Object) -> usize;

    /// What holding `entry` in a watch cache costs (the cache's byte
    /// budget): its slot, the `Arc`'s counts and what the object holds.
    fn weight(entry: &Entry<Self::Object>) -> usize {
        kept_weight::<Self>(entry)
    }
}

/// What `entry` holds in a watch cache: its slot, the `Arc`'s counts and
/// what the object keeps.
pub(super) fn kept_weight<D: Decode + ?Sized>(entry: &Entry<D::Object>) -> usize {
    entry_bytes::<D::Object>()
        + match entry {
            Entry::Usable(object) => D::kept(object),
            Entry::Unusable(_) => MARKER_BYTES,
        }
}

/// `value`, shared, when what it keeps (`bytes`) is within the bound; else
/// the marker naming it.
fn held<T>(kind: Kind, at: &ObjectRef, value: T, bytes: usize, bounds: Bounds) -> Parsed<Arc<T>> {
    match bytes > bounds.object {
        true => Err(InvalidObject::TooLarge {
            kind: kind.label(),
            at: at.to_string(),
            bytes,
            limit: bounds.object,
        }),
        false => Ok(Arc::new(value)),
    }
}

/// An unusable object's marker costs its name and the error.
const MARKER_BYTES: usize = 256;

/// A cache entry besides the object's own bytes: its slot in the hash
/// set (the entry and a control byte; 9/4 of them for a table that grew
/// to twice its entries and is then a little under half full) and the
/// `Arc`'s counts.
const fn entry_bytes<T>() -> usize {
    let slot = std::mem::size_of::<Entry<T>>() + 1;
    slot * 9 / 4 + 16
}

/// What one fetched Secret costs (`fetched.rs`): its entry in the LRU
/// (the key's strings, the entry and the list's links), its `Arc`'s counts
/// and what it keeps, its namespace included (not shared there).
pub(super) fn fetched_secret_weight(key: &ObjectRef, parsed: &Parsed<Arc<Secret>>) -> usize {
    let slot = std::mem::size_of::<ObjectRef>() + std::mem::size_of::<Parsed<Arc<Secret>>>() + 1;
    let key_bytes = [&key.namespace, &key.name].map(|s| s.len().next_multiple_of(16));
    let namespace = (16 + key.namespace.len()).next_multiple_of(16);
    let kept = parsed
        .as_ref()
        .map_or(MARKER_BYTES, |s| namespace + s.kept_bytes());
    slot * 9 / 4 + 16 + key_bytes[0] + key_bytes[1] + kept
}

fn json_error(at: String, e: serde_json::Error) -> InvalidObject {
    InvalidObject::Decode {
        at,
        source: e.into(),
    }
}

pub(super) struct ServiceAccounts;

impl Decode for ServiceAccounts {
    const KIND: Kind = Kind::ServiceAccounts;
    type Object = ServiceAccount;
    fn value(
        head: &Head,
        text: &str,
        bounds: Bounds,
        names: &Names,
    ) -> Parsed<Arc<ServiceAccount>> {
        let at = head.object_ref();
        let wire: WireServiceAccount =
            serde_json::from_str(text).map_err(|e| json_error(at.to_string(), e))?;
        let listed = wire.secrets.as_ref().map_or(0, Vec::len);
        if listed > bounds.sa_secrets {
            return Err(InvalidObject::TooManySecrets {
                at: at.to_string(),
                listed,
                limit: bounds.sa_secrets,
            });
        }
        let secrets =
            (wire.secrets.iter().flatten()).map(|r| r.name.as_deref().unwrap_or_default());
        let sa = ServiceAccount::new(
            names.intern(wire.metadata.namespace.as_deref().unwrap_or_default()),
            wire.metadata.name.as_deref().unwrap_or_default(),
            secrets,
            &wire.metadata.annotations,
        );
        let bytes = sa.kept_bytes();
        held(Self::KIND, &at, sa, bytes, bounds)
    }
    fn kept(sa: &ServiceAccount) -> usize {
        sa.kept_bytes()
    }
}

pub(super) struct Secrets;

impl Decode for Secrets {
    const KIND: Kind = Kind::Secrets;
    type Object = Secret;
    fn value(head: &Head, text: &str, bounds: Bounds, names: &Names) -> Parsed<Arc<Secret>> {
        let at = head.object_ref();
        let mut wire: WireSecret =
            serde_json::from_str(text).map_err(|e| json_error(at.to_string(), e))?;
        // Each value as text, overwritten with zeros once reduced.
        let mut data: Vec<(&str, zeroize::Zeroizing<String>)> = Vec::new();
        for (key, bytes) in wire.data.iter_mut().flatten() {
            let text = zeroize::Zeroizing::new(String::from_utf8_lossy(&bytes.0).into_owned());
            zeroize::Zeroize::zeroize(&mut bytes.0);
            data.push((key, text));
        }
        // The API server never returns stringData; a hand-written object may.
        for (key, value) in wire.string_data.iter_mut().flatten() {
            data.push((key, zeroize::Zeroizing::new(std::mem::take(value))));
        }
        let secret = Secret::reduced(
            names.intern(wire.metadata.namespace.as_deref().unwrap_or_default()),
            wire.metadata.name.as_deref().unwrap_or_default(),
            &wire.metadata.annotations,
            data.iter().map(|(k, v)| (*k, v.as_str())),
        );
        let bytes = secret.kept_bytes();
        held(Self::KIND, &at, secret, bytes, bounds)
    }
    fn kept(secret: &Secret) -> usize {
        secret.kept_bytes()
    }
}

pub(super) struct InferenceServices;

impl Decode for InferenceServices {
    const KIND: Kind = Kind::InferenceServices;
    type Object = InferenceService;
    fn value(
        head: &Head,
        text: &str,
        bounds: Bounds,
        names: &Names,
    ) -> Parsed<Arc<InferenceService>> {
        let at = head.object_ref();
        let wire: WireIsvc =
            serde_json::from_str(text).map_err(|e| json_error(at.to_string(), e))?;
        let logger = wire.spec.and_then(|s| s.predictor).and_then(|p| p.logger);
        // The one part `inference_service` reads, as it reads it.
        let doc = match logger {
            Some(logger) => serde_json::json!({"spec": {"predictor": {"logger": logger}}}),
            None => serde_json::json!({}),
        };
        let namespace = names.intern(wire.metadata.namespace.as_deref().unwrap_or_default());
        let name = wire.metadata.name.unwrap_or_default();
        let isvc = inference_service(&doc, namespace, &name).map_err(|e| {
            InvalidObject::InferenceService {
                at: at.clone(),
                source: e.into(),
            }
        })?;
        let bytes = isvc.kept_bytes();
        held(Self::KIND, &at, isvc, bytes, bounds)
    }
    fn kept(isvc: &InferenceService) -> usize {
        isvc.kept_bytes()
    }
}

/// What one cached ClusterStorageContainer like `loadtest/lookups_scale.py`'s
/// (520 B on the wire, one in ten matched by a regex) is planned to hold:
/// 562 B measured (`budget.rs`), and 158 B in the set every admission reads
/// and its index, rounded up (docs/operations.md, "Memory").
pub(super) const STORAGE_CONTAINER_BYTES: usize = 800;

/// Cluster-scoped, written by cluster administrators only: decoded whole
/// (one object at a time) and planned by count (`budget.rs`).
pub(super) struct StorageContainers;

impl Decode for StorageContainers {
    const KIND: Kind = Kind::StorageContainers;
    type Object = ClusterStorageContainer;
    fn value(
        head: &Head,
        text: &str,
        _: Bounds,
        _: &Names,
    ) -> Parsed<Arc<ClusterStorageContainer>> {
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|e| json_error(head.name().to_string(), e))?;
        Ok(Arc::new(storage_container(&doc, head.name())?))
    }
    fn kept(csc: &ClusterStorageContainer) -> usize {
        csc.kept_bytes()
    }
    /// Planned by count, whatever one holds.
    fn weight(_: &Entry<ClusterStorageContainer>) -> usize {
        STORAGE_CONTAINER_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode<D: Decode>(object: serde_json::Value, object_bytes: usize) -> Parsed<Arc<D::Object>> {
        let text = object.to_string();
        let bounds = Bounds {
            object: object_bytes,
            sa_secrets: 64,
        };
        D::value(
            &Head::parse(&text).unwrap(),
            &text,
            bounds,
            &Names::default(),
        )
    }

    #[test]
    fn a_service_account_keeps_only_the_annotations_kserve_reads() {
        let sa = decode::<ServiceAccounts>(
            json!({"metadata": {"name": "sa", "namespace": "ns", "annotations": {
                "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r",
                "serving.kserve.io/s3-endpoint": "s3.example",
                "big": "x".repeat(250_000),
            }, "managedFields": [{"manager": "x".repeat(10_000)}]},
             "secrets": [{"name": "a"}, {"name": "b", "kind": "Secret"}]}),
            DEFAULT_MAX_OBJECT_BYTES,
        )
        .unwrap();
        assert_eq!(sa.secrets().collect::<Vec<_>>(), ["a", "b"]);
        let kept: Vec<&str> = sa.annotations().map(|(k, _)| k).collect();
        assert_eq!(
            kept,
            [
                "eks.amazonaws.com/role-arn",
                "serving.kserve.io/s3-endpoint"
            ]
        );
        assert!(sa.kept_bytes() < 1024, "{}", sa.kept_bytes());
    }

    #[test]
    fn an_object_whose_kept_part_is_too_large_is_a_named_marker() {
        let names: Vec<serde_json::Value> = (0..4000)
            .map(|i| json!({"name": format!("{i:0>200}")}))
            .collect();
        let sa = json!({"metadata": {"name": "big", "namespace": "team"}, "secrets": names});
        let err = decode::<ServiceAccounts>(sa, DEFAULT_MAX_OBJECT_BYTES).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("ServiceAccount team/big lists 4000 Secrets, more than the 64"),
            "{text}"
        );
        let names: Vec<serde_json::Value> = (0..60)
            .map(|i| json!({"name": format!("{i:0>2000}")}))
            .collect();
        let sa = json!({"metadata": {"name": "long", "namespace": "team"}, "secrets": names});
        let err = decode::<ServiceAccounts>(sa, DEFAULT_MAX_OBJECT_BYTES).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("serviceaccounts team/long"), "{text}");
        assert!(text.contains("65536"), "{text}");

        let endpoint = "e".repeat(700_000);
        let secret = json!({"metadata": {"name": "s3", "namespace": "team"},
                            "data": {"S3_ENDPOINT": base64(&endpoint)}});
        let err = decode::<Secrets>(secret, DEFAULT_MAX_OBJECT_BYTES).unwrap_err();
        assert!(err.to_string().contains("secrets team/s3"), "{err}");
    }

    #[test]
    fn a_secret_keeps_key_names_and_only_the_values_kserve_copies() {
        let secret = decode::<Secrets>(
            json!({"metadata": {"name": "s3", "namespace": "team", "annotations": {
                       "serving.kserve.io/s3-region": "eu", "other": "x"}},
                   "type": "Opaque",
                   "data": {"AWS_SECRET_ACCESS_KEY": base64("very-secret"),
                            "S3_ENDPOINT": base64("minio:9000")}}),
            DEFAULT_MAX_OBJECT_BYTES,
        )
        .unwrap();
        assert_eq!(secret.get("S3_ENDPOINT").unwrap(), "minio:9000");
        assert_ne!(secret.get("AWS_SECRET_ACCESS_KEY").unwrap(), "very-secret");
        assert_eq!(secret.annotations().count(), 1);
    }

    #[test]
    fn an_inference_service_keeps_its_predictor_logger() {
        let isvc = decode::<InferenceServices>(
            json!({"metadata": {"name": "m", "namespace": "team",
                                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(5000)}},
                   "spec": {"predictor": {"logger": {"marshallerUrl": "http://m"},
                                          "model": {"storageUri": "s3://b/m"}}}}),
            DEFAULT_MAX_OBJECT_BYTES,
        )
        .unwrap();
        let logger = isvc.predictor_logger.as_ref().unwrap();
        assert_eq!(logger.marshaller_url.as_deref(), Some("http://m"));
        assert!(isvc.kept_bytes() < 512, "{}", isvc.kept_bytes());
    }

    fn base64(s: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(s)
    }
}
