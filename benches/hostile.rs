//! Hostile bodies (issue 6): a pod with 300,000 or 1,000,000 empty
//! containers (`{}`), as a 0.9 / 3 MB AdmissionReview through
//! `admission::prepare` then `answer` and as a JSON tree through `mutate`. Each case runs in
//! its own process (this binary re-executed with the case's name), so its
//! peak RSS (`VmHWM`) is its own; the table gives the wall time of the call,
//! the peak RSS before the call (input built) and after it.
//!
//! Then the same bodies through the binary, as users meet them:
//! `kserve-injector mutate FILE` (the pod file, and the AdmissionReview
//! file), and `kserve-injector serve` answering them over HTTPS (sent with
//! curl). For these the table gives the wall time of the command or the
//! request, and the process's peak RSS (`ru_maxrss` of the CLI; the
//! server's `VmHWM` after the request, and before any request).
//!
//! `cargo bench --bench hostile`
//!
//! Targets: answered in < 1 s with peak RSS < 100 MiB. The answers
//! themselves (a 400 naming the cap) are checked by unit tests in
//! `core/src/admission/tests.rs` and `core/src/mutation/tests.rs`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use kserve_injector_core::admission::{prepare, Mode, ReviewError, Reviewed};
use kserve_injector_core::{mutate, Inputs};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One body answered as the webhook answers it: prepared, then answered in
/// mutate mode.
fn review(body: &[u8], inputs: &Inputs) -> Result<Reviewed, ReviewError> {
    prepare(body, Mode::Mutate)?.answer(inputs)
}

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
    peak_rss_of("self").unwrap_or(0)
}

fn run_case(name: &str) {
    let Some(&(_, n, labelled)) = CASES.iter().find(|(c, _, _)| *c == name) else {
        eprintln!("unknown case {name}");
        std::process::exit(2);
    };
    let inputs = Inputs::default();
    let pod = pod_json(n, labelled);
    let (bytes, before, elapsed, answer) = if name.starts_with("review") {
        let body = review_body(&pod);
        drop(pod);
        let before = peak_rss_kib();
        let start = Instant::now();
        let reviewed = review(&body, &inputs);
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
        let result = mutate(&tree, "default", &inputs);
        let elapsed = start.elapsed();
        let answer = match result {
            Ok(m) => format!("{} ops", m.patch.len()),
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
    if let Err(e) = through_the_binary() {
        eprintln!("the binary's cases failed: {e}");
        std::process::exit(1);
    }
}

type Error = Box<dyn std::error::Error>;

/// The hostile bodies through `kserve-injector mutate` and `serve`.
fn through_the_binary() -> Result<(), Error> {
    let bin = env!("CARGO_BIN_EXE_kserve-injector");
    let dir = tempfile::tempdir()?;
    let mut files = Vec::new();
    for (label, n) in [("300k", 300_000), ("1M", 1_000_000)] {
        let pod = pod_json(n, true);
        let pod_file = dir.path().join(format!("pod-{label}.json"));
        let review_file = dir.path().join(format!("review-{label}.json"));
        // A file the CLI reads names its kind.
        let manifest = format!(r#"{{"apiVersion":"v1","kind":"Pod",{}"#, &pod[1..]);
        std::fs::write(&pod_file, manifest)?;
        std::fs::write(&review_file, review_body(&pod))?;
        files.push((label, pod_file, review_file));
    }
    for (label, pod_file, review_file) in &files {
        for (what, file) in [("pod", pod_file), ("review", review_file)] {
            cli_case(bin, &format!("cli mutate {what} {label}"), file)?;
        }
    }
    serve_cases(bin, dir.path(), &files)
}

/// `kserve-injector mutate FILE`: wall time, exit code and peak RSS.
fn cli_case(bin: &str, name: &str, file: &Path) -> Result<(), Error> {
    let start = Instant::now();
    let child = Command::new(bin)
        .arg("mutate")
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.ok_or("no stderr")?, &mut stderr)?;
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: `pid` is our child, not yet reaped; both pointers are valid.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid {
        return Err(std::io::Error::last_os_error().into());
    }
    let elapsed = start.elapsed();
    let bytes = std::fs::metadata(file)?.len();
    let answer: String = format!("exit {}: {}", libc::WEXITSTATUS(status), stderr.trim())
        .chars()
        .take(90)
        .collect();
    println!(
        "{name:<28} {bytes:>9} {:>10.1} {:>12} {:>12.1}  {answer}",
        elapsed.as_secs_f64() * 1000.0,
        "",
        usage.ru_maxrss as f64 / 1024.0,
    );
    Ok(())
}

/// `kserve-injector serve --self-signed`, each review POSTed with curl.
fn serve_cases(bin: &str, dir: &Path, files: &[(&str, PathBuf, PathBuf)]) -> Result<(), Error> {
    let port = |()| -> Result<u16, Error> {
        Ok(std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port())
    };
    let (webhook, admin) = (port(())?, port(())?);
    let ca = dir.join("ca.crt");
    let mut server = Command::new(bin)
        .args(["serve", "--self-signed", "--cluster-lookups", "off"])
        .arg("--self-signed-ca-file")
        .arg(&ca)
        .args(["--addr", &format!("127.0.0.1:{webhook}")])
        .args(["--admin-addr", &format!("127.0.0.1:{admin}")])
        .args(["--shutdown-delay", "0s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let result = (|| {
        let healthz = format!("http://127.0.0.1:{admin}/healthz");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !curl(&["-sf", "-o", "/dev/null", &healthz])?.0 {
            if Instant::now() > deadline {
                return Err("the server did not come up".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let before = peak_rss_of(&server.id().to_string())?;
        let url = format!("https://127.0.0.1:{webhook}/mutate-pods");
        for (label, _, review_file) in files {
            let (ok, out) = curl(&[
                "-s",
                "--cacert",
                &ca.to_string_lossy(),
                "-H",
                "content-type: application/json",
                "--data-binary",
                &format!("@{}", review_file.display()),
                "-w",
                "\n%{http_code} %{time_total}",
                &url,
            ])?;
            let (body, timing) = out.rsplit_once('\n').ok_or("no timing from curl")?;
            let (code, seconds) = timing.split_once(' ').ok_or("no timing from curl")?;
            let seconds: f64 = seconds.trim().parse()?;
            let answer: String = format!("{code} {body}").chars().take(90).collect();
            println!(
                "{:<28} {:>9} {:>10.1} {:>12.1} {:>12.1}  {answer}",
                format!("serve review {label}"),
                std::fs::metadata(review_file)?.len(),
                seconds * 1000.0,
                before as f64 / 1024.0,
                peak_rss_of(&server.id().to_string())? as f64 / 1024.0,
            );
            if !ok {
                return Err(format!("curl failed: {out}").into());
            }
        }
        Ok(())
    })();
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// Runs curl; whether it succeeded, and its stdout.
fn curl(args: &[&str]) -> Result<(bool, String), Error> {
    let out = Command::new("curl").args(args).output()?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// Peak RSS of a process (a pid, or "self") so far, in KiB.
fn peak_rss_of(process: &str) -> Result<u64, Error> {
    let status = std::fs::read_to_string(format!("/proc/{process}/status"))?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"));
    let kib = line.and_then(|l| l.split_whitespace().nth(1));
    Ok(kib.ok_or("no VmHWM")?.parse()?)
}
