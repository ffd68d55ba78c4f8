//! Scripts of calls, run on both editors and compared: every read must
//! answer the same, every call must change the pod on both or on neither,
//! and at the end the working set's patch applied to the pod must give the
//! tree's pod, with the same operations.

use crate::{Edit, EditContainer, EitherDoc, TreeDoc};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, ObjectFieldSelector, SecurityContext, Volume,
    VolumeMount,
};
use kserve_injector_core::internals::{self as view, List, WorkingSet};
use kserve_injector_core::{apply_all, Op};
use proptest::prelude::*;
use serde_json::Value;

/// Which container a [`ContainerCall`] is made on.
#[derive(Debug, Clone)]
pub enum Target {
    /// `container_mut`: the first of that name.
    Named(String),
    /// `container_at`.
    At(usize),
}

/// One call of [`Edit`]'s, with its arguments.
#[derive(Debug, Clone)]
pub enum Call {
    Annotation(String),
    Label(String),
    Name,
    Namespace,
    ServiceAccountName,
    FirstImagePullSecret,
    HasVolume(String),
    Positions(List, String),
    Containers(List),
    Container(List, String),
    HasContainerNamed(String),
    SetAnnotation(String, String),
    SetNamespace(String),
    SetNodeSelector(String, String),
    SetShareProcessNamespace(bool),
    EnsureContainer(List, Box<Container>),
    /// The container's text as serde_json writes it, added as text.
    EnsurePrewrittenContainer(List, Box<Container>),
    EnsureVolume(Box<Volume>),
    On(List, Target, Box<ContainerCall>),
}

/// One call of [`EditContainer`]'s.
#[derive(Debug, Clone)]
pub enum ContainerCall {
    HasMount(String),
    HasEnv(String),
    EnvValue(String),
    Args,
    EnsureMount(VolumeMount),
    EnsureMountAt(VolumeMount),
    EnsureEnv(EnvVar),
    SetEnv(String, String),
    EnsurePort(ContainerPort),
    SetRunAsUser(i64),
    PushArgs(Vec<String>),
}

/// What a call answered, as comparable text.
fn answer(doc: &mut impl Edit, call: &Call) -> String {
    let json = |v: &dyn erased::Show| v.show();
    match call {
        Call::Annotation(key) => format!("{:?}", doc.annotation(key)),
        Call::Label(key) => format!("{:?}", doc.label(key)),
        Call::Name => doc.name().to_string(),
        Call::Namespace => doc.namespace().to_string(),
        Call::ServiceAccountName => doc.service_account_name().to_string(),
        Call::FirstImagePullSecret => format!("{:?}", doc.first_image_pull_secret()),
        Call::HasVolume(name) => doc.has_volume(name).to_string(),
        Call::Positions(list, name) => format!("{:?}", doc.positions(*list, name)),
        // Names only: the view reads a container's lists only for the
        // containers the injectors read them of (`crate::view`), which the
        // container calls below compare.
        Call::Containers(list) => {
            let all = doc.containers(*list);
            json(
                &all.iter()
                    .map(|c| c.name.as_ref().map(|n| n.as_str().to_string()))
                    .collect::<Vec<_>>(),
            )
        }
        Call::Container(list, name) => doc.container(*list, name).is_some().to_string(),
        Call::HasContainerNamed(name) => doc.has_container_named(name).to_string(),
        Call::SetAnnotation(key, value) => {
            doc.set_annotation(key, value);
            String::new()
        }
        Call::SetNamespace(namespace) => {
            doc.set_namespace(namespace);
            String::new()
        }
        Call::SetNodeSelector(key, value) => {
            doc.set_node_selector(key, value);
            String::new()
        }
        Call::SetShareProcessNamespace(on) => {
            doc.set_share_process_namespace(*on);
            String::new()
        }
        Call::EnsureContainer(list, c) => doc.ensure_container(*list, (**c).clone()).to_string(),
        Call::EnsurePrewrittenContainer(list, c) => {
            let text = serde_json::to_string(&**c).unwrap_or_default();
            doc.ensure_prewritten_container(*list, &c.name, text)
                .to_string()
        }
        Call::EnsureVolume(v) => doc.ensure_volume(v).to_string(),
        Call::On(list, target, call) => {
            let container = match target {
                Target::Named(name) => doc.container_mut(*list, name),
                Target::At(index) => doc.container_at(*list, *index),
            };
            match container {
                Some(mut c) => container_answer(&mut c, call),
                None => "no such container".to_string(),
            }
        }
    }
}

