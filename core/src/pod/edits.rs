//! The edits every write of the working set makes: a list entry appended
//! or a map key set in the view, and the operation recorded for the patch
//! (an `add` that creates the list or map when the pod has none).

use super::child;
use super::recorded::{array_of, object, quoted, Op, OpKind};
use crate::view::{Capped, Str, StrMap};
use std::borrow::Cow;

pub(super) type Ops = Vec<Op>;

pub(super) fn owned(s: &str) -> Str<'static> {
    Str(Cow::Owned(s.to_string()))
}

pub(super) fn add(ops: &mut Ops, path: String, value: String) {
    let kind = OpKind::Add;
    ops.push(Op { kind, path, value });
}

pub(super) fn replace(ops: &mut Ops, path: String, value: String) {
    let kind = OpKind::Replace;
    ops.push(Op { kind, path, value });
}

/// Appends `item` to the list at `path` (`value` is its JSON), creating the
/// list with one `add` when absent; `ops` is `None` when the list's parent
/// was just added whole, with this entry in it.
pub(super) fn push_entry<T>(
    list: &mut Option<Capped<T>>,
    item: T,
    mut path: String,
    value: String,
    ops: Option<&mut Ops>,
) {
    match list {
        Some(items) => {
            items.0.push(item);
            if let Some(ops) = ops {
                // In the list's own path text: the paths leave room for an index.
                path.push('/');
                path.push_str(itoa::Buffer::new().format(items.0.len() - 1));
                add(ops, path, value);
            }
        }
        None => {
            *list = Some(Capped(vec![item]));
            if let Some(ops) = ops {
                add(ops, path, array_of(value));
            }
        }
    }
}

/// Sets `key` in the string map at `path`, creating the map when absent;
/// `ops` as in [`push_entry`]. Duplicate keys read as their last entry.
pub(super) fn set_entry<'a>(
    map: &mut Option<StrMap<'a>>,
    path: &'static str,
    key: &str,
    value: &str,
    ops: Option<&mut Ops>,
) {
    let Some(entries) = map else {
        *map = Some(StrMap(vec![(owned(key), owned(value))]));
        if let Some(ops) = ops {
            add(ops, path.to_string(), object(key, &quoted(value)));
        }
        return;
    };
    let at = || child(path, [key.into()]);
    match entries.0.iter_mut().rev().find(|(k, _)| k.as_str() == key) {
        Some((_, v)) if v.as_str() == value => {}
        Some((_, v)) => {
            *v = owned(value);
            if let Some(ops) = ops {
                replace(ops, at(), quoted(value));
            }
        }
        None => {
            entries.0.push((owned(key), owned(value)));
            if let Some(ops) = ops {
                add(ops, at(), quoted(value));
            }
        }
    }
}

/// Whether `list` holds an entry named `name`.
pub(super) fn named<T>(
    list: &Option<Capped<T>>,
    name: &str,
    name_of: fn(&T) -> Option<&Str>,
) -> bool {
    (list.iter().flat_map(|l| l.0.iter())).any(|e| name_of(e).map(Str::as_str) == Some(name))
}
