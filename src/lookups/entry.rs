//! What a watch cache holds per object: the object, shared with the
//! snapshots that read it, or the marker of one that cannot be used; each
//! found by the namespace and name it holds itself (`Named`), so that a
//! set of entries needs no second copy of them as keys.

use super::reduce::{InvalidObject, Parsed};
use kserve_injector_core::cluster::ObjectRef;
use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// What a cached object is found by: its namespace (empty for a
/// cluster-scoped one) and its name.
pub(super) trait Named {
    fn namespace(&self) -> &str;
    fn name(&self) -> &str;
}

impl Hash for dyn Named + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.namespace().hash(state);
        self.name().hash(state);
    }
}

impl PartialEq for dyn Named + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name() && self.namespace() == other.namespace()
    }
}

impl Eq for dyn Named + '_ {}

impl Named for ObjectRef {
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn name(&self) -> &str {
        &self.name
    }
}

/// An object that cannot be used: where it is, and why (reported by the
/// lookup that needs it, as KServe's typed decode would fail that lookup).
#[derive(Debug)]
pub(super) struct Unusable {
    at: ObjectRef,
    error: InvalidObject,
}

/// One cached object, shared with the snapshots that read it, or the
/// marker of one that cannot be used.
#[derive(Debug)]
pub(super) enum Entry<T> {
    Usable(Arc<T>),
    Unusable(Arc<Unusable>),
}

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Usable(t) => Self::Usable(t.clone()),
            Self::Unusable(u) => Self::Unusable(u.clone()),
        }
    }
}

impl<T> Entry<T> {
    /// The entry of the object `at` names.
    pub(super) fn new(at: &dyn Named, parsed: Parsed<Arc<T>>) -> Self {
        match parsed {
            Ok(t) => Self::Usable(t),
            Err(error) => Self::Unusable(Arc::new(Unusable {
                at: ObjectRef::new(at.namespace(), at.name()),
                error,
            })),
        }
    }

    /// The object, or why it cannot be used.
    pub(super) fn parsed(&self) -> Parsed<Arc<T>> {
        match self {
            Self::Usable(t) => Ok(t.clone()),
            Self::Unusable(u) => Err(u.error.clone()),
        }
    }
}

impl<T: Named> Named for Entry<T> {
    fn namespace(&self) -> &str {
        match self {
            Self::Usable(t) => t.namespace(),
            Self::Unusable(u) => &u.at.namespace,
        }
    }
    fn name(&self) -> &str {
        match self {
            Self::Usable(t) => t.name(),
            Self::Unusable(u) => &u.at.name,
        }
    }
}

/// An entry in a set, the same as another of the same namespace and name.
#[derive(Debug)]
pub(super) struct Slot<T>(pub(super) Entry<T>);

impl<T: Named> Hash for Slot<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (&self.0 as &dyn Named).hash(state)
    }
}

impl<T: Named> PartialEq for Slot<T> {
    fn eq(&self, other: &Self) -> bool {
        (&self.0 as &dyn Named) == (&other.0 as &dyn Named)
    }
}

impl<T: Named> Eq for Slot<T> {}

impl<'a, T: Named + 'a> Borrow<dyn Named + 'a> for Slot<T> {
    fn borrow(&self) -> &(dyn Named + 'a) {
        &self.0
    }
}

/// The objects a listing named, to drop the others once it is applied.
pub(super) type Listed<T> = HashSet<Slot<T>>;
