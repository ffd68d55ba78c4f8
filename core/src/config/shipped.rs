//! Each KServe release's built-in defaults: the `inferenceservice-config`
//! that release shipped (`config/configmap/inferenceservice.yaml` of
//! kserve/kserve at its tag), reduced to the six keys the pod mutator reads
//! (`storageInitializer`, `credentials`, `logger`, `batcher`, `agent`,
//! `metricsAggregator`), with the values and key order of that file. `serve`
//! and `mutate` start from them when no `--config` is given, under the
//! release `--kserve-version` (or the settings file's `kserveVersion`)
//! selects; `default-config --kserve-version` prints them.
//!
//! Where a release's defaults differ from HEAD's (the unit tests hold each
//! release's keys and values as extracted from its tag):
//! - v0.15.0: `storageInitializer.enableModelcar` is false and `uidModelcar`
//!   absent (kserve#4316 turned the modelcar on in v0.15.2 and v0.16.0), so
//!   an `oci://` URI goes to the storage-initializer;
//!   `enableDirectPvcVolumeMount` is true (a key v0.16.0 removed,
//!   kserve#4694); `credentials.s3.s3CABundleConfigMap` is absent.
//! - v0.16.0: `credentials.s3.s3CABundleConfigMap` is absent (added in
//!   v0.17.0, kserve#4803), which KServe and we read as the empty string
//!   HEAD ships.
//! - v0.17.0, v0.18.0, v0.19.0, v0.20.0: HEAD's values.

use super::{Config, Resources};
use crate::release::Release;

/// The shipped manifest of `release`, as our own YAML: a header naming the
/// tag, then the six keys' JSON as that tag's file holds them.
pub(super) const fn manifest(release: Release) -> &'static str {
    match release {
        Release::V0_15 => include_str!("shipped/v0.15.yaml"),
        Release::V0_16 => include_str!("shipped/v0.16.yaml"),
        Release::V0_17 => include_str!("shipped/v0.17.yaml"),
        Release::V0_18 => include_str!("shipped/v0.18.yaml"),
        Release::V0_19 => include_str!("shipped/v0.19.yaml"),
        Release::V0_20 => include_str!("shipped/v0.20.yaml"),
        Release::Head => include_str!("shipped/head.yaml"),
    }
}

impl Config {
    /// The defaults `release` shipped, read as `release` reads them: what
    /// `serve` and `mutate` take for a release when no ConfigMap is given.
    /// `Config::shipped(Release::Head)` is [`Config::default`].
    pub fn shipped(release: Release) -> Config {
        // Compile-time constants, each parsed by the unit tests under its
        // release: a failure here is a build defect, not bad input.
        match Config::from_manifest_with(manifest(release), &Resources::default(), release) {
            Ok(config) => config,
            Err(e) => unreachable!("the shipped ConfigMap of {release} is invalid: {e}"),
        }
    }

    /// The docs/compatibility.md row ("Defaults without `--config`") that
    /// says how `release`'s shipped ConfigMap differs from the next
    /// release's, where they are read differently.
    pub fn shipped_row(release: Release) -> Option<&'static str> {
        (release == Release::V0_15).then_some("15.18")
    }

    /// The ConfigMap manifest of [`Config::shipped`], for users who want
    /// a starting point (`default-config --kserve-version`).
    pub fn shipped_manifest(release: Release) -> &'static str {
        manifest(release)
    }
}

#[cfg(test)]
mod tests;
