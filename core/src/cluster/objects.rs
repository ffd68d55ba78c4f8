//! The cluster objects the injectors read, reduced to the fields they use.
//! Each reduction is the one place that decides what of an API object is
//! held in memory; above all, what of a Secret's data.

use super::packed::{heap_len, Packed};
use super::{Annotations, ObjectRef};
use crate::config::LoggerStorage;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::core::v1::Container;
use std::collections::BTreeMap;
use std::sync::Arc;
use zeroize::Zeroizing;

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

/// A ServiceAccount: what the credential lookup reads, its strings packed
/// in one allocation and its namespace shared (a watch cache interns it).
#[derive(Clone)]
#[cfg_attr(any(test, feature = "oracle"), derive(Default, PartialEq))]
pub struct ServiceAccount {
    namespace: Arc<str>,
    /// Its name, the names of the Secrets in `secrets` (in order), then the
    /// values of its kept annotations (the IRSA annotation
    /// `eks.amazonaws.com/role-arn` and the `serving.kserve.io/s3-*`
    /// settings it is read with).
    strings: Packed,
    secrets: u32,
    annotations: AnnotationSet,
}

impl ServiceAccount {
    /// Keeps of `annotations` only those the rules read.
    pub fn new<S: AsRef<str>, K: AsRef<str>, V: AsRef<str>>(
        namespace: impl Into<Arc<str>>,
        name: &str,
        secrets: impl IntoIterator<Item = S>,
        annotations: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let secrets: Vec<S> = secrets.into_iter().collect();
        let (present, values) = kept_annotations(annotations);
        let strings = std::iter::once(name)
            .chain(secrets.iter().map(AsRef::as_ref))
            .chain(values.iter().map(AsRef::as_ref));
        Self {
            namespace: namespace.into(),
            strings: Packed::new(strings),
            secrets: count(secrets.len()),
            annotations: present,
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        self.strings.get(0)
    }

    /// Names of the Secrets in `secrets`, in order.
    pub fn secrets(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.strings.slice(1, 1 + self.secrets as usize)
    }

    /// A kept annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        kept_annotation(
            self.annotations,
            &self.strings,
            self.first_annotation(),
            key,
        )
    }

    /// The kept annotations, name and value.
    pub fn annotations(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        kept_annotation_pairs(self.annotations, &self.strings, self.first_annotation())
    }

    fn first_annotation(&self) -> usize {
        1 + self.secrets as usize
    }

    pub(crate) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(self.namespace(), self.name())
    }

    /// What holding it costs: the struct and its strings (its namespace
    /// is the cache's interner's, counted there), an upper bound of what
    /// the allocator hands out, checked against a counting allocator in
    /// `src/lookups/budget.rs`.
    pub fn kept_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.strings.heap_bytes()
    }

    pub fn from_api(sa: &api::ServiceAccount, namespace: &str) -> Self {
        let annotations = sa.metadata.annotations.iter().flatten();
        let secrets = (sa.secrets.iter().flatten()).map(|r| r.name.as_deref().unwrap_or_default());
        Self::new(
            namespace,
            sa.metadata.name.as_deref().unwrap_or_default(),
            secrets,
            annotations,
        )
    }
}

impl Annotations for ServiceAccount {
    fn annotation(&self, key: &str) -> Option<&str> {
        ServiceAccount::annotation(self, key)
    }
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let annotations: BTreeMap<&str, &str> = self.annotations().collect();
        f.debug_struct("ServiceAccount")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .field("annotations", &annotations)
            .field("secrets", &self.secrets().collect::<Vec<_>>())
            .finish()
    }
}

/// A kept Secret value: its memory is overwritten with zeros when dropped
/// (a copy freed by the cache does not linger in the heap), and its `Debug`
/// prints a placeholder, so no log or error built with `{:?}` shows it.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct SecretValue(Zeroizing<Box<str>>);

