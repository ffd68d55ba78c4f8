//! The webhook's pod: the borrowed view of the request, edited in place and
//! typed. Each write changes the typed field the injectors read back and
//! records, when it decides, the operation with its value written as JSON
//! ([`Op`]). A later edit inside something added earlier is folded into
//! that `add`'s value when the patch is taken ([`WorkingSet::into_patch`]).
//! The view keeps every list the injectors write whole (all
//! entries, at their indices) and every object on a written path exactly
//! when the pod has it, so indices and "create the list" decisions are the
//! pod's own; the test oracle (the kserve-injector-oracle crate) checks that.

use super::container::TypedContainer;
use super::edits::{add, owned, push_entry, replace, set_entry, Ops};
use super::recorded::{apply_at, array_of, json, object, quoted, written, Op, OpKind};
use super::{child, Annotations, List};
use crate::json_text::k8s;
use crate::view::{
    Capped, ContainerView, EnvView, MetaView, MountView, Named, PodView, PortView, ResourcesView,
    SpecView, Str, StrMap,
};
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Volume, VolumeMount};
use serde_json::Value;

pub struct WorkingSet<'a> {
    pod: PodView<'a>,
    /// The namespace the pod is created in, which a pod template does not carry.
    namespace: Option<String>,
    ops: Vec<Op>,
    /// Containers added and not read since, as (list, index, container):
    /// their entry in the view holds the name only. The typical pod's agent
    /// copies all of queue-proxy's variables; writing them into the view as
    /// well would be work for nothing to read (`cargo bench --bench review`
    /// measures the typical pod).
    stubs: Vec<(List, usize, Pending)>,
}

/// An added container not read since: typed, or as the JSON text it was
/// added as ([`WorkingSet::ensure_prewritten_container`]).
enum Pending {
    Typed(Box<Container>),
    Written(String),
}

impl<'a> WorkingSet<'a> {
    pub fn new(pod: PodView<'a>) -> Self {
        Self {
            pod,
            namespace: None,
            // Room for a review's operations (an OCI modelcar records ten),
            // rather than regrowing the list twice on the way there.
            ops: Vec::with_capacity(16),
            stubs: Vec::new(),
        }
    }