fn container_answer(c: &mut impl EditContainer, call: &ContainerCall) -> String {
    match call {
        ContainerCall::HasMount(name) => c.has_mount(name).to_string(),
        ContainerCall::HasEnv(name) => c.has_env(name).to_string(),
        ContainerCall::EnvValue(name) => format!("{:?}", c.env_value(name)),
        ContainerCall::Args => format!("{:?}", c.args()),
        ContainerCall::EnsureMount(m) => c.ensure_mount(m).to_string(),
        ContainerCall::EnsureMountAt(m) => c.ensure_mount_at(m).to_string(),
        ContainerCall::EnsureEnv(v) => c.ensure_env(v).to_string(),
        ContainerCall::SetEnv(name, value) => {
            c.set_env(name, value);
            String::new()
        }
        ContainerCall::EnsurePort(p) => c.ensure_port(p).to_string(),
        ContainerCall::SetRunAsUser(uid) => {
            c.set_run_as_user(*uid);
            String::new()
        }
        ContainerCall::PushArgs(args) => {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            c.push_args(&args);
            String::new()
        }
    }
}

mod erased {
    /// A read's result as JSON text (the views serialise as the injectors
    /// read them, absent fields left out).
    pub(super) trait Show {
        fn show(&self) -> String;
    }

    impl<T: serde::Serialize> Show for T {
        fn show(&self) -> String {
            serde_json::to_string(self).unwrap_or_else(|e| format!("unserialisable: {e}"))
        }
    }
}

fn ops_json(ops: &[Op]) -> Vec<(String, String, Value)> {
    (ops.iter())
        .map(|op| {
            let value = serde_json::from_str(&op.value).unwrap_or(Value::Null);
            (op.name().to_string(), op.path.clone(), value)
        })
        .collect()
}

/// Runs `calls` on the working set made from the view of `pod` and on the
/// tree (a copy of `pod`), in the namespace `namespace` when given, and
/// says where they part. `Ok(None)` when the view refuses the pod (the
/// webhook refuses it before any injector runs); `Ok(Some(pod))` is the
/// edited pod both agree on.
pub fn compare(
    pod: &Value,
    namespace: Option<&str>,
    calls: &[Call],
) -> Result<Option<Value>, String> {
    let Ok(view) = view::pod_from_value(pod) else {
        return Ok(None);
    };
    let mut ws = match namespace {
        Some(ns) => WorkingSet::in_namespace(view, ns),
        None => WorkingSet::new(view),
    };
    let mut tree = pod.clone();
    let mut doc = match namespace {
        Some(ns) => TreeDoc::in_namespace(&mut tree, ns),
        None => TreeDoc::new(&mut tree),
    };
    for (i, call) in calls.iter().enumerate() {
        let (ws_before, tree_before) = (ws.changes(), doc.changes());
        let on_ws = answer(&mut EitherDoc::Working(&mut ws), call);
        let on_tree = answer(&mut EitherDoc::Tree(&mut doc), call);
        if on_ws != on_tree {
            return Err(format!(
                "call {i} {call:?}: the working set answers {on_ws}, the oracle {on_tree}"
            ));
        }
        let (ws_changed, tree_changed) = (ws.changes() > ws_before, doc.changes() > tree_before);
        if ws_changed != tree_changed {
            return Err(format!(
                "call {i} {call:?}: changed the working set: {ws_changed}, the oracle: {tree_changed}"
            ));
        }
    }
    let tree_ops = doc.into_ops();
    let ops = ws.into_patch();
    // `into_ops` moved the values out of the tree: the replay edits a copy.
    let mut expected = pod.clone();
    let mut replay = match namespace {
        Some(ns) => TreeDoc::in_namespace(&mut expected, ns),
        None => TreeDoc::new(&mut expected),
    };
    for call in calls {
        answer(&mut replay, call);
    }
    drop(replay);
    let mut patched = pod.clone();
    apply_all(&ops, &mut patched)
        .map_err(|e| format!("the working set's patch does not apply: {e}\n{ops:?}"))?;
    if patched != expected {
        return Err(format!(
            "pod + the working set's patch differs from the oracle's pod\npatch: {ops:?}\npod + patch: {patched}\noracle: {expected}"
        ));
    }
    let mut replayed = pod.clone();
    apply_all(&tree_ops, &mut replayed)
        .map_err(|e| format!("the oracle's operations do not apply: {e}"))?;
    if replayed != expected {
        return Err(format!(
            "the oracle's operations do not give its pod: {tree_ops:?}"
        ));
    }
    if ops_json(&ops) != ops_json(&tree_ops) {
        return Err(format!(
            "the working set's operations are not the oracle's\nworking set: {ops:?}\noracle: {tree_ops:?}"
        ));
    }
    Ok(Some(expected))
}

