//! The bounded, borrowed serde primitives of the view: a string borrowed
//! from the body where JSON escaping allows ([`Str`]), and lists and maps
//! capped at [`MAX_ENTRIES`] entries ([`Capped`], [`StrMap`]).

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

pub(super) fn too_many<E: de::Error>() -> E {
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
    pub(super) fn visit<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error>
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
