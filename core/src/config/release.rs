//! The ConfigMap as an older KServe release reads it, and the images
//! whose tags name another release than the selected one.

use super::{Config, AGENT_KEY, STORAGE_INITIALIZER_KEY};
use crate::release::{Behaviour, ImageRelease, Release};

impl Config {
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
    pub fn for_behaviour(mut self, release: Behaviour) -> Self {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMismatch {
    /// The config key (`agent`, `storageInitializer`).
    pub key: &'static str,
    pub image: String,
    pub names: ImageRelease,
}

/// The release the agent and storage-initializer images both name, when
/// they name one (`kserve/agent:v0.17.0` → v0.17; a v0.20 tag is v0.20,
/// not HEAD): KServe's release manifests pin both images to the release,
/// the same reading as [`image_mismatches`].
pub fn release_of_images(config: &Config) -> Option<Release> {
    let agent = Release::of_image(&config.agent.image)?;
    let storage = Release::of_image(&config.storage_initializer.image)?;
    (agent == storage)
        .then(|| {
            crate::release::ALL
                .into_iter()
                .find(|r| r.matches_image(agent))
        })
        .flatten()
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
    fn the_release_of_the_images_is_the_one_both_name() {
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
        assert_eq!(tagged("v0.15.2"), Some(Release::V0_15));
        assert_eq!(tagged("v0.18.0"), Some(Release::V0_18));
        assert_eq!(tagged("v0.20.0"), Some(Release::V0_20));
        assert_eq!(tagged("v0.21.0"), Some(Release::Head));
        assert_eq!(tagged("v0.14.1"), None);
        assert_eq!(tagged("latest"), None);
        assert_eq!(
            with("kserve/agent:v0.17.0", "kserve/storage-initializer:v0.18.0"),
            None
        );
        assert_eq!(
            with("kserve/agent:v0.17.0", "kserve/storage-initializer:latest"),
            None
        );
    }
}
