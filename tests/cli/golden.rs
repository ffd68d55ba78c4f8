//! Golden fixtures: every case under `fixtures/` goes through the CLI binary
//! and through the AdmissionReview path, and a second pass must change nothing.
//!
//! A case is a directory holding `input.yaml` (a Pod), optionally
//! `config.yaml` (an inferenceservice-config ConfigMap; KServe's defaults
//! otherwise) and `cluster.yaml` (the ServiceAccounts, Secrets,
//! ClusterStorageContainers and InferenceServices the API server would
//! hold: `mutate --objects` on the CLI path, the Inputs' snapshot on the
//! AdmissionReview path), optionally `args` (`mutate` flags, whitespace
//! separated, which the AdmissionReview path gets as its [`Inputs`]: only
//! `--modelcar-mode` and `--security-profile`, the flags that change a pod,
//! are known), and the
//! golden: `expected.yaml` (the mutated pod) or
//! `expected-error.txt` (the denial message). An optional `settings.yaml`
//! is our own settings file (`mutate --config-file`; the AdmissionReview
//! path loads the config with it). `REGENERATE_GOLDENS=1 cargo
//! test --test cli golden::` rewrites the goldens from the CLI's output.
//!
//! A case holding `cli-only` (its one line says why) is a file only a user
//! writes, never what the API server sends a webhook (`cpu: 2`, a number
//! wider than 64 bits): it runs through the CLI alone, and its golden is
//! also `expected-stdout.yaml`, `mutate -o yaml`'s output byte for byte.
//!
//! Goldens are read and written with the CLI's own reader and writer, so
//! numbers compare by their text.
//!
//! `fixtures/releases/<release>/<case>/` holds what an older KServe
//! release gives: the case runs with `--kserve-version <release>` (the
//! directory's name). A file `same-input-as` there names (relative to the
//! case) the case whose `input.yaml`, `config.yaml`, `cluster.yaml` and
//! `args` it reuses when it has none of its own (the HEAD case, or another
//! release's case, which may name another in turn), so both goldens come
//! from one input.
//! A config the release refuses (a case of `fixtures/` too, for a config
//! every release refuses) has the golden `expected-config-error.txt` (the
//! CLI exits 2 with it; the server would not load the config).
//!
//! A patch release (v0.15.1, v0.15.2, v0.17.1, v0.18.1) is held to every
//! case: where it has no golden of its own, it must give the golden of the
//! newest older tag of its line that has one, else what the line's first
//! tag gives (`patch_releases_give_their_lines_goldens_unless_they_have_their_own`,
//! in process, through the AdmissionReview path): every difference a patch
//! release makes is a golden.

use base64::Engine;
use kserve_injector::files;
use kserve_injector_core::Settings;
use kserve_injector_core::{admission, config::Config, reader, release::Release, Inputs};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("readable fixtures/").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut cases: Vec<PathBuf> = subdirs(&root)
        .into_iter()
        .filter(|p| p.join("input.yaml").is_file())
        .collect();
    for release in subdirs(&root.join("releases")) {
        for case in subdirs(&release) {
            // A release case always has an input: one it cannot find is a
            // broken `same-input-as`, never a case to skip.
            assert!(
                case_file(&case, "input.yaml").is_some(),
                "{}: no input.yaml, own or through same-input-as",
                case.display()
            );
            cases.push(case);
        }
    }
    cases
}

/// The release a case under `fixtures/releases/` runs as (the whole path
/// compared, so a checkout in a directory named `releases` is no release).
fn release_of(case: &Path) -> Option<String> {
    let release_dir = case.parent()?;
    let releases = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/releases");
    (release_dir.parent()? == releases)
        .then(|| release_dir.file_name()?.to_str().map(str::to_string))
        .flatten()
}

/// The case's own file, else the `same-input-as` case's (which may name
/// another in turn, up to four deep).
fn case_file(case: &Path, name: &str) -> Option<PathBuf> {
    let mut at = case.to_path_buf();
    for _ in 0..4 {
        let own = at.join(name);
        if own.is_file() {
            return Some(own);
        }
        let base = std::fs::read_to_string(at.join("same-input-as")).ok()?;
        at = at.join(base.trim());
    }
    None
}

