#![deny(unsafe_code)]
//! Layer: the adapters around `kserve-injector-core`: the HTTPS webhook
//! ([`server`]), the CLI ([`cli`]), the cluster caches ([`lookups`]), the
//! config and certificate sources ([`config_file`], [`reload`], [`certs`]).
//! The core's modules are re-exported under their own names, so
//! `kserve_injector::mutate` is the core function the CLI and the webhook
//! both call.

pub use kserve_injector_core::{
    admission, cluster, config, constants, injectors, inputs, json_text, mutation, pod, probe_json,
    quantity, reader, release, settings, view,
};
pub use kserve_injector_core::{
    mutate, ClusterData, Config, ConfigError, Inputs, Mutation, MutationError, Release,
};

pub mod audit;
pub mod certs;
pub mod cli;
pub mod config_file;
pub mod limits;
pub mod lookups;
pub mod memory;
pub mod reload;
pub mod server;
