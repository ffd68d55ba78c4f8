//! The JSON text of the k8s-openapi values the injectors add most: a
//! container, and the variables, mounts and ports they put into one. Byte
//! for byte what [`super::to_string`] writes through k8s-openapi's
//! `Serialize` (its field order, absent fields left out), written field by
//! field: going through serde for every key and value was most of the cost
//! of adding a container in a small review (`examples/review_loop.rs`),
//! and here a key is a constant written whole, with no escape scan. The
//! field types the injectors add rarely (probes, lifecycle, security
//! context, claims, ...) still go through serde. Each struct is taken
//! apart in full, so a field a newer k8s-openapi adds breaks the build here
//! rather than going missing from the patch. No crate writes k8s-openapi's
//! types without serde, hence by hand.

use super::{append, write_str};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, ResourceRequirements, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Serialize;
use std::collections::BTreeMap;

type Result = std::result::Result<(), serde_json::Error>;

/// A field's key as written after another field, `,"name":`: one constant
/// to copy, where writing the separator, quotes and name apart showed in
/// the profile of a container with many variables.
macro_rules! key {
    ($name:literal) => {
        concat!(",\"", $name, "\":")
    };
}

/// The JSON text of `c`.
pub(crate) fn container(c: &Container) -> std::result::Result<String, serde_json::Error> {
    let mut out = String::with_capacity(room_for(c));
    write_container(&mut out, c)?;
    Ok(out)
}

/// About the length of `c`'s text, from its longest parts: a container
/// with many variables (the agent copies queue-proxy's) otherwise regrows
/// its buffer several times, each a copy.
fn room_for(c: &Container) -> usize {
    let strings =
        |items: &Option<Vec<String>>| (items.iter().flatten()).map(|s| s.len() + 3).sum::<usize>();
    let env = (c.env.iter().flatten())
        .map(|v| v.name.len() + v.value.as_ref().map_or(0, String::len) + 24)
        .sum::<usize>();
    384 + strings(&c.args) + strings(&c.command) + env
}

/// The JSON text of `var`.
#[cfg(any(test, feature = "oracle"))] // Only the tests and the oracle call it.
pub(crate) fn env_var(var: &EnvVar) -> std::result::Result<String, serde_json::Error> {
    let mut out = String::with_capacity(32 + var.name.len());
    write_env_var(&mut out, var)?;
    Ok(out)
}

/// The JSON text of a variable of `name` set to `value` (empty too), as
/// [`env_var`] writes it.
pub(crate) fn literal_env_var(name: &str, value: &str) -> String {
    let mut out = String::with_capacity(24 + name.len() + value.len());
    let mut f = Fields::open(&mut out);
    f.str(key!("name"), name);
    f.str(key!("value"), value);
    f.close();
    out
}

/// The JSON text of `mount`.
pub(crate) fn volume_mount(mount: &VolumeMount) -> String {
    let mut out = String::with_capacity(48 + mount.name.len() + mount.mount_path.len());
    write_volume_mount(&mut out, mount);
    out
}

/// The JSON text of `port`.
pub(crate) fn container_port(port: &ContainerPort) -> String {
    let mut out = String::with_capacity(64);
    write_container_port(&mut out, port);
    out
}

/// An object being written: whether the next field is the first.
struct Fields<'o> {
    out: &'o mut String,
    first: bool,
}

impl<'o> Fields<'o> {
    fn open(out: &'o mut String) -> Self {
        out.push('{');
        Self { out, first: true }
    }

    /// `key` is from [`key!`]: the first field's goes without its comma.
    fn key(&mut self, key: &str) {
        let key = if std::mem::replace(&mut self.first, false) {
            &key[1..]
        } else {
            key
        };
        self.out.push_str(key);
    }

    fn str(&mut self, key: &str, value: &str) {
        self.key(key);
        write_str(self.out, value);
    }

    fn opt_str(&mut self, key: &str, value: &Option<String>) {
        if let Some(value) = value {
            self.str(key, value);
        }
    }

    fn bool(&mut self, key: &str, value: Option<bool>) {
        if let Some(value) = value {
            self.key(key);
            self.out.push_str(if value { "true" } else { "false" });
        }
    }

    fn int(&mut self, key: &str, value: Option<i32>) {
        if let Some(value) = value {
            self.key(key);
            self.out.push_str(itoa::Buffer::new().format(value));
        }
    }

