//! The calls the injectors make on a pod, as a trait both editors answer:
//! the working set by its own methods, the tree ([`crate::TreeDoc`]) by
//! its JSON edits.

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Volume, VolumeMount};
use kserve_injector_core::internals::{
    Annotations, ContainerView, List, TypedContainer, WorkingSet,
};
use std::borrow::Cow;

/// A pod's reads and name-keyed writes ([`WorkingSet`]'s methods).
pub trait Edit: Annotations {
    /// A writable container of this pod.
    type Container<'c>: EditContainer
    where
        Self: 'c;

    fn label(&self, key: &str) -> Option<&str>;
    fn name(&self) -> &str;
    fn namespace(&self) -> &str;
    fn service_account_name(&self) -> &str;
    fn first_image_pull_secret(&self) -> Option<&str>;
    fn has_volume(&self, name: &str) -> bool;
    fn changes(&self) -> usize;
    fn positions(&self, list: List, name: &str) -> Vec<usize>;
    fn containers(&mut self, list: List) -> Cow<'_, [ContainerView<'_>]>;
    fn set_annotation(&mut self, key: &str, value: &str);
    fn set_namespace(&mut self, namespace: &str);
    fn set_node_selector(&mut self, key: &str, value: &str);
    fn set_share_process_namespace(&mut self, on: bool);
    fn ensure_container(&mut self, list: List, container: Container) -> bool;
    fn ensure_prewritten_container(&mut self, list: List, name: &str, json: String) -> bool;
    fn ensure_volume(&mut self, volume: &Volume) -> bool;
    fn container_at(&mut self, list: List, index: usize) -> Option<Self::Container<'_>>;

    fn position(&self, list: List, name: &str) -> Option<usize> {
        self.positions(list, name).first().copied()
    }

    fn container(&mut self, list: List, name: &str) -> Option<Cow<'_, ContainerView<'_>>> {
        let index = self.position(list, name)?;
        match self.containers(list) {
            Cow::Borrowed(all) => all.get(index).map(Cow::Borrowed),
            Cow::Owned(mut all) => (index < all.len()).then(|| Cow::Owned(all.swap_remove(index))),
        }
    }

    fn has_container_named(&self, name: &str) -> bool {
        self.position(List::Containers, name).is_some()
            || self.position(List::InitContainers, name).is_some()
    }

    fn container_mut(&mut self, list: List, name: &str) -> Option<Self::Container<'_>> {
        let index = self.position(list, name)?;
        self.container_at(list, index)
    }
}

/// One container's reads and writes ([`TypedContainer`]'s methods).
pub trait EditContainer {
    fn has_mount(&self, name: &str) -> bool;
    fn has_env(&self, name: &str) -> bool;
    fn env_value(&self, name: &str) -> Option<&str>;
    fn args(&self) -> Vec<&str>;
    fn ensure_mount(&mut self, mount: &VolumeMount) -> bool;
    fn ensure_mount_at(&mut self, mount: &VolumeMount) -> bool;
    fn ensure_env(&mut self, var: &EnvVar) -> bool;
    fn set_env(&mut self, name: &str, value: &str);
    fn ensure_port(&mut self, port: &ContainerPort) -> bool;
    fn set_run_as_user(&mut self, uid: i64);
    fn push_args(&mut self, args: &[&str]);
}

impl<'a> Edit for WorkingSet<'a> {
    type Container<'c>
        = TypedContainer<'c, 'a>
    where
        Self: 'c;

    fn label(&self, key: &str) -> Option<&str> {
        WorkingSet::label(self, key)
    }
    fn name(&self) -> &str {
        WorkingSet::name(self)
    }
    fn namespace(&self) -> &str {
        WorkingSet::namespace(self)
    }
    fn service_account_name(&self) -> &str {
        WorkingSet::service_account_name(self)
    }
    fn first_image_pull_secret(&self) -> Option<&str> {
        WorkingSet::first_image_pull_secret(self)
    }
    fn has_volume(&self, name: &str) -> bool {
        WorkingSet::has_volume(self, name)
    }
    fn changes(&self) -> usize {
        WorkingSet::changes(self)
    }
    fn positions(&self, list: List, name: &str) -> Vec<usize> {
        WorkingSet::positions(self, list, name)
    }
    fn position(&self, list: List, name: &str) -> Option<usize> {
        WorkingSet::position(self, list, name)
    }
    fn containers(&mut self, list: List) -> Cow<'_, [ContainerView<'_>]> {
        Cow::Borrowed(WorkingSet::containers(self, list))
    }
    fn container(&mut self, list: List, name: &str) -> Option<Cow<'_, ContainerView<'_>>> {
        WorkingSet::container(self, list, name).map(Cow::Borrowed)
    }
    fn has_container_named(&self, name: &str) -> bool {
        WorkingSet::has_container_named(self, name)
    }
    fn set_annotation(&mut self, key: &str, value: &str) {
        WorkingSet::set_annotation(self, key, value)
    }
    fn set_namespace(&mut self, namespace: &str) {
        WorkingSet::set_namespace(self, namespace)
    }
    fn set_node_selector(&mut self, key: &str, value: &str) {
        WorkingSet::set_node_selector(self, key, value)
    }
    fn set_share_process_namespace(&mut self, on: bool) {
        WorkingSet::set_share_process_namespace(self, on)
    }
    fn ensure_container(&mut self, list: List, container: Container) -> bool {
        WorkingSet::ensure_container(self, list, container)
    }
    fn ensure_prewritten_container(&mut self, list: List, name: &str, json: String) -> bool {
        WorkingSet::ensure_prewritten_container(self, list, name, json)
    }
    fn ensure_volume(&mut self, volume: &Volume) -> bool {
        WorkingSet::ensure_volume(self, volume)
    }
    fn container_at(&mut self, list: List, index: usize) -> Option<Self::Container<'_>> {
        WorkingSet::container_at(self, list, index)
    }
    fn container_mut(&mut self, list: List, name: &str) -> Option<Self::Container<'_>> {
        WorkingSet::container_mut(self, list, name)
    }
}

impl EditContainer for TypedContainer<'_, '_> {
    fn has_mount(&self, name: &str) -> bool {
        TypedContainer::has_mount(self, name)
    }
    fn has_env(&self, name: &str) -> bool {
        TypedContainer::has_env(self, name)
    }
    fn env_value(&self, name: &str) -> Option<&str> {
        TypedContainer::env_value(self, name)
    }
    fn args(&self) -> Vec<&str> {
        TypedContainer::args(self)
    }
    fn ensure_mount(&mut self, mount: &VolumeMount) -> bool {
        TypedContainer::ensure_mount(self, mount)
    }
    fn ensure_mount_at(&mut self, mount: &VolumeMount) -> bool {
        TypedContainer::ensure_mount_at(self, mount)
    }
    fn ensure_env(&mut self, var: &EnvVar) -> bool {
        TypedContainer::ensure_env(self, var)
    }
    fn set_env(&mut self, name: &str, value: &str) {
        TypedContainer::set_env(self, name, value)
    }
    fn ensure_port(&mut self, port: &ContainerPort) -> bool {
        TypedContainer::ensure_port(self, port)
    }
    fn set_run_as_user(&mut self, uid: i64) {
        TypedContainer::set_run_as_user(self, uid)
    }
    fn push_args(&mut self, args: &[&str]) {
        TypedContainer::push_args(self, args)
    }
}
