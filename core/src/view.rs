//! The borrowed view of a pod: exactly the fields the injectors read, typed
//! as the Pod schema types them, with strings borrowed from the request body
//! where JSON escaping allows. Every other field is skipped by the
//! deserializer (which still checks it is valid JSON) and never re-emitted:
//! the webhook answers with a patch, so what we do not read stays the API
//! server's bytes.
//!
//! Validation rule: a wrong type in a field listed here is an error naming
//! its path; a field nobody reads is not checked (the API server decoded the
//! pod before admission). Lists and maps are capped at `MAX_ENTRIES`
//! entries, far above any real pod, so that a hostile body cannot make the
//! view grow beyond a small multiple of the body.
//!
//! The view is also what the injectors edit: [`crate::pod::WorkingSet`]
//! changes it in place and records the patch.

use crate::config::Config;
use crate::constants::{
    AGENT_CONTAINER, KSERVE_CONTAINER, MODELCAR_CONTAINER, QUEUE_PROXY_CONTAINER,
    STORAGE_INITIALIZER_CONTAINER, TRANSFORMER_CONTAINER, WORKER_CONTAINER,
};
use crate::pod_facts::PodFacts;
use k8s_openapi::api::core::v1::{EnvVarSource, Probe, SecurityContext};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;

/// The most entries a list or map the injectors read may hold. Kubernetes
/// caps an object at about 1.5 MB in etcd and real pods have tens of
/// containers, env vars or annotations; this is two orders of magnitude above.
pub(crate) const MAX_ENTRIES: usize = 4096;

/// The most entries all those lists and maps may hold together: a pod with
/// 50 fully configured containers has about 1,500. Past it the pod is
/// refused before the working set is built, which bounds the working set to
/// a few MiB whatever the body.
pub(crate) const MAX_TOTAL_ENTRIES: usize = 16384;

/// A string, borrowed from the input when it holds no escapes.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Str<'a>(pub Cow<'a, str>);

impl Str<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl Serialize for Str<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

fn too_many<E: de::Error>() -> E {
    E::custom(format_args!(
        "more than {MAX_ENTRIES} entries (the cap on lists and maps the injector reads)"
    ))
}

/// A list of at most `MAX_ENTRIES` entries.
#[derive(Debug, Clone, PartialEq)]
pub struct Capped<T>(pub Vec<T>);

impl<T> Default for Capped<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Capped<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Capped<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Capped::visit(seq)
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

impl<T> Capped<T> {
    fn visit<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error>
    where
        T: Deserialize<'de>,
    {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element()? {
            if items.len() == MAX_ENTRIES {
                return Err(too_many());
            }
            items.push(item);
        }
        Ok(Capped(items))
    }
}

impl<T: Serialize> Serialize for Capped<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// A string-to-string map (labels, annotations, node selector, limits) of at
/// most `MAX_ENTRIES` entries, in document order; a repeated key keeps
/// its last value, as JSON decoders do.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrMap<'a>(pub Vec<(Str<'a>, Str<'a>)>);

impl StrMap<'_> {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k.as_str() == key)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for StrMap<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrMap<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    if entries.len() == MAX_ENTRIES {
                        return Err(too_many());
                    }
                    entries.push(entry);
                }
                Ok(StrMap(entries))
            }
        }
        d.deserialize_map(V)
    }
}

impl Serialize for StrMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct PodView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<MetaView<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecView<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<StrMap<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<StrMap<'a>>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView<'a> {
    /// Whose credential Secrets the storage-initializer and agent get.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<Str<'a>>,
    #[serde(
        borrow,
        default,
        deserialize_with = "regular_containers",
        skip_serializing_if = "Option::is_none"
    )]
    pub containers: Option<Capped<ContainerView<'a>>>,
    #[serde(
        borrow,
        default,
        deserialize_with = "init_containers",
        skip_serializing_if = "Option::is_none"
    )]
    pub init_containers: Option<Capped<ContainerView<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Capped<Named<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Capped<Named<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<StrMap<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_process_namespace: Option<bool>,
}

