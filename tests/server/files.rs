//! File descriptors planned like memory, on the real binary started the
//! way a container's limits start it (`ulimit -n` before exec): the soft
//! limit is raised to the hard one, the connection cap derived from it,
//! and a --max-connections that cannot fit is refused with the arithmetic.

use crate::support::process::{exit_of, under_nofile, Serve};
use crate::support::*;

fn self_signed(dir: &std::path::Path) -> Vec<String> {
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

const SIZED: &str = "bounds sized to the memory limit (flags given win)";

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_one_and_the_cap_fits_it() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let flags = self_signed(tmp.path());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    for (soft, hard, cap) in [
        (256, 4096, None),
        (256, 256, Some(104)),
        (1024, 1024, Some(802)),
    ] {
        let mut serve = Serve::spawn_command(under_nofile(soft, hard, &flags))?;
        let sized = serve.wait_for_log(PATIENCE, "the sizing line", |e| e["message"] == SIZED)?;
        ensure(sized["open_file_limit"] == hard, || {
            format!("soft {soft}, hard {hard}: {sized}")
        })?;
        if let Some(cap) = cap {
            // No memory limit here: the descriptors set the cap.
            let bound = sized["max_connections"].as_u64().unwrap_or(0);
            ensure(bound <= cap, || format!("ulimit -n {hard}: {sized}"))?;
        }
    }
    Ok(())
}

#[test]
fn connections_that_cannot_fit_the_open_file_limit_are_refused_with_the_arithmetic() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let mut flags = self_signed(tmp.path());
    flags.extend(["--max-connections".into(), "1000".into()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let (code, stderr) = exit_of(under_nofile(256, 256, &flags))?;
    ensure(code == Some(1), || format!("exit code {code:?}: {stderr}"))?;
    let want =
        "error: invalid flags: the open-file limit (256, hard 256) is too low: 1000 webhook \
                connections (--max-connections) + 32 admin connections + 64 for the API client \
                + 32 for files, listeners and the runtime = 1128, plus a tenth as headroom = 1241 \
                file descriptors";
    ensure(stderr.starts_with(want), || {
        format!("{stderr:?} does not start with {want:?}")
    })?;
    // What fits is served.
    let mut fits = self_signed(tmp.path());
    fits.extend(["--max-connections".into(), "100".into()]);
    let fits: Vec<&str> = fits.iter().map(String::as_str).collect();
    let mut serve = Serve::spawn_command(under_nofile(256, 256, &fits))?;
    let sized = serve.wait_for_log(PATIENCE, "the sizing line", |e| e["message"] == SIZED)?;
    ensure(sized["max_connections"] == 100, || format!("{sized}"))
}