// --- scripts ---------------------------------------------------------------

/// The names the injectors use, and a few others.
const CONTAINERS: [&str; 8] = [
    "kserve-container",
    "queue-proxy",
    "transformer-container",
    "worker-container",
    "storage-initializer",
    "modelcar",
    "modelcar-init",
    "agent",
];
const KEYS: [&str; 6] = [
    "a",
    "x/y",
    "~k",
    "serving.kserve.io/storage-initializer-sourceuri",
    "kserve-injector.io/modelcar-mode",
    "sidecar.istio.io/status",
];
const VALUES: [&str; 4] = ["", "v", "oci://r/m:v1", "a \"quoted\" / ~ value"];
const ENV: [&str; 5] = [
    "A",
    "STORAGE_URI",
    "MODEL_INIT_MODE",
    "SERVING_READINESS_PROBE",
    "USER_PORT",
];
const VOLUMES: [&str; 4] = [
    "kserve-provision-location",
    "mnt-models",
    "data",
    "cabundle-cert",
];
const PATHS: [&str; 3] = ["/mnt/models", "/mnt", "/data"];

fn list() -> impl Strategy<Value = List> {
    prop_oneof![Just(List::Containers), Just(List::InitContainers)]
}

fn one_of(items: &'static [&'static str]) -> impl Strategy<Value = String> {
    proptest::sample::select(items).prop_map(str::to_string)
}

fn env_var() -> impl Strategy<Value = EnvVar> {
    (one_of(&ENV), one_of(&VALUES), any::<bool>()).prop_map(|(name, value, from)| EnvVar {
        name,
        value: (!from).then_some(value),
        value_from: from.then(|| EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.name".to_string(),
                api_version: None,
            }),
            ..Default::default()
        }),
    })
}

fn mount() -> impl Strategy<Value = VolumeMount> {
    (one_of(&VOLUMES), one_of(&PATHS), any::<bool>()).prop_map(|(name, path, ro)| VolumeMount {
        name,
        mount_path: path,
        read_only: ro.then_some(true),
        ..Default::default()
    })
}

fn port() -> impl Strategy<Value = ContainerPort> {
    (
        proptest::option::of(one_of(&["http", "agent-port", "metrics"])),
        8000..8100i32,
    )
        .prop_map(|(name, number)| ContainerPort {
            name,
            container_port: number,
            ..Default::default()
        })
}

fn container() -> impl Strategy<Value = Container> {
    (
        one_of(&CONTAINERS),
        proptest::collection::vec(env_var(), 0..3),
        proptest::collection::vec(mount(), 0..3),
        proptest::collection::vec(port(), 0..2),
        proptest::collection::vec(one_of(&VALUES), 0..3),
        proptest::option::of(0..2000i64),
    )
        .prop_map(|(name, env, mounts, ports, args, uid)| Container {
            name,
            image: Some("img".to_string()),
            env: (!env.is_empty()).then_some(env),
            volume_mounts: (!mounts.is_empty()).then_some(mounts),
            ports: (!ports.is_empty()).then_some(ports),
            args: (!args.is_empty()).then_some(args),
            security_context: uid.map(|uid| SecurityContext {
                run_as_user: Some(uid),
                ..Default::default()
            }),
            ..Default::default()
        })
}