    fn strings(&mut self, key: &str, value: &Option<Vec<String>>) {
        if let Some(items) = value {
            self.key(key);
            self.out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                write_str(self.out, item);
            }
            self.out.push(']');
        }
    }

    fn list<T>(
        &mut self,
        key: &str,
        value: &Option<Vec<T>>,
        write: impl Fn(&mut String, &T) -> Result,
    ) -> Result {
        if let Some(items) = value {
            self.key(key);
            self.out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                write(self.out, item)?;
            }
            self.out.push(']');
        }
        Ok(())
    }

    fn quantities(&mut self, key: &str, value: &Option<BTreeMap<String, Quantity>>) {
        if let Some(map) = value {
            self.key(key);
            self.out.push('{');
            for (i, (name, amount)) in map.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                write_str(self.out, name);
                self.out.push(':');
                write_str(self.out, &amount.0);
            }
            self.out.push('}');
        }
    }

    /// A field written through its `Serialize`.
    fn serde<T: Serialize>(&mut self, key: &str, value: &Option<T>) -> Result {
        match value {
            Some(value) => {
                self.key(key);
                append(self.out, value)
            }
            None => Ok(()),
        }
    }

    fn close(self) {
        self.out.push('}');
    }
}

fn write_container(out: &mut String, c: &Container) -> Result {
    let Container {
        args,
        command,
        env,
        env_from,
        image,
        image_pull_policy,
        lifecycle,
        liveness_probe,
        name,
        ports,
        readiness_probe,
        resize_policy,
        resources,
        restart_policy,
        security_context,
        startup_probe,
        stdin,
        stdin_once,
        termination_message_path,
        termination_message_policy,
        tty,
        volume_devices,
        volume_mounts,
        working_dir,
    } = c;
    let mut f = Fields::open(out);
    f.strings(key!("args"), args);
    f.strings(key!("command"), command);
    f.list(key!("env"), env, write_env_var)?;
    f.serde(key!("envFrom"), env_from)?;
    f.opt_str(key!("image"), image);
    f.opt_str(key!("imagePullPolicy"), image_pull_policy);
    f.serde(key!("lifecycle"), lifecycle)?;
    f.serde(key!("livenessProbe"), liveness_probe)?;
    f.str(key!("name"), name);
    f.list(key!("ports"), ports, |out, port| {
        write_container_port(out, port);
        Ok(())
    })?;
    f.serde(key!("readinessProbe"), readiness_probe)?;
    f.serde(key!("resizePolicy"), resize_policy)?;
    if let Some(resources) = resources {
        f.key(key!("resources"));
        write_resources(f.out, resources)?;
    }
    f.opt_str(key!("restartPolicy"), restart_policy);
    f.serde(key!("securityContext"), security_context)?;
    f.serde(key!("startupProbe"), startup_probe)?;
    f.bool(key!("stdin"), *stdin);
    f.bool(key!("stdinOnce"), *stdin_once);
    f.opt_str(key!("terminationMessagePath"), termination_message_path);
    f.opt_str(key!("terminationMessagePolicy"), termination_message_policy);
    f.bool(key!("tty"), *tty);
    f.serde(key!("volumeDevices"), volume_devices)?;
    f.list(key!("volumeMounts"), volume_mounts, |out, mount| {
        write_volume_mount(out, mount);
        Ok(())
    })?;
    f.opt_str(key!("workingDir"), working_dir);
    f.close();
    Ok(())
}

fn write_env_var(out: &mut String, var: &EnvVar) -> Result {
    let EnvVar {
        name,
        value,
        value_from,
    } = var;
    let mut f = Fields::open(out);
    f.str(key!("name"), name);
    f.opt_str(key!("value"), value);
    f.serde(key!("valueFrom"), value_from)?;
    f.close();
    Ok(())
}

fn write_volume_mount(out: &mut String, mount: &VolumeMount) {
    let VolumeMount {
        mount_path,
        mount_propagation,
        name,
        read_only,
        recursive_read_only,
        sub_path,
        sub_path_expr,
    } = mount;
    let mut f = Fields::open(out);
    f.str(key!("mountPath"), mount_path);
    f.opt_str(key!("mountPropagation"), mount_propagation);
    f.str(key!("name"), name);
    f.bool(key!("readOnly"), *read_only);
    f.opt_str(key!("recursiveReadOnly"), recursive_read_only);
    f.opt_str(key!("subPath"), sub_path);
    f.opt_str(key!("subPathExpr"), sub_path_expr);
    f.close();
}

fn write_container_port(out: &mut String, port: &ContainerPort) {
    let ContainerPort {
        container_port,
        host_ip,
        host_port,
        name,
        protocol,
    } = port;
    let mut f = Fields::open(out);
    f.int(key!("containerPort"), Some(*container_port));
    f.opt_str(key!("hostIP"), host_ip);
    f.int(key!("hostPort"), *host_port);
    f.opt_str(key!("name"), name);
    f.opt_str(key!("protocol"), protocol);
    f.close();
}

fn write_resources(out: &mut String, r: &ResourceRequirements) -> Result {
    let ResourceRequirements {
        claims,
        limits,
        requests,
    } = r;
    let mut f = Fields::open(out);
    f.serde(key!("claims"), claims)?;
    f.quantities(key!("limits"), limits);
    f.quantities(key!("requests"), requests);
    f.close();
    Ok(())
}

#[cfg(test)]
mod tests;
