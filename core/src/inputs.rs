//! Everything a mutation depends on besides the pod: the injectors and the
//! core both read it, so it lives apart from either. What a review would
//! otherwise derive from the config again and again is derived here, once
//! per config (the classic modelcar pair, `inputs/modelcar_pair.rs`).

pub(crate) mod modelcar_pair;

use crate::cluster::ClusterSnapshot;
use crate::config::Config;
use crate::constants::DEFAULT_CONTROLLER_NAMESPACE;
use k8s_openapi::api::core::v1::Volume;
use modelcar_pair::{PairKey, Prewritten};
use std::sync::Arc;

/// Everything a mutation depends on besides the pod. The config is shared
/// (`Arc`) because the server builds one `Inputs` per admission around that
/// request's cluster snapshot.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Replaced whole, the config keeps its reviews right but slower (the
    /// modelcar pair is built for each); [`Self::edit_config`] keeps both.
    pub config: Arc<Config>,
    /// The namespace KServe's controller runs in (its `POD_NAMESPACE`).
    pub controller_namespace: String,
    pub cluster: ClusterSnapshot,
    /// The modelcar's shape when a pod does not choose one (`--modelcar-mode`).
    pub modelcar_mode: ModelcarMode,
    /// The security profile of the containers we add when a pod does not
    /// choose one (`--security-profile`).
    pub security_profile: SecurityProfile,
    /// The `kserve-provision-location` volume the storage-initializer
    /// downloads into (`modelVolume` of `--config-file`); `None`: KServe's emptyDir.
    pub model_volume: Option<Volume>,
    /// The cluster's API server drops `image` volumes (the ImageVolume
    /// feature gate is off: alpha in 1.31, beta and off by default in 1.33
    /// and 1.34, on from 1.35) and stores the pod without them and their
    /// mounts. Then a pod we would give an `image` volume is denied instead
    /// with the reason and the fix. `false` (the default): they are kept.
    pub drops_image_volumes: bool,
    /// The classic modelcar pair's text for the config it was written
    /// from, handed out only while the config still has that pair's key
    /// ([`Self::modelcar_pair`]).
    modelcar_pair: Option<Arc<Prewritten>>,
}

/// Why a pod that would get an `image` volume is denied on a cluster that
/// drops them ([`Inputs::drops_image_volumes`]), after what would carry it.
pub(crate) const IMAGE_VOLUMES_DROPPED: &str = "this cluster's API server drops image volumes (the ImageVolume feature gate is off; it is on by default from Kubernetes 1.35) and would store the pod without it and its mounts, a model server without its model";

/// How hardened the containers we add are: `baseline`, KServe's containers
/// as they are, or `restricted`, each meeting the restricted Pod Security
/// Standard (`crate::injectors::security_profile`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum SecurityProfile {
    #[default]
    Baseline,
    Restricted,
}

impl SecurityProfile {
    pub const ALL: [SecurityProfile; 2] = [SecurityProfile::Baseline, SecurityProfile::Restricted];
    /// The spellings of the flag and of the annotation, in [`Self::ALL`]'s order.
    pub const NAMES: [&'static str; 2] = ["baseline", "restricted"];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SecurityProfile::Baseline => Self::NAMES[0],
            SecurityProfile::Restricted => Self::NAMES[1],
        }
    }
}

/// A spelling that is not one of [`SecurityProfile::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a security profile (expected baseline or restricted)")]
pub struct UnknownSecurityProfile(pub String);

impl std::str::FromStr for SecurityProfile {
    type Err = UnknownSecurityProfile;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        (Self::ALL.into_iter())
            .find(|m| m.as_str() == text)
            .ok_or_else(|| UnknownSecurityProfile(text.to_string()))
    }
}

/// How the modelcar joins a pod: KServe's regular sidecar container, or a
/// native sidecar (an init container with `restartPolicy: Always`, which
/// Kubernetes starts, and probes, before the containers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ModelcarMode {
    #[default]
    Classic,
    NativeSidecar,
}

impl ModelcarMode {
    pub const ALL: [ModelcarMode; 2] = [ModelcarMode::Classic, ModelcarMode::NativeSidecar];
    /// The spellings of the flag and of the annotation, in [`Self::ALL`]'s order.
    pub const NAMES: [&'static str; 2] = ["classic", "native-sidecar"];
    /// Native sidecars are on by default from Kubernetes 1.29 (beta; GA in
    /// 1.33); an older API server drops `restartPolicy` from init containers.
    pub const NATIVE_SIDECAR_MIN_VERSION: (u32, u32) = (1, 29);

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ModelcarMode::Classic => Self::NAMES[0],
            ModelcarMode::NativeSidecar => Self::NAMES[1],
        }
    }
}

impl std::fmt::Display for ModelcarMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A spelling that is not one of [`ModelcarMode::NAMES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a modelcar mode (expected classic or native-sidecar)")]
pub struct UnknownModelcarMode(pub String);

impl std::str::FromStr for ModelcarMode {
    type Err = UnknownModelcarMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        (Self::ALL.into_iter())
            .find(|m| m.as_str() == text)
            .ok_or_else(|| UnknownModelcarMode(text.to_string()))
    }
}

impl Inputs {
    pub fn new(config: Config) -> Self {
        Self {
            modelcar_pair: prewrite(&config),
            config: Arc::new(config),
            controller_namespace: DEFAULT_CONTROLLER_NAMESPACE.to_string(),
            cluster: ClusterSnapshot::default(),
            modelcar_mode: ModelcarMode::default(),
            security_profile: SecurityProfile::default(),
            model_volume: None,
            drops_image_volumes: false,
        }
    }

    /// The same config and namespace with another cluster snapshot.
    pub fn with_cluster(&self, cluster: ClusterSnapshot) -> Self {
        Self {
            config: self.config.clone(),
            controller_namespace: self.controller_namespace.clone(),
            cluster,
            modelcar_mode: self.modelcar_mode,
            security_profile: self.security_profile,
            model_volume: self.model_volume.clone(),
            drops_image_volumes: self.drops_image_volumes,
            modelcar_pair: self.modelcar_pair.clone(),
        }
    }

    /// Adjusts the config in place, for tests and tools; what is derived
    /// from it follows.
    pub fn edit_config(&mut self, edit: impl FnOnce(&mut Config)) {
        edit(Arc::make_mut(&mut self.config));
        if self.modelcar_pair().is_none() {
            self.modelcar_pair = prewrite(&self.config);
        }
    }

    /// The classic modelcar pair's text for this config; `None` if the
    /// config's pair key is not the one the text was written for (the
    /// config was replaced) or the pair could not be prewritten.
    pub(crate) fn modelcar_pair(&self) -> Option<&Prewritten> {
        let key = PairKey::of(&self.config.storage_initializer);
        self.modelcar_pair.as_deref().filter(|text| text.fits(&key))
    }
}

fn prewrite(config: &Config) -> Option<Arc<Prewritten>> {
    Prewritten::write(PairKey::of(&config.storage_initializer)).map(Arc::new)
}

impl Default for Inputs {
    fn default() -> Self {
        Self::new(Config::default())
    }
}
