//! The binary's offline commands: `mutate` (acceptance, stdin, exit
//! codes, help), its YAML reader, `certs`, and the golden fixtures through
//! the CLI and the AdmissionReview path.

mod audit;
mod budget;
mod certs;
mod flag_docs;
mod golden;
mod kserve_version;
mod messages;
mod mutate;
mod pipes;
mod policy;
mod reader;
mod upgrade;

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs the binary with `args`, `stdin` written to its standard input from
/// a thread (the binary may answer, or fail, and exit before reading it
/// all; a write error is then expected and ignored: the exit code, stdout
/// and stderr are what the tests check).
fn run_bin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kserve-injector"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let mut pipe = child.stdin.take().expect("stdin");
    let input = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let out = child.wait_with_output().expect("binary finishes");
    writer.join().expect("the stdin writer ends");
    out
}

/// The binary run under GNU time, which writes its exit code and peak
/// resident set to `report` (read by [`time_report`]). Not this process's
/// own wait4: a child spawned from here (vfork or fork) starts its
/// accounting at this process's peak, which the tests running beside it
/// raise (235 MB measured, hiding the child's own).
fn timed(report: &std::path::Path) -> Command {
    const TIME: &str = "/usr/bin/time";
    assert!(
        std::path::Path::new(TIME).exists(),
        "{TIME} (Debian's package `time`) measures the child's peak: install it (.ci/run does)"
    );
    let mut command = Command::new(TIME);
    command
        .args(["-f", "%x %M", "-o"])
        .arg(report)
        .arg(env!("CARGO_BIN_EXE_kserve-injector"));
    command
}

/// The exit code and the peak resident set in bytes from [`timed`]'s report.
fn time_report(report: &std::path::Path) -> (i32, u64) {
    let text = std::fs::read_to_string(report).expect("time's report");
    // A child that failed adds a "Command exited with non-zero status" line first.
    let last = text.lines().last().unwrap_or_default();
    let mut fields = last.split_whitespace();
    let code = fields.next().and_then(|c| c.parse().ok());
    let kib: Option<u64> = fields.next().and_then(|k| k.parse().ok());
    match (code, kib) {
        (Some(code), Some(kib)) => (code, kib * 1024),
        _ => panic!("time's report is not 'code KiB': {text:?}"),
    }
}
