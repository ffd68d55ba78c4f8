//! The classic modelcar pair, KServe's `modelcar` sidecar and
//! `modelcar-init`: typed ([`containers`]), and as JSON text with the model
//! image left out ([`Prewritten`]), written once when the
//! [`Inputs`](super::Inputs) are built. An OCI review then only splices its
//! image in, rather than building both typed containers with their resource
//! maps and writing them field by field: that was about 15,000 of a 1 KB
//! modelcar review's 63,000 instructions (`examples/review_loop.rs` under
//! callgrind, docs/performance.md). The text is the typed containers' own,
//! so the two cannot drift; tests compare it with a fresh write.
//!
//! Both are built from a [`PairKey`] and nothing else: the config fields the
//! pair reads, taken from the config by [`PairKey::of`] alone. A field the
//! pair starts to read has to join the key to be read at all, so text
//! written for one key is never used for a config whose key differs.

use crate::config::StorageInitializerConfig;
use crate::constants::{
    DEFAULT_CPU_MODELCAR, DEFAULT_MEMORY_MODELCAR, DEFAULT_MODEL_LOCAL_MOUNT_PATH,
    FALLBACK_TO_LOGS_ON_ERROR, MODELCAR_CONTAINER, MODELCAR_INIT_CONTAINER,
    PROVISION_LOCATION_VOLUME,
};
use crate::json_text::{k8s, needs_escape, write_str};
use k8s_openapi::api::core::v1::{Container, ResourceRequirements, SecurityContext, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The modelcar mount is the parent of the model path, so the symlink the
/// sidecar creates at `/mnt/models` is visible to the server.
const MODELCAR_MOUNT_PATH: &str = "/mnt";

/// Stands for the image while the pair is written. A config whose own
/// values hold it gets no prewritten text (the counts in [`pieces`] catch
/// that), and its reviews build the containers as before.
const MARK: &str = "kserve-injector.modelcar-image";

/// What the classic pair reads of the config: `cpuModelcar`,
/// `memoryModelcar` and `uidModelcar` of the storage-initializer section.
/// Borrowed from a config to be compared; owned where it is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PairKey<'a> {
    cpu: Cow<'a, str>,
    memory: Cow<'a, str>,
    uid: Option<i64>,
}

impl<'a> PairKey<'a> {
    /// The one place the pair reads the config.
    pub(crate) fn of(config: &'a StorageInitializerConfig) -> Self {
        PairKey {
            cpu: Cow::Borrowed(&config.cpu_modelcar),
            memory: Cow::Borrowed(&config.memory_modelcar),
            uid: config.uid_modelcar,
        }
    }

    fn into_owned(self) -> PairKey<'static> {
        let PairKey { cpu, memory, uid } = self;
        PairKey {
            cpu: Cow::Owned(cpu.into_owned()),
            memory: Cow::Owned(memory.into_owned()),
            uid,
        }
    }
}

/// The volume the modelcar and the containers that read the model share.
pub(crate) fn modelcar_mount() -> VolumeMount {
    VolumeMount {
        name: PROVISION_LOCATION_VOLUME.to_string(),
        mount_path: MODELCAR_MOUNT_PATH.to_string(),
        ..Default::default()
    }
}

