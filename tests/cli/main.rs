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
