//! The ConfigMap as an older KServe release reads it, and the images
//! whose tags name another release than the selected one.

use super::{Config, AGENT_KEY, STORAGE_INITIALIZER_KEY};
use crate::release::{Behaviour, ImageRelease, Release};

impl Config {
    /// The KServe release whose mutator this config is read for
    /// (`--kserve-version`).
    pub fn release(&self) -> Release {
        self.release.release()
    }

    /// This config as `release` reads its ConfigMap: the keys that release
    /// does not know are cleared (Go's JSON decoding ignores unknown keys),
    /// so every injector sees what that release's mutator sees.
    /// - `storageInitializer.ociModelMode`, `enableOciModelSupport`: v0.20
    ///   (`types.StorageInitializerConfig` @v0.19.0 has neither);
    ///   `ociInsecureRegistry`: HEAD.
    /// - `logger.marshallerUrl`, `batchSize`, `batchInterval`: v0.17
    ///   (`LoggerConfig` @v0.16.0); `logger.storage`: v0.16 (`LoggerConfig`
    ///   @v0.15.0).
    /// - `storageInitializer.enableDirectPvcVolumeMount`: v0.15 only
    ///   (`StorageInitializerConfig` @v0.15.0), read at parse.
    pub fn for_release(self, release: Release) -> Self {
        self.for_behaviour(release.into())
    }

    /// [`Self::for_release`] for a release's switches, some perhaps flipped.
    pub(crate) fn for_behaviour(mut self, release: Behaviour) -> Self {
        self.release = release;
        let storage = &mut self.storage_initializer;
        if !release.oci_mode_keys() {
            storage.oci_model_mode.clear();
            storage.enable_oci_model_support = false;
        }
        if !release.oci_insecure_registry_key() {
            storage.oci_insecure_registry = false;
        }
        if !release.logger_marshaller() {
            self.logger.marshaller_url.clear();
            self.logger.batch_size = 0;
            self.logger.batch_interval.clear();
        }
        if !release.logger_storage() {
            self.logger.storage = None;
        }
        // The copy mode is read from the ConfigMap only under v0.15; a
        // config read as another release (KServe's shipped one, whose
        // v0.15.0 says `enableDirectPvcVolumeMount: true`) mounts directly.
        if release.direct_pvc_always() {
            self.storage_initializer.pvc_copy_mode = false;
        }
        self
    }
}

/// One image of the config that names another release than the selected one.
#[derive(Debug)]
pub struct ImageMismatch {
    /// The config key (`agent`, `storageInitializer`).
    pub key: &'static str,
    pub image: String,
    pub names: ImageRelease,
}

/// Why the agent and storage-initializer images name no release.
#[derive(Debug, thiserror::Error)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub enum ReleaseOfImagesError {
    /// Not the same `v<major>.<minor>.<patch>` tag on both (`latest`, a
    /// digest, two releases).
    #[error("the agent image {agent:?} and the storage-initializer image {storage_initializer:?} do not name one release")]
    NotOne {
        agent: String,
        storage_initializer: String,
    },
    /// A tag of no release this build models: a patch release newer than
    /// those it knows of a line (`v0.15.3`), or an older line.
    #[error("the agent and storage-initializer images name KServe {tag}, which this build does not model ({})", line_list(line))]
    Unmodelled {
        tag: ImageRelease,
        /// The releases of that line it models.
        line: Vec<Release>,
    },
}

fn line_list(line: &[Release]) -> String {
    match line {
        [] => "no release of that line".to_string(),
        _ => {
            let names: Vec<&str> = line.iter().map(|r| r.as_str()).collect();
            format!("of that line: {}", names.join(", "))
        }
    }
}

/// The release the agent and storage-initializer images both name
/// (`kserve/agent:v0.15.2` → v0.15.2; a v0.20.0 tag is v0.20.0, not HEAD;
/// a newer line than every release known is HEAD): KServe's release
/// manifests pin both images to the release, the same reading as
/// [`image_mismatches`]. A tag of a known line but no known release
/// (`v0.15.3`) names none: its mutator may differ from every known one.
pub fn release_of_images(config: &Config) -> Result<Release, ReleaseOfImagesError> {
    let agent = Release::of_image(&config.agent.image);
    let storage = Release::of_image(&config.storage_initializer.image);
    match (agent, storage) {
        (Some(agent), Some(storage)) if agent == storage => {
            Release::of_tag(agent).map_err(|tag| ReleaseOfImagesError::Unmodelled {
                tag,
                line: Release::of_line(tag),
            })
        }
        _ => Err(ReleaseOfImagesError::NotOne {
            agent: config.agent.image.clone(),
            storage_initializer: config.storage_initializer.image.clone(),
        }),
    }
}

/// The agent and storage-initializer images whose tags name a release
/// other than `release` (`latest`, digests and other tags name none).
pub fn image_mismatches(config: &Config, release: impl Into<Release>) -> Vec<ImageMismatch> {
    let release = release.into();
    let images = [
        (AGENT_KEY, &config.agent.image),
        (STORAGE_INITIALIZER_KEY, &config.storage_initializer.image),
    ];
    (images.into_iter())
        .filter_map(|(key, image)| {
            let names = Release::of_image(image)?;
            (!release.matches_image(names)).then(|| ImageMismatch {
                key,
                image: image.clone(),
                names,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_of_the_images_is_the_tag_both_name() {
        let with = |agent: &str, storage: &str| {
            let mut config = Config::default();
            config.agent.image = agent.into();
            config.storage_initializer.image = storage.into();
            release_of_images(&config)
        };
        let tagged = |v: &str| {
            with(
                &format!("kserve/agent:{v}"),
                &format!("kserve/storage-initializer:{v}"),
            )
        };
        assert_eq!(tagged("v0.15.0"), Ok(Release::V0_15_0));
        assert_eq!(tagged("v0.15.2"), Ok(Release::V0_15_2));
        assert_eq!(tagged("v0.17.1"), Ok(Release::V0_17_1));
        assert_eq!(tagged("v0.18.0"), Ok(Release::V0_18_0));
        assert_eq!(tagged("v0.20.0"), Ok(Release::V0_20_0));
        assert_eq!(tagged("v0.21.0"), Ok(Release::Head));
        assert_eq!(tagged("v1.0.0"), Ok(Release::Head));
        // A patch release this build does not know names none.
        let unknown = tagged("v0.15.3").unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "the agent and storage-initializer images name KServe v0.15.3, which this build does not model (of that line: v0.15.0, v0.15.1, v0.15.2)"
        );
        assert!(matches!(
            tagged("v0.20.1"),
            Err(ReleaseOfImagesError::Unmodelled { line, .. }) if line == [Release::V0_20_0]
        ));
        let older = tagged("v0.14.1").unwrap_err();
        assert!(
            older.to_string().ends_with("(no release of that line)"),
            "{older}"
        );
        for (agent, storage) in [
            ("kserve/agent:latest", "kserve/storage-initializer:latest"),
            ("kserve/agent:v0.17.0", "kserve/storage-initializer:v0.18.0"),
            ("kserve/agent:v0.17.0", "kserve/storage-initializer:v0.17.1"),
            ("kserve/agent:v0.17.0", "kserve/storage-initializer:latest"),
        ] {
            assert!(
                matches!(
                    with(agent, storage),
                    Err(ReleaseOfImagesError::NotOne { .. })
                ),
                "{agent} {storage}"
            );
        }
    }
}
