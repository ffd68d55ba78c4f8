//! The borrowed view of a pod: exactly the fields the injectors read, typed
//! as the Pod schema types them, with strings borrowed from the request body
//! where JSON escaping allows. Every other field is skipped by the
//! deserializer (which still checks it is valid JSON) and never re-emitted:
//! the webhook answers with a patch, so what we do not read stays the API
//! server's bytes.
//!
//! Validation rule: a wrong type in a field listed here is an error naming
//! its path; a field nobody reads is not checked (the API server decoded the
//! pod before admission). Lists and maps are capped at `MAX_ENTRIES`
//! entries, far above any real pod, so that a hostile body cannot make the
//! view grow beyond a small multiple of the body.
//!
//! The view is also what the injectors edit: [`crate::pod::WorkingSet`]
//! changes it in place and records the patch.
//!
//! Three files: the bounded primitives (`view/bounded.rs`), the containers
//! and their visitor (`view/containers.rs`), and here the pod itself;
//! imports run that way only.

mod bounded;
mod containers;

// The pub items re-exported for `crate::internals` (feature `oracle`) are
// `pub use`; the rest are reached through the view's fields, and named by
// the crate only.
#[cfg(test)]
pub(crate) use bounded::MAX_ENTRIES;
pub(crate) use bounded::{Capped, Str, StrMap, MAX_TOTAL_ENTRIES};
pub use containers::ContainerView;
#[cfg(any(test, feature = "oracle"))]
pub use containers::{container_from_value, LIST_READ_CONTAINERS};
pub(crate) use containers::{EnvView, MountView, Named, PortView, ResourcesView};

use crate::config::Config;
use crate::pod_facts::PodFacts;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct PodView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetaView<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecView<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<StrMap<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<StrMap<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView<'a> {
    /// Whose credential Secrets the storage-initializer and agent get.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<Str<'a>>,
    #[serde(
        borrow,
        default,
        deserialize_with = "containers::regular_containers",
        skip_serializing_if = "Option::is_none"
    )]
    pub containers: Option<Capped<ContainerView<'a>>>,
    #[serde(
        borrow,
        default,
        deserialize_with = "containers::init_containers",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_containers: Option<Capped<ContainerView<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Capped<Named<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Capped<Named<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<StrMap<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_process_namespace: Option<bool>,
}
impl PodView<'_> {
    /// The bytes of the pod's annotations, keys and values, as the API
    /// server counts them against its limit.
    pub(crate) fn annotation_bytes(&self) -> usize {
        let annotations = self.metadata.as_ref().and_then(|m| m.annotations.as_ref());
        annotations.map_or(0, |m| {
            m.0.iter()
                .map(|(k, v)| k.as_str().len() + v.as_str().len())
                .sum()
        })
    }

    /// How many list and map entries the view holds, containers included.
    pub fn entries(&self) -> usize {
        let maps = |m: Option<&StrMap>| m.map_or(0, |m| m.0.len());
        let meta = self.metadata.as_ref().map_or(0, |m| {
            maps(m.labels.as_ref()) + maps(m.annotations.as_ref())
        });
        let spec = self.spec.as_ref().map_or(0, |s| {
            let regular = s
                .containers
                .as_ref()
                .map_or(0, |l| l.0.iter().map(|c| c.entries()).sum::<usize>());
            let init = s
                .init_containers
                .as_ref()
                .map_or(0, |l| l.0.iter().map(|c| c.entries()).sum::<usize>());
            regular
                + init
                + s.volumes.as_ref().map_or(0, |l| l.0.len())
                + s.image_pull_secrets.as_ref().map_or(0, |l| l.0.len())
                + maps(s.node_selector.as_ref())
        });
        meta + spec
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.as_ref()?.labels.as_ref()?.get(key)
    }

    /// What the cluster-lookup rules read of this pod, created in `namespace`.
    pub(crate) fn facts(&self, namespace: &str, config: &Config) -> PodFacts {
        fn pairs<'m>(m: Option<&'m StrMap<'_>>) -> impl Iterator<Item = (&'m str, &'m str)> {
            (m.into_iter().flat_map(|m| m.0.iter())).map(|(k, v)| (k.as_str(), v.as_str()))
        }
        let meta = self.metadata.as_ref();
        let spec = self.spec.as_ref();
        let sa = spec.and_then(|s| s.service_account_name.as_ref());
        PodFacts::new(
            namespace,
            sa.map(Str::as_str).unwrap_or_default(),
            pairs(meta.and_then(|m| m.annotations.as_ref())),
            pairs(meta.and_then(|m| m.labels.as_ref())),
            config,
        )
    }

    /// The name, or the generateName while the name is not set yet.
    pub(crate) fn display_name(&self) -> Option<&str> {
        let meta = self.metadata.as_ref()?;
        meta.name
            .as_ref()
            .map(Str::as_str)
            .filter(|n| !n.is_empty())
            .or_else(|| meta.generate_name.as_ref().map(Str::as_str))
    }
}

