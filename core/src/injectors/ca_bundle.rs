//! The CA bundle a storage download trusts: a ConfigMap mounted into the
//! init container, named by config or by the S3 credentials.

use crate::constants::{
    AWS_CA_BUNDLE_CONFIGMAP_ENV, CA_BUNDLE_CONFIGMAP_NAME_ENV, CA_BUNDLE_VOLUME,
    CA_BUNDLE_VOLUME_MOUNT_POINT_ENV, DEFAULT_CA_BUNDLE_MOUNT_PATH, GLOBAL_CA_BUNDLE_CONFIGMAP,
};
use crate::inputs::Inputs;
use crate::pod::build::env_var;
use k8s_openapi::api::core::v1::{ConfigMapVolumeSource, EnvVar, Volume, VolumeMount};

/// The value of the last variable named `name` (`""` for one set by
/// `valueFrom`), as the injector's loop over the env leaves it; `None`
/// when there is none.
fn last_value<'a>(env: &'a [EnvVar], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|e| e.name == name)
        .map(|e| e.value.as_deref().unwrap_or_default())
}

/// The volume, its mount, and the env to add to an init container, when a
/// bundle is configured or a variable `AWS_CA_BUNDLE_CONFIGMAP` is in
/// `init_env`, whatever its value (KServe's `needCaBundleMount`). The last
/// `AWS_CA_BUNDLE_CONFIGMAP` names the ConfigMap and the directory of the
/// last `AWS_CA_BUNDLE` is the mount path (`CommonStorageInitialization`).
/// `from_credentials` is false where KServe uses only the config (fetch mode).
pub(crate) fn plan(
    inputs: &Inputs,
    pod_namespace: &str,
    init_env: &[EnvVar],
    from_credentials: bool,
) -> Option<(Volume, VolumeMount, [EnvVar; 2])> {
    let config = &inputs.config.storage_initializer;
    let aws_configmap =
        last_value(init_env, AWS_CA_BUNDLE_CONFIGMAP_ENV).filter(|_| from_credentials);
    if config.ca_bundle_config_map_name.is_empty() && aws_configmap.is_none() {
        return None;
    }
    let mut name = config.ca_bundle_config_map_name.clone();
    if pod_namespace != inputs.controller_namespace {
        name = GLOBAL_CA_BUNDLE_CONFIGMAP.to_string();
    }
    if let Some(v) = aws_configmap {
        name = v.to_string();
    }
    let mut path = if config.ca_bundle_volume_mount_path.is_empty() {
        DEFAULT_CA_BUNDLE_MOUNT_PATH.to_string()
    } else {
        config.ca_bundle_volume_mount_path.clone()
    };
    if let Some(file) = last_value(init_env, "AWS_CA_BUNDLE").filter(|_| from_credentials) {
        path = parent_dir(file);
    }
    let volume = Volume {
        name: CA_BUNDLE_VOLUME.to_string(),
        config_map: Some(ConfigMapVolumeSource {
            name: name.clone(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mount = VolumeMount {
        name: CA_BUNDLE_VOLUME.to_string(),
        mount_path: path.clone(),
        read_only: Some(true),
        ..Default::default()
    };
    let vars = [
        env_var(CA_BUNDLE_CONFIGMAP_NAME_ENV, &name),
        env_var(CA_BUNDLE_VOLUME_MOUNT_POINT_ENV, &path),
    ];
    Some((volume, mount, vars))
}

/// Go's `filepath.Dir` on Unix: everything before the last `/`, cleaned
/// as `filepath.Clean` does. Hand-written: Rust's `Path::parent` neither
/// cleans nor answers `.` for a bare name.
fn parent_dir(path: &str) -> String {
    let cut = path.rfind('/').map_or(0, |i| i + 1);
    go_clean(&path[..cut])
}

/// Go's `filepath.Clean` on Unix.
fn go_clean(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if rooted => {}
                _ => parts.push(".."),
            },
            part => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_dir_matches_go() {
        assert_eq!(
            parent_dir("/annotation/path/to/annotation-ca.crt"),
            "/annotation/path/to"
        );
        assert_eq!(parent_dir("/ca.crt"), "/");
        assert_eq!(parent_dir("ca.crt"), ".");
        assert_eq!(parent_dir(""), ".");
        assert_eq!(parent_dir("/a/b/"), "/a/b");
        assert_eq!(parent_dir("a//b"), "a");
        assert_eq!(parent_dir("/x/../../y/./c.crt"), "/y");
        assert_eq!(parent_dir("../../c.crt"), "../..");
    }
}
