//! A ServiceAccount as the credential lookup keeps it.

use super::{count, kept_annotation, kept_annotation_pairs, kept_annotations, AnnotationSet};
use crate::cluster::packed::Packed;
use crate::cluster::{Annotations, ObjectRef};
use k8s_openapi::api::core::v1 as api;
use std::collections::BTreeMap;
use std::sync::Arc;

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
