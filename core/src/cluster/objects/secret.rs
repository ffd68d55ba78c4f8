//! A Secret as the credential rules keep it: key names, the few values an
//! injector copies, storage-spec projections; nothing else of its data.

use super::{count, heap, kept_annotation, kept_annotation_pairs, kept_annotations, AnnotationSet};
use super::{KEPT_SECRET_VALUE_KEYS, NOT_A_STORAGE_SPEC, STORAGE_SPEC_MEMBERS};
use crate::cluster::packed::{heap_len, Packed};
use crate::cluster::{Annotations, ObjectRef};
use k8s_openapi::api::core::v1 as api;
use std::collections::BTreeMap;
use std::sync::Arc;
use zeroize::Zeroizing;

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
    pub(super) values: Box<[(u32, SecretValue)]>,
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

    /// What holding it costs, as [`ServiceAccount::kept_bytes`](crate::cluster::ServiceAccount::kept_bytes) counts.
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
