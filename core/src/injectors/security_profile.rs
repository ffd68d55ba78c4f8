//! The `restricted` security profile: every container we add (the
//! storage-initializer, the agent, the modelcar in either shape and
//! `modelcar-init`) meets the Kubernetes *restricted* Pod Security
//! Standard. Each builder hardens its container before adding it, so the
//! patch adds it whole. A field already set (by the user's container the
//! agent copies, a ClusterStorageContainer, the ConfigMap's `uidModelcar`) is
//! kept; one that contradicts the profile denies the pod, naming the
//! container, the field and the value. Off (`baseline`) by default: the
//! containers are KServe's byte for byte.

use super::InjectError;
use crate::constants::{KSERVE_CONTAINER, SECURITY_PROFILE_ANNOTATION};
use crate::inputs::{Inputs, SecurityProfile};
use crate::pod::{List, WorkingSet};
use k8s_openapi::api::core::v1::{Capabilities, Container, SeccompProfile, SecurityContext};

/// The profile for this pod: its annotation, else the flag. A value that
/// is neither spelling is denied.
pub(crate) fn choose(
    pod: &WorkingSet<'_>,
    inputs: &Inputs,
    injector: &'static str,
) -> Result<SecurityProfile, InjectError> {
    match pod.annotation(SECURITY_PROFILE_ANNOTATION) {
        None => Ok(inputs.security_profile),
        Some(text) => text
            .parse()
            .map_err(|e: crate::inputs::UnknownSecurityProfile| {
                InjectError::caused_by(
                    injector,
                    format!("annotation {SECURITY_PROFILE_ANNOTATION}: {e}"),
                    e,
                )
            }),
    }
}

/// The UID (and GID) the modelcar runs as under `restricted`: KServe's
/// `uidModelcar` (which KServe also gives the model server), else the model
/// server's own container-level `runAsUser`; the model server's
/// container-level `runAsGroup` when it sets one. The model server reads the
/// model through `/proc/<modelcar pid>/root`, which the kernel allows only
/// to a process of the same UID and GID, so the two must match; without a
/// UID to share the pod is denied.
pub(crate) fn modelcar_identity(
    pod: &mut WorkingSet<'_>,
    inputs: &Inputs,
    injector: &'static str,
) -> Result<(i64, Option<i64>), InjectError> {
    let server = pod.container(List::Containers, KSERVE_CONTAINER);
    let sc = server.as_ref().and_then(|c| c.security_context.as_ref());
    let group = sc.and_then(|s| s.run_as_group);
    let uid =
        (inputs.config.storage_initializer.uid_modelcar).or_else(|| sc.and_then(|s| s.run_as_user));
    let uid = uid.ok_or_else(|| {
        InjectError::new(
            injector,
            "security profile restricted: the modelcar needs a non-root UID shared with the model server; set uidModelcar in the storageInitializer config, or runAsUser on kserve-container",
        )
    })?;
    Ok((uid, group))
}

/// Gives `container` the model server's group, unless it has one.
pub(crate) fn share_group(container: &mut Container, group: Option<i64>) {
    if let (Some(gid), Some(sc)) = (group, container.security_context.as_mut()) {
        sc.run_as_group.get_or_insert(gid);
    }
}

fn deny(injector: &'static str, container: &str, field: &str, value: &str) -> InjectError {
    InjectError::new(
        injector,
        format!(
            "security profile restricted: container {container:?} sets securityContext.{field} to {value}, which the restricted Pod Security Standard forbids"
        ),
    )
}