/// Why a pod could not be read: the path of the first bad field and what is
/// wrong with it (serde_json's words without their position, when they are
/// serde_json's; `source` keeps its error). Two are equal when they say
/// the same: a pod read from bytes and from a tree gives equal errors,
/// though only the first source knows a line and column.
#[derive(Debug, Clone)]
pub struct ViewError {
    pub path: String,
    pub message: String,
    pub source: Option<crate::shared_error::SharedError<serde_json::Error>>,
}

impl PartialEq for ViewError {
    fn eq(&self, other: &Self) -> bool {
        (&self.path, &self.message) == (&other.path, &other.message)
    }
}

impl Eq for ViewError {}

impl ViewError {
    fn ours(message: String) -> Self {
        Self {
            path: ".".into(),
            message,
            source: None,
        }
    }

    fn decoding(path: String, e: serde_json::Error) -> Self {
        Self {
            path,
            message: message_of(&e),
            source: Some(e.into()),
        }
    }
}

/// serde_json's message without its " at line L column C" suffix, so that
/// the same error reads the same whether it came from bytes or from a tree.
pub(crate) fn message_of(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(stripped) if e.line() > 0 => stripped.to_string(),
        _ => text,
    }
}

/// Refuses a view past `MAX_TOTAL_ENTRIES`.
pub(crate) fn within_budget(view: PodView<'_>) -> Result<PodView<'_>, ViewError> {
    let entries = view.entries();
    if entries > MAX_TOTAL_ENTRIES {
        return Err(ViewError::ours(format!(
            "{entries} list and map entries in the fields the injector reads, more than \
             {MAX_TOTAL_ENTRIES} (the cap on a pod's entries)"
        )));
    }
    Ok(view)
}

/// Decodes the view of the pod held in `raw` (JSON text). Path tracking
/// allocates at every field, so it runs only to explain a failure.
pub fn pod_from_str(raw: &str) -> Result<PodView<'_>, ViewError> {
    if !raw.trim_start().starts_with('{') {
        return Err(ViewError::ours("a Pod must be a JSON object".into()));
    }
    match serde_json::from_str::<PodView>(raw) {
        Ok(view) => within_budget(view),
        Err(plain) => {
            let mut de = serde_json::Deserializer::from_str(raw);
            match serde_path_to_error::deserialize::<_, PodView>(&mut de) {
                Ok(_) => Err(ViewError::decoding(".".into(), plain)),
                Err(e) => Err(ViewError::decoding(e.path().to_string(), e.into_inner())),
            }
        }
    }
}

/// The same view of a pod already held as a JSON tree (the tests' documents,
/// and the test oracle's: feature `oracle`).
#[cfg(any(test, feature = "oracle"))]
pub fn pod_from_value(pod: &serde_json::Value) -> Result<PodView<'_>, ViewError> {
    if !pod.is_object() {
        return Err(ViewError::ours("a Pod must be a JSON object".into()));
    }
    match PodView::deserialize(pod) {
        Ok(view) => within_budget(view),
        Err(plain) => match serde_path_to_error::deserialize::<_, PodView>(pod) {
            Ok(_) => Err(ViewError {
                path: ".".into(),
                message: plain.to_string(),
                source: Some(plain.into()),
            }),
            Err(e) => Err(ViewError {
                path: e.path().to_string(),
                message: e.inner().to_string(),
                source: Some(e.into_inner().into()),
            }),
        },
    }
}

#[cfg(test)]
mod tests;