/// What `Debug` prints in place of a Secret value.
pub(crate) const REDACTED: &str = "<redacted>";

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// A Secret: name, namespace, kept annotations, the names of its data keys
/// and, per key, only what an injector reads of the value (see
/// [`Secret::get`]). `Debug` shows the key names, never the values.
#[derive(Clone, Default)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct Secret {
    namespace: Arc<str>,
    /// Its name, its data keys (sorted), then the values of its kept
    /// annotations.
    strings: Packed,
    keys: u32,
    annotations: AnnotationSet,
    /// The values held, by the position of their key among the keys
    /// (ascending): verbatim for [`KEPT_SECRET_VALUE_KEYS`], a storage-spec
    /// projection otherwise; a key without one reads as
    /// [`NOT_A_STORAGE_SPEC`], the common case of a credential.
    values: Box<[(u32, SecretValue)]>,
}

impl Secret {
    pub fn new(namespace: impl Into<Arc<str>>, name: &str) -> Self {
        Self::packed(
            namespace.into(),
            name,
            None::<(&str, &str)>,
            BTreeMap::new(),
        )
    }

    /// A Secret from plain (already decoded) data, reduced on the way in.
    pub fn from_data<K: AsRef<str>, V: AsRef<str>>(
        namespace: impl Into<Arc<str>>,
        name: &str,
        data: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self::reduced(namespace, name, None::<(&str, &str)>, data)
    }

    /// A Secret from its annotations (those the rules read are kept) and
    /// its plain data, each value reduced to what [`Secret::get`]
    /// documents; of a key given twice the later wins, as `stringData`
    /// wins over `data` when the API server folds them.
    pub fn reduced<A: AsRef<str>, B: AsRef<str>, K: AsRef<str>, V: AsRef<str>>(
        namespace: impl Into<Arc<str>>,
        name: &str,
        annotations: impl IntoIterator<Item = (A, B)>,
        data: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let data: Vec<(K, V)> = data.into_iter().collect();
        let mut values = BTreeMap::new();
        for (key, value) in &data {
            let key = key.as_ref();
            values.insert(key, reduce_value(key, value.as_ref()));
        }
        Self::packed(namespace.into(), name, annotations, values)
    }

    /// Packs the reduced `values`, by key (`None`: reads as
    /// [`NOT_A_STORAGE_SPEC`]).
    fn packed<A: AsRef<str>, B: AsRef<str>>(
        namespace: Arc<str>,
        name: &str,
        annotations: impl IntoIterator<Item = (A, B)>,
        values: BTreeMap<&str, Option<SecretValue>>,
    ) -> Self {
        let (present, annotation_values) = kept_annotations(annotations);
        let strings = std::iter::once(name)
            .chain(values.keys().copied())
            .chain(annotation_values.iter().map(AsRef::as_ref));
        let strings = Packed::new(strings);
        let keys = count(values.len());
        let values = (values.into_values().enumerate())
            .filter_map(|(i, v)| Some((count(i), v?)))
            .collect();
        Self {
            namespace,
            strings,
            keys,
            annotations: present,
            values,
        }
    }

    /// Its reduced values by key, as [`Secret::packed`] takes them.
    #[cfg(test)]
    fn values_by_key(&self) -> BTreeMap<&str, Option<SecretValue>> {
        let mut values: BTreeMap<&str, Option<SecretValue>> =
            self.keys().map(|k| (k, None)).collect();
        for (i, value) in self.values.iter() {
            if let Some(slot) = values.get_mut(self.strings.get(1 + *i as usize)) {
                *slot = Some(value.clone());
            }
        }
        values
    }

    #[cfg(test)]
    pub(crate) fn with_annotation(self, key: &str, value: &str) -> Self {
        let mut annotations: BTreeMap<&str, &str> = self.annotations().collect();
        annotations.insert(key, value);
        Self::packed(
            self.namespace.clone(),
            self.name(),
            annotations,
            self.values_by_key(),
        )
    }

