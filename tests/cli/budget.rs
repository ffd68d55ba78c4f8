//! The reader's budget on the real binary: inputs that once grew memory
//! with their expanded size (aliases to a large scalar, one huge document
//! on stdin, a JSON array of millions, a long stream to `audit`) now stop
//! at the budget. Each input is generated as it is written to the child's
//! standard input, never held here; the child's peak resident set comes
//! from GNU time (`crate::timed`).

mod nested;

use std::io::{Read, Write};
use std::process::{ChildStdin, Stdio};

const MIB: u64 = 1 << 20;
/// The default per-document budget (`--max-document-bytes`).
const DOCUMENT: u64 = 64 * MIB;
/// What reading one document within that budget may cost. The source is
/// charged as each character (YAML) or byte (JSON) is handed to the parser
/// and the first one past the budget is refused, so the buffer the scanner
/// or serde_json holds a scalar in never holds more than the budget: it
/// grows by doubling to the budget's own power of two, never past it. The
/// 64 MiB cover the values made of it and the process's own growth.
const BOUND: u64 = DOCUMENT + 64 * MIB;
/// How much is streamed into each huge single document: far past the
/// bound, so a reader that held it all would fail the bound.
const STREAMED: u64 = 320 * MIB;

struct Run {
    code: i32,
    stderr: String,
    /// Peak resident set, in bytes.
    peak: u64,
}

/// Runs the binary with `args`, `feed` writing its standard input from a
/// thread (a write error means the binary stopped reading: expected).
// The child is reaped by wait4 (for its rusage), not by Child::wait.
#[allow(clippy::zombie_processes)]
fn run(
    args: &[&str],
    feed: impl FnOnce(&mut ChildStdin) -> std::io::Result<()> + Send + 'static,
) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("time");
    let mut child = crate::timed(&report)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        let _ = feed(&mut stdin);
    });
    let mut stderr = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    child.wait().expect("time ends");
    writer.join().expect("the writer ends");
    let (code, peak) = crate::time_report(&report);
    Run {
        code,
        stderr: reader.join().expect("the stderr reader ends"),
        peak,
    }
}

/// `head`, then `len` bytes of `fill`, a MiB at a time.
fn repeat(
    head: String,
    fill: &'static [u8],
    len: u64,
) -> impl FnOnce(&mut ChildStdin) -> std::io::Result<()> + Send + 'static {
    move |out| {
        out.write_all(head.as_bytes())?;
        let chunk: Vec<u8> = fill.iter().copied().cycle().take(MIB as usize).collect();
        for _ in 0..len / MIB {
            out.write_all(&chunk)?;
        }
        Ok(())
    }
}

/// The binary's own resident set for a small valid input, which the
/// bounds are measured from.
fn baseline(args: &[&str]) -> u64 {
    let pod = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\"}, \"spec\": {\"containers\": [{\"name\": \"c\", \"image\": \"x\"}]}}\n";
    run(args, move |out| out.write_all(pod.as_bytes())).peak
}

fn refused_within_bound(args: &[&str], run: &Run, message: &str, bound: u64) {
    refused_within_bound_of(args, args, run, message, bound)
}

/// As [`refused_within_bound`], the baseline measured with `base_args`.
fn refused_within_bound_of(
    args: &[&str],
    base_args: &[&str],
    run: &Run,
    message: &str,
    bound: u64,
) {
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    assert!(run.stderr.contains(message), "{args:?}: {}", run.stderr);
    grew_within(args, base_args, run, bound);
}

/// Whether `run` peaked no more than `bound` over the binary's resident
/// set for a small valid input with `base_args`.
fn grew_within(args: &[&str], base_args: &[&str], run: &Run, bound: u64) {
    let base = baseline(base_args);
    let growth = run.peak.saturating_sub(base);
    eprintln!(
        "figure: {args:?}: peak {} MiB, {} MiB over a small input's",
        run.peak / MIB,
        growth / MIB
    );
    assert!(
        growth <= bound,
        "{args:?}: peak {} B is {} B over the baseline {base} B, more than {bound} B",
        run.peak,
        growth
    );
}

const POD_HEAD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: big\nspec:\n  containers:\n  - name: kserve-container\n    image: x\n";

