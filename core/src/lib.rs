#![forbid(unsafe_code)]
//! Layer: the pure core. KServe's pod mutator as functions from data to
//! data: the `inferenceservice-config` parsed ([`config`]), the pod read
//! (the borrowed view) and edited by the injectors on a working set
//! against a plain snapshot of cluster objects ([`cluster`]), and the
//! result given as a JSON Patch ([`mutate`], [`admission`]). Nothing here
//! does I/O, reads a clock or holds a global; the adapters (server, CLI,
//! caches, watchers) are in `kserve-injector`.
//!
//! The surface is what those adapters, the tests, the benches, the
//! examples and the fuzz targets call, each item by one path: a subject
//! with several items is a public module ([`admission`], [`audit`],
//! [`cluster`], [`config`], [`constants`], [`reader`], [`release`]); what a
//! mutation takes and gives is at the root. Every other module is private.
//! What only the test oracle, the tests and the benches reach (the working
//! set the injectors edit, the pod's view, a review's stages one by one) is
//! public under the `oracle` feature alone, in `internals`.
//! `.ci/public-api.sh` fails on a public item named nowhere outside.

pub mod admission;
pub mod audit;
pub mod cluster;
pub mod config;
pub mod constants;
mod injectors;
mod inputs;
mod json_text;
mod mutation;
// The working set and the pod's view are public to the test oracle and
// the benches (`internals`, feature `oracle`), private without it.
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))]
mod pod;
mod pod_facts;
pub mod policy;
mod quantity;
pub mod reader;
pub mod release;
mod settings;
mod shared_error;
mod storage_uri;
#[cfg_attr(not(feature = "oracle"), allow(unreachable_pub))]
mod view;

pub use injectors::{InjectError, InjectorOutcome, INJECTOR_NAMES, MUTATOR};
pub use inputs::{Inputs, ModelcarMode, SecurityProfile};
pub use mutation::{mutate, mutate_template, Mutation, MutationError, Unsupported};
pub use pod::{apply_all, ApplyError, Op, OpKind};
pub use pod_facts::PodFacts;
pub use settings::{Settings, SettingsError};
pub use shared_error::{AnyError, SharedError};

/// What the test oracle (the `kserve-injector-oracle` crate), the tests and
/// the benches reach and nothing that ships calls: the working set the
/// injectors edit, the pod's view it is built from, a review's stages one
/// by one, and the ClusterStorageContainer choice the lookups bench times. Public under the `oracle` feature only, which only that
/// crate turns on (a dev-dependency of `kserve-injector`).
#[cfg(feature = "oracle")]
pub mod internals {
    pub use crate::cluster::storage_container::select as select_storage_container;
    pub use crate::mutation::{edit, Edits};
    pub use crate::pod::{List, TypedContainer, WorkingSet};
    pub use crate::pod_facts::Annotations;
    pub use crate::release::behaviour::Switch;
    pub use crate::view::{
        container_from_value, pod_from_str, pod_from_value, ContainerView, PodView, ViewError,
        LIST_READ_CONTAINERS,
    };
}
