//! The core's properties, on generated pods and cluster objects: the
//! reinvocation properties of the whole pipeline (one file per property),
//! the credential injection, and the cluster lookups' agreement with the
//! core's snapshot.

mod credentials;
mod lookups;
mod pod_security;
mod reinvocation;
mod shadow;
