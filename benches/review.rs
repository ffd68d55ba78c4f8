//! The webhook's hot path: a serialized AdmissionReview in, the serialized
//! response out (`admission::prepare` then `answer`), on the pods in `benches/inputs/`:
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
//! Groups: `review` (the whole path), `ignored-any` (one structural
//! serde_json pass over the same body with `IgnoredAny`: the floor any
//! decoder pays), `mutate` (the CLI's core call on a pod held as a JSON tree)
//! and `steps` (the stages of the typical pod's review, each alone). After
//! the groups the bench prints, per input, the median of `review`, the
//! median of the pass and their ratio (read back from criterion's estimates).
//!
//! `cargo bench --bench review -- --warm-up-time 1 --measurement-time 3`
//!
//! The bench uses the binary's allocator (mimalloc), so it measures what ships.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use kserve_injector_core::admission::{prepare, Mode, ReviewError, Reviewed};
use kserve_injector_core::internals::{edit, pod_from_str};
use kserve_injector_core::{mutate, Inputs};
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use serde_json::Value;
use std::hint::black_box;
use std::path::{Path, PathBuf};

/// One body answered as the webhook answers it: prepared, then answered in
/// mutate mode.
fn review(body: &[u8], inputs: &Inputs) -> Result<Reviewed, ReviewError> {
    prepare(body, Mode::Mutate)?.answer(inputs)
}

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
fn check(input: &Input, env: &Inputs) {
    let reviewed =
        review(&input.body, env).unwrap_or_else(|e| panic!("{}: review failed: {e}", input.name));
    assert!(
        reviewed.allowed && reviewed.patch_ops > 0,
        "{}: expected an allowed review with a patch, got {:?}",
        input.name,
        reviewed.denial
    );
}

/// The typical pod without `metadata.managedFields` (a large part of its
/// bytes), to show what that block costs on the whole path.
fn without_managed_fields(typical: &Input) -> Input {
    // Cut out of the text, so every other key keeps the API server's order
    // (a tree round trip would sort them, and the review reads in order).
    let text = std::str::from_utf8(&typical.body).expect("UTF-8");
    let key = "\"managedFields\":";
    let start = text.find(key).expect("typical has managedFields");
    let rest = &text[start + key.len()..];
    let mut de = serde_json::Deserializer::from_str(rest);
    let value = <&RawValue as serde::Deserialize>::deserialize(&mut de).expect("valid JSON");
    let offset = value.get().as_ptr() as usize - rest.as_ptr() as usize;
    let mut end = start + key.len() + offset + value.get().len();
    // The comma after the member goes with it; for the last member of its
    // object, the comma before it.
    let mut start = start;
    match text[end..].trim_start().starts_with(',') {
        true => end += text[end..].find(',').map_or(0, |i| i + 1),
        false => start = text[..start].rfind(',').unwrap_or(start),
    }
    let body = format!("{}{}", &text[..start], &text[end..]).into_bytes();
    serde_json::from_slice::<IgnoredAny>(&body).expect("still JSON");
    let mut pod = typical.pod.clone();
    if let Some(meta) = pod["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    Input {
        name: "typical-without-managedFields",
        body,
        pod,
        namespace: typical.namespace.clone(),
    }
}

fn inputs() -> Vec<Input> {
    let mut inputs: Vec<Input> = PODS.map(load).into_iter().collect();
    inputs.insert(2, without_managed_fields(&inputs[1]));
    inputs
}

fn bench_review(c: &mut Criterion) {
    let env = Inputs::default();
    let inputs = inputs();
    let mut group = c.benchmark_group("review");
    for input in &inputs {
        check(input, &env);
        group.throughput(Throughput::Bytes(input.body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(input.name), input, |b, i| {
            b.iter(|| review(black_box(&i.body), &env).map(|r| r.body.len()))
        });
    }
    group.finish();
    let mut group = c.benchmark_group("ignored-any");
    for input in &inputs {
        group.throughput(Throughput::Bytes(input.body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(input.name), input, |b, i| {
            b.iter(|| serde_json::from_slice::<IgnoredAny>(black_box(&i.body)).is_ok())
        });
    }
    group.finish();
}

fn bench_mutate(c: &mut Criterion) {
    let env = Inputs::default();
    let mut group = c.benchmark_group("mutate");
    for name in ["minimal-oci", "typical", "containers-50"] {
        let input = load(name);
        group.bench_with_input(BenchmarkId::from_parameter(name), &input, |b, i| {
            b.iter(|| mutate(black_box(&i.pod), &i.namespace, &env).map(|m| m.patch.len()))
        });
    }
    group.finish();
}

#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    request: Request<'a>,
}

#[derive(serde::Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    object: &'a RawValue,
}

/// The stages of a review on the typical pod, each on its own: the
/// envelope alone, the pod's view, and the injectors' edits on it.
fn bench_steps(c: &mut Criterion) {
    let env = Inputs::default();
    let input = load("typical");
    let raw = serde_json::from_slice::<Envelope>(&input.body)
        .expect("an envelope")
        .request
        .object
        .get()
        .to_string();
    let view = pod_from_str(&raw).expect("typical pod decodes");
    let mut group = c.benchmark_group("steps-typical");
    group.bench_function("1-envelope-raw-pod", |b| {
        b.iter(|| serde_json::from_slice::<Envelope>(black_box(&input.body)).is_ok())
    });
    group.bench_function("2-pod-view", |b| {
        b.iter(|| pod_from_str(black_box(&raw)).is_ok())
    });
    group.bench_function("3-edit", |b| {
        b.iter_batched(
            || view.clone(),
            |view| edit(view, &input.namespace, true, &env).map(|e| e.ops.len()),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// Where criterion keeps its estimates (`CARGO_TARGET_DIR` or `target/`).
fn criterion_dir() -> PathBuf {
    std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR").map(|t| PathBuf::from(t).join("criterion"))
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion"))
}

fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let estimates: Value = serde_json::from_str(&text).ok()?;
    estimates["median"]["point_estimate"].as_f64()
}

/// review's median against the IgnoredAny pass's, per input.
fn print_ratios() {
    println!("\nreview vs one IgnoredAny pass over the same body (medians):");
    println!(
        "{:<32} {:>9} {:>12} {:>13} {:>7}",
        "input", "bytes", "review µs", "IgnoredAny µs", "ratio"
    );
    for input in inputs() {
        let (Some(r), Some(p)) = (
            median_ns("review", input.name),
            median_ns("ignored-any", input.name),
        ) else {
            continue;
        };
        println!(
            "{:<32} {:>9} {:>12.1} {:>13.1} {:>7.2}",
            input.name,
            input.body.len(),
            r / 1000.0,
            p / 1000.0,
            r / p
        );
    }
}

criterion_group!(benches, bench_review, bench_mutate, bench_steps);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    print_ratios();
}
