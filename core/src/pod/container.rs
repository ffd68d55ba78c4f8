//! One container of the working set ([`TypedContainer`]): its reads, and
//! the name-keyed "ensure" edits the injectors make on it.

use super::edits::{add, named, owned, push_entry, replace, Ops};
#[cfg(feature = "oracle")]
use super::recorded::written;
use super::recorded::{number, object, quoted};
use super::{child, List};
use crate::json_text::k8s;
use crate::view::{ContainerView, EnvView, MountView, PortView, Str};
#[cfg(feature = "oracle")]
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::api::core::v1::{ContainerPort, SecurityContext, VolumeMount};

/// A container of the working set.
pub struct TypedContainer<'w, 'a> {
    c: &'w mut ContainerView<'a>,
    /// Where this container is in the pod; a path is written only for an
    /// operation, rather than for every container an injector looks at.
    list: List,
    index: usize,
    ops: &'w mut Ops,
}

impl<'w, 'a> TypedContainer<'w, 'a> {
    /// The container at `index` of `list`, recording into `ops`.
    pub(super) fn new(
        c: &'w mut ContainerView<'a>,
        list: List,
        index: usize,
        ops: &'w mut Ops,
    ) -> Self {
        Self {
            c,
            list,
            index,
            ops,
        }
    }
}

impl TypedContainer<'_, '_> {
    fn env(&self, name: &str) -> Option<&EnvView<'_>> {
        (self.c.env.iter().flat_map(|l| l.0.iter()))
            .find(|e| e.name.as_ref().map(Str::as_str) == Some(name))
    }

    fn at(&self, key: &str) -> String {
        let (list, index) = (self.list.key().into(), self.index.into());
        child("/spec", [list, index, key.into()])
    }

    fn append_mount(&mut self, mount: &VolumeMount) -> bool {
        let item = MountView {
            name: Some(owned(&mount.name)),
            mount_path: Some(owned(&mount.mount_path)),
        };
        let path = self.at("volumeMounts");
        push_entry(
            &mut self.c.volume_mounts,
            item,
            path,
            k8s::volume_mount(mount),
            Some(self.ops),
        );
        true
    }
}

/// One container's reads and name-keyed ensure helpers.
impl TypedContainer<'_, '_> {
    pub fn has_mount(&self, name: &str) -> bool {
        named(&self.c.volume_mounts, name, |m| m.name.as_ref())
    }

    pub fn has_env(&self, name: &str) -> bool {
        self.env(name).is_some()
    }

    /// The value of the first variable named `name`.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env(name)?.value.as_ref().map(Str::as_str)
    }

    pub fn args(&self) -> Vec<&str> {
        (self.c.args.iter().flat_map(|l| l.0.iter()))
            .map(Str::as_str)
            .collect()
    }

    /// Appends the mount unless the container already mounts a volume of that name.
    pub fn ensure_mount(&mut self, mount: &VolumeMount) -> bool {
        if self.has_mount(&mount.name) {
            return false;
        }
        self.append_mount(mount)
    }

    /// Appends the mount unless the container already mounts that volume at
    /// that path: a second mount of a volume elsewhere is added, as KServe
    /// v0.15 adds it; a second one at the same path, which the API server
    /// refuses, is not.
    pub fn ensure_mount_at(&mut self, mount: &VolumeMount) -> bool {
        let same = |m: &MountView<'_>| {
            m.name.as_ref().map(Str::as_str) == Some(mount.name.as_str())
                && m.mount_path.as_ref().map(Str::as_str) == Some(mount.mount_path.as_str())
        };
        if (self.c.volume_mounts.iter().flat_map(|l| l.0.iter())).any(same) {
            return false;
        }
        self.append_mount(mount)
    }

    /// Appends the variable unless one of that name exists.
    #[cfg(feature = "oracle")] // Only the oracle calls it.
    pub fn ensure_env(&mut self, var: &EnvVar) -> bool {
        if self.has_env(&var.name) {
            return false;
        }
        let item = EnvView {
            name: Some(owned(&var.name)),
            value: var.value.as_deref().map(owned),
            value_from: var.value_from.clone().map(Box::new),
        };
        let path = self.at("env");
        push_entry(
            &mut self.c.env,
            item,
            path,
            written(k8s::env_var(var)),
            Some(self.ops),
        );
        true
    }

    /// KServe's add-or-replace: every entry of that name gets the value; a
    /// variable the user sources from `valueFrom` is left alone, since giving
    /// it a value too would make the pod invalid.
    pub fn set_env(&mut self, name: &str, value: &str) {
        let mut found = false;
        for (index, entry) in (self.c.env.iter_mut().flat_map(|l| l.0.iter_mut())).enumerate() {
            if entry.name.as_ref().map(Str::as_str) != Some(name) {
                continue;
            }
            found = true;
            if entry.value_from.is_some() {
                continue;
            }
            let (list, at) = (self.list.key(), self.index);
            let path = || {
                let steps = [
                    list.into(),
                    at.into(),
                    "env".into(),
                    index.into(),
                    "value".into(),
                ];
                child("/spec", steps)
            };
            match &entry.value {
                Some(now) if now.as_str() == value => continue,
                Some(_) => replace(self.ops, path(), quoted(value)),
                None => add(self.ops, path(), quoted(value)),
            }
            entry.value = Some(owned(value));
        }
        if !found {
            // Added here, not through `ensure_env`: the scan above already
            // found no variable of this name, and no `EnvVar` is needed to
            // write one.
            let item = EnvView {
                name: Some(owned(name)),
                value: Some(owned(value)),
                value_from: None,
            };
            let path = self.at("env");
            let text = k8s::literal_env_var(name, value);
            push_entry(&mut self.c.env, item, path, text, Some(self.ops));
        }
    }

    /// Appends the port unless a port of that name exists.
    pub fn ensure_port(&mut self, port: &ContainerPort) -> bool {
        if let Some(name) = &port.name {
            if named(&self.c.ports, name, |p| p.name.as_ref()) {
                return false;
            }
        }
        let item = PortView {
            name: port.name.as_deref().map(owned),
            container_port: Some(port.container_port),
        };
        let path = self.at("ports");
        push_entry(
            &mut self.c.ports,
            item,
            path,
            k8s::container_port(port),
            Some(self.ops),
        );
        true
    }

    /// Sets `securityContext.runAsUser`, keeping every other field.
    pub fn set_run_as_user(&mut self, uid: i64) {
        let (list, index) = (self.list.key(), self.index);
        let path = |key: &'static str| {
            let steps = [
                list.into(),
                index.into(),
                "securityContext".into(),
                key.into(),
            ];
            child("/spec", steps)
        };
        let Some(ctx) = &mut self.c.security_context else {
            self.c.security_context = Some(Box::new(SecurityContext {
                run_as_user: Some(uid),
                ..Default::default()
            }));
            let path = self.at("securityContext");
            add(self.ops, path, object("runAsUser", &number(uid)));
            return;
        };
        let at = || path("runAsUser");
        match ctx.run_as_user {
            Some(now) if now == uid => return,
            Some(_) => replace(self.ops, at(), number(uid)),
            None => add(self.ops, at(), number(uid)),
        }
        ctx.run_as_user = Some(uid);
    }

    /// Appends arguments; callers check first that they are not there yet.
    pub fn push_args(&mut self, args: &[&str]) {
        let path = self.at("args");
        for arg in args {
            push_entry(
                &mut self.c.args,
                owned(arg),
                path.clone(),
                quoted(arg),
                Some(self.ops),
            );
        }
    }
}
