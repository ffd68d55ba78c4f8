//! The answer, written by hand into one buffer: the envelope, and the patch
//! serialised and base64-encoded in place. Hand-written because serde's
//! paths cost a third of a small review here: json-patch's internally tagged
//! enum buffers every operation, and serde_json escapes string by string a
//! byte at a time, while patch text is almost all plain ASCII.

use super::{Answer, ReviewError};
use crate::pod::Deferred;
use serde_json::Value;
use std::io::Write;

/// Writes the AdmissionReview answer into one buffer. kube's `with_patch`
/// stores the patch as bytes that serialise as an array of numbers
/// (kube-rs #1781); the API documents a base64 string, which is written here
/// as the patch is serialised.
pub(super) fn encode(api_version: &str, answer: &Answer<'_>) -> Result<Vec<u8>, ReviewError> {
    let fail = |e: serde_json::Error| ReviewError::Json(e.to_string());
    let io = |e: std::io::Error| ReviewError::Json(e.to_string());
    let mut out = Vec::with_capacity(256);
    let string = |out: &mut Vec<u8>, text: &str| write_str(out, text).map_err(fail);
    out.extend_from_slice(b"{\"apiVersion\":");
    string(&mut out, api_version)?;
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    string(&mut out, answer.uid)?;
    write!(
        out,
        ",\"allowed\":{},\"status\":{{\"code\":{}",
        answer.allowed, answer.code
    )
    .map_err(io)?;
    if let Some(message) = &answer.message {
        out.extend_from_slice(b",\"message\":");
        string(&mut out, message)?;
    }
    out.push(b'}');
    if let Some(ops) = &answer.patch {
        out.extend_from_slice(b",\"patchType\":\"JSONPatch\",\"patch\":\"");
        // Serialised whole, then encoded in one call at the end of the
        // buffer: one call beats an encoding writer fed many small writes.
        let mut json = Vec::with_capacity(512);
        write_ops(&mut json, ops, &answer.deferred).map_err(fail)?;
        base64_simd::STANDARD.encode_append(&json, &mut out);
        out.push(b'"');
    }
    out.extend_from_slice(b"}}");
    Ok(out)
}

/// RFC 6902 operations as JSON, written directly: serde's internally tagged
/// enum (json-patch's `PatchOperation`) buffers every operation first.
pub(super) fn write_ops(
    out: &mut Vec<u8>,
    ops: &[json_patch::PatchOperation],
    deferred: &Deferred,
) -> serde_json::Result<()> {
    use json_patch::PatchOperation::{Add, Replace};
    out.push(b'[');
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let (name, path, value) = match op {
            Add(o) => ("add", &o.path, &o.value),
            Replace(o) => ("replace", &o.path, &o.value),
            other => {
                serde_json::to_writer(&mut *out, other)?;
                continue;
            }
        };
        out.extend_from_slice(b"{\"op\":\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\",\"path\":");
        write_str(out, path.as_str())?;
        out.extend_from_slice(b",\"value\":");
        write_value(out, value, deferred)?;
        out.push(b'}');
    }
    out.push(b']');
    Ok(())
}

/// A JSON value as serde_json writes it (compact, keys in map order), with
/// each held-back container written from its typed value.
pub(super) fn write_value(
    out: &mut Vec<u8>,
    value: &Value,
    deferred: &Deferred,
) -> serde_json::Result<()> {
    if let Some(container) = deferred.get(value) {
        return serde_json::to_writer(&mut *out, container);
    }
    match value {
        Value::String(text) => write_str(out, text)?,
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item, deferred)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key)?;
                out.push(b':');
                write_value(out, item, deferred)?;
            }
            out.push(b'}');
        }
        scalar => serde_json::to_writer(&mut *out, scalar)?,
    }
    Ok(())
}

/// A JSON string: copied as is when nothing in it needs escaping, else
/// serde_json's escaping.
pub(super) fn write_str(out: &mut Vec<u8>, text: &str) -> serde_json::Result<()> {
    if needs_escape(text.as_bytes()) {
        return serde_json::to_writer(&mut *out, text);
    }
    out.reserve(text.len() + 2);
    out.push(b'"');
    out.extend_from_slice(text.as_bytes());
    out.push(b'"');
    Ok(())
}

/// Whether any byte is a control character, `"` or `\\`.
fn needs_escape(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| ESCAPED[b as usize])
}

/// The bytes JSON escapes in a string.
const ESCAPED: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};
