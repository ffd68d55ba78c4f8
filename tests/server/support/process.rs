//! The real binary as a `serve` process, for what only a process shows:
//! its JSON log, its exit on a signal, its exit code at startup.

use super::{ensure, fail, Error, TestResult, PATIENCE};
use serde_json::Value;
use std::io::BufRead;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

pub struct Serve {
    child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    log: Receiver<Value>,
    seen: Vec<Value>,
}

/// `serve` on loopback ports the kernel picks, lookups off, `flags` after.
pub fn command(flags: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kserve-injector"));
    command
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
        ])
        .args(["--cluster-lookups", "off"])
        .args(flags)
        .env("RUST_LOG", "info")
        .env_remove("KSERVE_INJECTOR_LOG")
        .env_remove("KSERVE_INJECTOR_LOG_FORMAT");
    command
}

/// `serve`'s flags for a self-signed certificate whose CA is written to
/// `dir/ca.crt`, and no shutdown delay.
pub fn self_signed(dir: &std::path::Path) -> Vec<String> {
    let ca = dir.join("ca.crt").to_string_lossy().into_owned();
    [
        "--self-signed",
        "--self-signed-ca-file",
        &ca,
        "--shutdown-delay",
        "0s",
    ]
    .map(String::from)
    .to_vec()
}

/// [`command`] run by bash after `ulimit -Sn soft; ulimit -Hn hard`: the
/// open-file limits a container may start with.
pub fn under_nofile(soft: u64, hard: u64, flags: &[&str]) -> Command {
    let inner = command(flags);
    let mut shell = Command::new("bash");
    shell
        .arg("-c")
        .arg(format!(
            "ulimit -Sn {soft} && ulimit -Hn {hard} && exec \"$@\""
        ))
        .arg("bash")
        .arg(inner.get_program())
        .args(inner.get_args());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    shell
}

/// Runs `command` until it exits (killed after [`PATIENCE`]); its exit
/// code and stderr.
pub fn exit_of(mut command: Command) -> Result<(Option<i32>, String), Error> {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!("still running after {PATIENCE:?}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut stderr)?;
    }
    Ok((status.code(), stderr))
}

/// Runs `serve` with `flags` until it exits (killed after [`PATIENCE`]);
/// its exit code and stderr.
pub fn serve_exit(flags: &[&str]) -> Result<(Option<i32>, String), Error> {
    let mut child = command(flags)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!("still running after {PATIENCE:?}")));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut stderr)?;
    }
    Ok((status.code(), stderr))
}

impl Serve {
    /// Starts `serve` with `flags` and waits for its "listening" line.
    pub fn spawn(flags: &[&str]) -> Result<Self, Error> {
        Self::spawn_command(command(flags))
    }

    /// Starts `command` (a `serve`, see [`command`]) and waits for its
    /// "listening" line.
    pub fn spawn_command(mut command: Command) -> Result<Self, Error> {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let (tx, log) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let event = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        let mut serve = Self {
            child,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            admin: SocketAddr::from(([0, 0, 0, 0], 0)),
            log,
            seen: Vec::new(),
        };
        let listening = serve.wait_for_log(PATIENCE, "the \"listening\" line", |e| {
            e["message"] == "listening"
        })?;
        let field = |k: &str| -> Result<SocketAddr, Error> {
            let text = listening[k].as_str();
            Ok(text
                .ok_or_else(|| fail(format!("no {k} in {listening}")))?
                .parse()?)
        };
        (serve.addr, serve.admin) = (field("addr")?, field("admin_addr")?);
        Ok(serve)
    }

    /// The first log event, from the start, that `matches`.
    pub fn wait_for_log(
        &mut self,
        limit: Duration,
        what: &str,
        matches: impl Fn(&Value) -> bool,
    ) -> Result<Value, Error> {
        if let Some(found) = self.seen.iter().find(|e| matches(e)) {
            return Ok(found.clone());
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = self.log.recv_timeout(left).map_err(|_| {
                fail(format!(
                    "no log line for {what} within {limit:?}; the log:\n{}",
                    self.shown()
                ))
            })?;
            self.seen.push(event.clone());
            if matches(&event) {
                return Ok(event);
            }
        }
    }

    /// Every log event read so far (by [`Serve::wait_for_log`]).
    pub fn seen(&self) -> &[Value] {
        &self.seen
    }

    fn shown(&self) -> String {
        let lines: Vec<String> = self.seen.iter().map(Value::to_string).collect();
        lines.join("\n")
    }

    pub fn signal(&self, name: &str) -> TestResult {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()?;
        ensure(status.success(), || format!("kill -{name} failed"))
    }

    /// The exit code, or an error (and the process killed) after `limit`.
    pub async fn exit_code(&mut self, limit: Duration) -> Result<Option<i32>, Error> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status.code());
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                return Err(fail(format!("still running {limit:?} after the signal")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Serve {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
