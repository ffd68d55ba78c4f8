//! The one-pass fast path: the API server writes a request's `kind` and
//! `operation` before its `object`, so by the time the decoder reaches the
//! object it knows whether it is a CREATE of a Pod, and decodes the pod's
//! view in place instead of keeping it as raw text for a second pass.
//!
//! When `object` comes before `operation` (keys in sorted order, as
//! an encoder of maps writes them), a Pod's object is decoded as for a
//! CREATE; should the operation turn out to be another, the body goes to
//! the plain path.
//!
//! Anything this path does not accept (a field out of that order is fine,
//! but a duplicate field, a type error, a pod it cannot read) sends the body
//! to the plain path, which gives the exact error; so this path only has to
//! be at least as strict as the plain one. It reads the body with
//! [`Skim`](super::skim), which skips what the view does not read at
//! scanning speed.

use super::skim::Skim;
use super::{GroupVersionKind, GroupVersionResource, RequestView, ReviewView};
use crate::view::{PodView, Str};
use kube_core::admission::Operation;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InlineReview<'a> {
    #[serde(borrow)]
    api_version: Str<'a>,
    #[serde(borrow)]
    kind: Str<'a>,
    #[serde(borrow, default)]
    request: Option<InlineRequest<'a>>,
}

struct InlineRequest<'a>(RequestView<'a>);

/// The envelope with, for a CREATE of a Pod, the pod's view already decoded;
/// `None` when the body needs the plain path.
pub(super) fn parse(body: &str) -> Option<ReviewView<'_>> {
    let mut skim = Skim::new(body);
    let review = InlineReview::deserialize(&mut skim).ok()?;
    skim.end().ok()?;
    Some(ReviewView {
        api_version: review.api_version,
        kind: review.kind,
        request: review.request.map(|r| r.0),
    })
}

/// A pod decoded only from a JSON object: serde's derived structs also
/// accept an array of field values, which is not a Pod.
struct ObjectPod<'a>(PodView<'a>);

impl<'de: 'a, 'a> Deserialize<'de> for ObjectPod<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ObjectPod<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Pod object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                PodView::deserialize(de::value::MapAccessDeserializer::new(map)).map(ObjectPod)
            }
        }
        d.deserialize_map(V)
    }
}

fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    slot: &mut Option<T>,
    map: &mut A,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

impl<'de: 'a, 'a> Deserialize<'de> for InlineRequest<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(RequestVisitor)
    }
}

struct RequestVisitor;

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = InlineRequest<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an admission request")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut uid: Option<Str> = None;
        let mut kind: Option<GroupVersionKind> = None;
        let mut resource: Option<GroupVersionResource> = None;
        let mut name: Option<Option<Str>> = None;
        let mut namespace: Option<Option<Str>> = None;
        let mut operation: Option<Operation> = None;
        let mut user_info: Option<IgnoredAny> = None;
        let mut object: Option<Option<&'de RawValue>> = None;
        let mut pod: Option<Option<ObjectPod<'de>>> = None;
        let mut dry_run: Option<Option<bool>> = None;
        while let Some(key) = map.next_key::<Str>()? {
            match key.as_str() {
                "uid" => once(&mut uid, &mut map, "uid")?,
                "kind" => once(&mut kind, &mut map, "kind")?,
                "resource" => once(&mut resource, &mut map, "resource")?,
                "name" => once(&mut name, &mut map, "name")?,
                "namespace" => once(&mut namespace, &mut map, "namespace")?,
                "operation" => once(&mut operation, &mut map, "operation")?,
                "userInfo" => once(&mut user_info, &mut map, "userInfo")?,
                "dryRun" => once(&mut dry_run, &mut map, "dryRun")?,
                "object" => {
                    if object.is_some() || pod.is_some() {
                        return Err(de::Error::duplicate_field("object"));
                    }
                    let is_pod = kind
                        .as_ref()
                        .is_some_and(|k| k.group.as_str().is_empty() && k.kind.as_str() == "Pod");
                    // An operation not read yet is taken to be a CREATE: a
                    // pod decoded for another operation is checked below.
                    if is_pod && matches!(operation, Some(Operation::Create) | None) {
                        pod = Some(map.next_value()?);
                    } else {
                        object = Some(map.next_value()?);
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let missing = <A::Error as de::Error>::missing_field;
        // Only a CREATE decodes the pod's view; any other operation keeps
        // its object as text, which the plain path does.
        if matches!(pod, Some(Some(_))) && !matches!(operation, Some(Operation::Create)) {
            return Err(de::Error::custom(
                "a pod decoded for an operation other than CREATE",
            ));
        }
        Ok(InlineRequest(RequestView {
            uid: uid.ok_or_else(|| missing("uid"))?,
            kind: kind.ok_or_else(|| missing("kind"))?,
            resource: resource.ok_or_else(|| missing("resource"))?,
            name: name.flatten(),
            namespace: namespace.flatten(),
            operation: operation.ok_or_else(|| missing("operation"))?,
            user_info: user_info.ok_or_else(|| missing("userInfo"))?,
            object: object.flatten(),
            pod: pod.flatten().map(|p| p.0),
            dry_run: dry_run.flatten(),
        }))
    }
}
