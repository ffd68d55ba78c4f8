//! Shadow mode never denies and never patches, on bodies made the way the
//! review fuzzer makes them (`fuzz/fuzz_targets/review.rs`, seeded by
//! `.ci/fuzz.sh`): its seeds (the benchmark reviews and every fixture's
//! pod as a review), mutated with its dictionary (`fuzz/dicts/review.dict`)
//! and byte edits, plus the hostile shapes a red-team run found denied:
//! lists and maps past the caps, a pod without `kserve-container`, a number
//! past f64, a lone surrogate, a duplicate key, a CREATE without its pod.
//!
//! Properties, for every body:
//! - shadow mode answers exactly the bodies the normal mode answers (its
//!   only HTTP errors are bodies that are not an AdmissionReview);
//! - every shadow answer is `allowed: true` with status 200, no patch and
//!   no denial;
//! - a body whose envelope was left intact (only the pod edited) is always
//!   answered.

use kserve_injector_core::admission::{prepare, Mode};
use kserve_injector_core::Inputs;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

const SEED: &[u8; 16] = b"kserve-shadow-01";
const CASES: u32 = 2_000;

static WITHHELD_DENIALS: AtomicUsize = AtomicUsize::new(0);
static NOT_A_REVIEW: AtomicUsize = AtomicUsize::new(0);
static WITHHELD_PATCHES: AtomicUsize = AtomicUsize::new(0);

fn repo(relative: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// A review of `pod` as the API server sends it.
fn review_of(pod: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "shadow-uid",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
        }
    })
}

/// The fuzzer's seeds, as reviews: the benchmark inputs and every fixture
/// whose input is one pod.
fn seeds() -> Vec<Value> {
    let mut seeds = Vec::new();
    let mut paths: Vec<_> = (std::fs::read_dir(repo("benches/inputs")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    for path in paths {
        seeds.push(serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap());
    }
    let mut cases: Vec<_> = (std::fs::read_dir(repo("fixtures")).unwrap())
        .map(|e| e.unwrap().path().join("input.yaml"))
        .filter(|p| p.is_file())
        .collect();
    cases.sort();
    for input in cases {
        let text = std::fs::read_to_string(&input).unwrap();
        let docs = kserve_injector_core::reader::documents(&mut text.as_bytes())
            .and_then(|docs| docs.collect::<Result<Vec<Value>, _>>());
        if let Ok([pod]) = docs.as_deref() {
            if pod["kind"] == "Pod" {
                seeds.push(review_of(pod));
            }
        }
    }
    assert!(seeds.len() > 20, "{} seeds", seeds.len());
    seeds
}

/// The fuzzer's dictionary, and the hostile shapes' tokens.
fn tokens() -> Vec<String> {
    let dict = std::fs::read_to_string(repo("fuzz/dicts/review.dict")).unwrap();
    let mut tokens: Vec<String> = (dict.lines())
        .filter_map(|line| line.trim().strip_prefix('"')?.strip_suffix('"'))
        .map(|token| token.replace("\\\"", "\"").replace("\\\\", "\\"))
        .collect();
    assert!(tokens.len() > 40, "{} tokens", tokens.len());
    tokens.extend(
        [
            "1e999999",
            "-0",
            "\"\\ud800\"",
            "\"\\udc00\\ud800\"",
            "\"containers\":[],",
            "\"annotations\":null,",
            "{}",
            "[]",
            "null",
            ",",
            ":",
        ]
        .map(String::from),
    );
    tokens
}

/// An edit that keeps the envelope a valid AdmissionReview.
#[derive(Debug, Clone)]
enum PodEdit {
    /// `n` env entries in the first container (the cap is 4096).
    Env(usize),
    /// `n` annotations (the cap is 4096).
    Annotations(usize),
    /// The first container renamed: an oci:// pod then has no kserve-container.
    RenameFirstContainer,
    /// The pod left out of a CREATE.
    NoObject,
    /// The pod replaced by a scalar.
    ScalarObject,
    /// One of the text splices below into the first container.
    Splice(usize),
}

/// Written as text: `serde_json::Value` holds none of them.
const SPLICES: [&str; 4] = [
    "\"ports\":[{\"containerPort\":1e999999}],",
    "\"env\":[{\"name\":\"A\",\"value\":\"\\ud800\"}],",
    "\"name\":\"kserve-container\",",
    "\"resources\":{\"limits\":{\"cpu\":1e999999}},",
];

/// A byte-level edit, as libFuzzer's mutators make them.
#[derive(Debug, Clone)]
enum ByteEdit {
    Insert(Index, Index),
    Delete(Index, usize),
    Replace(Index, u8),
    Copy(Index, Index, usize),
}

fn pod_edit() -> impl Strategy<Value = PodEdit> {
    prop_oneof![
        (4090usize..4200).prop_map(PodEdit::Env),
        (4090usize..4200).prop_map(PodEdit::Annotations),
        Just(PodEdit::RenameFirstContainer),
        Just(PodEdit::NoObject),
        Just(PodEdit::ScalarObject),
        (0..SPLICES.len()).prop_map(PodEdit::Splice),
    ]
}

fn byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (any::<Index>(), any::<Index>()).prop_map(|(at, t)| ByteEdit::Insert(at, t)),
        (any::<Index>(), 1usize..64).prop_map(|(at, n)| ByteEdit::Delete(at, n)),
        (any::<Index>(), any::<u8>()).prop_map(|(at, b)| ByteEdit::Replace(at, b)),
        (any::<Index>(), any::<Index>(), 1usize..256)
            .prop_map(|(from, to, n)| ByteEdit::Copy(from, to, n)),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    seed: Index,
    pod_edits: Vec<PodEdit>,
    byte_edits: Vec<ByteEdit>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<Index>(),
        prop::collection::vec(pod_edit(), 0..3),
        prop::collection::vec(byte_edit(), 0..4),
    )
        .prop_map(|(seed, pod_edits, byte_edits)| Case {
            seed,
            pod_edits,
            byte_edits,
        })
}

