//! Bytes → `admission::prepare` and `answer` in shadow mode. Every body the normal
//! mode answers, shadow mode answers too (its only errors are bodies that
//! are not an AdmissionReview), and each of its answers is `allowed: true`
//! with status 200 and no patch, whatever the pod holds: an injector's
//! refusal, a pod that cannot be decoded and a pod past the caps included.
#![no_main]

use kserve_injector_core::admission::{prepare, Mode};
use kserve_injector_core::Inputs;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

fn env() -> &'static Inputs {
    static ENV: OnceLock<Inputs> = OnceLock::new();
    ENV.get_or_init(Inputs::default)
}

fuzz_target!(|data: &[u8]| {
    let shadow = prepare(data, Mode::Shadow { warnings: true }).and_then(|p| p.answer(env()));
    let normal = prepare(data, Mode::Mutate).and_then(|p| p.answer(env()));
    assert_eq!(
        shadow.is_ok(),
        normal.is_ok(),
        "shadow mode and the normal mode disagree on whether this is a review: {:?} / {:?}",
        shadow.as_ref().err(),
        normal.as_ref().err()
    );
    let Ok(reviewed) = shadow else {
        return;
    };
    let response: Value = serde_json::from_slice(&reviewed.body).expect("review answers JSON");
    let answer = &response["response"];
    assert_eq!(answer["allowed"], true, "shadow mode denied: {response}");
    assert_eq!(answer["status"]["code"], 200, "{response}");
    assert!(answer.get("patch").is_none(), "shadow mode patched: {response}");
    assert!(reviewed.allowed && reviewed.patch_ops == 0 && reviewed.denial.is_none());
});
