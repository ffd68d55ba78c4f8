//! An operation as the working set records it: `add` or `replace`, the
//! path, and the value already written as JSON text when it was decided.
//! The answer copies the text into the patch; building a JSON tree for each
//! value, holding added containers back as placeholders and walking the trees
//! to write them out cost more than writing each value once, and on a small
//! review that difference is large (see `docs/performance.md`).

use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use jsonptr::PointerBuf;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Add,
    Replace,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub kind: OpKind,
    /// RFC 6901 text, built from escaped tokens (see `pod::child`).
    pub path: String,
    /// The value as JSON text, written by [`crate::json_text`].
    pub value: String,
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self.kind {
            OpKind::Add => "add",
            OpKind::Replace => "replace",
        }
    }

    /// The operation with its value as a JSON tree, for applying it.
    pub fn to_patch(&self) -> PatchOperation {
        // Valid by construction; a text that were not would stay one key,
        // so applying the operation fails rather than writing elsewhere.
        let path = PointerBuf::parse(self.path.as_str())
            .unwrap_or_else(|_| PointerBuf::from_tokens([self.path.as_str()]));
        // Our own text, written by serde_json: it parses.
        let value = serde_json::from_str(&self.value).unwrap_or(Value::Null);
        match self.kind {
            OpKind::Add => PatchOperation::Add(AddOperation { path, value }),
            OpKind::Replace => PatchOperation::Replace(ReplaceOperation { path, value }),
        }
    }
}

/// `value` as JSON text. Our values are k8s-openapi types, strings, numbers,
/// booleans and JSON trees: they serialise infallibly (string keys, no
/// custom errors), so the fallback `null` is never written.
pub(crate) fn json(value: &(impl Serialize + ?Sized)) -> String {
    crate::json_text::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// `[item]`, from the item's JSON text.
pub(crate) fn array_of(item: &str) -> String {
    let mut out = String::with_capacity(item.len() + 2);
    out.push('[');
    out.push_str(item);
    out.push(']');
    out
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
