//! Whether the cluster's API server keeps `image` volumes. Where the
//! ImageVolume feature gate is off (alpha in 1.31, beta and off by default
//! in 1.33 and 1.34, on by default from 1.35) the API server accepts a pod
//! with one and silently drops the volume and its mounts: a model server
//! without its model. `serve` asks once at start, and the core then denies
//! each pod it would give an image volume (the model volume's `image`
//! source, an OCI model served natively) with the reason and the fix.
//!
//! The honest answer is the API server's own: a server-side dry run of a
//! PodTemplate carrying an image volume, in the namespace of the client's
//! configuration (the webhook's own). A PodTemplate goes through the same
//! dropping of disabled fields as a pod, reaches no pod webhook, and a dry
//! run stores nothing. It needs `create` on `podtemplates` in that
//! namespace; without it (or without an answer) the version's default is
//! taken, which a feature gate set by hand can contradict.

use k8s_openapi::api::core::v1::PodTemplate;
use kube::api::{Api, PostParams};
use std::time::Duration;
use tracing::{info, warn};

/// How long each request may take; the lookups' own probe has just reached
/// the same API server.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The first version where ImageVolume is on by default (beta).
const ON_BY_DEFAULT: (u32, u32) = (1, 35);

/// The volume's name in the dry-run PodTemplate.
const VOLUME: &str = "image-volume-probe";

/// How the answer was found, for the log.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// The dry run came back with the volume (`true`: kept) or without it.
    DryRun(bool),
    /// No dry run; `version` decided (`true`: on by default there).
    Version {
        version: String,
        kept: bool,
    },
    Unknown,
}

/// `true` when the cluster's API server drops `image` volumes. An API
/// server that answers neither the dry run nor its version is taken to
/// keep them (as without cluster lookups), and the log says so.
pub(super) async fn dropped(client: &kube::Client) -> bool {
    let dry_run = dry_run(&Api::default_namespaced(client.clone())).await;
    let found = match &dry_run {
        Ok(kept) => Found::DryRun(*kept),
        Err(_) => match by_version(client).await {
            Some((version, kept)) => Found::Version { version, kept },
            None => Found::Unknown,
        },
    };
    let why = (dry_run
        .err()
        .map(|e| crate::log_text::bounded(e).to_string()))
    .unwrap_or_default();
    match &found {
        Found::DryRun(true) => info!("image volumes: the API server keeps them (a dry-run PodTemplate came back with one)"),
        Found::DryRun(false) => warn!("image volumes: the API server drops them (a dry-run PodTemplate came back without one; the ImageVolume feature gate is off): pods that would get one (an image modelVolume, an OCI model served natively) are denied"),
        Found::Version { version, kept: true } => info!(%version, dry_run = %why, "image volumes: on by default in this version (no dry run: grant create on podtemplates in this namespace to ask the API server)"),
        Found::Version { version, kept: false } => warn!(%version, dry_run = %why, "image volumes: off by default in this version (no dry run: grant create on podtemplates in this namespace to ask the API server): pods that would get one are denied"),
        Found::Unknown => warn!(dry_run = %why, "image volumes: neither a dry run nor the API server's version answered; taken as kept"),
    }
    matches!(
        found,
        Found::DryRun(false) | Found::Version { kept: false, .. }
    )
}

/// Why the dry run gave no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DryRunError {
    #[error("{} ({})", .0.message, .0.code)]
    Refused(Box<kube::core::Status>),
    #[error(transparent)]
    Request(Box<kube::Error>),
    #[error("the probe template: {0}")]
    Template(#[source] serde_json::Error),
    #[error("no answer within {0:?}")]
    Timeout(std::time::Duration),
}

/// The dry run's answer in `api`'s namespace: `Ok(true)` when the volume
/// came back; `Err` says why there is no answer. `check` asks the same.
pub(crate) async fn dry_run(api: &Api<PodTemplate>) -> Result<bool, DryRunError> {
    let template = serde_json::from_value(probe_template()).map_err(DryRunError::Template)?;
    let params = PostParams {
        dry_run: true,
        field_manager: Some("kserve-injector".into()),
    };
    match tokio::time::timeout(TIMEOUT, api.create(&params, &template)).await {
        Ok(Ok(stored)) => Ok(has_image_volume(&stored)),
        Ok(Err(kube::Error::Api(status))) => Err(DryRunError::Refused(status)),
        Ok(Err(e)) => Err(DryRunError::Request(Box::new(e))),
        Err(_) => Err(DryRunError::Timeout(TIMEOUT)),
    }
}

fn probe_template() -> serde_json::Value {
    let image = "registry.k8s.io/pause:3.10";
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"generateName": "kserve-injector-image-volume-probe-"},
        "template": {"spec": {
            "containers": [{"name": "probe", "image": image,
                "volumeMounts": [{"name": VOLUME, "mountPath": "/probe", "readOnly": true}]}],
            "volumes": [{"name": VOLUME, "image": {"reference": image, "pullPolicy": "IfNotPresent"}}]
        }}
    })
}

fn has_image_volume(stored: &PodTemplate) -> bool {
    let spec = stored.template.as_ref().and_then(|t| t.spec.as_ref());
    let volumes = spec.and_then(|s| s.volumes.as_ref());
    (volumes.into_iter().flatten()).any(|v| v.name == VOLUME && v.image.is_some())
}

/// The API server's version and whether ImageVolume is on by default there.
async fn by_version(client: &kube::Client) -> Option<(String, bool)> {
    let info = tokio::time::timeout(TIMEOUT, client.apiserver_version())
        .await
        .ok()?
        .ok()?;
    let version = super::native_sidecar::version_of(&info.major, &info.minor)
        .or_else(|| super::native_sidecar::git_version_of(&info.git_version))?;
    Some((
        crate::log_text::bounded(&info.git_version).to_string(),
        version >= ON_BY_DEFAULT,
    ))
}

#[cfg(test)]
mod tests;
