//! The webhook's hot path: a serialized AdmissionReview in, the serialized
//! response out (`admission::review`), on the pods in `benches/inputs/`:
//!
//! * `minimal-oci`: fixtures/m3-modelcar-oci (one container, oci:// source);
//! * `typical`: Knative + Istio pod (kserve-container, queue-proxy,
//!   istio-proxy, istio-init, managedFields) with the request logger and a
//!   gs:// model, so the agent, the storage initializer, the Istio-CNI check
//!   and metrics aggregation all act;
//! * `containers-10`/`-25`/`-50`: the same kind of pod widened with
//!   application sidecars and a matching managedFields block (gs:// model,
//!   metrics aggregation), to show how the time grows with the pod.
//!
//! `review` also runs the typical pod without its managedFields block, built
//! here from `typical.json`.
//!
//! Groups: `review` (the whole path), `mutate` (the core alone, on the pod
//! already extracted from the envelope), and `steps` (the stages of the
//! typical pod's review, each measured alone, to see where time goes).
//!
//! `cargo bench --bench review -- --warm-up-time 1 --measurement-time 3`
//!
//! The bench uses the binary's allocator (mimalloc), so it measures what ships.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use base64::Engine;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use k8s_openapi::api::core::v1::PodSpec;
use kserve_injector::admission::review;
use kserve_injector::injectors::run_all;
use kserve_injector::pod::PodDoc;
use kserve_injector::{mutate, Env};
use kube::core::admission::AdmissionReview;
use kube::core::DynamicObject;
use serde_json::Value;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::Path;

const PODS: [&str; 5] = [
    "minimal-oci",
    "typical",
    "containers-10",
    "containers-25",
    "containers-50",
];

struct Input {
    name: &'static str,
    body: Vec<u8>,
    pod: Value,
    namespace: String,
}

fn load(name: &'static str) -> Input {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches/inputs")
        .join(format!("{name}.json"));
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value =
        serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let request = &doc["request"];
    Input {
        name,
        pod: request["object"].clone(),
        namespace: request["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string(),
        body,
    }
}

/// Fails the bench up front if an input does not get a patch: a bench of a
/// denial or of a no-op would measure the wrong path.
fn check(input: &Input, env: &Env) {
    let reviewed =
        review(&input.body, env).unwrap_or_else(|e| panic!("{}: review failed: {e}", input.name));
    assert!(
        reviewed.allowed && reviewed.patch_ops > 0,
        "{}: expected an allowed review with a patch, got {:?}",
        input.name,
        reviewed.denial
    );
}

/// The typical pod without `metadata.managedFields` (about 40% of its
/// bytes), to show what that block costs on the whole path.
fn without_managed_fields(typical: &Input) -> Input {
    let mut doc: Value = serde_json::from_slice(&typical.body).expect("JSON");
    if let Some(meta) = doc["request"]["object"]["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    let mut pod = typical.pod.clone();
    if let Some(meta) = pod["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    Input {
        name: "typical-without-managedFields",
        body: serde_json::to_vec(&doc).expect("serialisable"),
        pod,
        namespace: typical.namespace.clone(),
    }
}

fn bench_review(c: &mut Criterion) {
    let env = Env::default();
    let mut group = c.benchmark_group("review");
    let mut inputs: Vec<Input> = PODS.map(load).into_iter().collect();
    inputs.insert(2, without_managed_fields(&inputs[1]));
    for input in inputs {
        check(&input, &env);
        group.throughput(Throughput::Bytes(input.body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(input.name), &input, |b, i| {
            b.iter(|| review(black_box(&i.body), &env).map(|r| r.body.len()))
        });
    }
    group.finish();
}

fn bench_mutate(c: &mut Criterion) {
    let env = Env::default();
    let mut group = c.benchmark_group("mutate");
    for name in ["minimal-oci", "typical", "containers-50"] {
        let input = load(name);
        group.bench_with_input(BenchmarkId::from_parameter(name), &input, |b, i| {
            b.iter(|| mutate(black_box(&i.pod), &i.namespace, &env).map(|m| m.patch.0.len()))
        });
    }
    group.finish();
}

/// The stages of `review` on the typical pod, each on its own.
fn bench_steps(c: &mut Criterion) {
    let env = Env::default();
    let input = load("typical");
    let pod = &input.pod;
    let mutation = mutate(pod, &input.namespace, &env).expect("typical pod mutates");
    let mut group = c.benchmark_group("steps-typical");

    group.bench_function("1-parse-body", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(&input.body)).map(|v| v.is_object()))
    });
    let mut envelope: Value = serde_json::from_slice(&input.body).expect("JSON");
    if let Some(request) = envelope["request"].as_object_mut() {
        request.remove("object");
        request.remove("oldObject");
    }
    group.bench_function("2-envelope-typed", |b| {
        b.iter(|| {
            serde_path_to_error::deserialize::<_, AdmissionReview<DynamicObject>>(black_box(
                &envelope,
            ))
            .is_ok()
        })
    });
    // What `mutation::validate` does: the typed view of metadata and spec.
    group.bench_function("3-validate-schema", |b| {
        b.iter(|| {
            let pod = black_box(pod);
            let spec = serde_path_to_error::deserialize::<_, PodSpec>(&pod["spec"]).is_ok();
            let meta = &pod["metadata"];
            let labels =
                serde_path_to_error::deserialize::<_, BTreeMap<String, String>>(&meta["labels"])
                    .is_ok();
            let annotations = serde_path_to_error::deserialize::<_, BTreeMap<String, String>>(
                &meta["annotations"],
            )
            .is_ok();
            spec && labels && annotations
        })
    });
    group.bench_function("4-clone-pod", |b| b.iter(|| black_box(pod).clone()));
    group.bench_function("5-injectors", |b| {
        b.iter_batched(
            || pod.clone(),
            |mut copy| {
                let mut doc = PodDoc::in_namespace(&mut copy, &input.namespace);
                doc.set_namespace(&input.namespace);
                run_all(&mut doc, &env).map(|o| o.len())
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("6-patch-diff", |b| {
        b.iter(|| {
            kserve_injector::patch::diff(black_box(pod), black_box(&mutation.pod))
                .0
                .len()
        })
    });
    group.bench_function("7-encode-patch-base64", |b| {
        b.iter(|| {
            let bytes = serde_json::to_vec(black_box(&mutation.patch)).unwrap_or_default();
            base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .len()
        })
    });
    group.bench_function("8-drop-pod", |b| {
        b.iter_batched(|| pod.clone(), drop, BatchSize::SmallInput)
    });
    group.finish();
}

criterion_group!(benches, bench_review, bench_mutate, bench_steps);
criterion_main!(benches);
