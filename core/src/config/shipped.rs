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
//! tag's keys and values as extracted from it):
//! - v0.15.0 and v0.15.1: `storageInitializer.enableModelcar` is false and
//!   `uidModelcar` absent (kserve#4316 turned the modelcar on in v0.15.2), so
//!   an `oci://` URI goes to the storage-initializer;
//! - v0.15.0 to v0.15.2: `enableDirectPvcVolumeMount` is true (a key
//!   v0.16.0 removed, kserve#4694); `credentials.s3.s3CABundleConfigMap` is
//!   absent (added in v0.17.0, kserve#4803), which KServe and we read as the
//!   empty string HEAD ships;
//! - v0.16.0: `credentials.s3.s3CABundleConfigMap` is absent;
//! - v0.17.0 to v0.20.0: HEAD's values.
//!
//! Two tags of a line may ship the same data (v0.15.0 and v0.15.1, v0.17.0
//! and v0.17.1, v0.18.0 and v0.18.1): each still has its own manifest,
//! whose header names its tag, as `default-config` prints it.

use super::{Config, Resources};
use crate::release::Release;

/// The shipped manifest of `release`, as our own YAML: a header naming the
/// tag, then the six keys' JSON as that tag's file holds them.
pub(super) const fn manifest(release: Release) -> &'static str {
    match release {
        Release::V0_15_0 => include_str!("shipped/v0.15.0.yaml"),
        Release::V0_15_1 => include_str!("shipped/v0.15.1.yaml"),
        Release::V0_15_2 => include_str!("shipped/v0.15.2.yaml"),
        Release::V0_16_0 => include_str!("shipped/v0.16.0.yaml"),
        Release::V0_17_0 => include_str!("shipped/v0.17.0.yaml"),
        Release::V0_17_1 => include_str!("shipped/v0.17.1.yaml"),
        Release::V0_18_0 => include_str!("shipped/v0.18.0.yaml"),
        Release::V0_18_1 => include_str!("shipped/v0.18.1.yaml"),
        Release::V0_19_0 => include_str!("shipped/v0.19.0.yaml"),
        Release::V0_20_0 => include_str!("shipped/v0.20.0.yaml"),
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
    /// release's, where they are read differently: v0.15.1's modelcar off
    /// (v0.15.0 ships the same), v0.15.2's `enableDirectPvcVolumeMount`.
    pub fn shipped_row(release: Release) -> Option<&'static str> {
        match release {
            Release::V0_15_1 => Some("15.1.1"),
            Release::V0_15_2 => Some("15.18"),
            _ => None,
        }
    }

    /// The ConfigMap manifest of [`Config::shipped`], for users who want
    /// a starting point (`default-config --kserve-version`).
    pub fn shipped_manifest(release: Release) -> &'static str {
        manifest(release)
    }
}

#[cfg(test)]
mod tests;
