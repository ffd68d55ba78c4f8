//! Bytes → `admission::prepare` then `answer`. Never panics; when the answer carries a
//! patch, the patch applies to the request's object, and reviewing the
//! patched object again yields no patch (the webhook is idempotent under
//! `reinvocationPolicy: IfNeeded`).
#![no_main]

use base64::Engine;
use kserve_injector_core::admission::{prepare, Mode, ReviewError, Reviewed};
use kserve_injector_core::Inputs;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

/// One body answered as the webhook answers it: prepared, then answered in
/// mutate mode.
fn review(body: &[u8], inputs: &Inputs) -> Result<Reviewed, ReviewError> {
    prepare(body, Mode::Mutate)?.answer(inputs)
}

fn env() -> &'static Inputs {
    static ENV: OnceLock<Inputs> = OnceLock::new();
    ENV.get_or_init(Inputs::default)
}

fn patch_of(body: &[u8]) -> Option<json_patch::Patch> {
    let response: Value = serde_json::from_slice(body).expect("review answers JSON");
    let encoded = response.pointer("/response/patch")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .expect("patch is base64");
    Some(serde_json::from_slice(&bytes).expect("patch is a JSON Patch"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(first) = review(data, env()) else {
        return;
    };
    let Some(patch) = patch_of(&first.body) else {
        return;
    };
    assert!(first.allowed, "a denial carries no patch");
    // The review skips values it does not read without converting them, so
    // it accepts numbers `Value` cannot hold (1e400): valid JSON the API
    // server never sends. The oracle needs the tree, so such inputs end here.
    let Ok(mut request) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let object = request
        .pointer_mut("/request/object")
        .expect("a patch implies an object");
    json_patch::patch(object, &patch)
        .unwrap_or_else(|e| panic!("our patch does not apply to the object it was made for: {e}"));
    let again_body = serde_json::to_vec(&request).expect("serialisable");
    let again = review(&again_body, env()).expect("the patched review is still a review");
    assert!(again.allowed, "patched pod denied: {:?}", again.denial);
    assert_eq!(
        again.patch_ops,
        0,
        "second review is not a no-op: {:?}",
        patch_of(&again.body)
    );
});