    /// Adds a data entry, keeping only what [`Secret::get`] documents (the
    /// Secret is packed anew: for the tests' Secrets, not for a cache).
    #[cfg(test)]
    pub(crate) fn with_data(self, key: &str, value: &str) -> Self {
        let mut values = self.values_by_key();
        values.insert(key, reduce_value(key, value));
        Self::packed(
            self.namespace.clone(),
            self.name(),
            self.annotations(),
            values,
        )
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        self.strings.get(0)
    }

    pub(crate) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(self.namespace(), self.name())
    }

    /// Reduces an API Secret; `stringData` is folded into `data` as the API
    /// server does on write (it wins over `data`).
    pub fn from_api(secret: &api::Secret, namespace: &str) -> Self {
        let annotations = secret.metadata.annotations.iter().flatten();
        let data = (secret.data.iter().flatten()).map(|(key, bytes)| {
            (
                key.as_str(),
                Zeroizing::new(String::from_utf8_lossy(&bytes.0).into_owned()),
            )
        });
        let string_data = (secret.string_data.iter().flatten())
            .map(|(key, value)| (key.as_str(), Zeroizing::new(value.clone())));
        let data: Vec<(&str, Zeroizing<String>)> = data.chain(string_data).collect();
        let name = secret.metadata.name.as_deref().unwrap_or_default();
        Self::reduced(
            namespace,
            name,
            annotations,
            data.iter().map(|(k, v)| (*k, v.as_str())),
        )
    }

    /// What holding it costs, as [`ServiceAccount::kept_bytes`] counts.
    pub fn kept_bytes(&self) -> usize {
        let values = heap_len(std::mem::size_of::<(u32, SecretValue)>() * self.values.len());
        std::mem::size_of::<Self>()
            + self.strings.heap_bytes()
            + values
            + (self.values.iter()).map(|(_, v)| heap(&v.0)).sum::<usize>()
    }

    /// A kept annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        kept_annotation(
            self.annotations,
            &self.strings,
            self.first_annotation(),
            key,
        )
    }

    /// The kept annotations, name and value.
    pub fn annotations(&self) -> impl Iterator<Item = (&'static str, &str)> + '_ {
        kept_annotation_pairs(self.annotations, &self.strings, self.first_annotation())
    }

    fn first_annotation(&self) -> usize {
        1 + self.keys as usize
    }

    /// The data key names, sorted.
    pub(crate) fn keys(&self) -> impl ExactSizeIterator<Item = &str> + Clone + '_ {
        self.strings.slice(1, 1 + self.keys as usize)
    }

    /// The position of `key` among the keys.
    fn key_index(&self, key: &str) -> Option<usize> {
        let (mut low, mut high) = (0, self.keys as usize);
        while low < high {
            let mid = low + (high - low) / 2;
            match self.strings.get(1 + mid).cmp(key) {
                std::cmp::Ordering::Less => low = mid + 1,
                std::cmp::Ordering::Greater => high = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    pub(crate) fn has_key(&self, key: &str) -> bool {
        self.key_index(key).is_some()
    }

    /// `Some` exactly when the key exists. For `KEPT_SECRET_VALUE_KEYS` the
    /// value itself; for any other key its storage-spec projection: the
    /// `type`, `bucket` and `cabundle_configmap` members when the value is a
    /// JSON object of strings (re-serialised, so a storage-spec entry parses
    /// to what KServe reads of it), else [`NOT_A_STORAGE_SPEC`].
    pub fn get(&self, key: &str) -> Option<&str> {
        let i = count(self.key_index(key)?);
        match self.values.binary_search_by_key(&i, |(j, _)| *j) {
            Ok(at) => Some(&self.values[at].1 .0),
            Err(_) => Some(NOT_A_STORAGE_SPEC),
        }
    }
}

impl Annotations for Secret {
    fn annotation(&self, key: &str) -> Option<&str> {
        Secret::annotation(self, key)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let annotations: BTreeMap<&str, &str> = self.annotations().collect();
        let values: BTreeMap<&str, SecretValue> =
            self.keys().map(|k| (k, SecretValue::default())).collect();
        f.debug_struct("Secret")
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .field("annotations", &annotations)
            .field("values", &values)
            .finish()
    }
}

/// What is kept of a data value: `None` for [`NOT_A_STORAGE_SPEC`].
fn reduce_value(key: &str, value: &str) -> Option<SecretValue> {
    projection(key, value).map(|v| SecretValue(Zeroizing::new(v.into_boxed_str())))
}

fn projection(key: &str, value: &str) -> Option<String> {
    if KEPT_SECRET_VALUE_KEYS.contains(&key) {
        return Some(value.to_string());
    }
    match serde_json::from_str::<Option<BTreeMap<String, String>>>(value) {
        // Go unmarshals `null` into a nil map without error.
        Ok(None) => Some("null".to_string()),
        Ok(Some(map)) => {
            let mut kept = BTreeMap::new();
            for (k, mut v) in map {
                if STORAGE_SPEC_MEMBERS.contains(&k.as_str()) {
                    kept.insert(k, v);
                } else {
                    // The parsed copy of a credential (`secret_access_key`).
                    zeroize::Zeroize::zeroize(&mut v);
                }
            }
            Some(crate::json_text::go::string_map(&kept))
        }
        Err(_) => None,
    }
}

/// A `supportedUriFormats` regex, compiled once, at load. `regex::Regex`
/// decides, as KServe's `regexp.MatchString` does, whether it compiles (a
/// compile error is kept and reported when KServe would report it, the
/// first time a lookup reaches this entry); what is kept to match is a
/// Pike VM of the same syntax, about a tenth of a `regex::Regex`'s memory
/// (a cluster may hold thousands of them).
#[derive(Debug, Clone)]
pub(crate) struct UriRegex {
    pub(crate) source: Box<str>,
    pub(crate) compiled: Result<Matcher, regex::Error>,
}

/// A compiled regex: the Pike VM, or should it refuse a pattern
/// `regex::Regex` accepts, that `regex::Regex`.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    Vm(regex_automata::nfa::thompson::pikevm::PikeVM),
    Regex(regex::Regex),
}

impl Matcher {
    /// `regex::Regex::is_match`: a match anywhere in `text`.
    pub(crate) fn is_match(&self, text: &str) -> bool {
        match self {
            // A search's working memory, dropped after it: held per regex
            // it would cost as much as the regex.
            Self::Vm(vm) => vm.is_match(&mut vm.create_cache(), text),
            Self::Regex(re) => re.is_match(text),
        }
    }

    /// The heap bytes it holds.
    fn heap_bytes(&self) -> usize {
        match self {
            Self::Vm(vm) => std::mem::size_of_val(vm) + vm.get_nfa().memory_usage() + NFA_BYTES,
            Self::Regex(_) => REGEX_BYTES,
        }
    }
}

/// What an NFA holds besides what
/// [`regex_automata::nfa::thompson::NFA::memory_usage`] counts: its shared
/// part's counts and rounding (measured: 32 bytes for
/// `^s3://team-1-[a-z]+/`, whose states take 1,020).
const NFA_BYTES: usize = 128;

/// What a `regex::Regex` of a short pattern holds (measured: 8.5 KB for
/// `^gs://`, 15 KB for `https://(.+?).blob.core.windows.net/(.+)`).
const REGEX_BYTES: usize = 16 * 1024;

impl UriRegex {
    fn new(source: &str) -> Self {
        use regex_automata::nfa::thompson::{self, pikevm::PikeVM};
        use regex_automata::util::syntax;
        // The configuration `regex::Regex::new` gives its engines (regex
        // 1.x, `Builder::build_one_string`): UTF-8 syntax and empty
        // matches, the default flags and nest limit, a 10 MiB NFA limit.
        let vm = || {
            PikeVM::builder()
                .syntax(syntax::Config::new().utf8(true))
                .thompson(
                    thompson::Config::new()
                        .utf8(true)
                        .nfa_size_limit(Some(10 * (1 << 20))),
                )
                .build(source)
                .ok()
        };
        let compiled = regex::Regex::new(source).map(|re| match vm() {
            Some(vm) => Matcher::Vm(vm),
            None => Matcher::Regex(re),
        });
        Self {
            source: source.into(),
            compiled,
        }
    }
}

/// One `supportedUriFormats` entry.
#[derive(Debug, Clone)]
pub(crate) enum UriFormat {
    Prefix(Box<str>),
    Regex(Box<UriRegex>),
    /// Neither set: never matches (KServe skips it).
    Empty,
}

impl PartialEq for UriFormat {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Prefix(a), Self::Prefix(b)) => a == b,
            (Self::Regex(a), Self::Regex(b)) => a.source == b.source,
            (Self::Empty, Self::Empty) => true,
            _ => false,
        }
    }
}

