//! Hostile bodies (issue 6): a pod with 300,000 or 1,000,000 empty
//! containers (`{}`), as a 0.9 / 3 MB AdmissionReview through
//! `admission::review` and as a JSON tree through `mutate`. Each case runs in
//! its own process (this binary re-executed with the case's name), so its
//! peak RSS (`VmHWM`) is its own; the table gives the wall time of the call,
//! the peak RSS before the call (input built) and after it.
//!
//! `cargo bench --bench hostile`
//!
//! Targets: answered in < 1 s with peak RSS < 100 MiB. The answers
//! themselves (a 400 naming the cap) are checked by unit tests in
//! `src/admission/tests.rs` and `src/mutation/tests.rs`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use kserve_injector::admission::review;
use kserve_injector::{mutate, Env};
use serde_json::Value;
use std::process::Command;
use std::time::Instant;

const CASES: [(&str, usize, bool); 6] = [
    ("review 300k {} labelled", 300_000, true),
    ("review 1M {} labelled", 1_000_000, true),
    ("review 300k {} unlabelled", 300_000, false),
    ("review 1M {} unlabelled", 1_000_000, false),
    ("mutate 300k {} labelled", 300_000, true),
    ("mutate 1M {} labelled", 1_000_000, true),
];

fn pod_json(n: usize, labelled: bool) -> String {
    let label = if labelled {
        "serving.kserve.io/inferenceservice"
    } else {
        "app"
    };
    let mut pod = format!(
        r#"{{"metadata":{{"name":"h","labels":{{"{label}":"x"}}}},"spec":{{"containers":["#
    );
    pod.reserve(3 * n + 8);
    for i in 0..n {
        pod.push_str(if i == 0 { "{}" } else { ",{}" });
    }
    pod.push_str("]}}");
    pod
}

fn review_body(pod: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},"namespace":"default","operation":"CREATE","userInfo":{{}},"object":{pod}}}}}"#
    )
    .into_bytes()
}

/// Peak resident set size of this process so far, in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn run_case(name: &str) {
    let Some(&(_, n, labelled)) = CASES.iter().find(|(c, _, _)| *c == name) else {
        eprintln!("unknown case {name}");
        std::process::exit(2);
    };
    let env = Env::default();
    let pod = pod_json(n, labelled);
    let (bytes, before, elapsed, answer) = if name.starts_with("review") {
        let body = review_body(&pod);
        drop(pod);
        let before = peak_rss_kib();
        let start = Instant::now();
        let reviewed = review(&body, &env);
        let elapsed = start.elapsed();
        let answer = match reviewed {
            Ok(r) => format!("allowed={} {}", r.allowed, r.denial.unwrap_or_default()),
            Err(e) => e.to_string(),
        };
        (body.len(), before, elapsed, answer)
    } else {
        let tree: Value = serde_json::from_str(&pod).expect("JSON");
        let len = pod.len();
        drop(pod);
        let before = peak_rss_kib();
        let start = Instant::now();
        let result = mutate(&tree, "default", &env);
        let elapsed = start.elapsed();
        let answer = match result {
            Ok(m) => format!("{} ops", m.patch.0.len()),
            Err(e) => e.to_string(),
        };
        (len, before, elapsed, answer)
    };
    let after = peak_rss_kib();
    let answer: String = answer.chars().take(90).collect();
    println!(
        "{name:<28} {bytes:>9} {:>10.1} {:>12.1} {:>12.1}  {answer}",
        elapsed.as_secs_f64() * 1000.0,
        before as f64 / 1024.0,
        after as f64 / 1024.0,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--hostile-case") {
        if let Some(name) = args.get(i + 1) {
            run_case(name);
            return;
        }
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("cannot find this binary: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "{:<28} {:>9} {:>10} {:>12} {:>12}  answer",
        "case", "bytes", "call ms", "RSS in MiB", "peak MiB"
    );
    for (name, _, _) in CASES {
        let status = Command::new(&exe).args(["--hostile-case", name]).status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("{name}: the case failed: {status:?}");
            std::process::exit(1);
        }
    }
}
