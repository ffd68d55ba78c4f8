//! `mutate`'s files from pipes: a process substitution for `--config`,
//! `--config-file`, `--objects` and the pod reads like the file it
//! replaces; a FIFO nobody writes to is an error at once, not a wait for
//! a writer that may never come.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CASE: &str = "fixtures/a12b-logger-storage-credentials";

fn repo(relative: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(relative)
        .display()
        .to_string()
}

/// Runs `command` to its end, or kills it after `limit` and says so.
fn bounded(mut command: Command, limit: Duration) -> Result<Output, String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + limit;
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("still running after {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().map_err(|e| e.to_string())
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status();
    assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", path.display());
}

#[test]
fn process_substitutions_read_like_the_files_they_replace() {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = dir.path().join("settings.yaml");
    std::fs::write(&settings, "kserveVersion: v0.17\n").expect("settings written");
    let (config, objects, pod) = (
        repo(&format!("{CASE}/config.yaml")),
        repo(&format!("{CASE}/cluster.yaml")),
        repo(&format!("{CASE}/input.yaml")),
    );
    let settings = settings.display().to_string();
    let bin = env!("CARGO_BIN_EXE_kserve-injector");
    let mut from_files = Command::new(bin);
    from_files.args(["mutate", "--config", &config, "--objects", &objects]);
    from_files.args(["--config-file", &settings, &pod]);
    let from_files = bounded(from_files, Duration::from_secs(30)).expect("mutate from files");
    assert!(from_files.status.success(), "{from_files:?}");
    let script = format!(
        "exec '{bin}' mutate --config <(cat '{config}') --objects <(cat '{objects}') \
         --config-file <(cat '{settings}') <(cat '{pod}')"
    );
    let mut from_pipes = Command::new("bash");
    from_pipes.args(["-c", &script]);
    let from_pipes = bounded(from_pipes, Duration::from_secs(30)).expect("mutate from pipes");
    assert!(from_pipes.status.success(), "{from_pipes:?}");
    assert_eq!(from_pipes.stdout, from_files.stdout);
}

#[test]
fn a_fifo_nobody_writes_to_is_an_error_at_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("nobody-writes.yaml");
    mkfifo(&fifo);
    let fifo = fifo.display().to_string();
    let pod = repo(&format!("{CASE}/input.yaml"));
    let mut wrong = Vec::new();
    for flag in ["--config", "--config-file", "--objects"] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kserve-injector"));
        command.args(["mutate", flag, &fifo, &pod]);
        match bounded(command, Duration::from_secs(10)) {
            Err(e) => wrong.push(format!("{flag}: {e}")),
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let said = stderr.contains(&fifo)
                    && stderr.contains("a pipe that delivered nothing (a FIFO is read only while a writer has it open)");
                if out.status.code() != Some(2) || !said {
                    wrong.push(format!("{flag}: {:?} {stderr}", out.status.code()));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