    pub fn in_namespace(pod: PodView<'a>, namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.to_string()),
            ..Self::new(pod)
        }
    }

    /// The operations, in order. A write inside something added earlier goes into that `add`'s value,
    /// and a path written twice keeps one operation with the last value, so
    /// whatever we create arrives whole in one `add`, as a diff would send
    /// it (and as the test oracle's `TreeDoc` sends it).
    #[cfg(any(test, feature = "oracle"))] // Only the tests and the oracle call it.
    pub fn into_patch(self) -> Vec<Op> {
        let mut out: Vec<Op> = Vec::with_capacity(self.ops.len());
        for op in self.ops {
            if let Some(op) = fold_into(&mut out, op) {
                out.push(op);
            }
        }
        out
    }

    /// [`Self::into_patch`], with the source of each operation: the label of
    /// the first range of `ends` (change counts, ascending) that holds the
    /// change which created it. A change folded into an earlier `add` keeps
    /// that add's source; a change past the last range is `ends`' last label.
    pub(crate) fn into_sourced_patch(
        self,
        ends: &[(&'static str, usize)],
    ) -> (Vec<Op>, Vec<&'static str>) {
        let mut out: Vec<Op> = Vec::with_capacity(self.ops.len());
        let mut sources = Vec::with_capacity(self.ops.len());
        for (i, op) in self.ops.into_iter().enumerate() {
            if let Some(op) = fold_into(&mut out, op) {
                out.push(op);
                let range = ends.iter().find(|(_, end)| i < *end).or(ends.last());
                sources.push(range.map_or("", |(name, _)| *name));
            }
        }
        (out, sources)
    }

    /// `metadata`, created with one `add` of `{key: value}` when absent; the
    /// flag says it was (the caller's write is then made).
    fn metadata_for(
        &mut self,
        key: &str,
        value: impl FnOnce() -> String,
    ) -> (&mut MetaView<'a>, &mut Ops, bool) {
        let created = self.pod.metadata.is_none();
        if created {
            add(
                &mut self.ops,
                "/metadata".to_string(),
                object(key, &value()),
            );
        }
        let meta = self.pod.metadata.get_or_insert_with(MetaView::default);
        (meta, &mut self.ops, created)
    }

    /// `spec`, as [`Self::metadata_for`] does `metadata`.
    fn spec_for(
        &mut self,
        key: &str,
        value: impl FnOnce() -> String,
    ) -> (&mut SpecView<'a>, &mut Ops, bool) {
        let created = self.pod.spec.is_none();
        if created {
            add(&mut self.ops, "/spec".to_string(), object(key, &value()));
        }
        let spec = self.pod.spec.get_or_insert_with(SpecView::default);
        (spec, &mut self.ops, created)
    }

    /// Appends the container named `name` whose JSON is `value`, its entry
    /// in the view holding the name only until something reads it.
    fn push_container(&mut self, list: List, name: Str<'static>, value: String, stub: Pending) {
        let view = ContainerView {
            name: Some(name),
            ..Default::default()
        };
        let (spec, ops, created) = self.spec_for(list.key(), || array_of(value.clone()));
        let items = match list {
            List::Containers => &mut spec.containers,
            List::InitContainers => &mut spec.init_containers,
        };
        let path = child("/spec", [list.key().into()]);
        push_entry(items, view, path, value, (!created).then_some(ops));
        let index = items.as_ref().map_or(0, |l| l.0.len() - 1);
        self.stubs.push((list, index, stub));
    }

    /// Writes the stub at `index` out into its container's view.
    fn materialize(&mut self, list: List, index: usize) {
        let Some(at) = (self.stubs.iter()).position(|s| s.0 == list && s.1 == index) else {
            return;
        };
        let view = match self.stubs.swap_remove(at).2 {
            Pending::Typed(container) => view_of(&container),
            // The text is a typed container's own (`json_text::k8s`), so it
            // reads back; were it not to, the entry would keep its name only.
            Pending::Written(text) => match serde_json::from_str::<Container>(&text) {
                Ok(container) => view_of(&container),
                Err(_) => return,
            },
        };
        if let Some(slot) = self.list_mut(list).and_then(|l| l.get_mut(index)) {
            *slot = view;
        }
    }

    fn list_mut(&mut self, list: List) -> Option<&mut Vec<ContainerView<'a>>> {
        let spec = self.pod.spec.as_mut()?;
        let items = match list {
            List::Containers => spec.containers.as_mut()?,
            List::InitContainers => spec.init_containers.as_mut()?,
        };
        Some(&mut items.0)
    }

    fn list(&self, list: List) -> &[ContainerView<'a>] {
        let spec = self.pod.spec.as_ref();
        let items = match list {
            List::Containers => spec.and_then(|s| s.containers.as_ref()),
            List::InitContainers => spec.and_then(|s| s.init_containers.as_ref()),
        };
        items.map(|c| c.0.as_slice()).unwrap_or_default()
    }
}

impl Annotations for WorkingSet<'_> {
    fn annotation(&self, key: &str) -> Option<&str> {
        WorkingSet::annotation(self, key)
    }
}

