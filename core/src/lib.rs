#![forbid(unsafe_code)]
//! Layer: the pure core. KServe's pod mutator as functions from data to
//! data: the `inferenceservice-config` parsed ([`config`]), the pod read
//! ([`reader`], [`view`]), the injectors run on a working set ([`pod`],
//! [`injectors`]) against a plain snapshot of cluster objects
//! ([`cluster`]), and the result given as a JSON Patch ([`mutation`],
//! [`admission`]). Nothing here does I/O, reads a clock or holds a global;
//! the adapters (server, CLI, caches, watchers) are in `kserve-injector`.

pub mod admission;
pub mod audit;
pub mod cluster;
pub mod config;
pub mod constants;
pub mod injectors;
pub mod inputs;
pub(crate) mod json_text;
pub mod mutation;
pub mod pod;
pub mod pod_facts;
pub(crate) mod quantity;
pub mod reader;
pub mod release;
pub mod settings;
mod shared_error;
pub(crate) mod storage_uri;
pub mod view;

pub use cluster::ClusterSnapshot;
pub use config::{Config, ConfigError};
pub use inputs::Inputs;
pub use mutation::{mutate, Mutation, MutationError};
pub use quantity::QuantityError;
pub use release::Release;
pub use shared_error::{AnyError, SharedError};