fn regenerate() -> bool {
    std::env::var_os("REGENERATE_GOLDENS").is_some_and(|v| v != "0")
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut input = text.as_slice();
    let mut docs =
        reader::documents(&mut input).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.next()
        .unwrap_or_else(|| panic!("{}: no document", path.display()))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn to_yaml(value: &Value) -> String {
    reader::to_yaml(value).expect("a JSON value renders as YAML")
}

/// The case's `args` file (its own, else its `same-input-as` case's) as
/// flags, empty without one.
fn flags(case: &Path) -> Vec<String> {
    let text = case_file(case, "args").and_then(|path| std::fs::read_to_string(path).ok());
    let mut flags: Vec<String> = match text {
        Some(text) => text.split_whitespace().map(str::to_string).collect(),
        None => Vec::new(),
    };
    if let Some(release) = release_of(case) {
        flags.extend(["--kserve-version".to_string(), release]);
    }
    flags
}

/// The `args` flags as the server's inputs would carry them.
fn apply_flags(case: &Path, inputs: &mut Inputs) {
    let flags = flags(case);
    let mut flags = flags.iter().map(String::as_str);
    while let Some(flag) = flags.next() {
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (flag, flags.next()),
        };
        let value = value.unwrap_or_else(|| panic!("{}: {name} needs a value", case.display()));
        match name {
            "--modelcar-mode" => {
                inputs.modelcar_mode = value
                    .parse()
                    .unwrap_or_else(|e| panic!("{}: {e}", case.display()))
            }
            // Read with the config, in `config_for`.
            "--kserve-version" => {}
            "--security-profile" => {
                inputs.security_profile = value
                    .parse()
                    .unwrap_or_else(|e| panic!("{}: {e}", case.display()))
            }
            other => panic!(
                "{}: args: the golden runner does not know {other}",
                case.display()
            ),
        }
    }
}

/// The case's `--kserve-version`, as the CLI parses it.
fn release_flag(case: &Path) -> Option<Release> {
    let flags = flags(case);
    let at = flags.iter().position(|f| f == "--kserve-version")?;
    let value = flags.get(at + 1)?;
    Some(
        value
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", case.display())),
    )
}

/// The case's config and settings as the server would load them under
/// `release` (the case's own: [`release_flag`]), or why it refuses the
/// config.
fn config_for(case: &Path, release: Option<Release>) -> Result<(Config, Settings), String> {
    let settings = case_file(case, "settings.yaml");
    let settings = files::load_settings(settings.as_deref()).map_err(|e| e.to_string())?;
    let config = case_file(case, "config.yaml");
    files::load_config(config.as_deref(), &settings, release)
        // Without the path, which the golden cannot hold.
        .map_err(|e| match e {
            files::LoadError::Invalid { source, .. } => source.to_string(),
            other => other.to_string(),
        })
        .map(|config| (config, settings))
}

fn env_for(case: &Path, release: Option<Release>) -> Inputs {
    let (config, settings) = config_for(case, release).unwrap_or_else(|e| panic!("{e}"));
    let mut inputs = Inputs::new(config);
    inputs.model_volume = settings.model_volume;
    if let Some(objects) = case_file(case, "cluster.yaml") {
        let file = std::fs::File::open(&objects).expect("readable cluster.yaml");
        inputs.cluster = kserve_injector::lookups::load_objects(&mut std::io::BufReader::new(file))
            .unwrap_or_else(|e| panic!("{}: {e}", objects.display()))
            .data;
    }
    apply_flags(case, &mut inputs);
    inputs
}

enum Outcome {
    Pod(Value),
    Denied(String),
}

fn cli_command(case: &Path, format: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kserve-injector"));
    cmd.arg("mutate").arg("-o").arg(format).args(flags(case));
    if let Some(config) = case_file(case, "config.yaml") {
        cmd.arg("--config").arg(config);
    }
    if let Some(objects) = case_file(case, "cluster.yaml") {
        cmd.arg("--objects").arg(objects);
    }
    if let Some(settings) = case_file(case, "settings.yaml") {
        cmd.arg("--config-file").arg(settings);
    }
    cmd.arg(case_file(case, "input.yaml").expect("a case has an input"));
    cmd
}

