//! What a pod asks of an older KServe release that it lacks, read before
//! the pipeline from the same annotations the injectors read.

use crate::cluster::storage_container::STORAGE_CONTAINER_NAME_ANNOTATION;
use crate::constants::{
    CONFIDENTIAL_ENABLED_ANNOTATION, LOGGER_ANNOTATION, LOGGER_METADATA_ANNOTATIONS_ANNOTATION,
    SOURCE_URI_ANNOTATION,
};
use crate::pod::WorkingSet;
use crate::release::{Behaviour, Release};
use std::fmt;

/// Something the pod asks for that the selected release did not have, and
/// what that release does instead; for the adapters' debug logs.
#[derive(Debug, Clone)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct Unsupported {
    pub release: Release,
    /// What the pod asks for (an annotation, a URI scheme).
    pub(crate) asked: String,
    /// What the release does instead.
    pub(crate) instead: &'static str,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "KServe {} has no {}: {}",
            self.release, self.asked, self.instead
        )
    }
}

/// What `pod` asks for that `release` lacks (empty at HEAD). Read before
/// the pipeline, from the same annotations the injectors read.
pub(crate) fn unsupported(pod: &WorkingSet<'_>, release: impl Into<Behaviour>) -> Vec<Unsupported> {
    let (release, mut out): (Behaviour, _) = (release.into(), Vec::new());
    let mut note = |asked: String, instead: &'static str| {
        out.push(Unsupported {
            release: release.release(),
            asked,
            instead,
        })
    };
    if let Some(uri) = pod.annotation(SOURCE_URI_ANNOTATION) {
        if let Some((scheme, _)) = uri.split_once("://") {
            let mode = scheme.strip_prefix("oci+");
            if mode.is_some() && !release.oci_mode_schemes() {
                note(
                    format!("URI scheme {scheme}://"),
                    "the URI is a plain storage URI: the storage-initializer downloads it as it is",
                );
            } else if mode == Some("fetch") && !release.oci_fetch() {
                note(
                    format!("URI scheme {scheme}://"),
                    "fetch is not implemented: the image becomes a modelcar",
                );
            }
        }
    }
    if pod.annotation(STORAGE_CONTAINER_NAME_ANNOTATION).is_some()
        && !release.explicit_storage_container()
    {
        note(
            format!("annotation {STORAGE_CONTAINER_NAME_ANNOTATION}"),
            "ignored: the storage URI picks the ClusterStorageContainer",
        );
    }
    if pod.annotation(LOGGER_ANNOTATION).is_some()
        && pod
            .annotation(LOGGER_METADATA_ANNOTATIONS_ANNOTATION)
            .is_some()
        && !release.logger_metadata_annotations()
    {
        note(
            format!("annotation {LOGGER_METADATA_ANNOTATIONS_ANNOTATION}"),
            "ignored: the agent gets no --metadata-annotations",
        );
    }
    if pod.annotation(CONFIDENTIAL_ENABLED_ANNOTATION) == Some("true")
        && !release.confidential_env()
    {
        note(
            format!("annotation {CONFIDENTIAL_ENABLED_ANNOTATION}"),
            "ignored: the storage-initializer gets no CONFIDENTIAL_* env",
        );
    }
    out
}
