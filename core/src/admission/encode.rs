//! The answer, written by hand into one buffer: the envelope, and the patch
//! serialised and base64-encoded in place. Hand-written because serde's
//! paths weigh heavily on a small review here (`docs/performance.md`,
//! `cargo bench --bench review`): json-patch's internally tagged
//! enum buffers every operation, and serde_json escapes string by string a
//! byte at a time, while patch text is almost all plain ASCII.

use super::{Answer, ReviewError};
use crate::json_text::write_str;
use crate::pod::Op;

/// Writes the AdmissionReview answer into one buffer. kube's `with_patch`
/// stores the patch as bytes that serialise as an array of numbers
/// (kube-rs #1781); the API documents a base64 string, which is written here
/// as the patch is serialised.
pub(super) fn encode(api_version: &str, answer: &Answer<'_>) -> Result<Vec<u8>, ReviewError> {
    // The patch first, so the answer's buffer is allocated once, at its size.
    let mut json = String::new();
    if let Some(ops) = &answer.patch {
        json.reserve(ops.iter().map(|op| op.value.len() + 64).sum());
        write_ops(&mut json, ops);
    }
    let mut out = String::with_capacity(256 + json.len().div_ceil(3) * 4);
    out.push_str("{\"apiVersion\":");
    write_str(&mut out, api_version);
    out.push_str(",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    write_str(&mut out, answer.uid);
    out.push_str(if answer.allowed {
        ",\"allowed\":true"
    } else {
        ",\"allowed\":false"
    });
    out.push_str(",\"status\":{\"code\":");
    out.push_str(itoa::Buffer::new().format(answer.code));
    if let Some(message) = &answer.message {
        out.push_str(",\"message\":");
        write_str(&mut out, message);
    }
    out.push('}');
    if !answer.warnings.is_empty() {
        out.push_str(",\"warnings\":[");
        for (i, warning) in answer.warnings.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_str(&mut out, warning);
        }
        out.push(']');
    }
    if answer.patch.is_some() {
        out.push_str(",\"patchType\":\"JSONPatch\",\"patch\":\"");
        // Encoded in one call at the end of the buffer: one call beats an
        // encoding writer fed many small writes.
        base64_simd::STANDARD.encode_append(&json, &mut out);
        out.push('"');
    }
    out.push_str("}}");
    Ok(out.into_bytes())
}

/// The patch's base64 length when it is over `max`; `None` when it fits.
/// An escaped path is at most six times as long as the path (`\u00xx`),
/// so the exact length is counted only when that bound is over `max`.
pub(super) fn oversized(ops: &[Op], max: usize) -> Option<usize> {
    if ops.is_empty() {
        return None;
    }
    let base64 = |json: usize| json.div_ceil(3) * 4;
    let frame = |op: &Op| r#"{"op":"","path":,"value":},"#.len() + op.name().len();
    let at_most = ops
        .iter()
        .map(|op| frame(op) + 6 * op.path.len() + 2 + op.value.len());
    if base64(at_most.sum::<usize>() + 2) <= max {
        return None;
    }
    let mut path = String::new();
    let exact = ops.iter().map(|op| {
        path.clear();
        write_str(&mut path, op.path.as_str());
        frame(op) + path.len() + op.value.len()
    });
    // The brackets, less the comma after the last operation.
    let json = (exact.sum::<usize>() + 1).max(2);
    let len = base64(json);
    (len > max).then_some(len)
}

/// RFC 6902 operations as JSON, written directly: each value is already
/// JSON text.
pub(super) fn write_ops(out: &mut String, ops: &[Op]) {
    out.push('[');
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"op\":\"");
        out.push_str(op.name());
        out.push_str("\",\"path\":");
        write_str(out, op.path.as_str());
        out.push_str(",\"value\":");
        out.push_str(&op.value);
        out.push('}');
    }
    out.push(']');
}