/// Required names default to empty in the Pod schema's decoder, so a missing
/// one is not an error here either; it is left out of the working set.
///
/// A container as the injectors read it. The security context and the
/// readiness probe are copied into what we inject, so they are decoded whole
/// (the probe only where an injector reads it, see `regular_lists`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Capped<EnvView<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Capped<MountView<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Capped<PortView<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Capped<Str<'a>>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesView<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<Box<SecurityContext>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Box<Probe>>,
}

/// Regular containers whose lists (env, volumeMounts, ports, args) an
/// injector reads or extends. Of any other regular container the injectors
/// read only the name, the resource limits (the accelerator), the security
/// context and the readiness probe (the agent copies the first container's;
/// the Istio sidecar's UID), so its lists are skipped unread: sidecars such
/// as istio-proxy carry most of a pod's env and args.
pub const LIST_READ_CONTAINERS: [&str; 6] = [
    KSERVE_CONTAINER,
    TRANSFORMER_CONTAINER,
    WORKER_CONTAINER,
    QUEUE_PROXY_CONTAINER,
    AGENT_CONTAINER,
    MODELCAR_CONTAINER,
];

/// Of init containers, every one's volumeMounts are read (a
/// ClusterStorageContainer may give the initializer any name, and the
/// "already injected" guard looks for the model mount); env, ports and args
/// only of `storage-initializer` (fetch mode appends to its args).
pub(crate) const LIST_READ_INIT_CONTAINERS: [&str; 1] = [STORAGE_INITIALIZER_CONTAINER];

/// Which of a container's lists are decoded, and whether its readiness
/// probe is.
#[derive(Clone, Copy)]
struct Lists {
    mounts: bool,
    others: bool,
    probe: bool,
}

/// What of a container is read, by its name and its place in its list.
type Reads = fn(Option<&str>, usize) -> Lists;

/// The agent copies the readiness probe of the transformer, or else of the
/// first regular container (`readiness_from_user_probe`); no injector reads
/// any other container's probe.
fn regular_lists(name: Option<&str>, index: usize) -> Lists {
    let read = name.is_some_and(|n| LIST_READ_CONTAINERS.contains(&n));
    Lists {
        mounts: read,
        others: read,
        probe: index == 0 || name == Some(TRANSFORMER_CONTAINER),
    }
}

fn init_lists(name: Option<&str>, _index: usize) -> Lists {
    Lists {
        mounts: true,
        others: name.is_some_and(|n| LIST_READ_INIT_CONTAINERS.contains(&n)),
        probe: false,
    }
}

/// Regular containers: [`ContainerView`]s with the lists of
/// [`LIST_READ_CONTAINERS`] only (a name that comes after the lists, which
/// the API server never writes, still gets them dropped).
fn regular_containers<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Capped<ContainerView<'a>>>, D::Error> {
    d.deserialize_option(Containers(regular_lists))
}

/// Init containers: see [`LIST_READ_INIT_CONTAINERS`].
fn init_containers<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Capped<ContainerView<'a>>>, D::Error> {
    d.deserialize_option(Containers(init_lists))
}

/// A list of containers, or null; each container is decoded knowing its
/// place, capped as [`Capped`] is.
struct Containers(Reads);

impl<'de> Visitor<'de> for Containers {
    type Value = Option<Capped<ContainerView<'de>>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        let place = |index| ContainerVisitor {
            reads: self.0,
            index,
        };
        while let Some(item) = seq.next_element_seed(place(items.len()))? {
            if items.len() == MAX_ENTRIES {
                return Err(too_many());
            }
            items.push(item);
        }
        Ok(Some(Capped(items)))
    }
}

/// A container of a JSON tree read with every list, whatever its name: the
/// test oracle's reads (the `kserve-injector-oracle` crate's tree editor,
/// the only user of the `oracle` feature). Default when unreadable.
#[cfg(any(test, feature = "oracle"))]
pub fn container_from_value(value: &serde_json::Value) -> ContainerView<'_> {
    let all = |_: Option<&str>, _: usize| Lists {
        mounts: true,
        others: true,
        probe: true,
    };
    value
        .deserialize_map(ContainerVisitor {
            reads: all,
            index: 0,
        })
        .unwrap_or_default()
}

