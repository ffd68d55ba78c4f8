//! kserve-injector: KServe's pod mutator as pure functions (config in, pod
//! and JSON Patch out), plus the thin adapters the binary wires around them.

pub mod admission;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod config_file;
pub mod constants;
pub mod env;
pub mod injectors;
pub mod json_text;
pub mod lookups;
pub mod mutation;
pub mod patch;
pub mod pod;
pub mod probe_json;
pub mod quantity;
pub mod reader;
pub mod reload;
pub mod server;
pub mod view;

pub use cluster::ClusterData;
pub use config::{Config, ConfigError};
pub use env::Env;
pub use mutation::{mutate, Mutation, MutationError};
