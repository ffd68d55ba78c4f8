//! End to end on a real kube-apiserver + etcd on loopback
//! (`tests/e2e/apiserver/`, built by `bash .ci/e2e.sh`): every test on
//! kube-apiserver 1.36, and those named `…_on_1_31` also on 1.31, the
//! oldest version the README claims. The cluster lookups under the shipped
//! RBAC, `serve` called by the API server with another webhook after it,
//! shadow mode behind a first registration, `audit` and `audit
//! --upgrade-to` as its own ClusterRole's user, the namespaced mode with no
//! credential in any log, `serve` at scale in a 128 MiB memory cgroup
//! through an API server restart, `check` on an install, and the
//! native-sidecar modelcar stored by the API server. Each test names the
//! version it runs against in `cargo test`'s output. Without the binaries a
//! line in `cargo test`'s output says how to build them and the tests pass
//! as not run, except under `CI=true`, where they fail.

mod audit;
mod check;
mod harness;
mod image_volume;
mod least_privilege;
mod lookups;
mod native_sidecar;
mod pod_security;
mod policy;
mod ports;
mod scale;
mod service_accounts;
mod shadow;
mod sidecar_webhook;
#[path = "../server/support/mod.rs"]
mod support;
mod tenant;
mod upgrade;
mod webhook;
