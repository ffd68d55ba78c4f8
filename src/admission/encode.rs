//! The answer, written by hand into one buffer: the envelope, and the patch
//! serialised and base64-encoded in place. Hand-written because serde's
//! paths cost a third of a small review here: json-patch's internally tagged
//! enum buffers every operation, and serde_json escapes string by string a
//! byte at a time, while patch text is almost all plain ASCII.

use super::{Answer, ReviewError};
use crate::json_text::write_str;
use crate::pod::Op;
use std::io::Write;

/// Writes the AdmissionReview answer into one buffer. kube's `with_patch`
/// stores the patch as bytes that serialise as an array of numbers
/// (kube-rs #1781); the API documents a base64 string, which is written here
/// as the patch is serialised.
pub(super) fn encode(api_version: &str, answer: &Answer<'_>) -> Result<Vec<u8>, ReviewError> {
    let io = |e: std::io::Error| ReviewError::Json(e.to_string());
    // The patch first, so the answer's buffer is allocated once, at its size.
    let mut json = Vec::new();
    if let Some(ops) = &answer.patch {
        json.reserve(ops.iter().map(|op| op.value.len() + 64).sum());
        write_ops(&mut json, ops);
    }
    let mut out = Vec::with_capacity(256 + json.len().div_ceil(3) * 4);
    out.extend_from_slice(b"{\"apiVersion\":");
    write_str(&mut out, api_version);
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    write_str(&mut out, answer.uid);
    write!(
        out,
        ",\"allowed\":{},\"status\":{{\"code\":{}",
        answer.allowed, answer.code
    )
    .map_err(io)?;
    if let Some(message) = &answer.message {
        out.extend_from_slice(b",\"message\":");
        write_str(&mut out, message);
    }
    out.push(b'}');
    if answer.patch.is_some() {
        out.extend_from_slice(b",\"patchType\":\"JSONPatch\",\"patch\":\"");
        // Encoded in one call at the end of the buffer: one call beats an
        // encoding writer fed many small writes.
        base64_simd::STANDARD.encode_append(&json, &mut out);
        out.push(b'"');
    }
    out.extend_from_slice(b"}}");
    Ok(out)
}

/// RFC 6902 operations as JSON, written directly: each value is already
/// JSON text.
pub(super) fn write_ops(out: &mut Vec<u8>, ops: &[Op]) {
    out.push(b'[');
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"op\":\"");
        out.extend_from_slice(op.name().as_bytes());
        out.extend_from_slice(b"\",\"path\":");
        write_str(out, op.path.as_str());
        out.extend_from_slice(b",\"value\":");
        out.extend_from_slice(op.value.as_bytes());
        out.push(b'}');
    }
    out.push(b']');
}