fn body(case: &Case, seeds: &[Value], tokens: &[String]) -> Vec<u8> {
    let mut review = case.seed.get(seeds).clone();
    let mut splices = Vec::new();
    for edit in &case.pod_edits {
        let pod = &mut review["request"]["object"];
        match edit {
            PodEdit::Env(n) => {
                let env: Vec<Value> = (0..*n)
                    .map(|i| json!({"name": format!("E{i}"), "value": "v"}))
                    .collect();
                if let Some(first) = pod.pointer_mut("/spec/containers/0") {
                    first["env"] = env.into();
                }
            }
            PodEdit::Annotations(n) => {
                if pod["metadata"].is_object() {
                    let mut all = pod["metadata"]["annotations"].clone();
                    for i in 0..*n {
                        all[format!("a{i}")] = "v".into();
                    }
                    pod["metadata"]["annotations"] = all;
                }
            }
            PodEdit::RenameFirstContainer => {
                if let Some(first) = pod.pointer_mut("/spec/containers/0") {
                    first["name"] = "renamed".into();
                }
            }
            PodEdit::NoObject => *pod = Value::Null,
            PodEdit::ScalarObject => *pod = 7.into(),
            PodEdit::Splice(i) => splices.push(SPLICES[*i]),
        }
    }
    let mut text = serde_json::to_string(&review).unwrap();
    for splice in splices {
        if let Some(at) = text.find("\"containers\":[{") {
            text.insert_str(at + "\"containers\":[{".len(), splice);
        }
    }
    let mut bytes = text.into_bytes();
    for edit in &case.byte_edits {
        let at = |index: &Index| index.index(bytes.len() + 1);
        match edit {
            ByteEdit::Insert(i, token) => {
                let i = at(i);
                bytes.splice(i..i, token.get(tokens).bytes());
            }
            ByteEdit::Delete(i, n) => {
                let i = at(i);
                let end = (i + n).min(bytes.len());
                bytes.drain(i..end);
            }
            ByteEdit::Replace(i, b) => {
                if !bytes.is_empty() {
                    let i = i.index(bytes.len());
                    bytes[i] = *b;
                }
            }
            ByteEdit::Copy(from, to, n) => {
                let from = at(from);
                let piece = bytes[from..(from + n).min(bytes.len())].to_vec();
                let to = at(to);
                bytes.splice(to..to, piece);
            }
        }
    }
    bytes
}

fn check(case: &Case, seeds: &[Value], tokens: &[String]) -> Result<(), String> {
    let inputs = Inputs::default();
    let body = body(case, seeds, tokens);
    let shadow = prepare(&body, Mode::Shadow { warnings: true }).and_then(|p| p.answer(&inputs));
    let normal = prepare(&body, Mode::Mutate).and_then(|p| p.answer(&inputs));
    let shown = || String::from_utf8_lossy(&body[..body.len().min(600)]).into_owned();
    if shadow.is_ok() != normal.is_ok() {
        return Err(format!(
            "shadow {:?} but normal {:?} for {}",
            shadow.as_ref().err(),
            normal.as_ref().err(),
            shown()
        ));
    }
    let reviewed = match shadow {
        Ok(reviewed) => reviewed,
        Err(e) if case.byte_edits.is_empty() => {
            return Err(format!(
                "an intact envelope was not answered: {e}: {}",
                shown()
            ));
        }
        Err(_) => {
            NOT_A_REVIEW.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
    };
    let response: Value = serde_json::from_slice(&reviewed.body).map_err(|e| e.to_string())?;
    let answer = &response["response"];
    let allowed = answer["allowed"] == true && answer["status"]["code"] == 200;
    if !allowed || answer.get("patch").is_some() || answer.get("patchType").is_some() {
        return Err(format!("shadow answered {response} to {}", shown()));
    }
    if !reviewed.allowed || reviewed.patch_ops != 0 || reviewed.denial.is_some() {
        return Err(format!("shadow reported {reviewed:?}"));
    }
    if reviewed.withheld_denial.is_some() {
        WITHHELD_DENIALS.fetch_add(1, Ordering::Relaxed);
    }
    if !reviewed.withheld.is_empty() {
        WITHHELD_PATCHES.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

#[test]
fn shadow_mode_allows_every_review_the_fuzzer_makes_without_a_patch() {
    let (seeds, tokens) = (seeds(), tokens());
    let config = RunnerConfig {
        cases: CASES,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::XorShift,
        max_shrink_iters: 1_024,
        ..RunnerConfig::default()
    };
    let rng = TestRng::from_seed(RngAlgorithm::XorShift, SEED);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&case(), |case| {
        check(&case, &seeds, &tokens).map_err(TestCaseError::fail)
    });
    let (denials, patches, errors) = (
        WITHHELD_DENIALS.load(Ordering::Relaxed),
        WITHHELD_PATCHES.load(Ordering::Relaxed),
        NOT_A_REVIEW.load(Ordering::Relaxed),
    );
    println!(
        "proptest shadow: seed {SEED:?} (XorShift), {CASES} bodies from {} seeds: {denials} denials withheld, {patches} patches withheld, {errors} not a review",
        seeds.len()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The generator reaches every kind of answer, or the property says little.
    assert!(denials > CASES as usize / 10, "{denials} denials withheld");
    assert!(patches > CASES as usize / 20, "{patches} patches withheld");
    assert!(errors > 0, "no body that is not a review");
}