impl UriFormat {
    /// KServe's rule: a non-empty prefix wins; else a non-empty regex.
    pub(crate) fn new(prefix: Option<&str>, regex: Option<&str>) -> Self {
        match (
            prefix.filter(|p| !p.is_empty()),
            regex.filter(|r| !r.is_empty()),
        ) {
            (Some(p), _) => Self::Prefix(p.into()),
            (None, Some(r)) => Self::Regex(Box::new(UriRegex::new(r))),
            (None, None) => Self::Empty,
        }
    }

    /// The heap bytes it holds besides its own slot.
    fn heap_bytes(&self) -> usize {
        match self {
            Self::Prefix(p) => heap(p),
            Self::Regex(r) => {
                let compiled = match &r.compiled {
                    Ok(m) => m.heap_bytes(),
                    Err(regex::Error::Syntax(text)) => heap(text),
                    Err(_) => 0,
                };
                heap_len(std::mem::size_of::<UriRegex>()) + heap(&r.source) + compiled
            }
            Self::Empty => 0,
        }
    }
}

/// The workload type KServe's CRD defaults to, and the only one the pod
/// mutator may use.
pub(crate) const INIT_CONTAINER_WORKLOAD: &str = "initContainer";

/// A `ClusterStorageContainer` (`serving.kserve.io/v1alpha1`,
/// cluster-scoped), its container held as JSON text (a typed `Container` is
/// 2 KB before any of its values) and read back when it is merged.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterStorageContainer {
    pub(crate) name: Arc<str>,
    /// The overlay merged into the init container (quantities canonical,
    /// `name` empty when the object gives none): its name, then the
    /// container as serde writes it.
    container: Packed,
    pub(crate) supported_uri_formats: Box<[UriFormat]>,
    /// `spec.workloadType`; `None` for `initContainer`, what the CRD
    /// defaults it to.
    workload_type: Option<Box<str>>,
    /// Top-level `disabled` (not under `spec`).
    pub(crate) disabled: bool,
    pub(crate) supports_multi_model_download: bool,
}

