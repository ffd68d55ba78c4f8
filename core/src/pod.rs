//! The pod the injectors edit, with the name-keyed "ensure" helpers every
//! injector uses, behind one interface ([`PodEdit`], [`ContainerEdit`]), called through
//! generics (no trait objects), with two implementations:
//!
//! - [`WorkingSet`], the webhook's and the CLI's: the borrowed view of the
//!   request ([`crate::view`]) edited in place, typed. Reads are typed and
//!   every write records, at the moment it decides, the RFC 6902 operation
//!   that makes the same change on the full pod. Nothing is built from the
//!   fields the injectors only read: turning the view into a JSON tree
//!   only to drop it again was a large part of the review's cost (see
//!   `docs/performance.md`, measured by `cargo bench --bench review`).
//! - the test oracle's `TreeDoc` (`crate::oracle`, feature `oracle`): the
//!   whole pod as a JSON tree, edited in place (the pipeline before the
//!   view). The injectors' unit tests and the reinvocation property test
//!   require both to give the same pod; it is not compiled into the product.
//!
//! Both record the same kinds of operations: `add` of a map key or of a list
//! entry at its explicit index, `replace` of a value that differs, and a
//! missing (or null) list or map created whole with one `add`. Operations
//! apply in order, so an edit inside something added earlier is valid.

use crate::view::ContainerView;
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Volume, VolumeMount};
use std::borrow::Cow;

pub use crate::pod_facts::Annotations;

/// `spec.containers` or `spec.initContainers`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Containers,
    InitContainers,
}

impl List {
    pub(crate) fn key(self) -> &'static str {
        match self {
            List::Containers => "containers",
            List::InitContainers => "initContainers",
        }
    }
}

/// What the injectors read and write on a pod. Annotations are read through
/// the supertrait, which the cluster lookups take.
pub trait PodEdit: Annotations {
    /// A writable container of this pod.
    type Container<'c>: ContainerEdit
    where
        Self: 'c;

    fn label(&self, key: &str) -> Option<&str>;
    fn name(&self) -> &str;
    /// The namespace the pod is created in.
    fn namespace(&self) -> &str;
    /// `spec.serviceAccountName`; empty means `default`.
    fn service_account_name(&self) -> &str;
    /// The name of `spec.imagePullSecrets[0]`.
    fn first_image_pull_secret(&self) -> Option<&str>;
    fn has_volume(&self, name: &str) -> bool;
    /// How many writes changed the pod so far.
    fn changes(&self) -> usize;

    /// The indices of the entries named `name`.
    fn positions(&self, list: List, name: &str) -> Vec<usize>;
    /// The entries as the injectors read them: every list for containers
    /// the webhook adds, the listed ones for others ([`crate::view`]).
    /// `&mut` because the working set writes out added containers it has
    /// kept as their name only until something reads them.
    fn containers(&mut self, list: List) -> Cow<'_, [ContainerView<'_>]>;

    fn position(&self, list: List, name: &str) -> Option<usize> {
        self.positions(list, name).first().copied()
    }

    /// The first entry named `name`.
    fn container(&mut self, list: List, name: &str) -> Option<Cow<'_, ContainerView<'_>>> {
        let index = self.position(list, name)?;
        match self.containers(list) {
            Cow::Borrowed(all) => all.get(index).map(Cow::Borrowed),
            Cow::Owned(mut all) => (index < all.len()).then(|| Cow::Owned(all.swap_remove(index))),
        }
    }

    /// Container names are unique across containers and init containers.
    fn has_container_named(&self, name: &str) -> bool {
        self.position(List::Containers, name).is_some()
            || self.position(List::InitContainers, name).is_some()
    }

    fn set_annotation(&mut self, key: &str, value: &str);
    fn set_namespace(&mut self, namespace: &str);
    fn set_node_selector(&mut self, key: &str, value: &str);
    fn set_share_process_namespace(&mut self, on: bool);
    /// Appends the container unless any container or init container has its name.
    fn ensure_container(&mut self, list: List, container: Container) -> bool;
    /// [`Self::ensure_container`] for a container whose JSON is already
    /// written: `json` is the text of `typed()`, whose name is `name`. The
    /// working set records the text as it is; the test oracle builds
    /// `typed` and adds it the typed way, so the tests that compare the two
    /// check the text.
    fn ensure_prewritten_container(
        &mut self,
        list: List,
        name: &str,
        json: String,
        typed: impl FnOnce() -> Container,
    ) -> bool {
        let _ = (name, json);
        self.ensure_container(list, typed())
    }
    /// Appends the volume unless a volume of that name exists.
    fn ensure_volume(&mut self, volume: &Volume) -> bool;
    /// A writable container; `None` if there is no entry at `index`.
    fn container_at(&mut self, list: List, index: usize) -> Option<Self::Container<'_>>;

    /// The first entry named `name`, writable.
    fn container_mut(&mut self, list: List, name: &str) -> Option<Self::Container<'_>> {
        let index = self.position(list, name)?;
        self.container_at(list, index)
    }
}

