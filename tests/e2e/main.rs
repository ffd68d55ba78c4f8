//! End to end on a real kube-apiserver 1.20 + etcd on loopback
//! (`tests/e2e/apiserver/`, built by `bash .ci/e2e.sh`): the cluster lookups under the
//! shipped RBAC, `serve` called by the API server with another webhook
//! after it, shadow mode behind a first registration, `audit` and
//! `audit --upgrade-to` as its own ClusterRole's user, the namespaced
//! mode with no credential in any log, `serve` at scale in a 128 MiB
//! memory cgroup through an API server restart, and `serve --modelcar-mode
//! native-sidecar` refusing this (too old) API server. Without the binaries
//! a line in `cargo test`'s output says how to build them and the tests
//! pass as not run, except under `CI=true`, where they fail.

mod audit;
mod check;
mod harness;
mod least_privilege;
mod lookups;
mod native_sidecar;
mod ports;
mod scale;
mod shadow;
mod sidecar_webhook;
#[path = "../server/support/mod.rs"]
mod support;
mod tenant;
mod upgrade;
mod webhook;
