//! The containers of the view: what the injectors read of a container, and
//! the hand-written visitor that decodes each one knowing its name and its
//! place in its list, so that the lists nobody reads (a sidecar's env and
//! args) are skipped unread.

use super::bounded::{too_many, Capped, Str, StrMap, MAX_ENTRIES};
use crate::constants::{
    AGENT_CONTAINER, KSERVE_CONTAINER, MODELCAR_CONTAINER, QUEUE_PROXY_CONTAINER,
    STORAGE_INITIALIZER_CONTAINER, TRANSFORMER_CONTAINER, WORKER_CONTAINER,
};
use k8s_openapi::api::core::v1::{EnvVarSource, Probe, SecurityContext};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

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
pub(super) fn regular_containers<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Capped<ContainerView<'a>>>, D::Error> {
    d.deserialize_option(Containers(regular_lists))
}

/// Init containers: see [`LIST_READ_INIT_CONTAINERS`].
pub(super) fn init_containers<'de: 'a, 'a, D: Deserializer<'de>>(
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
    pub(super) fn entries(&self) -> usize {
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