/// The classic pair for `image`, typed: `(modelcar, modelcar-init)`.
pub(crate) fn containers(key: &PairKey<'_>, image: &str) -> (Container, Container) {
    let or_default = |v: &str, d: &str| {
        if v.is_empty() {
            d.to_string()
        } else {
            v.to_string()
        }
    };
    let amounts = BTreeMap::from([
        (
            "cpu".to_string(),
            Quantity(or_default(&key.cpu, DEFAULT_CPU_MODELCAR)),
        ),
        (
            "memory".to_string(),
            Quantity(or_default(&key.memory, DEFAULT_MEMORY_MODELCAR)),
        ),
    ]);
    let resources = ResourceRequirements {
        limits: Some(amounts.clone()),
        requests: Some(amounts),
        ..Default::default()
    };
    let sh = |script: String| Some(vec!["sh".to_string(), "-c".to_string(), script]);
    let sidecar = Container {
        name: MODELCAR_CONTAINER.to_string(),
        image: Some(image.to_string()),
        volume_mounts: Some(vec![modelcar_mount()]),
        // `$$` is Kubernetes' escape for `$`, so the shell sees `$$`: its own PID.
        args: sh(format!(
            "ln -sf /proc/$$$$/root/models {DEFAULT_MODEL_LOCAL_MOUNT_PATH} && sleep infinity"
        )),
        resources: Some(resources.clone()),
        termination_message_policy: Some(FALLBACK_TO_LOGS_ON_ERROR.to_string()),
        security_context: key.uid.map(|uid| SecurityContext {
            run_as_user: Some(uid),
            ..Default::default()
        }),
        ..Default::default()
    };
    let init = Container {
        name: MODELCAR_INIT_CONTAINER.to_string(),
        image: Some(image.to_string()),
        args: sh(format!(
            "echo 'Pre-fetching modelcar {image}: ' && [ -d /models ] && [ \"$$(ls -A /models)\" ] && echo 'OK ... Prefetched and valid (/models exists)' || (echo 'NOK ... Prefetched but modelcar is invalid (/models does not exist or is empty)' && exit 1)"
        )),
        resources: Some(resources),
        termination_message_policy: Some(FALLBACK_TO_LOGS_ON_ERROR.to_string()),
        ..Default::default()
    };
    (sidecar, init)
}

/// The classic pair's JSON text for one key, cut where the image goes.
#[derive(Debug)]
pub(crate) struct Prewritten {
    /// What the text was written from.
    key: PairKey<'static>,
    /// The text around each place the image goes.
    sidecar: Vec<String>,
    init: Vec<String>,
}

impl Prewritten {
    /// The pair's text for `key`; `None` when it could not be written or
    /// cut at the image.
    pub(crate) fn write(key: PairKey<'_>) -> Option<Self> {
        let (sidecar, init) = containers(&key, MARK);
        Some(Prewritten {
            // The sidecar names its image once; the init container also
            // in its script.
            sidecar: pieces(&k8s::container(&sidecar).ok()?, 1)?,
            init: pieces(&k8s::container(&init).ok()?, 2)?,
            key: key.into_owned(),
        })
    }

    /// Whether this text was written for `key`.
    pub(crate) fn fits(&self, key: &PairKey<'_>) -> bool {
        self.key == *key
    }

    /// The `modelcar` container's JSON for `image`.
    pub(crate) fn sidecar(&self, image: &str) -> String {
        splice(&self.sidecar, image)
    }

    /// The `modelcar-init` container's JSON for `image`.
    pub(crate) fn init(&self, image: &str) -> String {
        splice(&self.init, image)
    }
}

/// `text` cut at each [`MARK`], if it has exactly `count`.
fn pieces(text: &str, count: usize) -> Option<Vec<String>> {
    let pieces: Vec<String> = text.split(MARK).map(str::to_string).collect();
    (pieces.len() == count + 1).then_some(pieces)
}

/// The pieces joined by `image` as JSON string content (every mark lies
/// inside a string). Two bytes spare, as the writers leave, so a list
/// created with this entry (`array_of`) does not grow the buffer.
fn splice(pieces: &[String], image: &str) -> String {
    let mut quoted = String::new();
    let escaped = if needs_escape(image.as_bytes()) {
        write_str(&mut quoted, image);
        &quoted[1..quoted.len() - 1]
    } else {
        image
    };
    let gaps = pieces.len() - 1;
    let length = pieces.iter().map(String::len).sum::<usize>() + gaps * escaped.len();
    let mut out = String::with_capacity(length + 2);
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            out.push_str(escaped);
        }
        out.push_str(piece);
    }
    out
}

#[cfg(test)]
mod tests;