/// Fills what `restricted` requires into `container`'s securityContext,
/// keeping every field already set; `run_as_user` is given where the image
/// may run as root (the modelcar's). Does nothing under `baseline`.
pub(crate) fn harden(
    container: &mut Container,
    profile: SecurityProfile,
    run_as_user: Option<i64>,
    injector: &'static str,
) -> Result<(), InjectError> {
    if profile == SecurityProfile::Baseline {
        return Ok(());
    }
    let name = container.name.clone();
    let deny = |field: &str, value: &str| deny(injector, &name, field, value);
    let sc = container
        .security_context
        .get_or_insert_with(SecurityContext::default);
    if sc.privileged == Some(true) {
        return Err(deny("privileged", "true"));
    }
    if sc.allow_privilege_escalation == Some(true) {
        return Err(deny("allowPrivilegeEscalation", "true"));
    }
    sc.allow_privilege_escalation = Some(false);
    if sc.run_as_non_root == Some(false) {
        return Err(deny("runAsNonRoot", "false"));
    }
    sc.run_as_non_root = Some(true);
    match sc.run_as_user {
        Some(0) => return Err(deny("runAsUser", "0")),
        Some(_) => {}
        None => sc.run_as_user = run_as_user,
    }
    let caps = sc.capabilities.get_or_insert_with(Capabilities::default);
    if let Some(added) = (caps.add.iter().flatten()).find(|c| c.as_str() != "NET_BIND_SERVICE") {
        return Err(deny("capabilities.add", &format!("[{added}]")));
    }
    match &caps.drop {
        None => caps.drop = Some(vec!["ALL".to_string()]),
        Some(drop) if drop.iter().any(|c| c == "ALL") => {}
        Some(drop) => {
            return Err(deny(
                "capabilities.drop",
                &format!("{drop:?} (without \"ALL\")"),
            ))
        }
    }
    match sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()) {
        None => {
            sc.seccomp_profile = Some(SeccompProfile {
                type_: "RuntimeDefault".to_string(),
                localhost_profile: None,
            })
        }
        Some("RuntimeDefault" | "Localhost") => {}
        Some(other) => return Err(deny("seccompProfile.type", other)),
    }
    if let Some(mount) = sc.proc_mount.as_deref().filter(|m| *m != "Default") {
        return Err(deny("procMount", mount));
    }
    if (sc.windows_options.as_ref()).is_some_and(|w| w.host_process == Some(true)) {
        return Err(deny("windowsOptions.hostProcess", "true"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hardened(sc: Option<SecurityContext>) -> Result<SecurityContext, InjectError> {
        let mut c = Container {
            name: "storage-initializer".into(),
            security_context: sc,
            ..Default::default()
        };
        harden(
            &mut c,
            SecurityProfile::Restricted,
            None,
            "storage-initializer",
        )?;
        Ok(c.security_context.unwrap_or_default())
    }

    #[test]
    fn baseline_changes_nothing() {
        let mut c = Container::default();
        harden(&mut c, SecurityProfile::Baseline, Some(5), "agent").unwrap();
        assert_eq!(c, Container::default());
    }

    #[test]
    fn restricted_fills_every_required_field() {
        let sc = hardened(None).unwrap();
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.run_as_non_root, Some(true));
        assert_eq!(sc.run_as_user, None);
        assert_eq!(sc.capabilities.unwrap().drop, Some(vec!["ALL".to_string()]));
        assert_eq!(sc.seccomp_profile.unwrap().type_, "RuntimeDefault");
    }

    #[test]
    fn explicit_compatible_fields_are_kept() {
        let sc = hardened(Some(SecurityContext {
            run_as_user: Some(1000),
            capabilities: Some(Capabilities {
                add: Some(vec!["NET_BIND_SERVICE".into()]),
                drop: Some(vec!["NET_RAW".into(), "ALL".into()]),
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "Localhost".into(),
                localhost_profile: Some("p.json".into()),
            }),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(sc.run_as_user, Some(1000));
        assert_eq!(sc.capabilities.unwrap().drop.unwrap(), ["NET_RAW", "ALL"]);
        assert_eq!(
            sc.seccomp_profile.unwrap().localhost_profile.as_deref(),
            Some("p.json")
        );
    }

    #[test]
    fn contradictions_name_the_container_field_and_value() {
        let cases: [(SecurityContext, &str); 6] = [
            (
                SecurityContext {
                    run_as_user: Some(0),
                    ..Default::default()
                },
                "securityContext.runAsUser to 0",
            ),
            (
                SecurityContext {
                    run_as_non_root: Some(false),
                    ..Default::default()
                },
                "securityContext.runAsNonRoot to false",
            ),
            (
                SecurityContext {
                    allow_privilege_escalation: Some(true),
                    ..Default::default()
                },
                "securityContext.allowPrivilegeEscalation to true",
            ),
            (
                SecurityContext {
                    privileged: Some(true),
                    ..Default::default()
                },
                "securityContext.privileged to true",
            ),
            (
                SecurityContext {
                    capabilities: Some(Capabilities {
                        add: Some(vec!["SYS_ADMIN".into()]),
                        drop: None,
                    }),
                    ..Default::default()
                },
                "securityContext.capabilities.add to [SYS_ADMIN]",
            ),
            (
                SecurityContext {
                    seccomp_profile: Some(SeccompProfile {
                        type_: "Unconfined".into(),
                        localhost_profile: None,
                    }),
                    ..Default::default()
                },
                "securityContext.seccompProfile.type to Unconfined",
            ),
        ];
        for (sc, want) in cases {
            let e = hardened(Some(sc)).unwrap_err();
            assert!(
                e.message.contains("container \"storage-initializer\""),
                "{}",
                e.message
            );
            assert!(e.message.contains(want), "{}", e.message);
        }
    }
}
