//! What the cluster itself does to the pods serve writes: whether its API
//! server keeps image volumes, and whether a namespace the webhook serves
//! enforces the restricted Pod Security Standard that the baseline profile's
//! containers do not meet.

use super::report::Line;
use kserve_injector_core::SecurityProfile;

const IMAGE_VOLUME: &str = "cluster.imageVolume";
pub(super) const POD_SECURITY: &str = "podSecurity.restricted";

/// How many namespace names a line lists before it counts the rest.
const SHOWN: usize = 5;

/// `kept`: the dry-run PodTemplate's answer (`Ok(true)`: it came back with
/// its image volume); `asked`: what in serve's settings file gives pods one.
pub(super) fn image_volume_line<E: std::fmt::Display>(
    kept: &Result<bool, E>,
    asked: Option<&str>,
) -> Line {
    let gate = "the ImageVolume feature gate is off; it is on by default from Kubernetes 1.35";
    match (kept, asked) {
        (Ok(true), _) => Line::pass(
            IMAGE_VOLUME,
            "the API server keeps image volumes (a dry-run PodTemplate came back with one)",
        ),
        (Ok(false), Some(asked)) => Line::fail(
            IMAGE_VOLUME,
            format!("{asked}, but the API server drops image volumes ({gate}): serve denies every pod that would get one"),
            "turn the ImageVolume feature gate on (API server and kubelets), or give modelVolume another source",
        ),
        (Ok(false), None) => Line::pass(
            IMAGE_VOLUME,
            format!("the API server drops image volumes ({gate}); nothing in serve's settings asks for one (an OCI model served natively is denied)"),
        ),
        (Err(e), Some(asked)) => Line::warn(
            IMAGE_VOLUME,
            format!("{asked}, and a dry-run PodTemplate could not show whether the API server keeps image volumes: {e}"),
            "run check as a user who may create podtemplates in the install's namespace",
        ),
        (Err(e), None) => Line::skip(
            IMAGE_VOLUME,
            format!("a dry-run PodTemplate could not show whether the API server keeps image volumes: {e}"),
        ),
    }
}

/// `restricted`: the namespaces the webhook serves whose
/// `pod-security.kubernetes.io/enforce` is `restricted`.
pub(super) fn pod_security_line(profile: SecurityProfile, restricted: &[String]) -> Line {
    if restricted.is_empty() {
        return Line::pass(
            POD_SECURITY,
            "no namespace the webhook serves enforces the restricted Pod Security Standard",
        );
    }
    let mut names = restricted[..restricted.len().min(SHOWN)].join(", ");
    if restricted.len() > SHOWN {
        names = format!("{names} and {} more", restricted.len() - SHOWN);
    }
    let names = match restricted.len() {
        1 => format!("namespace {names} enforces"),
        _ => format!("namespaces {names} enforce"),
    };
    match profile {
        SecurityProfile::Restricted => Line::pass(
            POD_SECURITY,
            format!("the {names} the restricted Pod Security Standard, which --security-profile restricted meets"),
        ),
        SecurityProfile::Baseline => Line::warn(
            POD_SECURITY,
            format!("the {names} the restricted Pod Security Standard, but serve runs with --security-profile baseline: the API server refuses their pods that get a storage-initializer, agent or modelcar"),
            "run serve with --security-profile restricted, or annotate those pods kserve-injector.io/security-profile: restricted",
        ),
    }
}