#[test]
fn aliases_to_a_large_scalar_are_refused_at_the_budget() {
    // 125 KB: one 64 KiB scalar, then 20,000 aliases to it (1.3 GB of text).
    let args = ["mutate", "-"];
    let mut text = format!("{POD_HEAD}  big: &b {}\n  list:\n", "x".repeat(64 << 10));
    text.push_str(&"  - *b\n".repeat(20_000));
    let done = run(&args, move |out| out.write_all(text.as_bytes()));
    refused_within_bound(
        &args,
        &done,
        "more than 64 MiB of text in one document (an alias counts each time it is used)",
        BOUND,
    );
}

#[test]
fn one_huge_yaml_document_on_stdin_stops_at_the_budget() {
    let args = ["mutate", "-"];
    // The second starts its scalar right after `---`, which the scanner
    // reads past before the document's start is reported.
    for head in [format!("{POD_HEAD}x: |\n  "), "--- |\n".to_string()] {
        let done = run(&args, repeat(head, b"a", STREAMED));
        refused_within_bound(
            &args,
            &done,
            "more than 64 MiB of text in one document",
            BOUND,
        );
    }
}

#[test]
fn one_huge_json_string_stops_at_the_budget_in_mutate_and_audit() {
    let head = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"x\": \"";
    for args in [&["mutate", "-"][..], &["audit", "--objects", "-"][..]] {
        let done = run(args, repeat(head.to_string(), b"a", STREAMED));
        refused_within_bound(
            args,
            &done,
            "more than 64 MiB of text in one document",
            BOUND,
        );
    }
}

#[test]
fn a_json_array_of_25_million_elements_is_refused_at_the_node_budget() {
    // 50 MB: an unknown field holding 25 million zeros, once a 2 GB tree.
    let head = "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"p\"}, \"unknown\": [0";
    for args in [&["mutate", "-"][..], &["audit", "--objects", "-"][..]] {
        let done = run(args, repeat(head.to_string(), b",0", 50 * MIB));
        refused_within_bound(
            args,
            &done,
            "more than 1000000 nodes in one document",
            BOUND,
        );
    }
}

#[test]
fn a_long_audit_stream_stops_at_the_input_budget() {
    // Small pods of an InferenceService, which the audit keeps: memory
    // follows what the input budget lets in, not the stream.
    let args = ["audit", "--objects", "-", "--max-input-bytes", "16777216"];
    let feed = |out: &mut ChildStdin| {
        let mut buf = Vec::with_capacity(MIB as usize + 512);
        for i in 0u64.. {
            writeln!(
                buf,
                "{{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {{\"name\": \"p{i}\", \"namespace\": \"ns\", \"labels\": {{\"serving.kserve.io/inferenceservice\": \"s\"}}}}, \"spec\": {{\"containers\": [{{\"name\": \"kserve-container\", \"image\": \"x\"}}]}}}}"
            )?;
            if buf.len() as u64 >= MIB {
                out.write_all(&buf)?;
                buf.clear();
            }
            if i > 2_000_000 {
                break;
            }
        }
        Ok(())
    };
    let done = run(&args, feed);
    refused_within_bound(&args, &done, "more than 16 MiB of text in the input", BOUND);
}

#[test]
fn invalid_utf8_is_reported_at_its_line_and_column() {
    let args = ["mutate", "-"];
    let done = run(&args, |out| {
        out.write_all(b"kind: Pod\nmetadata:\n  name: caf\xe9\n")
    });
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert_eq!(
        done.stderr,
        "error: document 1: not valid YAML or JSON: the input is not valid UTF-8 at line 3 column 12\n"
    );
}

#[test]
fn aliases_in_a_config_file_are_refused_at_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("inferenceservice-config.yaml");
    let mut text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  annotations:\n    big: &b {}\ndata: {{}}\nlist:\n",
        "x".repeat(64 << 10)
    );
    text.push_str(&"- *b\n".repeat(20_000));
    std::fs::write(&config, text).unwrap();
    let config = config.to_string_lossy().into_owned();
    let args = ["mutate", "--config", &config, "-"];
    let done = run(&args, |out| out.write_all(POD_HEAD.as_bytes()));
    // A ConfigMap manifest's budget (`config::MANIFEST_BUDGET`): 4 MiB.
    refused_within_bound_of(
        &args,
        &["mutate", "-"],
        &done,
        "more than 4 MiB of text in one document (an alias counts each time it is used)",
        4 * MIB + 64 * MIB,
    );
}