/// A list read before its container's name: any JSON value, kept until the
/// name says whether it is read (and type-checked) or dropped; a sequence or
/// map over [`MAX_ENTRIES`] entries is refused as a read list would be.
#[derive(Default)]
struct Held(serde_json::Value);

impl<'de> Deserialize<'de> for Held {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Held;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Held, A::Error> {
                let Capped(items) = Capped::<serde_json::Value>::visit(seq)?;
                Ok(Held(serde_json::Value::Array(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Held, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                    if out.len() == MAX_ENTRIES {
                        return Err(too_many());
                    }
                    out.insert(k, v);
                }
                Ok(Held(serde_json::Value::Object(out)))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Held, E> {
                Ok(Held(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Held, E> {
                Ok(Held(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Held, E> {
                Ok(Held(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Held, E> {
                Ok(Held(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Held, E> {
                Ok(Held(v.into()))
            }
            fn visit_unit<E>(self) -> Result<Held, E> {
                Ok(Held(serde_json::Value::Null))
            }
        }
        d.deserialize_any(V)
    }
}

/// `[3].valueFrom` for an error inside a list decoded from held JSON.
fn index_of(e: &serde_path_to_error::Error<serde_json::Error>) -> String {
    let path = e.path().to_string();
    match path.as_str() {
        "." => String::new(),
        p if p.starts_with('[') => p.to_string(),
        p => format!(".{p}"),
    }
}

/// Decodes a container's fields as the derive would (duplicates refused),
/// skipping what `reads` says nobody reads of the container at `index`.
#[derive(Clone, Copy)]
struct ContainerVisitor {
    reads: Reads,
    index: usize,
}

impl<'de> de::DeserializeSeed<'de> for ContainerVisitor {
    type Value = ContainerView<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ContainerVisitor {
    type Value = ContainerView<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("struct ContainerView")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut c = ContainerView::default();
        let mut seen = [false; 8];
        let mut once = |i: usize, field: &'static str| {
            if std::mem::replace(&mut seen[i], true) {
                Err(de::Error::duplicate_field(field))
            } else {
                Ok(())
            }
        };
        // Known once the name is read; lists and the probe before it are
        // kept as JSON until then, so the answer never depends on the order
        // of keys.
        let reads = |name: Option<&Str>| (self.reads)(name.map(Str::as_str), self.index);
        let mut lists: Option<Lists> = None;
        let mut pending: [Option<Held>; 5] = Default::default();
        macro_rules! list {
            ($i:literal, $field:literal, $read:ident, $slot:expr) => {{
                once($i, $field)?;
                match lists {
                    Some(l) if l.$read => $slot = map.next_value()?,
                    Some(_) => {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                    None => pending[$i - 1] = map.next_value()?,
                }
            }};
        }
        while let Some(key) = map.next_key::<Str<'de>>()? {
            match key.as_str() {
                "name" => {
                    once(0, "name")?;
                    c.name = map.next_value()?;
                    lists = Some(reads(c.name.as_ref()));
                }
                "env" => list!(1, "env", others, c.env),
                "volumeMounts" => list!(2, "volumeMounts", mounts, c.volume_mounts),
                "ports" => list!(3, "ports", others, c.ports),
                "args" => list!(4, "args", others, c.args),
                "readinessProbe" => list!(5, "readinessProbe", probe, c.readiness_probe),
                "resources" => {
                    once(6, "resources")?;
                    c.resources = map.next_value()?;
                }
                "securityContext" => {
                    once(7, "securityContext")?;
                    c.security_context = map.next_value()?;
                }
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        let lists = lists.unwrap_or_else(|| reads(None));
        let [env, mounts, ports, args, probe] = pending;
        // From held JSON the strings are owned, so 'static views coerce.
        fn typed<T: Deserialize<'static>, E: de::Error>(
            field: &str,
            held: Option<Held>,
        ) -> Result<Option<T>, E> {
            let Some(Held(value)) = held else {
                return Ok(None);
            };
            serde_path_to_error::deserialize(value)
                .map(Some)
                .map_err(|e| E::custom(format_args!("{field}{}: {}", index_of(&e), e.inner())))
        }
        if lists.others {
            c.env = c.env.or(typed::<Capped<EnvView<'static>>, _>("env", env)?);
            c.ports = c
                .ports
                .or(typed::<Capped<PortView<'static>>, _>("ports", ports)?);
            c.args = c.args.or(typed::<Capped<Str<'static>>, _>("args", args)?);
        } else {
            (c.env, c.ports, c.args) = (None, None, None);
        }
        if lists.mounts {
            let held = typed::<Capped<MountView<'static>>, _>("volumeMounts", mounts)?;
            c.volume_mounts = c.volume_mounts.or(held);
        } else {
            c.volume_mounts = None;
        }
        if lists.probe {
            let held = typed::<Box<Probe>, _>("readinessProbe", probe)?;
            c.readiness_probe = c.readiness_probe.or(held);
        } else {
            c.readiness_probe = None;
        }
        Ok(c)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Str<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<Box<EnvVarSource>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MountView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<Str<'a>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PortView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_port: Option<i32>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ResourcesView<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<StrMap<'a>>,
}

/// A list entry the injectors know by name only (volumes, pull secrets).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Named<'a> {
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Str<'a>>,
}

impl ContainerView<'_> {
    fn entries(&self) -> usize {
        let len = |n: Option<usize>| n.unwrap_or(0);
        1 + len(self.env.as_ref().map(|l| l.0.len()))
            + len(self.volume_mounts.as_ref().map(|l| l.0.len()))
            + len(self.ports.as_ref().map(|l| l.0.len()))
            + len(self.args.as_ref().map(|l| l.0.len()))
            + len(self
                .resources
                .as_ref()
                .and_then(|r| r.limits.as_ref())
                .map(|m| m.0.len()))
    }
}

impl PodView<'_> {
    /// The bytes of the pod's annotations, keys and values, as the API
    /// server counts them against its limit.
    pub(crate) fn annotation_bytes(&self) -> usize {
        let annotations = self.metadata.as_ref().and_then(|m| m.annotations.as_ref());
        annotations.map_or(0, |m| {
            m.0.iter()
                .map(|(k, v)| k.as_str().len() + v.as_str().len())
                .sum()
        })
    }

    /// How many list and map entries the view holds, containers included.
    pub fn entries(&self) -> usize {
        let maps = |m: Option<&StrMap>| m.map_or(0, |m| m.0.len());
        let meta = self.metadata.as_ref().map_or(0, |m| {
            maps(m.labels.as_ref()) + maps(m.annotations.as_ref())
        });
        let spec = self.spec.as_ref().map_or(0, |s| {
            let regular = s
                .containers
                .as_ref()
                .map_or(0, |l| l.0.iter().map(|c| c.entries()).sum::<usize>());
            let init = s
                .init_containers
                .as_ref()
                .map_or(0, |l| l.0.iter().map(|c| c.entries()).sum::<usize>());
            regular
                + init
                + s.volumes.as_ref().map_or(0, |l| l.0.len())
                + s.image_pull_secrets.as_ref().map_or(0, |l| l.0.len())
                + maps(s.node_selector.as_ref())
        });
        meta + spec
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.as_ref()?.labels.as_ref()?.get(key)
    }

    /// What the cluster-lookup rules read of this pod, created in `namespace`.
    pub(crate) fn facts(&self, namespace: &str, config: &Config) -> PodFacts {
        fn pairs<'m>(m: Option<&'m StrMap<'_>>) -> impl Iterator<Item = (&'m str, &'m str)> {
            (m.into_iter().flat_map(|m| m.0.iter())).map(|(k, v)| (k.as_str(), v.as_str()))
        }
        let meta = self.metadata.as_ref();
        let spec = self.spec.as_ref();
        let sa = spec.and_then(|s| s.service_account_name.as_ref());
        PodFacts::new(
            namespace,
            sa.map(Str::as_str).unwrap_or_default(),
            pairs(meta.and_then(|m| m.annotations.as_ref())),
            pairs(meta.and_then(|m| m.labels.as_ref())),
            config,
        )
    }

    /// The name, or the generateName while the name is not set yet.
    pub(crate) fn display_name(&self) -> Option<&str> {
        let meta = self.metadata.as_ref()?;
        meta.name
            .as_ref()
            .map(Str::as_str)
            .filter(|n| !n.is_empty())
            .or_else(|| meta.generate_name.as_ref().map(Str::as_str))
    }
}

/// Why a pod could not be read: the path of the first bad field and what is
/// wrong with it (serde_json's words without their position, when they are
/// serde_json's; `source` keeps its error). Two are equal when they say
/// the same: a pod read from bytes and from a tree gives equal errors,
/// though only the first source knows a line and column.
#[derive(Debug, Clone)]
pub struct ViewError {
    pub path: String,
    pub message: String,
    pub source: Option<crate::shared_error::SharedError<serde_json::Error>>,
}

impl PartialEq for ViewError {
    fn eq(&self, other: &Self) -> bool {
        (&self.path, &self.message) == (&other.path, &other.message)
    }
}

impl Eq for ViewError {}

impl ViewError {
    fn ours(message: String) -> Self {
        Self {
            path: ".".into(),
            message,
            source: None,
        }
    }

    fn decoding(path: String, e: serde_json::Error) -> Self {
        Self {
            path,
            message: message_of(&e),
            source: Some(e.into()),
        }
    }
}

/// serde_json's message without its " at line L column C" suffix, so that
/// the same error reads the same whether it came from bytes or from a tree.
pub(crate) fn message_of(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&suffix) {
        Some(stripped) if e.line() > 0 => stripped.to_string(),
        _ => text,
    }
}

/// Refuses a view past `MAX_TOTAL_ENTRIES`.
pub(crate) fn within_budget(view: PodView<'_>) -> Result<PodView<'_>, ViewError> {
    let entries = view.entries();
    if entries > MAX_TOTAL_ENTRIES {
        return Err(ViewError::ours(format!(
            "{entries} list and map entries in the fields the injector reads, more than \
             {MAX_TOTAL_ENTRIES} (the cap on a pod's entries)"
        )));
    }
    Ok(view)
}

/// Decodes the view of the pod held in `raw` (JSON text). Path tracking
/// allocates at every field, so it runs only to explain a failure.
pub fn pod_from_str(raw: &str) -> Result<PodView<'_>, ViewError> {
    if !raw.trim_start().starts_with('{') {
        return Err(ViewError::ours("a Pod must be a JSON object".into()));
    }
    match serde_json::from_str::<PodView>(raw) {
        Ok(view) => within_budget(view),
        Err(plain) => {
            let mut de = serde_json::Deserializer::from_str(raw);
            match serde_path_to_error::deserialize::<_, PodView>(&mut de) {
                Ok(_) => Err(ViewError::decoding(".".into(), plain)),
                Err(e) => Err(ViewError::decoding(e.path().to_string(), e.into_inner())),
            }
        }
    }
}

/// The same view of a pod already held as a JSON tree (the tests' documents,
/// and the test oracle's: feature `oracle`).
#[cfg(any(test, feature = "oracle"))]
pub fn pod_from_value(pod: &serde_json::Value) -> Result<PodView<'_>, ViewError> {
    if !pod.is_object() {
        return Err(ViewError::ours("a Pod must be a JSON object".into()));
    }
    match PodView::deserialize(pod) {
        Ok(view) => within_budget(view),
        Err(plain) => match serde_path_to_error::deserialize::<_, PodView>(pod) {
            Ok(_) => Err(ViewError {
                path: ".".into(),
                message: plain.to_string(),
                source: Some(plain.into()),
            }),
            Err(e) => Err(ViewError {
                path: e.path().to_string(),
                message: e.inner().to_string(),
                source: Some(e.into_inner().into()),
            }),
        },
    }
}

#[cfg(test)]
mod tests;
