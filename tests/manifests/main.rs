//! What ships to clusters, checked in Rust: the Argo CD health check for
//! InferenceService run in a Lua 5.1 VM as Argo CD runs it, and the
//! manifests that ship it. (The install and Helm checks are the pytest
//! suite beside this file.)

mod argocd_health;
