//! One test closure, two documents: a test that runs the same calls on the
//! working set and on the oracle takes this enum, which forwards each call
//! to the one it holds.

use crate::{Edit, EditContainer, TreeContainer, TreeDoc};
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Volume, VolumeMount};
use kserve_injector_core::internals::{
    Annotations, ContainerView, List, TypedContainer, WorkingSet,
};
use std::borrow::Cow;

/// The working set or the oracle, borrowed.
pub enum EitherDoc<'x, 'a> {
    Tree(&'x mut TreeDoc<'a>),
    Working(&'x mut WorkingSet<'a>),
}

/// A writable container of either document.
pub enum EitherContainer<'c, 'a> {
    Tree(TreeContainer<'c>),
    Working(TypedContainer<'c, 'a>),
}

macro_rules! forward {
    ($self:ident, $doc:ident => $call:expr) => {
        match $self {
            Self::Tree($doc) => $call,
            Self::Working($doc) => $call,
        }
    };
}

impl Annotations for EitherDoc<'_, '_> {
    fn annotation(&self, key: &str) -> Option<&str> {
        forward!(self, d => d.annotation(key))
    }
}

impl<'a> Edit for EitherDoc<'_, 'a> {
    type Container<'c>
        = EitherContainer<'c, 'a>
    where
        Self: 'c;

    fn label(&self, key: &str) -> Option<&str> {
        forward!(self, d => d.label(key))
    }
    fn name(&self) -> &str {
        forward!(self, d => d.name())
    }
    fn namespace(&self) -> &str {
        forward!(self, d => d.namespace())
    }
    fn service_account_name(&self) -> &str {
        forward!(self, d => d.service_account_name())
    }
    fn first_image_pull_secret(&self) -> Option<&str> {
        forward!(self, d => d.first_image_pull_secret())
    }
    fn has_volume(&self, name: &str) -> bool {
        forward!(self, d => d.has_volume(name))
    }
    fn changes(&self) -> usize {
        forward!(self, d => d.changes())
    }
    fn positions(&self, list: List, name: &str) -> Vec<usize> {
        forward!(self, d => d.positions(list, name))
    }
    fn containers(&mut self, list: List) -> Cow<'_, [ContainerView<'_>]> {
        forward!(self, d => Edit::containers(&mut **d, list))
    }
    fn set_annotation(&mut self, key: &str, value: &str) {
        forward!(self, d => d.set_annotation(key, value))
    }
    fn set_namespace(&mut self, namespace: &str) {
        forward!(self, d => d.set_namespace(namespace))
    }
    fn set_node_selector(&mut self, key: &str, value: &str) {
        forward!(self, d => d.set_node_selector(key, value))
    }
    fn set_share_process_namespace(&mut self, on: bool) {
        forward!(self, d => d.set_share_process_namespace(on))
    }
    fn ensure_container(&mut self, list: List, container: Container) -> bool {
        forward!(self, d => d.ensure_container(list, container))
    }
    fn ensure_prewritten_container(&mut self, list: List, name: &str, json: String) -> bool {
        forward!(self, d => d.ensure_prewritten_container(list, name, json))
    }
    fn ensure_volume(&mut self, volume: &Volume) -> bool {
        forward!(self, d => d.ensure_volume(volume))
    }
    fn container_at(&mut self, list: List, index: usize) -> Option<Self::Container<'_>> {
        match self {
            Self::Tree(d) => d.container_at(list, index).map(EitherContainer::Tree),
            Self::Working(d) => d.container_at(list, index).map(EitherContainer::Working),
        }
    }
}

impl EditContainer for EitherContainer<'_, '_> {
    fn has_mount(&self, name: &str) -> bool {
        forward!(self, c => c.has_mount(name))
    }
    fn has_env(&self, name: &str) -> bool {
        forward!(self, c => c.has_env(name))
    }
    fn env_value(&self, name: &str) -> Option<&str> {
        forward!(self, c => c.env_value(name))
    }
    fn args(&self) -> Vec<&str> {
        forward!(self, c => c.args())
    }
    fn ensure_mount(&mut self, mount: &VolumeMount) -> bool {
        forward!(self, c => c.ensure_mount(mount))
    }
    fn ensure_mount_at(&mut self, mount: &VolumeMount) -> bool {
        forward!(self, c => c.ensure_mount_at(mount))
    }
    fn ensure_env(&mut self, var: &EnvVar) -> bool {
        forward!(self, c => c.ensure_env(var))
    }
    fn set_env(&mut self, name: &str, value: &str) {
        forward!(self, c => c.set_env(name, value))
    }
    fn ensure_port(&mut self, port: &ContainerPort) -> bool {
        forward!(self, c => c.ensure_port(port))
    }
    fn set_run_as_user(&mut self, uid: i64) {
        forward!(self, c => c.set_run_as_user(uid))
    }
    fn push_args(&mut self, args: &[&str]) {
        forward!(self, c => c.push_args(args))
    }
}
