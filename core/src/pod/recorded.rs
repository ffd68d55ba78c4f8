//! An operation as the working set records it: `add` or `replace`, the
//! path, and the value already written as JSON text when it was decided.
//! The answer copies the text into the patch; building a JSON tree for each
//! value, holding added containers back as placeholders and walking the trees
//! to write them out cost more than writing each value once, and on a small
//! review that difference is large (see `docs/performance.md`).

use crate::shared_error::SharedError;
use serde::ser::{Serialize, SerializeStruct, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OpKind {
    Add,
    Replace,
}

/// The one patch operation type: what the webhook encodes, what the CLI
/// prints and applies. It serialises as RFC 6902 (`{"op","path","value"}`).
#[derive(Debug, Clone)]
#[cfg_attr(any(test, feature = "oracle"), derive(PartialEq))]
pub struct Op {
    pub kind: OpKind,
    /// RFC 6901 text, built from escaped tokens (see `pod::child`).
    pub path: String,
    /// The value as JSON text, byte for byte as serde_json writes it.
    pub value: String,
}

/// An operation that does not apply to the document it was given.
#[derive(Debug, thiserror::Error)]
#[error("{op} at {path:?}: {reason}")]
pub struct ApplyError {
    pub(crate) op: &'static str,
    pub(crate) path: String,
    #[source]
    pub(crate) reason: NotApplied,
}

/// Why an operation does not apply (RFC 6902's conditions).
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub(crate) enum NotApplied {
    #[error("the value is not JSON: {0}")]
    Value(#[source] SharedError<serde_json::Error>),
    #[error(transparent)]
    Path(SharedError<jsonptr::ParseError>),
    #[error("the parent does not exist")]
    NoParent(#[source] SharedError<jsonptr::resolve::ResolveError>),
    #[error("no member to replace")]
    NoMember,
    #[error("{text:?} is not a list index")]
    NotAnIndex {
        text: String,
        #[source]
        source: std::num::ParseIntError,
    },
    #[error("index {0} is past the list's end")]
    PastTheEnd(usize),
    #[error("the parent is not an object or a list")]
    NotAContainer,
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self.kind {
            OpKind::Add => "add",
            OpKind::Replace => "replace",
        }
    }

    /// The same operation on the document that holds this one's at `prefix`
    /// (pointer text, e.g. `/spec/template` or `/items/3`).
    pub fn under(mut self, prefix: &str) -> Op {
        self.path.insert_str(0, prefix);
        self
    }

    /// Applies the operation to `doc` as RFC 6902 says.
    pub(crate) fn apply(&self, doc: &mut Value) -> Result<(), ApplyError> {
        let value = serde_json::from_str(&self.value).map_err(|e| ApplyError {
            op: self.name(),
            path: self.path.clone(),
            reason: NotApplied::Value(e.into()),
        })?;
        apply_at(doc, self.kind, &self.path, value).map_err(|reason| ApplyError {
            op: self.name(),
            path: self.path.clone(),
            reason,
        })
    }
}

/// Applies `ops` in order to `doc`; stops at the first that does not apply.
pub fn apply_all(ops: &[Op], doc: &mut Value) -> Result<(), ApplyError> {
    ops.iter().try_for_each(|op| op.apply(doc))
}

/// RFC 6902 `add` or `replace` of `value` at `path` in `doc`.
pub(crate) fn apply_at(
    doc: &mut Value,
    kind: OpKind,
    path: &str,
    value: Value,
) -> Result<(), NotApplied> {
    let pointer = jsonptr::Pointer::parse(path).map_err(|e| NotApplied::Path(e.into()))?;
    let Some((parent, last)) = pointer.split_back() else {
        *doc = value;
        return Ok(());
    };
    let target = parent
        .resolve_mut(doc)
        .map_err(|e| NotApplied::NoParent(e.into()))?;
    match target {
        Value::Object(map) => {
            let key = last.decoded();
            if kind == OpKind::Replace && !map.contains_key(key.as_ref()) {
                return Err(NotApplied::NoMember);
            }
            map.insert(key.into_owned(), value);
        }
        Value::Array(items) => {
            let index = match last.encoded() {
                "-" => items.len(),
                text => text
                    .parse::<usize>()
                    .map_err(|source| NotApplied::NotAnIndex {
                        text: text.to_string(),
                        source,
                    })?,
            };
            match kind {
                OpKind::Add if index <= items.len() => items.insert(index, value),
                OpKind::Replace if index < items.len() => items[index] = value,
                _ => return Err(NotApplied::PastTheEnd(index)),
            }
        }
        _ => return Err(NotApplied::NotAContainer),
    }
    Ok(())
}

impl Serialize for Op {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value: &RawValue =
            serde_json::from_str(&self.value).map_err(serde::ser::Error::custom)?;
        let mut op = serializer.serialize_struct("Op", 3)?;
        op.serialize_field("op", self.name())?;
        op.serialize_field("path", &self.path)?;
        op.serialize_field("value", value)?;
        op.end()
    }
}

/// `value` as JSON text. Our values are k8s-openapi types, strings, numbers,
/// booleans and JSON trees: they serialise infallibly (string keys, no
/// custom errors), so the fallback `null` is never written.
pub(crate) fn json(value: &(impl Serialize + ?Sized)) -> String {
    crate::json_text::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// `text` as a JSON string, written straight into a buffer of its size:
/// most values we record are strings.
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    crate::json_text::write_str(&mut out, text);
    out
}

/// A number as JSON text.
pub(crate) fn number(n: i64) -> String {
    itoa::Buffer::new().format(n).to_string()
}

/// The text one of [`crate::json_text::k8s`]'s writers gave, with
/// [`json`]'s fallback.
pub(crate) fn written(text: Result<String, serde_json::Error>) -> String {
    text.unwrap_or_else(|_| "null".to_string())
}

/// `[item]`, from the item's JSON text, in its own buffer: the writers
/// leave room, so a list created with its first entry allocates nothing
/// new (the text moves up one byte in place).
pub(crate) fn array_of(mut item: String) -> String {
    item.insert(0, '[');
    item.push(']');
    item
}

/// `{key: value}`, from the value's JSON text.
pub(crate) fn object(key: &str, value: &str) -> String {
    let mut out = String::with_capacity(key.len() + value.len() + 5);
    out.push('{');
    crate::json_text::write_str(&mut out, key);
    out.push(':');
    out.push_str(value);
    out.push('}');
    out
}