fn run_cli(case: &Path) -> Outcome {
    let out = cli_command(case, "json").output().expect("binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => Outcome::Pod(serde_json::from_slice(&out.stdout).expect("CLI prints JSON")),
        Some(1) => Outcome::Denied(stderr.trim_start_matches("denied: ").to_string()),
        code => panic!("{}: CLI exited {code:?}: {stderr}", case.display()),
    }
}

fn namespace_of(pod: &Value) -> String {
    pod.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string()
}

fn review_request(pod: &Value, api_version: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "6b9c3a70-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": namespace_of(pod),
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "dryRun": false
        }
    }))
    .expect("serialisable")
}

/// Runs the AdmissionReview path and applies the returned patch to `pod`.
fn run_review(pod: &Value, inputs: &Inputs, api_version: &str) -> Outcome {
    let reviewed = admission::prepare(&review_request(pod, api_version), admission::Mode::Mutate)
        .and_then(|prepared| prepared.answer(inputs))
        .expect("valid review");
    let response: Value = serde_json::from_slice(&reviewed.body).expect("JSON response");
    assert_eq!(response["apiVersion"], api_version);
    assert_eq!(
        response["response"]["uid"],
        "6b9c3a70-0000-4000-8000-000000000001"
    );
    if response["response"]["allowed"] != true {
        return Outcome::Denied(
            response["response"]["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
    }
    let mut patched = pod.clone();
    if let Some(encoded) = response["response"]["patch"].as_str() {
        assert_eq!(response["response"]["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64 patch");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("JSON Patch");
        json_patch::patch(&mut patched, &patch).expect("patch applies to the request object");
    } else {
        assert!(response["response"].get("patchType").is_none());
    }
    Outcome::Pod(patched)
}

fn check_case(case: &Path) -> Result<(), String> {
    let mut name = case
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    if let Some(release) = release_of(case) {
        name = format!("{release}/{name}");
    }
    if let Err(refused) = config_for(case, release_flag(case)) {
        return check_config_refused(case, &name, &refused);
    }
    let input = yaml(&case_file(case, "input.yaml").expect("a case has an input"));
    let env = env_for(case, release_flag(case));
    let expected_pod = case.join("expected.yaml");
    let expected_error = case.join("expected-error.txt");
    let cli = run_cli(case);
    if regenerate() {
        // A golden whose value still holds keeps its file (and its layout).
        let stale = match &cli {
            Outcome::Pod(pod) => !expected_pod.is_file() || &yaml(&expected_pod) != pod,
            Outcome::Denied(msg) => {
                std::fs::read_to_string(&expected_error).map_or(true, |text| text.trim() != msg)
            }
        };
        if stale {
            let _ = std::fs::remove_file(&expected_pod);
            let _ = std::fs::remove_file(&expected_error);
            match &cli {
                Outcome::Pod(pod) => std::fs::write(&expected_pod, to_yaml(pod)),
                Outcome::Denied(msg) => std::fs::write(&expected_error, format!("{msg}\n")),
            }
            .expect("golden written");
        }
    }
    let golden = if expected_pod.is_file() {
        Outcome::Pod(yaml(&expected_pod))
    } else if expected_error.is_file() {
        Outcome::Denied(
            std::fs::read_to_string(&expected_error)
                .expect("readable")
                .trim()
                .to_string(),
        )
    } else {
        return Err(format!(
            "{name}: no expected.yaml or expected-error.txt (run with REGENERATE_GOLDENS=1)"
        ));
    };
    let cli_only = case.join("cli-only").is_file();
    if cli_only {
        check_stdout(case, &name)?;
    }
    let mut outcomes = vec![("CLI", cli)];
    if !cli_only {
        outcomes.push((
            "AdmissionReview v1",
            run_review(&input, &env, "admission.k8s.io/v1"),
        ));
        outcomes.push((
            "AdmissionReview v1beta1",
            run_review(&input, &env, "admission.k8s.io/v1beta1"),
        ));
    }
    for (path, outcome) in outcomes {
        match (&golden, &outcome) {
            (Outcome::Pod(want), Outcome::Pod(got)) if want == got => {}
            (Outcome::Denied(want), Outcome::Denied(got)) if want == got => {}
            (Outcome::Pod(want), Outcome::Pod(got)) => {
                return Err(format!(
                    "{name}: {path} output differs from the golden (stale? REGENERATE_GOLDENS=1 rewrites it)\n--- golden\n{}\n--- got\n{}",
                    to_yaml(want),
                    to_yaml(got)
                ))
            }
            (Outcome::Denied(want), Outcome::Denied(got)) => {
                return Err(format!("{name}: {path} denied with {got:?}, golden says {want:?}"))
            }
            (Outcome::Pod(_), Outcome::Denied(got)) => return Err(format!("{name}: {path} denied: {got}")),
            (Outcome::Denied(want), Outcome::Pod(_)) => {
                return Err(format!("{name}: {path} allowed, golden expects denial {want:?}"))
            }
        }
    }
    // Reinvocation: our own output goes through again unchanged.
    if let (Outcome::Pod(want), false) = (&golden, cli_only) {
        match run_review(want, &env, "admission.k8s.io/v1") {
            Outcome::Pod(again) if &again == want => {}
            Outcome::Pod(_) => return Err(format!("{name}: a second pass changed the pod")),
            Outcome::Denied(msg) => {
                return Err(format!(
                    "{name}: a second pass denied our own output: {msg}"
                ))
            }
        }
    }
    Ok(())
}

/// A config the selected release refuses (KServe then fails every pod it
/// is asked about; our server does not load it, `mutate` exits 2): the
/// golden `expected-config-error.txt` is the reason, which the CLI prints.
fn check_config_refused(case: &Path, name: &str, refused: &str) -> Result<(), String> {
    let golden = case.join("expected-config-error.txt");
    if regenerate() {
        std::fs::write(&golden, format!("{refused}\n")).expect("golden written");
    }
    let want = std::fs::read_to_string(&golden).map_err(|_| {
        format!(
            "{name}: the config is refused ({refused}) and there is no expected-config-error.txt"
        )
    })?;
    let out = cli_command(case, "json").output().expect("binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(2) || !stderr.contains(want.trim()) {
        return Err(format!(
            "{name}: expected the config refused with {:?}, the CLI exited {:?}: {stderr}",
            want.trim(),
            out.status.code()
        ));
    }
    if refused != want.trim() {
        return Err(format!(
            "{name}: config refused with {refused:?}, golden says {:?}",
            want.trim()
        ));
    }
    Ok(())
}

/// `mutate -o yaml`'s exact output against `expected-stdout.yaml`.
fn check_stdout(case: &Path, name: &str) -> Result<(), String> {
    let out = cli_command(case, "yaml").output().expect("binary runs");
    if !out.status.success() {
        return Err(format!(
            "{name}: mutate -o yaml failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let golden = case.join("expected-stdout.yaml");
    if regenerate() {
        std::fs::write(&golden, &out.stdout).expect("golden written");
    }
    let want = std::fs::read(&golden).map_err(|e| format!("{name}: {}: {e}", golden.display()))?;
    if want != out.stdout {
        return Err(format!(
            "{name}: mutate -o yaml differs from expected-stdout.yaml byte for byte\n--- golden\n{}\n--- got\n{}",
            String::from_utf8_lossy(&want),
            String::from_utf8_lossy(&out.stdout)
        ));
    }
    Ok(())
}

/// A golden: the pod, the denial, or the refused config.
#[derive(Debug, PartialEq)]
enum Golden {
    Pod(Value),
    Denied(String),
    ConfigRefused(String),
}

fn golden_of(case: &Path) -> Option<Golden> {
    let text = |name: &str| {
        let text = std::fs::read_to_string(case.join(name)).ok()?;
        Some(text.trim().to_string())
    };
    let pod = case.join("expected.yaml");
    if pod.is_file() {
        return Some(Golden::Pod(yaml(&pod)));
    }
    (text("expected-error.txt").map(Golden::Denied))
        .or_else(|| text("expected-config-error.txt").map(Golden::ConfigRefused))
}

/// What `case`'s input gives under `release`, in process.
fn outcome_under(case: &Path, release: Release) -> Golden {
    if let Err(refused) = config_for(case, Some(release)) {
        return Golden::ConfigRefused(refused);
    }
    let input = yaml(&case_file(case, "input.yaml").expect("a case has an input"));
    match run_review(&input, &env_for(case, Some(release)), "admission.k8s.io/v1") {
        Outcome::Pod(pod) => Golden::Pod(pod),
        Outcome::Denied(message) => Golden::Denied(message),
    }
}

/// The releases of `release`'s line older than it, newest first.
fn older_in_line(release: Release) -> Vec<Release> {
    let line = release.as_str().rsplit_once('.').map_or("", |(l, _)| l);
    let mut older: Vec<Release> = (Release::SUPPORTED.iter().copied())
        .filter(|r| *r < release && r.as_str().rsplit_once('.').map(|(l, _)| l) == Some(line))
        .collect();
    older.reverse();
    older
}

#[test]
fn patch_releases_give_their_lines_goldens_unless_they_have_their_own() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let releases = root.join("releases");
    let patches: Vec<Release> = (Release::SUPPORTED.iter().copied())
        .filter(|r| !older_in_line(*r).is_empty())
        .collect();
    assert_eq!(
        patches.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        ["v0.15.1", "v0.15.2", "v0.17.1", "v0.18.1"]
    );
    let mut names: Vec<String> = (cases().iter())
        .filter(|c| !c.join("cli-only").is_file())
        .filter_map(|c| Some(c.file_name()?.to_str()?.to_string()))
        .collect();
    names.sort();
    names.dedup();
    let (mut checked, mut failures) = (0, Vec::new());
    for release in &patches {
        for name in &names {
            let own = releases.join(release.as_str()).join(name);
            if own.is_dir() {
                continue;
            }
            // The newest older tag's golden; else what the line's first
            // tag gives the HEAD case, which has no golden of its own there.
            let older = older_in_line(*release);
            let golden = (older.iter())
                .map(|o| (releases.join(o.as_str()).join(name), o.as_str()))
                .find(|(dir, _)| dir.is_dir());
            let (baseline, of, want) = match golden {
                Some((dir, of)) => {
                    let want =
                        golden_of(&dir).unwrap_or_else(|| panic!("{}: no golden", dir.display()));
                    (dir, format!("{of}'s golden"), want)
                }
                None if root.join(name).is_dir() => {
                    let first = *older.last().expect("a patch release has an older tag");
                    let want = outcome_under(&root.join(name), first);
                    (root.join(name), format!("what {first} gives"), want)
                }
                None => continue,
            };
            let got = outcome_under(&baseline, *release);
            checked += 1;
            if got == want {
                continue;
            }
            if regenerate() {
                let base = match baseline.strip_prefix(&releases) {
                    Ok(tag_and_case) => format!("../../{}", tag_and_case.display()),
                    Err(_) => format!("../../../{name}"),
                };
                std::fs::create_dir_all(&own).expect("case dir");
                std::fs::write(own.join("same-input-as"), format!("{base}\n")).expect("written");
                let (file, text) = match &got {
                    Golden::Pod(pod) => ("expected.yaml", to_yaml(pod)),
                    Golden::Denied(m) => ("expected-error.txt", format!("{m}\n")),
                    Golden::ConfigRefused(m) => ("expected-config-error.txt", format!("{m}\n")),
                };
                std::fs::write(own.join(file), text).expect("golden written");
            }
            failures.push(format!(
                "{release}/{name}: differs from {of} and has no golden of its own (REGENERATE_GOLDENS=1 writes fixtures/releases/{release}/{name}/)\n--- {of}\n{want:?}\n--- {release}\n{got:?}"
            ));
        }
    }
    println!(
        "{checked} cases held against their line's goldens under {}",
        patches
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn golden_fixtures() {
    let cases = cases();
    assert!(!cases.is_empty(), "no fixtures found");
    let failures: Vec<String> = cases.iter().filter_map(|c| check_case(c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
    println!(
        "{} golden fixtures passed through CLI, AdmissionReview v1 and v1beta1",
        cases.len()
    );
}