/// What the injectors read and write on a pod.
impl<'a> WorkingSet<'a> {
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.pod.metadata.as_ref()?.annotations.as_ref()?.get(key)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.pod.label(key)
    }

    /// The bytes of the annotations as edited so far, keys and values.
    pub(crate) fn annotation_bytes(&self) -> usize {
        self.pod.annotation_bytes()
    }

    pub fn name(&self) -> &str {
        (self.pod.metadata.as_ref().and_then(|m| m.name.as_ref()))
            .map(Str::as_str)
            .unwrap_or_default()
    }

    /// The namespace the pod is created in.
    pub fn namespace(&self) -> &str {
        if let Some(ns) = &self.namespace {
            return ns;
        }
        (self
            .pod
            .metadata
            .as_ref()
            .and_then(|m| m.namespace.as_ref()))
        .map(Str::as_str)
        .unwrap_or_default()
    }

    /// `spec.serviceAccountName`; empty means `default`.
    pub fn service_account_name(&self) -> &str {
        (self.pod.spec.as_ref())
            .and_then(|s| s.service_account_name.as_ref())
            .map(Str::as_str)
            .unwrap_or_default()
    }

    /// The name of `spec.imagePullSecrets[0]`.
    pub fn first_image_pull_secret(&self) -> Option<&str> {
        let secrets = self.pod.spec.as_ref()?.image_pull_secrets.as_ref()?;
        secrets.0.first()?.name.as_ref().map(Str::as_str)
    }

    pub fn has_volume(&self, name: &str) -> bool {
        (self.pod.spec.as_ref().and_then(|s| s.volumes.as_ref())).is_some_and(|v| {
            v.0.iter()
                .any(|v| v.name.as_ref().map(Str::as_str) == Some(name))
        })
    }

    /// How many writes changed the pod so far.
    pub fn changes(&self) -> usize {
        self.ops.len()
    }

    /// The indices of the entries named `name`.
    pub fn positions(&self, list: List, name: &str) -> Vec<usize> {
        let named = |(i, c): (usize, &ContainerView)| {
            (c.name.as_ref().map(Str::as_str) == Some(name)).then_some(i)
        };
        self.list(list)
            .iter()
            .enumerate()
            .filter_map(named)
            .collect()
    }

    /// The index of the first entry named `name`.
    pub fn position(&self, list: List, name: &str) -> Option<usize> {
        (self.list(list).iter()).position(|c| c.name.as_ref().map(Str::as_str) == Some(name))
    }

    /// The entries as the injectors read them: every list for containers
    /// the webhook adds, the listed ones for others (`view.rs`).
    /// `&mut` because added containers kept as their name only are
    /// written out when something reads them.
    pub fn containers(&mut self, list: List) -> &[ContainerView<'a>] {
        let pending: Vec<usize> = (self.stubs.iter())
            .filter(|s| s.0 == list)
            .map(|s| s.1)
            .collect();
        for index in pending {
            self.materialize(list, index);
        }
        self.list(list)
    }

    /// The first entry named `name`.
    pub fn container(&mut self, list: List, name: &str) -> Option<&ContainerView<'a>> {
        let index = self.position(list, name)?;
        self.materialize(list, index);
        self.list(list).get(index)
    }

    pub fn set_annotation(&mut self, key: &str, value: &str) {
        let (meta, ops, created) = self.metadata_for("annotations", || object(key, &quoted(value)));
        let ops = (!created).then_some(ops);
        set_entry(
            &mut meta.annotations,
            "/metadata/annotations",
            key,
            value,
            ops,
        );
    }

    pub fn set_namespace(&mut self, namespace: &str) {
        let (meta, ops, created) = self.metadata_for("namespace", || quoted(namespace));
        let path = || "/metadata/namespace".to_string();
        match &meta.namespace {
            _ if created => {}
            Some(ns) if ns.as_str() == namespace => {}
            Some(_) => replace(ops, path(), quoted(namespace)),
            None => add(ops, path(), quoted(namespace)),
        }
        meta.namespace = Some(owned(namespace));
    }

    pub fn set_node_selector(&mut self, key: &str, value: &str) {
        let (spec, ops, created) = self.spec_for("nodeSelector", || object(key, &quoted(value)));
        let ops = (!created).then_some(ops);
        set_entry(
            &mut spec.node_selector,
            "/spec/nodeSelector",
            key,
            value,
            ops,
        );
    }

    pub fn set_share_process_namespace(&mut self, on: bool) {
        let (spec, ops, created) = self.spec_for("shareProcessNamespace", || on.to_string());
        let path = || "/spec/shareProcessNamespace".to_string();
        match spec.share_process_namespace {
            _ if created => {}
            Some(now) if now == on => {}
            Some(_) => replace(ops, path(), on.to_string()),
            None => add(ops, path(), on.to_string()),
        }
        spec.share_process_namespace = Some(on);
    }

    /// Appends the container unless any container or init container has its name.
    pub fn ensure_container(&mut self, list: List, container: Container) -> bool {
        if self.has_container_named(&container.name) {
            return false;
        }
        let value = written(k8s::container(&container));
        let name = owned(&container.name);
        self.push_container(list, name, value, Pending::Typed(Box::new(container)));
        true
    }

    /// [`Self::ensure_container`] for a container whose JSON is already
    /// written: `json` is the text of a container named `name`, recorded as
    /// it is.
    pub fn ensure_prewritten_container(&mut self, list: List, name: &str, json: String) -> bool {
        if self.has_container_named(name) {
            return false;
        }
        let pending = Pending::Written(json.clone());
        self.push_container(list, owned(name), json, pending);
        true
    }

    /// Appends the volume unless a volume of that name exists.
    pub fn ensure_volume(&mut self, volume: &Volume) -> bool {
        if self.has_volume(&volume.name) {
            return false;
        }
        let value = json(volume);
        let whole = || array_of(value.clone());
        let (spec, ops, created) = self.spec_for("volumes", whole);
        let named = Named {
            name: Some(owned(&volume.name)),
        };
        push_entry(
            &mut spec.volumes,
            named,
            "/spec/volumes".to_string(),
            value,
            (!created).then_some(ops),
        );
        true
    }

    /// A writable container; `None` if there is no entry at `index`.
    pub fn container_at(&mut self, list: List, index: usize) -> Option<TypedContainer<'_, 'a>> {
        self.materialize(list, index);
        let spec = self.pod.spec.as_mut()?;
        let items = match list {
            List::Containers => spec.containers.as_mut()?,
            List::InitContainers => spec.init_containers.as_mut()?,
        };
        let c = items.0.get_mut(index)?;
        Some(TypedContainer::new(c, list, index, &mut self.ops))
    }

    /// The first entry named `name`, writable.
    pub fn container_mut(&mut self, list: List, name: &str) -> Option<TypedContainer<'_, 'a>> {
        let index = self.position(list, name)?;
        self.container_at(list, index)
    }

    /// Container names are unique across containers and init containers.
    pub fn has_container_named(&self, name: &str) -> bool {
        self.position(List::Containers, name).is_some()
            || self.position(List::InitContainers, name).is_some()
    }
}

