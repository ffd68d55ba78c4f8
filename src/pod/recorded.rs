//! An operation as the working set records it: `add` or `replace`, the
//! path, and the value already written as JSON text when it was decided.
//! The answer copies the text into the patch; building a JSON tree for each
//! value, holding added containers back as placeholders and walking the trees
//! to write them out cost more than writing each value once (a fifth of the
//! 1 KB review's instructions).

use json_patch::{AddOperation, PatchOperation, ReplaceOperation};
use jsonptr::PointerBuf;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Add,
    Replace,
}

#[derive(Debug, Clone)]
pub struct Op {
    pub kind: OpKind,
    pub path: PointerBuf,
    pub value: Box<RawValue>,
}

impl PartialEq for Op {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.path == other.path && self.value.get() == other.value.get()
    }
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
        let path = self.path.clone();
        // Our own text, written by serde_json: it parses.
        let value = serde_json::from_str(self.value.get()).unwrap_or(Value::Null);
        match self.kind {
            OpKind::Add => PatchOperation::Add(AddOperation { path, value }),
            OpKind::Replace => PatchOperation::Replace(ReplaceOperation { path, value }),
        }
    }
}

/// `value` as JSON text. Our values are k8s-openapi types, strings, numbers,
/// booleans and JSON trees: they serialise infallibly (string keys, no
/// custom errors), so the fallback `null` is never written.
pub(crate) fn json(value: &(impl Serialize + ?Sized)) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
}