/// One container's reads and name-keyed ensure helpers.
pub trait ContainerEdit {
    fn has_mount(&self, name: &str) -> bool;
    fn has_env(&self, name: &str) -> bool;
    /// The value of the first variable named `name`.
    fn env_value(&self, name: &str) -> Option<&str>;
    fn args(&self) -> Vec<&str>;
    /// Appends the mount unless the container already mounts a volume of that name.
    fn ensure_mount(&mut self, mount: &VolumeMount) -> bool;
    /// Appends the mount unless the container already mounts that volume at
    /// that path: a second mount of a volume elsewhere is added, as KServe
    /// v0.15 adds it; a second one at the same path, which the API server
    /// refuses, is not.
    fn ensure_mount_at(&mut self, mount: &VolumeMount) -> bool;
    /// Appends the variable unless one of that name exists.
    fn ensure_env(&mut self, var: &EnvVar) -> bool;
    /// KServe's add-or-replace: every entry of that name gets the value; a
    /// variable the user sources from `valueFrom` is left alone, since giving
    /// it a value too would make the pod invalid.
    fn set_env(&mut self, name: &str, value: &str);
    /// Appends the port unless a port of that name exists.
    fn ensure_port(&mut self, port: &ContainerPort) -> bool;
    /// Sets `securityContext.runAsUser`, keeping every other field.
    fn set_run_as_user(&mut self, uid: i64);
    /// Appends arguments; callers check first that they are not there yet.
    fn push_args(&mut self, args: &[&str]);
}

/// A token of a path: a map key (escaped as RFC 6901 says) or a list index.
pub(crate) enum PathStep<'s> {
    Key(&'s str),
    Index(usize),
}

impl<'s> From<&'s str> for PathStep<'s> {
    fn from(key: &'s str) -> Self {
        PathStep::Key(key)
    }
}

impl From<usize> for PathStep<'_> {
    fn from(index: usize) -> Self {
        PathStep::Index(index)
    }
}

/// `path` (pointer text) with `steps` appended, as RFC 6901 text: keys
/// with `~` or `/` escaped. Text rather than jsonptr's `PointerBuf`: its
/// `push_back` allocates a token per step and its `parse` scans again what
/// is valid by construction, both on every recorded operation, which a
/// small review notices (`examples/review_loop.rs` counts it).
pub(crate) fn child<'s, const N: usize>(path: &str, steps: [PathStep<'s>; N]) -> String {
    let room = |step: &PathStep| match step {
        PathStep::Key(key) => key.len() + 4,
        PathStep::Index(_) => 21,
    };
    let mut text = String::with_capacity(path.len() + steps.iter().map(room).sum::<usize>());
    text.push_str(path);
    for step in steps {
        text.push('/');
        match step {
            PathStep::Key(key) => push_token(&mut text, key),
            PathStep::Index(index) => text.push_str(itoa::Buffer::new().format(index)),
        }
    }
    text
}

/// Appends `key` as an RFC 6901 token (`~` as `~0`, `/` as `~1`). By hand:
/// jsonptr's `Token` builds an owned copy of every key with either, and
/// annotation keys all have a `/`; memchr finds them several bytes at a time,
/// where a byte-wise scan of every key showed in a small review's profile.
fn push_token(text: &mut String, key: &str) {
    let bytes = key.as_bytes();
    // Below a word or two, memchr's setup costs more than looking at each byte.
    if bytes.len() < 16 && !bytes.iter().any(|&b| b == b'~' || b == b'/') {
        text.push_str(key);
        return;
    }
    let mut start = 0;
    while let Some(at) = memchr::memchr2(b'~', b'/', &bytes[start..]) {
        let i = start + at;
        // Both bytes are ASCII, so `start..i` lies on char boundaries.
        text.push_str(&key[start..i]);
        text.push_str(if bytes[i] == b'~' { "~0" } else { "~1" });
        start = i + 1;
    }
    text.push_str(&key[start..]);
}

pub mod build;
pub(crate) mod recorded;
mod working;

pub use recorded::{apply_all, ApplyError, NotApplied, Op, OpKind};
pub use working::{TypedContainer, WorkingSet};

#[cfg(test)]
mod tests;