fn volume() -> impl Strategy<Value = Volume> {
    one_of(&VOLUMES).prop_map(|name| Volume {
        name,
        empty_dir: Some(Default::default()),
        ..Default::default()
    })
}

/// A container call on a container whose lists the view reads: the ones
/// the injectors edit (`view::LIST_READ_CONTAINERS`, and the storage
/// initializer among init containers). The view leaves the others' lists
/// unread by design, and no injector writes into them.
fn on_container() -> impl Strategy<Value = Call> {
    prop_oneof![
        3 => (proptest::sample::select(&view::LIST_READ_CONTAINERS[..]), container_call())
            .prop_map(|(n, c)| Call::On(List::Containers, Target::Named(n.to_string()), Box::new(c))),
        1 => container_call().prop_map(|c| {
            let name = "storage-initializer".to_string();
            Call::On(List::InitContainers, Target::Named(name), Box::new(c))
        }),
    ]
}

fn container_call() -> impl Strategy<Value = ContainerCall> {
    prop_oneof![
        one_of(&VOLUMES).prop_map(ContainerCall::HasMount),
        one_of(&ENV).prop_map(ContainerCall::HasEnv),
        one_of(&ENV).prop_map(ContainerCall::EnvValue),
        Just(ContainerCall::Args),
        mount().prop_map(ContainerCall::EnsureMount),
        mount().prop_map(ContainerCall::EnsureMountAt),
        env_var().prop_map(ContainerCall::EnsureEnv),
        (one_of(&ENV), one_of(&VALUES)).prop_map(|(n, v)| ContainerCall::SetEnv(n, v)),
        port().prop_map(ContainerCall::EnsurePort),
        (0..2000i64).prop_map(ContainerCall::SetRunAsUser),
        proptest::collection::vec(one_of(&VALUES), 1..3).prop_map(ContainerCall::PushArgs),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        1 => one_of(&KEYS).prop_map(Call::Annotation),
        1 => one_of(&KEYS).prop_map(Call::Label),
        1 => Just(Call::Name),
        1 => Just(Call::Namespace),
        1 => Just(Call::ServiceAccountName),
        1 => Just(Call::FirstImagePullSecret),
        1 => one_of(&VOLUMES).prop_map(Call::HasVolume),
        1 => (list(), one_of(&CONTAINERS)).prop_map(|(l, n)| Call::Positions(l, n)),
        2 => list().prop_map(Call::Containers),
        1 => (list(), one_of(&CONTAINERS)).prop_map(|(l, n)| Call::Container(l, n)),
        1 => one_of(&CONTAINERS).prop_map(Call::HasContainerNamed),
        1 => (one_of(&KEYS), one_of(&VALUES)).prop_map(|(k, v)| Call::SetAnnotation(k, v)),
        1 => one_of(&["default", "team-a"]).prop_map(Call::SetNamespace),
        1 => (one_of(&KEYS), one_of(&VALUES)).prop_map(|(k, v)| Call::SetNodeSelector(k, v)),
        1 => any::<bool>().prop_map(Call::SetShareProcessNamespace),
        2 => (list(), container()).prop_map(|(l, c)| Call::EnsureContainer(l, Box::new(c))),
        1 => (list(), container()).prop_map(|(l, c)| Call::EnsurePrewrittenContainer(l, Box::new(c))),
        1 => volume().prop_map(|v| Call::EnsureVolume(Box::new(v))),
        8 => on_container(),
    ]
}

/// Scripts of up to `max` calls, weighted to the writes and to the
/// containers the injectors edit.
pub fn script(max: usize) -> impl Strategy<Value = Vec<Call>> {
    proptest::collection::vec(call(), 1..=max)
}
