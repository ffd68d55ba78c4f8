//! The classic modelcar pair (KServe's `modelcar` sidecar and
//! `modelcar-init`, built by [`super::modelcar_containers`]) as JSON text
//! with the model image left out, written once per config and kept in it
//! ([`crate::memo::Memo`]). An OCI review then only splices its image in,
//! rather than building both typed containers with their resource maps and
//! writing them field by field: that was about 15,000 of a 1 KB modelcar
//! review's 63,000 instructions (`examples/review_loop.rs minimal-oci`
//! under callgrind). The text is the typed containers' own, so the two
//! cannot drift; tests compare it with a fresh write.

use super::{modelcar_containers, modelcar_mount};
use crate::config::StorageInitializerConfig;
use crate::json_text::{k8s, needs_escape, write_str};
use crate::pod::recorded::written;

/// Stands for the image while the pair is written. A config whose own
/// values hold it gets no prewritten text (the counts below catch that),
/// and its reviews build the containers as before.
const MARK: &str = "kserve-injector.modelcar-image";

pub(crate) struct Prewritten {
    /// The fields the text was written from.
    cpu: String,
    memory: String,
    uid: Option<i64>,
    /// The text around each place the image goes.
    sidecar: Vec<String>,
    init: Vec<String>,
}

impl Prewritten {
    /// The pair's text for `config`, written on first use; `None` when the
    /// config's fields changed since (in place, through a sole `Arc`) or
    /// the text could not be split at the image.
    pub(crate) fn of(config: &StorageInitializerConfig) -> Option<&Prewritten> {
        let kept = config.modelcar_json.get_or_init(|| Self::write(config));
        kept.as_ref().filter(|p| p.fits(config))
    }

    fn write(config: &StorageInitializerConfig) -> Option<Self> {
        let (sidecar, init) = modelcar_containers(config, MARK, modelcar_mount());
        Some(Prewritten {
            cpu: config.cpu_modelcar.clone(),
            memory: config.memory_modelcar.clone(),
            uid: config.uid_modelcar,
            // The sidecar names its image once; the init container also
            // in its script.
            sidecar: pieces(&written(k8s::container(&sidecar)), 1)?,
            init: pieces(&written(k8s::container(&init)), 2)?,
        })
    }

    fn fits(&self, config: &StorageInitializerConfig) -> bool {
        self.cpu == config.cpu_modelcar
            && self.memory == config.memory_modelcar
            && self.uid == config.uid_modelcar
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
