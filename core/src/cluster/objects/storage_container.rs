//! A ClusterStorageContainer as the storage-initializer rules keep it: its
//! container and its `supportedUriFormats`, compiled once.

use super::heap;
use crate::cluster::packed::{heap_len, Packed};
use k8s_openapi::api::core::v1::Container;
use std::sync::Arc;

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

    /// What holding it costs, as [`ServiceAccount::kept_bytes`](crate::cluster::ServiceAccount::kept_bytes) counts
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