impl ClusterStorageContainer {
    pub(crate) fn new(
        name: &str,
        container: &Container,
        supported_uri_formats: Box<[UriFormat]>,
        workload_type: &str,
        disabled: bool,
        supports_multi_model_download: bool,
    ) -> Result<Self, serde_json::Error> {
        let text = serde_json::to_string(container)?;
        Ok(Self {
            name: name.into(),
            container: Packed::new([container.name.as_str(), &text]),
            supported_uri_formats,
            workload_type: (workload_type != INIT_CONTAINER_WORKLOAD).then(|| workload_type.into()),
            disabled,
            supports_multi_model_download,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The container's name (empty when the object gives none).
    pub(crate) fn container_name(&self) -> &str {
        self.container.get(0)
    }

    /// The overlay merged into the init container, as it was loaded.
    pub fn container(&self) -> Result<Container, serde_json::Error> {
        serde_json::from_str(self.container.get(1))
    }

    pub(crate) fn workload_type(&self) -> &str {
        self.workload_type
            .as_deref()
            .unwrap_or(INIT_CONTAINER_WORKLOAD)
    }

    /// What holding it costs, as [`ServiceAccount::kept_bytes`] counts
    /// (its compiled regexes included), with its name (shared by the cache
    /// and the set of them every admission reads).
    pub fn kept_bytes(&self) -> usize {
        let formats = &self.supported_uri_formats;
        std::mem::size_of::<Self>()
            + heap_len(16 + self.name.len())
            + self.container.heap_bytes()
            + heap_len(std::mem::size_of_val(&**formats))
            + formats.iter().map(UriFormat::heap_bytes).sum::<usize>()
            + self.workload_type.as_deref().map_or(0, heap)
    }
}

/// What KServe reads of `spec.predictor.logger` (the values that override
/// the `logger` config); `None` fields were not set on the object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IsvcLogger {
    pub storage: Option<Box<LoggerStorage>>,
    pub marshaller_url: Option<Box<str>>,
    pub batch_size: Option<i64>,
    pub batch_interval: Option<Box<str>>,
}

/// An `InferenceService` (`serving.kserve.io/v1beta1`): only what the
/// agent's logger storage needs.
#[derive(Debug, Clone)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct InferenceService {
    pub(crate) namespace: Arc<str>,
    pub(crate) name: Box<str>,
    pub predictor_logger: Option<Box<IsvcLogger>>,
}

impl InferenceService {
    /// What holding it costs, as [`ServiceAccount::kept_bytes`] counts.
    pub fn kept_bytes(&self) -> usize {
        let logger = self.predictor_logger.as_ref().map_or(0, |l| {
            let storage = l.storage.as_ref().map_or(0, |s| {
                heap_len(std::mem::size_of::<LoggerStorage>())
                    + heap(&s.path)
                    + heap(&s.key)
                    + heap(&s.service_account_name)
                    + s.parameters.as_ref().map_or(0, |p| map_bytes(p.iter()))
            });
            heap_len(std::mem::size_of::<IsvcLogger>())
                + storage
                + l.marshaller_url.as_deref().map_or(0, heap)
                + l.batch_interval.as_deref().map_or(0, heap)
        });
        std::mem::size_of::<Self>() + heap(&self.name) + logger
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn object_ref(&self) -> ObjectRef {
        ObjectRef::new(self.namespace(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn secret_keeps_key_names_and_only_listed_values() {
        let api_secret = api::Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("s3-secret".into()),
                annotations: Some(BTreeMap::from([(
                    "serving.kserve.io/s3-endpoint".into(),
                    "s3.aws.com".into(),
                )])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                (
                    "awsSecretAccessKey".into(),
                    ByteString(b"very-secret".to_vec()),
                ),
                ("S3_ENDPOINT".into(), ByteString(b"minio:9000".to_vec())),
            ])),
            string_data: Some(BTreeMap::from([("HF_TOKEN".into(), "hf_abc".into())])),
            ..Default::default()
        };
        let s = Secret::from_api(&api_secret, "default");
        assert_eq!(s.object_ref(), ObjectRef::new("default", "s3-secret"));
        let keys: Vec<&str> = s.keys().collect();
        assert_eq!(keys, ["HF_TOKEN", "S3_ENDPOINT", "awsSecretAccessKey"]);
        assert_eq!(s.get("S3_ENDPOINT"), Some("minio:9000"));
        assert_eq!(s.get("awsSecretAccessKey"), Some(NOT_A_STORAGE_SPEC));
        assert_eq!(s.get("HF_TOKEN"), Some(NOT_A_STORAGE_SPEC));
        let held = format!("{s:?}");
        let plain = Secret::from_data("default", "s3-secret", [("S3_ENDPOINT", "minio:9000")]);
        assert_eq!(plain.get("S3_ENDPOINT"), s.get("S3_ENDPOINT"));
        assert!(
            !held.contains("very-secret") && !held.contains("hf_abc"),
            "{held}"
        );
        assert_eq!(
            s.annotation("serving.kserve.io/s3-endpoint"),
            Some("s3.aws.com")
        );
    }

    #[test]
    fn storage_spec_entries_keep_only_what_kserve_reads() {
        let s = Secret::new("default", "storage-config")
            .with_data(
                "my-storage",
                r#"{"type":"s3","bucket":"b","region":"na","secret_access_key":"x","cabundle_configmap":"cm"}"#,
            )
            .with_data("typeless", r#"{"region":"na"}"#)
            .with_data("numbers", r#"{"type":"s3","port":9000}"#)
            .with_data("null", "null");
        assert_eq!(
            s.get("my-storage").unwrap(),
            r#"{"bucket":"b","cabundle_configmap":"cm","type":"s3"}"#
        );
        assert_eq!(s.get("typeless").unwrap(), "{}");
        // Go's map[string]string rejects a number member; so does the marker.
        assert_eq!(s.get("numbers").unwrap(), NOT_A_STORAGE_SPEC);
        assert!(serde_json::from_str::<serde_json::Value>(NOT_A_STORAGE_SPEC).is_err());
        assert_eq!(s.get("null").unwrap(), "null");
        assert!(s.get("absent").is_none());
    }

    #[test]
    fn https_and_s3_settings_are_verbatim() {
        let s = Secret::new("ns", "n")
            .with_data("https-host", "github.com")
            .with_data("headers", "{\n\"Authorization\": \"token x\"\n}")
            .with_data("AWS_CA_BUNDLE", "/path/ca.crt");
        assert_eq!(s.get("https-host").unwrap(), "github.com");
        assert!(s.get("headers").unwrap().starts_with("{\n"));
        assert_eq!(s.get("AWS_CA_BUNDLE").unwrap(), "/path/ca.crt");
        // Kept values (a header may carry a token) never reach `Debug`.
        let printed = format!("{s:?}");
        assert!(!printed.contains("token x") && !printed.contains("github.com"));
        assert!(printed.contains(REDACTED) && printed.contains("https-host"));
    }

    #[test]
    fn uri_format_prefers_prefix_and_keeps_regex_errors() {
        assert_eq!(
            UriFormat::new(Some("s3://"), Some("x")),
            UriFormat::Prefix("s3://".into())
        );
        assert_eq!(UriFormat::new(Some(""), None), UriFormat::Empty);
        match UriFormat::new(None, Some("(")) {
            UriFormat::Regex(r) => match r.compiled {
                Err(e) => assert!(!e.to_string().is_empty()),
                Ok(m) => panic!("{m:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_service_account_keeps_its_secrets_in_order_and_the_annotations_read() {
        let sa = ServiceAccount::new(
            "ns",
            "sa",
            ["b", "a", "b"],
            [
                ("serving.kserve.io/s3-region", "eu"),
                ("note", "dropped"),
                (IRSA_ANNOTATION, "arn:1"),
                ("serving.kserve.io/s3-other", "dropped"),
                (IRSA_ANNOTATION, "arn:2"),
            ],
        );
        assert_eq!((sa.namespace(), sa.name()), ("ns", "sa"));
        assert_eq!(sa.secrets().collect::<Vec<_>>(), ["b", "a", "b"]);
        assert_eq!(
            sa.annotations().collect::<Vec<_>>(),
            [
                (IRSA_ANNOTATION, "arn:2"),
                ("serving.kserve.io/s3-region", "eu")
            ]
        );
        assert_eq!(sa.annotation("serving.kserve.io/s3-region"), Some("eu"));
        assert_eq!(sa.annotation("serving.kserve.io/s3-endpoint"), None);
        assert_eq!(sa.annotation("note"), None);
        let empty = ServiceAccount::new("ns", "", None::<&str>, None::<(&str, &str)>);
        assert_eq!((empty.name(), empty.secrets().len()), ("", 0));
        assert_eq!(empty.annotations().count(), 0);
    }

    #[test]
    fn every_read_annotation_is_kept_with_its_value() {
        let pairs: Vec<(&str, String)> = (READ_ANNOTATIONS.iter().enumerate())
            .map(|(i, k)| (*k, format!("v{i}")))
            .collect();
        for skip in 0..READ_ANNOTATIONS.len() {
            let some = pairs
                .iter()
                .enumerate()
                .filter(|(i, _)| i % (skip + 1) == 0);
            let some: Vec<(&str, &str)> = some.map(|(_, (k, v))| (*k, v.as_str())).collect();
            let secret = Secret::reduced("ns", "s", some.iter().copied(), [("k", "v")]);
            for (k, v) in &pairs {
                let expected = some.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
                assert_eq!(secret.annotation(k), expected, "{k} {v}");
            }
            assert_eq!(secret.annotations().collect::<Vec<_>>(), some);
            assert_eq!(secret.keys().collect::<Vec<_>>(), ["k"]);
        }
    }

    #[test]
    fn a_secret_finds_each_key_and_keeps_a_value_only_where_read() {
        let secret = Secret::from_data(
            "ns",
            "s",
            [
                ("S3_ENDPOINT", "minio:9000"),
                ("a", "x"),
                ("storage", r#"{"type":"s3","secret_access_key":"k"}"#),
                ("z", "y"),
                ("a", "{}"),
            ],
        );
        assert_eq!(
            secret.keys().collect::<Vec<_>>(),
            ["S3_ENDPOINT", "a", "storage", "z"]
        );
        assert_eq!(secret.get("S3_ENDPOINT"), Some("minio:9000"));
        // The later of a key given twice wins.
        assert_eq!(secret.get("a"), Some("{}"));
        assert_eq!(secret.get("storage"), Some(r#"{"type":"s3"}"#));
        assert_eq!(secret.get("z"), Some(NOT_A_STORAGE_SPEC));
        assert_eq!(secret.get("b"), None);
        assert!(secret.has_key("z") && !secret.has_key("") && !secret.has_key("zz"));
        // Only the values read are held: the kept key's and the two storage
        // specs' projections.
        assert_eq!(secret.values.len(), 3);
        let again = secret.clone().with_data("b", "1");
        assert_eq!(again.keys().count(), 5);
        assert_eq!(again.get("a"), Some("{}"));
        assert_eq!(again.get("b"), Some(NOT_A_STORAGE_SPEC));
    }

    #[test]
    fn a_storage_container_gives_its_container_back() {
        let container: Container = serde_json::from_value(serde_json::json!({
            "name": "init", "image": "i:1", "args": ["a"],
            "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            "resources": {"limits": {"memory": "2Gi"}},
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "readinessProbe": {"httpGet": {"port": "http"}},
        }))
        .unwrap();
        let csc =
            ClusterStorageContainer::new("c", &container, Box::new([]), "x", false, true).unwrap();
        assert_eq!(csc.container().unwrap(), container);
        assert_eq!((csc.name(), csc.container_name()), ("c", "init"));
        assert_eq!(csc.workload_type(), "x");
    }

    /// The Pike VM kept for a regex format answers as `regex::Regex` does.
    #[test]
    fn a_regex_format_matches_as_regex_does() {
        let patterns = [
            "^s3://team-1-[a-z]+/",
            "https://(.+?).blob.core.windows.net/(.+)",
            "(?i)^HF://",
            r"\bmodels\b",
            r"^gs://[\w-]+/\p{L}+$",
            "^$",
            "a|",
            r"\.onnx$",
            "(?m)^x",
        ];
        let uris = [
            "",
            "s3://team-1-abc/m",
            "s3://team-1-/m",
            "https://acct.blob.core.windows.net/c/m",
            "hf://org/model",
            "HF://org/model",
            "pvc://models/x",
            "gs://b-1/modèle",
            "gs://b-1/m1",
            "oci://r/m.onnx",
            "y\nx",
        ];
        for pattern in patterns {
            let UriFormat::Regex(format) = UriFormat::new(None, Some(pattern)) else {
                panic!("{pattern}")
            };
            let matcher = format.compiled.as_ref().unwrap();
            assert!(matches!(matcher, Matcher::Vm(_)), "{pattern}");
            let regex = regex::Regex::new(pattern).unwrap();
            for uri in uris {
                assert_eq!(
                    matcher.is_match(uri),
                    regex.is_match(uri),
                    "{pattern} {uri:?}"
                );
            }
        }
    }
}