/// Folds `op` into an earlier operation on the same path or an `add` above
/// it; gives it back when there is none. Few operations per pod: a linear
/// scan beats hashing pointers. Folding parses the earlier value, which
/// only a write inside something added in the same pass needs.
fn fold_into(out: &mut [Op], op: Op) -> Option<Op> {
    let path = op.path.as_str();
    let inside = |earlier: &Op| {
        let a = earlier.path.as_str();
        // The byte after the prefix first: it rules out most pairs
        // without comparing the prefix.
        earlier.kind == OpKind::Add
            && path.len() > a.len()
            && path.as_bytes()[a.len()] == b'/'
            && path.starts_with(a)
    };
    let Some(at) = (out.iter()).rposition(|e| e.path.as_str() == path || inside(e)) else {
        return Some(op);
    };
    let rest = &path[out[at].path.as_str().len()..];
    if rest.is_empty() {
        out[at].value = op.value;
        return None;
    }
    let parse = |text: &str| serde_json::from_str::<Value>(text);
    let (Ok(mut target), Ok(value)) = (parse(&out[at].value), parse(&op.value)) else {
        return Some(op);
    };
    match apply_at(&mut target, op.kind, rest, value) {
        Ok(()) => {
            out[at].value = json(&target);
            None
        }
        Err(_) => Some(op),
    }
}

/// An added container as the injectors read it back: every list.
fn view_of(c: &Container) -> ContainerView<'static> {
    fn list<T, U>(items: &Option<Vec<T>>, f: impl Fn(&T) -> U) -> Option<Capped<U>> {
        items.as_ref().map(|v| Capped(v.iter().map(f).collect()))
    }
    ContainerView {
        name: Some(owned(&c.name)),
        env: list(&c.env, |v: &EnvVar| EnvView {
            name: Some(owned(&v.name)),
            value: v.value.as_deref().map(owned),
            value_from: v.value_from.clone().map(Box::new),
        }),
        volume_mounts: list(&c.volume_mounts, |m: &VolumeMount| MountView {
            name: Some(owned(&m.name)),
            mount_path: Some(owned(&m.mount_path)),
        }),
        ports: list(&c.ports, |p: &ContainerPort| PortView {
            name: p.name.as_deref().map(owned),
            container_port: Some(p.container_port),
        }),
        args: list(&c.args, |a: &String| owned(a)),
        resources: c.resources.as_ref().map(|r| ResourcesView {
            limits: r
                .limits
                .as_ref()
                .map(|l| StrMap(l.iter().map(|(k, q)| (owned(k), owned(&q.0))).collect())),
        }),
        security_context: c.security_context.clone().map(Box::new),
        readiness_probe: c.readiness_probe.clone().map(Box::new),
    }
}
