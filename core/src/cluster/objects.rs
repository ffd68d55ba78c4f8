//! The cluster objects the injectors read, reduced to the fields they use.
//! Each reduction is the one place that decides what of an API object is
//! held in memory; above all, what of a Secret's data.

//!
//! One file per kind (`service_account.rs`, `secret.rs`,
//! `storage_container.rs`, `inference_service.rs`); here, what they share:
//! the annotations kept and how a kept string is counted.

mod inference_service;
mod secret;
mod service_account;
mod storage_container;
#[cfg(test)]
mod tests;

pub use inference_service::InferenceService;
pub(crate) use inference_service::IsvcLogger;
pub use secret::Secret;
pub use service_account::ServiceAccount;
pub use storage_container::ClusterStorageContainer;
pub(crate) use storage_container::{UriFormat, INIT_CONTAINER_WORKLOAD};

use super::packed::{heap_len, Packed};

/// Secret data keys whose values are kept verbatim, because an injector
/// copies them into the pod: the S3 settings KServe reads from a Secret's
/// data when no annotation sets them (the env names of `BuildS3EnvVars`),
/// and the two keys of an https-host Secret (env `<https-host>-headers` =
/// `headers`). Credentials proper (access keys, tokens, key files) are only
/// ever referenced by name (`secretKeyRef`, secret volumes), so their values
/// are never held. Every other value is replaced by its storage-spec
/// projection, see [`Secret::get`].
pub(crate) const KEPT_SECRET_VALUE_KEYS: [&str; 11] = [
    "S3_USE_HTTPS",
    "S3_ENDPOINT",
    "S3_VERIFY_SSL",
    "awsAnonymousCredential",
    "AWS_DEFAULT_REGION",
    "S3_USER_VIRTUAL_BUCKET",
    "S3_USE_ACCELERATE",
    "AWS_CA_BUNDLE",
    "AWS_CA_BUNDLE_CONFIGMAP",
    "https-host",
    "headers",
];

/// The members of a storage-spec entry (a JSON object in the storage
/// Secret) that KServe reads when the pod's parameters carry no `type`.
const STORAGE_SPEC_MEMBERS: [&str; 3] = ["type", "bucket", "cabundle_configmap"];

/// Stands for a value that is not a JSON object of strings: parsing it fails,
/// as parsing the original would (KServe unmarshals into `map[string]string`).
pub const NOT_A_STORAGE_SPEC: &str = "<not a JSON object of strings>";

/// The annotations of a ServiceAccount or Secret that KServe's credential
/// rules read, and the only ones kept: the IRSA role
/// (`eks.amazonaws.com/role-arn`, credentials.rs) and the settings
/// `BuildS3EnvVars` reads (`serving.kserve.io/s3-*`, s3.rs; its test checks
/// each one it reads is here). The others are dropped as the object is
/// reduced, so a large annotation costs nothing held.
pub(crate) const READ_ANNOTATIONS: [&str; 10] = [
    IRSA_ANNOTATION,
    "serving.kserve.io/s3-endpoint",
    "serving.kserve.io/s3-usehttps",
    "serving.kserve.io/s3-verifyssl",
    "serving.kserve.io/s3-useanoncredential",
    "serving.kserve.io/s3-region",
    "serving.kserve.io/s3-usevirtualbucket",
    "serving.kserve.io/s3-useaccelerate",
    "serving.kserve.io/s3-cabundle",
    "serving.kserve.io/s3-cabundle-configmap",
];

/// Whether an annotation of a ServiceAccount or Secret is kept: one of
/// those KServe's credential rules read.
pub fn annotation_read(key: &str) -> bool {
    READ_ANNOTATIONS.contains(&key)
}

/// The ServiceAccount annotation that turns on IAM-role (IRSA) S3 settings.
pub(crate) const IRSA_ANNOTATION: &str = "eks.amazonaws.com/role-arn";

/// Heap bytes one kept string costs.
fn heap(s: &str) -> usize {
    heap_len(s.len())
}

/// The nodes of a B-tree map of `n` string pairs: a node holds up to 11
/// pairs (544 bytes), the first whatever `n` is, then at least half full.
fn map_nodes(n: usize) -> usize {
    match n {
        0 => 0,
        n => 544 * (1 + 2 * n / 11),
    }
}

fn map_bytes<'a, V: AsRef<str> + 'a>(
    map: impl ExactSizeIterator<Item = (&'a String, &'a V)>,
) -> usize {
    let nodes = map_nodes(map.len());
    nodes + map.map(|(k, v)| heap(k) + heap(v.as_ref())).sum::<usize>()
}

/// Which of [`READ_ANNOTATIONS`] an object has, a bit each; their values
/// are held in that order.
type AnnotationSet = u16;

/// The kept annotations of `annotations` (a later key wins, as a map's
/// insert does): which of them are present, and their values in
/// [`READ_ANNOTATIONS`] order.
fn kept_annotations<K: AsRef<str>, V: AsRef<str>>(
    annotations: impl IntoIterator<Item = (K, V)>,
) -> (AnnotationSet, Vec<V>) {
    let mut slots: [Option<V>; READ_ANNOTATIONS.len()] = std::array::from_fn(|_| None);
    for (key, value) in annotations {
        if let Some(i) = READ_ANNOTATIONS.iter().position(|k| *k == key.as_ref()) {
            slots[i] = Some(value);
        }
    }
    let present = (slots.iter().enumerate())
        .filter(|(_, v)| v.is_some())
        .fold(0, |set, (i, _)| set | 1 << i);
    (present, slots.into_iter().flatten().collect())
}

/// The value of annotation `key` when `present` holds it: the values start
/// at `first` in `strings`.
fn kept_annotation<'a>(
    present: AnnotationSet,
    strings: &'a Packed,
    first: usize,
    key: &str,
) -> Option<&'a str> {
    let i = READ_ANNOTATIONS.iter().position(|k| *k == key)?;
    let before = (present & ((1 << i) - 1)).count_ones() as usize;
    (present & (1 << i) != 0).then(|| strings.get(first + before))
}

/// Every kept annotation, name and value, in [`READ_ANNOTATIONS`] order.
fn kept_annotation_pairs<'a>(
    present: AnnotationSet,
    strings: &'a Packed,
    first: usize,
) -> impl Iterator<Item = (&'static str, &'a str)> + 'a {
    let names = (READ_ANNOTATIONS.iter().enumerate())
        .filter(move |(i, _)| present & (1 << i) != 0)
        .map(|(_, k)| *k);
    names.zip(strings.slice(first, strings.len()))
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
