//! What a request carries is bounded before it is logged: a pod denied
//! for a 250,000-character annotation, which KServe's message quotes
//! whole, gets that whole message in its answer, while the summary line
//! and the per-request line carry at most 1,024 bytes of it with a marker.
//! The real binary, for its log.

use crate::support::process::Serve;
use crate::support::*;
use hyper::StatusCode;
use serde_json::Value;

/// Longer than any line these strings may make: a few bounded strings of
/// 1,024 bytes and the fields around them.
const LINE_LIMIT: usize = 8 * 1024;
const ANNOTATION: &str = "kserve-injector.io/security-profile";
const REASON_END: &str = "is not a security profile (expected baseline or restricted)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_quoting_a_250000_character_annotation_makes_bounded_log_lines() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca_file = tmp.path().join("ca.crt").display().to_string();
    let mut serve = Serve::spawn(&[
        "--self-signed",
        "--self-signed-ca-file",
        &ca_file,
        "--log-summary-interval",
        "1s",
        "--log",
        "kserve_injector=debug",
    ])?;
    let ca = std::fs::read_to_string(&ca_file)?;

    let mut pod = yaml(&repo_path(
        "fixtures/r08-security-profile-annotation-invalid/input.yaml",
    ))?;
    // 250,000 characters, some of them two bytes long.
    let value = format!("strict-{}", "é".repeat(1_000) + &"x".repeat(248_993));
    pod["metadata"]["annotations"][ANNOTATION] = Value::String(value.clone());
    let body = review_request(&pod, "admission.k8s.io/v1", "long-annotation-uid")?;
    let (status, answer) = Client::open(serve.addr, &ca, Http::H2)
        .await?
        .post_json("/mutate-pods", body)
        .await?;
    ensure(status == StatusCode::OK, || format!("review: {status}"))?;
    let answer: Value = serde_json::from_slice(&answer)?;
    let message = answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    // The answer keeps KServe's message whole: the API server passes it to
    // the pod's creator, who sent the annotation.
    ensure(
        answer["response"]["allowed"] == false
            && message.contains(&value)
            && message.ends_with(REASON_END),
        || format!("the denial: {} bytes", message.len()),
    )?;

    let summary = serve.wait_for_log(PATIENCE, "the admission summary", |e| {
        e["message"] == "admission summary" && e["denied"] == 1
    })?;
    let line = summary.to_string();
    eprintln!(
        "figure: summary line {} bytes for a {}-byte denial",
        line.len(),
        message.len()
    );
    let last = summary["last_denial"].as_str().unwrap_or_default();
    ensure(
        line.len() < LINE_LIMIT && last.contains(" bytes cut]…") && last.ends_with(REASON_END),
        || format!("the summary line, {} bytes: {:.2000}", line.len(), line),
    )?;
    let reviewed = serve.wait_for_log(PATIENCE, "the per-request debug line", |e| {
        e["message"] == "admission reviewed"
    })?;
    let reason = reviewed["reason"].as_str().unwrap_or_default();
    ensure(
        reason.contains(" bytes cut]…") && reason.ends_with(REASON_END),
        || format!("the per-request line: {:.2000}", reviewed),
    )?;
    let longest = serve.seen().iter().map(|e| e.to_string().len()).max();
    ensure(longest.is_some_and(|n| n < LINE_LIMIT), || {
        format!("a log line of {longest:?} bytes")
    })
}

/// `serve`, killed when dropped, and its stdout's lines as they come.
struct TextServe {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl TextServe {
    fn spawn(flags: &[&str]) -> Result<Self, Error> {
        use std::io::BufRead;
        let mut child = crate::support::process::command(flags)
            .args(["--shutdown-delay", "0s"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self {
            child,
            lines,
            seen: Vec::new(),
        })
    }

    /// The first line from now that holds `needle`.
    fn wait_for(&mut self, needle: &str) -> Result<String, Error> {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self.lines.recv_timeout(left).map_err(|_| {
                fail(format!(
                    "no line with {needle:?}; the log:\n{}",
                    self.seen.join("\n")
                ))
            })?;
            self.seen.push(line.clone());
            if line.contains(needle) {
                return Ok(line);
            }
        }
    }
}

impl Drop for TextServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `--log-format text`: a review whose uid holds line breaks is still one
/// line per event, the breaks written as `\n`, so no one who can reach the
/// port can add a line that reads as the webhook's own. (JSON logs escape
/// them already; the denial's reason quotes an annotation escaped.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_keep_each_event_on_one_line_whatever_a_request_holds() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let ca_file = tmp.path().join("ca.crt").display().to_string();
    let mut serve = TextServe::spawn(&[
        "--self-signed",
        "--self-signed-ca-file",
        &ca_file,
        "--log-format",
        "text",
        "--log",
        "kserve_injector=debug",
    ])?;
    let listening = serve.wait_for(" listening ")?;
    let addr = (listening.split_whitespace())
        .find_map(|field| field.strip_prefix("addr="))
        .ok_or_else(|| fail(format!("no addr= in {listening}")))?
        .parse()?;
    let ca = std::fs::read_to_string(&ca_file)?;

    let pod = yaml(&repo_path(
        "fixtures/r08-security-profile-annotation-invalid/input.yaml",
    ))?;
    let forged = "2026-01-01T00:00:00.000000Z ERROR kserve_injector: FORGED";
    let uid = format!("uid\n{forged}\r\n{forged}\u{1b}[2K");
    let body = review_request(&pod, "admission.k8s.io/v1", &uid)?;
    let (status, answer) = Client::open(addr, &ca, Http::H2)
        .await?
        .post_json("/mutate-pods", body)
        .await?;
    ensure(status == StatusCode::OK, || format!("review: {status}"))?;
    let answer: Value = serde_json::from_slice(&answer)?;
    ensure(answer["response"]["uid"] == uid.as_str(), || {
        format!("{answer}")
    })?;

    let reviewed = serve.wait_for("admission reviewed")?;
    ensure(
        reviewed.contains("uid\\n2026-01-01T00:00:00.000000Z ERROR")
            && reviewed.contains("FORGED\\r\\n2026")
            && reviewed.contains("FORGED\\u{1b}[2K"),
        || format!("the uid's breaks and ESC are not escaped in: {reviewed}"),
    )?;
    let forged_lines: Vec<&String> = (serve.seen.iter())
        .filter(|l| l.contains("FORGED") && !l.contains("admission reviewed"))
        .collect();
    ensure(forged_lines.is_empty(), || {
        format!("lines the request wrote: {forged_lines:?}")
    })
}
